"""scaled_dot_product_attention, implementation="xla": against jax.nn.dot_product_attention and a NumPy loop."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.test_util import check_grads

from attnjax.kernels import (causal_mask, padding_mask, projected_memory_attention,
                             scaled_dot_product_attention)
from tests.kernels import reference

B, T, S, N, H = 2, 7, 9, 3, 8


def _qkv(rng, t=T, s=S, dtype=np.float32):
  return tuple(jnp.asarray(rng.normal(size=shape), dtype) for shape in ((B, t, N, H), (B, s, N, H), (B, s, N, H)))


def _mask(rng, t=T, s=S):
  m = rng.random((B, 1, t, s)) > 0.3
  m[:, :, :, 0] = True  # every row keeps a key, so jax.nn (which has no zero-row rule) is comparable
  return jnp.asarray(m)


@pytest.mark.parametrize("use_mask", [False, True])
@pytest.mark.parametrize("use_bias", [False, True])
@pytest.mark.parametrize("is_causal", [False, True])
def test_xla_matches_jax_nn_dot_product_attention(rng, use_mask, use_bias, is_causal):
  q, k, v = _qkv(rng, s=T)  # T == S so that jax.nn's causal mask is defined the same way
  mask = _mask(rng, s=T) if use_mask else None
  bias = jnp.asarray(rng.normal(size=(1, N, T, T)), jnp.float32) if use_bias else None
  ours = scaled_dot_product_attention(q, k, v, mask=mask, bias=bias, is_causal=is_causal)
  ref = jax.nn.dot_product_attention(q, k, v, mask=mask, bias=bias, is_causal=is_causal, implementation="xla")
  np.testing.assert_allclose(ours, ref, atol=2e-6, rtol=1e-5)


def test_output_and_weights_match_numpy_transcription(rng):
  q, k, v = _qkv(rng)
  mask = _mask(rng)
  bias = rng.normal(size=(B, N, T, S)).astype(np.float32)
  out, weights = scaled_dot_product_attention(q, k, v, mask=mask, bias=bias, scale=0.3, return_weights=True)
  ref_out, ref_w = reference.attention(q, k, v, mask=mask, bias=bias, scale=0.3)
  assert out.shape == (B, T, N, H) and weights.shape == (B, N, T, S)
  np.testing.assert_allclose(out, ref_out, atol=1e-5)
  np.testing.assert_allclose(weights, ref_w, atol=1e-6)


def test_attention_over_a_projected_memory_in_its_head_major_layout_matches_numpy_transcription(rng):
  """The cross-attention cache's kernel: keys and values given as [B, N, H, S], the same attention (default scale,
  masked keys, a fully masked row giving zeros) as the NumPy transcription over [B, S, N, H]."""
  q, k, v = _qkv(rng)
  mask = np.array(_mask(rng))
  mask[1, :, 2] = False  # one query sees no key
  head_major = lambda x: jnp.transpose(x, (0, 2, 3, 1))  # noqa: E731
  out, weights = projected_memory_attention(q, head_major(k), head_major(v), mask=jnp.asarray(mask))
  ref_out, ref_w = reference.attention(q, k, v, mask=mask, scale=1.0 / np.sqrt(H))
  np.testing.assert_allclose(out, ref_out, atol=1e-5)
  np.testing.assert_allclose(weights, ref_w, atol=1e-6)
  with pytest.raises(ValueError, match=r"key and value must be \[B, N, H, S\]"):
    projected_memory_attention(q, k, v)


def test_default_scale_is_inverse_sqrt_head_dim(rng):
  q, k, v = _qkv(rng)
  ref_out, _ = reference.attention(q, k, v, scale=1 / np.sqrt(H))
  np.testing.assert_allclose(scaled_dot_product_attention(q, k, v), ref_out, atol=1e-5)


@pytest.mark.parametrize("implementation", ["xla", "blockwise"])
def test_fully_masked_row_gives_zeros_in_output_weights_and_grads(rng, implementation):
  q, k, v = _qkv(rng)
  mask = np.ones((B, 1, T, S), bool)
  mask[0, 0, 2, :] = False
  mask[1, 0, :, 3:] = False
  mask = jnp.asarray(mask)
  kw = dict(mask=mask, implementation=implementation, block_q=4, block_kv=4)
  out = scaled_dot_product_attention(q, k, v, **kw)
  np.testing.assert_array_equal(out[0, 2], 0.0)
  if implementation == "xla":
    _, w = scaled_dot_product_attention(q, k, v, mask=mask, return_weights=True)
    np.testing.assert_array_equal(w[0, :, 2], 0.0)
    np.testing.assert_allclose(w[1].sum(-1), 1.0, rtol=1e-6)
  grads = jax.grad(lambda q, k, v: jnp.sum(jnp.sin(scaled_dot_product_attention(q, k, v, **kw))), (0, 1, 2))(q, k, v)
  for g in grads:
    assert np.isfinite(np.asarray(g)).all()
  np.testing.assert_array_equal(grads[0][0, 2], 0.0)  # no key to attend: the query gets no gradient
  np.testing.assert_array_equal(grads[1][1, 3:], 0.0)  # masked keys get no gradient
  np.testing.assert_array_equal(grads[2][1, 3:], 0.0)


def test_padding_and_causal_masks_compose_with_kernel(rng):
  q, k, v = _qkv(rng, s=T)
  valid = np.arange(T)[None, :] < np.array([[T], [4]])
  mask = padding_mask(valid, valid) & causal_mask(T)
  out = scaled_dot_product_attention(q, k, v, mask=mask)
  ref_out, _ = reference.attention(q, k, v, mask=np.asarray(mask))
  np.testing.assert_allclose(out, ref_out, atol=1e-5)
  np.testing.assert_array_equal(out[1, 4:], 0.0)


def test_gradients_match_numerical_differentiation(rng, x64):
  q, k, v = _qkv(rng, dtype=np.float64)
  mask = _mask(rng)
  bias = jnp.asarray(rng.normal(size=(1, N, T, S)))
  f = lambda q, k, v, bias: scaled_dot_product_attention(q, k, v, mask=mask, bias=bias, is_causal=True)
  check_grads(f, (q, k, v, bias), order=1, modes=["rev"], atol=1e-6, rtol=1e-6)
  check_grads(f, (q, k, v, bias), order=2, modes=["rev"], atol=1e-3, rtol=1e-3)  # finite differences of grads


def test_bfloat16_inputs_keep_dtype_and_stay_close_to_float32(rng):
  q, k, v = _qkv(rng)
  mask = _mask(rng)
  ref = scaled_dot_product_attention(q, k, v, mask=mask)
  out, w = scaled_dot_product_attention(*(x.astype(jnp.bfloat16) for x in (q, k, v)), mask=mask,
                                        return_weights=True)
  assert out.dtype == jnp.bfloat16 and w.dtype == jnp.float32  # softmax ran in float32
  np.testing.assert_allclose(np.asarray(out, np.float32), ref, atol=5e-2)
  np.testing.assert_allclose(w.sum(-1), 1.0, rtol=1e-5)


def test_dropout_is_inverted_and_drops_the_requested_fraction(rng):
  q, k, v = _qkv(rng, t=64, s=64)
  v = jnp.ones_like(v)  # with v = 1 each output is the sum of the kept, rescaled weights
  rate = 0.25
  key = jax.random.PRNGKey(0)
  out = scaled_dot_product_attention(q, k, v, dropout_rate=rate, dropout_rng=key)
  np.testing.assert_allclose(float(out.mean()), 1.0, atol=0.02)  # E[kept / (1 - rate)] = 1
  # the fraction of dropped entries, read through the dropped weights of a uniform attention
  uniform = scaled_dot_product_attention(jnp.zeros_like(q), k, jnp.eye(64)[None, :, None, :H].repeat(B, 0)
                                         .repeat(N, 2), dropout_rate=rate, dropout_rng=key)
  dropped = float((np.asarray(uniform) == 0).mean())
  assert abs(dropped - rate) < 0.03, dropped
  same = scaled_dot_product_attention(q, k, v, dropout_rate=rate, dropout_rng=key)
  other = scaled_dot_product_attention(q, k, v, dropout_rate=rate, dropout_rng=jax.random.PRNGKey(1))
  np.testing.assert_array_equal(out, same)
  assert not np.allclose(out, other)


def test_jit_and_vmap_agree_with_eager(rng):
  q, k, v = _qkv(rng)
  mask = _mask(rng)
  eager = scaled_dot_product_attention(q, k, v, mask=mask)
  jitted = jax.jit(lambda q, k, v: scaled_dot_product_attention(q, k, v, mask=mask))(q, k, v)
  mapped = jax.vmap(lambda q, k, v, m: scaled_dot_product_attention(q[None], k[None], v[None], mask=m[None])[0])(
      q, k, v, mask)
  np.testing.assert_allclose(jitted, eager, atol=1e-6)
  np.testing.assert_allclose(mapped, eager, atol=1e-6)


@pytest.mark.parametrize("kwargs, match", [
    (dict(mask=np.ones((B, N, T, T + 1), bool)), "mask"),
    (dict(mask=np.ones((B, 1, T, S), np.float32)), "mask must be boolean"),
    (dict(bias=np.ones((3, N, T, S))), "bias"),
    (dict(implementation="flash"), "implementation"),
    (dict(dropout_rate=0.1), "dropout_rng"),
    (dict(dropout_rate=1.0, dropout_rng=jax.random.PRNGKey(0)), "dropout_rate"),
    (dict(implementation="blockwise", return_weights=True), "return_weights"),
])
def test_bad_arguments_raise_errors_naming_them(rng, kwargs, match):
  q, k, v = _qkv(rng)
  with pytest.raises(ValueError, match=match):
    scaled_dot_product_attention(q, k, v, **kwargs)


def test_mismatched_query_key_shapes_are_rejected(rng):
  q, k, v = _qkv(rng)
  with pytest.raises(ValueError, match="key shape"):
    scaled_dot_product_attention(q, k[..., :4], v)
  with pytest.raises(ValueError, match="query must be"):
    scaled_dot_product_attention(q[0], k, v)
