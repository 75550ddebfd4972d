"""RNNSeq2Seq's logits against NumPy transcriptions of the three papers' equations.

* Sutskever, Vinyals & Le 2014, "Sequence to Sequence Learning with Neural Networks" (§2, §3.3): a stacked LSTM reads
  the source reversed; the decoder's LSTM layers start from the encoder layers' final states; softmax(W h_t).
* Bahdanau, Cho & Bengio 2015, "Neural Machine Translation by Jointly Learning to Align and Translate" (§3, App. A):
  bidirectional encoder h_j = [→h_j; ←h_j], s_0 = tanh(W_s ←h_1), e_ij = v_a^T tanh(W_a s_{i-1} + U_a h_j),
  c_i = Σ_j a_ij h_j, s_i = f(s_{i-1}, y_{i-1}, c_i) with the paper's GRU (reset gate before U) or an LSTM, and the
  maxout readout t̃_i = U_o s + V_o E y_{i-1} + C_o c_i, t_i = [max(t̃_{i,2j-1}, t̃_{i,2j})]_j, softmax(W_o t_i).
* Luong, Pham & Manning 2015, "Effective Approaches to Attention-based NMT" (§3.1, §3.3, Eq. 5-8): a stacked LSTM
  on [E y_{t-1}; h̃_{t-1}] (input feeding), score dot / general / concat from the current h_t, c_t = Σ_s a_t(s) h̄_s,
  h̃_t = tanh(W_c [c_t; h_t]), softmax(W_s h̃_t).

The model's own parameters (plus N(0, 0.3²) noise rounded to float32, so that zero-initialised biases matter) are
read from the tree of ``model.init``; the computation is written from the papers, one sentence at a time without
padding (a padded batch must give the unpadded sentence's logits), in float64, dropout off. Taken from the code, not
the papers: parameter names and Flax's ``[in, out]`` kernels; Flax's LSTM (separate kernels ``i*`` on the input and
``h*`` on the state, with the bias on the ``h*`` side, gates i, f, g, o, no peepholes); where the paper writes several
matrices on separate inputs (W E y_{i-1} + C c_i, U_o s + V_o E y_{i-1} + C_o c_i), the model's one kernel on the
concatenation, read here as its row blocks; a bias on every output layer and gate (the papers omit biases); h̃_0 = 0;
an LSTM decoder in RNNsearch starting from a zero memory cell.

Each test fails on the mutants of `make mutants` (checked by editing the model by hand): no tanh in Luong's h̃_t; a mean
(or another pairing) instead of the maxout; the GRU's reset gate applied after U, r ⊙ (U s); Sutskever's source read
in order.
"""

import flax
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from attnjax.models.interface import BOS_ID, PAD_ID
from attnjax.models.rnn_seq2seq import RNNSeq2Seq

V, E, H, A, L_MAXOUT = 13, 6, 8, 5, 5  # E != H != A and l != E, so that a mixed-up block or size cannot pass
SRC_LENGTHS, TGT_LENGTHS = (6, 3), (5, 3)


# ------------------------------------------------------------------------------------------------ the cells


def _sigmoid(x):
  return 1.0 / (1.0 + np.exp(-x))


def _softmax(e):
  e = np.exp(e - e.max())
  return e / e.sum()


def _dense(p, x):
  return x @ p["kernel"] + (p["bias"] if "bias" in p else 0.0)


def _lstm(p, x, state):
  """The LSTM (Hochreiter & Schmidhuber 1997 with a forget gate; Zaremba et al. 2014 §3, as used by Luong et al.)::

      i = σ(W_i x + U_i h + b_i),  f = σ(W_f x + U_f h + b_f),  o = σ(W_o x + U_o h + b_o)
      g = tanh(W_g x + U_g h + b_g),  c' = f ⊙ c + i ⊙ g,  h' = o ⊙ tanh(c')

  state: (c, h). Sutskever et al. cite Graves 2013, whose peepholes this cell (and the model's) does not have.
  """
  c, h = state

  def pre(gate):
    return x @ p["i" + gate]["kernel"] + h @ p["h" + gate]["kernel"] + p["h" + gate]["bias"]

  i, f, g, o = _sigmoid(pre("i")), _sigmoid(pre("f")), np.tanh(pre("g")), _sigmoid(pre("o"))
  c = f * c + i * g
  return c, o * np.tanh(c)


def _gru(p, x, s):
  """Bahdanau et al. 2015 App. A.1.1 (Cho et al. 2014 Eq. 5-8), x = [E y_{i-1}; c_i] in the decoder::

      z = σ(W_z x + U_z s + b_z),  r = σ(W_r x + U_r s + b_r)
      s̃ = tanh(W x + U (r ⊙ s) + b)        the reset gate acts on s before U
      s' = (1 - z) ⊙ s + z ⊙ s̃
  """
  z = _sigmoid(_dense(p["w_z"], x) + s @ p["u_z"]["kernel"])
  r = _sigmoid(_dense(p["w_r"], x) + s @ p["u_r"]["kernel"])
  candidate = np.tanh(_dense(p["w"], x) + (r * s) @ p["u"]["kernel"])
  return (1.0 - z) * s + z * candidate


def _gru_reset_after(p, x, h):
  """Flax's nn.GRUCell (cuDNN's variant), ``cell="gru_reset_after"``::

      r = σ(W_ir x + b_ir + W_hr h),  z = σ(W_iz x + b_iz + W_hz h)
      n = tanh(W_in x + b_in + r ⊙ (W_hn h + b_hn)),  h' = (1 - z) ⊙ n + z ⊙ h
  """
  r = _sigmoid(_dense(p["ir"], x) + _dense(p["hr"], h))
  z = _sigmoid(_dense(p["iz"], x) + _dense(p["hz"], h))
  n = np.tanh(_dense(p["in"], x) + r * _dense(p["hn"], h))
  return (1.0 - z) * n + z * h


_CELLS = {"lstm": _lstm, "gru": _gru, "gru_reset_after": _gru_reset_after}


def _output(cell, state):
  """The visible state: h of an LSTM's (c, h), the GRU state itself."""
  return state[1] if cell == "lstm" else state


def _zero_state(cell, size):
  return (np.zeros(size), np.zeros(size)) if cell == "lstm" else np.zeros(size)


def _rnn(cell, p, xs, size):
  """Runs ``cell`` over the rows of xs ``[n, D]`` from a zero state: (outputs ``[n, size]``, final state)."""
  state, outputs = _zero_state(cell, size), []
  for x in xs:
    state = _CELLS[cell](p, x, state)
    outputs.append(_output(cell, state))
  return np.stack(outputs), state


# ------------------------------------------------------------------------------------------- the three papers


def _sutskever(params, src, tgt_in, layers):
  """Sutskever et al. 2014: logits ``[len(tgt_in), V]`` of one sentence."""
  # §3.3: "we reversed the order of the words in the source sentence (but not the target)"
  x = params["src_embed"]["embedding"][src[::-1]]
  finals = []
  for l in range(layers):  # §3.4: deep LSTMs, each layer reading the outputs of the one below
    x, final = _rnn("lstm", params[f"encoder_fwd_{l}"]["cell"], x, H)
    finals.append(final)
  # §2: the decoder is an LSTM-LM whose initial state is the encoder's last state v (layer by layer)
  states, logits = finals, []
  for y in tgt_in:
    x = params["tgt_embed"]["embedding"][y]
    for l in range(layers):
      states[l] = _lstm(params["decoder"][f"cell_{l}"], x, states[l])
      x = states[l][1]
    logits.append(_dense(params["output"], x))  # p(y_t | v, y_<t) = softmax(W h_t + b)
  return np.stack(logits)


def _rnnsearch(params, src, tgt_in, cell, maxout_dim, readout_state):
  """Bahdanau et al. 2015 (one decoder layer): logits ``[len(tgt_in), V]`` of one sentence."""
  x = params["src_embed"]["embedding"][src]
  # §3.2 / App. A.2.1: →h_j reads x_1..x_j, ←h_j reads x_Tx..x_j, and the annotation is h_j = [→h_j; ←h_j]
  forward, _ = _rnn(cell, params["encoder_fwd_0"]["cell"], x, H)
  backward, _ = _rnn(cell, params["encoder_bwd_0"]["cell"], x[::-1], H)
  backward = backward[::-1]
  annotations = np.concatenate([forward, backward], axis=-1)  # [Tx, 2H]
  # App. A.2.2: s_0 = tanh(W_s ←h_1); an LSTM decoder's memory cell starts at zero
  s0 = np.tanh(backward[0] @ params["init_state_0"]["kernel"])
  state = (np.zeros(H), s0) if cell == "lstm" else s0
  att, dec = params["decoder"]["attention"], params["decoder"]
  readout = dec["readout"]["kernel"]
  u_o, v_o, c_o = readout[:H], readout[H:H + E], readout[H + E:]  # the kernel on [s; E y_{i-1}; c_i], by rows
  logits = []
  for y in tgt_in:
    s_prev = _output(cell, state)
    # Eq. 6 / App. A.1.2: e_ij = v_a^T tanh(W_a s_{i-1} + U_a h_j); Eq. 5: c_i = Σ_j softmax_j(e_ij) h_j
    e = np.array([att["v"] @ np.tanh(s_prev @ att["w_query"] + h_j @ att["w_keys"]) for h_j in annotations])
    c = _softmax(e) @ annotations
    ey = params["tgt_embed"]["embedding"][y]
    # App. A.1.1: s_i = f(s_{i-1}, y_{i-1}, c_i), the cell's input matrices [W; C] acting on [E y_{i-1}; c_i]
    state = _CELLS[cell](dec["cell_0"], np.concatenate([ey, c]), state)
    s = _output(cell, state) if readout_state == "current" else s_prev
    # App. A.2.2: t̃_i = U_o s + V_o E y_{i-1} + C_o c_i,  t_i = [max(t̃_{i,2j-1}, t̃_{i,2j})]_{j=1..l} (1-based)
    t_tilde = s @ u_o + ey @ v_o + c @ c_o + dec["readout"]["bias"]
    t = np.array([max(t_tilde[2 * j], t_tilde[2 * j + 1]) for j in range(maxout_dim)])
    logits.append(_dense(params["output"], t))  # p(y_i | ...) ∝ exp(y_i^T W_o t_i) (+ b)
  return np.stack(logits)


def _luong(params, src, tgt_in, score, layers):
  """Luong et al. 2015, global attention with input feeding, source reversed: logits ``[len(tgt_in), V]``."""
  x = params["src_embed"]["embedding"][src[::-1]]  # Table 1 "Base + reverse", kept in the attentional rows
  finals = []
  for l in range(layers):
    x, final = _rnn("lstm", params[f"encoder_fwd_{l}"]["cell"], x, H)
    finals.append(final)
  source_states = x[::-1]  # h̄_s, put back in source order (the sums over s do not depend on it)
  att, dec = params["decoder"].get("attention", {}), params["decoder"]  # "dot" has no parameters
  states, feed, logits = finals, np.zeros(H), []  # the decoder starts from the encoder's last states; h̃_0 = 0
  for y in tgt_in:
    x = np.concatenate([params["tgt_embed"]["embedding"][y], feed])  # §3.3 input feeding: [E y_{t-1}; h̃_{t-1}]
    for l in range(layers):
      states[l] = _lstm(dec[f"cell_{l}"], x, states[l])
      x = states[l][1]
    h_t = x
    # Eq. 8
    if score == "dot":
      e = np.array([h_t @ h_s for h_s in source_states])
    elif score == "general":
      e = np.array([h_t @ att["w_a"] @ h_s for h_s in source_states])
    else:
      e = np.array([att["v_a"] @ np.tanh(np.concatenate([h_t, h_s]) @ att["w_a"]) for h_s in source_states])
    c_t = _softmax(e) @ source_states  # Eq. 7, c_t = Σ_s a_t(s) h̄_s
    h_tilde = np.tanh(np.concatenate([c_t, h_t]) @ dec["w_c"]["kernel"])  # Eq. 5: h̃_t = tanh(W_c [c_t; h_t])
    logits.append(_dense(params["output"], h_tilde))  # Eq. 6: p(y_t | y_<t, x) = softmax(W_s h̃_t + b)
    feed = h_tilde
  return np.stack(logits)


# ------------------------------------------------------------------------------------------------------ tests


def _batch():
  rng = np.random.default_rng(0)
  src = rng.integers(3, V, size=(2, max(SRC_LENGTHS)))
  tgt = rng.integers(3, V, size=(2, max(TGT_LENGTHS)))
  tgt[:, 0] = BOS_ID
  src[np.arange(src.shape[1])[None] >= np.asarray(SRC_LENGTHS)[:, None]] = PAD_ID
  tgt[np.arange(tgt.shape[1])[None] >= np.asarray(TGT_LENGTHS)[:, None]] = PAD_ID
  return src, tgt


def _check(reference, **config):
  """Builds the model, perturbs its parameters, and compares its logits with ``reference(params, src, tgt_in)``."""
  src, tgt = _batch()
  model = RNNSeq2Seq(src_vocab_size=V, tgt_vocab_size=V, embed_dim=E, hidden_dim=H, dropout_rate=0.0,
                     dtype=jnp.float64, **config)
  variables = model.init(jax.random.PRNGKey(0), jnp.asarray(src), jnp.asarray(tgt))
  # every parameter plus N(0, 0.3²) noise, rounded to the float32 the parameters are stored in: zero biases would hide
  # their misuse, and larger pre-activations make the nonlinearities (tanh, σ, max) matter
  rng = np.random.default_rng(1)
  flat = flax.traverse_util.flatten_dict(variables["params"])
  params = flax.traverse_util.unflatten_dict({k: (np.asarray(v) + 0.3 * rng.normal(size=v.shape)).astype(np.float32)
                                              for k, v in flat.items()})
  logits = np.asarray(model.apply({"params": jax.tree_util.tree_map(jnp.asarray, params)}, jnp.asarray(src),
                                  jnp.asarray(tgt)))
  params64 = jax.tree_util.tree_map(lambda x: np.asarray(x, np.float64), params)
  for b in range(2):
    ref = reference(params64, src[b, :SRC_LENGTHS[b]], tgt[b, :TGT_LENGTHS[b]])
    assert np.abs(ref).max() > 0.1  # the transcription is not degenerate
    np.testing.assert_allclose(logits[b, :TGT_LENGTHS[b]], ref, atol=1e-5, rtol=1e-5, err_msg=f"sentence {b}")


def test_sutskever_equations(x64):
  del x64
  _check(lambda p, s, t: _sutskever(p, s, t, layers=3), attention=None, reverse_source=True, num_layers=3)


@pytest.mark.parametrize("cell,maxout_dim,readout_state", [
    ("gru", L_MAXOUT, "current"),
    ("gru", None, "previous"),
    ("gru_reset_after", L_MAXOUT, "current"),
    ("lstm", L_MAXOUT, "current"),
    ("lstm", None, "previous"),
])
def test_rnnsearch_equations(x64, cell, maxout_dim, readout_state):
  del x64
  _check(lambda p, s, t: _rnnsearch(p, s, t, cell, maxout_dim or E, readout_state), attention="bahdanau", cell=cell,
         attention_dim=A, maxout_dim=maxout_dim, readout_state=readout_state)


@pytest.mark.parametrize("score", ["dot", "general", "concat"])
def test_luong_equations(x64, score):
  del x64
  _check(lambda p, s, t: _luong(p, s, t, score, layers=2), attention=f"luong_{score}", num_layers=2,
         reverse_source=True, input_feeding=True, attention_dim=A if score == "concat" else None)
