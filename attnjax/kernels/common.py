"""Conventions shared by the attention kernels: the mask value and the masked softmax, the layout checks, the
accumulation dtype and the attention-dropout hash."""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

# Masked logits are set to this finite value rather than -inf: -inf - (-inf) = NaN in a row with no valid key, and
# 0 * inf = NaN in the backward pass of the select. 0.7 * max (not max) leaves headroom, so that adding a bias or
# subtracting a running maximum (blockwise.py) cannot overflow it to -inf.
MASK_VALUE = -0.7 * float(jnp.finfo(jnp.float32).max)


# --------------------------------------------------------------------------------------------------- masked softmax


class RelativeTable(NamedTuple):
  """Shaw et al.'s relative-position vectors kept factored: ``a_ts = table[ids[t, s]]`` without materialising it.

  ``table``: ``[R, H]`` (R = 2K + 1 clipped distances); ``ids``: int ``[T, S]`` or ``[B, T, S]`` in ``[0, R)``, from
  :func:`attnjax.kernels.relative_position_ids`. Attention then costs O(T·R·H) for the relative terms where the
  gathered ``[B, T, S, H]`` tensors cost O(T·S·H) in memory and time (the gather's gradient most of all).
  """
  table: Any
  ids: Any


def accumulation_dtype(*dtypes_or_arrays):
  """float32 for half-precision inputs (bf16 logits lose the softmax's small weights, and bf16 sums over a sequence
  lose its small terms), float64 for float64: the dtype in which the kernels normalise and accumulate."""
  return jnp.promote_types(jnp.result_type(*dtypes_or_arrays), jnp.float32)


def masked_softmax(logits, mask=None):
  """Softmax over the last axis of ``logits``, over the entries where ``mask`` is True.

    weights[..., s] = mask_s * exp(logits_s) / sum_{s': mask_s'} exp(logits_s')

  Args:
    logits: ``[..., S]``.
    mask: optional bool broadcastable to ``logits`` (True = attend); None attends everywhere.

  Returns:
    weights of ``logits``' shape in :func:`accumulation_dtype` (float32 at least, float64 stays float64). A row with no
    valid entry is exactly zero, never NaN, and masked entries pass no gradient back.
  """
  logits = logits.astype(accumulation_dtype(logits.dtype))
  if mask is None:
    return jax.nn.softmax(logits, axis=-1)
  weights = jax.nn.softmax(jnp.where(mask, logits, MASK_VALUE), axis=-1)
  # A fully masked row softmaxes to uniform over MASK_VALUE; selecting by the mask makes it exact zeros and stops the
  # gradient there too.
  return jnp.where(mask, weights, 0.0)


def weighted_sum(weights, values):
  """(context ``[B, T, Dv]``, weights ``[B, T, S]``) of the single-head kernels: the matmul runs in the values dtype,
  the weights stay float32+."""
  # Returning the float32 weights (not the cast copy) matches scaled_dot_product_attention and keeps
  # inspected/regularised weights exact.
  context = jnp.einsum("bts,bsd->btd", weights.astype(values.dtype), values)
  return context, weights


# ------------------------------------------------------------------------------------------------ input checking


def check_rank(name: str, x, rank: int, layout: str = "") -> None:
  """Raises a ValueError naming ``name`` unless ``x`` has rank ``rank`` (``layout``, e.g. "[B, S]", goes in the
  message)."""
  if jnp.ndim(x) != rank:
    where = f" ({layout})" if layout else ""
    raise ValueError(f"{name} must have rank {rank}{where}, got shape {tuple(jnp.shape(x))}")


def check_static_int(name: str, value, minimum: int) -> int:
  """``value`` if it is a Python int >= ``minimum``: a size that shapes arrays, so it must be static under jit."""
  # bool is an int subclass; accepting it would silently mean window=1.
  if isinstance(value, bool) or not isinstance(value, int):
    raise ValueError(f"`{name}` must be a static Python int >= {minimum}, got {value!r} "
                     f"(of type {type(value).__name__}).")
  if value < minimum:
    raise ValueError(f"`{name}` must be >= {minimum}, got {value}.")
  return value


def check_qkv(query, key, value):
  """Validates the multi-head ``[B, T, N, H]`` / ``[B, S, N, H]`` / ``[B, S, N, Hv]`` layout; returns
  (B, T, S, N, H)."""
  for name, x in (("query", query), ("key", key), ("value", value)):
    if jnp.ndim(x) != 4:
      raise ValueError(f"{name} must be [B, L, N, H] (rank 4), got shape {jnp.shape(x)}")
  b, t, n, h = query.shape
  if key.shape[0] != b or key.shape[2] != n or key.shape[3] != h:
    raise ValueError(f"key shape {key.shape} does not match query shape {query.shape} in B, N or H")
  if value.shape[:3] != key.shape[:3]:
    raise ValueError(f"value shape {value.shape} does not match key shape {key.shape} in B, S or N")
  return b, t, key.shape[1], n, h


def check_single_head_qkv(query, keys, values) -> None:
  """Validates the single-head ``[B, T, Dq]`` / ``[B, S, Dk]`` / ``[B, S, Dv]`` layout of the RNN-decoder kernels
  (additive, multiplicative), where query and key sizes may differ: only B and S must agree."""
  check_rank("query", query, 3, "[B, T, Dq]")
  check_rank("keys", keys, 3, "[B, S, Dk]")
  check_rank("values", values, 3, "[B, S, Dv]")
  if keys.shape[0] != query.shape[0]:
    raise ValueError(f"keys batch size {keys.shape[0]} != query batch size {query.shape[0]}")
  if values.shape[0] != keys.shape[0]:
    raise ValueError(f"values batch size {values.shape[0]} != keys batch size {keys.shape[0]}")
  if values.shape[1] != keys.shape[1]:
    raise ValueError(f"values length {values.shape[1]} != keys length {keys.shape[1]} "
                     "(values and keys must share the S axis)")


def check_valid_mask(name: str, mask, expected_shape):
  """A per-position validity mask (``[B, L]``, True = real token) as bool, or None; a wrong shape names ``name``."""
  if mask is None:
    return None
  if tuple(jnp.shape(mask)) != tuple(expected_shape):
    raise ValueError(f"`{name}` must have shape {tuple(expected_shape)} "
                     f"([batch, length]), got {tuple(jnp.shape(mask))}.")
  return jnp.asarray(mask).astype(bool)


def as_logits_shape(name: str, x, target: tuple[int, int, int, int]):
  """Left-pads ``x`` to rank 4 and checks it broadcasts to ``target`` = (B, N, T, S); keeps size-1 axes."""
  if x is None:
    return None
  x = jnp.asarray(x)
  if x.ndim > 4:
    raise ValueError(f"{name} must broadcast to [B, N, T, S] = {list(target)}, got rank {x.ndim} shape {x.shape}")
  x = x.reshape((1,) * (4 - x.ndim) + x.shape)
  for axis, (have, want) in enumerate(zip(x.shape, target)):
    if have not in (1, want):
      raise ValueError(
          f"{name} shape {x.shape} does not broadcast to [B, N, T, S] = {list(target)} (axis {'BNTS'[axis]})")
  return x


# --------------------------------------------------------------------------------------------------- dropout hash


def _mix32(x):
  """A 32-bit integer finaliser (lowbias32, C. Wellons): every input bit affects every output bit."""
  x = x ^ (x >> 16)
  x = x * jnp.uint32(0x7FEB352D)
  x = x ^ (x >> 15)
  x = x * jnp.uint32(0x846CA68B)
  return x ^ (x >> 16)


def dropout_seeds(rng):
  """Two uint32 seeds from a JAX PRNG key (typed or raw) for :func:`dropout_keep`."""
  return jax.random.bits(rng, (2,), jnp.uint32)


def dropout_keep(seeds, rate: float, num_heads: int, q_len: int, b, n, t, s):
  """Keep-mask of attention dropout at index (b, n, t, s) (broadcasting integer arrays).

  A stateless hash of the global index, so any block of the ``[B, N, T, S]`` weights can be regenerated on its own,
  in the forward or the backward pass, by either implementation. P(keep) = 1 - rate up to 2⁻³².
  """
  row = (b.astype(jnp.uint32) * jnp.uint32(num_heads) + n.astype(jnp.uint32)) * jnp.uint32(q_len) + t.astype(jnp.uint32)
  return hash_keep(seeds, rate, row, s)


def hash_keep(seeds, rate: float, major, minor):
  """Keep-mask from a stateless hash of the index pair (``major``, ``minor``) (broadcasting integer arrays) and two
  uint32 ``seeds``: P(keep) = 1 - rate up to 2⁻³². The same index gives the same bit wherever it is computed (in
  a block, on a shard), which is what makes it cheap to regenerate and invariant to sharding."""
  h = _mix32(major.astype(jnp.uint32) ^ seeds[0])
  h = _mix32(h ^ minor.astype(jnp.uint32) ^ seeds[1])
  threshold = jnp.uint32(min(int(round(rate * 2.0**32)), 2**32 - 1))
  return h >= threshold


def full_dropout_keep(seeds, rate, shape):
  b, n, t, s = shape
  return dropout_keep(seeds, rate, n, t, jnp.arange(b)[:, None, None, None], jnp.arange(n)[None, :, None, None],
                      jnp.arange(t)[None, None, :, None], jnp.arange(s)[None, None, None, :])
