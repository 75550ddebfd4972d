"""ConvS2S (Gehring et al. 2017): the interface conformance checks plus NumPy transcriptions of §3.2–3.4."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from attnjax.models.convs2s import ConvS2S, EncoderBlock, MultiStepAttention, scale_gradient
from tests.models import conformance

V, E, C, B, S, T = 11, 8, 8, 3, 6, 5
SRC_LENGTHS, TGT_LENGTHS = (6, 4, 2), (5, 3, 4)


def _model(**overrides):
  fields = dict(src_vocab_size=V, tgt_vocab_size=V, embed_dim=E, hidden_dim=C, encoder_layers=2, decoder_layers=2,
                kernel_width=3, dropout_rate=0.0, max_length=16, dtype=jnp.float32)
  return ConvS2S(**{**fields, **overrides})


@pytest.fixture(scope="module")
def setup():
  """A model, its variables and a padded batch; module-scoped so that init runs once."""
  model = _model()
  src, tgt = conformance.random_batch(np.random.default_rng(0), B, S, T, V, src_lengths=SRC_LENGTHS,
                                      tgt_lengths=TGT_LENGTHS)
  return model, conformance.init(model, src, tgt), src, tgt


def _weight_norm(p):
  """W = g·V/‖V‖ over every axis but the last (output) one."""
  v, g = np.asarray(p["kernel_v"], np.float64), np.asarray(p["kernel_g"], np.float64)
  return g * v / np.sqrt((v ** 2).sum(axis=tuple(range(v.ndim - 1)), keepdims=True))


def _sigmoid(x):
  return 1.0 / (1.0 + np.exp(-x))


# ---------------------------------------------------------------------------------------------- interface


def test_output_memory_and_cache_shapes(setup):
  model, variables, src, tgt = setup
  logits = model.apply(variables, src, tgt)
  assert logits.shape == (B, T, V) and logits.dtype == jnp.float32
  memory = model.apply(variables, src, method=model.encode)
  assert set(memory) == {"src_mask", "encoded", "encoded_plus_embed"}
  assert memory["src_mask"].shape == (B, S) and memory["src_mask"].dtype == jnp.bool_
  assert memory["encoded"].shape == memory["encoded_plus_embed"].shape == (B, S, E)
  pad = ~np.asarray(memory["src_mask"])
  assert not np.asarray(memory["encoded"])[pad].any() and not np.asarray(memory["encoded_plus_embed"])[pad].any()
  cache = model.apply(variables, memory, T, method=model.init_cache)
  assert cache["index"].shape == (B,) and cache["index"].dtype == jnp.int32
  assert cache["conv_inputs"].shape == (B, 2, 2, C)
  out = model.apply(variables, tgt[:, :2], memory, cache, method=model.decode)
  np.testing.assert_array_equal(out.cache["index"], [2, 2, 2])
  assert out.attention is None


def test_finite_nonzero_gradients():
  model = _model(dropout_rate=0.2)
  src, tgt = conformance.random_batch(np.random.default_rng(1), B, S, T, V, src_lengths=SRC_LENGTHS)
  conformance.assert_finite_nonzero_gradients(model, conformance.init(model, src, tgt), src, tgt)


@pytest.mark.parametrize("prefill", [0, 3])
def test_teacher_forcing_equals_incremental(setup, prefill):
  model, variables, src, tgt = setup
  conformance.assert_teacher_forcing_equals_incremental(model, variables, src, tgt, prefill=prefill)


def test_padding_does_not_change_real_positions(setup):
  model, variables, src, tgt = setup
  conformance.assert_padding_does_not_change_real_positions(model, variables, src, tgt)


def test_decoder_is_causal(setup):
  model, variables, src, tgt = setup
  logits = np.asarray(model.apply(variables, src, tgt))
  for t in (1, 3):
    changed = tgt.at[:, t].set(jnp.where(tgt[:, t] == 4, 5, 4))
    logits_c = np.asarray(model.apply(variables, src, changed))
    np.testing.assert_allclose(logits_c[:, :t], logits[:, :t], atol=1e-6)
    assert np.abs(logits_c[:, t] - logits[:, t]).max() > 1e-6


def test_dropout_uses_dropout_stream():
  model = _model(dropout_rate=0.3)
  src, tgt = conformance.random_batch(np.random.default_rng(2), B, S, T, V)
  variables = conformance.init(model, src, tgt)

  def run(seed):
    return np.asarray(model.apply(variables, src, tgt, deterministic=False, rngs={"dropout": jax.random.PRNGKey(seed)}))

  np.testing.assert_array_equal(run(0), run(0))
  assert np.abs(run(0) - run(1)).max() > 1e-6
  assert np.abs(run(0) - np.asarray(model.apply(variables, src, tgt))).max() > 1e-6


# ------------------------------------------------------------------------------------- paper transcriptions


def test_encoder_block_matches_numpy_glu_residual(rng):
  """h^l_i = (v(W [h^{l-1}_{i-1}, h^{l-1}_i, h^{l-1}_{i+1}] + b) + h^{l-1}_i)·sqrt(0.5), v([A B]) = A⊗σ(B)."""
  block = EncoderBlock(hidden_dim=C, kernel_width=3)
  x = rng.normal(size=(B, S, C)).astype(np.float32)
  mask = np.arange(S)[None, :] < np.asarray(SRC_LENGTHS)[:, None]
  params = block.init(jax.random.PRNGKey(0), jnp.asarray(x), jnp.asarray(mask))["params"]
  out = np.asarray(block.apply({"params": params}, jnp.asarray(x), jnp.asarray(mask)))

  w = _weight_norm(params["conv"])  # [k, C, 2C]
  b = np.asarray(params["conv"]["bias"], np.float64)
  xz = np.where(mask[..., None], x, 0.0).astype(np.float64)  # padding enters the conv as zeros
  ref = np.zeros((B, S, C))
  for bi in range(B):
    for i in range(S):
      y = b.copy()
      for j in range(3):
        src_pos = i - 1 + j
        if 0 <= src_pos < S:
          y += xz[bi, src_pos] @ w[j]
      a, gate = y[:C], y[C:]
      ref[bi, i] = (a * _sigmoid(gate) + x[bi, i]) * np.sqrt(0.5)
  np.testing.assert_allclose(out, ref, atol=1e-5)


def test_multi_step_attention_matches_numpy_transcription(rng):
  """§3.3 with the §3.4 scaling, one layer: d = W_d h + b_d + g; a = softmax(d·z) over real j;
  c = m·sqrt(1/m)·Σ_j a_ij (z_j + e_j); out = (h + W_c c + b_c)·sqrt(0.5)."""
  attention = MultiStepAttention(embed_dim=E)
  h = rng.normal(size=(B, T, C)).astype(np.float32)
  g = rng.normal(size=(B, T, E)).astype(np.float32)
  z = rng.normal(size=(B, S, E)).astype(np.float32)
  ze = z + rng.normal(size=(B, S, E)).astype(np.float32)
  mask = np.arange(S)[None, :] < np.asarray(SRC_LENGTHS)[:, None]
  args = tuple(jnp.asarray(a) for a in (h, g, z, ze, mask))
  params = attention.init(jax.random.PRNGKey(0), *args)["params"]
  out, weights = attention.apply({"params": params}, *args)

  wd, bd = _weight_norm(params["in_proj"]), np.asarray(params["in_proj"]["bias"], np.float64)
  wc, bc = _weight_norm(params["out_proj"]), np.asarray(params["out_proj"]["bias"], np.float64)
  ref_out, ref_a = np.zeros((B, T, C)), np.zeros((B, T, S))
  for bi in range(B):
    m = int(mask[bi].sum())
    for i in range(T):
      d = h[bi, i] @ wd + bd + g[bi, i]
      scores = np.array([d @ z[bi, j] for j in range(m)])
      a = np.exp(scores - scores.max())
      a /= a.sum()
      c = sum(a[j] * ze[bi, j] for j in range(m)) * m * np.sqrt(1.0 / m)
      ref_a[bi, i, :m] = a
      ref_out[bi, i] = (h[bi, i] + c @ wc + bc) * np.sqrt(0.5)
  np.testing.assert_allclose(np.asarray(weights), ref_a, atol=1e-6)
  np.testing.assert_allclose(np.asarray(out), ref_out, atol=1e-5)


def test_attention_sums_to_one_over_real_source_and_zero_on_padding(setup):
  model, variables, src, tgt = setup
  memory = model.apply(variables, src, method=model.encode)
  out = model.apply(variables, tgt, memory, return_attention=True, method=model.decode)
  attn = np.asarray(out.attention)
  assert attn.shape == (B, T, S)
  real = np.arange(S)[None, :] < np.asarray(SRC_LENGTHS)[:, None]
  np.testing.assert_allclose(attn.sum(-1), 1.0, atol=1e-5)
  assert not attn[np.broadcast_to(~real[:, None, :], attn.shape)].any()
  # The cached path returns the same (last-layer) attention.
  cache = model.apply(variables, memory, T, method=model.init_cache)
  step = model.apply(variables, tgt[:, :3], memory, cache, return_attention=True, method=model.decode)
  np.testing.assert_allclose(np.asarray(step.attention), attn[:, :3], atol=1e-6)


def test_scale_gradient_is_identity_forward_and_scales_backward():
  x = jnp.arange(4.0)
  np.testing.assert_array_equal(scale_gradient(x, 0.25), x)
  np.testing.assert_allclose(jax.grad(lambda v: scale_gradient(v, 0.25).sum())(x), 0.25)


# ---------------------------------------------------------------------------------------------- validation


def test_too_long_sequences_raise(setup):
  model, variables, src, tgt = setup
  long_src = jnp.full((B, 17), 5, jnp.int32)
  with pytest.raises(ValueError, match="source length 17 exceeds max_length=16"):
    model.apply(variables, long_src, method=model.encode)
  memory = model.apply(variables, src, method=model.encode)
  with pytest.raises(ValueError, match="target length 17 exceeds max_length=16"):
    model.apply(variables, jnp.full((B, 17), 5, jnp.int32), memory, method=model.decode)
  with pytest.raises(ValueError, match="target length 20 exceeds max_length=16"):
    model.apply(variables, memory, 20, method=model.init_cache)


@pytest.mark.parametrize("field,value", [
    ("src_vocab_size", 0), ("tgt_vocab_size", -1), ("embed_dim", 0), ("hidden_dim", 0), ("encoder_layers", 0),
    ("decoder_layers", 0), ("max_length", 0), ("kernel_width", 2), ("kernel_width", 1), ("dropout_rate", 1.0),
])
def test_invalid_fields_raise_naming_the_field(field, value):
  with pytest.raises(ValueError, match=field):
    _model(**{field: value})
