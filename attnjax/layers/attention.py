"""Multi-head attention as a Flax module, with an explicit key/value cache (Vaswani et al. 2017, §3.2.2).

The parameter tree is exactly that of ``flax.linen.MultiHeadDotProductAttention`` (``query``/``key``/``value``:
``kernel [D, N, H]``, ``bias [N, H]``; ``out``: ``kernel [N, H, D]``, ``bias [D]``), annotated with the logical axis
names ``embed``, ``heads``, ``kv`` so that a mesh can shard heads by name. With ``relative="shaw"`` the layer also owns
the relative-position tables of Shaw et al. 2018 (``rel_key``/``rel_value``: ``[2K + 1, H]``, shared by all heads).

Caches are plain dicts passed in and returned, never Flax ``"cache"`` collections: beam search reorders them like
any other array, and one call may append many tokens (a prefill) as well as one.

* self-attention cache: ``{"key": [B, L, N, H], "value": [B, L, N, H]}`` plus the scalar position ``cache_index`` of
  the first new token, passed alongside; new keys/values are written at ``cache_index ... cache_index + T - 1`` and
  query t attends keys ``s <= cache_index + t`` (rows of a batch decode in lockstep).
* cross-attention cache: the projected memory ``{"key": [B, S, N, H], "value": [B, S, N, H]}`` from
  :meth:`MultiHeadAttention.project_kv`, computed once per source instead of once per decoded token.
"""

from __future__ import annotations

from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp

from attnjax import kernels

RELATIVE = (None, "shaw")


def _partitioned(init, names):
  return nn.with_logical_partitioning(init, names)


class MultiHeadAttention(nn.Module):
  """Multi-head scaled dot-product attention with Flax's parameter tree and an explicit cache.

  Attributes:
    num_heads: N.
    qkv_features: N·H (required: the head size must be known before the first call).
    out_features: output size (default qkv_features).
    dropout_rate: attention dropout on the weights (``deterministic=False`` draws from the ``"dropout"`` stream).
    use_bias: biases on the four projections.
    relative: None, or ``"shaw"`` for Shaw et al. 2018 relative positions (self-attention, ``implementation="xla"``).
    max_relative_distance: Shaw's clipping distance K.
    implementation: ``"xla"`` or ``"blockwise"`` (see :func:`attnjax.kernels.scaled_dot_product_attention`).
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
  implementation: str = "xla"
  dtype: Any = jnp.float32
  param_dtype: Any = jnp.float32
  kernel_init: Any = nn.initializers.xavier_uniform()

  def setup(self):
    if self.relative not in RELATIVE:
      raise ValueError(f"relative must be one of {RELATIVE}, got {self.relative!r}")
    if self.qkv_features is None or self.qkv_features % self.num_heads:
      raise ValueError(f"qkv_features must be set and divisible by num_heads={self.num_heads}, "
                       f"got {self.qkv_features}")
    head_dim = self.qkv_features // self.num_heads

    def dense(features, axis, kernel_names, bias_names):
      return nn.DenseGeneral(features=features, axis=axis, use_bias=self.use_bias, dtype=self.dtype,
                             param_dtype=self.param_dtype, kernel_init=_partitioned(self.kernel_init, kernel_names),
                             bias_init=_partitioned(nn.initializers.zeros_init(), bias_names))

    self.query, self.key, self.value = (dense((self.num_heads, head_dim), -1, ("embed", "heads", "kv"),
                                              ("heads", "kv")) for _ in range(3))
    self.out = dense(self.out_features or self.qkv_features, (-2, -1), ("heads", "kv", "embed"), ("embed",))
    if self.relative == "shaw":
      init = _partitioned(nn.initializers.normal(head_dim**-0.5), (None, "kv"))
      shape = (2 * self.max_relative_distance + 1, head_dim)
      self.rel_key = self.param("rel_key", init, shape, self.param_dtype)
      self.rel_value = self.param("rel_value", init, shape, self.param_dtype)

  def __call__(self, inputs_q, inputs_kv=None, *, mask=None, is_causal=False, kv_cache=None, cache_index=None,
               positions=None, deterministic=True, return_weights=False):
    """Attends from ``inputs_q [B, T, D]`` to ``inputs_kv [B, S, D]`` (default: self-attention).

    Args:
      inputs_q: ``[B, T, D]``.
      inputs_kv: ``[B, S, D]``; None for self-attention. Ignored for a cross-attention cache.
      mask: bool, broadcastable to ``[B, N, T, S]`` (or to ``[B, N, T, L]`` with a self-attention cache).
      is_causal: causal self-attention (without a cache; with one, causality is implied by ``cache_index``).
      kv_cache: a self-attention cache (with ``cache_index``) or a cross-attention cache (without); see the module
        docstring.
      cache_index: int32 scalar, position of ``inputs_q[:, 0]`` in the self-attention cache.
      positions: ``[B, T]`` token positions for relative attention in packed rows (positions restart per example);
        default ``arange(T)``. Self-attention without a cache only.
      deterministic: no dropout when True.
      return_weights: also return the attention weights ``[B, N, T, S]``.

    Returns:
      ``(out [B, T, out_features], new_kv_cache or None, weights or None)``.
    """
    query = self.query(inputs_q)
    t = inputs_q.shape[1]
    new_cache = None
    if kv_cache is not None and cache_index is None:  # cross-attention over a projected memory
      key, value = kv_cache["key"], kv_cache["value"]
      q_positions = kv_positions = None
    else:
      inputs_kv = inputs_q if inputs_kv is None else inputs_kv
      key, value = self.key(inputs_kv), self.value(inputs_kv)
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

    dropout_rng = None
    if self.dropout_rate > 0.0 and not deterministic:
      dropout_rng = self.make_rng("dropout")
    common = dict(mask=mask, is_causal=is_causal, dropout_rate=self.dropout_rate if dropout_rng is not None else 0.0,
                  dropout_rng=dropout_rng, return_weights=return_weights)
    if self.relative == "shaw":
      if q_positions is None:
        raise ValueError("relative='shaw' is for self-attention; a cross-attention cache has no relative positions")
      rel_key, rel_value = (kernels.shaw_relative_embeddings(table.astype(self.dtype), q_positions, kv_positions,
                                                             self.max_relative_distance)
                            for table in (self.rel_key, self.rel_value))
      result = kernels.relative_attention(query, key, value, rel_key=rel_key, rel_value=rel_value, **common)
    else:
      result = kernels.scaled_dot_product_attention(query, key, value, implementation=self.implementation, **common)
    out, weights = result if return_weights else (result, None)
    return self.out(out), new_cache, weights

  def project_kv(self, inputs_kv):
    """The cross-attention cache of a memory ``[B, S, D]``: ``{"key", "value"}: [B, S, N, H]``, computed once."""
    return {"key": self.key(inputs_kv), "value": self.value(inputs_kv)}
