"""Tests for attnjax.kernels.linear (Katharopoulos et al. 2020).

Every value is checked against an independent computation: a NumPy float64
loop transcription of the paper's formulas.
"""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.test_util import check_grads

from attnjax.kernels import linear
from tests.kernels.inputs import enable_x64, kv_valid_with_padding, rand

# Jitted entry point: one compilation per configuration is much faster on CPU
# than eager op-by-op dispatch (the eager path is exercised in a few tests).
linear_attention = jax.jit(linear.linear_attention, static_argnames=("is_causal", "feature_map", "chunk_size"))


# --------------------------------------------------------------------------- #
# linear_attention
# --------------------------------------------------------------------------- #


def _np_phi(x, feature_map):
  if feature_map == "elu":
    return np.where(x > 0, x + 1.0, np.exp(np.minimum(x, 0.0)))  # elu(x) + 1
  return np.maximum(x, 0.0)


def _np_linear_attention(q, k, v, *, is_causal, kv_valid=None, feature_map="elu", eps=1e-6):
  """Loop transcription of Katharopoulos et al. (2020), Eqs. (5)-(6) / (18)-(20).

    Causal: S_i = S_{i-1} + phi(k_i) v_i^T, z_i = z_{i-1} + phi(k_i),
            out_i = phi(q_i)^T S_i / (phi(q_i)^T z_i + eps).
    """
  q, k, v = (np.asarray(x, np.float64) for x in (q, k, v))
  b, t, n, h = q.shape
  s, hv = k.shape[1], v.shape[-1]
  valid = np.ones((b, s), bool) if kv_valid is None else np.asarray(kv_valid)
  out = np.zeros((b, t, n, hv))
  for bi in range(b):
    for ni in range(n):
      if is_causal:
        state, z = np.zeros((h, hv)), np.zeros(h)
        for i in range(t):
          if valid[bi, i]:
            fk = _np_phi(k[bi, i, ni], feature_map)
            state += np.outer(fk, v[bi, i, ni])
            z += fk
          fq = _np_phi(q[bi, i, ni], feature_map)
          out[bi, i, ni] = fq @ state / (fq @ z + eps)
      else:
        state, z = np.zeros((h, hv)), np.zeros(h)
        for j in range(s):
          if valid[bi, j]:
            fk = _np_phi(k[bi, j, ni], feature_map)
            state += np.outer(fk, v[bi, j, ni])
            z += fk
        for i in range(t):
          fq = _np_phi(q[bi, i, ni], feature_map)
          out[bi, i, ni] = fq @ state / (fq @ z + eps)
  return out


@pytest.mark.parametrize("feature_map", ["elu", "relu"])
@pytest.mark.parametrize("with_padding", [False, True])
def test_linear_attention_noncausal_matches_numpy_loop(feature_map, with_padding):
  b, t, s, n, h, hv = 3, 7, 9, 2, 4, 5
  q, k, v = rand(21, (b, t, n, h), (b, s, n, h), (b, s, n, hv))
  kv_valid = kv_valid_with_padding(b, s, seed=2) if with_padding else None
  out = linear_attention(q, k, v, kv_valid=kv_valid, feature_map=feature_map)
  ref = _np_linear_attention(q, k, v, is_causal=False, kv_valid=kv_valid, feature_map=feature_map)
  assert out.shape == (b, t, n, hv)
  np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-5)
  if with_padding:  # last sequence has no valid key at all
    np.testing.assert_array_equal(np.asarray(out)[-1], 0.0)


@pytest.mark.parametrize("feature_map", ["elu", "relu"])
@pytest.mark.parametrize("chunk_size", [None, 1, 4, 5, 100])
def test_linear_attention_causal_matches_numpy_loop_for_any_chunk_size(feature_map, chunk_size):
  b, t, n, h, hv = 3, 13, 2, 4, 3
  q, k, v = rand(31, (b, t, n, h), (b, t, n, h), (b, t, n, hv))
  kv_valid = kv_valid_with_padding(b, t, seed=4)
  out = linear_attention(
      q,
      k,
      v,
      is_causal=True,
      kv_valid=kv_valid,
      feature_map=feature_map,
      chunk_size=chunk_size,
  )
  ref = _np_linear_attention(q, k, v, is_causal=True, kv_valid=kv_valid, feature_map=feature_map)
  np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-5)


def test_linear_attention_causal_result_is_independent_of_chunk_size():
  b, t, n, h = 2, 37, 2, 8
  q, k, v = rand(41, *[(b, t, n, h)] * 3)
  outs = [np.asarray(linear_attention(q, k, v, is_causal=True, chunk_size=c)) for c in (1, 4, 7, 16, 37, 64)]
  for o in outs[1:]:
    np.testing.assert_allclose(o, outs[0], rtol=1e-5, atol=1e-6)


def test_linear_attention_causal_output_does_not_depend_on_future_positions():
  b, t, n, h = 1, 12, 1, 4
  q, k, v = rand(43, *[(b, t, n, h)] * 3)
  out = linear_attention(q, k, v, is_causal=True, chunk_size=5)
  k2 = k.at[:, 7:].set(10.0)
  v2 = v.at[:, 7:].set(-10.0)
  out2 = linear_attention(q, k2, v2, is_causal=True, chunk_size=5)
  np.testing.assert_array_equal(out[:, :7], out2[:, :7])


@pytest.mark.parametrize("is_causal", [False, True])
def test_linear_attention_gradients_match_finite_differences(is_causal):
  b, t, n, h = 2, 6, 1, 3
  kv_valid = np.array([[True] * 6, [True] * 4 + [False] * 2])
  with enable_x64():
    rng = np.random.default_rng(51)
    args = tuple(jnp.asarray(rng.normal(size=(b, t, n, h)), jnp.float64) for _ in range(3))
    f = functools.partial(linear_attention, is_causal=is_causal, kv_valid=kv_valid, chunk_size=4)
    assert f(*args).dtype == jnp.float64
    check_grads(f, args, order=1, modes=["rev"], atol=1e-5, rtol=1e-5)


def test_linear_attention_gradients_are_finite_without_valid_keys():
  b, t, n, h = 1, 5, 1, 3
  q, k, v = rand(53, *[(b, t, n, h)] * 3)
  kv_valid = np.zeros((b, t), bool)
  for is_causal in (False, True):

    def loss(q, k, v):
      return jnp.sum(linear_attention(q, k, v, is_causal=is_causal, kv_valid=kv_valid))

    out = linear_attention(q, k, v, is_causal=is_causal, kv_valid=kv_valid)
    np.testing.assert_array_equal(out, 0.0)
    for g in jax.grad(loss, argnums=(0, 1, 2))(q, k, v):
      np.testing.assert_array_equal(g, 0.0)


def test_linear_attention_works_under_jit_and_vmap():
  b, t, n, h = 2, 10, 2, 4
  q, k, v = rand(61, *[(b, t, n, h)] * 3)
  ref = _np_linear_attention(q, k, v, is_causal=True)
  f = jax.jit(linear.linear_attention, static_argnames=("is_causal", "chunk_size", "feature_map"))
  np.testing.assert_allclose(f(q, k, v, is_causal=True, chunk_size=3), ref, rtol=1e-4, atol=1e-5)
  g = jax.vmap(functools.partial(linear.linear_attention, is_causal=True, chunk_size=4))
  np.testing.assert_allclose(g(q[None], k[None], v[None])[0], ref, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("is_causal", [False, True])
def test_linear_attention_bfloat16_is_finite_and_close_to_float32(is_causal):
  b, t, n, h = 2, 21, 2, 8
  q, k, v = rand(71, *[(b, t, n, h)] * 3)
  kw = dict(is_causal=is_causal, chunk_size=8)
  out32 = linear_attention(q, k, v, **kw)
  out16 = linear_attention(*(x.astype(jnp.bfloat16) for x in (q, k, v)), **kw)
  assert out16.dtype == jnp.bfloat16
  out16 = np.asarray(out16.astype(jnp.float32))
  assert np.all(np.isfinite(out16))
  np.testing.assert_allclose(out16, out32, atol=5e-2, rtol=5e-2)


def test_linear_attention_rejects_unknown_feature_map_naming_feature_map():
  (q,) = rand(0, (1, 4, 1, 2))
  with pytest.raises(ValueError, match="`feature_map`"):
    linear_attention(q, q, q, feature_map="softmax")


@pytest.mark.parametrize("bad", [0, -2, 2.5])
def test_linear_attention_rejects_invalid_chunk_size_naming_chunk_size(bad):
  (q,) = rand(0, (1, 4, 1, 2))
  with pytest.raises(ValueError, match="`chunk_size`"):
    linear_attention(q, q, q, is_causal=True, chunk_size=bad)


def test_linear_attention_causal_rejects_length_mismatch_naming_key():
  q, k = rand(0, (1, 4, 1, 2), (1, 5, 1, 2))
  with pytest.raises(ValueError, match="`key` length"):
    linear_attention(q, k, k, is_causal=True)


def test_linear_attention_rejects_misshaped_kv_valid_naming_it():
  (q,) = rand(0, (2, 4, 1, 2))
  with pytest.raises(ValueError, match="`kv_valid`"):
    linear_attention(q, q, q, kv_valid=np.ones((2, 3), bool))
