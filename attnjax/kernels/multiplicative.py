"""Luong global (multiplicative-family) attention as pure JAX functions.

Reference: Luong, Pham & Manning (2015), "Effective Approaches to
Attention-based Neural Machine Translation", EMNLP 2015 (Sec. 3.1, Eq. 7-8)::

    score(h_t, h̄_s) = h_t^T h̄_s                     "dot"
                    = h_t^T W_a h̄_s                 "general"
                    = v_a^T tanh(W_a [h_t; h̄_s])    "concat"
    a_t(s) = softmax_s(score(h_t, h̄_s))
    c_t    = sum_s a_t(s) h̄_s

Shape letters: B batch, T decoder steps, S encoder steps, Dq/Dk/Dv feature
sizes, A hidden size of the "concat" score. Masks follow the convention in
``additive.py``: boolean, True = attend, ``[B, S]`` key padding (broadcast over
T) or rank 3 broadcastable to ``[B, T, S]``; fully-masked rows give zeros.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from attnjax.kernels.common import check_rank, check_single_head_qkv, weighted_sum
from attnjax.kernels.additive import additive_scores, masked_softmax

__all__ = ["luong_scores", "multiplicative_attention"]

_SCORES = ("dot", "general", "concat")


def _check_score_args(query, keys, score, w, v) -> None:
  if score not in _SCORES:
    raise ValueError(f"score must be one of {_SCORES}, got {score!r}")
  dq, dk = query.shape[-1], keys.shape[-1]
  if score == "dot":
    if w is not None or v is not None:
      # Passing parameters that would be silently ignored is almost
      # always a wrong `score` choice, so surface it.
      raise ValueError("w and v must be None for score='dot'")
    if dq != dk:
      raise ValueError(f"query last dim {dq} != keys last dim {dk} for score='dot'")
  elif score == "general":
    if w is None:
      raise ValueError("w of shape [Dq, Dk] is required for score='general'")
    if v is not None:
      raise ValueError("v must be None for score='general'")
    check_rank("w", w, 2, "[Dq, Dk]")
    if tuple(w.shape) != (dq, dk):
      raise ValueError(f"w shape {tuple(w.shape)} != (Dq, Dk)=({dq}, {dk}) for score='general'")
  else:  # concat
    if w is None:
      raise ValueError("w of shape [Dq + Dk, A] is required for score='concat'")
    if v is None:
      raise ValueError("v of shape [A] is required for score='concat'")
    check_rank("w", w, 2, "[Dq + Dk, A]")
    check_rank("v", v, 1, "[A]")
    if w.shape[0] != dq + dk:
      raise ValueError(f"w first dim {w.shape[0]} != Dq + Dk = {dq} + {dk} for score='concat'")
    if v.shape[0] != w.shape[1]:
      raise ValueError(f"v length {v.shape[0]} != w last dim {w.shape[1]} for score='concat'")


def luong_scores(query, keys, *, score, w=None, v=None) -> jax.Array:
  """Luong et al. (2015) alignment scores, Eq. 8.

    dot:     e_ts = h_t^T h̄_s
    general: e_ts = h_t^T W_a h̄_s
    concat:  e_ts = v_a^T tanh(W_a [h_t; h̄_s])

    Args:
      query: ``[B, T, Dq]`` decoder states h_t.
      keys: ``[B, S, Dk]`` encoder states h̄_s.
      score: ``"dot"`` (needs Dq == Dk), ``"general"`` or ``"concat"``; a
        static Python string.
      w: ``[Dq, Dk]`` for "general"; ``[Dq + Dk, A]`` for "concat" (rows
        ``[:Dq]`` act on h_t, rows ``[Dq:]`` on h̄_s); None for "dot".
      v: ``[A]`` for "concat"; None otherwise.

    Returns:
      scores: ``[B, T, S]``.
    """
  check_rank("query", query, 3, "[B, T, Dq]")
  check_rank("keys", keys, 3, "[B, S, Dk]")
  if keys.shape[0] != query.shape[0]:
    raise ValueError(f"keys batch size {keys.shape[0]} != query batch size {query.shape[0]}")
  _check_score_args(query, keys, score, w, v)
  if score == "dot":
    return jnp.einsum("btd,bsd->bts", query, keys)
  if score == "general":
    # Project the T queries rather than the S keys: same result, and the
    # decoder side is usually the smaller (often T == 1).
    return jnp.einsum("bte,bse->bts", jnp.einsum("btd,de->bte", query, w), keys)
  # W_a [h_t; h̄_s] == h_t W_q + h̄_s W_k: projecting each side separately
  # avoids building the [B, T, S, Dq + Dk] concatenation, and the rest is
  # exactly Bahdanau's additive score.
  dq = query.shape[-1]
  query_proj = jnp.einsum("btd,da->bta", query, w[:dq])
  keys_proj = jnp.einsum("bsd,da->bsa", keys, w[dq:])
  return additive_scores(query_proj, keys_proj, v)


def multiplicative_attention(query, keys, values, *, score="dot", w=None, v=None, mask=None):
  """Luong et al. (2015) global attention.

    e_ts = score(h_t, h̄_s)   (see ``luong_scores``: dot / general / concat)
    a_ts = softmax_s(e_ts)    (over unmasked s, computed in float32)
    c_t  = sum_s a_ts values_s
    (Luong, Pham & Manning 2015, "Effective Approaches to Attention-based
    Neural Machine Translation", Sec. 3.1.)

    Args:
      query: ``[B, T, Dq]`` decoder states h_t.
      keys: ``[B, S, Dk]`` encoder states h̄_s.
      values: ``[B, S, Dv]`` (in the paper, h̄_s again).
      score: ``"dot"``, ``"general"`` or ``"concat"`` (static Python string;
        mark it static when jitting).
      w: ``[Dq, Dk]`` for "general", ``[Dq + Dk, A]`` for "concat".
      v: ``[A]`` for "concat".
      mask: optional boolean, True = attend. ``[B, S]`` is a key-padding mask
        broadcast over T; a rank-3 mask must broadcast to ``[B, T, S]``.

    Returns:
      ``(context [B, T, Dv], weights [B, T, S])``: context in ``values.dtype``,
      weights in float32 (float64 if the scores are float64).
      A query row with every key masked gives zero context and weights.
    """
  check_single_head_qkv(query, keys, values)
  scores = luong_scores(query, keys, score=score, w=w, v=v)
  weights = masked_softmax(scores, mask)
  return weighted_sum(weights, values)
