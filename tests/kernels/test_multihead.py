"""multi_head_attention against flax.linen.MultiHeadDotProductAttention sharing one parameter tree."""

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from attnjax.kernels import multi_head_attention, padding_mask, shaw_relative_embeddings

B, T, S, D, N = 2, 6, 9, 16, 4


def _flax(rng, inputs_q, inputs_kv, mask=None):
  layer = nn.MultiHeadDotProductAttention(num_heads=N, qkv_features=D, out_features=D, deterministic=True)
  params = layer.init(jax.random.PRNGKey(0), inputs_q, inputs_kv)["params"]
  # flax initialises biases at zero; random ones make the comparison cover them too
  params = jax.tree_util.tree_map(lambda p: jnp.asarray(rng.normal(size=p.shape), p.dtype) * 0.3, params)
  out, state = layer.apply({"params": params}, inputs_q, inputs_kv, mask=mask, sow_weights=True,
                           mutable=["intermediates"])
  return params, out, state["intermediates"]["attention_weights"][0]


@pytest.mark.parametrize("implementation", ["xla", "blockwise"])
def test_multi_head_attention_matches_flax_on_shared_params(rng, implementation):
  x_q = jnp.asarray(rng.normal(size=(B, T, D)), jnp.float32)
  x_kv = jnp.asarray(rng.normal(size=(B, S, D)), jnp.float32)
  kv_valid = np.arange(S)[None] < np.array([[S], [5]])
  mask = padding_mask(None, kv_valid)
  params, ref_out, ref_w = _flax(rng, x_q, x_kv, mask)
  assert set(params) == {"query", "key", "value", "out"} and params["query"]["kernel"].shape == (D, N, D // N)
  out = multi_head_attention(x_q, x_kv, params, num_heads=N, mask=mask, implementation=implementation)
  np.testing.assert_allclose(out, ref_out, atol=1e-5, rtol=1e-5)
  if implementation == "xla":
    _, w = multi_head_attention(x_q, x_kv, params, num_heads=N, mask=mask, return_weights=True)
    np.testing.assert_allclose(w, ref_w, atol=1e-6)


def test_self_attention_with_causal_mask_matches_flax(rng):
  x = jnp.asarray(rng.normal(size=(B, T, D)), jnp.float32)
  mask = nn.make_causal_mask(jnp.ones((B, T)))
  params, ref_out, _ = _flax(rng, x, x, mask)
  np.testing.assert_allclose(multi_head_attention(x, None, params, num_heads=N, is_causal=True), ref_out,
                             atol=1e-5, rtol=1e-5)


def test_zero_relative_embeddings_reduce_to_plain_attention(rng):
  x = jnp.asarray(rng.normal(size=(B, T, D)), jnp.float32)
  params, ref_out, _ = _flax(rng, x, x)
  zeros = shaw_relative_embeddings(jnp.zeros((5, D // N)), jnp.arange(T), jnp.arange(T), 2)
  out = multi_head_attention(x, x, params, num_heads=N, rel_key=zeros, rel_value=zeros)
  np.testing.assert_allclose(out, ref_out, atol=1e-5, rtol=1e-5)


def test_gradients_flow_to_every_parameter(rng):
  x = jnp.asarray(rng.normal(size=(B, T, D)), jnp.float32)
  params, _, _ = _flax(rng, x, x)
  grads = jax.grad(lambda p: jnp.sum(multi_head_attention(x, x, p, num_heads=N) ** 2))(params)
  for path, g in jax.tree_util.tree_leaves_with_path(grads):
    assert np.isfinite(np.asarray(g)).all() and np.abs(np.asarray(g)).sum() > 0, path


def test_wrong_head_count_is_rejected_naming_the_kernel(rng):
  x = jnp.asarray(rng.normal(size=(B, T, D)), jnp.float32)
  params, _, _ = _flax(rng, x, x)
  with pytest.raises(ValueError, match=r"params\['query'\]\['kernel'\]"):
    multi_head_attention(x, x, params, num_heads=2)
