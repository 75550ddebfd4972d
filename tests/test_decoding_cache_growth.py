"""A search whose cache starts short and doubles (``cache_start``) decodes what the full-length cache decodes.

The search runs stage by stage, each stage a loop over a cache twice as long as the last one's, and the cache is
copied into the longer buffer between stages (``attnjax.decoding._grow_cache``). Every cache layout is covered: the
Transformer's ``[B, N, H, L]`` keys, its ``[B, L, N, H]`` keys (relative positions), a local window, the RNN's
state with coverage (no length axis: nothing to grow) and ConvS2S's window of recent inputs. ``min_len`` keeps
every hypothesis going past the first three stages (2, 4 and 8 positions).
"""

import jax
import numpy as np
import pytest

from attnjax import decoding
from attnjax.models.convs2s import ConvS2S
from attnjax.models.rnn_seq2seq import RNNSeq2Seq
from attnjax.models.transformer import Transformer
from tests.models import conformance

V, B, S = 11, 3, 6
MIN_LEN = 9  # EOS banned before 9 tokens: every output crosses the stages of 2, 4 and 8 positions

_TRANSFORMER = dict(src_vocab_size=V, tgt_vocab_size=V, num_encoder_layers=1, num_decoder_layers=2, d_model=16,
                    num_heads=2, d_ff=32, dropout_rate=0.0, max_length=32)
MODELS = {
    "transformer": lambda: Transformer(**_TRANSFORMER),
    "transformer_relative": lambda: Transformer(**_TRANSFORMER, positional="relative", max_relative_distance=3),
    "transformer_local": lambda: Transformer(**_TRANSFORMER, attention_type="local", local_window=2),
    "rnn_copy_coverage": lambda: RNNSeq2Seq(src_vocab_size=V, tgt_vocab_size=V, embed_dim=8, hidden_dim=8,
                                            attention="bahdanau", copy=True, coverage=True, dropout_rate=0.0),
    "convs2s": lambda: ConvS2S(src_vocab_size=V, tgt_vocab_size=V, embed_dim=8, hidden_dim=8, encoder_layers=1,
                               decoder_layers=2, kernel_width=3, dropout_rate=0.0, max_length=32),
}

# The staged search attends over a shorter buffer, so XLA may sum a softmax's terms in another order: each step's
# log-probabilities can move by a few float32 ulps of the logits' size (here below 20), and a score sums at most 19
# of them. 19 steps x 8 ulps x 20 x 2^-23 is about 4e-4; a wrong cache moves the scores by tenths.
SCORE_ATOL = 19 * 8 * 20 * 2.0 ** -23


@pytest.mark.parametrize("name", sorted(MODELS))
def test_a_growing_cache_decodes_what_the_full_cache_decodes(name):
  rng = np.random.default_rng(0)
  model = MODELS[name]()
  src, tgt = conformance.random_batch(rng, B, S, 5, V, src_lengths=[6, 4, 3])
  variables = conformance.init(model, src, tgt, seed=1)
  variables = jax.tree_util.tree_map(lambda x: x * 2.0, variables)  # sharper: beams part ways
  common = dict(max_len_a=1.5, max_len_b=10, min_len=MIN_LEN)  # buffer 19: stages 2, 4, 8, 19
  assert decoding._cache_lengths(19, 2) == (2, 4, 8, 19)  # pylint: disable=protected-access
  full = decoding.beam_search(model, variables, src, beam_size=3, n_best=3, cache_start=None, **common)
  grown = decoding.beam_search(model, variables, src, beam_size=3, n_best=3, cache_start=2, **common)
  assert np.asarray(full.lengths).min() > 8
  np.testing.assert_array_equal(np.asarray(grown.tokens), np.asarray(full.tokens))
  np.testing.assert_allclose(np.asarray(grown.scores), np.asarray(full.scores), rtol=0, atol=SCORE_ATOL)
  if name == "transformer":  # greedy's loop carries its cache in another place of its state
    full = decoding.greedy_search(model, variables, src, cache_start=None, **common)
    grown = decoding.greedy_search(model, variables, src, cache_start=2, **common)
    np.testing.assert_array_equal(np.asarray(grown.tokens), np.asarray(full.tokens))
    np.testing.assert_allclose(np.asarray(grown.scores), np.asarray(full.scores), rtol=0, atol=SCORE_ATOL)


def test_the_cache_lengths_double_up_to_the_buffer_and_bad_starts_are_refused():
  lengths = decoding._cache_lengths  # pylint: disable=protected-access
  assert lengths(32, 16) == (16, 32) and lengths(12, 16) == (12,) and lengths(32, None) == (32,)
  assert lengths(200, 16) == (16, 32, 64, 200) and lengths(31, 16) == (31,) and lengths(33, 16) == (16, 33)
  model = MODELS["transformer"]()
  src, tgt = conformance.random_batch(np.random.default_rng(0), B, S, 5, V)
  variables = conformance.init(model, src, tgt)
  for bad in (0, -1, 2.0, True):
    with pytest.raises(ValueError, match="cache_start must be a positive int"):
      decoding.beam_search(model, variables, src, cache_start=bad)
