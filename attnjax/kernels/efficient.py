"""Attention variants whose cost is linear in the sequence length.

Pure functions of arrays (no Flax, no state), with the head layout used
throughout attnjax:

* query  ``[B, T, N, H]``
* key    ``[B, S, N, H]``
* value  ``[B, S, N, H_v]``

where ``B`` is the batch, ``T``/``S`` the query/key lengths, ``N`` the number
of heads and ``H`` the head dimension. Boolean masks use ``True`` = attend.

Softmax and feature-map accumulations are carried out in float32 whatever the
input dtype (float64 inputs keep float64), and a query row that has no valid
key yields exactly zero (never NaN) both in the output and in the gradients.

All configuration arguments (``window``, ``block_size``, ``is_causal``,
``chunk_size``, ``feature_map``) determine array shapes or control flow, so they
must be static Python values under ``jax.jit`` (e.g. pass them through
``static_argnames`` or close over them with ``functools.partial``).
"""

from __future__ import annotations

import math
from typing import Optional

import jax
import jax.numpy as jnp
from jax import lax

__all__ = ["local_attention", "linear_attention"]

Array = jax.Array

# --------------------------------------------------------------------------- #
# Argument checking
# --------------------------------------------------------------------------- #


def _check_static_int(name: str, value, minimum: int) -> int:
  # bool is an int subclass; accepting it would silently mean window=1.
  if isinstance(value, bool) or not isinstance(value, int):
    raise ValueError(f"`{name}` must be a static Python int >= {minimum}, got {value!r} "
                     f"(of type {type(value).__name__}).")
  if value < minimum:
    raise ValueError(f"`{name}` must be >= {minimum}, got {value}.")
  return value


def _check_qkv(query, key, value):
  for name, x in (("query", query), ("key", key), ("value", value)):
    if jnp.ndim(x) != 4:
      raise ValueError(f"`{name}` must have rank 4 ([batch, length, heads, head_dim]), "
                       f"got shape {jnp.shape(x)}.")
  (b, _, n, h), (bk, s, nk, hk), (bv, sv, nv, _) = (
      query.shape,
      key.shape,
      value.shape,
  )
  if (bk, nk, hk) != (b, n, h):
    raise ValueError(f"`key` shape {key.shape} is incompatible with `query` shape "
                     f"{query.shape}: batch, heads and head_dim must match.")
  if (bv, sv, nv) != (b, s, n):
    raise ValueError(f"`value` shape {value.shape} is incompatible with `key` shape "
                     f"{key.shape}: batch, length and heads must match.")


def _check_mask(name: str, mask, expected_shape):
  if mask is None:
    return None
  if tuple(jnp.shape(mask)) != tuple(expected_shape):
    raise ValueError(f"`{name}` must have shape {tuple(expected_shape)} "
                     f"([batch, length]), got {tuple(jnp.shape(mask))}.")
  return jnp.asarray(mask).astype(bool)


# --------------------------------------------------------------------------- #
# Local (sliding-window) attention
# --------------------------------------------------------------------------- #


def _acc_dtype(*xs):
  """float32, or wider if an input already is (float64 under x64)."""
  return jnp.promote_types(jnp.result_type(*xs), jnp.float32)


def _masked_softmax(scores: Array, mask: Array) -> Array:
  """Softmax over the last axis, zero on rows with no valid key.

    Masked entries never pass through exp(-inf) nor an inf - inf difference, so
    the backward pass cannot produce NaN (a plain ``where(mask, s, -inf)``
    followed by softmax gives NaN for empty rows, and 0 * inf in the VJP of
    ``where`` otherwise).
    """
  row_max = jnp.max(jnp.where(mask, scores, -jnp.inf), axis=-1, keepdims=True)
  row_max = jnp.where(jnp.isfinite(row_max), row_max, 0.0)
  # The max is only a numerical shift: softmax is invariant to it, so no
  # gradient has to flow through it.
  row_max = lax.stop_gradient(row_max)
  shifted = jnp.where(mask, scores, row_max) - row_max
  unnorm = jnp.where(mask, jnp.exp(shifted), 0.0)
  denom = jnp.sum(unnorm, axis=-1, keepdims=True)
  # Empty rows have denom == 0 and unnorm == 0: dividing by 1 keeps them 0.
  return unnorm / jnp.where(denom > 0, denom, 1.0)


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
  window = _check_static_int("window", window, 0)
  if block_size is not None:
    block_size = _check_static_int("block_size", block_size, 1)
  if not isinstance(is_causal, bool):
    raise ValueError(f"`is_causal` must be a static Python bool, got {is_causal!r}.")
  _check_qkv(query, key, value)
  batch, t_len, heads, head_dim = query.shape
  s_len = key.shape[1]
  if s_len != t_len:
    raise ValueError("local_attention is self-attention only: `key` length S="
                     f"{s_len} must equal `query` length T={t_len}.")
  kv_valid = _check_mask("kv_valid", kv_valid, (batch, s_len))
  q_valid = _check_mask("q_valid", q_valid, (batch, t_len))
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

  acc = _acc_dtype(query, key, value)
  scores = jnp.einsum("bcqnh,bcknh->bcnqk", q_blk, k_blk, preferred_element_type=acc)
  probs = _masked_softmax(scores * jnp.asarray(scale, acc), mask)
  out = jnp.einsum("bcnqk,bcknv->bcqnv", probs.astype(value.dtype), v_blk, preferred_element_type=acc)
  out = out.reshape(batch, padded, heads, value.shape[-1])[:, :t_len]
  return out.astype(query.dtype)


# --------------------------------------------------------------------------- #
# Linear attention (Katharopoulos et al., 2020)
# --------------------------------------------------------------------------- #

_FEATURE_MAPS = {
    # elu(x) + 1 > 0 keeps the denominator positive (paper, Sec. 3.2.1).
    "elu": lambda x: jax.nn.elu(x) + 1.0,
    "relu": jax.nn.relu,
}


def linear_attention(
    query: Array,
    key: Array,
    value: Array,
    *,
    is_causal: bool = False,
    kv_valid: Optional[Array] = None,
    feature_map: str = "elu",
    eps: float = 1e-6,
    chunk_size: Optional[int] = None,
) -> Array:
  r"""Kernelised linear attention (Katharopoulos et al., 2020).

    From "Transformers are RNNs: Fast Autoregressive Transformers with Linear
    Attention" (ICML 2020). With a positive feature map ``phi``::

        non-causal:  out_i = phi(q_i)^T (sum_j phi(k_j) v_j^T)
                             / (phi(q_i)^T sum_j phi(k_j) + eps)
        causal:      same, with both sums restricted to j <= i

    ``phi(x) = elu(x) + 1`` (``feature_map="elu"``, the paper's choice) or
    ``phi(x) = relu(x)`` (``feature_map="relu"``). Keys with
    ``kv_valid == False`` get ``phi(k_j) = 0`` and so contribute nothing; a
    query with no valid key outputs 0 (numerator 0, denominator ``eps``).

    The causal form is evaluated chunk-wise: a ``lax.scan`` over chunks of
    ``chunk_size`` positions carries the running state
    ``S = sum phi(k) v^T`` ``[B, N, H, H_v]`` and ``z = sum phi(k)`` ``[B, N, H]``;
    inside a chunk the contribution of earlier positions of the same chunk is
    computed exactly by a ``[chunk, chunk]`` masked product. Neither a
    ``[T, T]`` matrix nor a ``[T, H, H_v]`` prefix sum is materialised in the
    forward pass.

    Args:
      query: ``[B, T, N, H]``.
      key: ``[B, S, N, H]`` (``S == T`` required when causal).
      value: ``[B, S, N, H_v]``.
      is_causal: static bool.
      kv_valid: optional bool ``[B, S]`` key padding mask (True = real key).
      feature_map: static, ``"elu"`` or ``"relu"``.
      eps: added to the denominator.
      chunk_size: static int >= 1 (causal only), default ``min(64, T)``;
        ``T`` is padded up to a multiple of it.

    Returns:
      ``[B, T, N, H_v]`` in ``query.dtype``; computed in float32 (float64 for
      float64 inputs).

    Complexity:
      non-causal: time ``O(B N (T + S) H H_v)``, memory ``O(B N (T + S) (H + H_v) +
      B N H H_v)``. Causal: time ``O(B N T (chunk + H) H_v)``, memory
      ``O(B N T chunk)`` in the forward pass; reverse-mode additionally keeps
      one ``[B, N, H, H_v]`` state per chunk, i.e. ``O(B N (T / chunk) H H_v)``.
    """
  if not isinstance(feature_map, str) or feature_map not in _FEATURE_MAPS:
    raise ValueError(f"`feature_map` must be one of {sorted(_FEATURE_MAPS)}, got {feature_map!r}.")
  if chunk_size is not None:
    chunk_size = _check_static_int("chunk_size", chunk_size, 1)
  if not isinstance(is_causal, bool):
    raise ValueError(f"`is_causal` must be a static Python bool, got {is_causal!r}.")
  _check_qkv(query, key, value)
  batch, t_len, heads, _ = query.shape
  s_len = key.shape[1]
  if is_causal and s_len != t_len:
    raise ValueError("causal linear_attention needs aligned positions: `key` length S="
                     f"{s_len} must equal `query` length T={t_len}.")
  kv_valid = _check_mask("kv_valid", kv_valid, (batch, s_len))
  phi = _FEATURE_MAPS[feature_map]

  # float32 accumulation: the state sums T outer products, which bfloat16
  # cannot represent accurately.
  acc = _acc_dtype(query, key, value)
  q = phi(query.astype(acc))
  k = phi(key.astype(acc))
  v = value.astype(acc)
  if kv_valid is not None:
    k = k * kv_valid[:, :, None, None].astype(acc)
  eps = jnp.asarray(eps, acc)

  if not is_causal:
    kv = jnp.einsum("bsnh,bsnv->bnhv", k, v)
    z = jnp.sum(k, axis=1)  # [B, N, H]
    num = jnp.einsum("btnh,bnhv->btnv", q, kv)
    den = jnp.einsum("btnh,bnh->btn", q, z) + eps
    return (num / den[..., None]).astype(query.dtype)

  if chunk_size is None:
    chunk_size = 64
  chunk = max(1, min(chunk_size, t_len))
  num_chunks = -(-t_len // chunk)
  padded = num_chunks * chunk

  def to_chunks(x):
    # Padding sits after every real position, so under the causal mask it
    # can never reach a real query; padded keys also have zero values.
    x = jnp.pad(x, [(0, 0), (0, padded - t_len), (0, 0), (0, 0)])
    x = x.reshape((batch, num_chunks, chunk) + x.shape[2:])
    return jnp.moveaxis(x, 1, 0)  # scan runs over the leading axis

  qc, kc, vc = to_chunks(q), to_chunks(k), to_chunks(v)
  intra_mask = jnp.tril(jnp.ones((chunk, chunk), acc))  # j <= i

  def step(carry, xs):
    state, z = carry  # [B, N, H, Hv], [B, N, H]: sums over earlier chunks
    q_i, k_i, v_i = xs  # [B, C, N, *]
    # Earlier chunks, through the carried state.
    num = jnp.einsum("bcnh,bnhv->bcnv", q_i, state)
    den = jnp.einsum("bcnh,bnh->bcn", q_i, z)
    # Same chunk, exactly: a small [C, C] causal product.
    a = jnp.einsum("bcnh,bdnh->bncd", q_i, k_i) * intra_mask
    num = num + jnp.einsum("bncd,bdnv->bcnv", a, v_i)
    den = den + jnp.sum(a, axis=-1).transpose(0, 2, 1)
    out = num / (den + eps)[..., None]
    state = state + jnp.einsum("bcnh,bcnv->bnhv", k_i, v_i)
    z = z + jnp.sum(k_i, axis=1)
    return (state, z), out

  init = (
      jnp.zeros((batch, heads, q.shape[-1], v.shape[-1]), acc),
      jnp.zeros((batch, heads, q.shape[-1]), acc),
  )
  _, out = lax.scan(step, init, (qc, kc, vc))
  out = jnp.moveaxis(out, 0, 1).reshape(batch, padded, heads, v.shape[-1])
  return out[:, :t_len].astype(query.dtype)
