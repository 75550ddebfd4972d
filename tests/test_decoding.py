"""Greedy and beam search over the model interface."""

import itertools

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from attnjax.decoding import beam_search, greedy_search, length_penalty
from attnjax.models.interface import BOS_ID, EOS_ID, PAD_ID
from attnjax.models.transformer import Transformer
from tests.models import conformance

V = 9


def _model(**kw):
  cfg = dict(src_vocab_size=V, tgt_vocab_size=V, num_encoder_layers=1, num_decoder_layers=2, d_model=16, num_heads=2,
             d_ff=32, dropout_rate=0.0)
  cfg.update(kw)
  return Transformer(**cfg)


@pytest.fixture(scope="module")
def random_model():
  rng = np.random.default_rng(0)
  model = _model()
  src, tgt = conformance.random_batch(rng, 8, 6, 5, V, src_lengths=[6, 5, 4, 3, 6, 2, 5, 4])
  variables = conformance.init(model, src, tgt, seed=3)
  # sharpen the random model so that it ends sentences at varied lengths instead of running to the limit
  variables = jax.tree_util.tree_map(lambda x: x * 2.0, variables)
  return model, variables, src


def _log_prob(model, variables, src, tokens):
  """log P(tokens | src) by teacher forcing, tokens [L] ending in EOS."""
  tgt_in = jnp.asarray([[BOS_ID] + list(tokens[:-1])])
  logits = conformance.jitted(model)(variables, src[None], tgt_in)
  return float(jnp.sum(jax.nn.log_softmax(logits[0])[jnp.arange(len(tokens)), jnp.asarray(tokens)]))


def _log_probs(model, variables, src, sequences):
  """log P(tokens | src) of each of ``sequences`` (token lists of one length, each ending in EOS) by teacher forcing,
  in one batch: :func:`_log_prob` of each, one model call instead of one per sequence."""
  tokens = jnp.asarray(sequences, jnp.int32)
  tgt_in = jnp.concatenate([jnp.full((len(sequences), 1), BOS_ID, jnp.int32), tokens[:, :-1]], axis=1)
  logits = conformance.jitted(model)(variables, jnp.broadcast_to(src, (len(sequences), src.shape[0])), tgt_in)
  log_probs = jnp.take_along_axis(jax.nn.log_softmax(logits), tokens[..., None], axis=-1)[..., 0]
  return [float(x) for x in log_probs.sum(-1)]


def _strip(tokens):
  tokens = list(np.asarray(tokens))
  return tokens[:tokens.index(EOS_ID) + 1] if EOS_ID in tokens else [t for t in tokens if t != PAD_ID]


def test_beam_size_one_equals_greedy(random_model):
  model, variables, src = random_model
  greedy = greedy_search(model, variables, src, max_len_b=6)
  beam = beam_search(model, variables, src, beam_size=1, alpha=0.0, max_len_b=6)
  np.testing.assert_array_equal(beam.tokens[:, 0], greedy.tokens)
  np.testing.assert_allclose(beam.scores[:, 0], greedy.scores, rtol=1e-5)


def test_greedy_log_prob_equals_teacher_forced_log_prob(random_model):
  model, variables, src = random_model
  greedy = greedy_search(model, variables, src, max_len_b=6)
  for b in range(src.shape[0]):
    tokens = _strip(greedy.tokens[b])
    if tokens[-1] == EOS_ID:
      assert abs(_log_prob(model, variables, src[b], tokens) - float(greedy.scores[b])) < 1e-4


def test_wide_beam_finds_the_exhaustive_best_hypothesis(random_model):
  model, variables, src = random_model
  max_gen, alpha = 3, 0.6
  result = beam_search(model, variables, src[:2], beam_size=64, alpha=alpha, max_len_a=0.0, max_len_b=max_gen,
                       n_best=3)
  words = [t for t in range(V) if t not in (PAD_ID, BOS_ID, EOS_ID)]
  for b in range(2):
    best = []
    for n in range(max_gen):  # every sequence of n words followed by EOS
      sequences = [list(seq) + [EOS_ID] for seq in itertools.product(words, repeat=n)]
      penalty = float(length_penalty(n + 1, alpha))
      best += [(log_prob / penalty, tokens)
               for log_prob, tokens in zip(_log_probs(model, variables, src[b], sequences), sequences)]
    best.sort(key=lambda x: -x[0])
    for rank in range(3):
      assert _strip(result.tokens[b, rank]) == best[rank][1]
      assert abs(float(result.scores[b, rank]) - best[rank][0]) < 1e-4


def test_beam_output_independent_of_batch_size(random_model):
  model, variables, src = random_model
  full = beam_search(model, variables, src, beam_size=3, max_len_b=5, return_attention=True)
  for size in (1, 3):
    for start in range(0, 8, size):
      part = beam_search(model, variables, src[start:start + size], beam_size=3, max_len_b=5, return_attention=True)
      for j in range(part.tokens.shape[0]):
        assert _strip(part.tokens[j, 0]) == _strip(full.tokens[start + j, 0])
        np.testing.assert_allclose(part.scores[j], full.scores[start + j], rtol=1e-5, atol=1e-5)


def test_length_limit_is_relative_to_each_source(random_model):
  model, variables, src = random_model
  result = greedy_search(model, variables, src, max_len_a=1.0, max_len_b=1)
  src_lengths = np.asarray((src != PAD_ID).sum(1))
  assert (np.asarray(result.lengths) <= src_lengths + 1).all()
  beam = beam_search(model, variables, src, beam_size=2, max_len_a=1.0, max_len_b=1)
  assert (np.asarray(beam.lengths[:, 0]) <= src_lengths + 1).all()


def test_attention_of_the_chosen_hypothesis_is_returned(random_model):
  model, variables, src = random_model
  result = beam_search(model, variables, src, beam_size=2, max_len_b=4, return_attention=True)
  attn = np.asarray(result.attention[:, 0])  # [B, L, S]
  lengths = np.asarray(result.lengths[:, 0])
  src_lengths = np.asarray((src != PAD_ID).sum(1))
  for b in range(src.shape[0]):
    np.testing.assert_allclose(attn[b, :lengths[b]].sum(-1), 1.0, rtol=1e-5)
    np.testing.assert_array_equal(attn[b, :, src_lengths[b]:], 0.0)
  # the same weights as teacher forcing the chosen hypothesis
  tokens = _strip(result.tokens[0, 0])
  memory = model.apply(variables, src[:1], method=model.encode)
  out = model.apply(variables, jnp.asarray([[BOS_ID] + tokens[:-1]]), memory, return_attention=True,
                    method=model.decode)
  np.testing.assert_allclose(attn[0, :len(tokens)], out.attention[0], atol=1e-5)


def test_bad_beam_arguments_are_refused(random_model):
  model, variables, src = random_model
  with pytest.raises(ValueError, match="n_best"):
    beam_search(model, variables, src, beam_size=2, n_best=3)


def test_model_trained_on_a_copy_task_decodes_it_exactly():
  rng = np.random.default_rng(0)
  model = _model(num_encoder_layers=2, d_model=32, num_heads=4, d_ff=64)

  def batch(n):
    lengths = rng.integers(2, 7, size=n)
    src = np.zeros((n, 7), np.int32)
    for i, length in enumerate(lengths):
      src[i, :length] = rng.integers(3, V, size=length)
    tgt_out = np.zeros((n, 8), np.int32)
    tgt_out[:, :7] = src
    tgt_out[np.arange(n), lengths] = EOS_ID
    tgt_in = np.concatenate([np.full((n, 1), BOS_ID), tgt_out[:, :-1]], axis=1)
    return jnp.asarray(src), jnp.asarray(tgt_in), jnp.asarray(tgt_out)

  src, tgt_in, tgt_out = batch(64)
  params = conformance.init(model, src, tgt_in)["params"]
  opt = optax.adam(3e-3)
  opt_state = opt.init(params)

  @jax.jit
  def step(params, opt_state, src, tgt_in, tgt_out):
    def loss(p):
      logits = model.apply({"params": p}, src, tgt_in)
      nll = optax.softmax_cross_entropy_with_integer_labels(logits, tgt_out)
      return jnp.sum(nll * (tgt_out != PAD_ID)) / jnp.sum(tgt_out != PAD_ID)
    value, grads = jax.value_and_grad(loss)(params)
    updates, opt_state = opt.update(grads, opt_state)
    return optax.apply_updates(params, updates), opt_state, value

  # trained to a small loss rather than for a fixed number of steps: at 400 steps (loss ~0.04) a row in 32 could
  # still differ, depending on the float summation order of the machine's thread pool
  for i in range(2000):
    params, opt_state, loss = step(params, opt_state, *batch(64))
    if i >= 400 and i % 100 == 0 and float(loss) < 0.005:
      break
  src, _, tgt_out = batch(32)
  for decode in (greedy_search, lambda *a, **k: beam_search(*a, beam_size=3, **k)):
    result = decode(model, {"params": params}, src, max_len_a=1.0, max_len_b=2)
    tokens = result.tokens if result.tokens.ndim == 2 else result.tokens[:, 0]
    for b in range(32):
      assert _strip(tokens[b]) == _strip(tgt_out[b]), (b, float(loss))


def test_search_never_emits_pad_bos_or_padded_vocabulary_ids():
  """A model that prefers PAD, BOS and the ids past the real vocabulary (a table padded for sharding) above all else:
  with ``vocab_size`` the searches choose among the other ids instead."""
  import flax.linen as nn  # pylint: disable=g-import-not-at-top

  model = _model(num_encoder_layers=1, d_model=16, num_heads=2, d_ff=32)
  src = jnp.asarray(np.array([[3, 4, 5, 0], [5, 4, 0, 0]], np.int32))
  real = V - 3  # the last 3 ids of the table are padding
  boost = np.zeros(V, np.float32)
  boost[[PAD_ID, BOS_ID]] = 20.0
  boost[real:] = 20.0

  class Biased(nn.Module):
    """The interface's methods of ``inner``, with +20 on the logits of PAD, BOS and the padded ids."""
    inner: nn.Module

    def encode(self, *a, **k):
      return self.inner.encode(*a, **k)

    def init_cache(self, *a, **k):
      return self.inner.init_cache(*a, **k)

    def decode(self, *a, **k):
      out = self.inner.decode(*a, **k)
      return out._replace(logits=out.logits + boost)

  biased = Biased(model)
  variables = {"params": {"inner": conformance.init(model, src, src)["params"]}}
  for search in (greedy_search, lambda *a, **k: beam_search(*a, beam_size=3, n_best=3, **k)):
    unmasked = np.asarray(search(biased, variables, src, max_len_a=1.0, max_len_b=3).tokens)
    assert np.isin(unmasked, [PAD_ID, BOS_ID] + list(range(real, V))).any()  # the bias bites without vocab_size
    result = search(biased, variables, src, max_len_a=1.0, max_len_b=3, vocab_size=real)
    tokens, lengths, scores = (np.asarray(x) for x in (result.tokens, result.lengths, result.scores))
    rows = zip(tokens.reshape(-1, tokens.shape[-1]), lengths.reshape(-1), scores.reshape(-1))
    # (with 4 allowed ids a beam of 3 can run out of live hypotheses: n-best entries scored -inf-like are not real)
    real_rows = [(row, length) for row, length, score in rows if score > -1e8]
    assert len(real_rows) >= len(src)
    for row, length in real_rows:
      generated = row[:length]
      assert length > 0 and not np.isin(generated, [PAD_ID, BOS_ID]).any() and (generated < real).all(), generated


def test_the_beam_reorder_leaves_a_caches_per_source_entries_in_place_and_reorders_the_rest():
  import jax.numpy as jnp  # pylint: disable=g-import-not-at-top
  from attnjax import decoding  # pylint: disable=g-import-not-at-top
  from attnjax.models.interface import PER_SOURCE  # pylint: disable=g-import-not-at-top
  rows = jnp.arange(4.0)[:, None] * jnp.ones((4, 3))
  cache = {"index": jnp.arange(4), "layers": ({"self": rows, PER_SOURCE: {"key": rows}},)}
  out = decoding._gather_beams(cache, jnp.array([1, 1, 3, 2]))  # pylint: disable=protected-access
  assert out["index"].tolist() == [1, 1, 3, 2] and out["layers"][0]["self"][:, 0].tolist() == [1, 1, 3, 2]
  assert out["layers"][0][PER_SOURCE]["key"] is cache["layers"][0][PER_SOURCE]["key"]
