"""Position information for attention: absolute sinusoids, Shaw relative positions, T5 bucketed relative bias.

* Sinusoidal (Vaswani et al. 2017, §3.5): PE(pos, 2i) = sin(pos / 10000^{2i/d}), PE(pos, 2i+1) = cos(pos / 10000^{2i/d}).
* Relative positions (Shaw, Uszkoreit & Vaswani 2018, "Self-Attention with Relative Position Representations"):
  learned vectors a^K_ij = w^K_{clip(j-i, K)}, a^V_ij = w^V_{clip(j-i, K)} of the head size, shared across heads, enter
  as e_ij = q_i·(k_j + a^K_ij)/sqrt(H) (eq. 4) and z_i = Σ_j α_ij (v_j + a^V_ij) (eq. 3).
* Bucketed relative bias (Raffel et al. 2020, T5): a learned scalar per head and bucket of j - i, exact for small
  distances and logarithmic up to ``max_distance``, added to the logits as ``bias``.

Positions are explicit arrays, so a decoder cache passes the true positions of its new tokens (``q_positions`` =
``[cache_index, ..., cache_index + T - 1]``): everything here depends on j - i only, which is what makes relative
attention invariant to shifting all positions.
"""

from __future__ import annotations

import math

import jax.numpy as jnp

from attnjax.kernels.common import RelativeTable, as_logits_shape, check_qkv
from attnjax.kernels.dot_product import xla_attention


def sinusoidal_positions(length: int, dim: int, *, max_timescale: float = 10_000.0, positions=None,
                         dtype=jnp.float32):
  """Sinusoidal position encodings, sin on even and cos on odd dimensions (Vaswani et al. 2017, §3.5).

  Args:
    length: number of positions L (ignored when ``positions`` is given).
    dim: model dimension d.
    max_timescale: the 10000 of the paper.
    positions: optional integer/float array ``[..., L]`` of positions (e.g. offsets during cached decoding).
    dtype: the dtype the angles are computed in and returned (float64 for a model run in float64).

  Returns:
    ``[L, d]`` (or ``[..., L, d]``) of ``dtype`` with PE[pos, 2i] = sin(pos·ω_i), PE[pos, 2i+1] = cos(pos·ω_i),
    ω_i = max_timescale^(-2i/d).
  """
  if dim <= 0:
    raise ValueError(f"dim must be positive, got {dim}")
  pos = jnp.arange(length, dtype=dtype) if positions is None else jnp.asarray(positions, dtype)
  freqs = jnp.exp(-math.log(max_timescale) * jnp.arange(0, dim, 2, dtype=dtype) / dim)  # [ceil(d/2)]
  angles = pos[..., None] * freqs
  pe = jnp.stack([jnp.sin(angles), jnp.cos(angles)], axis=-1)  # [..., L, ceil(d/2), 2]: interleave sin, cos
  return pe.reshape(pe.shape[:-2] + (-1,))[..., :dim]


def _positions(name, positions, length):
  if positions is None:
    return jnp.arange(length)
  positions = jnp.asarray(positions)
  if positions.ndim not in (1, 2):
    raise ValueError(f"{name} must be [L] or [B, L], got shape {positions.shape}")
  return positions


def relative_position_ids(q_positions, k_positions, max_distance: int):
  """Shaw's clipped relative distance as a table index: clip(j - i, -K, K) + K ∈ [0, 2K].

  Args:
    q_positions: ``[T]`` or ``[B, T]`` integer positions of the queries.
    k_positions: ``[S]`` or ``[B, S]`` integer positions of the keys.
    max_distance: K, the clipping distance.

  Returns:
    ``[T, S]`` (or ``[B, T, S]``) int32.
  """
  if max_distance < 1:
    raise ValueError(f"max_distance must be >= 1, got {max_distance}")
  q = jnp.asarray(q_positions)
  k = jnp.asarray(k_positions)
  rel = k[..., None, :] - q[..., :, None]
  return (jnp.clip(rel, -max_distance, max_distance) + max_distance).astype(jnp.int32)


def shaw_relative_embeddings(table, q_positions, k_positions, max_distance: int):
  """Gathers a^{K or V}_ij = table[clip(j - i, K) + K].

  Args:
    table: ``[2K + 1, H]`` learned relative-position vectors (one table for keys, one for values).
    q_positions, k_positions, max_distance: as :func:`relative_position_ids`.

  Returns:
    ``[T, S, H]`` (or ``[B, T, S, H]``) to pass as ``rel_key`` / ``rel_value``.
  """
  if table.ndim != 2 or table.shape[0] != 2 * max_distance + 1:
    raise ValueError(f"table must be [2*max_distance+1, H] = [{2 * max_distance + 1}, H], got {table.shape}")
  return jnp.take(table, relative_position_ids(q_positions, k_positions, max_distance), axis=0)


def shaw_relative_table(table, q_positions, k_positions, max_distance: int) -> RelativeTable:
  """The same a^{K or V}_ij kept factored, as ``RelativeTable(table, ids)``: what the attention layers pass, since the
  relative terms then cost O(T·(2K+1)·H) instead of the gathered ``[(B,) T, S, H]`` tensors' O(T·S·H)."""
  if table.ndim != 2 or table.shape[0] != 2 * max_distance + 1:
    raise ValueError(f"table must be [2*max_distance+1, H] = [{2 * max_distance + 1}, H], got {table.shape}")
  return RelativeTable(table, relative_position_ids(q_positions, k_positions, max_distance))


def relative_attention(query, key, value, *, rel_key, rel_value=None, mask=None, bias=None, is_causal=False,
                       scale=None, dropout_rate=0.0, dropout_rng=None, return_weights=False):
  """Self-attention with relative position representations (Shaw et al. 2018, eqs. 3-4).

      e_ts = q_t·(k_s + a^K_ts)·scale,   α = softmax_s(e + bias, masked),   z_t = Σ_s α_ts (v_s + a^V_ts)

  Args:
    query: ``[B, T, N, H]``; key, value: ``[B, S, N, H]``.
    rel_key: a^K, ``[T, S, H]`` or ``[B, T, S, H]`` (shared by all heads, as in the paper), from
      :func:`shaw_relative_embeddings`; or factored, a :class:`RelativeTable` from :func:`shaw_relative_table`
      (the same function, without the ``[T, S, H]`` tensors).
    rel_value: a^V in the same form, or None to use the key term only.
    mask, bias, is_causal, scale, dropout_rate, dropout_rng, return_weights: as
      :func:`attnjax.kernels.scaled_dot_product_attention`.

  Returns:
    ``out [B, T, N, H]`` or ``(out, weights [B, N, T, S])``.
  """
  b, t, s, n, h = check_qkv(query, key, value)
  for name, rel in (("rel_key", rel_key), ("rel_value", rel_value)):
    if rel is None:
      continue
    if isinstance(rel, RelativeTable):
      if rel.table.ndim != 2 or rel.table.shape[1] != h or rel.ids.ndim not in (2, 3) or rel.ids.shape[-2:] != (t, s):
        raise ValueError(f"{name} must be a RelativeTable of table [R, H={h}] and ids [T, S] or [B, T, S] with "
                         f"(T, S) = {(t, s)}, got table {rel.table.shape} and ids {rel.ids.shape}")
    elif rel.ndim not in (3, 4) or rel.shape[-3:] != (t, s, h):
      raise ValueError(f"{name} must be [T, S, H] or [B, T, S, H] with (T, S, H) = {(t, s, h)}, got {rel.shape}")
  if dropout_rate > 0.0 and dropout_rng is None:
    raise ValueError("dropout_rng is required when dropout_rate > 0")
  out, weights = xla_attention(
      query, key, value, mask=as_logits_shape("mask", mask, (b, n, t, s)),
      bias=as_logits_shape("bias", bias, (b, n, t, s)), is_causal=is_causal,
      scale=1.0 / math.sqrt(h) if scale is None else float(scale), dropout_rate=dropout_rate,
      dropout_rng=dropout_rng, rel_key=rel_key, rel_value=rel_value)
  return (out, weights) if return_weights else out


def t5_relative_position_bucket(relative_position, *, bidirectional: bool = True, num_buckets: int = 32,
                                max_distance: int = 128):
  """T5's bucket of a relative position j - i (Raffel et al. 2020).

  Half the buckets (per direction when bidirectional) hold exact distances 0..max_exact-1; the rest cover
  [max_exact, max_distance) logarithmically; farther distances share the last bucket. Unidirectional (decoder)
  buckets map every future position (j > i) to bucket 0.
  """
  n = -jnp.asarray(relative_position)  # i - j: positive for keys in the past
  ret = jnp.zeros_like(n)
  if bidirectional:
    num_buckets //= 2
    ret = ret + (n < 0).astype(n.dtype) * num_buckets
    n = jnp.abs(n)
  else:
    n = jnp.maximum(n, 0)
  max_exact = num_buckets // 2
  is_small = n < max_exact
  # log-spaced buckets; n is clamped to >= 1 inside the log so that small n (which take the other branch) stay finite
  large = max_exact + (jnp.log(jnp.maximum(n, 1).astype(jnp.float32) / max_exact)
                       / math.log(max_distance / max_exact) * (num_buckets - max_exact)).astype(n.dtype)
  large = jnp.minimum(large, num_buckets - 1)
  return ret + jnp.where(is_small, n, large)


def t5_relative_bias(table, q_positions, k_positions, *, bidirectional: bool = True, max_distance: int = 128):
  """T5 relative attention bias ``[1 or B, N, T, S]`` to pass as ``bias``.

  Args:
    table: ``[num_buckets, N]``, one learned scalar per bucket and head.
    q_positions: ``[T]`` or ``[B, T]``; k_positions: ``[S]`` or ``[B, S]``.
    bidirectional: True for encoders, False for causal decoders.
    max_distance: distance beyond which all positions share the last bucket.
  """
  if table.ndim != 2:
    raise ValueError(f"table must be [num_buckets, N], got shape {table.shape}")
  rel = jnp.asarray(k_positions)[..., None, :] - jnp.asarray(q_positions)[..., :, None]  # [(B,) T, S]
  buckets = t5_relative_position_bucket(rel, bidirectional=bidirectional, num_buckets=table.shape[0],
                                        max_distance=max_distance)
  bias = jnp.take(table, buckets, axis=0)  # [(B,) T, S, N]
  bias = jnp.moveaxis(bias, -1, -3)  # [(B,) N, T, S]
  return bias if bias.ndim == 4 else bias[None]
