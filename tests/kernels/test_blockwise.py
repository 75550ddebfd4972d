"""implementation="blockwise" (online softmax, custom VJP) against implementation="xla": values and gradients."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.test_util import check_grads

from attnjax.kernels import scaled_dot_product_attention

B, N, H = 2, 2, 8


def _inputs(rng, t, s, dtype=np.float32):
  q = jnp.asarray(rng.normal(size=(B, t, N, H)), dtype)
  k = jnp.asarray(rng.normal(size=(B, s, N, H)), dtype)
  v = jnp.asarray(rng.normal(size=(B, s, N, H)), dtype)
  return q, k, v


def _loss(impl, q, k, v, bias, **kw):
  out = scaled_dot_product_attention(q, k, v, bias=bias, implementation=impl, **kw)
  return jnp.sum(jnp.sin(out) * jnp.arange(out.shape[1])[None, :, None, None])


def _assert_same_values_and_grads(q, k, v, bias=None, **kw):
  ref_out = scaled_dot_product_attention(q, k, v, bias=bias, **kw)
  out = scaled_dot_product_attention(q, k, v, bias=bias, implementation="blockwise", **kw)
  np.testing.assert_allclose(out, ref_out, atol=1e-5, rtol=1e-5)
  kw_x = {key: val for key, val in kw.items() if key not in ("block_q", "block_kv")}
  argnums = (0, 1, 2) if bias is None else (0, 1, 2, 3)
  ref_g = jax.grad(functools.partial(_loss, "xla", **kw_x), argnums)(q, k, v, bias)
  got_g = jax.grad(functools.partial(_loss, "blockwise", **kw), argnums)(q, k, v, bias)
  for name, a, b in zip("qkvb", got_g, ref_g):
    np.testing.assert_allclose(a, b, atol=2e-5, rtol=1e-4, err_msg=f"d{name}")


@pytest.mark.parametrize("t, s, block_q, block_kv", [
    (16, 16, 4, 4), (33, 47, 8, 16), (47, 33, 16, 8), (64, 64, 64, 64), (20, 20, 7, 5), (5, 64, 8, 16)])
@pytest.mark.parametrize("is_causal", [False, True])
def test_blockwise_matches_xla_values_and_gradients(rng, t, s, block_q, block_kv, is_causal):
  q, k, v = _inputs(rng, t, s)
  _assert_same_values_and_grads(q, k, v, is_causal=is_causal, block_q=block_q, block_kv=block_kv)


@pytest.mark.parametrize("mask_shape", [(B, 1, 1, 40), (B, 1, 24, 40), (B, N, 24, 40), (1, 1, 24, 1)])
def test_blockwise_matches_xla_with_masks_of_every_broadcast_shape(rng, mask_shape):
  q, k, v = _inputs(rng, 24, 40)
  mask = rng.random(mask_shape) > 0.4
  mask[..., 0] = True
  _assert_same_values_and_grads(q, k, v, mask=jnp.asarray(mask), block_q=8, block_kv=16)


@pytest.mark.parametrize("bias_shape", [(B, N, 24, 40), (1, N, 24, 40), (B, 1, 1, 40)])
def test_blockwise_matches_xla_with_bias_including_its_gradient(rng, bias_shape):
  q, k, v = _inputs(rng, 24, 40)
  bias = jnp.asarray(rng.normal(size=bias_shape), jnp.float32)
  mask = jnp.asarray(rng.random((B, 1, 24, 40)) > 0.2)
  _assert_same_values_and_grads(q, k, v, bias, mask=mask, is_causal=True, block_q=8, block_kv=8)


def test_blockwise_dropout_drops_exactly_the_entries_xla_drops(rng):
  q, k, v = _inputs(rng, 30, 30)
  mask = jnp.asarray(rng.random((B, 1, 30, 30)) > 0.3)
  _assert_same_values_and_grads(q, k, v, mask=mask, dropout_rate=0.3, dropout_rng=jax.random.PRNGKey(3),
                                block_q=8, block_kv=16)


def test_blockwise_gradients_match_numerical_differentiation(rng, x64):
  q, k, v = _inputs(rng, 12, 10, np.float64)
  bias = jnp.asarray(rng.normal(size=(1, N, 12, 10)))
  f = lambda q, k, v, bias: scaled_dot_product_attention(q, k, v, bias=bias, is_causal=True,
                                                         implementation="blockwise", block_q=4, block_kv=3)
  check_grads(f, (q, k, v, bias), order=1, modes=["rev"], atol=1e-6, rtol=1e-6)


def test_blockwise_bfloat16_stays_close_to_float32(rng):
  q, k, v = _inputs(rng, 32, 32)
  ref = scaled_dot_product_attention(q, k, v, is_causal=True)
  out = scaled_dot_product_attention(*(x.astype(jnp.bfloat16) for x in (q, k, v)), is_causal=True,
                                     implementation="blockwise", block_q=8, block_kv=8)
  assert out.dtype == jnp.bfloat16
  np.testing.assert_allclose(np.asarray(out, np.float32), ref, atol=5e-2)


def test_blockwise_works_under_jit_and_vmap(rng):
  q, k, v = _inputs(rng, 16, 16)
  f = lambda q, k, v: scaled_dot_product_attention(q, k, v, implementation="blockwise", block_q=4, block_kv=8)
  ref = scaled_dot_product_attention(q, k, v)
  np.testing.assert_allclose(jax.jit(f)(q, k, v), ref, atol=1e-5)
  mapped = jax.vmap(lambda q, k, v: f(q[None], k[None], v[None])[0])(q, k, v)
  np.testing.assert_allclose(mapped, ref, atol=1e-5)


def _temp_bytes(impl, t):
  shape = jax.ShapeDtypeStruct((1, t, 2, 32), jnp.float32)
  f = jax.jit(jax.grad(lambda q, k, v: jnp.sum(scaled_dot_product_attention(q, k, v, implementation=impl,
                                                                            block_q=256, block_kv=256)), (0, 1, 2)))
  stats = f.lower(shape, shape, shape).compile().memory_analysis()
  return None if stats is None else stats.temp_size_in_bytes


def test_blockwise_temp_memory_grows_linearly_while_xla_grows_quadratically():
  small, large = _temp_bytes("blockwise", 1024), _temp_bytes("blockwise", 4096)
  naive_large = _temp_bytes("xla", 4096)
  if small is None or naive_large is None:
    pytest.skip("memory_analysis() unavailable on this backend")
  assert large <= 5 * small, (small, large)  # 4x the length: ~4x memory, not 16x
  assert large * 8 <= naive_large, (large, naive_large)
