"""Token embeddings (optionally tied to the output layer) and absolute positional encodings chosen by name.

Vaswani et al. 2017 §3.4 share one matrix between the source embedding, the target embedding and the pre-softmax
projection (with a shared source/target vocabulary), and multiply embeddings by sqrt(d_model). §3.5 adds sinusoidal
position encodings; the paper found learned positions "nearly identical" (Table 3, row E). Relative positions
(Shaw et al. 2018) live inside the attention layers instead (see :class:`attnjax.layers.attention.MultiHeadAttention`),
so here ``"relative"`` adds nothing, and neither does ``"t5"`` (Raffel et al. 2020's bucketed relative bias, also in
the attention layers).
"""

from __future__ import annotations

import math
from typing import Any

import flax.linen as nn
import jax.numpy as jnp

from attnjax import kernels
from attnjax.kernels.common import accumulation_dtype

POSITIONAL_ENCODINGS = ("sinusoidal", "learned", "relative", "t5")


class TokenEmbedding(nn.Module):
  """``ids [B, L] -> [B, L, D]`` (times sqrt(D) when ``scale``), and ``attend(x) = x Eᵀ`` for tied output logits."""
  vocab_size: int
  features: int
  scale: bool = True
  dtype: Any = jnp.float32
  param_dtype: Any = jnp.float32

  def setup(self):
    # std D^-1/2, so that the sqrt(D)-scaled embedding starts at unit variance and a tied output layer starts small
    init = nn.with_logical_partitioning(nn.initializers.normal(self.features**-0.5), ("vocab", "embed"))
    self.embedding = self.param("embedding", init, (self.vocab_size, self.features), self.param_dtype)

  def __call__(self, ids):
    x = jnp.take(self.embedding, ids, axis=0).astype(self.dtype)
    return x * jnp.asarray(math.sqrt(self.features), self.dtype) if self.scale else x

  def attend(self, x):
    """Logits ``[B, T, V]`` = ``x [B, T, D] @ Eᵀ``, in float32 (float64 for float64 inputs)."""
    return jnp.einsum("btd,vd->btv", x, self.embedding.astype(x.dtype), preferred_element_type=accumulation_dtype(x))


class PositionalEncoding(nn.Module):
  """Absolute position encodings by name: ``"sinusoidal"``, ``"learned"`` (up to ``max_length``) or ``"relative"``.

  ``__call__(positions [L] or [B, L]) -> [L, D] / [B, L, D]``, or None for ``"relative"`` (nothing to add).
  """
  kind: str
  features: int
  max_length: int = 1024
  dtype: Any = jnp.float32
  param_dtype: Any = jnp.float32

  def setup(self):
    if self.kind not in POSITIONAL_ENCODINGS:
      raise ValueError(f"positional encoding must be one of {POSITIONAL_ENCODINGS}, got {self.kind!r}")
    if self.kind == "learned":
      init = nn.with_logical_partitioning(nn.initializers.normal(0.02), (None, "embed"))
      self.table = self.param("position_embedding", init, (self.max_length, self.features), self.param_dtype)

  def __call__(self, positions):
    if self.kind in ("relative", "t5"):  # positions enter the attention logits instead
      return None
    if self.kind == "learned":
      return jnp.take(self.table, positions, axis=0).astype(self.dtype)
    angles = accumulation_dtype(self.dtype)  # float32 for half precision, float64 for float64
    return kernels.sinusoidal_positions(0, self.features, positions=positions, dtype=angles).astype(self.dtype)
