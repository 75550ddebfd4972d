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


@pytest.mark.parametrize("relative, layout", [(None, "key"), (None, "key_t"), ("shaw", "key")])
@pytest.mark.parametrize("chunks", [[1, 1, 1, 1, 1, 1], [3, 1, 2], [6]])
def test_cached_self_attention_equals_causal_attention_for_any_prefill_split(rng, relative, layout, chunks):
  """Both cache layouts: ``key``/``value`` [B, L, N, H], and ``key_t``/``value_t`` [B, N, H, L], the one
  ``init_self_cache`` gives full attention."""
  x = jnp.asarray(rng.normal(size=(B, T, D)), jnp.float32)
  layer = MultiHeadAttention(num_heads=N, qkv_features=D, relative=relative, max_relative_distance=2)
  variables = layer.init(jax.random.PRNGKey(0), x)
  full, _, _ = layer.apply(variables, x, is_causal=True)
  cache = {"key": jnp.zeros((B, T + 2, N, D // N)), "value": jnp.zeros((B, T + 2, N, D // N))}
  if layout == "key_t":
    cache = layer.apply(variables, B, T + 2, method=layer.init_self_cache)
    assert {name: x.shape for name, x in cache.items()} == {"key_t": (B, N, D // N, T + 2),
                                                             "value_t": (B, N, D // N, T + 2)}
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


@pytest.mark.parametrize("masking", ["segments", "mask_per_row", "mask_shared", "mask_of_keys_only"])
def test_a_cross_attention_cache_row_serves_its_beams_as_direct_attention_does(rng, masking):
  """Beam search keeps one cross-attention cache row per source for its K beams (query rows b·K .. b·K + K - 1):
  outputs and weights equal direct attention from each beam to its own copy of the memory."""
  k = 3
  x = jnp.asarray(rng.normal(size=(B * k, 2, D)), jnp.float32)
  memory = jnp.asarray(rng.normal(size=(B, S, D)), jnp.float32)
  key_mask = jnp.asarray([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]], jnp.int32)
  layer = MultiHeadAttention(num_heads=N, qkv_features=D)
  variables = layer.init(jax.random.PRNGKey(0), x[:B], memory)
  repeated = jnp.repeat(memory, k, axis=0)
  if masking == "segments":
    args = dict(segment_ids=(None, jnp.repeat(key_mask, k, axis=0)))
  elif masking == "mask_per_row":  # [B·K, N, T, S]: each beam's own, here differing between heads and queries
    args = dict(mask=jnp.asarray(rng.random((B * k, N, 2, S)) > 0.3).at[..., 0].set(True))
  elif masking == "mask_shared":  # [1, 1, 1, S]
    args = dict(mask=jnp.asarray([[[[True, True, False, True, False]]]]))
  else:  # [S]: broadcast like any other
    args = dict(mask=jnp.asarray([True, False, True, True, False]))
  direct, _, direct_w = layer.apply(variables, x, repeated, return_weights=True, **args)
  kv = layer.apply(variables, memory, method=layer.project_kv)
  shared, _, shared_w = layer.apply(variables, x, kv_cache=kv, return_weights=True, **args)
  np.testing.assert_allclose(shared, direct, atol=1e-6)
  np.testing.assert_allclose(shared_w, direct_w, atol=1e-6)
  with pytest.raises(ValueError, match="serves a multiple of 2 query rows, got 5"):
    layer.apply(variables, x[:5], kv_cache=kv)


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


def _projected(layer, variables, x):
  """q, k, v ``[B, T, N, H]`` from the layer's own projections (NumPy, float64)."""
  del layer
  p = nn.meta.unbox(variables["params"])
  proj = lambda name: np.einsum("btd,dnh->btnh", x, np.asarray(p[name]["kernel"], np.float64)) + \
      np.asarray(p[name]["bias"], np.float64)
  return proj("query"), proj("key"), proj("value")


def _out(variables, z):
  p = nn.meta.unbox(variables["params"])["out"]
  return np.einsum("btnh,nhd->btd", z, np.asarray(p["kernel"], np.float64)) + np.asarray(p["bias"], np.float64)


def _softmax_attention(q, k, v, allowed, bias=None):
  """softmax_j(q_i . k_j / sqrt(H) + bias_ij) over allowed keys, [B, T, N, H] (a NumPy transcription)."""
  logits = np.einsum("btnh,bsnh->bnts", q, k) / np.sqrt(q.shape[-1])
  if bias is not None:
    logits = logits + bias
  logits = np.where(allowed, logits, -np.inf)
  weights = np.exp(logits - logits.max(-1, keepdims=True))
  weights = weights / weights.sum(-1, keepdims=True)
  return np.einsum("bnts,bsnh->btnh", weights, v)


@pytest.mark.parametrize("causal", [False, True])
def test_local_attention_is_softmax_over_a_band_of_keys(causal):
  b, t, d, window = 2, 9, 8, 2
  layer = MultiHeadAttention(num_heads=2, qkv_features=d, attention_type="local", window=window)
  x = np.random.default_rng(0).normal(size=(b, t, d))
  valid = np.ones((b, t), bool)
  valid[1, 6:] = False
  variables = layer.init(jax.random.PRNGKey(0), jnp.asarray(x, jnp.float32))
  out, _, _ = layer.apply(variables, jnp.asarray(x, jnp.float32), mask=jnp.asarray(valid)[:, None, None, :],
                          is_causal=causal)
  q, k, v = _projected(layer, variables, x)
  i, j = np.arange(t)[:, None], np.arange(t)[None, :]
  band = (j >= i - window) & ((j <= i) if causal else (j <= i + window))
  expected = _out(variables, _softmax_attention(q, k, v, band[None, None] & valid[:, None, None, :]))
  np.testing.assert_allclose(np.asarray(out)[0], expected[0], atol=1e-4)
  np.testing.assert_allclose(np.asarray(out)[1, :6], expected[1, :6], atol=1e-4)


def test_linear_attention_is_katharopoulos_feature_map_attention():
  b, t, d = 2, 7, 8
  layer = MultiHeadAttention(num_heads=2, qkv_features=d, attention_type="linear")
  x = np.random.default_rng(1).normal(size=(b, t, d))
  variables = layer.init(jax.random.PRNGKey(0), jnp.asarray(x, jnp.float32))
  out, _, _ = layer.apply(variables, jnp.asarray(x, jnp.float32), is_causal=True)
  q, k, v = _projected(layer, variables, x)
  phi = lambda a: np.where(a > 0, a + 1.0, np.exp(a))  # elu(a) + 1
  scores = np.einsum("btnh,bsnh->bnts", phi(q), phi(k)) * np.tril(np.ones((t, t)))[None, None]
  z = np.einsum("bnts,bsnh->btnh", scores, v) / (np.moveaxis(scores.sum(-1), 1, 2)[..., None] + 1e-6)
  np.testing.assert_allclose(np.asarray(out), _out(variables, z), atol=1e-4)


@pytest.mark.parametrize("bidirectional", [True, False])
def test_t5_bias_is_a_learned_scalar_per_bucket_and_head(bidirectional):
  """Raffel et al. 2020: half the buckets for exact small distances, the rest logarithmic up to max_distance; in a
  causal decoder only the past counts (every future distance falls in bucket 0)."""
  b, t, d = 1, 12, 8
  layer = MultiHeadAttention(num_heads=2, qkv_features=d, relative="t5", bidirectional=bidirectional,
                             t5_num_buckets=8, t5_max_distance=10)
  x = np.random.default_rng(2).normal(size=(b, t, d))
  variables = layer.init(jax.random.PRNGKey(0), jnp.asarray(x, jnp.float32))
  out, _, _ = layer.apply(variables, jnp.asarray(x, jnp.float32), is_causal=not bidirectional)
  table = np.asarray(nn.meta.unbox(variables["params"])["rel_bias"], np.float64)  # [8 buckets, 2 heads]

  def bucket(rel):  # rel = j - i, written from the paper's description (T5's relative_position_bucket)
    n, exact = (4, 2) if bidirectional else (8, 4)
    offset = 4 if bidirectional and rel > 0 else 0
    distance = abs(rel) if bidirectional else max(-rel, 0)
    if distance < exact:
      return offset + distance
    large = exact + int(np.log(distance / exact) / np.log(10 / exact) * (n - exact))
    return offset + min(large, n - 1)

  bias = np.array([[[table[bucket(j - i), h] for j in range(t)] for i in range(t)] for h in range(2)])[None]
  allowed = np.ones((t, t), bool) if bidirectional else np.tril(np.ones((t, t), bool))
  q, k, v = _projected(layer, variables, x)
  np.testing.assert_allclose(np.asarray(out), _out(variables, _softmax_attention(q, k, v, allowed, bias)), atol=1e-4)
