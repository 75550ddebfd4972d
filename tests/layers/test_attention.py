"""The MultiHeadAttention layer: Flax's parameter tree and values, cached decoding, relative positions."""

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from attnjax.layers.attention import MultiHeadAttention

B, T, S, D, N = 2, 6, 5, 16, 4


def test_layer_matches_flax_multi_head_attention_with_the_same_params(rng):
  x = jnp.asarray(rng.normal(size=(B, T, D)), jnp.float32)
  kv = jnp.asarray(rng.normal(size=(B, S, D)), jnp.float32)
  mask = jnp.asarray(rng.random((B, 1, T, S)) > 0.3).at[..., 0].set(True)
  ours = MultiHeadAttention(num_heads=N, qkv_features=D)
  params = nn.meta.unbox(ours.init(jax.random.PRNGKey(0), x, kv)["params"])
  params = jax.tree_util.tree_map(lambda p: jnp.asarray(rng.normal(size=p.shape), p.dtype) * 0.3, params)
  flax_layer = nn.MultiHeadDotProductAttention(num_heads=N, qkv_features=D, out_features=D, deterministic=True)
  flax_params = flax_layer.init(jax.random.PRNGKey(1), x, kv)["params"]
  assert jax.tree_util.tree_structure(params) == jax.tree_util.tree_structure(flax_params)
  assert jax.tree_util.tree_map(jnp.shape, params) == jax.tree_util.tree_map(jnp.shape, flax_params)
  out, _, w = ours.apply({"params": params}, x, kv, mask=mask, return_weights=True)
  ref, state = flax_layer.apply({"params": params}, x, kv, mask=mask, sow_weights=True, mutable=["intermediates"])
  np.testing.assert_allclose(out, ref, atol=1e-5, rtol=1e-5)
  np.testing.assert_allclose(w, state["intermediates"]["attention_weights"][0], atol=1e-6)


@pytest.mark.parametrize("relative", [None, "shaw"])
@pytest.mark.parametrize("chunks", [[1, 1, 1, 1, 1, 1], [3, 1, 2], [6]])
def test_cached_self_attention_equals_causal_attention_for_any_prefill_split(rng, relative, chunks):
  x = jnp.asarray(rng.normal(size=(B, T, D)), jnp.float32)
  layer = MultiHeadAttention(num_heads=N, qkv_features=D, relative=relative, max_relative_distance=2)
  variables = layer.init(jax.random.PRNGKey(0), x)
  full, _, _ = layer.apply(variables, x, is_causal=True)
  cache = {"key": jnp.zeros((B, T + 2, N, D // N)), "value": jnp.zeros((B, T + 2, N, D // N))}
  pieces, start = [], 0
  for size in chunks:
    out, cache, _ = layer.apply(variables, x[:, start:start + size], kv_cache=cache, cache_index=jnp.int32(start))
    pieces.append(out)
    start += size
  np.testing.assert_allclose(jnp.concatenate(pieces, 1), full, atol=1e-5, rtol=1e-5)


def test_cross_attention_cache_equals_direct_attention(rng):
  x = jnp.asarray(rng.normal(size=(B, T, D)), jnp.float32)
  memory = jnp.asarray(rng.normal(size=(B, S, D)), jnp.float32)
  layer = MultiHeadAttention(num_heads=N, qkv_features=D)
  variables = layer.init(jax.random.PRNGKey(0), x, memory)
  direct, _, _ = layer.apply(variables, x, memory)
  kv = layer.apply(variables, memory, method=layer.project_kv)
  cached, new_cache, _ = layer.apply(variables, x, kv_cache=kv)
  assert new_cache is None
  np.testing.assert_allclose(cached, direct, atol=1e-6)


def test_attention_dropout_uses_the_dropout_stream_only_when_not_deterministic(rng):
  x = jnp.asarray(rng.normal(size=(B, T, D)), jnp.float32)
  layer = MultiHeadAttention(num_heads=N, qkv_features=D, dropout_rate=0.5)
  variables = layer.init(jax.random.PRNGKey(0), x)
  det = layer.apply(variables, x)[0]
  drop = lambda seed: layer.apply(variables, x, deterministic=False, rngs={"dropout": jax.random.PRNGKey(seed)})[0]
  np.testing.assert_array_equal(drop(1), drop(1))
  assert not np.allclose(drop(1), det) and not np.allclose(drop(1), drop(2))


def test_heads_must_divide_features():
  with pytest.raises(ValueError, match="num_heads"):
    MultiHeadAttention(num_heads=3, qkv_features=16).init(jax.random.PRNGKey(0), jnp.zeros((1, 2, 16)))
