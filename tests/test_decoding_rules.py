"""``transformers``' beam-search rules (:class:`attnjax.decoding.SearchRules`), checked against a transcription of
the library's algorithm (``GenerationMixin._beam_search`` of transformers 5, one source at a time, in plain Python
over teacher-forced log-probabilities): its length penalty |Y|^α, its ends of a row (``early_stopping`` False: the
heuristic at the current length; True: K finished; ``"never"``: the bound at the length limit), the last step at
the limit (``forced_eos_token_id``: only EOS, scored 0; without it every top-K hypothesis ends there as it is), a
forced first token and banned ids."""

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from attnjax.decoding import NEG_INF, SearchRules, beam_search, greedy_search
from attnjax.models.interface import BOS_ID, EOS_ID, PAD_ID
from tests.models import conformance
from tests.test_decoding import V, _model

K, MAX_NEW = 3, 7


@pytest.fixture(scope="module")
def random_model():
  """test_decoding.py's random model, with an EOS bias of 2 on its output layer so that rows finish K hypotheses
  before the length limit (where the rules for ending a row differ)."""
  rng = np.random.default_rng(0)
  model = _model(final_logits_bias=True)
  src, tgt = conformance.random_batch(rng, 8, 6, 5, V, src_lengths=[6, 5, 4, 3, 6, 2, 5, 4])
  variables = jax.tree_util.tree_map(lambda x: x * 2.0, nn.meta.unbox(conformance.init(model, src, tgt, seed=3)))
  variables["params"]["final_logits_bias"] = variables["params"]["final_logits_bias"].at[EOS_ID].set(2.0)
  return model, variables, src


def _next_log_probs(model, variables, src, prefixes):
  """``[N, V]`` log-softmax of the next token after each prefix (token lists of one length), by teacher forcing."""
  tgt_in = jnp.asarray([[BOS_ID] + p for p in prefixes], jnp.int32)
  logits = conformance.jitted(model)(variables, jnp.broadcast_to(src, (len(prefixes), src.shape[0])), tgt_in)
  return np.asarray(jax.nn.log_softmax(logits[:, -1].astype(jnp.float32)), np.float64)


def _library_beam(model, variables, src, rules: SearchRules, alpha: float):
  """The best hypothesis of transformers' beam search for one source (see the module docstring)."""
  penalty = lambda n: n ** alpha
  running = [([], 0.0)] + [([], -1e9)] * (K - 1)
  finished = []  # (score, tokens), best first, at most K
  for i in range(MAX_NEW):  # i tokens generated so far
    last = i + 1 == MAX_NEW
    log_probs = _next_log_probs(model, variables, src, [seq for seq, _ in running])
    log_probs[:, [PAD_ID, BOS_ID, *rules.banned]] = -np.inf
    if rules.first_token is not None and i == 0:
      log_probs[:] = -np.inf
      log_probs[:, rules.first_token] = 0.0
    if rules.at_limit == "forced_eos" and last:
      log_probs[:] = -np.inf
      log_probs[:, EOS_ID] = 0.0
    candidates = sorted(((score + log_probs[b, v], seq + [v]) for b, (seq, score) in enumerate(running)
                         for v in range(V)), key=lambda c: -c[0])[:2 * K]
    ends = [seq[-1] == EOS_ID or last for _, seq in candidates]
    for rank, ((score, seq), end) in enumerate(zip(candidates, ends)):
      if rank < K and end and score > -np.inf:  # only the top K may finish
        finished = sorted(finished + [(score / penalty(i + 1), seq)], key=lambda c: -c[0])[:K]
    running = sorted(((seq, score - 1e9 * end) for (score, seq), end in zip(candidates, ends)),
                     key=lambda c: -c[1])[:K]
    if len(finished) == K:  # the row ends (the library stops adding to it)
      length = MAX_NEW if rules.stop == "bound" and alpha > 0 else i + 1
      if rules.stop == "first" or finished[-1][0] >= running[0][1] / penalty(length):
        break
  return finished[0]


RULES = [
    (SearchRules(penalty="length", stop="heuristic", at_limit="forced_eos"), 1.0),  # opus-mt's
    (SearchRules(penalty="length", stop="heuristic", at_limit="stop"), 1.0),  # GPT-2's defaults
    (SearchRules(penalty="length", stop="first", at_limit="stop"), 1.0),
    (SearchRules(penalty="length", stop="bound", at_limit="stop", banned=(5,)), 2.0),
    (SearchRules(penalty="length", stop="heuristic", at_limit="forced_eos", first_token=4), 0.5),
]


# the scores: sums of at most MAX_NEW float32 log-probabilities of logits of magnitude ~10, each rounded to a few ulp
# (2^-23 · 10 · 4) in either computation: 1e-4 covers their difference many times, a score off by a token's
# log-probability (a forced token scored by it instead of 0) is far outside
SCORE_TOLERANCE = 1e-4


@pytest.mark.parametrize("rules, alpha", RULES, ids=lambda r: getattr(r, "stop", r))
def test_beam_search_under_the_librarys_rules_is_its_algorithm(random_model, rules, alpha):
  """The best hypothesis of every row, token for token, and its score."""
  model, variables, src = random_model
  out = beam_search(model, variables, src, beam_size=K, alpha=alpha, max_len_a=0.0, max_len_b=MAX_NEW, rules=rules)
  for row in range(src.shape[0]):
    ours = [int(t) for t in np.asarray(out.tokens[row, 0]) if t != PAD_ID]
    score, tokens = _library_beam(model, variables, src[row], rules, alpha)
    assert ours == tokens, row
    assert abs(float(out.scores[row, 0]) - score) <= SCORE_TOLERANCE, row


def test_the_ends_of_a_row_differ_between_the_rules(random_model):
  """The heuristic and K finished give other beams on this model (the bound and the heuristic coincide here, as they
  mostly do): the test above tells the library's default from early_stopping=True."""
  model, variables, src = random_model
  best = {}
  for stop in ("heuristic", "first"):
    rules = SearchRules(penalty="length", stop=stop, at_limit="stop")
    best[stop] = [_library_beam(model, variables, src[row], rules, 1.0)[1] for row in range(src.shape[0])]
  assert best["heuristic"] != best["first"]


def test_greedy_search_under_the_librarys_rules(random_model):
  """Greedy: banned ids never chosen, the first token forced, the row cut at the limit without EOS (``stop``) or
  ended by a forced EOS scored 0; the score is the sum of the chosen tokens' log-probabilities as constrained."""
  model, variables, src = random_model
  for rules in (SearchRules(at_limit="stop", banned=(3,)), SearchRules(at_limit="forced_eos", first_token=6)):
    out = greedy_search(model, variables, src, max_len_a=0.0, max_len_b=4, rules=rules)
    tokens = np.asarray(out.tokens)
    assert not np.isin(tokens, (BOS_ID,) + rules.banned).any()
    if rules.first_token is not None:
      assert (tokens[:, 0] == rules.first_token).all()
      ended = tokens[:, :4]
      assert all(EOS_ID in row for row in ended)
    else:
      assert any(EOS_ID not in row and (row != PAD_ID).sum() == 4 for row in tokens)
    assert np.all(np.asarray(out.scores) > NEG_INF / 2)
