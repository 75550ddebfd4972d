"""Conventions shared by the attention kernels: the layout checks, the mask value and the attention-dropout hash."""

from __future__ import annotations

import jax
import jax.numpy as jnp

# Masked logits are set to this finite value rather than -inf: -inf - (-inf) = NaN in a row with no valid key.
MASK_VALUE = -0.7 * float(jnp.finfo(jnp.float32).max)



# ------------------------------------------------------------------------------------------------ input checking


def check_qkv(query, key, value):
  """Validates the ``[B, T, N, H]`` / ``[B, S, N, H]`` layout; returns (B, T, S, N, H)."""
  for name, x in (("query", query), ("key", key), ("value", value)):
    if jnp.ndim(x) != 4:
      raise ValueError(f"{name} must be [B, L, N, H] (rank 4), got shape {jnp.shape(x)}")
  b, t, n, h = query.shape
  if key.shape[0] != b or key.shape[2] != n or key.shape[3] != h:
    raise ValueError(f"key shape {key.shape} does not match query shape {query.shape} in B, N or H")
  if value.shape[:3] != key.shape[:3]:
    raise ValueError(f"value shape {value.shape} does not match key shape {key.shape} in B, S or N")
  return b, t, key.shape[1], n, h


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
  h = _mix32(row ^ seeds[0])
  h = _mix32(h ^ s.astype(jnp.uint32) ^ seeds[1])
  threshold = jnp.uint32(min(int(round(rate * 2.0**32)), 2**32 - 1))
  return h >= threshold


def full_dropout_keep(seeds, rate, shape):
  b, n, t, s = shape
  return dropout_keep(seeds, rate, n, t, jnp.arange(b)[:, None, None, None], jnp.arange(n)[None, :, None, None],
                      jnp.arange(t)[None, None, :, None], jnp.arange(s)[None, None, None, :])


def softmax_dtype(dtype):
  """float32 for half-precision inputs (bf16 logits lose the softmax's small weights), float64 for float64."""
  return jnp.promote_types(dtype, jnp.float32)
