"""A decoder-only Transformer language model (GPT-2 style: Radford et al. 2019)::

    h₀ = s·E[x] + P[positions]                                   token embeddings (and absolute positions, by name);
                                                                 s = √D with sinusoidal positions, else 1
    h ← h + Dropout(CausalSelfAttention(LayerNorm(h)))           pre-norm, each token attends itself and the past
    h ← h + Dropout(FFN(LayerNorm(h)))                           FFN with GELU (tanh form, GPT-2's)
    logits = LayerNorm(h) Eᵀ                                     the output matrix tied to the input embeddings

The layers are the project's: :class:`attnjax.models.transformer.LayerConfig`'s attention (the same kernels and
logical axes) and feed-forward blocks, and positions chosen by name as in the encoder-decoder (``sinusoidal``,
``learned``, ``relative`` (Shaw et al.) or ``t5``). Documents packed into one row keep apart: ``segment_ids`` (one
id per document, 0 on padding) restrict attention to the same document and ``positions`` restart in each.
``init_cache`` / ``decode`` continue a prefix one or more tokens at a time for generation (:mod:`attnjax.generate`).
"""

from __future__ import annotations

from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp

from attnjax.kernels.common import accumulation_dtype
from attnjax.layers.dropout import DROPOUT_BITS, Dropout
from attnjax.layers.embedding import POSITIONAL_ENCODINGS, PositionalEncoding, TokenEmbedding
from attnjax.models.transformer import LayerConfig, _layer_norm, check_vocab_map, mapped_logits
from attnjax.tokens import VocabularyMap


class LMLayer(nn.Module):
  """Causal self-attention and FFN, each a pre-norm residual block. Returns ``(x, new cache)``."""
  config: LayerConfig

  def setup(self):
    cfg = self.config
    self.self_attention = cfg.attention("self_attention", cfg.relative, causal=True)
    self.ffn = cfg.ffn()
    self.attention_block = cfg.sublayer("attention_block")
    self.ffn_block = cfg.sublayer("ffn_block")

  def __call__(self, x, *, segments=None, positions=None, cache=None, cache_index=None, deterministic=True):
    det = deterministic
    x, new_cache, _ = self.attention_block(
        x, lambda h: self.self_attention(h, segment_ids=segments, is_causal=cache is None, kv_cache=cache,
                                         cache_index=cache_index, positions=positions, deterministic=det),
        deterministic=det)
    x, = self.ffn_block(x, lambda h: (self.ffn(h, deterministic=det),), deterministic=det)
    return x, new_cache


class DecoderLM(nn.Module):
  """``DecoderLM(...)(ids [B, T], segment_ids, positions) -> logits [B, T, V]``: the next token's distribution after
  each position (teacher forcing, causal). See the module docstring.

  Attributes:
    vocab_size: V.
    num_layers / d_model / num_heads / d_ff: the stack's depth and widths.
    dropout_rate / attention_dropout_rate: on embeddings and sublayer outputs / on attention weights.
    positional: ``"learned"`` (GPT-2) | ``"sinusoidal"`` | ``"relative"`` (Shaw et al.) | ``"t5"``.
    max_length: the learned position table's rows (and the longest cache).
    max_relative_distance: Shaw's clipping distance / T5's largest bucket distance.
    activation: the FFN's nonlinearity (``"gelu_tanh"``: GPT-2's).
    layer_norm_epsilon: every LayerNorm's ε (GPT-2's is 1e-5).
    vocab_map: ``(rows, pad, bos, eos, unk)`` of :class:`attnjax.tokens.VocabularyMap` for a model imported with
      another library's table (GPT-2's, whose ``<|endoftext|>`` is BOS and EOS); ``()``: the table is attnjax's ids.
    implementation: the attention kernel (:func:`attnjax.kernels.scaled_dot_product_attention`).
    dtype / param_dtype: compute and parameter dtypes; logits are float32 (float64 for a float64 model).
  """
  vocab_size: int
  num_layers: int = 6
  d_model: int = 512
  num_heads: int = 8
  d_ff: int = 2048
  dropout_rate: float = 0.1
  attention_dropout_rate: float = 0.0
  positional: str = "learned"
  max_length: int = 1024
  max_relative_distance: int = 32
  activation: str = "gelu_tanh"
  layer_norm_epsilon: float = 1e-6
  vocab_map: tuple[int, ...] = ()
  implementation: str = "auto"
  dropout_bits: str = "hash"
  dtype: Any = jnp.float32
  param_dtype: Any = jnp.float32

  def __post_init__(self):
    for name in ("vocab_size", "num_layers", "d_model", "num_heads", "d_ff", "max_length"):
      value = getattr(self, name)
      if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")
    if self.d_model % self.num_heads:
      raise ValueError(f"num_heads ({self.num_heads}) must divide d_model ({self.d_model})")
    if self.positional not in POSITIONAL_ENCODINGS:
      raise ValueError(f"positional must be one of {POSITIONAL_ENCODINGS}, got {self.positional!r}")
    if self.dropout_bits not in DROPOUT_BITS:
      raise ValueError(f"dropout_bits must be one of {DROPOUT_BITS}, got {self.dropout_bits!r}")
    if not self.layer_norm_epsilon > 0:
      raise ValueError(f"layer_norm_epsilon must be positive, got {self.layer_norm_epsilon!r}")
    check_vocab_map(self.vocab_map)
    super().__post_init__()

  def setup(self):
    relative = {"relative": "shaw", "t5": "t5"}.get(self.positional)
    cfg = LayerConfig(self.d_model, self.num_heads, self.d_ff, self.dropout_rate, self.attention_dropout_rate,
                      relu_dropout_rate=0.0, pre_norm=True, relative=relative,
                      max_relative_distance=self.max_relative_distance, implementation=self.implementation,
                      dtype=self.dtype, param_dtype=self.param_dtype, dropout_bits=self.dropout_bits,
                      activation=self.activation, layer_norm_epsilon=self.layer_norm_epsilon)
    # Sinusoidal positions have norm √(D/2) whatever D; the embeddings (std D^-1/2, norm ~1) are multiplied by √D
    # against them, as Vaswani et al. (§3.4) do, lest the positions drown the tokens. Learned positions start as
    # small as the embeddings (GPT-2), and relative ones add nothing here.
    self.mapped = VocabularyMap.of(self.vocab_map)
    self.embed = TokenEmbedding(self.vocab_size if self.mapped is None else self.mapped.rows, self.d_model,
                                scale=self.positional == "sinusoidal", dtype=self.dtype, param_dtype=self.param_dtype,
                                name="embed")
    self.positions = PositionalEncoding(self.positional, self.d_model, self.max_length, self.dtype, self.param_dtype)
    self.layers = [LMLayer(cfg, name=f"layer_{i}") for i in range(self.num_layers)]
    self.final_norm = _layer_norm(self.dtype, self.param_dtype, self.layer_norm_epsilon)
    self.dropout = Dropout(self.dropout_rate, self.dropout_bits)

  def _run(self, ids, positions, segments, caches, cache_index, deterministic):
    if self.positional == "learned" and ids.shape[1] > self.max_length and caches is None:
      raise ValueError(f"rows of {ids.shape[1]} tokens are longer than the learned position table "
                       f"(max_length={self.max_length})")
    if self.mapped is not None:  # attnjax's ids -> the table's rows
      ids = jnp.take(jnp.asarray(self.mapped.input_rows(self.vocab_size)), ids)
    x = self.embed(ids)
    pe = self.positions(positions)
    if pe is not None:
      x = x + pe
    x = self.dropout(x, deterministic=deterministic)
    new_caches = []
    for i, layer in enumerate(self.layers):
      x, cache = layer(x, segments=segments, positions=positions if segments is not None else None,
                       cache=None if caches is None else caches[i], cache_index=cache_index,
                       deterministic=deterministic)
      new_caches.append(cache)
    logits = mapped_logits(self.embed.attend(self.final_norm(x)), self.mapped, self.vocab_size)
    return logits.astype(accumulation_dtype(self.dtype)), tuple(new_caches)

  def __call__(self, ids, segment_ids=None, positions=None, *, deterministic=True):
    """Teacher forcing over ``ids [B, T]``; packed rows pass ``segment_ids`` and ``positions [B, T]``."""
    if ids.ndim != 2:
      raise ValueError(f"ids must be [B, T] token ids, got shape {ids.shape}")
    t = ids.shape[1]
    if positions is None:
      positions = jnp.arange(t)
    segments = None if segment_ids is None else (segment_ids, segment_ids)
    logits, _ = self._run(ids, positions, segments, None, None, deterministic)
    return logits

  def init_cache(self, batch: int, max_length: int):
    """Key and value buffers of ``max_length`` positions per layer, and the next position ``index [B]``."""
    if self.positional == "learned" and max_length > self.max_length:
      raise ValueError(f"max_length {max_length} exceeds the learned position table ({self.max_length})")
    return {"index": jnp.zeros((batch,), jnp.int32),
            "layers": tuple(layer.self_attention.init_self_cache(batch, max_length) for layer in self.layers)}

  def decode(self, ids, cache, *, deterministic=True):
    """``(logits [B, T, V], cache)`` for ``ids [B, T]`` continuing the prefix in ``cache`` (rows in lockstep)."""
    start = cache["index"][0]
    positions = start + jnp.arange(ids.shape[1])
    logits, layers = self._run(ids, positions, None, cache["layers"], start, deterministic)
    return logits, {"index": cache["index"] + ids.shape[1], "layers": layers}


def lm_statistics(logits, targets, weights):
  """Sums over a batch's weighted targets: ``loss_sum`` = ``nll_sum`` (cross-entropy in nats) and ``ntokens``."""
  log_probs = jax.nn.log_softmax(logits.astype(jnp.float32), axis=-1)
  nll = -jnp.take_along_axis(log_probs, targets[..., None], axis=-1)[..., 0]
  weights = weights.astype(jnp.float32)
  total = jnp.sum(nll * weights)
  return {"loss_sum": total, "nll_sum": total, "ntokens": jnp.sum(weights)}
