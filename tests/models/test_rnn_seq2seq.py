"""RNNSeq2Seq (Sutskever 2014, Bahdanau 2015, Luong 2015): interface conformance and the papers' specifics. The
logits themselves are checked against NumPy transcriptions of the papers' equations in test_rnn_equations.py."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from attnjax.models.interface import PAD_ID
from attnjax.models.rnn_seq2seq import RNNSeq2Seq, reverse_real_tokens
from tests.models import conformance

V, E, H, B, S, T = 11, 8, 8, 3, 5, 4
SRC_LENGTHS, TGT_LENGTHS = (5, 3, 1), (4, 2, 3)

CONFIGS = [
    dict(attention=None),
    dict(attention="bahdanau"),
    dict(attention="luong_dot"),
    dict(attention="luong_general"),
    dict(attention="luong_concat"),
    dict(attention="bahdanau", cell="gru"),
]


def _id(config):
  if not isinstance(config, dict):
    return None  # pytest's default id
  return "-".join(f"{k}={v}" for k, v in config.items())


def _model(**overrides):
  kwargs = dict(src_vocab_size=V, tgt_vocab_size=V, embed_dim=E, hidden_dim=H, dropout_rate=0.1)
  return RNNSeq2Seq(**{**kwargs, **overrides})


def _batch(seed=0, src_lengths=SRC_LENGTHS, tgt_lengths=TGT_LENGTHS):
  return conformance.random_batch(np.random.default_rng(seed), B, S, T, V, src_lengths=src_lengths,
                                  tgt_lengths=tgt_lengths)


@functools.lru_cache(maxsize=None)
def _setup(items):
  """(model, variables, src, tgt_in) for a config given as sorted items; cached so each config is initialised once."""
  model = _model(**dict(items))
  src, tgt_in = _batch()
  return model, conformance.init(model, src, tgt_in), src, tgt_in


def setup_for(config):
  return _setup(tuple(sorted(config.items())))


def _apply(model, *args, **kwargs):
  """``model.apply`` jitted, once per model, method and shape (op by op, the RNNs' scans compile on every call)."""
  return conformance.jitted(model)(*args, **kwargs)


def _close(a, b, atol=1e-5):
  np.testing.assert_allclose(np.asarray(a), np.asarray(b), atol=atol, rtol=1e-5)


# ------------------------------------------------------------------------------------------------ interface checks


@pytest.mark.parametrize("config", CONFIGS, ids=_id)
def test_logits_shape_and_finite(config):
  model, variables, src, tgt_in = setup_for(config)
  logits = _apply(model, variables, src, tgt_in)
  assert logits.shape == (B, T, V) and logits.dtype == jnp.float32
  assert np.isfinite(np.asarray(logits)).all()


@pytest.mark.parametrize("config", CONFIGS, ids=_id)
def test_finite_nonzero_gradients(config):
  conformance.assert_finite_nonzero_gradients(*setup_for(config), jit=True)


@pytest.mark.parametrize("config", CONFIGS, ids=_id)
@pytest.mark.parametrize("prefill", [0, 2])
def test_teacher_forcing_equals_incremental(config, prefill):
  conformance.assert_teacher_forcing_equals_incremental(*setup_for(config), prefill=prefill, jit=True)


@pytest.mark.parametrize("config", CONFIGS, ids=_id)
def test_padding_does_not_change_real_positions(config):
  conformance.assert_padding_does_not_change_real_positions(*setup_for(config), jit=True)


@pytest.mark.parametrize("config", [
    dict(attention=None, reverse_source=True, num_layers=2),
    dict(attention="luong_general", num_layers=2, input_feeding=False, cell="gru"),
    dict(attention="bahdanau", num_layers=2, tie_output_embedding=True),
    dict(attention="luong_dot", bidirectional_encoder=True, reverse_source=True, tie_output_embedding=True),
    dict(attention="bahdanau", cell="gru", maxout_dim=5, readout_state="previous"),
    dict(attention="bahdanau", cell="gru_reset_after", num_layers=2),
    dict(attention="bahdanau", copy=True),
    dict(attention="bahdanau", copy=True, coverage=True, num_layers=2),
], ids=_id)
def test_variants_conform(config):
  model, variables, src, tgt_in = setup_for(config)
  conformance.assert_teacher_forcing_equals_incremental(model, variables, src, tgt_in, prefill=2, jit=True)
  conformance.assert_padding_does_not_change_real_positions(model, variables, src, tgt_in, jit=True)
  if config.get("tie_output_embedding"):
    assert "output" not in variables["params"] and "output_bias" in variables["params"]


def test_paper_gru_under_jit():
  # The reset-before GRU in the bidirectional encoder and the decoder: jitted teacher forcing and step-by-step cached
  # decoding give the eager numbers.
  model, variables, src, tgt_in = setup_for(dict(attention="bahdanau", cell="gru"))
  _close(jax.jit(model.apply)(variables, src, tgt_in), model.apply(variables, src, tgt_in), atol=1e-6)
  encode = jax.jit(lambda v, x: model.apply(v, x, method=model.encode))
  memory = encode(variables, src)
  cache = model.apply(variables, memory, T, method=model.init_cache)
  decode = jax.jit(lambda v, y, m, c: model.apply(v, y, m, c, method=model.decode))
  pieces = []
  for t in range(T):
    out = decode(variables, tgt_in[:, t:t + 1], memory, cache)
    cache = out.cache
    pieces.append(out.logits)
  _close(jnp.concatenate(pieces, axis=1), model.apply(variables, src, tgt_in), atol=1e-5)


@pytest.mark.parametrize("cell,names", [
    ("gru", {"w_z", "u_z", "w_r", "u_r", "w", "u"}),  # Bahdanau App. A.1.1 / Cho et al. 2014
    ("gru_reset_after", {"ir", "hr", "iz", "hz", "in", "hn"}),  # flax.linen.GRUCell
])
def test_gru_cells(cell, names):
  _, variables, _, _ = setup_for(dict(attention="bahdanau", cell=cell))
  for scope in ("encoder_fwd_0", "encoder_bwd_0"):
    assert set(variables["params"][scope]["cell"]) == names
  assert set(variables["params"]["decoder"]["cell_0"]) == names
  if cell == "gru":  # one bias per gate, on the input side only (r ⊙ s comes before U)
    assert all(("bias" in variables["params"]["decoder"]["cell_0"][n]) == n.startswith("w") for n in names)


@pytest.mark.parametrize("maxout_dim,units", [(None, E), (5, 5)])
def test_maxout_dim_sets_the_readout_size(maxout_dim, units):
  # Bahdanau App. A.2.2: t̃_i has 2l units, t_i (what W_o reads) l; l = E unless maxout_dim says otherwise.
  config = dict(attention="bahdanau") if maxout_dim is None else dict(attention="bahdanau", maxout_dim=maxout_dim)
  _, variables, _, _ = setup_for(config)
  params = variables["params"]
  assert params["decoder"]["readout"]["kernel"].shape == (H + E + 2 * H, 2 * units)
  assert params["output"]["kernel"].shape == (units, V)


def test_dropout_is_active_only_when_not_deterministic():
  model, variables, src, tgt_in = setup_for(dict(attention="luong_general"))
  train = [_apply(model, variables, src, tgt_in, deterministic=False, rngs={"dropout": jax.random.PRNGKey(k)})
           for k in range(2)]
  assert not np.allclose(np.asarray(train[0]), np.asarray(train[1]))
  _close(_apply(model, variables, src, tgt_in, deterministic=True), _apply(model, variables, src, tgt_in))


# --------------------------------------------------------------------------------------------- memory and cache


@pytest.mark.parametrize("config,keys", [
    (dict(attention=None), {"src_mask", "annotations", "final_h", "final_c"}),
    (dict(attention="bahdanau"), {"src_mask", "annotations", "final_h", "final_c", "keys_proj"}),
    (dict(attention="bahdanau", cell="gru"), {"src_mask", "annotations", "final_h", "keys_proj"}),
    (dict(attention="bahdanau", cell="gru_reset_after"), {"src_mask", "annotations", "final_h", "keys_proj"}),
], ids=_id)
def test_memory_layout(config, keys):
  model, variables, src, _ = setup_for(config)
  memory = _apply(model, variables, src, method=model.encode)
  assert set(memory) == keys
  bahdanau = config["attention"] == "bahdanau"
  dk = 2 * H if bahdanau else H
  assert memory["src_mask"].shape == (B, S) and memory["src_mask"].dtype == jnp.bool_
  assert memory["annotations"].shape == (B, S, dk)
  assert memory["final_h"].shape == (B, 1, dk)
  if bahdanau:
    assert memory["keys_proj"].shape == (B, S, H)
  # Padded annotations are zero, so nothing can leak from them even without the mask.
  pad = ~np.asarray(memory["src_mask"])
  np.testing.assert_array_equal(np.asarray(memory["annotations"])[pad], 0.0)


@pytest.mark.parametrize("config,keys", [
    (dict(attention=None), {"h", "c", "index"}),
    (dict(attention="bahdanau", cell="gru"), {"h", "index"}),
    (dict(attention="luong_general"), {"h", "c", "feed", "index"}),
    (dict(attention="luong_general", num_layers=2, input_feeding=False, cell="gru"), {"h", "index"}),
], ids=_id)
def test_cache_layout_and_index(config, keys):
  model, variables, src, tgt_in = setup_for(config)
  layers = config.get("num_layers", 1)
  memory = _apply(model, variables, src, method=model.encode)
  cache = _apply(model, variables, memory, T, method=model.init_cache)
  assert set(cache) == keys
  assert cache["h"].shape == (B, layers, H) and cache["index"].dtype == jnp.int32
  np.testing.assert_array_equal(np.asarray(cache["index"]), 0)
  out = _apply(model, variables, tgt_in[:, :3], memory, cache, method=model.decode)
  np.testing.assert_array_equal(np.asarray(out.cache["index"]), 3)
  assert jax.tree_util.tree_map(jnp.shape, out.cache) == jax.tree_util.tree_map(jnp.shape, cache)
  assert _apply(model, variables, tgt_in, memory, method=model.decode).cache is None


# ----------------------------------------------------------------------------------------------------- attention


@pytest.mark.parametrize("config", CONFIGS, ids=_id)
def test_attention_weights(config):
  model, variables, src, tgt_in = setup_for(config)
  memory = _apply(model, variables, src, method=model.encode)
  out = _apply(model, variables, tgt_in, memory, method=model.decode, return_attention=True)
  if config["attention"] is None:
    assert out.attention is None
    return
  weights = np.asarray(out.attention)
  assert weights.shape == (B, T, S)
  np.testing.assert_allclose(weights.sum(-1), 1.0, atol=1e-5)
  np.testing.assert_array_equal(weights[~np.broadcast_to(np.asarray(memory["src_mask"])[:, None], weights.shape)], 0)
  # The cached path reports the same weights, step by step.
  cache = _apply(model, variables, memory, T, method=model.init_cache)
  steps = []
  for t in range(T):
    step = _apply(model, variables, tgt_in[:, t:t + 1], memory, cache, method=model.decode, return_attention=True)
    cache = step.cache
    steps.append(step.attention)
  _close(jnp.concatenate(steps, axis=1), weights)
  assert _apply(model, variables, tgt_in, memory, method=model.decode).attention is None


def _attention_after_changing_first_token(config):
  model, variables, src, tgt_in = setup_for(config)
  memory = _apply(model, variables, src, method=model.encode)
  changed = tgt_in.at[:, 0].set(7)
  assert not np.array_equal(np.asarray(changed[:, 0]), np.asarray(tgt_in[:, 0]))
  return [np.asarray(_apply(model, variables, y, memory, method=model.decode, return_attention=True).attention)
          for y in (tgt_in, changed)]


@pytest.mark.parametrize("cell", ["lstm", "gru"])
def test_bahdanau_attends_from_previous_state(cell):
  # a_0j depends on s_0 only (Bahdanau Eq. 6: e_ij = a(s_{i-1}, h_j)), not on y_0; a_1j then sees y_0 through s_1.
  before, after = _attention_after_changing_first_token(dict(attention="bahdanau", cell=cell))
  np.testing.assert_array_equal(after[:, 0], before[:, 0])
  assert not np.allclose(after[:, 1], before[:, 1])


@pytest.mark.parametrize("attention", ["luong_dot", "luong_general", "luong_concat"])
def test_luong_attends_from_current_state(attention):
  # a_t(s) = align(h_t, h̄_s) with h_t computed from y_{t-1}: the first token changes the first alignment.
  before, after = _attention_after_changing_first_token(dict(attention=attention))
  assert not np.allclose(after[:, 0], before[:, 0])


# ------------------------------------------------------------------------------------------------ encoder details


def test_reverse_real_tokens():
  x = jnp.asarray([[1, 2, 3, 0, 0], [4, 5, 6, 7, 8], [9, 0, 0, 0, 0], [0, 0, 0, 0, 0]])
  want = [[3, 2, 1, 0, 0], [8, 7, 6, 5, 4], [9, 0, 0, 0, 0], [0, 0, 0, 0, 0]]
  np.testing.assert_array_equal(np.asarray(reverse_real_tokens(x, x != PAD_ID)), want)
  # Features ride along, and the map is an involution.
  f = jnp.asarray(np.random.default_rng(0).normal(size=(4, 5, 2)))
  np.testing.assert_array_equal(np.asarray(reverse_real_tokens(reverse_real_tokens(f, x != 0), x != 0)), f)


@pytest.mark.parametrize("config", [
    dict(attention=None, reverse_source=True, num_layers=2),
    dict(attention="bahdanau"),
    dict(attention="luong_general", bidirectional_encoder=True, reverse_source=True),
], ids=_id)
def test_padded_encoding_equals_unpadded_per_row(config):
  # Each row's annotations and final states must be those of the row encoded alone without padding: reversal and
  # the backward pass start at the last REAL token, and frozen carries ignore the padding.
  model, variables, src, _ = setup_for(config)
  memory = _apply(model, variables, src, method=model.encode)
  for b, length in enumerate(SRC_LENGTHS):
    alone = _apply(model, variables, src[b:b + 1, :length], method=model.encode)
    _close(memory["annotations"][b, :length], alone["annotations"][0])
    for key in ("final_h", "final_c"):
      if key in alone:
        _close(memory[key][b], alone[key][0])
    if "keys_proj" in alone:
      _close(memory["keys_proj"][b, :length], alone["keys_proj"][0])


def test_reverse_source_reads_each_row_backwards():
  # Same parameters: encoding src reversed by the model == encoding the per-row reversed source without reversal
  # (annotations are put back in source order).
  reverse, variables, src, _ = setup_for(dict(attention=None, reverse_source=True))
  forward = _model(attention=None)
  mask = src != PAD_ID
  mem_rev = _apply(reverse, variables, src, method=reverse.encode)
  mem_fwd = _apply(forward, variables, reverse_real_tokens(src, mask), method=forward.encode)
  _close(mem_rev["final_h"], mem_fwd["final_h"])
  _close(mem_rev["annotations"], reverse_real_tokens(mem_fwd["annotations"], mask))
  assert not np.allclose(np.asarray(mem_rev["final_h"]), np.asarray(_apply(forward, 
      variables, src, method=forward.encode)["final_h"]))


def test_sutskever_decoder_starts_from_last_real_encoder_state():
  model, variables, src, _ = setup_for(dict(attention=None))
  memory = _apply(model, variables, src, method=model.encode)
  cache = _apply(model, variables, memory, T, method=model.init_cache)
  last = np.asarray(SRC_LENGTHS) - 1
  # The top layer's output at each row's last real token is its final hidden state.
  _close(cache["h"][:, 0], memory["annotations"][np.arange(B), last])
  _close(cache["c"], memory["final_c"])


def test_bahdanau_initial_state_is_tanh_of_backward_first_annotation():
  # s_0 = tanh(W_s ←h_1), and ←h_1 is the backward half of the first annotation.
  model, variables, src, _ = setup_for(dict(attention="bahdanau", cell="gru"))
  memory = _apply(model, variables, src, method=model.encode)
  cache = _apply(model, variables, memory, T, method=model.init_cache)
  w_s = variables["params"]["init_state_0"]["kernel"]
  _close(cache["h"][:, 0], jnp.tanh(memory["annotations"][:, 0, H:] @ w_s))


def test_explicit_src_mask_is_used():
  model, variables, src, tgt_in = setup_for(dict(attention="luong_general"))
  mask = jnp.asarray(np.arange(S)[None, :] < np.array([2, 2, 1])[:, None])
  memory = _apply(model, variables, src, mask, method=model.encode)
  np.testing.assert_array_equal(np.asarray(memory["src_mask"]), np.asarray(mask))
  _close(_apply(model, variables, src, tgt_in, mask), _apply(model, variables, src * mask, tgt_in))


# ---------------------------------------------------------------------------------------------------- validation


@pytest.mark.parametrize("overrides,field", [
    (dict(attention="luong_bilinear"), "attention"),
    (dict(attention="Bahdanau"), "attention"),
    (dict(cell="rnn"), "cell"),
    (dict(hidden_dim=0), "hidden_dim"),
    (dict(num_layers=0), "num_layers"),
    (dict(dropout_rate=1.0), "dropout_rate"),
    (dict(attention_dim=0), "attention_dim"),
    (dict(bidirectional_encoder=True, hidden_dim=7), "hidden_dim"),
    (dict(attention="luong_dot", tie_output_embedding=True, hidden_dim=10), "tie_output_embedding"),
    (dict(cell="gru_reset_before"), "cell"),
    (dict(attention="bahdanau", maxout_dim=0), "maxout_dim"),
    (dict(attention="luong_general", maxout_dim=4), "maxout_dim"),
    (dict(attention="bahdanau", maxout_dim=5, tie_output_embedding=True), "tie_output_embedding"),
    (dict(attention="bahdanau", readout_state="s_i"), "readout_state"),
    (dict(attention=None, readout_state="previous"), "readout_state"),
])
def test_bad_config_raises_naming_the_field(overrides, field):
  with pytest.raises(ValueError, match=field):
    _model(**overrides)
