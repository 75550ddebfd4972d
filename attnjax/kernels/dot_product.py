"""Scaled dot-product attention (Vaswani et al. 2017, "Attention Is All You Need", eq. 1).

    Attention(Q, K, V) = softmax(Q Kᵀ · scale + bias, masked) V,    scale = 1/sqrt(H) by default.

Implementations of the same function:

* ``"xla"``: the textbook form; materialises the ``[B, N, T, S]`` logits. Fastest at short lengths.
* ``"blockwise"``: exact attention block by block with an online softmax, forward and backward (FlashAttention-2,
  Dao 2023) in O(T·H + block²) memory; see :mod:`attnjax.kernels.blockwise`.
* ``"pallas_tpu"`` (TPU: Pallas splash attention) and ``"cudnn"`` (GPU): the accelerators' fused kernels, for
  causal masks and segment ids (padding, packing); see :mod:`attnjax.kernels.fused`.
* ``"auto"``: the fused kernel of the platform where it covers the call, else the faster of ``"xla"`` and
  ``"blockwise"`` for the shapes (:func:`attnjax.kernels.fused.choose_implementation`); the choice and its reason
  are logged once per choice and rule (each shape at ``--verbosity=1``).

Both share the conventions here: softmax in float32 whatever the input dtype; boolean masks, True = attend; a query
row whose keys are all masked yields zeros (never NaN) in output, weights and gradients; dropout on the attention
weights drawn from a counter-based hash of the (b, n, t, s) index, so that both implementations drop exactly the same
entries and a block can regenerate its own dropout mask in the backward pass without storing it.
"""

from __future__ import annotations

import math

import jax.numpy as jnp

from attnjax.kernels import blockwise, fused
from attnjax.kernels.common import (RelativeTable, accumulation_dtype, as_logits_shape, check_qkv, dropout_seeds,
                                     full_dropout_keep, masked_softmax)

IMPLEMENTATIONS = ("auto", "xla", "blockwise", "pallas_tpu", "cudnn")


# ------------------------------------------------------------------------------------------------------ xla path


def xla_attention(query, key, value, *, mask, bias, is_causal, scale, dropout_rate, dropout_rng,
                  rel_key=None, rel_value=None):
  """Materialised attention; returns ``(out [B,T,N,Hv], weights [B,N,T,S] float32)``.

  ``rel_key``/``rel_value`` (``[T, S, H]`` or ``[B, T, S, H]``, or a factored :class:`RelativeTable`) add the
  relative-position terms of Shaw et al. 2018: e_ts = q_t·(k_s + a^K_ts)·scale and z_t = Σ_s α_ts (v_s + a^V_ts).
  They are inputs here so that the relative kernel in :mod:`attnjax.kernels.positions` shares this one
  masking/softmax/dropout path.
  """
  b, t, s, n, _ = check_qkv(query, key, value)
  acc = accumulation_dtype(query.dtype)
  logits = jnp.einsum("btnh,bsnh->bnts", query, key, preferred_element_type=acc)
  if rel_key is not None:
    logits = logits + _relative_logits(query, rel_key, acc)
  logits = logits * jnp.asarray(scale, acc)
  if bias is not None:
    logits = logits + bias.astype(acc)
  if is_causal:
    causal = jnp.tril(jnp.ones((t, s), dtype=bool))
    mask = causal if mask is None else jnp.logical_and(mask, causal)
  weights = masked_softmax(logits, mask)  # a fully masked row gives zeros in weights and gradients
  probs = weights
  if dropout_rate > 0.0:
    keep = full_dropout_keep(dropout_seeds(dropout_rng), dropout_rate, (b, n, t, s))
    probs = jnp.where(keep, weights / (1.0 - dropout_rate), 0.0)
  out = jnp.einsum("bnts,bsnh->btnh", probs.astype(value.dtype), value)
  if rel_value is not None:
    out = out + _relative_values(probs, rel_value)
  return out.astype(query.dtype), weights


def projected_memory_attention(query, key_t, value_t, *, mask=None, dropout_rate=0.0, dropout_rng=None):
  """:func:`xla_attention` (default scale, no bias) over keys and values kept as ``[B, N, H, S]``: the
  cross-attention cache's layout (:meth:`attnjax.layers.attention.MultiHeadAttention.project_kv`), each ``[H, S]``
  matrix read by the products as it lies. ``query [B, T, N, H]``; ``mask`` broadcastable to ``[B, N, T, S]``.
  Returns ``(out [B, T, N, H], weights [B, N, T, S])``."""
  b, t, n, h = query.shape
  if key_t.shape != value_t.shape or key_t.shape[:3] != (b, n, h):
    raise ValueError(f"key and value must be [B, N, H, S] = [{b}, {n}, {h}, S] for query {query.shape}, got "
                     f"{key_t.shape} and {value_t.shape}")
  acc = accumulation_dtype(query.dtype)
  logits = jnp.einsum("btnh,bnhs->bnts", query, key_t, preferred_element_type=acc) * jnp.asarray(1.0 / math.sqrt(h),
                                                                                                  acc)
  weights = masked_softmax(logits, mask)
  probs = weights
  if dropout_rate > 0.0:
    keep = full_dropout_keep(dropout_seeds(dropout_rng), dropout_rate, (b, n, t, key_t.shape[-1]))
    probs = jnp.where(keep, weights / (1.0 - dropout_rate), 0.0)
  out = jnp.einsum("bnts,bnhs->btnh", probs.astype(value_t.dtype), value_t)
  return out.astype(query.dtype), weights


def _relative_logits(query, rel, acc):
  """q_t·a_ts as ``[B, N, T, S]``: from the ``[(B,) T, S, H]`` vectors, or factored, q_t·w_r for each of the R
  distances (one ``[H, R]`` matmul) of which each (t, s) takes its own."""
  if isinstance(rel, RelativeTable):
    per_distance = jnp.einsum("btnh,rh->bntr", query, rel.table, preferred_element_type=acc)
    ids = rel.ids if rel.ids.ndim == 3 else rel.ids[None]
    b, n, t, _ = per_distance.shape
    return jnp.take_along_axis(per_distance, jnp.broadcast_to(ids[:, None], (b, n, t, ids.shape[-1])), axis=-1)
  spec = "btnh,tsh->bnts" if rel.ndim == 3 else "btnh,btsh->bnts"
  return jnp.einsum(spec, query, rel, preferred_element_type=acc)


def _relative_values(probs, rel):
  """Σ_s α_ts a_ts as ``[B, T, N, H]``: from the vectors, or factored, Σ_r (Σ_{s: ids_ts = r} α_ts) w_r: the weights
  summed by distance (a scatter-add), then one ``[R, H]`` matmul."""
  if isinstance(rel, RelativeTable):
    b, n, t, s = probs.shape
    ids = jnp.broadcast_to((rel.ids if rel.ids.ndim == 3 else rel.ids[None])[:, None], (b, n, t, s))
    by_distance = jnp.zeros((b * n * t, rel.table.shape[0]), probs.dtype)
    rows = jnp.arange(b * n * t)[:, None]
    by_distance = by_distance.at[rows, ids.reshape(b * n * t, s)].add(probs.reshape(b * n * t, s))
    return jnp.einsum("xr,rh->xh", by_distance.astype(rel.table.dtype), rel.table).reshape(
        b, n, t, -1).transpose(0, 2, 1, 3)
  spec = "bnts,tsh->btnh" if rel.ndim == 3 else "bnts,btsh->btnh"
  return jnp.einsum(spec, probs.astype(rel.dtype), rel)


# ------------------------------------------------------------------------------------------------ public function


def scaled_dot_product_attention(query, key, value, *, mask=None, bias=None, is_causal=False, scale=None,
                                 dropout_rate=0.0, dropout_rng=None, return_weights=False, implementation="xla",
                                 block_q=512, block_kv=512, q_segment_ids=None, kv_segment_ids=None, spec=None):
  """Scaled dot-product attention, Vaswani et al. 2017 eq. (1): softmax(Q Kᵀ·scale + bias) V over the masked keys.

  Args:
    query: ``[B, T, N, H]``.
    key: ``[B, S, N, H]``.
    value: ``[B, S, N, Hv]`` (Hv = H in the Transformer).
    mask: bool, broadcastable to ``[B, N, T, S]``, True = attend (see :mod:`attnjax.kernels.masks`).
    bias: float, broadcastable to ``[B, N, T, S]``, added to the scaled logits (ALiBi, T5 relative bias, ...).
    is_causal: also apply the lower-triangular mask ``s <= t`` (top-left aligned, as ``jax.nn.dot_product_attention``).
    scale: logit scale; default ``1/sqrt(H)`` (the paper's remedy for dot products growing with H).
    dropout_rate: attention dropout on the weights (inverted: kept weights are scaled by 1/(1-rate)).
    dropout_rng: PRNG key, required when ``dropout_rate > 0``.
    return_weights: also return the attention weights ``[B, N, T, S]`` (float32, before dropout).
    implementation: ``"auto"``, ``"xla"``, ``"blockwise"`` (O(T·H + block²) memory, exact; no
      ``return_weights``), ``"pallas_tpu"`` or ``"cudnn"`` (on their platform only; segment ids and causality, no
      mask, bias or dropout); see the module docstring.
    block_q, block_kv: block sizes of ``"blockwise"`` (clipped to T and S).
    q_segment_ids, kv_segment_ids: ``[B, T]`` / ``[B, S]`` int: query t attends key s iff ``kv[s] != 0`` and
      ``q[t] == kv[s]`` (key padding: q all ones, kv the key mask; packing: the segment ids on both sides); anded
      with ``mask``. The form the fused kernels take.
    spec: ``PartitionSpec`` of ``[B, T, N, H]`` over the mesh of ``jax.set_mesh``, for ``"pallas_tpu"``'s
      ``shard_map``.

  Returns:
    ``out [B, T, N, Hv]`` in the query dtype, or ``(out, weights)``. Softmax is computed in float32; a query row
    whose keys are all masked gives zeros in output, weights and gradients.
  """
  b, t, s, n, h = check_qkv(query, key, value)
  target = (b, n, t, s)
  mask = as_logits_shape("mask", mask, target)
  if mask is not None and mask.dtype != jnp.bool_:
    raise ValueError(f"mask must be boolean (True = attend), got dtype {mask.dtype}")
  bias = as_logits_shape("bias", bias, target)
  scale = 1.0 / math.sqrt(h) if scale is None else float(scale)
  if not 0.0 <= dropout_rate < 1.0:
    raise ValueError(f"dropout_rate must be in [0, 1), got {dropout_rate}")
  if dropout_rate > 0.0 and dropout_rng is None:
    raise ValueError("dropout_rng is required when dropout_rate > 0")
  if (q_segment_ids is None) != (kv_segment_ids is None):
    raise ValueError("q_segment_ids and kv_segment_ids go together (key padding alone: q_segment_ids all ones)")
  if q_segment_ids is not None and (q_segment_ids.shape != (b, t) or kv_segment_ids.shape != (b, s)):
    raise ValueError(f"q_segment_ids / kv_segment_ids must be [B={b}, T={t}] / [B={b}, S={s}], got "
                     f"{q_segment_ids.shape} / {kv_segment_ids.shape}")
  if implementation == "auto":
    implementation, reason = fused.choose_implementation(
        backend=fused.platform(), query_length=t, key_length=s, head_dim=h, dtype=query.dtype,
        has_mask=mask is not None, has_bias=bias is not None, dropout=dropout_rate > 0.0,
        return_weights=return_weights, has_segment_ids=q_segment_ids is not None)
    fused.log_choice(implementation, reason, (tuple(query.shape), tuple(key.shape)))
  if implementation in fused.PLATFORMS:
    fused.check_platform(implementation)
    unsupported = [name for name, value in (("mask", mask), ("bias", bias)) if value is not None]
    if dropout_rate > 0.0 or return_weights:
      unsupported.append("dropout_rate" if dropout_rate > 0.0 else "return_weights")
    if unsupported:
      raise ValueError(f"implementation={implementation!r} takes causality and q/kv_segment_ids only, not "
                       f"{', '.join(unsupported)}; use implementation='auto' to fall back where needed")
    fused.note_fused_call(implementation, query.shape, key.shape, is_causal)
    if implementation == "pallas_tpu":
      return fused.splash_attention(query, key, value, q_segment_ids=q_segment_ids, kv_segment_ids=kv_segment_ids,
                                    is_causal=is_causal, scale=scale, spec=spec)
    return fused.cudnn_attention(query, key, value, q_segment_ids=q_segment_ids, kv_segment_ids=kv_segment_ids,
                                 is_causal=is_causal, scale=scale)
  if q_segment_ids is not None:
    segments = fused.segment_ids_mask(q_segment_ids, kv_segment_ids)
    mask = segments if mask is None else jnp.logical_and(mask, segments)
  if implementation == "xla":
    out, weights = xla_attention(query, key, value, mask=mask, bias=bias, is_causal=is_causal, scale=scale,
                                 dropout_rate=dropout_rate, dropout_rng=dropout_rng)
    return (out, weights) if return_weights else out
  if implementation == "blockwise":
    if return_weights:
      raise ValueError("return_weights=True needs the [B, N, T, S] weights, which implementation='blockwise' never "
                       "materialises; use implementation='xla'")
    seeds = dropout_seeds(dropout_rng) if dropout_rate > 0.0 else None
    return blockwise.blockwise_attention(query, key, value, mask=mask, bias=bias, is_causal=is_causal, scale=scale,
                                         dropout_rate=dropout_rate, dropout_seeds=seeds, block_q=block_q,
                                         block_kv=block_kv)
  raise ValueError(f"implementation must be one of {IMPLEMENTATIONS}, got {implementation!r}")
