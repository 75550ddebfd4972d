"""Tests for Luong global attention against a loop-level NumPy reference."""

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.test_util import check_grads

from attnjax.kernels.multiplicative import luong_scores, multiplicative_attention
from tests.kernels import reference as ref_lib

B, T, S, D, DQ, DK, DV, A = 2, 3, 4, 5, 5, 6, 7, 8
SCORES = ["dot", "general", "concat"]

# --------------------------------------------------------------------------
# Independent float64 reference: a literal transcription of Luong et al.
# (2015) Eq. 7-8 with explicit loops over b, t, s. "concat" really builds the
# concatenation [h_t; h̄_s], unlike the kernel, which splits W_a.
# --------------------------------------------------------------------------


def np_luong_scores(query, keys, score, w=None, v=None):
  query, keys = np.asarray(query, np.float64), np.asarray(keys, np.float64)
  w = None if w is None else np.asarray(w, np.float64)
  v = None if v is None else np.asarray(v, np.float64)
  b_, t_, _ = query.shape
  s_ = keys.shape[1]
  e = np.zeros((b_, t_, s_))
  for b in range(b_):
    for t in range(t_):
      for s in range(s_):
        h_t, hbar_s = query[b, t], keys[b, s]
        if score == "dot":
          e[b, t, s] = sum(h_t[i] * hbar_s[i] for i in range(len(h_t)))
        elif score == "general":
          e[b, t, s] = sum(h_t[i] * w[i, j] * hbar_s[j] for i in range(len(h_t)) for j in range(len(hbar_s)))
        elif score == "concat":
          hidden = np.tanh(np.concatenate([h_t, hbar_s]) @ w)  # W_a [h_t; h̄_s]
          e[b, t, s] = sum(v[a] * hidden[a] for a in range(len(v)))
        else:
          raise AssertionError(score)
  return e




def make_inputs(score, seed=0, dtype=np.float32, scale=1.0):
  """Inputs for `score`; "dot" needs Dq == Dk so it uses D for both."""
  rng = np.random.default_rng(seed)
  dq, dk = (D, D) if score == "dot" else (DQ, DK)
  x = dict(
      query=rng.normal(size=(B, T, dq)),
      keys=rng.normal(size=(B, S, dk)),
      values=rng.normal(size=(B, S, DV)),
  )
  if score == "general":
    x["w"] = rng.normal(size=(dq, dk)) / np.sqrt(dq * dk)
  if score == "concat":
    x["w"] = rng.normal(size=(dq + dk, A)) / np.sqrt(dq + dk)
    x["v"] = rng.normal(size=(A,))
  return {k: (scale * a).astype(dtype) for k, a in x.items()}


def params(inputs):
  return {k: inputs[k] for k in ("w", "v") if k in inputs}


def call(inputs, score, mask=None):
  x = {k: jnp.asarray(a) for k, a in inputs.items()}
  return multiplicative_attention(x["query"], x["keys"], x["values"], score=score, mask=mask, **params(x))


def reference(inputs, score, mask3=None):
  e = np_luong_scores(inputs["query"], inputs["keys"], score, **params(inputs))
  return ref_lib.masked_softmax_and_context(e, inputs["values"], mask3)


def padding_mask():
  lengths = np.array([3, 1])
  return np.arange(S)[None, :] < lengths[:, None]  # [B, S]


def mask_with_fully_masked_row():
  mask3 = np.ones((B, T, S), bool)
  mask3[0, 1, :] = False  # query row (b=0, t=1) may attend to nothing
  mask3[1, 2, 1:] = False
  return mask3


def _check_scores(score):
  inputs = make_inputs(score, seed=1)
  x = {k: jnp.asarray(a) for k, a in inputs.items()}
  got = luong_scores(x["query"], x["keys"], score=score, **params(x))
  assert got.shape == (B, T, S)
  want = np_luong_scores(inputs["query"], inputs["keys"], score, **params(inputs))
  np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


# --------------------------------------------------------------------------


@pytest.mark.parametrize("score", SCORES)
def test_output_shapes_and_dtypes(score):
  context, weights = call(make_inputs(score), score)
  assert context.shape == (B, T, DV)
  assert weights.shape == (B, T, S)
  assert context.dtype == jnp.float32 and weights.dtype == jnp.float32


def test_dot_score_matches_numpy_transcription():
  _check_scores("dot")


def test_general_score_matches_numpy_transcription():
  _check_scores("general")


def test_concat_score_matches_numpy_transcription():
  _check_scores("concat")


def test_default_score_is_dot():
  inputs = make_inputs("dot", seed=2)
  x = {k: jnp.asarray(a) for k, a in inputs.items()}
  context, weights = multiplicative_attention(x["query"], x["keys"], x["values"])
  ref_context, ref_weights = reference(inputs, "dot")
  np.testing.assert_allclose(weights, ref_weights, rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(context, ref_context, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("score", SCORES)
def test_attention_matches_numpy_transcription(score):
  inputs = make_inputs(score, seed=3)
  context, weights = call(inputs, score)
  ref_context, ref_weights = reference(inputs, score)
  np.testing.assert_allclose(weights, ref_weights, rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(context, ref_context, rtol=1e-5, atol=1e-5)
  np.testing.assert_allclose(np.asarray(weights).sum(-1), 1.0, rtol=1e-6)


@pytest.mark.parametrize("score", SCORES)
def test_padding_mask_matches_numpy_transcription(score):
  inputs = make_inputs(score, seed=4)
  mask2 = padding_mask()
  mask3 = np.broadcast_to(mask2[:, None, :], (B, T, S))
  context, weights = call(inputs, score, jnp.asarray(mask2))
  ref_context, ref_weights = reference(inputs, score, mask3)
  np.testing.assert_allclose(weights, ref_weights, rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(context, ref_context, rtol=1e-5, atol=1e-5)
  assert np.all(np.asarray(weights)[~mask3] == 0.0)
  # The [B, S] form must mean exactly the same as its [B, T, S] broadcast.
  c3, w3 = call(inputs, score, jnp.asarray(mask3))
  np.testing.assert_array_equal(weights, w3)
  np.testing.assert_array_equal(context, c3)


@pytest.mark.parametrize("score", SCORES)
def test_full_mask_matches_numpy_transcription(score):
  inputs = make_inputs(score, seed=5)
  mask3 = np.random.default_rng(50).random((B, T, S)) < 0.6
  mask3[:, :, -1] = True
  context, weights = call(inputs, score, jnp.asarray(mask3))
  ref_context, ref_weights = reference(inputs, score, mask3)
  np.testing.assert_allclose(weights, ref_weights, rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(context, ref_context, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("score", SCORES)
def test_fully_masked_row_gives_exact_zeros_and_no_nan(score):
  inputs = make_inputs(score, seed=6)
  mask3 = mask_with_fully_masked_row()
  context, weights = call(inputs, score, jnp.asarray(mask3))
  assert np.all(np.isfinite(context)) and np.all(np.isfinite(weights))
  np.testing.assert_array_equal(np.asarray(context)[0, 1], 0.0)
  np.testing.assert_array_equal(np.asarray(weights)[0, 1], 0.0)
  ref_context, ref_weights = reference(inputs, score, mask3)
  np.testing.assert_allclose(weights, ref_weights, rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(context, ref_context, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("score", SCORES)
def test_fully_masked_row_gradients_are_finite_and_zero_for_that_row(score):
  inputs = {k: jnp.asarray(a) for k, a in make_inputs(score, seed=7).items()}
  mask = jnp.asarray(mask_with_fully_masked_row())
  names = list(inputs)  # query, keys, values[, w[, v]]

  def loss(*args):
    x = dict(zip(names, args))
    context, weights = multiplicative_attention(x["query"], x["keys"], x["values"], score=score, mask=mask, **params(x))
    return jnp.sum(context) + jnp.sum(weights**2)

  grads = jax.grad(loss, argnums=tuple(range(len(names))))(*inputs.values())
  for name, g in zip(names, grads):
    assert np.all(np.isfinite(g)), name
  np.testing.assert_array_equal(np.asarray(grads[0])[0, 1], 0.0)


@pytest.mark.parametrize("score", SCORES)
def test_gradients_match_finite_differences_in_float64(score, x64):
  inputs = {k: jnp.asarray(a) for k, a in make_inputs(score, 8, np.float64).items()}
  assert inputs["query"].dtype == jnp.float64
  mask = jnp.asarray(mask_with_fully_masked_row())
  names = list(inputs)

  def f(*args):
    x = dict(zip(names, args))
    return multiplicative_attention(x["query"], x["keys"], x["values"], score=score, mask=mask, **params(x))

  check_grads(f, tuple(inputs.values()), order=1, modes=["rev"], atol=1e-6, rtol=1e-6)


@pytest.mark.parametrize("score", SCORES)
def test_float64_inputs_are_not_downcast(score, x64):
  inputs = make_inputs(score, seed=9, dtype=np.float64)
  context, weights = call(inputs, score)
  assert context.dtype == jnp.float64 and weights.dtype == jnp.float64
  ref_context, ref_weights = reference(inputs, score)
  np.testing.assert_allclose(weights, ref_weights, rtol=1e-12, atol=1e-12)
  np.testing.assert_allclose(context, ref_context, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("score", SCORES)
def test_jit_matches_eager(score):
  x = {k: jnp.asarray(a) for k, a in make_inputs(score, seed=10).items()}
  mask = jnp.asarray(padding_mask())
  eager = multiplicative_attention(**x, score=score, mask=mask)
  jitted = jax.jit(multiplicative_attention, static_argnames="score")(**x, score=score, mask=mask)
  for e, j in zip(eager, jitted):
    np.testing.assert_allclose(j, e, rtol=1e-6, atol=1e-6)
  jit_scores = jax.jit(luong_scores, static_argnames="score")
  np.testing.assert_allclose(
      jit_scores(x["query"], x["keys"], score=score, **params(x)),
      luong_scores(x["query"], x["keys"], score=score, **params(x)),
      rtol=1e-6,
      atol=1e-6,
  )


@pytest.mark.parametrize("score", SCORES)
def test_vmap_over_extra_leading_axis_equals_batched_call(score):
  n = 3
  rng = np.random.default_rng(11)
  base = make_inputs(score, seed=11)
  dq, dk = base["query"].shape[-1], base["keys"].shape[-1]
  q = jnp.asarray(rng.normal(size=(n, B, T, dq)), jnp.float32)
  k = jnp.asarray(rng.normal(size=(n, B, S, dk)), jnp.float32)
  vals = jnp.asarray(rng.normal(size=(n, B, S, DV)), jnp.float32)
  mask = jnp.asarray(rng.random((n, B, S)) < 0.7)
  p = {k_: jnp.asarray(a) for k_, a in params(base).items()}

  def f(q, k, vals, mask):
    return multiplicative_attention(q, k, vals, score=score, mask=mask, **p)

  vc, vw = jax.jit(jax.vmap(f))(q, k, vals, mask)
  # Batch rows are independent, so folding the extra axis into B must agree.
  fc, fw = f(q.reshape(n * B, T, dq), k.reshape(n * B, S, dk), vals.reshape(n * B, S, DV), mask.reshape(n * B, S))
  np.testing.assert_allclose(vc, fc.reshape(n, B, T, DV), rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(vw, fw.reshape(n, B, T, S), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("score", SCORES)
def test_bfloat16_inputs_are_finite_close_to_float32_and_normalised(score):
  inputs32 = make_inputs(score, seed=12, scale=0.5)
  x16 = {k: jnp.asarray(a, jnp.bfloat16) for k, a in inputs32.items()}
  mask = jnp.asarray(padding_mask())
  c16, w16 = multiplicative_attention(**x16, score=score, mask=mask)
  c32, w32 = call(inputs32, score, mask)
  assert c16.dtype == jnp.bfloat16 and w16.dtype == jnp.float32
  c16, w16 = np.asarray(c16, np.float32), np.asarray(w16, np.float32)
  assert np.all(np.isfinite(c16)) and np.all(np.isfinite(w16))
  np.testing.assert_allclose(c16, c32, atol=2e-2)
  np.testing.assert_allclose(w16, w32, atol=2e-2)
  np.testing.assert_allclose(w16.sum(-1), 1.0, atol=1e-5)


# ----------------------------- input validation -----------------------------


def _jnp(inputs):
  return {k: jnp.asarray(a) for k, a in inputs.items()}


def test_unknown_score_raises_value_error_naming_score():
  x = _jnp(make_inputs("dot"))
  with pytest.raises(ValueError, match="score must be one of .*'bilinear'"):
    multiplicative_attention(**x, score="bilinear")


def test_dot_score_with_mismatched_dims_raises_value_error():
  x = _jnp(make_inputs("general"))  # Dq=5, Dk=6
  with pytest.raises(ValueError, match=re.escape("query last dim 5 != keys last dim 6 for score='dot'")):
    multiplicative_attention(x["query"], x["keys"], x["values"], score="dot")


@pytest.mark.parametrize(
    "score, kwargs, match",
    [
        ("general", {}, "w of shape [Dq, Dk] is required for score='general'"),
        ("concat", {}, "w of shape [Dq + Dk, A] is required for score='concat'"),
        ("concat", dict(w=np.zeros((DQ + DK, A))), "v of shape [A] is required"),
        ("general", dict(w=np.zeros((DK, DQ))), "w shape (6, 5) != (Dq, Dk)=(5, 6)"),
        ("general", dict(w=np.zeros((DQ,))), "w must have rank 2"),
        ("concat", dict(w=np.zeros((DQ, A)), v=np.zeros(A)), "w first dim 5 != Dq + Dk"),
        ("concat", dict(w=np.zeros((DQ + DK, A)), v=np.zeros(A + 1)), "v length 9 != w last dim 8"),
        ("dot", dict(w=np.zeros((D, D))), "w and v must be None for score='dot'"),
        ("general", dict(w=np.zeros((DQ, DK)), v=np.zeros(A)), "v must be None"),
    ],
)
def test_bad_score_parameters_raise_value_error_naming_the_argument(score, kwargs, match):
  x = _jnp(make_inputs("dot" if score == "dot" else "general"))
  kwargs = {k: jnp.asarray(a, jnp.float32) for k, a in kwargs.items()}
  with pytest.raises(ValueError, match=re.escape(match)):
    multiplicative_attention(x["query"], x["keys"], x["values"], score=score, **kwargs)
  with pytest.raises(ValueError, match=re.escape(match)):
    luong_scores(x["query"], x["keys"], score=score, **kwargs)


@pytest.mark.parametrize(
    "override, match",
    [
        (dict(query=np.zeros((T, D))), "query must have rank 3"),
        (dict(keys=np.zeros((B, S))), "keys must have rank 3"),
        (dict(values=np.zeros((B, S, DV, 1))), "values must have rank 3"),
        (dict(values=np.zeros((B, S + 1, DV))), "values length"),
        (dict(keys=np.zeros((B + 1, S, D))), "keys batch size"),
    ],
)
def test_bad_qkv_shapes_raise_value_error_naming_the_argument(override, match):
  x = _jnp({**make_inputs("dot"), **override})
  with pytest.raises(ValueError, match=re.escape(match)):
    multiplicative_attention(x["query"], x["keys"], x["values"], score="dot")


@pytest.mark.parametrize(
    "mask, match",
    [
        (np.ones((B, S + 1), bool), "mask shape"),
        (np.ones((B, T + 1, S), bool), "mask shape"),
        (np.ones((1, B, T, S), bool), "mask must be [B, S]"),
        (np.ones((B, S), np.float32), "mask must be boolean"),
    ],
)
def test_bad_mask_raises_value_error_naming_mask(mask, match):
  with pytest.raises(ValueError, match=re.escape(match)):
    call(make_inputs("dot"), "dot", jnp.asarray(mask))
