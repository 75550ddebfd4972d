"""The GNMT length penalty and beam-search scores against numbers computed by hand.

Wu et al. 2016 (GNMT) eq. 14: lp(Y) = (5 + |Y|)^α / (5 + 1)^α = ((5 + |Y|) / 6)^α, and a finished hypothesis scores
s(Y) = log P(Y|X) / lp(Y) (|Y| counts the generated tokens, EOS included, as attnjax.decoding documents). The
expected values below are literals worked out by hand (the arithmetic is in the comments), never calls of the module
under test, so that a wrong penalty (e.g. |Y|^(2α)) cannot pass by agreeing with itself.
"""

import math

import flax.linen as nn
import jax.numpy as jnp
import numpy as np
import pytest

from attnjax.decoding import beam_search, length_penalty
from attnjax.models.interface import BOS_ID, EOS_ID, DecoderOutput, source_mask

A, B = 3, 4  # the two word types of the toy target vocabulary {PAD 0, BOS 1, EOS 2, a 3, b 4}

# P(next | previous token), independent of the source. Rows: previous token; columns: PAD, BOS, EOS, a, b.
# PAD and BOS are never produced (logit -1e4: probability e^-10000, i.e. 0 in float32).
NEXT_TOKEN_PROBABILITIES = {
    BOS_ID: {EOS_ID: 0.17, A: 0.13, B: 0.70},
    A: {EOS_ID: 0.90, A: 0.06, B: 0.04},
    B: {EOS_ID: 0.05, A: 0.25, B: 0.70},
}


def _logit_table():
  rows = []
  for prev in range(5):
    probs = NEXT_TOKEN_PROBABILITIES.get(prev, {EOS_ID: 1.0})  # unreachable rows (PAD, EOS): anything finite
    rows.append(tuple(math.log(probs[v]) if v in probs else -1.0e4 for v in range(5)))
  return tuple(rows)


class BigramModel(nn.Module):
  """A model of the attnjax interface whose next-token logits are a fixed table indexed by the previous token."""
  table: tuple

  def encode(self, src, src_mask=None, *, deterministic=True):
    return {"src_mask": source_mask(src, src_mask)}

  def init_cache(self, memory, max_length):
    return {"index": jnp.zeros((memory["src_mask"].shape[0],), jnp.int32)}

  def decode(self, tgt_in, memory, cache=None, *, deterministic=True, return_attention=False):
    logits = jnp.asarray(self.table, jnp.float32)[tgt_in]  # [B, T, V]
    new_cache = None if cache is None else {"index": cache["index"] + tgt_in.shape[1]}
    return DecoderOutput(logits, new_cache, None)

  def __call__(self, src, tgt_in, src_mask=None, *, deterministic=True):
    return self.decode(tgt_in, self.encode(src, src_mask)).logits


# ----------------------------------------------------------------------------------------------- the penalty


@pytest.mark.parametrize("length, alpha, expected", [
    (3, 0.6, 1.1884016386),  # (8/6)^0.6 = exp(0.6 · ln(4/3)) = exp(0.6 · 0.2876821) = exp(0.1726092)
    (1, 0.6, 1.0),  # (6/6)^α = 1: a one-token hypothesis is never rescaled
    (2, 0.6, 1.0969026199),  # (7/6)^0.6 = exp(0.6 · 0.1541507) = exp(0.0924904)
    (4, 0.6, 1.2754245006),  # (9/6)^0.6 = exp(0.6 · 0.4054651) = exp(0.2432791)
    (7, 1.0, 2.0),  # 12/6
    (13, 0.5, 1.7320508076),  # sqrt(18/6) = sqrt(3)
    (10, 0.2, 1.2011244340),  # (15/6)^0.2 = 2.5^0.2 = exp(0.2 · 0.9162907)
    (25, 0.0, 1.0),  # α = 0: no penalty
])
def test_gnmt_length_penalty_against_hand_computed_values(length, alpha, expected):
  np.testing.assert_allclose(float(length_penalty(length, alpha)), expected, rtol=1e-6)


# ------------------------------------------------------------------------------------------------ beam search
#
# Beam K = 2, at most 4 generated tokens (max_len_a = 0, max_len_b = 4: the 4th must be EOS). Every step takes the top
# 2K = 4 continuations; an EOS among the top K = 2 finishes with s = log P / lp(|Y|). The log-probabilities:
#   step 1: b ln .70 = -0.35667 | EOS ln .17 = -1.77196 (rank 2: finished) | a ln .13 = -2.04022
#   step 2: b b ln .49 = -0.71335 | b a ln .175 = -1.74297 | a EOS ln .117 = -2.14558 (rank 3: not finished)
#           | b EOS ln .035 = -3.35241
#   step 3: b b b ln .343 = -1.07002 | b a EOS ln .1575 = -1.84833 (rank 2: finished) | b b a ln .1225 = -2.09964
#   step 4 (EOS forced): b b a EOS ln .11025 = -2.20500 | b b b EOS ln .01715 = -4.06576
# Finished scores, α = 0:   EOS -1.77196,  b a EOS -1.84833,  b b a EOS -2.20500,  b b b EOS -4.06576
#                 α = 0.6:  EOS -1.77196 / 1 = -1.77196,  b a EOS -1.84833 / (8/6)^0.6 = -1.84833 / 1.18840 = -1.55531,
#                           b b a EOS -2.20500 / (9/6)^0.6 = -2.20500 / 1.27542 = -1.72884,
#                           b b b EOS -4.06576 / 1.27542 = -3.18781
# (these are also the best hypotheses of an exhaustive search over the 15 hypotheses of ≤ 4 tokens). A penalty of
# |Y|^(2α) = |Y|^1.2 would rank b b a EOS first (-2.20500 / 4^1.2 = -2.20500 / 5.27803 = -0.41777) and give
# b a EOS -1.84833 / 3^1.2 = -1.84833 / 3.73719 = -0.49458.

EXPECTED = {
    # alpha: [(tokens, score)] best first
    0.0: [((EOS_ID,), -1.7719568), ((B, A, EOS_ID), -1.8483298)],
    0.6: [((B, A, EOS_ID), -1.5553074), ((B, B, A, EOS_ID), -1.7288399)],
}


@pytest.mark.parametrize("alpha", sorted(EXPECTED))
def test_beam_search_finds_the_hand_computed_best_hypotheses_and_scores(alpha):
  model = BigramModel(_logit_table())
  src = jnp.asarray([[5, 6, 7], [5, 6, 0]], jnp.int32)  # the table ignores the source; two rows, one padded
  result = beam_search(model, {}, src, beam_size=2, alpha=alpha, max_len_a=0.0, max_len_b=4, n_best=2)
  for row in range(2):
    for rank, (tokens, score) in enumerate(EXPECTED[alpha]):
      got = [int(t) for t in np.asarray(result.tokens[row, rank]) if t != 0]
      assert got == list(tokens), (alpha, row, rank, got)
      assert int(result.lengths[row, rank]) == len(tokens)
      np.testing.assert_allclose(float(result.scores[row, rank]), score, atol=1e-5,
                                 err_msg=f"alpha={alpha}, row {row}, rank {rank}")
