"""AdditiveAttention and LuongAttention against loop-level NumPy transcriptions of the formulas and the kernels."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from attnjax.kernels.additive import additive_attention
from attnjax.kernels.multiplicative import multiplicative_attention
from attnjax.layers.rnn_attention import AdditiveAttention, LuongAttention

B, T, S, DQ, DK, DV, A = 2, 3, 4, 5, 6, 7, 8
LENGTHS = np.array([4, 2])


def _inputs(rng, dq=DQ, dk=DK):
  query = jnp.asarray(rng.normal(size=(B, T, dq)), jnp.float32)
  keys = jnp.asarray(rng.normal(size=(B, S, dk)), jnp.float32)
  values = jnp.asarray(rng.normal(size=(B, S, DV)), jnp.float32)
  mask = jnp.asarray(np.arange(S)[None, :] < LENGTHS[:, None])
  return query, keys, values, mask


def _np_softmax_context(scores, values, mask):
  """a_ts = exp(e_ts) / sum_{s' real} exp(e_ts'), c_t = sum_s a_ts v_s, row by row in float64."""
  b_, t_, s_ = scores.shape
  weights = np.zeros((b_, t_, s_))
  context = np.zeros((b_, t_, values.shape[-1]))
  for b in range(b_):
    for t in range(t_):
      valid = np.ones(s_, bool) if mask is None else np.asarray(mask[b], bool)
      if not valid.any():
        continue
      e = np.where(valid, np.exp(scores[b, t] - scores[b, t][valid].max()), 0.0)
      weights[b, t] = e / e.sum()
      context[b, t] = sum(weights[b, t, s] * values[b, s] for s in range(s_))
  return context, weights


def np_additive(query, keys, values, w_query, w_keys, v, mask):
  """Bahdanau et al. (2015) Sec. 3.1: e_ts = v^T tanh(W_q q_t + W_k k_s), explicit loops in float64."""
  query, keys, values, w_query, w_keys, v = (np.asarray(x, np.float64) for x in (query, keys, values, w_query,
                                                                                 w_keys, v))
  scores = np.zeros((query.shape[0], query.shape[1], keys.shape[1]))
  for b in range(scores.shape[0]):
    for t in range(scores.shape[1]):
      for s in range(scores.shape[2]):
        scores[b, t, s] = v @ np.tanh(query[b, t] @ w_query + keys[b, s] @ w_keys)
  return _np_softmax_context(scores, values, mask)


def np_luong(query, keys, values, score, w, v, mask):
  """Luong et al. (2015) Eq. 8 (dot / general / concat), explicit loops in float64."""
  query, keys, values = (np.asarray(x, np.float64) for x in (query, keys, values))
  w = None if w is None else np.asarray(w, np.float64)
  v = None if v is None else np.asarray(v, np.float64)
  scores = np.zeros((query.shape[0], query.shape[1], keys.shape[1]))
  for b in range(scores.shape[0]):
    for t in range(scores.shape[1]):
      for s in range(scores.shape[2]):
        h_t, h_s = query[b, t], keys[b, s]
        if score == "dot":
          scores[b, t, s] = h_t @ h_s
        elif score == "general":
          scores[b, t, s] = h_t @ w @ h_s
        else:
          scores[b, t, s] = v @ np.tanh(w.T @ np.concatenate([h_t, h_s]))
  return _np_softmax_context(scores, values, mask)


# ------------------------------------------------------------------------------------------------ AdditiveAttention


def test_additive_parameters_are_named_and_shaped_after_the_paper(rng):
  query, keys, _, _ = _inputs(rng)
  params = AdditiveAttention(A).init(jax.random.PRNGKey(0), query, keys)["params"]
  assert jax.tree_util.tree_map(jnp.shape, params) == {"w_query": (DQ, A), "w_keys": (DK, A), "v": (A,)}


@pytest.mark.parametrize("masked", [False, True])
def test_additive_matches_numpy_transcription(rng, masked):
  query, keys, values, mask = _inputs(rng)
  mask = mask if masked else None
  layer = AdditiveAttention(A)
  variables = layer.init(jax.random.PRNGKey(0), query, keys, values=values, mask=mask)
  context, weights = layer.apply(variables, query, keys, values=values, mask=mask)
  p = variables["params"]
  want_context, want_weights = np_additive(query, keys, values, p["w_query"], p["w_keys"], p["v"], mask)
  np.testing.assert_allclose(np.asarray(weights), want_weights, atol=1e-5)
  np.testing.assert_allclose(np.asarray(context), want_context, atol=1e-5)
  assert context.shape == (B, T, DV) and weights.shape == (B, T, S) and weights.dtype == jnp.float32


def test_additive_precomputed_keys_equal_direct_call_and_kernel(rng):
  query, keys, values, mask = _inputs(rng)
  layer = AdditiveAttention(A)
  variables = layer.init(jax.random.PRNGKey(1), query, keys)
  keys_proj = layer.apply(variables, keys, method=layer.project_keys)
  p = variables["params"]
  np.testing.assert_allclose(np.asarray(keys_proj), np.asarray(keys @ p["w_keys"]), atol=1e-6)
  direct = layer.apply(variables, query, keys, values=values, mask=mask)
  cached = layer.apply(variables, query, keys, keys_proj=keys_proj, values=values, mask=mask)
  kernel = additive_attention(query, keys, values, w_query=p["w_query"], w_keys=p["w_keys"], v=p["v"], mask=mask)
  for got in (cached, kernel):
    np.testing.assert_allclose(np.asarray(got[0]), np.asarray(direct[0]), atol=1e-6)
    np.testing.assert_allclose(np.asarray(got[1]), np.asarray(direct[1]), atol=1e-6)


def test_additive_project_keys_alone_initialises_w_keys(rng):
  _, keys, _, _ = _inputs(rng)
  layer = AdditiveAttention(A)
  params = layer.init(jax.random.PRNGKey(0), keys, method=layer.project_keys)["params"]
  assert jax.tree_util.tree_map(jnp.shape, params) == {"w_keys": (DK, A)}


def test_additive_values_default_to_keys(rng):
  query, keys, _, mask = _inputs(rng)
  layer = AdditiveAttention(A)
  variables = layer.init(jax.random.PRNGKey(0), query, keys)
  default = layer.apply(variables, query, keys, mask=mask)
  explicit = layer.apply(variables, query, keys, values=keys, mask=mask)
  np.testing.assert_array_equal(np.asarray(default[0]), np.asarray(explicit[0]))


def test_additive_mask_zeroes_padding_and_fully_masked_rows(rng):
  query, keys, values, _ = _inputs(rng)
  mask = jnp.asarray([[True, True, False, False], [False] * S])
  layer = AdditiveAttention(A)
  variables = layer.init(jax.random.PRNGKey(0), query, keys)
  context, weights = layer.apply(variables, query, keys, values=values, mask=mask)
  w = np.asarray(weights)
  np.testing.assert_array_equal(w[0, :, 2:], 0.0)
  np.testing.assert_allclose(w[0].sum(-1), 1.0, atol=1e-6)
  np.testing.assert_array_equal(w[1], 0.0)
  np.testing.assert_array_equal(np.asarray(context[1]), 0.0)


def test_additive_bad_attention_dim_raises():
  with pytest.raises(ValueError, match="attention_dim"):
    AdditiveAttention(0)


# --------------------------------------------------------------------------------------------------- LuongAttention


@pytest.mark.parametrize("score,expected", [
    ("dot", {}),
    ("general", {"w_a": (DK, DK)}),
    ("concat", {"w_a": (2 * DK, DK), "v_a": (DK,)}),
])
def test_luong_parameters(rng, score, expected):
  query, keys, _, _ = _inputs(rng, dq=DK)
  variables = LuongAttention(score).init(jax.random.PRNGKey(0), query, keys)
  assert jax.tree_util.tree_map(jnp.shape, dict(variables.get("params", {}))) == expected


def test_luong_concat_attention_dim(rng):
  query, keys, _, _ = _inputs(rng)
  params = LuongAttention("concat", attention_dim=A).init(jax.random.PRNGKey(0), query, keys)["params"]
  assert jax.tree_util.tree_map(jnp.shape, params) == {"w_a": (DQ + DK, A), "v_a": (A,)}


@pytest.mark.parametrize("score", ["dot", "general", "concat"])
@pytest.mark.parametrize("masked", [False, True])
def test_luong_matches_numpy_transcription_and_kernel(rng, score, masked):
  dq = DK if score == "dot" else DQ
  query, keys, values, mask = _inputs(rng, dq=dq)
  mask = mask if masked else None
  layer = LuongAttention(score)
  variables = layer.init(jax.random.PRNGKey(2), query, keys, values=values, mask=mask)
  context, weights = layer.apply(variables, query, keys, values=values, mask=mask)
  p = variables.get("params", {})
  want_context, want_weights = np_luong(query, keys, values, score, p.get("w_a"), p.get("v_a"), mask)
  np.testing.assert_allclose(np.asarray(weights), want_weights, atol=1e-5)
  np.testing.assert_allclose(np.asarray(context), want_context, atol=1e-5)
  kernel = multiplicative_attention(query, keys, values, score=score, w=p.get("w_a"), v=p.get("v_a"), mask=mask)
  np.testing.assert_allclose(np.asarray(kernel[0]), np.asarray(context), atol=1e-6)
  if masked:
    np.testing.assert_array_equal(np.asarray(weights)[1, :, LENGTHS[1]:], 0.0)


def test_luong_dot_needs_equal_sizes(rng):
  query, keys, _, _ = _inputs(rng)  # DQ != DK
  with pytest.raises(ValueError, match="dot"):
    LuongAttention("dot").init(jax.random.PRNGKey(0), query, keys)


@pytest.mark.parametrize("kwargs,field", [
    ({"score": "bilinear"}, "score"),
    ({"score": "dot", "attention_dim": 4}, "attention_dim"),
    ({"score": "concat", "attention_dim": -1}, "attention_dim"),
])
def test_luong_bad_config_raises(kwargs, field):
  with pytest.raises(ValueError, match=field):
    LuongAttention(**kwargs)
