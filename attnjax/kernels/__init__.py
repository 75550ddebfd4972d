"""Attention kernels: pure functions of JAX arrays (no Flax, no state, no I/O).

Layout: ``[B, T, N, H]`` for per-head queries, ``[B, S, N, H]`` for keys/values, ``[B, N, T, S]`` for logits,
masks and weights. Masks are boolean, True = attend.
"""

from attnjax.kernels.dot_product import scaled_dot_product_attention
from attnjax.kernels.masks import causal_mask, combine_masks, padding_mask, segment_mask
