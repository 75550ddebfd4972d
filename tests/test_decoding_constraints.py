"""Decoding for long outputs: n-gram blocking, the minimum length, and both inside the one beam search."""

import itertools

import jax.numpy as jnp
import numpy as np
import pytest

from attnjax.decoding import beam_search, greedy_search, length_penalty, ngram_bans
from attnjax.models.interface import BOS_ID, EOS_ID, PAD_ID
from tests.models import conformance
from tests.test_decoding import _log_probs, _model, _strip


def _repeats_an_ngram(tokens, n):
  grams = [tuple(tokens[i:i + n]) for i in range(len(tokens) - n + 1)]
  return len(grams) != len(set(grams))


def _completes_a_seen_ngram(prefix, token, n):
  """Whether ``prefix + [token]`` ends in an n-gram that ``prefix`` already holds."""
  new = tuple((prefix + [token])[-n:])
  return len(prefix) + 1 >= n and new in {tuple(prefix[i:i + n]) for i in range(len(prefix) - n + 1)}


@pytest.mark.parametrize("n", [1, 2, 3])
def test_ngram_bans_equal_a_brute_force_check_on_every_prefix_of_a_tiny_vocabulary(n):
  """Every sequence of up to 6 tokens over {3, 4, 5}: token w is banned after it iff the n-gram it completes is
  already in the sequence (a prefix that repeats an n-gram itself still bans only the completing tokens)."""
  vocab, length = 6, 7
  prefixes = [list(p) for size in range(length) for p in itertools.product((3, 4, 5), repeat=size)]
  generated = np.full((len(prefixes), length), PAD_ID, np.int32)
  for row, prefix in enumerate(prefixes):
    generated[row, :len(prefix)] = prefix
  for count in range(length):
    rows = [r for r, p in enumerate(prefixes) if len(p) == count]
    got = np.asarray(ngram_bans(jnp.asarray(generated[rows]), count, n, vocab))
    want = np.array([[_completes_a_seen_ngram(prefixes[r], w, n) for w in range(vocab)] for r in rows])
    np.testing.assert_array_equal(got, want, err_msg=f"prefixes of length {count}")


@pytest.fixture(scope="module")
def tiny_model():
  """A random Transformer over 6 ids: 3 words {3, 4, 5}, so a 64-wide beam over 3 words holds every hypothesis."""
  rng = np.random.default_rng(1)
  model = _model(src_vocab_size=6, tgt_vocab_size=6)
  src, tgt = conformance.random_batch(rng, 4, 5, 4, 6, src_lengths=[5, 4, 3, 5])
  variables = conformance.init(model, src, tgt, seed=5)
  variables = {"params": {k: v for k, v in variables["params"].items()}}
  return model, variables, src


@pytest.mark.parametrize("n, min_len", [(2, 2), (1, 1), (0, 3)])
def test_wide_beam_with_blocking_and_min_length_finds_the_exhaustive_best_allowed_hypothesis(tiny_model, n, min_len):
  """Beam search (K = 64 > every hypothesis of up to 3 words) with the constraints equals the best of all sequences
  that have at least ``min_len`` words and no repeated n-gram, scored by teacher forcing."""
  model, variables, src = tiny_model
  max_gen, alpha = 4, 0.6
  result = beam_search(model, variables, src[:2], beam_size=64, alpha=alpha, max_len_a=0.0, max_len_b=max_gen,
                       n_best=3, min_len=min_len, no_repeat_ngram_size=n)
  for b in range(2):
    best = []
    for size in range(min_len, max_gen):
      sequences = [list(seq) + [EOS_ID] for seq in itertools.product((3, 4, 5), repeat=size)
                   if not (n and _repeats_an_ngram(list(seq), n))]
      penalty = float(length_penalty(size + 1, alpha))
      best += [(lp / penalty, seq) for lp, seq in zip(_log_probs(model, variables, src[b], sequences), sequences)]
    best.sort(key=lambda x: -x[0])
    for rank in range(3):
      assert _strip(result.tokens[b, rank]) == best[rank][1], (b, rank)
      assert float(result.scores[b, rank]) == pytest.approx(best[rank][0], abs=1e-4)


def test_greedy_with_constraints_takes_the_best_allowed_token_at_every_step(tiny_model):
  """Greedy with trigram blocking and a minimum length, against a step-by-step reference that teacher-forces the
  prefix and takes the argmax over the tokens a brute-force check allows."""
  model, variables, src = tiny_model
  n, min_len, max_gen = 2, 3, 6
  out = greedy_search(model, variables, src, max_len_a=0.0, max_len_b=max_gen, min_len=min_len,
                      no_repeat_ngram_size=n)
  for b in range(src.shape[0]):
    prefix = []
    while not prefix or prefix[-1] != EOS_ID:
      tgt_in = jnp.asarray([[BOS_ID] + prefix])
      logits = np.asarray(conformance.jitted(model)(variables, src[b:b + 1], tgt_in))[0, -1]
      allowed = [w for w in (3, 4, 5) if not _completes_a_seen_ngram(prefix, w, n)]
      if len(prefix) >= min_len:
        allowed.append(EOS_ID)
      if len(prefix) + 1 >= max_gen:
        allowed = [EOS_ID]
      prefix.append(max(allowed, key=lambda w: logits[w]))
    assert _strip(out.tokens[b]) == prefix, b


def test_constrained_beam_output_is_independent_of_the_batch(tiny_model):
  model, variables, src = tiny_model
  options = dict(beam_size=3, max_len_a=0.0, max_len_b=8, min_len=4, no_repeat_ngram_size=2)
  full = beam_search(model, variables, src, **options)
  for b in range(src.shape[0]):
    alone = beam_search(model, variables, src[b:b + 1], **options)
    assert _strip(alone.tokens[0, 0]) == _strip(full.tokens[b, 0])
    tokens = _strip(full.tokens[b, 0])
    assert len(tokens) - 1 >= 4 and not _repeats_an_ngram(tokens, 2)


@pytest.mark.parametrize("name", ["min_len", "no_repeat_ngram_size"])
def test_negative_constraints_are_refused_naming_the_argument(tiny_model, name):
  model, variables, src = tiny_model
  with pytest.raises(ValueError, match=f"{name} must be a non-negative int"):
    beam_search(model, variables, src, **{name: -1})
