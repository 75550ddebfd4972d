"""Seq2SeqBatcher: coverage per epoch, skipping, shapes, token budgets, resuming, sharding, packing."""

import json
from unittest import mock

import numpy as np
import pytest

from attnjax.data import pipeline
from attnjax.data.pipeline import Seq2SeqBatcher
from attnjax.models.interface import BOS_ID, EOS_ID, PAD_ID

MAX_SRC, MAX_TGT = 20, 15


def _examples(n, seed=0, max_src=MAX_SRC, max_tgt=MAX_TGT - 1):
  """Random examples whose first source token (1000 + i) and first target token (5000 + i) name example i."""
  rng = np.random.default_rng(seed)
  out = []
  for i in range(n):
    ls, lt = rng.integers(1, max_src + 1), rng.integers(1, max_tgt + 1)
    out.append(([1000 + i] + rng.integers(3, 60, size=ls - 1).tolist(),
                np.concatenate([[5000 + i], rng.integers(3, 60, size=lt - 1)]).astype(np.int32)))
  return out


def _take(batcher, n):
  return [next(batcher) for _ in range(n)]


def _assert_batches_equal(a, b):
  assert len(a) == len(b)
  for x, y in zip(a, b):
    assert x.keys() == y.keys()
    for key in x:
      np.testing.assert_array_equal(x[key], y[key], err_msg=key)
      assert x[key].dtype == y[key].dtype


def _check_unpacked_row(batch, r, src, tgt):
  """Row r holds (src, tgt): content, BOS/EOS shift, masks and padding."""
  ls, lt = len(src), len(tgt) + 1
  np.testing.assert_array_equal(batch["src"][r, :ls], src)
  np.testing.assert_array_equal(batch["tgt_in"][r, :lt], np.concatenate([[BOS_ID], tgt]))
  np.testing.assert_array_equal(batch["tgt_out"][r, :lt], np.concatenate([tgt, [EOS_ID]]))
  np.testing.assert_array_equal(batch["tgt_in"][r, 1:lt], batch["tgt_out"][r, :lt - 1])
  assert not batch["src"][r, ls:].any() and not batch["tgt_in"][r, lt:].any() and not batch["tgt_out"][r, lt:].any()
  np.testing.assert_array_equal(batch["src_mask"][r], np.arange(batch["src"].shape[1]) < ls)
  np.testing.assert_array_equal(batch["tgt_mask"][r], np.arange(batch["tgt_in"].shape[1]) < lt)


def _packed_segments(batch, r):
  """Row r of a packed batch -> [(src, tgt)] per segment, checking segment ids, positions, shift and masks."""
  out = []
  for side in ("src", "tgt"):
    seg, pos = batch[f"{side}_segment_ids"][r], batch[f"{side}_positions"][r]
    n = int((seg > 0).sum())
    assert not seg[n:].any() and not pos[n:].any()  # real tokens first, then padding only
    np.testing.assert_array_equal(batch[f"{side}_mask"][r], seg > 0)
    starts = np.flatnonzero(np.diff(np.concatenate([[0], seg[:n]])))  # where the segment id changes
    np.testing.assert_array_equal(seg[starts], np.arange(1, len(starts) + 1))  # 1, 2, 3, ... in order
    for k, start in enumerate(starts):
      end = starts[k + 1] if k + 1 < len(starts) else n
      np.testing.assert_array_equal(pos[start:end], np.arange(end - start))  # positions restart per segment
    out.append([(start, starts[k + 1] if k + 1 < len(starts) else n) for k, start in enumerate(starts)])
  src_spans, tgt_spans = out
  assert len(src_spans) == len(tgt_spans)
  segments = []
  for (s0, s1), (t0, t1) in zip(src_spans, tgt_spans):
    tgt_in, tgt_out = batch["tgt_in"][r, t0:t1], batch["tgt_out"][r, t0:t1]
    assert tgt_in[0] == BOS_ID and tgt_out[-1] == EOS_ID
    np.testing.assert_array_equal(tgt_in[1:], tgt_out[:-1])
    segments.append((batch["src"][r, s0:s1], tgt_out[:-1]))
  return segments


# -------------------------------------------------------------------------------------------- unpacked batches


@pytest.mark.parametrize("kwargs", [dict(batch_size=8), dict(max_tokens=256, bucket_boundaries=[6, 12]),
                                    dict(batch_size=5, bucket_boundaries=[4, 8, 16], shuffle=False)])
def test_every_kept_example_appears_exactly_once_per_epoch_with_its_content(kwargs):
  examples = _examples(203)
  batcher = Seq2SeqBatcher(examples, max_src_len=MAX_SRC, max_tgt_len=MAX_TGT, **kwargs)
  for epoch in range(2):
    seen = []
    for batch in batcher.iterate_epoch(epoch):
      for r, i in enumerate(batch["example_index"].tolist()):
        if i < 0:  # a filler row: all padding
          assert not batch["src"][r].any() and not batch["src_mask"][r].any() and not batch["tgt_mask"][r].any()
          continue
        _check_unpacked_row(batch, r, *examples[i])
        seen.append(i)
    assert sorted(seen) == list(range(len(examples)))


def test_tgt_in_is_bos_plus_target_and_tgt_out_is_target_plus_eos():
  examples = [([7, 8, 9], [4, 5, 6]), ([7], [4])]
  batch = next(Seq2SeqBatcher(examples, batch_size=2, max_src_len=4, max_tgt_len=4, shuffle=False))
  np.testing.assert_array_equal(batch["src"], [[7, 8, 9, 0, 0, 0, 0, 0], [7, 0, 0, 0, 0, 0, 0, 0]])
  np.testing.assert_array_equal(batch["tgt_in"], [[BOS_ID, 4, 5, 6, 0, 0, 0, 0], [BOS_ID, 4, 0, 0, 0, 0, 0, 0]])
  np.testing.assert_array_equal(batch["tgt_out"], [[4, 5, 6, EOS_ID, 0, 0, 0, 0], [4, EOS_ID, 0, 0, 0, 0, 0, 0]])
  np.testing.assert_array_equal(batch["tgt_mask"].sum(1), [4, 2])
  np.testing.assert_array_equal(batch["src_mask"].sum(1), [3, 1])
  assert batch["src"].dtype == batch["tgt_in"].dtype == batch["tgt_out"].dtype == np.int32
  assert batch["src_mask"].dtype == batch["tgt_mask"].dtype == np.bool_


def test_skipped_counts_for_too_long_and_empty_examples_are_logged():
  examples = [
      ([3, 4, 5, 6, 7], [3, 4, 5]),  # kept: source at max_src_len, target + EOS at max_tgt_len
      ([3], [3]),  # kept
      ([3] * 6, [3]),  # too long source
      ([3], [3, 4, 5, 6]),  # too long target once EOS is added
      ([3] * 6, [3] * 9),  # too long on both sides: counted once
      ([], [3]),  # empty source
      ([3], []),  # empty target
      ([], [3] * 9),  # empty and too long: counts as empty
  ]
  with mock.patch.object(pipeline.logging, "warning") as warning:
    batcher = Seq2SeqBatcher(examples, batch_size=2, max_src_len=5, max_tgt_len=4, shuffle=False)
  assert (batcher.num_skipped_too_long, batcher.num_skipped_empty, batcher.num_examples) == (3, 3, 2)
  warning.assert_called_once()
  assert warning.call_args.args[1:] == (6, 8, 3, 5, 4, 3)
  assert sorted(next(batcher)["example_index"].tolist()) == [0, 1]
  with pytest.raises(ValueError, match="no example left: all 2 were skipped"):
    Seq2SeqBatcher([([], [3]), ([3] * 9, [3])], batch_size=2, max_src_len=5, max_tgt_len=4)


@pytest.mark.parametrize("pad_to_multiple", [8, 3])
def test_shapes_are_multiples_of_pad_to_multiple_with_one_shape_per_bucket(pad_to_multiple):
  examples = _examples(300, seed=1)
  bounds = [5, 10, 14]
  batcher = Seq2SeqBatcher(examples, batch_size=16, max_src_len=MAX_SRC, max_tgt_len=MAX_TGT,
                           bucket_boundaries=bounds, pad_to_multiple=pad_to_multiple)
  assert batcher.bucket_boundaries == (5, 10, 14, 20)
  shapes = set()
  for batch in batcher.iterate_epoch(0):
    b, s = batch["src"].shape
    t = batch["tgt_in"].shape[1]
    assert s % pad_to_multiple == 0 and t % pad_to_multiple == 0 and b == 16
    assert batch["tgt_out"].shape == batch["tgt_mask"].shape == (b, t) and batch["src_mask"].shape == (b, s)
    index = batch["example_index"][batch["example_index"] >= 0]
    lengths = [max(len(examples[i][0]), len(examples[i][1]) + 1) for i in index]
    buckets = set(np.searchsorted(batcher.bucket_boundaries, lengths).tolist())  # smallest bound that fits
    assert len(buckets) == 1
    spec = batcher.bucket_specs[buckets.pop()]
    assert (s, t) == (spec.src_length, spec.tgt_length)
    shapes.add((b, s, t))
  assert len(shapes) <= len(batcher.bucket_specs)


def test_max_tokens_bounds_padded_positions_per_batch():
  batcher = Seq2SeqBatcher(_examples(400, seed=2), max_tokens=200, max_src_len=MAX_SRC, max_tgt_len=MAX_TGT,
                           bucket_boundaries=[4, 8, 12, 16])
  sizes = set()
  for batch in batcher.iterate_epoch(0):
    b, s = batch["src"].shape
    t = batch["tgt_in"].shape[1]
    assert b * max(s, t) <= 200
    sizes.add(b)
  assert len(sizes) > 1  # shorter buckets get more rows
  # Bounds 4, 8, 12, 16, 20 pad to max(S, T) = 8, 8, 16, 16, 24 (S capped at 20, T at 15, then rounded up to 8).
  assert [spec.batch_size for spec in batcher.bucket_specs] == [25, 25, 12, 12, 8]


def test_last_partial_batch_is_filled_with_padding_rows_or_dropped():
  examples = _examples(21, seed=3)
  kept = Seq2SeqBatcher(examples, batch_size=8, max_src_len=MAX_SRC, max_tgt_len=MAX_TGT)
  batches = list(kept.iterate_epoch(0))
  assert len(batches) == 3 and all(b["src"].shape[0] == 8 for b in batches)
  assert sum((b["example_index"] < 0).sum() for b in batches) == 3
  dropped = Seq2SeqBatcher(examples, batch_size=8, max_src_len=MAX_SRC, max_tgt_len=MAX_TGT, drop_remainder=True)
  batches = list(dropped.iterate_epoch(0))
  assert len(batches) == 2 and all((b["example_index"] >= 0).all() for b in batches)
  # The dropped examples change from epoch to epoch (the bucket is reshuffled).
  assert ({i for b in dropped.iterate_epoch(0) for i in b["example_index"]}
          != {i for b in dropped.iterate_epoch(1) for i in b["example_index"]})


def test_epoch_order_is_seeded_and_reshuffled_each_epoch():
  examples = _examples(100)

  def order(seed, epoch):
    batcher = Seq2SeqBatcher(examples, batch_size=10, max_src_len=MAX_SRC, max_tgt_len=MAX_TGT, seed=seed)
    return np.concatenate([b["example_index"] for b in batcher.iterate_epoch(epoch)]).tolist()

  assert order(0, 0) == order(0, 0)
  assert order(0, 0) != order(0, 1)
  assert order(0, 0) != order(1, 0)


def test_without_shuffle_order_is_buckets_then_input_order():
  examples = _examples(50)
  batcher = Seq2SeqBatcher(examples, batch_size=4, max_src_len=MAX_SRC, max_tgt_len=MAX_TGT, shuffle=False,
                           bucket_boundaries=[10], drop_remainder=True)
  got = np.concatenate([b["example_index"] for b in batcher.iterate_epoch(0)]).tolist()
  short = [i for i, (s, t) in enumerate(examples) if max(len(s), len(t) + 1) <= 10]
  long = [i for i in range(50) if i not in short]
  assert got == short[:len(short) // 4 * 4] + long[:len(long) // 4 * 4]
  assert got == np.concatenate([b["example_index"] for b in batcher.iterate_epoch(3)]).tolist()


# -------------------------------------------------------------------------------------------------- resuming

RESUME_CONFIGS = {
    "bucketed": dict(max_tokens=160, bucket_boundaries=[6, 12]),
    "drop_remainder": dict(batch_size=7, drop_remainder=True),
    "packed": dict(batch_size=4, pack=True),
}


@pytest.mark.parametrize("name", list(RESUME_CONFIGS))
def test_restore_after_k_batches_gives_identical_next_batches_across_epochs(name):
  examples = _examples(60, seed=4)
  make = lambda: Seq2SeqBatcher(examples, max_src_len=MAX_SRC, max_tgt_len=MAX_TGT, seed=5, **RESUME_CONFIGS[name])
  reference = make()
  per_epoch = reference.num_batches(0)
  states, batches = [], []
  for _ in range(3 * per_epoch):  # packing may give epochs of different lengths: this spans >= 2 boundaries
    states.append(reference.state())
    batches.append(next(reference))
  assert any(s["epoch"] == 2 for s in states)
  # Just before, at and after epoch boundaries, plus the start.
  boundaries = [k for k in range(1, len(states)) if states[k]["epoch"] != states[k - 1]["epoch"]]
  for k in sorted({0, 1, *boundaries, *(k - 1 for k in boundaries), *(k + 1 for k in boundaries)}):
    resumed = make()
    resumed.restore(json.loads(json.dumps(states[k])))  # through JSON, as a checkpoint would
    assert resumed.state() == states[k]
    n = min(4, len(batches) - k)
    _assert_batches_equal(_take(resumed, n), batches[k:k + n])


def test_iteration_equals_iterate_epoch_in_sequence_and_iterate_epoch_keeps_state():
  batcher = Seq2SeqBatcher(_examples(40), batch_size=8, max_src_len=MAX_SRC, max_tgt_len=MAX_TGT)
  expected = list(batcher.iterate_epoch(0)) + list(batcher.iterate_epoch(1))
  assert batcher.state()["epoch"] == 0 and batcher.state()["position"] == 0
  _assert_batches_equal(_take(batcher, len(expected)), expected)
  assert (batcher.state()["epoch"], batcher.state()["position"]) == (2, 0)


def test_state_is_json_serialisable_and_restore_rejects_mismatches():
  examples = _examples(30)
  batcher = Seq2SeqBatcher(examples, batch_size=4, max_src_len=MAX_SRC, max_tgt_len=MAX_TGT, seed=1)
  next(batcher)
  state = json.loads(json.dumps(batcher.state()))
  assert {k: state[k] for k in ("seed", "epoch", "position")} == {"seed": 1, "epoch": 0, "position": 1}
  with pytest.raises(ValueError, match="seed=1 but this batcher has seed=2"):
    Seq2SeqBatcher(examples, batch_size=4, max_src_len=MAX_SRC, max_tgt_len=MAX_TGT, seed=2).restore(state)
  with pytest.raises(ValueError, match="fingerprint"):
    Seq2SeqBatcher(examples, batch_size=5, max_src_len=MAX_SRC, max_tgt_len=MAX_TGT, seed=1).restore(state)
  with pytest.raises(ValueError, match="fingerprint"):
    Seq2SeqBatcher(examples[:-1], batch_size=4, max_src_len=MAX_SRC, max_tgt_len=MAX_TGT, seed=1).restore(state)
  with pytest.raises(ValueError, match="keys"):
    batcher.restore({"epoch": 0})
  with pytest.raises(ValueError, match="past the"):
    batcher.restore({**state, "position": 999})


# -------------------------------------------------------------------------------------------------- sharding


@pytest.mark.parametrize("kwargs", [dict(batch_size=8, bucket_boundaries=[8]), dict(batch_size=8, pack=True),
                                    dict(max_tokens=200, batch_multiple=4, bucket_boundaries=[8])])
def test_shards_concatenate_to_the_unsharded_global_batch(kwargs):
  examples = _examples(90, seed=6)
  make = lambda n, i: Seq2SeqBatcher(examples, max_src_len=MAX_SRC, max_tgt_len=MAX_TGT, num_shards=n,
                                     shard_index=i, seed=3, **kwargs)
  unsharded = make(1, 0)
  steps = unsharded.num_batches(0) + 2  # into the second epoch
  global_batches = _take(unsharded, steps)
  for n in (2, 4):
    shards = [make(n, i) for i in range(n)]
    assert all(s.state() == make(1, 0).state() for s in shards)  # one state, valid on every shard
    local = [_take(s, steps) for s in shards]
    for step in range(steps):
      assert all(local[i][step]["src"].shape[0] == global_batches[step]["src"].shape[0] // n for i in range(n))
      joined = {k: np.concatenate([local[i][step][k] for i in range(n)]) for k in global_batches[step]}
      _assert_batches_equal([joined], [global_batches[step]])


def test_sharding_arguments_are_checked():
  examples = _examples(10)
  with pytest.raises(ValueError, match="shard_index must be in"):
    Seq2SeqBatcher(examples, batch_size=8, max_src_len=MAX_SRC, max_tgt_len=MAX_TGT, num_shards=2, shard_index=2)
  with pytest.raises(ValueError, match="batch_size=6 must be a multiple of num_shards=4"):
    Seq2SeqBatcher(examples, batch_size=6, max_src_len=MAX_SRC, max_tgt_len=MAX_TGT, num_shards=4)
  with pytest.raises(ValueError, match="batch_multiple=2 must be a multiple of num_shards=4"):
    Seq2SeqBatcher(examples, max_tokens=512, batch_multiple=2, max_src_len=MAX_SRC, max_tgt_len=MAX_TGT,
                   num_shards=4)


# --------------------------------------------------------------------------------------------------- packing


def test_packing_segment_ids_positions_and_content_with_no_example_split():
  examples = _examples(150, seed=7)
  batcher = Seq2SeqBatcher(examples, batch_size=8, max_src_len=MAX_SRC, max_tgt_len=MAX_TGT, pack=True,
                           pack_length=30)
  assert batcher.bucket_specs[0].src_length == 32  # 30 rounded up to pad_to_multiple
  for epoch in range(2):
    seen, rows, segments = [], 0, 0
    for batch in batcher.iterate_epoch(epoch):
      assert set(batch) == {"src", "tgt_in", "tgt_out", "src_mask", "tgt_mask", "src_segment_ids",
                            "tgt_segment_ids", "src_positions", "tgt_positions"}
      assert batch["src"].shape == batch["tgt_in"].shape == (8, 32)
      for r in range(8):
        for src, tgt in _packed_segments(batch, r):
          i = int(src[0]) - 1000  # the whole example sits in this one segment
          np.testing.assert_array_equal(src, examples[i][0])
          np.testing.assert_array_equal(tgt, examples[i][1])
          seen.append(i)
          segments += 1
        rows += batch["src_segment_ids"][r].any()
    assert sorted(seen) == list(range(len(examples)))
    assert segments > rows  # rows do hold several examples


def test_packing_is_first_fit_in_example_order():
  # (source length, target length + EOS): A (5, 4), B (4, 4), C (3, 3), D (2, 2); rows of 8.
  examples = [([11] * 5, [21] * 3), ([12] * 4, [22] * 3), ([13] * 3, [23] * 2), ([14] * 2, [24] * 1)]
  first_fit = next(Seq2SeqBatcher(examples, batch_size=2, max_src_len=8, max_tgt_len=8, pack=True, shuffle=False))
  # C goes back into A's row (first fit), not into B's (next fit); D then fits B's row.
  np.testing.assert_array_equal(first_fit["src"], [[11] * 5 + [13] * 3, [12] * 4 + [14] * 2 + [0] * 2])
  np.testing.assert_array_equal(first_fit["src_segment_ids"], [[1] * 5 + [2] * 3, [1] * 4 + [2] * 2 + [0] * 2])
  np.testing.assert_array_equal(first_fit["tgt_segment_ids"], [[1] * 4 + [2] * 3 + [0], [1] * 4 + [2] * 2 + [0] * 2])
  np.testing.assert_array_equal(first_fit["tgt_positions"], [[0, 1, 2, 3, 0, 1, 2, 0], [0, 1, 2, 3, 0, 1, 0, 0]])
  np.testing.assert_array_equal(first_fit["tgt_in"], [[BOS_ID, 21, 21, 21, BOS_ID, 23, 23, 0],
                                                      [BOS_ID, 22, 22, 22, BOS_ID, 24, 0, 0]])
  np.testing.assert_array_equal(first_fit["tgt_out"], [[21, 21, 21, EOS_ID, 23, 23, EOS_ID, 0],
                                                       [22, 22, 22, EOS_ID, 24, EOS_ID, 0, 0]])
  # With one row per batch only one row is open at a time: A's row closes when B arrives.
  one_row = Seq2SeqBatcher(examples, batch_size=1, max_src_len=8, max_tgt_len=8, pack=True, shuffle=False)
  rows = [b["src"][0] for b in one_row.iterate_epoch(0)]
  np.testing.assert_array_equal(rows, [[11] * 5 + [0] * 3, [12] * 4 + [13] * 3 + [0], [14] * 2 + [0] * 6])


def test_packing_arguments_are_checked():
  examples = _examples(10)
  with pytest.raises(ValueError, match="pack_length=10 must be >="):
    Seq2SeqBatcher(examples, batch_size=2, max_src_len=MAX_SRC, max_tgt_len=MAX_TGT, pack=True, pack_length=10)
  with pytest.raises(ValueError, match="only used with pack=True"):
    Seq2SeqBatcher(examples, batch_size=2, max_src_len=MAX_SRC, max_tgt_len=MAX_TGT, pack_length=32)


# ------------------------------------------------------------------------------------------------ arguments


def test_invalid_arguments_raise_clear_errors():
  examples = _examples(10)
  common = dict(max_src_len=MAX_SRC, max_tgt_len=MAX_TGT)
  with pytest.raises(ValueError, match="exactly one of batch_size and max_tokens"):
    Seq2SeqBatcher(examples, **common)
  with pytest.raises(ValueError, match="exactly one of batch_size and max_tokens"):
    Seq2SeqBatcher(examples, batch_size=2, max_tokens=100, **common)
  with pytest.raises(ValueError, match="max_tokens=10 is too small"):
    Seq2SeqBatcher(examples, max_tokens=10, **common)
  with pytest.raises(ValueError, match="strictly increasing"):
    Seq2SeqBatcher(examples, batch_size=2, bucket_boundaries=[8, 4], **common)
  with pytest.raises(ValueError, match="source of example 1 holds id 0"):
    Seq2SeqBatcher([([3], [3]), ([3, PAD_ID], [3])], batch_size=2, **common)
  with pytest.raises(TypeError, match=r"examples\[0\] must be a \(src_ids, tgt_ids\) pair"):
    Seq2SeqBatcher([[3, 4, 5]], batch_size=2, **common)
  with pytest.raises(RuntimeError, match="has no batch"):
    next(Seq2SeqBatcher(examples, batch_size=16, drop_remainder=True, **common))


def test_truncate_cuts_over_long_examples_as_see_et_al_instead_of_skipping_them():
  """Sources keep their first max_src_len tokens; a target longer than fits with its EOS keeps its first max_tgt_len
  tokens and gets no EOS; examples that fit are unchanged, and empty ones are still skipped."""
  examples = [(list(range(3, 13)), [3, 4, 5, 6, 7, 8]), ([3, 4], [5, 6]), ([], [3]), ([3] * 4, [4] * 5)]
  batcher = Seq2SeqBatcher(examples, batch_size=4, max_src_len=6, max_tgt_len=5, shuffle=False, truncate=True,
                           pad_to_multiple=1)
  assert (batcher.num_truncated, batcher.num_skipped_too_long, batcher.num_skipped_empty) == (2, 0, 1)
  batch = next(iter(batcher))
  rows = {int(i): r for r, i in enumerate(batch["example_index"]) if i >= 0}
  r = rows[0]
  assert batch["src"][r].tolist() == list(range(3, 9))
  assert batch["tgt_in"][r].tolist() == [BOS_ID, 3, 4, 5, 6]
  assert batch["tgt_out"][r].tolist() == [3, 4, 5, 6, 7]
  assert batch["tgt_mask"][r].all()
  r = rows[1]
  assert batch["tgt_out"][r].tolist()[:3] == [5, 6, EOS_ID] and batch["tgt_mask"][r].sum() == 3
  r = rows[3]  # 5 target tokens + EOS do not fit in 5: cut, no EOS
  assert batch["tgt_out"][r].tolist() == [4] * 5 and EOS_ID not in batch["tgt_out"][r].tolist()
  skipping = Seq2SeqBatcher(examples, batch_size=4, max_src_len=6, max_tgt_len=5, shuffle=False)
  assert (skipping.num_skipped_too_long, skipping.num_examples) == (2, 1)
  with pytest.raises(ValueError, match="truncate is not supported with pack=True"):
    Seq2SeqBatcher(examples, max_tokens=64, max_src_len=6, max_tgt_len=5, pack=True, truncate=True)
