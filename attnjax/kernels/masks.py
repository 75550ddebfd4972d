"""Boolean attention masks, True = attend.

Every mask is broadcastable to the logits layout ``[B, N, T, S]`` (batch, heads, query length, key length), so masks
of different kinds combine with a logical AND and go straight into
:func:`attnjax.kernels.scaled_dot_product_attention`. Keeping the head and query axes at size 1 where a mask does not
depend on them keeps a key-padding mask O(B·S) instead of O(B·T·S), which the blockwise kernel relies on.
"""

from __future__ import annotations

import jax.numpy as jnp

from attnjax.kernels.common import check_rank


def padding_mask(q_valid, kv_valid):
  """Mask from per-token validity: query t may attend key s iff both are real tokens.

  Args:
    q_valid: ``[B, T]`` bool (or 0/1), True for real query tokens; ``None`` = all real.
    kv_valid: ``[B, S]`` bool (or 0/1), True for real key tokens.

  Returns:
    ``[B, 1, T, S]`` bool, or ``[B, 1, 1, S]`` when ``q_valid`` is None (a key-padding mask).
  """
  check_rank("kv_valid", kv_valid, 2)
  kv = jnp.asarray(kv_valid).astype(bool)[:, None, None, :]
  if q_valid is None:
    return kv
  check_rank("q_valid", q_valid, 2)
  if jnp.shape(q_valid)[0] != jnp.shape(kv_valid)[0]:
    raise ValueError(f"q_valid batch {jnp.shape(q_valid)[0]} != kv_valid batch {jnp.shape(kv_valid)[0]}")
  q = jnp.asarray(q_valid).astype(bool)[:, None, :, None]
  return q & kv


def causal_mask(length: int, kv_length: int | None = None, *, offset: int = 0):
  """Lower-triangular mask: query t attends key s iff s <= t + offset.

  Args:
    length: T, the query length.
    kv_length: S, the key length (default T).
    offset: position of the first query among the keys; ``offset = S - T`` aligns the last query with the last key
      (a prefix being extended by a decoder cache). The default 0 is the top-left alignment of
      ``jax.nn.dot_product_attention(is_causal=True)``.

  Returns:
    ``[1, 1, T, S]`` bool.
  """
  kv_length = length if kv_length is None else kv_length
  if length <= 0 or kv_length <= 0:
    raise ValueError(f"causal_mask needs positive lengths, got length={length}, kv_length={kv_length}")
  t = jnp.arange(length)[:, None]
  s = jnp.arange(kv_length)[None, :]
  return (s <= t + offset)[None, None]


def segment_mask(q_segment_ids, kv_segment_ids):
  """Mask for packed sequences: a token attends only to tokens of its own segment.

  Several short examples packed into one row carry segment ids 1, 2, 3, ...; attention must not cross examples.
  Padding (conventionally id 0) attends only to padding; combine with :func:`padding_mask` to drop it entirely.

  Args:
    q_segment_ids: ``[B, T]`` integer segment ids of the queries.
    kv_segment_ids: ``[B, S]`` integer segment ids of the keys.

  Returns:
    ``[B, 1, T, S]`` bool.
  """
  check_rank("q_segment_ids", q_segment_ids, 2)
  check_rank("kv_segment_ids", kv_segment_ids, 2)
  return jnp.equal(jnp.asarray(q_segment_ids)[:, None, :, None], jnp.asarray(kv_segment_ids)[:, None, None, :])


def combine_masks(*masks):
  """Logical AND of the masks that are not None (broadcasting); None if all are None."""
  present = [jnp.asarray(m).astype(bool) for m in masks if m is not None]
  if not present:
    return None
  out = present[0]
  for m in present[1:]:
    out = jnp.logical_and(out, m)
  return out
