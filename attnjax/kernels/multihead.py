"""Multi-head attention (Vaswani et al. 2017, §3.2.2) over a parameter tree shaped like Flax's.

    MultiHead(Q, K, V) = Concat(head_1, ..., head_N) W^O,   head_i = Attention(Q W^Q_i, K W^K_i, V W^V_i)

The parameters are exactly the tree of ``flax.linen.MultiHeadDotProductAttention``::

    {"query": {"kernel": [D, N, H], "bias": [N, H]}, "key": {...}, "value": {...},
     "out": {"kernel": [N, H, D], "bias": [D]}}

so weights move between the two unchanged. Keeping the head axis explicit in the kernels (rather than one [D, D]
matrix) is what lets a mesh shard heads by name.
"""

from __future__ import annotations

import jax.numpy as jnp

from attnjax.kernels.dot_product import scaled_dot_product_attention
from attnjax.kernels.positions import relative_attention

_PROJECTIONS = ("query", "key", "value")


def project_heads(x, dense):
  """``[B, L, D] @ kernel[D, N, H] + bias[N, H]`` → ``[B, L, N, H]``; ``bias`` may be absent."""
  y = jnp.einsum("bld,dnh->blnh", x, dense["kernel"].astype(x.dtype))
  if dense.get("bias") is not None:
    y = y + dense["bias"].astype(y.dtype)
  return y


def combine_heads(x, dense):
  """``[B, T, N, H] @ kernel[N, H, D] + bias[D]`` → ``[B, T, D]``."""
  y = jnp.einsum("btnh,nhd->btd", x, dense["kernel"].astype(x.dtype))
  if dense.get("bias") is not None:
    y = y + dense["bias"].astype(y.dtype)
  return y


def check_params(params, num_heads: int, d_q: int, d_kv: int) -> None:
  """Raises a ValueError naming the parameter whose shape does not fit."""
  for name in _PROJECTIONS + ("out",):
    if name not in params or "kernel" not in params[name]:
      raise ValueError(f"params must hold {name}/kernel (the flax MultiHeadDotProductAttention tree); "
                       f"got keys {sorted(params)}")
  for name in _PROJECTIONS:
    kernel = params[name]["kernel"]
    d_in = d_q if name == "query" else d_kv
    if kernel.ndim != 3 or kernel.shape[0] != d_in or kernel.shape[1] != num_heads:
      raise ValueError(f"params['{name}']['kernel'] must be [D={d_in}, N={num_heads}, H], got {kernel.shape}")
  if params["out"]["kernel"].ndim != 3 or params["out"]["kernel"].shape[0] != num_heads:
    raise ValueError(f"params['out']['kernel'] must be [N={num_heads}, H, D], got {params['out']['kernel'].shape}")


def attend_heads(q, k, v, *, mask=None, bias=None, is_causal=False, dropout_rate=0.0, dropout_rng=None,
                 implementation="xla", return_weights=False, rel_key=None, rel_value=None, q_segment_ids=None,
                 kv_segment_ids=None, spec=None):
  """The heads' attention between the projections: ``q [B, T, N, H]``, ``k, v [B, S, N, H]`` → ``[B, T, N, H]``.

  Scaled dot-product attention by ``implementation`` (with ``q/kv_segment_ids`` and the mesh ``spec`` of
  :func:`attnjax.kernels.scaled_dot_product_attention`), or, given Shaw et al.'s ``rel_key``/``rel_value``,
  :func:`attnjax.kernels.relative_attention` (which needs the logits, so ``implementation="xla"``). Shared by
  :func:`multi_head_attention` and the layer :class:`attnjax.layers.attention.MultiHeadAttention`, which adds a cache.
  """
  common = dict(mask=mask, bias=bias, is_causal=is_causal, dropout_rate=dropout_rate, dropout_rng=dropout_rng,
                return_weights=return_weights)
  if rel_key is None and rel_value is None:
    return scaled_dot_product_attention(q, k, v, implementation=implementation, q_segment_ids=q_segment_ids,
                                        kv_segment_ids=kv_segment_ids, spec=spec, **common)
  if q_segment_ids is not None:
    raise ValueError("relative attention takes a mask, not q/kv_segment_ids (see attnjax.kernels.segment_ids_mask)")
  if implementation != "xla":
    raise ValueError(f"relative positions (rel_key/rel_value) need implementation='xla', got {implementation!r}")
  if rel_key is None:
    raise ValueError("rel_value given without rel_key")
  return relative_attention(q, k, v, rel_key=rel_key, rel_value=rel_value, **common)


def multi_head_attention(inputs_q, inputs_kv, params, *, num_heads, mask=None, bias=None, is_causal=False,
                         dropout_rate=0.0, dropout_rng=None, implementation="xla", return_weights=False,
                         rel_key=None, rel_value=None):
  """Multi-head attention, Vaswani et al. 2017 §3.2.2, with Flax's parameter tree.

  Args:
    inputs_q: ``[B, T, D]``.
    inputs_kv: ``[B, S, D]``; None for self-attention (``inputs_q``).
    params: the ``flax.linen.MultiHeadDotProductAttention`` tree (see the module docstring).
    num_heads: N; must equal the head axis of the kernels.
    mask, bias, is_causal, dropout_rate, dropout_rng, implementation, return_weights: as
      :func:`attnjax.kernels.scaled_dot_product_attention`.
    rel_key, rel_value: Shaw et al. 2018 relative-position embeddings ``[T, S, H]`` (or ``[B, T, S, H]``) from
      :func:`attnjax.kernels.shaw_relative_embeddings` (or factored, :func:`attnjax.kernels.shaw_relative_table`);
      when given, attention runs through :func:`attnjax.kernels.relative_attention` (the ``"xla"`` path).

  Returns:
    ``out [B, T, D]``, or ``(out, weights [B, N, T, S])`` with ``return_weights``.
  """
  inputs_kv = inputs_q if inputs_kv is None else inputs_kv
  if inputs_q.ndim != 3 or inputs_kv.ndim != 3:
    raise ValueError(f"inputs_q and inputs_kv must be [B, L, D], got {inputs_q.shape} and {inputs_kv.shape}")
  check_params(params, num_heads, inputs_q.shape[-1], inputs_kv.shape[-1])
  q, k, v = (project_heads(x, params[name]) for name, x in zip(_PROJECTIONS, (inputs_q, inputs_kv, inputs_kv)))
  result = attend_heads(q, k, v, mask=mask, bias=bias, is_causal=is_causal, dropout_rate=dropout_rate,
                        dropout_rng=dropout_rng, implementation=implementation, return_weights=return_weights,
                        rel_key=rel_key, rel_value=rel_value)
  out, weights = result if return_weights else (result, None)
  out = combine_heads(out, params["out"])
  return (out, weights) if return_weights else out
