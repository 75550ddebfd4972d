"""Generation from a decoder-only LM: sampling's distributional properties on fixed logits (top-k never leaves the
k, top-p's support is the smallest set reaching p, the frequencies are the renormalised softmax, temperature -> 0 is
greedy), the jit-compiled loop over the cache against step-by-step teacher forcing, and rows that stop at EOS at
different steps, PAD after it."""

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from attnjax import generation
from attnjax.models.lm import DecoderLM
from attnjax.tokens import BOS_ID, EOS_ID, PAD_ID
from tests.models import conformance

LOGITS = jnp.asarray([0.0, 0.0, 0.0, 2.0, 1.5, 1.4, 0.3, -1.0, 0.9, 2.2, -0.5, 0.1])  # PAD, BOS, EOS, then words
N = 20_000


def _draws(**kwargs):
  keys = jax.random.split(jax.random.PRNGKey(0), N)
  one = lambda key: generation.next_token(LOGITS[None], key, **kwargs)[0]  # noqa: E731
  return np.asarray(jax.vmap(one)(keys))


def _allowed_softmax(allowed, temperature=1.0):
  logits = np.asarray(LOGITS, np.float64) / temperature
  p = np.where(allowed, np.exp(logits - logits.max()), 0.0)
  return p / p.sum()


def test_top_k_never_samples_outside_the_k_and_follows_the_renormalised_softmax():
  draws = _draws(temperature=1.0, top_k=3, top_p=1.0)
  top3 = {9, 3, 4}  # the three largest logits (PAD and BOS are never sampled)
  assert set(np.unique(draws)) == top3
  expected = _allowed_softmax(np.isin(np.arange(12), list(top3)))
  frequencies = np.bincount(draws, minlength=12) / N
  np.testing.assert_allclose(frequencies, expected, atol=0.015)


def test_top_p_samples_from_the_smallest_set_that_reaches_p():
  probs = _allowed_softmax((np.arange(12) != PAD_ID) & (np.arange(12) != BOS_ID))  # PAD, BOS never; EOS may be
  order = np.argsort(-probs)
  cumulative = np.cumsum(probs[order])
  size = int(np.searchsorted(cumulative, 0.7) + 1)  # the smallest prefix with mass >= 0.7
  support = set(order[:size].tolist())
  draws = _draws(temperature=1.0, top_k=0, top_p=0.7)
  assert set(np.unique(draws)) == support
  expected = _allowed_softmax(np.isin(np.arange(12), list(support)))
  np.testing.assert_allclose(np.bincount(draws, minlength=12) / N, expected, atol=0.015)


def test_temperature_scales_the_distribution_and_tends_to_greedy():
  draws = _draws(temperature=0.5, top_k=0, top_p=1.0)
  expected = _allowed_softmax((np.arange(12) != PAD_ID) & (np.arange(12) != BOS_ID), temperature=0.5)
  np.testing.assert_allclose(np.bincount(draws, minlength=12) / N, expected, atol=0.015)
  assert np.all(_draws(temperature=1e-4, top_k=0, top_p=1.0) == 9)  # the argmax
  assert np.all(_draws(temperature=0.0, top_k=0, top_p=1.0) == 9)


def _tiny_lm(scale=4.0):
  model = DecoderLM(vocab_size=24, num_layers=2, d_model=16, num_heads=2, d_ff=32, dropout_rate=0.0,
                    max_length=64, implementation="xla")
  prompt = jnp.asarray([[BOS_ID, 5, 6, 7]] * 3, jnp.int32)
  params = nn.meta.unbox(model.init(jax.random.PRNGKey(0), prompt)["params"])
  params = jax.tree_util.tree_map(lambda p: p * scale, params)  # sharper distributions: repeats happen
  return model, params, prompt


def test_greedy_generation_over_the_cache_equals_the_argmax_of_teacher_forcing_step_by_step():
  model, params, prompt = _tiny_lm()
  out = np.asarray(generation.generate(model, params, prompt, jax.random.PRNGKey(0), max_new_tokens=10,
                                       temperature=0.0, vocab_size=20))
  sequence = list(np.asarray(prompt[0]))
  expected = []
  for _ in range(10):
    logits = np.array(conformance.jitted(model)({"params": params}, jnp.asarray([sequence], jnp.int32)))[0, -1]
    logits[[PAD_ID, BOS_ID]] = -np.inf
    logits[20:] = -np.inf
    token = int(np.argmax(logits))
    expected.append(token)
    if token == EOS_ID:
      break
    sequence.append(token)
  expected += [PAD_ID] * (10 - len(expected))
  assert out.tolist() == [expected] * 3


def test_generation_past_the_caches_first_length_goes_on_as_teacher_forcing_does():
  """40 sampled tokens (EOS banned) after a prompt of 4: the cache starts at 20 positions and grows to 44 on the way.
  Each token must be the draw that the same key makes from the teacher-forced logits after the tokens before it, a
  test that a wrong cache entry fails as soon as it moves one draw."""
  model, params, prompt = _tiny_lm(scale=1.5)
  new_tokens, rng = 40, jax.random.PRNGKey(5)
  assert generation.decoding._cache_lengths(4 + new_tokens, 4 + 16) == (20, 44)  # pylint: disable=protected-access
  kwargs = dict(temperature=1.0, top_k=0, top_p=1.0, vocab_size=20, banned=(EOS_ID,))
  out = np.asarray(generation.generate(model, params, prompt, rng, max_new_tokens=new_tokens, **kwargs))
  sequence = np.concatenate([np.asarray(prompt), out], axis=1)
  logits = conformance.jitted(model)({"params": params}, jnp.asarray(sequence[:, :-1], jnp.int32))  # one pass
  expected = [generation.next_token(logits[:, 3 + i], jax.random.fold_in(rng, i), **kwargs) for i in range(new_tokens)]
  assert out.tolist() == np.stack(expected, axis=1).tolist()
  assert len(set(out.ravel().tolist())) > 3  # drawn, not one token repeated


def test_no_new_tokens_is_an_empty_continuation():
  model, params, prompt = _tiny_lm()
  out = generation.generate(model, params, prompt, jax.random.PRNGKey(0), max_new_tokens=0, temperature=0.0)
  assert out.shape == (3, 0)


def test_sampling_is_reproducible_from_its_seed():
  model, params, prompt = _tiny_lm(scale=1.5)
  kwargs = dict(max_new_tokens=16, temperature=1.0, top_k=8, top_p=0.95, vocab_size=20)
  a = np.asarray(generation.generate(model, params, prompt, jax.random.PRNGKey(1), **kwargs))
  b = np.asarray(generation.generate(model, params, prompt, jax.random.PRNGKey(1), **kwargs))
  c = np.asarray(generation.generate(model, params, prompt, jax.random.PRNGKey(2), **kwargs))
  assert np.array_equal(a, b) and not np.array_equal(a, c)
  assert not np.any(np.isin(a, [BOS_ID])) and a.max() < 20


class _Scripted(nn.Module):
  """A language model that reads its next-token logits off a script: the n-th call of ``decode`` (the prompt's is
  the 0-th) answers ``params["script"][n]`` at every position, whatever the tokens; the cache counts the calls."""

  def init_cache(self, batch, length):
    del batch, length
    return jnp.zeros((), jnp.int32)

  def decode(self, tokens, cache):
    logits = self.variables["params"]["script"][cache]  # [B, V]
    return jnp.broadcast_to(logits[:, None], (*tokens.shape, logits.shape[-1])), cache + 1


STOPS = (2, 5, None)  # the step at which each row's EOS is certain (None: EOS never)
WORDS, AFTER = (5, 9), 7  # the words each row draws from before its EOS, and the one it would continue with


def _script(max_new_tokens, vocab=12):
  """``[max_new_tokens, B, V]`` logits: before a row's stop step WORDS[0] leads WORDS[1] by 1 (greedy takes WORDS[0],
  sampling draws both), at it EOS alone, after it AFTER alone (the model itself does not stop); EOS is impossible in
  the row that never stops."""
  script = np.full((max_new_tokens, len(STOPS), vocab), -1e9, np.float32)
  for r, stop in enumerate(STOPS):
    for i in range(max_new_tokens):
      if stop is None or i < stop:
        script[i, r, list(WORDS)] = (1.0, 0.0)
      else:
        script[i, r, EOS_ID if i == stop else AFTER] = 0.0
  return jnp.asarray(script)


def test_rows_that_reach_eos_at_different_steps_stop_there_and_are_padded_after_it():
  max_new_tokens = 8
  prompt = jnp.asarray([[BOS_ID, 5, 6]] * len(STOPS), jnp.int32)
  params = {"script": _script(max_new_tokens)}
  greedy = np.asarray(generation.generate(_Scripted(), params, prompt, jax.random.PRNGKey(0),
                                          max_new_tokens=max_new_tokens, temperature=0.0))
  expected = [[WORDS[0]] * stop + [EOS_ID] + [PAD_ID] * (max_new_tokens - stop - 1) if stop is not None
              else [WORDS[0]] * max_new_tokens for stop in STOPS]
  assert greedy.tolist() == expected
  sampled = np.asarray(generation.generate(_Scripted(), params, prompt, jax.random.PRNGKey(3),
                                           max_new_tokens=max_new_tokens, temperature=1.0, top_k=0, top_p=1.0))
  for row, stop in zip(sampled, STOPS):
    end = max_new_tokens if stop is None else stop
    assert set(row[:end].tolist()) <= set(WORDS), (row, stop)
    if stop is not None:
      assert row[stop] == EOS_ID and np.all(row[stop + 1:] == PAD_ID), (row, stop)
  words = sampled[np.isin(sampled, WORDS)]
  assert set(words.tolist()) == set(WORDS)  # both words drawn: the rows were sampled, not taken greedily


def test_beam_search_over_the_lm_scores_its_best_continuation_as_teacher_forcing_does():
  """A beam of 1 is greedy (up to the length limit, where beam search ends the hypothesis with EOS); a wider beam's
  best hypothesis is no worse, and its score is the length-normalised log-probability of its tokens under the model
  read with teacher forcing."""
  model, params, prompt = _tiny_lm(scale=2.0)
  one = np.asarray(generation.beam(model, params, prompt[:1], max_new_tokens=8, beam_size=1, alpha=0.0,
                                   vocab_size=20).tokens[0, 0])
  greedy = np.asarray(generation.generate(model, params, prompt[:1], jax.random.PRNGKey(0), max_new_tokens=8,
                                          temperature=0.0, vocab_size=20))[0]
  assert one[:7].tolist() == greedy[:7].tolist() and one[7] in (greedy[7], EOS_ID)
  result = generation.beam(model, params, prompt[:1], max_new_tokens=8, beam_size=4, alpha=0.6, n_best=2,
                           vocab_size=20)
  tokens, length = np.asarray(result.tokens[0, 0]), int(result.lengths[0, 0])
  sequence = np.concatenate([np.asarray(prompt[0]), tokens[:length]])[None].astype(np.int32)
  logits = np.array(model.apply({"params": params}, jnp.asarray(sequence)))[0].astype(np.float64)
  log_probs = logits - np.log(np.exp(logits - logits.max(-1, keepdims=True)).sum(-1, keepdims=True)) - logits.max(
      -1, keepdims=True)
  p = prompt.shape[1]
  logp = sum(log_probs[p - 1 + t, tokens[t]] for t in range(length))
  assert float(result.scores[0, 0]) == pytest.approx(logp / ((5 + length) / 6) ** 0.6, rel=1e-4)
  assert float(result.scores[0, 0]) >= float(result.scores[0, 1])
