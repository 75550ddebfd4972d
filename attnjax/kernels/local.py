"""Local (sliding-window) attention: each position attends to the keys within ``window`` positions of it, in memory
linear in the sequence length (Longformer's local pattern, Beltagy et al. 2020).

Pure functions of arrays (no Flax, no state), with the head layout used throughout attnjax:

* query  ``[B, T, N, H]``
* key    ``[B, S, N, H]``
* value  ``[B, S, N, H_v]``

where ``B`` is the batch, ``T``/``S`` the query/key lengths, ``N`` the number of heads and ``H`` the head dimension.
Boolean masks use ``True`` = attend.

The softmax runs in float32 whatever the input dtype (float64 inputs keep float64), and a query row that has no valid
key yields exactly zero (never NaN) both in the output and in the gradients: the kernels' one masked softmax,
:func:`attnjax.kernels.common.masked_softmax`.

``window``, ``block_size`` and ``is_causal`` determine array shapes or control flow, so they must be static Python
values under ``jax.jit`` (pass them through ``static_argnames`` or close over them with ``functools.partial``).
"""

from __future__ import annotations

import math
from typing import Optional

import jax
import jax.numpy as jnp

from attnjax.kernels.common import (accumulation_dtype, check_qkv, check_static_int, check_valid_mask,
                                     masked_softmax)

__all__ = ["local_attention"]

Array = jax.Array


def _blocks_with_halo(x: Array, num_blocks: int, block: int, left: int, right: int):
  """[B, P, ...] (P = num_blocks * block) -> [B, num_blocks, (left+1+right)*block, ...].

    Block c of the result holds positions [(c-left)*block, (c+right+1)*block)
    of ``x``, with zeros for out-of-range positions. It is built from
    ``left+1+right`` shifted static slices, so its size (and that of its
    gradient) is linear in P.
    """
  rest = x.shape[2:]
  pad = [(0, 0), (left * block, right * block)] + [(0, 0)] * len(rest)
  xp = jnp.pad(x, pad)
  xp = xp.reshape((x.shape[0], num_blocks + left + right, block) + rest)
  parts = [xp[:, d:d + num_blocks] for d in range(left + 1 + right)]
  return jnp.concatenate(parts, axis=2)


def local_attention(
    query: Array,
    key: Array,
    value: Array,
    *,
    window: int,
    is_causal: bool = False,
    kv_valid: Optional[Array] = None,
    q_valid: Optional[Array] = None,
    scale: Optional[float] = None,
    block_size: Optional[int] = None,
) -> Array:
  r"""Sliding-window (banded) softmax self-attention in linear memory.

    Each query position ``i`` attends only to key positions ``j`` with

    * ``|i - j| <= window``            (``is_causal=False``), or
    * ``i - window <= j <= i``         (``is_causal=True``),

    and to valid keys only::

        out_i = sum_{j in W(i)} softmax_j(scale * q_i . k_j) v_j

    This is the local attention pattern of Longformer (Beltagy et al., 2020,
    "Longformer: The Long-Document Transformer"), the 1D local attention of the
    Image Transformer (Parmar et al., 2018) and the "local" alignment idea of
    Luong et al. (2015). The result is exactly full attention with a band mask
    (up to floating-point summation order).

    Implementation: the (padded) sequence is cut into blocks of ``block_size``
    positions; every query block attends to its own key block plus the
    ``ceil(window / block_size)`` neighbouring blocks on each side (left side
    only when causal) through a gathered score tensor of shape
    ``[B, num_blocks, N, block_size, (2 * halo + 1) * block_size]`` (``3 *
    block_size`` when ``block_size >= window``), on which the exact band,
    padding and validity masks are applied.

    Args:
      query: ``[B, T, N, H]``.
      key: ``[B, S, N, H]``; self-attention only, so ``S == T`` is required.
      value: ``[B, S, N, H_v]``.
      window: static int >= 0, half-width of the band (the past extent when
        causal). ``window=0`` attends to the diagonal only.
      is_causal: static bool; if True keys in the future are excluded.
      kv_valid: optional bool ``[B, S]`` key padding mask (True = real key).
      q_valid: optional bool ``[B, T]``; padded query rows (False) output 0.
      scale: logit multiplier, default ``1 / sqrt(H)``.
      block_size: static int >= 1, default ``min(window, T)`` (at least 1).
        ``T`` is padded up to a multiple of it.

    Returns:
      ``[B, T, N, H_v]`` in ``query.dtype``. Rows without any valid key are 0.

    Complexity:
      time and memory ``O(B * N * T * (block_size + 2 * window))`` -- linear in
      ``T`` for a fixed window -- instead of ``O(B * N * T^2)`` for full
      attention.
    """
  window = check_static_int("window", window, 0)
  if block_size is not None:
    block_size = check_static_int("block_size", block_size, 1)
  if not isinstance(is_causal, bool):
    raise ValueError(f"`is_causal` must be a static Python bool, got {is_causal!r}.")
  batch, t_len, s_len, heads, head_dim = check_qkv(query, key, value)
  if s_len != t_len:
    raise ValueError("local_attention is self-attention only: `key` length S="
                     f"{s_len} must equal `query` length T={t_len}.")
  kv_valid = check_valid_mask("kv_valid", kv_valid, (batch, s_len))
  q_valid = check_valid_mask("q_valid", q_valid, (batch, t_len))
  if scale is None:
    scale = 1.0 / math.sqrt(head_dim)

  if block_size is None:
    # A block longer than the sequence would only add padding work.
    block_size = max(1, min(window, t_len))
  block = block_size
  num_blocks = -(-t_len // block)
  padded = num_blocks * block
  # Key blocks farther than `halo` blocks away cannot contain a key within
  # the window, and there are only num_blocks - 1 other blocks anyway.
  halo = min(-(-window // block), num_blocks - 1)
  left, right = halo, (0 if is_causal else halo)
  span = (left + 1 + right) * block

  def pad_len(x):
    return jnp.pad(x, [(0, 0), (0, padded - t_len)] + [(0, 0)] * (x.ndim - 2))

  q_blk = pad_len(query).reshape(batch, num_blocks, block, heads, head_dim)
  k_blk = _blocks_with_halo(pad_len(key), num_blocks, block, left, right)
  v_blk = _blocks_with_halo(pad_len(value), num_blocks, block, left, right)

  # Absolute positions, computed with iota so the band mask costs no
  # constant memory and is fused by XLA.
  c = jnp.arange(num_blocks)[:, None, None]
  q_pos = c * block + jnp.arange(block)[None, :, None]
  k_pos = (c - left) * block + jnp.arange(span)[None, None, :]
  diff = q_pos - k_pos  # [num_blocks, block, span]
  if is_causal:
    band = (diff >= 0) & (diff <= window)
  else:
    band = jnp.abs(diff) <= window
  # Out-of-range keys (halo of the first/last block, and the tail padding)
  # must be excluded explicitly: zero-padded keys would score 0, not -inf.
  band = band & (k_pos >= 0) & (k_pos < t_len) & (q_pos < t_len)
  mask = band[None, :, None, :, :]  # [1, nb, 1, block, span]

  if kv_valid is not None:
    kv_blk = _blocks_with_halo(pad_len(kv_valid), num_blocks, block, left, right)
    mask = mask & kv_blk[:, :, None, None, :]
  if q_valid is not None:
    # Folding q_valid into the mask zeroes both the rows and their grads.
    q_blk_valid = pad_len(q_valid).reshape(batch, num_blocks, block)
    mask = mask & q_blk_valid[:, :, None, :, None]

  acc = accumulation_dtype(query, key, value)
  scores = jnp.einsum("bcqnh,bcknh->bcnqk", q_blk, k_blk, preferred_element_type=acc)
  probs = masked_softmax(scores * jnp.asarray(scale, acc), mask)  # empty rows: zeros, not NaN
  out = jnp.einsum("bcnqk,bcknv->bcqnv", probs.astype(value.dtype), v_blk, preferred_element_type=acc)
  out = out.reshape(batch, padded, heads, value.shape[-1])[:, :t_len]
  return out.astype(query.dtype)
