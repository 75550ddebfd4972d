"""Additive (Bahdanau) attention as pure JAX functions.

Reference: Bahdanau, Cho & Bengio (2015), "Neural Machine Translation by
Jointly Learning to Align and Translate", ICLR 2015 (Sec. 3.1 and App. A.1.2):

    e_ts  = v^T tanh(W_q q_t + W_k k_s)
    a_ts  = exp(e_ts) / sum_s' exp(e_ts')
    c_t   = sum_s a_ts h_s

Shape letters used throughout: B batch, T query (decoder) steps, S key
(encoder) steps, Dq/Dk/Dv feature sizes, A attention hidden size.

Mask convention (shared with ``multiplicative.py`` through
``masked_softmax``): a boolean array where True means "may attend".

* rank 2, ``[B, S]``: key-padding mask, broadcast over every query step T.
* rank 3, broadcastable to ``[B, T, S]`` (e.g. ``[B, 1, S]``, ``[1, T, S]``).

A query row whose keys are all masked yields all-zero weights and context
(never NaN), and zero gradients.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from attnjax.kernels import common
from attnjax.kernels.common import check_rank, check_single_head_qkv, weighted_sum

__all__ = ["additive_scores", "additive_attention", "masked_softmax"]


def _broadcast_mask(mask, scores_shape) -> jax.Array:
  """Bring ``mask`` to ``scores_shape`` ([B, T, S]); the one place masks are shaped."""
  mask = jnp.asarray(mask)
  if mask.dtype != jnp.bool_:
    # Refuse 0/1 ints and float "additive" masks: their meaning is ambiguous
    # (1 = keep or 1 = drop?) and silently guessing hides bugs.
    raise ValueError(f"mask must be boolean (True = attend), got dtype {mask.dtype}")
  if mask.ndim == 2:
    # [B, S] key padding: the same keys are invalid for every query step.
    mask = mask[:, None, :]
  elif mask.ndim != 3:
    raise ValueError("mask must be [B, S] (key padding) or rank 3 broadcastable to "
                     f"[B, T, S]={tuple(scores_shape)}, got shape {tuple(mask.shape)}")
  if any(m not in (1, n) for m, n in zip(mask.shape, scores_shape)):
    raise ValueError(f"mask shape {tuple(mask.shape)} is not broadcastable to scores "
                     f"shape [B, T, S]={tuple(scores_shape)}")
  return jnp.broadcast_to(mask, scores_shape)


def masked_softmax(scores, mask=None) -> jax.Array:
  """Softmax over the key axis with an optional boolean mask.

    weights[b, t, s] = mask_bts * exp(e_bts) / sum_{s': mask_bts'} exp(e_bts')

    Args:
      scores: ``[B, T, S]`` unnormalised scores e_ts.
      mask: optional boolean, True = attend; ``[B, S]`` (key padding, broadcast
        over T) or rank 3 broadcastable to ``[B, T, S]``.

    Returns:
      ``[B, T, S]`` weights in at least float32 (float64 stays float64).
      Rows with every key masked are exactly zero.
    """
  if mask is None:
    return common.masked_softmax(scores)
  # Normalised in float32 at least (never downcast: float64 callers, e.g. grad checks), with the kernels' one mask
  # convention: see attnjax.kernels.common.masked_softmax.
  return common.masked_softmax(scores, _broadcast_mask(mask, scores.shape))


def additive_scores(query_proj, keys_proj, v) -> jax.Array:
  """Bahdanau alignment scores from already-projected queries and keys.

    e_ts = v^T tanh(query_proj_t + keys_proj_s)
    (Bahdanau et al. 2015, Sec. 3.1 / App. A.1.2, with query_proj = W_a s_{t-1}
    and keys_proj = U_a h_s.) Taking projections lets a decoder project the
    encoder states once and reuse them at every step.

    Args:
      query_proj: ``[B, T, A]``.
      keys_proj: ``[B, S, A]``.
      v: ``[A]``.

    Returns:
      scores: ``[B, T, S]``.
    """
  check_rank("query_proj", query_proj, 3, "[B, T, A]")
  check_rank("keys_proj", keys_proj, 3, "[B, S, A]")
  check_rank("v", v, 1, "[A]")
  if keys_proj.shape[0] != query_proj.shape[0]:
    raise ValueError(f"keys_proj batch size {keys_proj.shape[0]} != query_proj batch size "
                     f"{query_proj.shape[0]}")
  if keys_proj.shape[-1] != query_proj.shape[-1]:
    raise ValueError(f"keys_proj last dim {keys_proj.shape[-1]} != query_proj last dim "
                     f"{query_proj.shape[-1]}")
  if v.shape[0] != query_proj.shape[-1]:
    raise ValueError(f"v length {v.shape[0]} != attention size A={query_proj.shape[-1]}")
  # tanh is not bilinear, so the [B, T, S, A] sum must exist before reducing
  # over A; that intermediate is the irreducible cost of additive attention.
  hidden = jnp.tanh(query_proj[:, :, None, :] + keys_proj[:, None, :, :])
  return jnp.einsum("btsa,a->bts", hidden, v)


def additive_attention(query, keys, values, *, w_query, w_keys, v, mask=None):
  """Bahdanau additive attention.

    e_ts = v^T tanh(q_t W_q + k_s W_k)
    a_ts = softmax_s(e_ts)           (over unmasked s, computed in float32)
    c_t  = sum_s a_ts values_s
    (Bahdanau et al. 2015, "Neural Machine Translation by Jointly Learning to
    Align and Translate", Sec. 3.1 / App. A.1.2.)

    Args:
      query: ``[B, T, Dq]`` (decoder states s_{t-1}).
      keys: ``[B, S, Dk]`` (encoder annotations h_s).
      values: ``[B, S, Dv]`` (usually the same annotations h_s).
      w_query: ``[Dq, A]``.
      w_keys: ``[Dk, A]``.
      v: ``[A]``.
      mask: optional boolean, True = attend. ``[B, S]`` is a key-padding mask
        broadcast over T; a rank-3 mask must broadcast to ``[B, T, S]``.

    Returns:
      ``(context [B, T, Dv], weights [B, T, S])``: context in ``values.dtype``,
      weights in float32 (float64 if the scores are float64).
      A query row with every key masked gives zero context and weights.
    """
  check_single_head_qkv(query, keys, values)
  check_rank("w_query", w_query, 2, "[Dq, A]")
  check_rank("w_keys", w_keys, 2, "[Dk, A]")
  if w_query.shape[0] != query.shape[-1]:
    raise ValueError(f"w_query first dim {w_query.shape[0]} != query last dim {query.shape[-1]}")
  if w_keys.shape[0] != keys.shape[-1]:
    raise ValueError(f"w_keys first dim {w_keys.shape[0]} != keys last dim {keys.shape[-1]}")
  if w_keys.shape[1] != w_query.shape[1]:
    raise ValueError(f"w_keys attention size {w_keys.shape[1]} != w_query attention size "
                     f"{w_query.shape[1]}")
  query_proj = jnp.einsum("btd,da->bta", query, w_query)
  keys_proj = jnp.einsum("bsd,da->bsa", keys, w_keys)
  scores = additive_scores(query_proj, keys_proj, v)
  weights = masked_softmax(scores, mask)
  return weighted_sum(weights, values)
