"""Attention kernels: pure functions of JAX arrays (no Flax, no state, no I/O).

Layout: ``[B, T, N, H]`` for per-head queries, ``[B, S, N, H]`` for keys/values, ``[B, N, T, S]`` for logits,
masks and weights. Masks are boolean, True = attend.
"""

from attnjax.kernels.common import RelativeTable
from attnjax.kernels.additive import additive_attention, additive_scores
from attnjax.kernels.dot_product import projected_memory_attention, scaled_dot_product_attention
from attnjax.kernels.fused import segment_ids_mask
from attnjax.kernels.linear import linear_attention
from attnjax.kernels.local import local_attention
from attnjax.kernels.masks import causal_mask, combine_masks, padding_mask, segment_mask
from attnjax.kernels.multihead import attend_heads, combine_heads, multi_head_attention, project_heads
from attnjax.kernels.multiplicative import luong_scores, multiplicative_attention
from attnjax.kernels.positions import (relative_attention, relative_position_ids, shaw_relative_embeddings,
                                       shaw_relative_table, sinusoidal_positions, t5_relative_bias,
                                       t5_relative_position_bucket)

__all__ = [
    "additive_attention", "additive_scores", "attend_heads", "causal_mask", "combine_heads", "combine_masks",
    "linear_attention", "local_attention", "luong_scores", "multi_head_attention", "multiplicative_attention",
    "padding_mask", "project_heads", "projected_memory_attention", "relative_attention", "relative_position_ids",
    "RelativeTable", "scaled_dot_product_attention", "segment_ids_mask", "segment_mask", "shaw_relative_embeddings",
    "shaw_relative_table", "sinusoidal_positions", "t5_relative_bias", "t5_relative_position_bucket",
]
