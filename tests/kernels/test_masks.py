"""Mask constructors against masks written out by hand with NumPy."""

import numpy as np
import pytest

from attnjax.kernels import causal_mask, combine_masks, padding_mask, segment_mask


def test_padding_mask_is_outer_and_of_validities():
  q_valid = np.array([[1, 1, 0], [1, 0, 0]], bool)
  kv_valid = np.array([[1, 0, 1, 1], [1, 1, 0, 0]], bool)
  m = np.asarray(padding_mask(q_valid, kv_valid))
  assert m.shape == (2, 1, 3, 4)
  for b in range(2):
    for t in range(3):
      for s in range(4):
        assert m[b, 0, t, s] == (q_valid[b, t] and kv_valid[b, s])
  assert np.asarray(padding_mask(None, kv_valid)).shape == (2, 1, 1, 4)


def test_causal_mask_is_lower_triangular_and_offset_aligns_last_rows():
  np.testing.assert_array_equal(causal_mask(4)[0, 0], np.tril(np.ones((4, 4), bool)))
  np.testing.assert_array_equal(causal_mask(2, 5, offset=3)[0, 0], np.tril(np.ones((5, 5), bool))[3:])


def test_segment_mask_blocks_attention_across_packed_examples():
  ids = np.array([[1, 1, 2, 2, 2, 0]])
  m = np.asarray(segment_mask(ids, ids))[0, 0]
  expected = ids[0][:, None] == ids[0][None, :]
  np.testing.assert_array_equal(m, expected)
  assert not m[1, 2] and m[2, 4]


def test_combine_masks_ands_and_skips_none():
  a = np.array([[True, False], [True, True]])[None, None]
  b = np.array([[True, True], [False, True]])[None, None]
  np.testing.assert_array_equal(combine_masks(a, None, b), a & b)
  assert combine_masks(None, None) is None


def test_mask_errors_name_the_argument():
  with pytest.raises(ValueError, match="kv_valid"):
    padding_mask(None, np.ones(3, bool))
  with pytest.raises(ValueError, match="q_segment_ids"):
    segment_mask(np.ones(3), np.ones((1, 3)))
