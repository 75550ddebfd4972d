"""The Transformer encoder-decoder (Vaswani et al. 2017, "Attention Is All You Need").

Each encoder layer: self-attention, then a position-wise feed-forward network FFN(x) = max(0, x W₁ + b₁) W₂ + b₂
(eq. 2); each decoder layer adds encoder-decoder attention between the two, and its self-attention is causal. Every
sublayer is wrapped as (§5.4: dropout on each sublayer output before the residual sum)::

    post-norm (the paper):  x ← LayerNorm(x + Dropout(Sublayer(x)))
    pre-norm  (Xiong et al. 2020, trains without warm-up tricks at depth):  x ← x + Dropout(Sublayer(LayerNorm(x))),
              with a final LayerNorm after the last layer of each stack.

Inputs are token embeddings times sqrt(d_model) plus positional encodings (§3.4-3.5), with dropout on the sum.
Logits are float32, float64 for a float64 model ("label-smoothing-ready": the loss applies the smoothing). Presets
``base`` and ``big`` follow Table 3 with the paper's shared source/target vocabulary and tied embeddings (§3.4).

``copy=True`` adds copy attention for summarization (Gehrmann et al. 2018's Transformer with copy; OpenNMT-py's
``copy_attn``): the copy distribution is the last decoder layer's cross-attention averaged over its heads, mixed with
the vocabulary distribution by a learned gate on the decoder's output, p_gen = σ(w·h_t + b), as in
:mod:`attnjax.layers.copy` (See et al. 2017 eq. 9); the model then returns log P(w) in place of logits.

Implements the interface of :mod:`attnjax.models.interface`; the cache holds each decoder layer's self-attention
keys/values and its projected cross-attention memory.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from attnjax.kernels.common import accumulation_dtype
from attnjax.layers.attention import MultiHeadAttention
from attnjax.layers.copy import PointerGate, mix_log_probs
from attnjax.layers.dropout import DROPOUT_BITS, Dropout
from attnjax.layers.embedding import POSITIONAL_ENCODINGS, PositionalEncoding, TokenEmbedding
from attnjax.models.interface import PER_SOURCE, DecoderOutput, source_mask
from attnjax.tokens import VocabularyMap

PRESETS = {
    # Vaswani et al. 2017, Table 3: N=6, d_model, d_ff, h, P_drop; label smoothing 0.1 belongs to the loss.
    "base": dict(num_encoder_layers=6, num_decoder_layers=6, d_model=512, d_ff=2048, num_heads=8, dropout_rate=0.1),
    "big": dict(num_encoder_layers=6, num_decoder_layers=6, d_model=1024, d_ff=4096, num_heads=16, dropout_rate=0.3),
}


def _dense(features, names, dtype, param_dtype, use_bias=True):
  return nn.Dense(features, use_bias=use_bias, dtype=dtype, param_dtype=param_dtype,
                  kernel_init=nn.with_logical_partitioning(nn.initializers.xavier_uniform(), names),
                  bias_init=nn.with_logical_partitioning(nn.initializers.zeros_init(), names[-1:]))


def _layer_norm(dtype, param_dtype, epsilon=1e-6):
  return nn.LayerNorm(epsilon=epsilon, dtype=dtype, param_dtype=param_dtype,
                      scale_init=nn.with_logical_partitioning(nn.initializers.ones_init(), ("embed",)),
                      bias_init=nn.with_logical_partitioning(nn.initializers.zeros_init(), ("embed",)))


# The feed-forward network's nonlinearity by name: the Transformer's ReLU (eq. 2), BERT's exact GELU
# x Φ(x) (Hendrycks & Gimpel 2016; Hugging Face's "gelu"), GELU's tanh approximation (GPT-2's, "gelu_new"), and
# SiLU x σ(x) (Elfwing et al. 2018; "swish", which Marian's opus-mt models use).
ACTIVATIONS = {
    "relu": nn.relu,
    "gelu": lambda x: jax.nn.gelu(x, approximate=False),
    "gelu_tanh": lambda x: jax.nn.gelu(x, approximate=True),
    "silu": nn.silu,
}
BLOCKED_LOGIT = -1.0e9  # the logit of an id that a vocabulary map gives no row (exp of it is 0 in any float)


def mapped_logits(logits, vocab_map: VocabularyMap | None, size: int):
  """``logits [..., rows]`` over a table's ids as ``[..., size]`` over attnjax's (see
  :class:`attnjax.tokens.VocabularyMap`): re-ordered, the ids without a row blocked; unchanged without a map."""
  if vocab_map is None:
    return logits
  rows = vocab_map.output_rows(size)
  out = jnp.take(logits, jnp.asarray(np.maximum(rows, 0)), axis=-1)
  return jnp.where(jnp.asarray(rows >= 0), out, jnp.asarray(BLOCKED_LOGIT, logits.dtype))


def check_vocab_map(vocab_map) -> None:
  """``vocab_map`` a :meth:`VocabularyMap.as_tuple` or empty; ValueError naming the field. (That the vocabulary
  sizes hold its ids is checked when the model is set up: a config is checked with sizes of its own.)"""
  try:
    VocabularyMap.of(vocab_map)
  except (TypeError, ValueError) as e:
    raise ValueError(f"vocab_map must be (rows, pad, bos, eos, unk), got {vocab_map!r}: {e}") from None


class FeedForward(nn.Module):
  """FFN(x) = act(x W₁ + b₁) W₂ + b₂, W₁: [d_model, d_ff], W₂: [d_ff, d_model]; act = max(0, ·) in the paper
  (eq. 2), or another of :data:`ACTIVATIONS` by name."""
  d_model: int
  d_ff: int
  dropout_rate: float = 0.0  # on the hidden activations (not in the paper; T2T's relu_dropout)
  dtype: Any = jnp.float32
  param_dtype: Any = jnp.float32
  dropout_bits: str = "hash"
  activation: str = "relu"

  @nn.compact
  def __call__(self, x, *, deterministic=True):
    if self.activation not in ACTIVATIONS:
      raise ValueError(f"activation must be one of {sorted(ACTIVATIONS)}, got {self.activation!r}")
    h = ACTIVATIONS[self.activation](_dense(self.d_ff, ("embed", "mlp"), self.dtype, self.param_dtype)(x))
    h = Dropout(self.dropout_rate, self.dropout_bits)(h, deterministic=deterministic)
    return _dense(self.d_model, ("mlp", "embed"), self.dtype, self.param_dtype)(h)


class _Sublayer(nn.Module):
  """Residual wrapper: post-norm LayerNorm(x + Dropout(f(x))) or pre-norm x + Dropout(f(LayerNorm(x)))."""
  pre_norm: bool
  dropout_rate: float
  dtype: Any = jnp.float32
  param_dtype: Any = jnp.float32
  dropout_bits: str = "hash"
  epsilon: float = 1e-6

  @nn.compact
  def __call__(self, x, fn, *, deterministic):
    norm = _layer_norm(self.dtype, self.param_dtype, self.epsilon)
    y, *extra = fn(norm(x) if self.pre_norm else x)
    out = x + Dropout(self.dropout_rate, self.dropout_bits)(y, deterministic=deterministic)
    return (out if self.pre_norm else norm(out)), *extra


@dataclasses.dataclass(frozen=True)
class LayerConfig:
  d_model: int
  num_heads: int
  d_ff: int
  dropout_rate: float
  attention_dropout_rate: float
  relu_dropout_rate: float
  pre_norm: bool
  relative: str | None
  max_relative_distance: int
  implementation: str
  dtype: Any
  param_dtype: Any
  attention_type: str = "full"
  window: int = 64
  dropout_bits: str = "hash"
  activation: str = "relu"  # of the feed-forward network (ACTIVATIONS)
  layer_norm_epsilon: float = 1e-6

  def attention(self, name, relative=None, *, causal=False, cross=False):
    """A self-attention (with the configured relative positions and attention type; T5 buckets causal in the
    decoder) or, with ``cross``, an encoder-decoder attention (always full, no relative positions)."""
    return MultiHeadAttention(num_heads=self.num_heads, qkv_features=self.d_model, out_features=self.d_model,
                              dropout_rate=self.attention_dropout_rate, relative=relative,
                              max_relative_distance=self.max_relative_distance, bidirectional=not causal,
                              attention_type="full" if cross else self.attention_type, window=self.window,
                              implementation=self.implementation, dtype=self.dtype,
                              param_dtype=self.param_dtype, name=name)

  def sublayer(self, name):
    return _Sublayer(self.pre_norm, self.dropout_rate, self.dtype, self.param_dtype, self.dropout_bits,
                     self.layer_norm_epsilon, name=name)

  def ffn(self):
    return FeedForward(self.d_model, self.d_ff, self.relu_dropout_rate, self.dtype, self.param_dtype,
                       self.dropout_bits, self.activation, name="ffn")


class EncoderLayer(nn.Module):
  """Self-attention + FFN, each wrapped by :class:`_Sublayer`. ``x [B, S, D]``, ``mask [B, 1, 1|S, S]`` or None,
  ``segment_ids`` a pair ``[B, S]`` (see :class:`attnjax.layers.attention.MultiHeadAttention`)."""
  config: LayerConfig

  @nn.compact
  def __call__(self, x, mask, *, segment_ids=None, positions=None, deterministic=True):
    cfg = self.config
    attention = cfg.attention("self_attention", cfg.relative)
    ffn = cfg.ffn()
    x, = cfg.sublayer("attention_block")(
        x, lambda h: attention(h, mask=mask, segment_ids=segment_ids, positions=positions,
                               deterministic=deterministic)[:1],
        deterministic=deterministic)
    x, = cfg.sublayer("ffn_block")(x, lambda h: (ffn(h, deterministic=deterministic),), deterministic=deterministic)
    return x


class DecoderLayer(nn.Module):
  """Causal self-attention, encoder-decoder attention, FFN. ``x [B, T, D]``; returns (x, cache, cross weights)."""
  config: LayerConfig

  def setup(self):
    cfg = self.config
    self.self_attention = cfg.attention("self_attention", cfg.relative, causal=True)
    self.cross_attention = cfg.attention("cross_attention", cross=True)
    self.ffn = cfg.ffn()
    self.self_block = cfg.sublayer("self_attention_block")
    self.cross_block = cfg.sublayer("cross_attention_block")
    self.ffn_block = cfg.sublayer("ffn_block")

  def __call__(self, x, encoded, cross_segments, *, self_segments=None, positions=None, cache=None, cache_index=None,
               deterministic=True, return_weights=False):
    """``cross_segments``: ``(q [B, T] or None, kv [B, S])`` segment ids of the encoder-decoder attention (None: key
    padding alone); ``self_segments`` those of the self-attention (packed rows) or None (causality alone)."""
    det = deterministic
    self_cache = None if cache is None else cache["self"]
    cross_cache = None if cache is None else cache[PER_SOURCE]
    x, new_self, _ = self.self_block(
        x, lambda h: self.self_attention(h, segment_ids=self_segments, is_causal=cache is None, kv_cache=self_cache,
                                         cache_index=cache_index, positions=positions, deterministic=det),
        deterministic=det)
    x, _, weights = self.cross_block(
        x, lambda h: self.cross_attention(h, None if cross_cache is not None else encoded, segment_ids=cross_segments,
                                          kv_cache=cross_cache, deterministic=det, return_weights=return_weights),
        deterministic=det)
    x, = self.ffn_block(x, lambda h: (self.ffn(h, deterministic=det),), deterministic=det)
    new_cache = None if cache is None else {"self": new_self, PER_SOURCE: cross_cache}
    return x, new_cache, weights

  def project_memory(self, encoded):
    return self.cross_attention.project_kv(encoded)


class Transformer(nn.Module):
  """Transformer encoder-decoder (Vaswani et al. 2017) behind the model interface.

  Attributes:
    src_vocab_size, tgt_vocab_size: vocabulary sizes.
    num_encoder_layers, num_decoder_layers: N (6 in the paper).
    d_model, num_heads, d_ff: model width, heads h, FFN width.
    dropout_rate: P_drop on sublayer outputs and on embeddings + positions.
    attention_dropout_rate, relu_dropout_rate: dropout on attention weights / FFN activations (0 in the paper).
    dropout_bits: where the residual, input and FFN dropout take their random bits: ``"hash"`` (a counter hash of
      the element index, :class:`attnjax.layers.dropout.Dropout`) or ``"threefry"`` (Flax's ``nn.Dropout``).
    pre_norm: False = the paper's post-norm.
    positional: ``"sinusoidal"`` | ``"learned"`` | ``"relative"`` (Shaw et al. 2018, in every self-attention) |
      ``"t5"`` (Raffel et al. 2020's bucketed relative bias, in every self-attention).
    attention_type: self-attention pattern, ``"full"`` | ``"local"`` (a window of ``local_window`` keys each side, or
      the past ``local_window`` in the decoder) | ``"linear"`` (Katharopoulos et al. 2020); cross-attention is full.
    max_length: longest sequence for learned positions.
    max_relative_distance: Shaw's clipping distance K.
    shared_vocab: source and target use one vocabulary (required by ``share_source_embeddings``).
    tie_decoder_embeddings: the pre-softmax projection is the target embedding transposed (§3.4).
    share_source_embeddings: the source embedding is the target embedding too (§3.4, needs ``shared_vocab``).
    implementation: attention kernel: ``"auto"`` (Pallas splash on TPU, cuDNN on GPU, the faster of ``"xla"`` and
      ``"blockwise"`` on CPU; see :mod:`attnjax.kernels.fused`), or one of them by name.
    copy: copy attention over the source (see the module docstring; needs one shared vocabulary); ``decode`` then
      returns log-probabilities of the mixed distribution where it returned logits.
    layer_norm_epsilon: every LayerNorm's ε (1e-6; 1e-5 is torch's, which Hugging Face's Marian and Pegasus fix, so
      a model trained with it exports to them exactly: :mod:`attnjax.transfer.seq2seq`).
    activation: the feed-forward networks' nonlinearity, one of :data:`ACTIVATIONS` (ReLU in the paper).
    scale_embeddings: token embeddings times sqrt(d_model) (§3.4); False leaves them as they are.
    final_logits_bias: a bias on the tied output layer's logits (Marian's and Pegasus's ``final_logits_bias``; an
      untied output layer has its own).
    vocab_map: ``(rows, pad, bos, eos, unk)`` of :class:`attnjax.tokens.VocabularyMap` for a model imported with
      another library's table (rows in that table's order, one table for source, target and output); ``()``: the
      tables are attnjax's ids. The vocabulary sizes are then the attnjax ids' and the tables have ``rows`` rows.
    dtype, param_dtype: computation and parameter dtypes (e.g. bfloat16 compute, float32 params).
  """
  src_vocab_size: int
  tgt_vocab_size: int
  num_encoder_layers: int = 6
  num_decoder_layers: int = 6
  d_model: int = 512
  num_heads: int = 8
  d_ff: int = 2048
  dropout_rate: float = 0.1
  attention_dropout_rate: float = 0.0
  relu_dropout_rate: float = 0.0
  pre_norm: bool = False
  positional: str = "sinusoidal"
  max_length: int = 1024
  max_relative_distance: int = 16
  shared_vocab: bool = False
  tie_decoder_embeddings: bool = True
  share_source_embeddings: bool = False
  implementation: str = "auto"
  attention_type: str = "full"
  local_window: int = 64
  dropout_bits: str = "hash"
  copy: bool = False
  layer_norm_epsilon: float = 1e-6
  activation: str = "relu"
  scale_embeddings: bool = True
  final_logits_bias: bool = False
  vocab_map: tuple[int, ...] = ()
  dtype: Any = jnp.float32
  param_dtype: Any = jnp.float32

  def __post_init__(self):
    # Checked at construction, i.e. when a config becomes a model, before anything is initialised or compiled.
    if self.activation not in ACTIVATIONS:
      raise ValueError(f"activation must be one of {sorted(ACTIVATIONS)}, got {self.activation!r}")
    if self.final_logits_bias and not self.tie_decoder_embeddings:
      raise ValueError("final_logits_bias=True is the tied output layer's bias (an untied one has its own)")
    check_vocab_map(self.vocab_map)
    if self.vocab_map and not self.share_source_embeddings:
      raise ValueError("vocab_map needs share_source_embeddings=True: one table for the source and the target")
    for name in ("num_heads", "d_model", "d_ff"):
      value = getattr(self, name)
      if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")
    if self.d_model % self.num_heads:
      raise ValueError(f"num_heads ({self.num_heads}) must divide d_model ({self.d_model})")
    if self.positional not in POSITIONAL_ENCODINGS:
      raise ValueError(f"positional must be one of {POSITIONAL_ENCODINGS}, got {self.positional!r}")
    if self.dropout_bits not in DROPOUT_BITS:
      raise ValueError(f"dropout_bits must be one of {DROPOUT_BITS}, got {self.dropout_bits!r}")
    if self.attention_type not in ("full", "local", "linear"):
      raise ValueError(f"attention_type must be 'full', 'local' or 'linear', got {self.attention_type!r}")
    if self.attention_type != "full" and (self.positional in ("relative", "t5") or self.attention_dropout_rate):
      raise ValueError(f"attention_type={self.attention_type!r} goes with absolute positions and no attention "
                       f"dropout (got positional={self.positional!r}, attention_dropout_rate="
                       f"{self.attention_dropout_rate})")
    if self.share_source_embeddings and not self.shared_vocab:
      raise ValueError("share_source_embeddings=True needs shared_vocab=True: tying source and target embeddings "
                       "is only meaningful with one vocabulary")
    if self.shared_vocab and self.src_vocab_size != self.tgt_vocab_size:
      raise ValueError(f"shared_vocab=True but src_vocab_size={self.src_vocab_size} != "
                       f"tgt_vocab_size={self.tgt_vocab_size}")
    if self.copy and self.src_vocab_size != self.tgt_vocab_size:
      raise ValueError(f"copy=True copies source ids as target ids: it needs one shared vocabulary, got "
                       f"src_vocab_size={self.src_vocab_size} != tgt_vocab_size={self.tgt_vocab_size}")
    if not self.layer_norm_epsilon > 0:
      raise ValueError(f"layer_norm_epsilon must be positive, got {self.layer_norm_epsilon!r}")
    if self.copy and self.attention_type != "full":
      raise ValueError(f"copy=True reads the cross-attention weights, which attention_type={self.attention_type!r} "
                       f"does not give")
    for name in ("src_vocab_size", "tgt_vocab_size", "num_encoder_layers", "num_decoder_layers", "d_model", "d_ff",
                 "max_length"):
      if getattr(self, name) < 1:
        raise ValueError(f"{name} must be positive, got {getattr(self, name)}")
    super().__post_init__()

  def setup(self):
    relative = {"relative": "shaw", "t5": "t5"}.get(self.positional)
    cfg = LayerConfig(self.d_model, self.num_heads, self.d_ff, self.dropout_rate, self.attention_dropout_rate,
                      self.relu_dropout_rate, self.pre_norm, relative, self.max_relative_distance, self.implementation,
                      self.dtype, self.param_dtype, self.attention_type, self.local_window, self.dropout_bits,
                      activation=self.activation, layer_norm_epsilon=self.layer_norm_epsilon)
    embed = lambda vocab, name: TokenEmbedding(vocab, self.d_model, scale=self.scale_embeddings, dtype=self.dtype,
                                               param_dtype=self.param_dtype, name=name)
    self.mapped = VocabularyMap.of(self.vocab_map)
    rows = self.tgt_vocab_size if self.mapped is None else self.mapped.rows
    self.tgt_embed = embed(rows, "tgt_embed")
    self.src_embed = self.tgt_embed if self.share_source_embeddings else embed(self.src_vocab_size, "src_embed")
    self.positions = PositionalEncoding(self.positional, self.d_model, self.max_length, self.dtype, self.param_dtype)
    self.encoder_layers = [EncoderLayer(cfg, name=f"encoder_{i}") for i in range(self.num_encoder_layers)]
    self.decoder_layers = [DecoderLayer(cfg, name=f"decoder_{i}") for i in range(self.num_decoder_layers)]
    if self.pre_norm:
      self.encoder_norm = _layer_norm(self.dtype, self.param_dtype, self.layer_norm_epsilon)
      self.decoder_norm = _layer_norm(self.dtype, self.param_dtype, self.layer_norm_epsilon)
    if not self.tie_decoder_embeddings:
      self.logits_dense = _dense(rows, ("embed", "vocab"), accumulation_dtype(self.dtype), self.param_dtype)
    if self.final_logits_bias:
      self.logits_bias = self.param("final_logits_bias",
                                    nn.with_logical_partitioning(nn.initializers.zeros_init(), ("vocab",)), (rows,),
                                    self.param_dtype)
    self.input_dropout = Dropout(self.dropout_rate, self.dropout_bits)
    if self.copy:
      self.pointer = PointerGate(self.dtype, name="pointer")

  def _embed(self, embed, ids, positions, deterministic):
    if self.mapped is not None:  # attnjax's ids -> the table's rows
      ids = jnp.take(jnp.asarray(self.mapped.input_rows(self.tgt_vocab_size)), ids)
    x = embed(ids)
    pe = self.positions(positions)
    if pe is not None:
      x = x + pe
    return self.input_dropout(x, deterministic=deterministic)

  def encode(self, src, src_mask=None, *, segment_ids=None, positions=None, deterministic=True):
    """``src [B, S]`` -> ``{"encoded": [B, S, D], "src_mask": [B, S]}`` (+ ``"src_segment_ids"`` when packed).

    Packed rows (several examples per row) pass ``segment_ids [B, S]`` (1, 2, ... per example, 0 on padding) and
    ``positions [B, S]`` (restarting at 0 per example): attention stays inside each example
    (:func:`attnjax.kernels.segment_mask`) and every example sees the positions it would have alone.
    """
    mask = source_mask(src, src_mask)
    x = self._embed(self.src_embed, src, jnp.arange(src.shape[1]) if positions is None else positions, deterministic)
    # key padding (every query attends the real keys) or, packed, attention inside each example: segment ids, the
    # form every attention implementation takes (see attnjax.kernels.fused)
    segments = (None, mask.astype(jnp.int32))
    memory = {"src_mask": mask}
    if segment_ids is not None:
      segments = (segment_ids, segment_ids)
      memory["src_segment_ids"] = segment_ids
    for layer in self.encoder_layers:
      x = layer(x, None, segment_ids=segments, positions=positions, deterministic=deterministic)
    if self.pre_norm:
      x = self.encoder_norm(x)
    memory["encoded"] = x
    if self.copy:
      memory["src_ids"] = src
    return memory

  def init_cache(self, memory, max_length):
    """Self-attention buffers of ``max_length`` positions and the projected memory (the same for every beam of a
    row: under ``PER_SOURCE``), per decoder layer."""
    if self.positional == "learned" and max_length > self.max_length:
      raise ValueError(f"max_length {max_length} exceeds the learned position table ({self.max_length})")
    encoded = memory["encoded"]
    batch = encoded.shape[0]
    layers = tuple({"self": layer.self_attention.init_self_cache(batch, max_length),
                    PER_SOURCE: layer.project_memory(encoded)} for layer in self.decoder_layers)
    return {"index": jnp.zeros((batch,), jnp.int32), "layers": layers}

  def decode(self, tgt_in, memory, cache=None, *, segment_ids=None, positions=None, deterministic=True,
             return_attention=False):
    """Teacher forcing over ``tgt_in [B, T]`` (no cache) or T more steps from a cache; see the interface.

    Packed rows (teacher forcing only) pass ``segment_ids``/``positions [B, T]`` as in :meth:`encode`; target segment
    k attends only to source segment k. ``return_attention="heads"`` returns the last layer's cross-attention per
    head, ``[B, N, T, S]``, instead of its mean over heads.
    """
    t = tgt_in.shape[1]
    start = None if cache is None else cache["index"][0]  # rows decode in lockstep
    packed = segment_ids is not None
    if packed and (cache is not None or "src_segment_ids" not in memory):
      raise ValueError("packed decoding (segment_ids) needs teacher forcing and a memory encoded with segment_ids")
    if positions is None:
      positions = jnp.arange(t) if cache is None else start + jnp.arange(t)
    x = self._embed(self.tgt_embed, tgt_in, positions, deterministic)
    src_mask = memory["src_mask"]
    cross_segments = (None, src_mask.astype(jnp.int32))
    self_segments = None
    if packed:
      cross_segments = (segment_ids, memory["src_segment_ids"])
      self_segments = (segment_ids, segment_ids)
    new_layers, weights = [], None
    for i, layer in enumerate(self.decoder_layers):
      last = i == len(self.decoder_layers) - 1
      x, layer_cache, w = layer(x, memory["encoded"], cross_segments, self_segments=self_segments,
                                positions=positions if packed else None,
                                cache=None if cache is None else cache["layers"][i], cache_index=start,
                                deterministic=deterministic,
                                return_weights=bool(return_attention or self.copy) and last)
      new_layers.append(layer_cache)
      weights = w if w is not None else weights
    if self.pre_norm:
      x = self.decoder_norm(x)
    logits_dtype = accumulation_dtype(self.dtype)  # float32 for half precision, float64 for a float64 model
    logits = self.tgt_embed.attend(x) if self.tie_decoder_embeddings else self.logits_dense(x.astype(logits_dtype))
    if self.final_logits_bias:
      logits = logits + self.logits_bias.astype(logits.dtype)
    logits = mapped_logits(logits, self.mapped, self.tgt_vocab_size)
    if self.copy:  # the copy distribution: the last layer's cross-attention, averaged over the heads
      p_gen = self.pointer(x)
      logits = mix_log_probs(logits, p_gen, weights.mean(axis=1), memory["src_ids"])
      self.sow("intermediates", "p_gen", p_gen)  # [B, T], for pictures (mutable=["intermediates"])
      weights = weights if return_attention else None
    new_cache = None if cache is None else {"index": cache["index"] + t, "layers": tuple(new_layers)}
    # the last layer's cross-attention, averaged over heads [B, T, S], or per head [B, N, T, S] ("heads")
    attention = weights if weights is None or return_attention == "heads" else weights.mean(axis=1)
    return DecoderOutput(logits.astype(logits_dtype), new_cache, attention)

  def __call__(self, src, tgt_in, src_mask=None, *, src_segment_ids=None, tgt_segment_ids=None, src_positions=None,
               tgt_positions=None, deterministic=True):
    memory = self.encode(src, src_mask, segment_ids=src_segment_ids, positions=src_positions,
                         deterministic=deterministic)
    return self.decode(tgt_in, memory, segment_ids=tgt_segment_ids, positions=tgt_positions,
                       deterministic=deterministic).logits


def transformer_preset(name: str, *, vocab_size: int = 37000, **overrides) -> Transformer:
  """``base`` or ``big`` of Table 3 with one shared vocabulary and all embeddings tied (as in the paper)."""
  if name not in PRESETS:
    raise ValueError(f"unknown Transformer preset {name!r}; choose from {sorted(PRESETS)}")
  kwargs = dict(PRESETS[name], src_vocab_size=vocab_size, tgt_vocab_size=vocab_size, shared_vocab=True,
                tie_decoder_embeddings=True, share_source_embeddings=True)
  kwargs.update(overrides)
  return Transformer(**kwargs)


def count_params(params) -> int:
  """Number of scalars in a parameter tree (boxed or not)."""
  return sum(int(x.size) for x in jax.tree_util.tree_leaves(nn.meta.unbox(params)))
