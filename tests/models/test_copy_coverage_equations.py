"""See et al. (2017)'s pointer-generator and coverage on RNNSeq2Seq, against a NumPy transcription of the paper's
equations (eq. 8-12), one sentence at a time in float64; and the copy pieces of :mod:`attnjax.layers.copy` against
loops over the source.

Taken from the code, not the paper: the attention is Bahdanau's from s_{i-1} (the RNNsearch transcription of
test_rnn_equations.py), p_gen reads the new state s_i, the context c_i and the embedded input E y_{i-1}; one bias.
"""

import flax
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from attnjax.layers import copy as copy_lib
from attnjax.models.rnn_seq2seq import RNNSeq2Seq
from tests.models.test_rnn_equations import (A, E, H, L_MAXOUT, SRC_LENGTHS, TGT_LENGTHS, V, _batch, _dense, _lstm,
                                             _rnn, _sigmoid, _softmax)


def _see_et_al(params, src, tgt_in, copy, coverage):
  """log P(w) ``[len(tgt_in), V]`` and the coverage loss ``[len(tgt_in)]`` of one sentence (LSTM, one layer)."""
  x = params["src_embed"]["embedding"][src]
  forward, _ = _rnn("lstm", params["encoder_fwd_0"]["cell"], x, H)
  backward, _ = _rnn("lstm", params["encoder_bwd_0"]["cell"], x[::-1], H)
  h = np.concatenate([forward, backward[::-1]], axis=-1)  # annotations h_j
  state = (np.zeros(H), np.tanh(backward[::-1][0] @ params["init_state_0"]["kernel"]))
  dec = params["decoder"]
  att = dec["attention"]
  readout = dec["readout"]["kernel"]
  c_cov = np.zeros(len(src))  # eq. 10: c^0 = 0
  log_probs, cov_losses = [], []
  for y in tgt_in:
    s_prev = state[1]
    # eq. 11: e_i^t = v^T tanh(W_h h_i + W_s s + w_c c_i^t) (+ no b_attn: the attention has no bias)
    w_c = dec["w_coverage"] if coverage else np.zeros(A)
    e = np.array([att["v"] @ np.tanh(s_prev @ att["w_query"] + h_j @ att["w_keys"] + c_cov[j] * w_c)
                  for j, h_j in enumerate(h)])
    a = _softmax(e)
    context = a @ h  # h*_t
    cov_losses.append(np.minimum(a, c_cov).sum())  # eq. 12: Σ_i min(a_i^t, c_i^t)
    c_cov = c_cov + a
    ey = params["tgt_embed"]["embedding"][y]
    state = _lstm(dec["cell_0"], np.concatenate([ey, context]), state)
    s = state[1]
    t_tilde = s @ readout[:H] + ey @ readout[H:H + E] + context @ readout[H + E:] + dec["readout"]["bias"]
    t = np.array([max(t_tilde[2 * j], t_tilde[2 * j + 1]) for j in range(L_MAXOUT)])
    p_vocab = _softmax(_dense(params["output"], t))
    if not copy:
      log_probs.append(np.log(p_vocab))
      continue
    g = dec["pointer"]
    # eq. 8: p_gen = σ(w_h^T h*_t + w_s^T s_t + w_x^T x_t + b_ptr)
    p_gen = _sigmoid(context @ g["w_0"][:, 0] + s @ g["w_1"][:, 0] + ey @ g["w_2"][:, 0] + g["b_ptr"][0])
    # eq. 9: P(w) = p_gen P_vocab(w) + (1 - p_gen) Σ_{i: w_i = w} a_i^t
    p = np.array([p_gen * p_vocab[w] + (1 - p_gen) * sum(a[i] for i in range(len(src)) if src[i] == w)
                  for w in range(V)])
    log_probs.append(np.log(p))
  return np.stack(log_probs), np.array(cov_losses)


@pytest.mark.parametrize("copy, coverage", [(True, False), (False, True), (True, True)])
def test_pointer_generator_and_coverage_equal_see_et_al(x64, copy, coverage):
  del x64
  src, tgt = _batch()
  model = RNNSeq2Seq(src_vocab_size=V, tgt_vocab_size=V, embed_dim=E, hidden_dim=H, attention="bahdanau",
                     attention_dim=A, maxout_dim=L_MAXOUT, copy=copy, coverage=coverage, coverage_loss_weight=0.7,
                     dtype=jnp.float64)
  variables = model.init(jax.random.PRNGKey(0), jnp.asarray(src), jnp.asarray(tgt))
  rng = np.random.default_rng(1)  # noise on every parameter: w_c and the biases start at zero
  flat = flax.traverse_util.flatten_dict(variables["params"])
  params = flax.traverse_util.unflatten_dict({k: (np.asarray(v) + 0.3 * rng.normal(size=v.shape)).astype(np.float32)
                                              for k, v in flat.items()})
  out, sown = model.apply({"params": jax.tree_util.tree_map(jnp.asarray, params)}, jnp.asarray(src),
                          jnp.asarray(tgt), mutable=["losses"])
  params64 = jax.tree_util.tree_map(lambda x: np.asarray(x, np.float64), params)
  for b in range(2):
    ref_logp, ref_cov = _see_et_al(params64, src[b, :SRC_LENGTHS[b]], tgt[b, :TGT_LENGTHS[b]], copy, coverage)
    got = np.asarray(out[b, :TGT_LENGTHS[b]])
    if copy:  # log-probabilities, normalised
      np.testing.assert_allclose(got, ref_logp, atol=1e-5, rtol=1e-5, err_msg=f"sentence {b}")
    else:  # logits: compared after log-softmax
      np.testing.assert_allclose(jax.nn.log_softmax(got), ref_logp, atol=1e-5, rtol=1e-5, err_msg=f"sentence {b}")
    if coverage:
      (loss,) = sown["losses"]["coverage"]
      assert ref_cov[1:].min() > 0.01  # attention overlaps: the min() is not trivially zero
      np.testing.assert_allclose(np.asarray(loss[b, :TGT_LENGTHS[b]]), 0.7 * ref_cov, atol=1e-6, rtol=1e-5)
    else:
      assert "losses" not in sown or not sown["losses"]


def test_copy_distribution_sums_the_attention_of_every_occurrence():
  rng = np.random.default_rng(0)
  src = np.array([[3, 4, 3, 5, 0], [6, 6, 6, 4, 4]])
  attention = rng.dirichlet(np.ones(5), size=(2, 3))
  got = np.asarray(copy_lib.copy_distribution(jnp.asarray(attention), jnp.asarray(src), 8))
  for b in range(2):
    for t in range(3):
      for w in range(8):
        assert got[b, t, w] == pytest.approx(sum(attention[b, t, i] for i in range(5) if src[b, i] == w), abs=1e-6)


def test_mixture_is_a_distribution_and_copy_only_reaches_source_tokens():
  rng = np.random.default_rng(0)
  logits = jnp.asarray(rng.normal(size=(2, 3, 9)))
  src = jnp.asarray([[3, 4, 3], [5, 6, 7]])
  attention = jnp.asarray(rng.dirichlet(np.ones(3), size=(2, 3)))
  p = np.exp(np.asarray(copy_lib.mix_log_probs(logits, jnp.zeros((2, 3)), attention, src)))  # p_gen = 0: copy only
  np.testing.assert_allclose(p.sum(-1), 1.0, rtol=1e-5)
  assert p[0, :, [0, 1, 2, 5, 6, 7, 8]].max() < 1e-6 and p[1, :, [3, 4]].max() < 1e-6
  p = np.exp(np.asarray(copy_lib.mix_log_probs(logits, jnp.full((2, 3), 0.25), attention, src)))
  np.testing.assert_allclose(p.sum(-1), 1.0, rtol=1e-5)
  # See et al. eq. 9 at p_gen = 0.25: P(w) = p_gen P_vocab(w) + (1 - p_gen) Σ_{i: w_i = w} a_i, in float64
  z = np.asarray(logits, np.float64)
  p_vocab = np.exp(z - z.max(-1, keepdims=True))
  p_vocab /= p_vocab.sum(-1, keepdims=True)
  a, ids = np.asarray(attention, np.float64), np.asarray(src)
  expected = np.array([[[0.25 * p_vocab[b, t, w] + 0.75 * sum(a[b, t, i] for i in range(3) if ids[b, i] == w)
                         for w in range(9)] for t in range(3)] for b in range(2)])
  np.testing.assert_allclose(p, expected, rtol=1e-5, atol=1e-6)


def test_coverage_loss_sums_the_smaller_of_attention_and_coverage():
  a = jnp.asarray([[0.5, 0.5], [0.2, 0.8], [1.0, 0.0]])
  c = jnp.asarray([[0.0, 0.0], [0.5, 0.5], [0.7, 1.3]])  # the attention of the steps before each
  np.testing.assert_allclose(np.asarray(copy_lib.coverage_loss(a, c)), [0.0, 0.7, 0.7], atol=1e-7)


def test_copy_and_coverage_need_additive_attention_and_one_vocabulary():
  with pytest.raises(ValueError, match="need attention='bahdanau'"):
    RNNSeq2Seq(src_vocab_size=V, tgt_vocab_size=V, attention="luong_dot", copy=True)
  with pytest.raises(ValueError, match="one shared vocabulary"):
    RNNSeq2Seq(src_vocab_size=V, tgt_vocab_size=V + 1, attention="bahdanau", copy=True)


def test_train_loss_adds_the_coverage_loss_of_real_target_tokens_only():
  """The step's loss_sum is the NLL plus λ·covloss summed over the real target tokens (tgt_mask), nll_sum the NLL."""
  from attnjax.models.losses import smoothed_cross_entropy  # pylint: disable=g-import-not-at-top
  from attnjax.families.seq2seq import seq2seq_loss_stats  # pylint: disable=g-import-not-at-top
  src, tgt = (jnp.asarray(x) for x in _batch())
  model = RNNSeq2Seq(src_vocab_size=V, tgt_vocab_size=V, embed_dim=E, hidden_dim=H, attention="bahdanau",
                     copy=True, coverage=True, coverage_loss_weight=2.0)
  params = model.init(jax.random.PRNGKey(0), src, tgt)["params"]
  tgt_out = jnp.concatenate([tgt[:, 1:], jnp.zeros((2, 1), tgt.dtype)], axis=1)
  mask = jnp.arange(tgt.shape[1])[None] < jnp.asarray(TGT_LENGTHS)[:, None]
  batch = {"src": src, "src_mask": src != 0, "tgt_in": tgt, "tgt_out": tgt_out, "tgt_mask": mask}
  stats = seq2seq_loss_stats(model, params, batch, None, True)
  log_probs, sown = model.apply({"params": params}, src, tgt, mutable=["losses"])
  coverage = np.asarray(sown["losses"]["coverage"][0])
  nll = smoothed_cross_entropy(log_probs, tgt_out, mask)["nll_sum"]
  assert coverage[~np.asarray(mask)].sum() > 0  # padding positions have a coverage loss that must be left out
  assert float(stats["nll_sum"]) == pytest.approx(float(nll), rel=1e-6)
  assert float(stats["loss_sum"]) == pytest.approx(float(nll) + coverage[np.asarray(mask)].sum(), rel=1e-6)
