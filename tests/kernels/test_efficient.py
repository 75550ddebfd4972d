"""Tests for attnjax.kernels.efficient.

Every value is checked against an independent computation: jax.nn's dense
dot_product_attention with a hand-built band mask for local attention, and a
NumPy float64 loop transcription of Katharopoulos et al. (2020) for linear
attention.
"""

import contextlib
import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.test_util import check_grads

from attnjax.kernels import efficient

# Jitted entry points: one compilation per configuration is much faster on CPU
# than eager op-by-op dispatch (the eager path is exercised in a few tests).
local_attention = jax.jit(efficient.local_attention, static_argnames=("window", "is_causal", "block_size"))
linear_attention = jax.jit(efficient.linear_attention, static_argnames=("is_causal", "feature_map", "chunk_size"))
# The independent dense reference (full [T, S] scores with an explicit mask).
dense_attention = jax.jit(jax.nn.dot_product_attention)


def _rand(seed, *shapes, dtype=jnp.float32):
  rng = np.random.default_rng(seed)
  return [jnp.asarray(rng.normal(size=s), dtype) for s in shapes]


def _band_mask(t, window, is_causal):
  """[1, 1, T, T] numpy band mask, True = attend."""
  i = np.arange(t)[:, None]
  j = np.arange(t)[None, :]
  if is_causal:
    m = (i - j >= 0) & (i - j <= window)
  else:
    m = np.abs(i - j) <= window
  return m[None, None]


def _kv_valid_with_padding(b, t, seed):
  """Right padding of random lengths, plus one sequence that is all padding."""
  rng = np.random.default_rng(seed)
  lengths = rng.integers(1, t + 1, size=b)
  lengths[-1] = 0
  return np.arange(t)[None, :] < lengths[:, None]


@contextlib.contextmanager
def _x64():
  if hasattr(jax, "enable_x64"):
    with jax.enable_x64(True):
      yield
  else:  # older JAX
    from jax.experimental import enable_x64

    with enable_x64():
      yield


# --------------------------------------------------------------------------- #
# local_attention
# --------------------------------------------------------------------------- #

LOCAL_CASES = [
    # (T, window, block_size)
    (16, 3, None),  # T multiple of the default block
    (13, 3, None),  # T not a multiple of the block
    (13, 3, 5),  # block larger than window
    (13, 5, 2),  # block smaller than window: several halo blocks
    (10, 0, None),  # diagonal only
    (7, 20, None),  # window larger than T
    (7, 20, 3),  # window larger than T, explicit block
    (9, 4, 16),  # block larger than T
]


@pytest.mark.parametrize("is_causal", [False, True])
@pytest.mark.parametrize("t,window,block_size", LOCAL_CASES)
def test_local_attention_equals_dense_band_masked_attention(t, window, block_size, is_causal):
  b, n, h = 2, 3, 4
  q, k, v = _rand(t, (b, t, n, h), (b, t, n, h), (b, t, n, h))
  mask = jnp.asarray(_band_mask(t, window, is_causal))
  ref = dense_attention(q, k, v, mask=mask)
  out = local_attention(q, k, v, window=window, is_causal=is_causal, block_size=block_size)
  assert out.shape == (b, t, n, h)
  np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("is_causal", [False, True])
@pytest.mark.parametrize("t,window,block_size", [(13, 3, None), (13, 5, 2), (7, 20, 3)])
def test_local_attention_with_key_padding_matches_dense_on_rows_with_a_valid_key(t, window, block_size, is_causal):
  b, n, h = 3, 2, 4
  q, k, v = _rand(100 + t, (b, t, n, h), (b, t, n, h), (b, t, n, h))
  kv_valid = _kv_valid_with_padding(b, t, seed=t)
  full = _band_mask(t, window, is_causal) & kv_valid[:, None, None, :]  # [B,1,T,S]
  ref = dense_attention(q, k, v, mask=jnp.asarray(full))
  out = local_attention(q, k, v, window=window, is_causal=is_causal, kv_valid=kv_valid, block_size=block_size)
  has_key = full[:, 0].any(-1)  # [B, T]
  assert has_key.any() and (~has_key).any()
  np.testing.assert_allclose(np.asarray(out)[has_key], np.asarray(ref)[has_key], rtol=1e-5, atol=1e-6)
  # The dense reference outputs a uniform average there; we require zeros.
  np.testing.assert_array_equal(np.asarray(out)[~has_key], 0.0)


def test_local_attention_q_valid_zeroes_padded_query_rows():
  b, t, n, h = 2, 9, 2, 4
  q, k, v = _rand(7, (b, t, n, h), (b, t, n, h), (b, t, n, h))
  q_valid = np.arange(t)[None, :] < np.array([[6], [9]])
  mask = jnp.asarray(_band_mask(t, 2, False))
  ref = dense_attention(q, k, v, mask=mask)
  out = local_attention(q, k, v, window=2, q_valid=q_valid)
  np.testing.assert_allclose(np.asarray(out)[q_valid], np.asarray(ref)[q_valid], rtol=1e-5, atol=1e-6)
  np.testing.assert_array_equal(np.asarray(out)[~q_valid], 0.0)


def test_local_attention_custom_scale_matches_dense():
  b, t, n, h = 1, 11, 2, 8
  q, k, v = _rand(3, (b, t, n, h), (b, t, n, h), (b, t, n, h))
  mask = jnp.asarray(_band_mask(t, 3, False))
  ref = jax.nn.dot_product_attention(q, k, v, mask=mask, scale=0.7)
  out = local_attention(q, k, v, window=3, scale=0.7, block_size=4)
  np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-6)


def test_local_attention_value_head_dim_may_differ():
  b, t, n = 2, 10, 2
  q, k, v = _rand(4, (b, t, n, 4), (b, t, n, 4), (b, t, n, 6))
  mask = jnp.asarray(_band_mask(t, 2, True))
  out = local_attention(q, k, v, window=2, is_causal=True)
  assert out.shape == (b, t, n, 6)
  # jax.nn's reference wants equal head dims for q/k/v; attention is linear
  # in v, so comparing 4-wide slices of the 6-wide values is enough.
  for lo in (0, 2):
    ref = dense_attention(q, k, v[..., lo:lo + 4], mask=mask)
    np.testing.assert_allclose(out[..., lo:lo + 4], ref, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("is_causal", [False, True])
@pytest.mark.parametrize("t,window,block_size", [(13, 3, None), (13, 5, 2)])
def test_local_attention_gradients_match_dense_reference(t, window, block_size, is_causal):
  b, n, h = 3, 2, 4
  q, k, v, w = _rand(200 + t, *[(b, t, n, h)] * 4)
  kv_valid = _kv_valid_with_padding(b, t, seed=t + 1)
  full = _band_mask(t, window, is_causal) & kv_valid[:, None, None, :]
  has_key = jnp.asarray(full[:, 0].any(-1))
  # Rows with no valid key differ by design (uniform vs zero): weight them 0.
  w = w * has_key[:, :, None, None]

  def loss_ours(q, k, v):
    out = local_attention(
        q,
        k,
        v,
        window=window,
        is_causal=is_causal,
        kv_valid=kv_valid,
        block_size=block_size,
    )
    return jnp.sum(out * w)

  def loss_ref(q, k, v):
    return jnp.sum(dense_attention(q, k, v, mask=jnp.asarray(full)) * w)

  g_ours = jax.jit(jax.grad(loss_ours, argnums=(0, 1, 2)))(q, k, v)
  g_ref = jax.jit(jax.grad(loss_ref, argnums=(0, 1, 2)))(q, k, v)
  for go, gr in zip(g_ours, g_ref):
    assert np.all(np.isfinite(go))
    np.testing.assert_allclose(go, gr, rtol=1e-5, atol=1e-5)


def test_local_attention_fully_masked_rows_have_zero_finite_gradients():
  b, t, n, h = 1, 8, 1, 4
  q, k, v = _rand(5, *[(b, t, n, h)] * 3)
  kv_valid = np.zeros((b, t), bool)

  def loss(q, k, v):
    out = local_attention(q, k, v, window=2, kv_valid=kv_valid)
    return jnp.sum(out**2 + 1.0)

  grads = jax.jit(jax.grad(loss, argnums=(0, 1, 2)))(q, k, v)
  for g in grads:
    np.testing.assert_array_equal(g, 0.0)


def test_local_attention_works_under_jit_and_vmap():
  b, t, n, h = 2, 12, 2, 4
  q, k, v = _rand(9, *[(b, t, n, h)] * 3)
  mask = jnp.asarray(_band_mask(t, 3, True))
  ref = dense_attention(q, k, v, mask=mask)
  f = jax.jit(efficient.local_attention, static_argnames=("window", "is_causal", "block_size"))
  np.testing.assert_allclose(f(q, k, v, window=3, is_causal=True, block_size=5), ref, rtol=1e-5, atol=1e-6)
  # vmap over an extra leading axis (an ensemble of batches).
  g = jax.vmap(functools.partial(efficient.local_attention, window=3, is_causal=True))
  out = g(q[None], k[None], v[None])[0]
  np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-6)


def _temp_bytes(fn, t, n=2, h=16):
  s = jax.ShapeDtypeStruct((1, t, n, h), jnp.float32)
  stats = jax.jit(fn).lower(s, s, s).compile().memory_analysis()
  if stats is None or getattr(stats, "temp_size_in_bytes", None) is None:
    pytest.skip("compiled memory_analysis() is unavailable on this backend")
  return stats.temp_size_in_bytes


def test_local_attention_memory_is_linear_in_sequence_length():
  f = functools.partial(efficient.local_attention, window=32)
  small, large = _temp_bytes(f, 1024), _temp_bytes(f, 4096)
  # Quadratic attention would grow 16x for a 4x longer sequence.
  assert large <= 4.5 * max(small, 1), (small, large)


def test_local_attention_backward_memory_is_linear_in_sequence_length():

  def f(q, k, v):
    return jax.grad(lambda q, k, v: efficient.local_attention(q, k, v, window=32).sum(), argnums=(0, 1, 2))(q, k, v)

  small, large = _temp_bytes(f, 1024), _temp_bytes(f, 4096)
  assert large <= 5.0 * max(small, 1), (small, large)


@pytest.mark.parametrize("is_causal", [False, True])
def test_local_attention_bfloat16_is_finite_and_close_to_float32(is_causal):
  b, t, n, h = 2, 19, 2, 8
  q, k, v = _rand(11, *[(b, t, n, h)] * 3)
  kv_valid = _kv_valid_with_padding(b, t, seed=3)
  kw = dict(window=4, is_causal=is_causal, kv_valid=kv_valid)
  out32 = local_attention(q, k, v, **kw)
  out16 = local_attention(*(x.astype(jnp.bfloat16) for x in (q, k, v)), **kw)
  assert out16.dtype == jnp.bfloat16
  out16 = np.asarray(out16.astype(jnp.float32))
  assert np.all(np.isfinite(out16))
  np.testing.assert_allclose(out16, out32, atol=5e-2, rtol=5e-2)


def test_local_attention_rejects_cross_attention_naming_key():
  q, k = _rand(0, (1, 8, 1, 4), (1, 6, 1, 4))
  with pytest.raises(ValueError, match="`key` length"):
    local_attention(q, k, k, window=2)


@pytest.mark.parametrize("bad", [-1, 2.0, None, True])
def test_local_attention_rejects_invalid_window_naming_window(bad):
  (q,) = _rand(0, (1, 8, 1, 4))
  with pytest.raises(ValueError, match="`window`"):
    local_attention(q, q, q, window=bad)


@pytest.mark.parametrize("bad", [0, -3, 1.5])
def test_local_attention_rejects_invalid_block_size_naming_block_size(bad):
  (q,) = _rand(0, (1, 8, 1, 4))
  with pytest.raises(ValueError, match="`block_size`"):
    local_attention(q, q, q, window=2, block_size=bad)


def test_local_attention_rejects_misshaped_masks_naming_them():
  (q,) = _rand(0, (2, 8, 1, 4))
  with pytest.raises(ValueError, match="`kv_valid`"):
    local_attention(q, q, q, window=2, kv_valid=np.ones((2, 7), bool))
  with pytest.raises(ValueError, match="`q_valid`"):
    local_attention(q, q, q, window=2, q_valid=np.ones((8,), bool))


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
  q, k, v = _rand(21, (b, t, n, h), (b, s, n, h), (b, s, n, hv))
  kv_valid = _kv_valid_with_padding(b, s, seed=2) if with_padding else None
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
  q, k, v = _rand(31, (b, t, n, h), (b, t, n, h), (b, t, n, hv))
  kv_valid = _kv_valid_with_padding(b, t, seed=4)
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
  q, k, v = _rand(41, *[(b, t, n, h)] * 3)
  outs = [np.asarray(linear_attention(q, k, v, is_causal=True, chunk_size=c)) for c in (1, 4, 7, 16, 37, 64)]
  for o in outs[1:]:
    np.testing.assert_allclose(o, outs[0], rtol=1e-5, atol=1e-6)


def test_linear_attention_causal_output_does_not_depend_on_future_positions():
  b, t, n, h = 1, 12, 1, 4
  q, k, v = _rand(43, *[(b, t, n, h)] * 3)
  out = linear_attention(q, k, v, is_causal=True, chunk_size=5)
  k2 = k.at[:, 7:].set(10.0)
  v2 = v.at[:, 7:].set(-10.0)
  out2 = linear_attention(q, k2, v2, is_causal=True, chunk_size=5)
  np.testing.assert_array_equal(out[:, :7], out2[:, :7])


@pytest.mark.parametrize("is_causal", [False, True])
def test_linear_attention_gradients_match_finite_differences(is_causal):
  b, t, n, h = 2, 6, 1, 3
  kv_valid = np.array([[True] * 6, [True] * 4 + [False] * 2])
  with _x64():
    rng = np.random.default_rng(51)
    args = tuple(jnp.asarray(rng.normal(size=(b, t, n, h)), jnp.float64) for _ in range(3))
    f = functools.partial(linear_attention, is_causal=is_causal, kv_valid=kv_valid, chunk_size=4)
    assert f(*args).dtype == jnp.float64
    check_grads(f, args, order=1, modes=["rev"], atol=1e-5, rtol=1e-5)


def test_linear_attention_gradients_are_finite_without_valid_keys():
  b, t, n, h = 1, 5, 1, 3
  q, k, v = _rand(53, *[(b, t, n, h)] * 3)
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
  q, k, v = _rand(61, *[(b, t, n, h)] * 3)
  ref = _np_linear_attention(q, k, v, is_causal=True)
  f = jax.jit(efficient.linear_attention, static_argnames=("is_causal", "chunk_size", "feature_map"))
  np.testing.assert_allclose(f(q, k, v, is_causal=True, chunk_size=3), ref, rtol=1e-4, atol=1e-5)
  g = jax.vmap(functools.partial(efficient.linear_attention, is_causal=True, chunk_size=4))
  np.testing.assert_allclose(g(q[None], k[None], v[None])[0], ref, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("is_causal", [False, True])
def test_linear_attention_bfloat16_is_finite_and_close_to_float32(is_causal):
  b, t, n, h = 2, 21, 2, 8
  q, k, v = _rand(71, *[(b, t, n, h)] * 3)
  kw = dict(is_causal=is_causal, chunk_size=8)
  out32 = linear_attention(q, k, v, **kw)
  out16 = linear_attention(*(x.astype(jnp.bfloat16) for x in (q, k, v)), **kw)
  assert out16.dtype == jnp.bfloat16
  out16 = np.asarray(out16.astype(jnp.float32))
  assert np.all(np.isfinite(out16))
  np.testing.assert_allclose(out16, out32, atol=5e-2, rtol=5e-2)


def test_linear_attention_rejects_unknown_feature_map_naming_feature_map():
  (q,) = _rand(0, (1, 4, 1, 2))
  with pytest.raises(ValueError, match="`feature_map`"):
    linear_attention(q, q, q, feature_map="softmax")


@pytest.mark.parametrize("bad", [0, -2, 2.5])
def test_linear_attention_rejects_invalid_chunk_size_naming_chunk_size(bad):
  (q,) = _rand(0, (1, 4, 1, 2))
  with pytest.raises(ValueError, match="`chunk_size`"):
    linear_attention(q, q, q, is_causal=True, chunk_size=bad)


def test_linear_attention_causal_rejects_length_mismatch_naming_key():
  q, k = _rand(0, (1, 4, 1, 2), (1, 5, 1, 2))
  with pytest.raises(ValueError, match="`key` length"):
    linear_attention(q, k, k, is_causal=True)


def test_linear_attention_rejects_misshaped_kv_valid_naming_it():
  (q,) = _rand(0, (2, 4, 1, 2))
  with pytest.raises(ValueError, match="`kv_valid`"):
    linear_attention(q, q, q, kv_valid=np.ones((2, 3), bool))
