"""Tests for Bahdanau additive attention against a loop-level NumPy reference."""

import math
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.test_util import check_grads

from attnjax.kernels.additive import (
    additive_attention,
    additive_scores,
    masked_softmax,
)
from tests.kernels import reference as ref_lib

B, T, S, DQ, DK, DV, A = 2, 3, 4, 5, 6, 7, 8

# --------------------------------------------------------------------------
# Independent float64 reference: a literal transcription of Bahdanau et al.
# (2015) Sec. 3.1 / App. A.1.2 with explicit loops over b, t, s.
# --------------------------------------------------------------------------


def np_additive_scores(query_proj, keys_proj, v):
  query_proj, keys_proj, v = (np.asarray(x, np.float64) for x in (query_proj, keys_proj, v))
  b_, t_, a_ = query_proj.shape
  s_ = keys_proj.shape[1]
  e = np.zeros((b_, t_, s_))
  for b in range(b_):
    for t in range(t_):
      for s in range(s_):
        total = 0.0
        for a in range(a_):
          total += v[a] * math.tanh(query_proj[b, t, a] + keys_proj[b, s, a])
        e[b, t, s] = total
  return e




def np_additive_attention(query, keys, values, w_query, w_keys, v, mask=None):
  query, keys, w_query, w_keys, v = (np.asarray(x, np.float64) for x in (query, keys, w_query, w_keys, v))
  b_, t_, _ = query.shape
  s_ = keys.shape[1]
  e = np.zeros((b_, t_, s_))
  for b in range(b_):
    for t in range(t_):
      for s in range(s_):
        hidden = np.tanh(query[b, t] @ w_query + keys[b, s] @ w_keys)
        e[b, t, s] = v @ hidden
  return ref_lib.masked_softmax_and_context(e, values, mask)


def make_inputs(seed=0, dtype=np.float32, scale=1.0):
  rng = np.random.default_rng(seed)
  arrays = dict(
      query=rng.normal(size=(B, T, DQ)),
      keys=rng.normal(size=(B, S, DK)),
      values=rng.normal(size=(B, S, DV)),
      w_query=rng.normal(size=(DQ, A)) / np.sqrt(DQ),
      w_keys=rng.normal(size=(DK, A)) / np.sqrt(DK),
      v=rng.normal(size=(A,)),
  )
  return {k: (scale * x).astype(dtype) for k, x in arrays.items()}


def padding_mask():
  # batch 0 keeps its first 3 keys, batch 1 keeps only the first one.
  lengths = np.array([3, 1])
  return np.arange(S)[None, :] < lengths[:, None]  # [B, S]


def call(inputs, mask=None):
  x = {k: jnp.asarray(a) for k, a in inputs.items()}
  return additive_attention(
      x["query"],
      x["keys"],
      x["values"],
      w_query=x["w_query"],
      w_keys=x["w_keys"],
      v=x["v"],
      mask=mask,
  )


def reference(inputs, mask3=None):
  return np_additive_attention(
      inputs["query"],
      inputs["keys"],
      inputs["values"],
      inputs["w_query"],
      inputs["w_keys"],
      inputs["v"],
      mask3,
  )


# --------------------------------------------------------------------------


def test_output_shapes_and_dtypes():
  context, weights = call(make_inputs())
  assert context.shape == (B, T, DV)
  assert weights.shape == (B, T, S)
  assert context.dtype == jnp.float32 and weights.dtype == jnp.float32


def test_additive_scores_match_numpy_transcription():
  rng = np.random.default_rng(1)
  qp = rng.normal(size=(B, T, A)).astype(np.float32)
  kp = rng.normal(size=(B, S, A)).astype(np.float32)
  v = rng.normal(size=(A,)).astype(np.float32)
  got = additive_scores(jnp.asarray(qp), jnp.asarray(kp), jnp.asarray(v))
  assert got.shape == (B, T, S)
  np.testing.assert_allclose(got, np_additive_scores(qp, kp, v), rtol=1e-5, atol=1e-5)


def test_additive_attention_matches_numpy_transcription():
  inputs = make_inputs()
  context, weights = call(inputs)
  ref_context, ref_weights = reference(inputs)
  np.testing.assert_allclose(weights, ref_weights, rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(context, ref_context, rtol=1e-5, atol=1e-5)


def test_weights_sum_to_one_without_mask():
  _, weights = call(make_inputs())
  np.testing.assert_allclose(weights.sum(-1), 1.0, rtol=1e-6)


def test_padding_mask_matches_numpy_transcription():
  inputs = make_inputs(2)
  mask2 = padding_mask()
  mask3 = np.broadcast_to(mask2[:, None, :], (B, T, S))
  context, weights = call(inputs, jnp.asarray(mask2))
  ref_context, ref_weights = reference(inputs, mask3)
  np.testing.assert_allclose(weights, ref_weights, rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(context, ref_context, rtol=1e-5, atol=1e-5)
  assert np.all(np.asarray(weights)[~mask3] == 0.0)


def test_padding_mask_equals_its_full_rank_broadcast():
  inputs = make_inputs(3)
  mask2 = padding_mask()
  mask3 = np.broadcast_to(mask2[:, None, :], (B, T, S))
  c2, w2 = call(inputs, jnp.asarray(mask2))
  c3, w3 = call(inputs, jnp.asarray(mask3))
  _, w1 = call(inputs, jnp.asarray(mask2[:, None, :]))  # [B, 1, S]
  np.testing.assert_array_equal(w2, w3)
  np.testing.assert_array_equal(c2, c3)
  np.testing.assert_array_equal(w1, w3)


def test_full_mask_matches_numpy_transcription():
  inputs = make_inputs(4)
  rng = np.random.default_rng(40)
  mask3 = rng.random((B, T, S)) < 0.6
  mask3[:, :, 0] = True  # every row keeps at least one key here
  context, weights = call(inputs, jnp.asarray(mask3))
  ref_context, ref_weights = reference(inputs, mask3)
  np.testing.assert_allclose(weights, ref_weights, rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(context, ref_context, rtol=1e-5, atol=1e-5)


def _mask_with_fully_masked_row():
  mask3 = np.ones((B, T, S), bool)
  mask3[0, 1, :] = False  # query row (b=0, t=1) may attend to nothing
  mask3[1, 2, 1:] = False
  return mask3


def test_fully_masked_row_gives_exact_zeros_and_no_nan():
  inputs = make_inputs(5)
  mask3 = _mask_with_fully_masked_row()
  context, weights = call(inputs, jnp.asarray(mask3))
  assert np.all(np.isfinite(context)) and np.all(np.isfinite(weights))
  np.testing.assert_array_equal(np.asarray(context)[0, 1], 0.0)
  np.testing.assert_array_equal(np.asarray(weights)[0, 1], 0.0)
  ref_context, ref_weights = reference(inputs, mask3)
  np.testing.assert_allclose(weights, ref_weights, rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(context, ref_context, rtol=1e-5, atol=1e-5)


def test_fully_masked_row_gradients_are_finite_and_zero_for_that_row():
  inputs = {k: jnp.asarray(a) for k, a in make_inputs(6).items()}
  mask = jnp.asarray(_mask_with_fully_masked_row())

  def loss(query, keys, values, w_query, w_keys, v):
    context, weights = additive_attention(query, keys, values, w_query=w_query, w_keys=w_keys, v=v, mask=mask)
    return jnp.sum(context) + jnp.sum(weights**2)

  names = ["query", "keys", "values", "w_query", "w_keys", "v"]
  grads = jax.grad(loss, argnums=tuple(range(6)))(*(inputs[n] for n in names))
  for name, g in zip(names, grads):
    assert np.all(np.isfinite(g)), name
  # The fully-masked query position must receive no gradient at all.
  np.testing.assert_array_equal(np.asarray(grads[0])[0, 1], 0.0)


def test_gradients_match_finite_differences_in_float64(x64):
  inputs = {k: jnp.asarray(a) for k, a in make_inputs(7, dtype=np.float64).items()}
  assert inputs["query"].dtype == jnp.float64
  mask = jnp.asarray(_mask_with_fully_masked_row())

  def f(query, keys, values, w_query, w_keys, v):
    return additive_attention(query, keys, values, w_query=w_query, w_keys=w_keys, v=v, mask=mask)

  args = tuple(inputs[n] for n in ["query", "keys", "values", "w_query", "w_keys", "v"])
  check_grads(f, args, order=1, modes=["rev"], atol=1e-6, rtol=1e-6)
  check_grads(additive_scores, (args[0] @ args[3], args[1] @ args[4], args[5]),
              order=1,
              modes=["rev"],
              atol=1e-6,
              rtol=1e-6)


def test_float64_inputs_are_not_downcast(x64):
  inputs = make_inputs(8, dtype=np.float64)
  context, weights = call(inputs)
  assert context.dtype == jnp.float64 and weights.dtype == jnp.float64
  ref_context, ref_weights = reference(inputs)
  np.testing.assert_allclose(weights, ref_weights, rtol=1e-12, atol=1e-12)
  np.testing.assert_allclose(context, ref_context, rtol=1e-12, atol=1e-12)


def test_jit_matches_eager():
  inputs = {k: jnp.asarray(a) for k, a in make_inputs(9).items()}
  mask = jnp.asarray(padding_mask())
  eager = additive_attention(**inputs, mask=mask)
  jitted = jax.jit(additive_attention)(**inputs, mask=mask)
  for e, j in zip(eager, jitted):
    np.testing.assert_allclose(j, e, rtol=1e-6, atol=1e-6)
  np.testing.assert_allclose(
      jax.jit(additive_scores)(inputs["query"] @ inputs["w_query"], inputs["keys"] @ inputs["w_keys"], inputs["v"]),
      additive_scores(inputs["query"] @ inputs["w_query"], inputs["keys"] @ inputs["w_keys"], inputs["v"]),
      rtol=1e-6,
      atol=1e-6,
  )


def test_vmap_over_extra_leading_axis_equals_batched_call():
  n = 3
  rng = np.random.default_rng(10)
  q = jnp.asarray(rng.normal(size=(n, B, T, DQ)), jnp.float32)
  k = jnp.asarray(rng.normal(size=(n, B, S, DK)), jnp.float32)
  vals = jnp.asarray(rng.normal(size=(n, B, S, DV)), jnp.float32)
  mask = jnp.asarray(rng.random((n, B, S)) < 0.7)
  params = {k_: jnp.asarray(a) for k_, a in make_inputs(10).items() if k_ in ("w_query", "w_keys", "v")}

  def f(q, k, vals, mask):
    return additive_attention(q, k, vals, mask=mask, **params)

  vc, vw = jax.jit(jax.vmap(f))(q, k, vals, mask)
  # Batch rows are independent, so folding the extra axis into B must agree.
  fc, fw = f(q.reshape(n * B, T, DQ), k.reshape(n * B, S, DK), vals.reshape(n * B, S, DV), mask.reshape(n * B, S))
  np.testing.assert_allclose(vc, fc.reshape(n, B, T, DV), rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(vw, fw.reshape(n, B, T, S), rtol=1e-5, atol=1e-6)


def test_bfloat16_inputs_are_finite_close_to_float32_and_normalised():
  inputs32 = make_inputs(11, scale=0.5)
  inputs16 = {k: jnp.asarray(a, jnp.bfloat16) for k, a in inputs32.items()}
  mask = jnp.asarray(padding_mask())
  c16, w16 = additive_attention(**inputs16, mask=mask)
  c32, w32 = call(inputs32, mask)
  assert c16.dtype == jnp.bfloat16 and w16.dtype == jnp.float32
  c16, w16 = np.asarray(c16, np.float32), np.asarray(w16, np.float32)
  assert np.all(np.isfinite(c16)) and np.all(np.isfinite(w16))
  np.testing.assert_allclose(c16, c32, atol=2e-2)
  np.testing.assert_allclose(w16, w32, atol=2e-2)
  np.testing.assert_allclose(w16.sum(-1), 1.0, atol=1e-5)


def test_masked_softmax_accumulates_in_float32_for_bfloat16_scores():
  scores = jnp.asarray(np.random.default_rng(12).normal(size=(B, T, S)), jnp.bfloat16)
  assert masked_softmax(scores).dtype == jnp.float32


# ----------------------------- input validation -----------------------------


@pytest.mark.parametrize(
    "override, match",
    [
        (dict(query=np.zeros((T, DQ), np.float32)), "query must have rank 3"),
        (dict(keys=np.zeros((B, S, DK, 1), np.float32)), "keys must have rank 3"),
        (dict(values=np.zeros((B, S + 1, DV), np.float32)), "values length"),
        (dict(keys=np.zeros((B + 1, S, DK), np.float32)), "keys batch size"),
        (dict(w_query=np.zeros((DQ + 1, A), np.float32)), "w_query first dim"),
        (dict(w_keys=np.zeros((DK, A + 1), np.float32)), "w_keys attention size"),
        (dict(w_keys=np.zeros((DK,), np.float32)), "w_keys must have rank 2"),
        (dict(v=np.zeros((A + 1,), np.float32)), "v length"),
    ],
)
def test_bad_shapes_raise_value_error_naming_the_argument(override, match):
  inputs = {**make_inputs(), **override}
  with pytest.raises(ValueError, match=re.escape(match)):
    call(inputs)


@pytest.mark.parametrize(
    "mask, match",
    [
        (np.ones((B, S + 1), bool), "mask shape"),
        (np.ones((B, T + 1, S), bool), "mask shape"),
        (np.ones((S,), bool), "mask must be [B, S]"),
        (np.ones((B, S), np.int32), "mask must be boolean"),
    ],
)
def test_bad_mask_raises_value_error_naming_mask(mask, match):
  with pytest.raises(ValueError, match=re.escape(match)):
    call(make_inputs(), jnp.asarray(mask))


def test_additive_scores_bad_shapes_raise_value_error_naming_the_argument():
  qp, kp, v = jnp.zeros((B, T, A)), jnp.zeros((B, S, A)), jnp.zeros((A,))
  with pytest.raises(ValueError, match="keys_proj last dim"):
    additive_scores(qp, jnp.zeros((B, S, A + 1)), v)
  with pytest.raises(ValueError, match="query_proj must have rank 3"):
    additive_scores(jnp.zeros((T, A)), kp, v)
  with pytest.raises(ValueError, match="v must have rank 1"):
    additive_scores(qp, kp, jnp.zeros((A, 1)))
