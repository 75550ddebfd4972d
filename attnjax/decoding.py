"""Greedy search, sampling and beam search for any model of the interface in :mod:`attnjax.models.interface`.

Each is one ``jax.jit``-compiled program of ``lax.while_loop`` s over incremental (cached) decoder steps: one loop
per length of the decoder's cache, which starts short and grows as the outputs do (``cache_start``).

Beam search keeps, per sentence, K alive hypotheses and K finished ones (Wu et al. 2016, GNMT §7; the finalisation
rule of fairseq): each step takes the top 2K continuations of the alive beams; those ending in EOS *and ranked among
the top K* are finished with the length-normalised score::

    s(Y) = log P(Y|X) / lp(Y),    lp(Y) = ((5 + |Y|) / 6)^α      (|Y| counts the generated tokens, EOS included)

and the best K others stay alive. A sentence stops when K hypotheses are finished and no alive one can still beat the
worst of them (its log-probability only falls; for α ≥ 0 its best possible score is logp / lp(max length)). A stopped
sentence is frozen, so its result does not depend on which other sentences share the batch; its length limit is
``max_len_a · (its real source length) + max_len_b``, never a batch-wide value.

Constraints for long outputs (summarization), the same in both searches and applied to the log-probabilities before
the choice, so that a constrained hypothesis keeps the model's own scores:

* ``min_len``: EOS is banned until a hypothesis has ``min_len`` tokens (EOS not counted), as fairseq's
  ``--min-len``; a row's length limit still wins (a limit below ``min_len + 1`` forces EOS there).
* ``no_repeat_ngram_size`` n: a token that would complete an n-gram already in the hypothesis is banned
  (fairseq's and Hugging Face's ``no_repeat_ngram_size``; Paulus et al. 2018 block repeated trigrams), see
  :func:`ngram_bans`. Each hypothesis is checked against its own tokens only, so the output stays batch-invariant.

Sampling (:func:`sample_search`, for back-translation and diverse outputs) is greedy's loop with the argmax replaced by
a draw from the constrained log-probabilities scaled by ``1/temperature`` and cut to top-k and top-p
(:func:`filter_logits`). Each row draws from its own key, so a sentence's sample depends on the
seed and the key the caller gives its row, not on the other sentences of the batch.

No search ever emits PAD, BOS or an id at or past ``vocab_size`` (a model's table padded for sharding): their
log-probabilities are set to -inf-like values after the log-softmax, as fairseq does, so the scores stay the model's
log-probabilities of the tokens chosen.

:class:`SearchRules` switches what differs in ``transformers``' ``generate``, so that a model imported from it
decodes as the library decodes it (:mod:`attnjax.transfer.generation_config` reads them from
``generation_config.json``): more banned ids (``bad_words_ids``, ``suppress_tokens``), the penalty ``|Y|^α``
(``length_penalty``), the row's end by the library's rule (``early_stopping``: False, a heuristic that divides the
best alive log-probability by the current length's penalty; True, as soon as K are finished), the last step at the
length limit (``forced_eos_token_id``: only EOS, scored 0; without it the hypotheses stop there as they are), a
forced first token scored 0 (``forced_bos_token_id``), and log-probabilities normalised again after all that
(``renormalize_logits``).
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from attnjax.models.interface import BOS_ID, EOS_ID, PAD_ID, PER_SOURCE, source_mask
from attnjax.tokens import never_predicted

NEG_INF = -1.0e9  # finite: -inf - (-inf) would give NaN in score differences

FILTERED_OUT = -1.0e30  # a logit sampling never draws


def filter_logits(logits, *, temperature: float = 1.0, top_k: int = 0, top_p: float = 1.0):
  """``logits [..., V]`` float32 scaled by ``1/temperature`` with the tokens outside top-k and top-p set to
  ``FILTERED_OUT`` (-1e30) (``top_k=0``, ``top_p=1``: no restriction). ``temperature`` must be positive here."""
  logits = logits.astype(jnp.float32) / temperature
  vocab = logits.shape[-1]
  if top_k and top_k < vocab:
    kth = jax.lax.top_k(logits, top_k)[0][..., -1:]
    logits = jnp.where(logits < kth, FILTERED_OUT, logits)
  if top_p < 1.0:
    order = jnp.argsort(-logits, axis=-1)
    sorted_logits = jnp.take_along_axis(logits, order, axis=-1)
    probs = jax.nn.softmax(sorted_logits, axis=-1)
    before = jnp.cumsum(probs, axis=-1) - probs  # the mass of the more probable tokens
    keep_sorted = before < top_p  # the smallest prefix whose mass reaches top_p (the first token always)
    keep = jnp.take_along_axis(keep_sorted, jnp.argsort(order, axis=-1), axis=-1)  # back in vocabulary order
    logits = jnp.where(keep, logits, FILTERED_OUT)
  return logits


class DecodeResult(NamedTuple):
  tokens: Any  # greedy [B, L]; beam [B, n_best, L]: generated ids, EOS included, PAD after it
  lengths: Any  # [B] / [B, n_best]: generated tokens, EOS included
  scores: Any  # [B] / [B, n_best]: log-probability (greedy) or length-normalised score (beam)
  attention: Any = None  # [B, L, S] / [B, n_best, L, S] cross-attention of the returned hypotheses, on request


@dataclasses.dataclass(frozen=True)
class SearchRules:
  """What a search does besides choosing by log-probability (see the module docstring); the defaults are attnjax's.

  Attributes:
    banned: ids never emitted, besides PAD, BOS and the ids past ``vocab_size``.
    penalty: ``"gnmt"``, ``((5 + |Y|) / 6)^α``, or ``"length"``, ``|Y|^α`` (``transformers``' ``length_penalty``).
    stop: when beam search ends a row with K finished hypotheses: ``"bound"``, when no alive one can beat the worst
      of them (its log-probability only falls; divided by the penalty at the row's length limit); ``"heuristic"``,
      the same divided by the penalty at the current length (``early_stopping=False``); ``"first"``, at once
      (``early_stopping=True``).
    at_limit: the step at a row's length limit: ``"eos"``, only EOS, with its log-probability; ``"forced_eos"``, only
      EOS, scored 0 (``forced_eos_token_id``); ``"stop"``, any token, and the hypotheses end there as they are.
    first_token: the first generated token, forced and scored 0 (``forced_bos_token_id``); None: free.
    renormalize: log-softmax once more after the constraints (``renormalize_logits``).
  """
  banned: tuple[int, ...] = ()
  penalty: str = "gnmt"
  stop: str = "bound"
  at_limit: str = "eos"
  first_token: int | None = None
  renormalize: bool = False

  def __post_init__(self):
    for name, allowed in (("penalty", ("gnmt", "length")), ("stop", ("bound", "heuristic", "first")),
                          ("at_limit", ("eos", "forced_eos", "stop"))):
      if getattr(self, name) not in allowed:
        raise ValueError(f"SearchRules.{name} must be one of {allowed}, got {getattr(self, name)!r}")
    object.__setattr__(self, "banned", tuple(int(i) for i in self.banned))


ATTNJAX = SearchRules()


def length_penalty(length, alpha: float, form: str = "gnmt"):
  """GNMT length penalty ``((5 + |Y|) / 6)^α`` (Wu et al. 2016, eq. 14), or ``|Y|^α`` for ``form="length"``."""
  length = jnp.asarray(length, jnp.float32)
  return (length if form == "length" else (5.0 + length) / 6.0) ** alpha


def _max_lengths(src_mask, max_len_a: float, max_len_b: int, max_len: int | None):
  """Per-row limit on generated tokens and the static buffer length L."""
  src_lengths = src_mask.sum(axis=1)
  limit = jnp.floor(max_len_a * src_lengths).astype(jnp.int32) + max_len_b
  buffer = int(max_len_a * src_mask.shape[1]) + max_len_b
  if max_len is not None:
    buffer = min(buffer, max_len)
  return jnp.clip(limit, 1, buffer), max(buffer, 1)


CACHE_START = 16  # the positions a search's cache holds at first (see greedy_search's cache_start)


def _cache_lengths(length: int, start: int | None) -> tuple[int, ...]:
  """The cache's lengths, stage by stage (static): ``start``, twice that, ... while at most half the buffer length L,
  and last L (a stage that would save less than half of L is not worth its compiled loop)."""
  stages = []
  while start is not None and start * 2 <= length:
    stages.append(start)
    start *= 2
  return tuple(stages) + (length,)


def grow_cache(cache, shapes, owner: str = "init_cache"):
  """``cache`` in the larger buffers ``shapes`` (``jax.eval_shape`` of ``owner`` for more positions): each leaf whose
  shape grows is copied to the start of zeros of the new shape (the positions past the old length are not read until
  written: the attention masks them by the cache index). ``PER_SOURCE`` leaves and leaves of unchanged shape stay."""
  def grow(path, old, new):
    if any(getattr(key, "key", None) == PER_SOURCE for key in path) or old.shape == new.shape:
      return old
    if old.ndim != len(new.shape) or any(o > n for o, n in zip(old.shape, new.shape)):
      raise ValueError(f"{owner} leaf {jax.tree_util.keystr(path)} is {old.shape} for fewer positions and "
                       f"{new.shape} for more: a cache must only grow to hold more positions")
    return jax.lax.dynamic_update_slice(jnp.zeros(new.shape, new.dtype), old.astype(new.dtype), (0,) * old.ndim)

  return jax.tree_util.tree_map_with_path(grow, cache, shapes)


def _grow_cache(model, variables, memory, cache, max_length: int):
  """``cache`` (of an interface model) in a buffer of ``max_length`` positions (:func:`grow_cache`)."""
  shapes = jax.eval_shape(lambda m: model.apply(variables, m, max_length, method=model.init_cache), memory)
  return grow_cache(cache, shapes, f"{type(model).__name__}.init_cache")


def staged_loop(cond, body, state, stages, index, grow):
  """``lax.while_loop(cond, body, state)`` run in stages: stage j also stops at step ``stages[j]``, and between stages
  ``grow(state, length)`` enlarges the cache in ``state``. ``index(state)`` is the step counter."""
  for j, length in enumerate(stages):
    if j:
      state = grow(state, length)
    state = jax.lax.while_loop(lambda s, n=length: cond(s) & (index(s) < n), body, state)
  return state


def _step(model, variables, tokens, memory, cache, return_attention, vocab_size, rules: SearchRules):
  """One cached decoder step: tokens ``[N]`` → (log-probs ``[N, V]``, cache, attention ``[N, S]`` or None); ids that
  are never predicted (see the module docstring) get ``NEG_INF``."""
  out = model.apply(variables, tokens[:, None], memory, cache, return_attention=return_attention,
                    method=model.decode)
  attention = None if out.attention is None else out.attention[:, 0]
  logprobs = jax.nn.log_softmax(out.logits[:, 0].astype(jnp.float32))
  ids = jnp.arange(logprobs.shape[-1])
  banned = never_predicted(ids, vocab_size or logprobs.shape[-1])
  if rules.banned:
    banned = banned | jnp.isin(ids, jnp.asarray(rules.banned))
  return jnp.where(banned[None], NEG_INF, logprobs), out.cache, attention


def ngram_bans(generated, count, n: int, vocab: int):
  """The tokens that would repeat an n-gram: ``[N, V]`` bool, True where appending the token to the first ``count``
  tokens of ``generated`` gives an n-gram that already occurs among them.

  Args:
    generated: ``[N, L]`` generated ids (positions at and past ``count`` are ignored).
    count: scalar int, the tokens generated so far.
    n: the n-gram size (>= 1).
    vocab: V.
  """
  rows, length = generated.shape
  if length < n:
    return jnp.zeros((rows, vocab), bool)
  starts = jnp.arange(length - n + 1)  # n-gram j covers positions j .. j + n - 1
  complete = (starts + n - 1 < count)[None]  # [1, J]: all of it generated already
  if n == 1:
    match = jnp.broadcast_to(complete, (rows, starts.size))
  else:
    # the last n - 1 tokens, the prefix the next token would complete (count < n - 1 leaves no complete n-gram)
    last = jax.lax.dynamic_slice_in_dim(generated, jnp.maximum(count - (n - 1), 0), n - 1, axis=1)  # [N, n-1]
    windows = jnp.stack([generated[:, k:k + starts.size] for k in range(n - 1)], axis=-1)  # [N, J, n-1]
    match = jnp.all(windows == last[:, None, :], axis=-1) & complete
  following = generated[:, n - 1:]  # [N, J]: the token that completed n-gram j
  banned = jnp.zeros((rows, vocab), jnp.int32).at[jnp.arange(rows)[:, None], following].max(match.astype(jnp.int32))
  return banned > 0


def _constrain(logprobs, generated, count, limit_reached, *, min_len, no_repeat_ngram_size, eos_id,
               rules: SearchRules = ATTNJAX):
  """Applies the row's length limit (by ``rules.at_limit``), ``min_len``, n-gram blocking and a forced first token
  (see the module docstring) to ``logprobs [N, V]``; ``generated [N, L]`` holds each hypothesis's first ``count``
  tokens."""
  vocab = logprobs.shape[-1]
  ids = jnp.arange(vocab)[None]
  is_eos = ids == eos_id
  if no_repeat_ngram_size:
    logprobs = jnp.where(ngram_bans(generated, count, no_repeat_ngram_size, vocab) & ~is_eos, NEG_INF, logprobs)
  if min_len:
    ending = limit_reached if rules.at_limit != "stop" else jnp.zeros_like(limit_reached)
    logprobs = jnp.where(is_eos & (count < min_len) & ~ending[:, None], NEG_INF, logprobs)
  if rules.first_token is not None:
    forced = jnp.where(ids == rules.first_token, 0.0, NEG_INF)
    logprobs = jnp.where(count == 0, forced, logprobs)
  if rules.at_limit == "eos":
    logprobs = jnp.where(limit_reached[:, None] & ~is_eos, NEG_INF, logprobs)
  elif rules.at_limit == "forced_eos":
    logprobs = jnp.where(limit_reached[:, None], jnp.where(is_eos, 0.0, NEG_INF), logprobs)
  return jax.nn.log_softmax(logprobs) if rules.renormalize else logprobs


_CONSTRAINTS = ("min_len", "no_repeat_ngram_size", "rules", "cache_start")


@functools.partial(jax.jit, static_argnames=("model", "max_len_a", "max_len_b", "max_len", "bos_id", "eos_id",
                                             "return_attention", "vocab_size", "temperature", "top_k", "top_p")
                   + _CONSTRAINTS)
def _greedy(model, variables, src, src_mask, row_keys=None, *, max_len_a, max_len_b, max_len, bos_id, eos_id,
            return_attention, vocab_size, min_len, no_repeat_ngram_size, rules, cache_start, temperature=0.0, top_k=0,
            top_p=1.0):
  """Greedy search, or with ``row_keys [B, 2]`` and ``temperature > 0`` sampling: row b's token at step i is drawn
  with ``fold_in(row_keys[b], i)``."""
  src_mask = source_mask(src, src_mask)
  limit, length = _max_lengths(src_mask, max_len_a, max_len_b, max_len)
  batch = src.shape[0]
  memory = model.apply(variables, src, src_mask, method=model.encode)
  stages = _cache_lengths(length, cache_start)
  cache = model.apply(variables, memory, stages[0], method=model.init_cache)
  attn0 = jnp.zeros((batch, length, src.shape[1]), jnp.float32) if return_attention else None
  init = (jnp.int32(0), jnp.full((batch, length), PAD_ID, jnp.int32), jnp.full((batch,), bos_id, jnp.int32),
          jnp.zeros((batch,), bool), jnp.zeros((batch,), jnp.float32), cache, attn0)

  def cond(state):
    i, _, _, done, *_ = state
    return (i < length) & ~jnp.all(done)

  def body(state):
    i, tokens, last, done, logp, cache, attn = state
    logprobs, cache, a = _step(model, variables, last, memory, cache, return_attention, vocab_size, rules)
    logprobs = _constrain(logprobs, tokens, i, i + 1 >= limit, min_len=min_len,
                          no_repeat_ngram_size=no_repeat_ngram_size, eos_id=eos_id, rules=rules)
    if row_keys is None:
      nxt = jnp.argmax(logprobs, axis=-1).astype(jnp.int32)
    else:
      filtered = filter_logits(logprobs, temperature=temperature, top_k=top_k, top_p=top_p)
      keys = jax.vmap(jax.random.fold_in, in_axes=(0, None))(row_keys, i)
      nxt = jax.vmap(jax.random.categorical)(keys, filtered).astype(jnp.int32)
    nxt = jnp.where(done, PAD_ID, nxt)
    logp = logp + jnp.where(done, 0.0, jnp.take_along_axis(logprobs, nxt[:, None], axis=1)[:, 0])
    tokens = tokens.at[:, i].set(nxt)
    if attn is not None:
      attn = attn.at[:, i].set(jnp.where(done[:, None], 0.0, a))
    return i + 1, tokens, nxt, done | (nxt == eos_id) | (i + 1 >= limit), logp, cache, attn

  grow = lambda state, n: state[:5] + (_grow_cache(model, variables, memory, state[5], n),) + state[6:]
  _, tokens, _, _, logp, _, attn = staged_loop(cond, body, init, stages, lambda state: state[0], grow)
  lengths = jnp.sum(tokens != PAD_ID, axis=1)
  return DecodeResult(tokens, lengths, logp, attn)


def greedy_search(model, variables, src, *, src_mask=None, max_len_a: float = 1.5, max_len_b: int = 10,
                  max_len: int | None = None, bos_id: int = BOS_ID, eos_id: int = EOS_ID,
                  return_attention: bool = False, vocab_size: int | None = None, min_len: int = 0,
                  no_repeat_ngram_size: int = 0, rules: SearchRules = ATTNJAX,
                  cache_start: int | None = CACHE_START) -> DecodeResult:
  """Greedy decoding: the argmax token at every step until EOS or the row's length limit.

  Args:
    model, variables: a model of the interface and its variables (``{"params": ...}``).
    src: ``[B, S]`` source ids; ``src_mask``: ``[B, S]`` bool (default ``src != PAD_ID``).
    max_len_a, max_len_b: a row generates at most ``max_len_a · source_length + max_len_b`` tokens (EOS included).
    max_len: optional cap on that for every row (also the buffer size).
    return_attention: also return the cross-attention weights of each step.
    vocab_size: the real target vocabulary's size when the model's logits are padded past it (ids >= it, PAD and
      BOS are never emitted).
    min_len: EOS is banned before this many tokens (EOS not counted); 0 = no minimum.
    no_repeat_ngram_size: no n-gram of this size occurs twice in a hypothesis; 0 = no blocking.
    rules: :class:`SearchRules` (attnjax's by default; greedy reads ``banned``, ``at_limit``, ``first_token`` and
      ``renormalize``).
    cache_start: the positions the decoder's cache holds at first; the search runs until it is full and then
      continues in one twice as long, or in the whole buffer once that is less than twice as long, so that short
      outputs do not pay for the longest one's cache at every step (self-attention over it, the beams' reordering
      of it). None: the whole buffer from the start. The outputs do not depend on it (the scores, up to the rounding of the attention's sums).

  Returns:
    :class:`DecodeResult` with ``tokens [B, L]``.
  """
  return _greedy(model, variables, src, src_mask, max_len_a=max_len_a, max_len_b=max_len_b, max_len=max_len,
                 bos_id=bos_id, eos_id=eos_id, return_attention=return_attention, vocab_size=vocab_size,
                 **_check_constraints(min_len, no_repeat_ngram_size, rules, cache_start))


def sample_search(model, variables, src, row_keys, *, temperature: float = 1.0, top_k: int = 0, top_p: float = 1.0,
                  src_mask=None, max_len_a: float = 1.5, max_len_b: int = 10, max_len: int | None = None,
                  bos_id: int = BOS_ID, eos_id: int = EOS_ID, return_attention: bool = False,
                  vocab_size: int | None = None, min_len: int = 0, no_repeat_ngram_size: int = 0,
                  rules: SearchRules = ATTNJAX,
                  cache_start: int | None = CACHE_START) -> DecodeResult:
  """Ancestral sampling: at every step a token drawn from the constrained log-probabilities scaled by
  ``1/temperature``, cut to the ``top_k`` most probable and to the smallest set of probability ``top_p``, until EOS
  or the row's length limit (see the module docstring).

  Args:
    row_keys: ``[B, 2]`` uint32 PRNG keys, one a row (``jax.random.split(key, B)``, or one per sample number so that
      a sentence's k-th sample does not depend on its batch).
    temperature: > 0 (greedy is :func:`greedy_search`).
    top_k: sample among the k most probable tokens (0: all); top_p: among the most probable tokens of total
      probability p (1: all).
    the rest: as :func:`greedy_search`.

  Returns:
    :class:`DecodeResult` with ``tokens [B, L]`` and ``scores`` the model's log-probability of each sample (after
    the constraints, before temperature and the cuts).
  """
  if not temperature > 0 or not 0 < top_p <= 1 or top_k < 0:
    raise ValueError(f"sampling needs temperature > 0, top_p in (0, 1] and top_k >= 0, got temperature={temperature}, "
                     f"top_p={top_p}, top_k={top_k}")
  if row_keys.shape != (src.shape[0], 2):
    raise ValueError(f"row_keys must be [B, 2] = [{src.shape[0]}, 2] (one PRNG key a row), got {row_keys.shape}")
  return _greedy(model, variables, src, src_mask, row_keys, max_len_a=max_len_a, max_len_b=max_len_b,
                 max_len=max_len, bos_id=bos_id, eos_id=eos_id, return_attention=return_attention,
                 vocab_size=vocab_size, temperature=float(temperature), top_k=int(top_k), top_p=float(top_p),
                 **_check_constraints(min_len, no_repeat_ngram_size, rules, cache_start))


def _check_constraints(min_len, no_repeat_ngram_size, rules, cache_start=CACHE_START) -> dict:
  for name, value in (("min_len", min_len), ("no_repeat_ngram_size", no_repeat_ngram_size)):
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
      raise ValueError(f"{name} must be a non-negative int (0 = off), got {value!r}")
  if not isinstance(rules, SearchRules):
    raise TypeError(f"rules must be a SearchRules, got {type(rules).__name__}")
  if cache_start is not None and (not isinstance(cache_start, int) or isinstance(cache_start, bool)
                                  or cache_start < 1):
    raise ValueError(f"cache_start must be a positive int (None: the whole length from the start), got "
                     f"{cache_start!r}")
  return dict(min_len=min_len, no_repeat_ngram_size=no_repeat_ngram_size, rules=rules, cache_start=cache_start)


def _per_beam(cache, k: int):
  """Each cache row repeated for its K beams (``[B·K, ...]``), except the ``PER_SOURCE`` entries."""
  def repeat(path, x):
    if any(getattr(key, "key", None) == PER_SOURCE for key in path):
      return x
    return jnp.repeat(x, k, axis=0)
  return jax.tree_util.tree_map_with_path(repeat, cache)


def _gather_beams(tree, flat_index):
  """Reorders every leaf (batch-first, B·K rows) by ``flat_index [B·K']``, except a cache's ``PER_SOURCE`` entries:
  kept once per source (B rows, see :func:`_per_beam`), they are shared by the beams of their row whatever their
  order."""
  def take(path, x):
    if any(getattr(key, "key", None) == PER_SOURCE for key in path):
      return x
    return jnp.take(x, flat_index, axis=0, mode="clip")  # in bounds: no fill select over the whole cache
  return jax.tree_util.tree_map_with_path(take, tree)


@functools.partial(jax.jit, static_argnames=("model", "beam_size", "alpha", "max_len_a", "max_len_b", "max_len",
                                             "n_best", "bos_id", "eos_id", "return_attention", "vocab_size")
                   + _CONSTRAINTS)
def _beam(model, variables, src, src_mask, *, beam_size, alpha, max_len_a, max_len_b, max_len, n_best, bos_id,
          eos_id, return_attention, vocab_size, min_len, no_repeat_ngram_size, rules, cache_start):
  k = beam_size
  src_mask = source_mask(src, src_mask)
  limit, length = _max_lengths(src_mask, max_len_a, max_len_b, max_len)
  batch, src_len = src.shape
  memory = model.apply(variables, src, src_mask, method=model.encode)
  # the cache is built from each source once (the Transformer projects its memory for every layer)
  stages = _cache_lengths(length, cache_start)
  cache = model.apply(variables, memory, stages[0], method=model.init_cache)
  # [B·K, ...], but for a cache's PER_SOURCE entries, read by all the beams of their row (see the interface)
  memory = jax.tree_util.tree_map(lambda x: jnp.repeat(x, k, axis=0), memory)
  cache = _per_beam(cache, k)
  penalty = functools.partial(length_penalty, alpha=alpha, form=rules.penalty)
  best_possible_lp = penalty(limit)  # [B]
  offsets = (jnp.arange(batch) * k)[:, None]

  seqs0 = jnp.full((batch, k, length + 1), PAD_ID, jnp.int32).at[:, :, 0].set(bos_id)
  attn0 = jnp.zeros((batch, k, length, src_len), jnp.float32) if return_attention else None
  state = dict(
      i=jnp.int32(0),
      alive_seqs=seqs0,
      alive_logp=jnp.tile(jnp.array([0.0] + [NEG_INF] * (k - 1), jnp.float32), (batch, 1)),  # K copies of BOS: keep one
      alive_attn=attn0,
      cache=cache,
      reorder=jnp.arange(batch * k, dtype=jnp.int32),
      fin_seqs=seqs0,
      fin_scores=jnp.full((batch, k), NEG_INF, jnp.float32),
      fin_logp=jnp.full((batch, k), NEG_INF, jnp.float32),
      fin_attn=attn0,
      done=jnp.zeros((batch,), bool),
  )

  def cond(s):
    return (s["i"] < length) & ~jnp.all(s["done"])

  def body(s):
    i = s["i"]
    tokens = s["alive_seqs"][:, :, i].reshape(batch * k)
    # The caches follow their beams one step late, by the order the previous step chose and carried in the state:
    # a gather whose index is a loop input. Reordered at the end of the step, XLA's CPU loop fused the index's
    # computation into each gather and repeated it for every element copied (a quarter of a search's time).
    cache = _gather_beams(s["cache"], s["reorder"])
    logprobs, cache, a = _step(model, variables, tokens, memory, cache, return_attention, vocab_size, rules)
    vocab = logprobs.shape[-1]
    logprobs = _constrain(logprobs, s["alive_seqs"][:, :, 1:].reshape(batch * k, -1), i,
                          jnp.repeat(i + 1 >= limit, k), min_len=min_len, no_repeat_ngram_size=no_repeat_ngram_size,
                          eos_id=eos_id, rules=rules)
    logprobs = logprobs.reshape(batch, k, vocab)
    cand = (s["alive_logp"][:, :, None] + logprobs).reshape(batch, k * vocab)
    cand_logp, cand_index = jax.lax.top_k(cand, 2 * k)  # [B, 2K]
    cand_beam, cand_token = cand_index // vocab, (cand_index % vocab).astype(jnp.int32)
    flat = (offsets + cand_beam).reshape(-1)
    cand_seqs = jnp.take(s["alive_seqs"].reshape(batch * k, -1), flat, axis=0,
                         mode="clip").reshape(batch, 2 * k, -1)
    cand_seqs = cand_seqs.at[:, :, i + 1].set(cand_token)
    cand_attn = None
    if return_attention:
      step_attn = jnp.take(a, flat, axis=0).reshape(batch, 2 * k, src_len)
      cand_attn = jnp.take(s["alive_attn"].reshape(batch * k, length, src_len), flat, axis=0)
      cand_attn = cand_attn.reshape(batch, 2 * k, length, src_len).at[:, :, i].set(step_attn)
    is_eos = cand_token == eos_id
    if rules.at_limit == "stop":  # a row at its limit ends every hypothesis there, EOS or not
      is_eos = is_eos | (i + 1 >= limit)[:, None]
    # fairseq's rule: an EOS continuation is finished only if it ranks among the top K (so K=1 is greedy)
    finishing = is_eos & (jnp.arange(2 * k) < k)[None] & (cand_logp > NEG_INF / 2)
    cand_scores = jnp.where(finishing, cand_logp / penalty(i + 1), NEG_INF)

    # finished: best K of (old finished ∪ newly finished); rows already done stay frozen
    all_scores = jnp.concatenate([s["fin_scores"], cand_scores], axis=1)
    top_scores, top = jax.lax.top_k(all_scores, k)
    pick = lambda old, new: jnp.take_along_axis(jnp.concatenate([old, new], axis=1),
                                                top.reshape(top.shape + (1,) * (old.ndim - 2)), axis=1)
    keep = lambda old, new: jnp.where(s["done"].reshape((-1,) + (1,) * (old.ndim - 1)), old, new)
    fin_seqs = keep(s["fin_seqs"], pick(s["fin_seqs"], cand_seqs))
    fin_scores = keep(s["fin_scores"], top_scores)
    fin_logp = keep(s["fin_logp"], pick(s["fin_logp"], jnp.where(finishing, cand_logp, NEG_INF)))
    fin_attn = None if not return_attention else keep(s["fin_attn"], pick(s["fin_attn"], cand_attn))

    # alive: best K non-EOS continuations
    alive_cand = jnp.where(is_eos, NEG_INF, cand_logp)
    alive_logp, alive_top = jax.lax.top_k(alive_cand, k)
    alive_seqs = jnp.take_along_axis(cand_seqs, alive_top[:, :, None], axis=1)
    beams_flat = (offsets + jnp.take_along_axis(cand_beam, alive_top, axis=1)).reshape(-1)
    alive_attn = None
    if return_attention:
      alive_attn = jnp.take_along_axis(cand_attn, alive_top[:, :, None, None], axis=1)

    # a row is done when K are finished and no alive hypothesis can beat the worst finished one (by rules.stop)
    best_alive = alive_logp[:, 0] / (best_possible_lp if rules.stop == "bound" else penalty(i + 1))
    full = fin_scores[:, -1] > NEG_INF / 2
    done = s["done"] | (full & ((fin_scores[:, -1] >= best_alive) | (rules.stop == "first")))
    done = done | (i + 1 >= limit)
    return dict(i=i + 1, alive_seqs=alive_seqs, alive_logp=alive_logp, alive_attn=alive_attn, cache=cache,
                reorder=beams_flat, fin_seqs=fin_seqs, fin_scores=fin_scores, fin_logp=fin_logp, fin_attn=fin_attn,
                done=done)

  grow = lambda s, n: {**s, "cache": _grow_cache(model, variables, memory, s["cache"], n)}
  s = staged_loop(cond, body, state, stages, lambda s: s["i"], grow)
  # A row with fewer than n_best finished hypotheses (cut by the buffer) is completed from its alive ones.
  has_fin = s["fin_scores"] > NEG_INF / 2
  alive_len = jnp.sum(s["alive_seqs"][:, :, 1:] != PAD_ID, axis=-1)
  alive_scores = s["alive_logp"] / penalty(alive_len)
  scores = jnp.concatenate([jnp.where(has_fin, s["fin_scores"], NEG_INF), alive_scores - 1e6], axis=1)
  best, order = jax.lax.top_k(scores, n_best)
  seqs = jnp.take_along_axis(jnp.concatenate([s["fin_seqs"], s["alive_seqs"]], axis=1), order[:, :, None], axis=1)
  tokens = seqs[:, :, 1:]
  from_alive = order >= k
  best = jnp.where(from_alive, best + 1e6, best)
  attn = None
  if return_attention:
    attn = jnp.take_along_axis(jnp.concatenate([s["fin_attn"], s["alive_attn"]], axis=1),
                               order[:, :, None, None], axis=1)
  return DecodeResult(tokens, jnp.sum(tokens != PAD_ID, axis=-1), best, attn)


def beam_search(model, variables, src, *, src_mask=None, beam_size: int = 4, alpha: float = 0.6,
                max_len_a: float = 1.5, max_len_b: int = 10, max_len: int | None = None, n_best: int = 1,
                bos_id: int = BOS_ID, eos_id: int = EOS_ID, return_attention: bool = False,
                vocab_size: int | None = None, min_len: int = 0, no_repeat_ngram_size: int = 0,
                rules: SearchRules = ATTNJAX,
                cache_start: int | None = CACHE_START) -> DecodeResult:
  """Beam search with the GNMT length penalty (see the module docstring).

  Args:
    model, variables, src, src_mask, max_len_a, max_len_b, max_len, return_attention: as :func:`greedy_search`.
    beam_size: K.
    alpha: length-penalty exponent α (0 = raw log-probability; the paper's Transformer used 0.6).
    n_best: hypotheses returned per sentence, best first (≤ K).
    vocab_size, min_len, no_repeat_ngram_size, cache_start: as :func:`greedy_search`.
    rules: :class:`SearchRules` (attnjax's by default).

  Returns:
    :class:`DecodeResult` with ``tokens [B, n_best, L]``, ``scores`` the length-normalised scores.
  """
  if not 1 <= n_best <= beam_size:
    raise ValueError(f"n_best must be in [1, beam_size={beam_size}], got {n_best}")
  if alpha < 0 and rules.stop == "bound":
    raise ValueError(f"alpha must be >= 0 (the early-stopping bound assumes it), got {alpha}")
  return _beam(model, variables, src, src_mask, beam_size=beam_size, alpha=float(alpha), max_len_a=max_len_a,
               max_len_b=max_len_b, max_len=max_len, n_best=n_best, bos_id=bos_id, eos_id=eos_id,
               return_attention=return_attention, vocab_size=vocab_size,
               **_check_constraints(min_len, no_repeat_ngram_size, rules, cache_start))
