"""Multi-head attention as a Flax module, with an explicit key/value cache (Vaswani et al. 2017, §3.2.2).

The parameter tree is exactly that of ``flax.linen.MultiHeadDotProductAttention`` (``query``/``key``/``value``:
``kernel [D, N, H]``, ``bias [N, H]``; ``out``: ``kernel [N, H, D]``, ``bias [D]``), annotated with the logical axis
names ``embed``, ``heads``, ``kv`` so that a mesh can shard heads by name. With ``relative="shaw"`` the layer also owns
the relative-position tables of Shaw et al. 2018 (``rel_key``/``rel_value``: ``[2K + 1, H]``, shared by all heads);
with ``relative="t5"`` the bucketed relative bias of Raffel et al. 2020 (``rel_bias``: ``[num_buckets, N]``, one
scalar per bucket and head, added to the logits; bidirectional buckets in an encoder, causal ones in a decoder).

``attention_type`` picks the self-attention pattern: ``"full"`` (softmax over every key), ``"local"`` (a sliding
window of ``window`` keys on each side, or the past ``window`` keys when causal: :func:`attnjax.kernels.local_attention`)
or ``"linear"`` (Katharopoulos et al. 2020: :func:`attnjax.kernels.linear_attention`). With a cache (step-by-step
decoding) both are computed over the cached buffer with the same band / feature map, so cached decoding equals
teacher forcing. Cross-attention is always full.

Caches are plain dicts passed in and returned, never Flax ``"cache"`` collections: beam search reorders them like
any other array, and one call may append many tokens (a prefill) as well as one.

* self-attention cache: ``{"key": [B, L, N, H], "value": [B, L, N, H]}`` plus the scalar position ``cache_index`` of
  the first new token, passed alongside; new keys/values are written at ``cache_index ... cache_index + T - 1`` and
  query t attends keys ``s <= cache_index + t`` (rows of a batch decode in lockstep). Full attention without
  relative positions keeps it as ``{"key_t": [B, N, H, L], "value_t": [B, N, H, L]}`` instead
  (:meth:`MultiHeadAttention.init_self_cache` gives each layer its layout): in ``[B, L, N, H]``, XLA's CPU program
  copied the whole buffer into the products' layout at every decoded token (30% of a beam search's op time at the
  date task's shapes, ``python -m benchmarks.op_profile --what=search``), as it did the cross-attention cache below.
* cross-attention cache: the projected memory ``{"key": [B, N, H, S], "value": [B, N, H, S]}`` from
  :meth:`MultiHeadAttention.project_kv`, computed once per source instead of once per decoded token. It is kept in
  the layout of the products that read it (per batch row and head, an ``[H, S]`` matrix): in the attention's own
  ``[B, S, N, H]`` layout, XLA's CPU program transposed all of it at every decoded token (47% of beam search's op
  time at the summarization study's shapes, ``benchmarks.op_profile``-style trace), because the loop does not see
  that the cache never changes. :func:`attnjax.kernels.projected_memory_attention` reads it as it lies.
"""

from __future__ import annotations

from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from attnjax import kernels

RELATIVE = (None, "shaw", "t5")
ATTENTION_TYPES = ("full", "local", "linear")


def _partitioned(init, names):
  return nn.with_logical_partitioning(init, names)


def _flat_init(init, n_in: int):
  """``init`` applied to the 2-D matrix ``[prod(shape[:n_in]), prod(shape[n_in:])]`` and reshaped, as
  ``nn.DenseGeneral`` does: fan-in and fan-out are those of the flattened projection, and the values equal a
  DenseGeneral's drawn from the same key."""
  def wrapped(key, shape, dtype=jnp.float32):
    flat = (int(np.prod(shape[:n_in])), int(np.prod(shape[n_in:])))
    return jnp.reshape(init(key, flat, dtype), shape)
  return wrapped


class HeadProjection(nn.Module):
  """The parameters of one projection of multi-head attention, ``kernel`` (shape ``in_shape + out_shape``) and
  ``bias`` (``out_shape``), with logical axis names; ``projection(in_shape)`` returns them as the dict the kernels
  take (:func:`attnjax.kernels.project_heads` / :func:`attnjax.kernels.combine_heads`). The arithmetic lives in the
  kernels, so the layer and :func:`attnjax.kernels.multi_head_attention` are one implementation."""
  out_shape: tuple
  kernel_names: tuple
  bias_names: tuple
  use_bias: bool = True
  param_dtype: Any = jnp.float32
  kernel_init: Any = nn.initializers.xavier_uniform()

  @nn.compact
  def __call__(self, in_shape: tuple):
    kernel = self.param("kernel", _partitioned(_flat_init(self.kernel_init, len(in_shape)), self.kernel_names),
                        tuple(in_shape) + tuple(self.out_shape), self.param_dtype)
    bias = None
    if self.use_bias:
      bias = self.param("bias", _partitioned(_flat_init(nn.initializers.zeros_init(), 0), self.bias_names),
                        self.out_shape, self.param_dtype)
    return {"kernel": kernel, "bias": bias}


class MultiHeadAttention(nn.Module):
  """Multi-head scaled dot-product attention with Flax's parameter tree and an explicit cache.

  Attributes:
    num_heads: N.
    qkv_features: N·H (required: the head size must be known before the first call).
    out_features: output size (default qkv_features).
    dropout_rate: attention dropout on the weights (``deterministic=False`` draws from the ``"dropout"`` stream).
    use_bias: biases on the four projections.
    relative: None, ``"shaw"`` for Shaw et al. 2018 relative positions or ``"t5"`` for T5's bucketed relative bias
      (self-attention, ``implementation="xla"``).
    max_relative_distance: Shaw's clipping distance K.
    bidirectional: T5 buckets for both directions (encoder) or for the past only (causal decoder).
    t5_num_buckets, t5_max_distance: T5's 32 buckets and 128 positions.
    attention_type: ``"full"``, ``"local"`` or ``"linear"`` (see the module docstring).
    window: the local attention's half-width (past extent when causal).
    implementation: ``"auto"`` (the platform's fused kernel where it applies: Pallas splash attention on TPU, cuDNN
      on GPU; on CPU the faster of ``"xla"`` and ``"blockwise"``), ``"xla"``, ``"blockwise"``, ``"pallas_tpu"`` or
      ``"cudnn"`` (see :func:`attnjax.kernels.scaled_dot_product_attention`). Relative positions, local and linear
      attention and cached self-attention always run their own ``"xla"`` kernels.
    dtype: computation dtype (e.g. bfloat16); the softmax stays float32.
    param_dtype: parameter dtype.
  """
  num_heads: int
  qkv_features: int | None = None
  out_features: int | None = None
  dropout_rate: float = 0.0
  use_bias: bool = True
  relative: str | None = None
  max_relative_distance: int = 16
  bidirectional: bool = True
  t5_num_buckets: int = 32
  t5_max_distance: int = 128
  attention_type: str = "full"
  window: int = 64
  implementation: str = "auto"
  dtype: Any = jnp.float32
  param_dtype: Any = jnp.float32
  kernel_init: Any = nn.initializers.xavier_uniform()

  def setup(self):
    if self.relative not in RELATIVE:
      raise ValueError(f"relative must be one of {RELATIVE}, got {self.relative!r}")
    if self.attention_type not in ATTENTION_TYPES:
      raise ValueError(f"attention_type must be one of {ATTENTION_TYPES}, got {self.attention_type!r}")
    if self.attention_type != "full" and (self.relative or self.dropout_rate):
      raise ValueError(f"attention_type={self.attention_type!r} takes neither relative positions ({self.relative!r}) "
                       f"nor attention dropout ({self.dropout_rate}): its kernel has no logits to bias or weights to "
                       "drop")
    if self.qkv_features is None or self.qkv_features % self.num_heads:
      raise ValueError(f"qkv_features must be set and divisible by num_heads={self.num_heads}, "
                       f"got {self.qkv_features}")
    head_dim = self.qkv_features // self.num_heads
    heads = (self.num_heads, head_dim)

    def projection(out_shape, kernel_names, bias_names):
      return HeadProjection(out_shape, kernel_names, bias_names, use_bias=self.use_bias,
                            param_dtype=self.param_dtype, kernel_init=self.kernel_init)

    self.query, self.key, self.value = (projection(heads, ("embed", "heads", "kv"), ("heads", "kv"))
                                        for _ in range(3))
    self.out = projection((self.out_features or self.qkv_features,), ("heads", "kv", "embed"), ("embed",))
    self.heads = heads
    if self.relative == "shaw":
      init = _partitioned(nn.initializers.normal(head_dim**-0.5), (None, "kv"))
      shape = (2 * self.max_relative_distance + 1, head_dim)
      self.rel_key = self.param("rel_key", init, shape, self.param_dtype)
      self.rel_value = self.param("rel_value", init, shape, self.param_dtype)
    if self.relative == "t5":
      init = _partitioned(nn.initializers.normal(1.0), (None, "heads"))
      self.rel_bias = self.param("rel_bias", init, (self.t5_num_buckets, self.num_heads), self.param_dtype)

  def _project(self, projection, x):
    """``x [B, L, D]`` → ``[B, L, N, H]`` by :func:`attnjax.kernels.project_heads`, computed in ``dtype``."""
    return kernels.project_heads(x.astype(self.dtype), projection(x.shape[-1:]))

  def _combine(self, x):
    """``x [B, T, N, H]`` → ``[B, T, out_features]`` by :func:`attnjax.kernels.combine_heads`."""
    return kernels.combine_heads(x.astype(self.dtype), self.out(self.heads))

  def __call__(self, inputs_q, inputs_kv=None, *, mask=None, segment_ids=None, is_causal=False, kv_cache=None,
               cache_index=None, positions=None, deterministic=True, return_weights=False):
    """Attends from ``inputs_q [B, T, D]`` to ``inputs_kv [B, S, D]`` (default: self-attention).

    Args:
      inputs_q: ``[B, T, D]``.
      inputs_kv: ``[B, S, D]``; None for self-attention. Ignored for a cross-attention cache.
      mask: bool, broadcastable to ``[B, N, T, S]`` (or to ``[B, N, T, L]`` with a self-attention cache).
      segment_ids: ``(q_segment_ids [B, T], kv_segment_ids [B, S])`` int, anded with ``mask``: query t attends key
        s iff ``kv[s] != 0`` and ``q[t] == kv[s]`` (packing: the segment ids on both sides). Key padding alone is
        ``(None, key_mask)``: every query attends the real keys. The form the fused kernels take, so prefer it to
        an equivalent mask.
      is_causal: causal self-attention (without a cache; with one, causality is implied by ``cache_index``).
      kv_cache: a self-attention cache (with ``cache_index``) or a cross-attention cache (without); see the module
        docstring. A cross-attention cache may hold B rows for B·K query rows (beam search: see
        ``_attend_projected_memory``).
      cache_index: int32 scalar, position of ``inputs_q[:, 0]`` in the self-attention cache.
      positions: ``[B, T]`` token positions for relative attention in packed rows (positions restart per example);
        default ``arange(T)``. Self-attention without a cache only.
      deterministic: no dropout when True.
      return_weights: also return the attention weights ``[B, N, T, S]``.

    Returns:
      ``(out [B, T, out_features], new_kv_cache or None, weights or None)``.
    """
    query = self._project(self.query, inputs_q)
    t = inputs_q.shape[1]
    new_cache = None
    if kv_cache is not None and cache_index is not None and "key_t" in kv_cache:
      return self._attend_own_cache(query, inputs_q, kv_cache, cache_index, mask, segment_ids, deterministic,
                                    return_weights)
    if kv_cache is not None and cache_index is None:  # cross-attention over a projected memory [B, N, H, S]
      if self.attention_type == "full" and not self.relative:
        return self._attend_projected_memory(query, kv_cache, mask, segment_ids, deterministic, return_weights)
      key, value = (jnp.transpose(kv_cache[name], (0, 3, 1, 2)) for name in ("key", "value"))
      q_positions = kv_positions = None
    else:
      inputs_kv = inputs_q if inputs_kv is None else inputs_kv
      key, value = self._project(self.key, inputs_kv), self._project(self.value, inputs_kv)
      q_positions, kv_positions = jnp.arange(t), jnp.arange(key.shape[1])
      if positions is not None:
        q_positions = kv_positions = positions
      if kv_cache is not None:  # self-attention: append T new positions at cache_index
        key = jax.lax.dynamic_update_slice_in_dim(kv_cache["key"], key.astype(kv_cache["key"].dtype), cache_index, 1)
        value = jax.lax.dynamic_update_slice_in_dim(kv_cache["value"], value.astype(kv_cache["value"].dtype),
                                                    cache_index, 1)
        new_cache = {"key": key, "value": value}
        q_positions = cache_index + jnp.arange(t)
        kv_positions = jnp.arange(key.shape[1])
        # query t sees the prefix and itself; the not-yet-written tail of the buffer stays masked
        causal = (kv_positions[None, :] <= q_positions[:, None])[None, None]
        mask = causal if mask is None else jnp.logical_and(mask, causal)
        is_causal = False

    q_segments = kv_segments = None
    if segment_ids is not None:
      q_segments, kv_segments = segment_ids
      if (kv_cache is not None and cache_index is not None) or self.relative or self.attention_type != "full":
        # the paths that take a mask only: key padding stays [B, 1, 1, S] (what local and linear attention take)
        segments = ((kv_segments != 0)[:, None, None, :] if q_segments is None
                    else kernels.segment_ids_mask(q_segments, kv_segments))
        mask = segments if mask is None else jnp.logical_and(mask, segments)
        q_segments = kv_segments = None
      elif q_segments is None:
        q_segments = jnp.ones(inputs_q.shape[:2], jnp.int32)
    dropout_rng = None
    if self.dropout_rate > 0.0 and not deterministic:
      dropout_rng = self.make_rng("dropout")
    common = dict(mask=mask, is_causal=is_causal, dropout_rate=self.dropout_rate if dropout_rng is not None else 0.0,
                  dropout_rng=dropout_rng, return_weights=return_weights)
    if self.attention_type != "full":
      out = self._local_or_linear(query, key, value, mask, is_causal, q_positions, kv_positions, kv_cache is not None)
      return self._combine(out), new_cache, None
    if self.relative == "t5":
      if q_positions is None:
        raise ValueError("relative='t5' is for self-attention; a cross-attention cache has no relative positions")
      common["bias"] = kernels.t5_relative_bias(self.rel_bias.astype(jnp.float32), q_positions, kv_positions,
                                                bidirectional=self.bidirectional, max_distance=self.t5_max_distance)
      result = kernels.attend_heads(query, key, value, **common)
    elif self.relative == "shaw":
      if q_positions is None:
        raise ValueError("relative='shaw' is for self-attention; a cross-attention cache has no relative positions")
      rel_key, rel_value = (kernels.shaw_relative_table(table.astype(self.dtype), q_positions, kv_positions,
                                                        self.max_relative_distance)
                            for table in (self.rel_key, self.rel_value))
      result = kernels.attend_heads(query, key, value, rel_key=rel_key, rel_value=rel_value, **common)
    else:
      result = kernels.attend_heads(query, key, value, implementation=self.implementation,
                                    q_segment_ids=q_segments, kv_segment_ids=kv_segments,
                                    spec=nn.logical_to_mesh_axes(("batch", "length", "heads", "kv")), **common)
    out, weights = result if return_weights else (result, None)
    return self._combine(out), new_cache, weights

  def init_self_cache(self, batch: int, max_length: int):
    """An empty self-attention cache of ``max_length`` positions in the layout this layer reads as it lies (see the
    module docstring): ``key_t`` / ``value_t`` ``[B, N, H, L]`` for full attention without relative positions, else
    ``key`` / ``value`` ``[B, L, N, H]``."""
    n, h = self.num_heads, self.qkv_features // self.num_heads
    if self.attention_type == "full" and not self.relative:
      zeros = jnp.zeros((batch, n, h, max_length), self.dtype)
      return {"key_t": zeros, "value_t": zeros}
    zeros = jnp.zeros((batch, max_length, n, h), self.dtype)
    return {"key": zeros, "value": zeros}

  def _attend_own_cache(self, query, inputs, kv_cache, cache_index, mask, segment_ids, deterministic, return_weights):
    """Self-attention over a ``key_t`` / ``value_t`` cache: the T new positions written at ``cache_index`` (each
    ``[B, N, H, T]``, a small transpose), then :func:`attnjax.kernels.projected_memory_attention` over the buffer as
    it lies, query t seeing the keys ``s <= cache_index + t``."""
    if self.attention_type != "full" or self.relative:
      raise ValueError(f"a key_t / value_t cache is for full attention without relative positions, not "
                       f"attention_type={self.attention_type!r}, relative={self.relative!r}")
    new = {}
    for name, projection in (("key_t", self.key), ("value_t", self.value)):
      x = jnp.transpose(self._project(projection, inputs), (0, 2, 3, 1))  # [B, N, H, T]
      new[name] = jax.lax.dynamic_update_slice_in_dim(kv_cache[name], x.astype(kv_cache[name].dtype), cache_index, 3)
    t, length = inputs.shape[1], kv_cache["key_t"].shape[-1]
    causal = (jnp.arange(length)[None, :] <= (cache_index + jnp.arange(t))[:, None])[None, None]
    mask = causal if mask is None else jnp.logical_and(mask, causal)
    if segment_ids is not None:
      q_segments, kv_segments = segment_ids
      segments = ((kv_segments != 0)[:, None, None, :] if q_segments is None
                  else kernels.segment_ids_mask(q_segments, kv_segments))
      mask = jnp.logical_and(mask, segments)
    dropout = self.dropout_rate > 0.0 and not deterministic
    out, weights = kernels.projected_memory_attention(
        query, new["key_t"], new["value_t"], mask=mask, dropout_rate=self.dropout_rate if dropout else 0.0,
        dropout_rng=self.make_rng("dropout") if dropout else None)
    return self._combine(out), new, weights if return_weights else None

  def _attend_projected_memory(self, query, kv_cache, mask, segment_ids, deterministic, return_weights):
    """Cross-attention over the cache of :meth:`project_kv` in its own layout (no transpose of it per call).

    The cache may hold fewer rows than the queries: beam search keeps one row per source for its K beams (query
    rows ``b·K .. b·K + K - 1`` are source b's). Each row's K beams then attend as K·T queries of one row, so
    that every step reads a source's keys and values once, not once per beam."""
    rows, beams = kv_cache["key"].shape[0], query.shape[0] // kv_cache["key"].shape[0]
    if beams * rows != query.shape[0]:
      raise ValueError(f"a cross-attention cache of {rows} rows serves a multiple of {rows} query rows, got "
                       f"{query.shape[0]}")
    if beams > 1:
      return self._attend_folded_beams(query, kv_cache, mask, segment_ids, deterministic, return_weights, beams)
    if segment_ids is not None:
      q_segments, kv_segments = segment_ids
      segments = ((kv_segments != 0)[:, None, None, :] if q_segments is None
                  else kernels.segment_ids_mask(q_segments, kv_segments))
      mask = segments if mask is None else jnp.logical_and(mask, segments)
    dropout = self.dropout_rate > 0.0 and not deterministic
    out, weights = kernels.projected_memory_attention(
        query, kv_cache["key"], kv_cache["value"], mask=mask, dropout_rate=self.dropout_rate if dropout else 0.0,
        dropout_rng=self.make_rng("dropout") if dropout else None)
    return self._combine(out), None, weights if return_weights else None

  def _attend_folded_beams(self, query, kv_cache, mask, segment_ids, deterministic, return_weights, beams):
    """:meth:`_attend_projected_memory` with the K = ``beams`` query rows of each cache row folded into its query
    positions, and unfolded after."""
    rows, t = kv_cache["key"].shape[0], query.shape[1]
    fold = lambda x: x.reshape(rows, beams * t, *x.shape[2:])  # [B·K, T, ...] -> [B, K·T, ...]
    if segment_ids is not None:
      q_segments, kv_segments = segment_ids
      kv_segments = kv_segments.reshape(rows, beams, -1)[:, 0]  # a row's beams share their source
      segment_ids = (None if q_segments is None else fold(q_segments), kv_segments)
    if mask is not None:  # [B·K | 1, N | 1, T | 1, S | 1] -> [B | 1, N | 1, K·T, S]
      mask = jnp.reshape(mask, (1,) * (4 - mask.ndim) + mask.shape)
      mask = jnp.broadcast_to(mask, (mask.shape[0], mask.shape[1], t, kv_cache["key"].shape[-1]))
      if mask.shape[0] == 1:
        mask = jnp.tile(mask, (1, 1, beams, 1))
      else:
        mask = jnp.moveaxis(mask.reshape(rows, beams, *mask.shape[1:]), 1, 2)
        mask = mask.reshape(rows, mask.shape[1], beams * t, mask.shape[-1])
    out, _, weights = self._attend_projected_memory(fold(query), kv_cache, mask, segment_ids, deterministic,
                                                    return_weights)
    out = out.reshape(rows * beams, t, out.shape[-1])
    if weights is not None:  # [B, N, K·T, S] -> [B·K, N, T, S]
      weights = jnp.moveaxis(weights.reshape(rows, weights.shape[1], beams, t, -1), 2, 1)
      weights = weights.reshape(rows * beams, weights.shape[2], t, weights.shape[-1])
    return out, None, weights

  def _local_or_linear(self, query, key, value, mask, is_causal, q_positions, kv_positions, cached):
    """Local or linear self-attention ``[B, T, N, H]``. Without a cache through the kernels (linear in T); with one,
    exactly the same function over the cached buffer (one query at a time is cheap either way)."""
    if q_positions is None:
      raise ValueError(f"attention_type={self.attention_type!r} is for self-attention")
    if mask is not None and not cached and mask.shape[-2] != 1:
      raise ValueError(f"attention_type={self.attention_type!r} takes a key padding mask [B, 1, 1, S], not a "
                       f"per-query mask of shape {mask.shape} (packed rows need attention_type='full')")
    kv_valid = None if mask is None else jnp.any(mask, axis=(1, 2)) if not cached else None
    if not cached:
      if self.attention_type == "local":
        return kernels.local_attention(query, key, value, window=self.window, is_causal=is_causal,
                                       kv_valid=kv_valid)
      return kernels.linear_attention(query, key, value, is_causal=is_causal, kv_valid=kv_valid)
    visible = mask  # [B|1, 1, T, L]: causal and the written part of the buffer (see __call__)
    if self.attention_type == "local":
      band = (kv_positions[None, :] >= q_positions[:, None] - self.window)[None, None]
      return kernels.scaled_dot_product_attention(query, key, value, mask=jnp.logical_and(visible, band),
                                                  implementation="xla")
    # linear: out_t = phi(q_t)^T sum_{j visible} phi(k_j) v_j^T / (phi(q_t)^T sum_{j visible} phi(k_j) + eps)
    phi = lambda x: jax.nn.elu(x.astype(jnp.float32)) + 1.0
    scores = jnp.einsum("btnh,blnh->bntl", phi(query), phi(key)) * visible.astype(jnp.float32)
    numerator = jnp.einsum("bntl,blnh->btnh", scores, value.astype(jnp.float32))
    denominator = jnp.moveaxis(jnp.sum(scores, axis=-1), 1, 2)[..., None]  # [B, T, N, 1]
    return (numerator / (denominator + 1e-6)).astype(query.dtype)

  def project_kv(self, inputs_kv):
    """The cross-attention cache of a memory ``[B, S, D]``: ``{"key", "value"}: [B, N, H, S]``, computed once (the
    products' layout: see the module docstring)."""
    return {name: jnp.transpose(self._project(dense, inputs_kv), (0, 2, 3, 1))
            for name, dense in (("key", self.key), ("value", self.value))}
