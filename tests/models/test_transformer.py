"""Transformer (Vaswani et al. 2017): interface conformance, paper parameter counts, config validation."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from attnjax.models.transformer import Transformer, count_params, transformer_preset
from tests.models import conformance

V = 13


def _model(**kw):
  base = dict(src_vocab_size=V, tgt_vocab_size=V, num_encoder_layers=2, num_decoder_layers=2, d_model=16,
              num_heads=4, d_ff=32, dropout_rate=0.1, max_length=32, max_relative_distance=3)
  base.update(kw)
  return Transformer(**base)


VARIANTS = {
    "post_norm_sinusoidal": dict(),
    "pre_norm_learned_untied": dict(pre_norm=True, positional="learned", tie_decoder_embeddings=False),
    "relative_shared_vocab": dict(positional="relative", shared_vocab=True, share_source_embeddings=True),
    "blockwise": dict(implementation="blockwise", attention_dropout_rate=0.1),
    "t5_buckets": dict(positional="t5"),
    "local_window_2": dict(attention_type="local", local_window=2),
    "linear": dict(attention_type="linear", pre_norm=True),
    "copy_attention": dict(copy=True, shared_vocab=True, attention_dropout_rate=0.1),
}


# Checked under jax.jit, as training and decoding run them: op by op, blockwise attention's scans (under a custom_vjp)
# compile again on every call (~90 s, most of it compiling; ~35 s jitted). The other variants stay op by op: they share
# their compiled primitives with one another, ~15 s each, where compiled whole each takes ~30 s.
JITTED = {"blockwise"}


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_transformer_conforms_to_the_model_interface(rng, variant):
  model, jit = _model(**VARIANTS[variant]), variant in JITTED
  src, tgt = conformance.random_batch(rng, 3, 7, 6, V, src_lengths=[7, 4, 2], tgt_lengths=[6, 3, 5])
  variables = conformance.init(model, src, tgt, jit=jit)
  assert conformance.apply_fn(model, jit=jit)(variables, src, tgt).shape == (3, 6, V)
  conformance.assert_finite_nonzero_gradients(model, variables, src, tgt, jit=jit)
  conformance.assert_teacher_forcing_equals_incremental(model, variables, src, tgt, jit=jit)
  conformance.assert_teacher_forcing_equals_incremental(model, variables, src, tgt, prefill=4, jit=jit)
  conformance.assert_padding_does_not_change_real_positions(model, variables, src, tgt, jit=jit)


def test_cross_attention_weights_are_a_distribution_over_real_source_tokens(rng):
  model = _model()
  src, tgt = conformance.random_batch(rng, 2, 6, 4, V, src_lengths=[6, 3])
  variables = conformance.init(model, src, tgt)
  memory = model.apply(variables, src, method=model.encode)
  out = model.apply(variables, tgt, memory, return_attention=True, method=model.decode)
  assert out.attention.shape == (2, 4, 6)
  np.testing.assert_allclose(out.attention.sum(-1), 1.0, rtol=1e-5)
  np.testing.assert_array_equal(out.attention[1, :, 3:], 0.0)


def _paper_count(d, d_ff, layers, vocab):
  """Parameters of the paper's model counted from its description: shared embedding, post-norm, biases."""
  attention = 4 * (d * d + d)
  ffn = d * d_ff + d_ff + d_ff * d + d
  norm = 2 * d
  return vocab * d + layers * (attention + ffn + 2 * norm) + layers * (2 * attention + ffn + 3 * norm)


@pytest.mark.parametrize("name, d, d_ff, paper_millions", [("base", 512, 2048, 65), ("big", 1024, 4096, 213)])
def test_preset_parameter_counts_match_the_paper(name, d, d_ff, paper_millions):
  model = transformer_preset(name, vocab_size=37000)
  shapes = jax.eval_shape(lambda: model.init(jax.random.PRNGKey(0), jnp.ones((1, 3), jnp.int32),
                                             jnp.ones((1, 3), jnp.int32)))
  n = count_params(shapes["params"])
  assert n == _paper_count(d, d_ff, 6, 37000)
  # The paper reports 65M and 213M (Table 3); its vocabulary is "about 37000", so allow the rounding that implies.
  assert abs(n / 1e6 - paper_millions) / paper_millions < 0.035, n


@pytest.mark.parametrize("kwargs, match", [
    (dict(num_heads=5), "num_heads"),
    (dict(positional="rotary"), "positional"),
    (dict(share_source_embeddings=True), "shared_vocab"),
    (dict(shared_vocab=True, tgt_vocab_size=V + 1), "src_vocab_size"),
])
def test_invalid_configs_are_refused_at_construction(kwargs, match):
  with pytest.raises(ValueError, match=match):
    _model(**kwargs)


@pytest.mark.parametrize("positional", ["sinusoidal", "relative"])
def test_packed_rows_give_the_same_logits_as_separate_examples(rng, positional):
  model = _model(positional=positional, dropout_rate=0.0)
  (s1, t1), (s2, t2) = (conformance.random_batch(rng, 1, n, m, V) for n, m in ((4, 3), (3, 5)))
  variables = conformance.init(model, s1, t1)
  alone = [model.apply(variables, s, t)[0] for s, t in ((s1, t1), (s2, t2))]
  src = jnp.concatenate([s1, s2, jnp.zeros((1, 2), jnp.int32)], axis=1)  # [1, 9]: two examples + padding
  tgt = jnp.concatenate([t1, t2], axis=1)  # [1, 8]
  seg = lambda lens, total: jnp.asarray([sum(([i + 1] * n for i, n in enumerate(lens)), []) + [0] * (total - sum(lens))])
  pos = lambda lens, total: jnp.asarray([sum((list(range(n)) for n in lens), []) + [0] * (total - sum(lens))])
  packed = model.apply(variables, src, tgt, src_segment_ids=seg((4, 3), 9), tgt_segment_ids=seg((3, 5), 8),
                       src_positions=pos((4, 3), 9), tgt_positions=pos((3, 5), 8))[0]
  np.testing.assert_allclose(packed[:3], alone[0], atol=1e-5, rtol=1e-5)
  np.testing.assert_allclose(packed[3:], alone[1], atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("packed", [False, True])
def test_auto_attention_equals_xla(rng, packed, monkeypatch):
  # "auto" is the default; on this CPU it takes "blockwise" for the 512 x 512 self-attention of the encoder (and
  # the cross-attention), "xla" for shorter ones: the logits of real positions must be the "xla" model's.
  assert Transformer.implementation == "auto"
  length = 512
  model = _model(max_length=length, d_model=8, num_heads=2, d_ff=16, num_encoder_layers=1, num_decoder_layers=1)
  src, tgt = conformance.random_batch(rng, 2, length, length, V, src_lengths=[length, 300],
                                      tgt_lengths=[length, 200])
  kwargs = {}
  if packed:  # two examples per row
    seg = np.where(np.arange(length) < 256, 1, 2)[None].repeat(2, 0).astype(np.int32)
    pos = np.where(seg == 1, np.arange(length), np.arange(length) - 256).astype(np.int32)
    src, tgt = np.where(seg > 0, np.maximum(src, 3), 0), np.where(seg > 0, np.maximum(tgt, 3), 0)
    kwargs = dict(src_segment_ids=seg, tgt_segment_ids=seg, src_positions=pos, tgt_positions=pos)
  variables = conformance.init(model, src, tgt)
  from attnjax.kernels import blockwise  # pylint: disable=g-import-not-at-top
  calls = []
  original = blockwise.blockwise_attention
  monkeypatch.setattr(blockwise, "blockwise_attention", lambda *a, **k: calls.append(1) or original(*a, **k))
  auto = model.apply(variables, src, tgt, **kwargs)
  assert len(calls) == 3  # encoder self-, decoder self- and cross-attention: all 512 x 512
  xla = model.clone(implementation="xla").apply(variables, src, tgt, **kwargs)
  real = np.asarray(tgt) != 0
  np.testing.assert_allclose(np.asarray(auto)[real], np.asarray(xla)[real], atol=2e-5, rtol=1e-5)


def test_copy_mixes_the_plain_models_distribution_with_its_head_averaged_cross_attention(rng):
  """Transformer(copy=True) against the same parameters without copy: P(w) = p_gen·softmax(logits)(w) + (1 − p_gen)·
  Σ_{i: src_i = w} ā_i, with ā the last layer's cross-attention averaged over heads and p_gen = σ(w·h_t + b) from the
  decoder's output h_t (read from the last layer's output: post-norm has no final norm)."""
  src, tgt = conformance.random_batch(rng, 2, 6, 5, V, src_lengths=[6, 3], tgt_lengths=[5, 4])
  copy_model, plain = _model(copy=True, dropout_rate=0.0), _model(dropout_rate=0.0)
  variables = conformance.init(copy_model, src, tgt)
  gate = variables["params"]["pointer"]
  plain_vars = {"params": {k: v for k, v in variables["params"].items() if k != "pointer"}}
  memory = plain.apply(plain_vars, src, method=plain.encode)
  out, state = plain.apply(plain_vars, tgt, memory, return_attention=True, method=plain.decode,
                           capture_intermediates=True)
  h = np.asarray(state["intermediates"]["decoder_1"]["__call__"][0][0], np.float64)  # [B, T, D]
  p_gen = 1.0 / (1.0 + np.exp(-(h @ np.asarray(gate["w_0"], np.float64)[:, 0] + float(gate["b_ptr"][0]))))
  logits = np.asarray(out.logits, np.float64)
  p_vocab = np.exp(logits - logits.max(-1, keepdims=True))
  p_vocab /= p_vocab.sum(-1, keepdims=True)
  attention = np.asarray(out.attention, np.float64)  # [B, T, S], already the mean over heads
  expected = p_gen[..., None] * p_vocab
  for b in range(2):
    for i, w in enumerate(np.asarray(src[b])):
      expected[b, :, w] += (1.0 - p_gen[b]) * attention[b, :, i]
  got = np.exp(np.asarray(copy_model.apply(variables, src, tgt), np.float64))
  assert (1.0 - p_gen).min() > 0.05  # the copy side carries weight
  np.testing.assert_allclose(got, expected, atol=1e-5, rtol=1e-4)


def cross_attention_from_parameters(layer_params, queries_in, encoded, src_mask):
  """A decoder layer's encoder-decoder attention weights averaged over its heads, ``[B, T, S]`` in float64, computed
  from the layer's own parameters: softmax_s((x_t W_q + b_q)·(m_s W_k + b_k) / sqrt(H)) over the real source
  positions, per head, with ``queries_in [B, T, D]`` the input of that sublayer (post-norm: the self-attention
  block's output) and ``encoded [B, S, D]`` the encoder's output m."""
  p = jax.tree_util.tree_map(lambda a: np.asarray(a, np.float64), layer_params["cross_attention"])
  q = np.einsum("btd,dnh->btnh", np.asarray(queries_in, np.float64), p["query"]["kernel"]) + p["query"]["bias"]
  k = np.einsum("bsd,dnh->bsnh", np.asarray(encoded, np.float64), p["key"]["kernel"]) + p["key"]["bias"]
  scores = np.einsum("btnh,bsnh->bnts", q, k) / np.sqrt(q.shape[-1])
  scores = np.where(np.asarray(src_mask, bool)[:, None, None, :], scores, -np.inf)
  weights = np.exp(scores - scores.max(-1, keepdims=True))
  return (weights / weights.sum(-1, keepdims=True)).mean(axis=1)


def test_copy_reads_the_last_of_three_decoder_layers_cross_attention_computed_from_its_parameters(rng):
  """Transformer(copy=True) with three decoder layers, whose cross-attentions differ: the returned attention and the
  copy distribution are the last layer's, computed here from its query/key parameters, its input and the encoder's
  output; P(w) = p_gen·softmax(h Eᵀ)(w) + (1 − p_gen)·Σ_{i: src_i = w} ā_i with p_gen = σ(w·h + b) on the final
  decoder output h (post-norm: the last layer's output) and E the tied target embedding."""
  import flax.linen as nn  # pylint: disable=g-import-not-at-top
  layers = 3
  model = _model(copy=True, dropout_rate=0.0, num_decoder_layers=layers)
  src, tgt = conformance.random_batch(rng, 2, 6, 5, V, src_lengths=[6, 3], tgt_lengths=[5, 4])
  variables = conformance.init(model, src, tgt)
  params = nn.meta.unbox(variables["params"])
  memory = model.apply(variables, src, method=model.encode)
  out, state = model.apply(variables, tgt, memory, return_attention=True, method=model.decode,
                           capture_intermediates=True)
  captured = state["intermediates"]
  per_layer = [cross_attention_from_parameters(params[f"decoder_{i}"],
                                               captured[f"decoder_{i}"]["self_attention_block"]["__call__"][0][0],
                                               memory["encoded"], memory["src_mask"]) for i in range(layers)]
  assert min(np.abs(per_layer[-1] - per_layer[i]).max() for i in range(layers - 1)) > 0.05  # the layers differ
  attention = per_layer[-1]
  np.testing.assert_allclose(np.asarray(out.attention, np.float64), attention, atol=1e-5)
  h = np.asarray(captured[f"decoder_{layers - 1}"]["__call__"][0][0], np.float64)  # [B, T, D]
  gate = jax.tree_util.tree_map(lambda a: np.asarray(a, np.float64), params["pointer"])
  p_gen = 1.0 / (1.0 + np.exp(-(h @ gate["w_0"][:, 0] + gate["b_ptr"][0])))
  logits = h @ np.asarray(params["tgt_embed"]["embedding"], np.float64).T
  p_vocab = np.exp(logits - logits.max(-1, keepdims=True))
  p_vocab /= p_vocab.sum(-1, keepdims=True)
  expected = p_gen[..., None] * p_vocab
  for b in range(2):
    for i, w in enumerate(np.asarray(src[b])):
      expected[b, :, w] += (1.0 - p_gen[b]) * attention[b, :, i]
  assert (1.0 - p_gen).min() > 0.05  # the copy side carries weight
  np.testing.assert_allclose(np.exp(np.asarray(out.logits, np.float64)), expected, atol=1e-5, rtol=1e-4)
