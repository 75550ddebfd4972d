"""BERT's encoder (Devlin et al. 2019) over the project's Transformer encoder layers, with BERT's exact semantics, so
that a checkpoint trained elsewhere (Hugging Face's ``BertModel``) runs here unchanged:

    e = LayerNorm_ε(E_word[x] + E_pos[0..L-1] + E_type[t])          embeddings: no sqrt(d) scale, a LayerNorm
    h ← LayerNorm_ε(h + Attention(h, mask))                          post-norm, as in Vaswani et al.
    h ← LayerNorm_ε(h + W₂ GELU(W₁ h + b₁) + b₂)                     GELU(x) = x Φ(x), the exact (erf) form
    pooled = tanh(W_p h[CLS] + b_p)                                  the pooler (next-sentence head's input)

with ε the checkpoint's LayerNorm epsilon (1e-12 in BERT), learned absolute positions and token types, and dropout
after the embeddings, on attention weights and on each sublayer output. The layers are
:class:`attnjax.models.transformer.EncoderLayer`: the same attention kernels (``implementation``), logical axes and
sharding as every other model here. :mod:`attnjax.transfer.bert` imports and exports Hugging Face checkpoints.
"""

from __future__ import annotations

from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp

from attnjax.models.transformer import ACTIVATIONS, EncoderLayer, LayerConfig


def _embed(num, features, name, dtype, init_std):
  return nn.Embed(num, features, dtype=dtype, param_dtype=jnp.float32, name=name,
                  embedding_init=nn.with_logical_partitioning(nn.initializers.normal(init_std), (None, "embed")))


class BertEncoder(nn.Module):
  """``BertEncoder(...)(input_ids [B, L], attention_mask [B, L], token_type_ids [B, L])``.

  Returns a dict: ``last_hidden_state [B, L, D]``, ``pooler_output [B, D]`` (when ``use_pooler``) and, with
  ``return_hidden_states``, ``hidden_states``: the embeddings' output and each layer's, ``num_layers + 1`` arrays
  (as ``BertModel(output_hidden_states=True)``).

  Attributes:
    vocab_size / d_model / num_layers / num_heads / d_ff: BERT's vocab_size, hidden_size, num_hidden_layers,
      num_attention_heads and intermediate_size.
    max_length: max_position_embeddings.
    type_vocab_size: token types (2: sentence A and B).
    layer_norm_epsilon: every LayerNorm's epsilon.
    activation: the feed-forward nonlinearity (``"gelu"``: exact; ``"gelu_tanh"``; ``"relu"``).
    dropout_rate / attention_dropout_rate: hidden_dropout_prob and attention_probs_dropout_prob.
    use_pooler: keep BERT's pooler (a checkpoint with one round-trips exactly).
    initializer_range: the standard deviation of fresh weights (0.02 in BERT).
    implementation: the attention kernel (see :func:`attnjax.kernels.scaled_dot_product_attention`).
    dtype: compute dtype; parameters stay float32.
    pre_norm: each sublayer normalises its input, x + f(LN(x)), and a final LayerNorm (``final_norm``) follows the
      last layer (Xiong et al. 2020), where BERT's post-norm layers compute LN(x + f(x)). The embeddings keep their
      LayerNorm either way. Pre-norm trains stably at the higher learning rates of short pre-training budgets
      (Geiping & Goldstein 2022); Hugging Face's BertModel is post-norm, so a pre-norm encoder does not export to it.
  """
  vocab_size: int
  d_model: int = 768
  num_layers: int = 12
  num_heads: int = 12
  d_ff: int = 3072
  max_length: int = 512
  type_vocab_size: int = 2
  layer_norm_epsilon: float = 1e-12
  activation: str = "gelu"
  dropout_rate: float = 0.1
  attention_dropout_rate: float = 0.1
  use_pooler: bool = True
  initializer_range: float = 0.02
  implementation: str = "auto"
  dtype: Any = jnp.float32
  pre_norm: bool = False

  def __post_init__(self):
    for name in ("vocab_size", "d_model", "num_layers", "num_heads", "d_ff", "max_length", "type_vocab_size"):
      value = getattr(self, name)
      if not isinstance(value, int) or value <= 0:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")
    if self.d_model % self.num_heads:
      raise ValueError(f"num_heads ({self.num_heads}) must divide d_model ({self.d_model})")
    if self.activation not in ACTIVATIONS:
      raise ValueError(f"activation must be one of {sorted(ACTIVATIONS)}, got {self.activation!r}")
    super().__post_init__()

  def setup(self):
    d, std = self.d_model, self.initializer_range
    self.word_embeddings = _embed(self.vocab_size, d, "word_embeddings", self.dtype, std)
    self.position_embeddings = _embed(self.max_length, d, "position_embeddings", self.dtype, std)
    self.token_type_embeddings = _embed(self.type_vocab_size, d, "token_type_embeddings", self.dtype, std)
    self.embed_norm = nn.LayerNorm(epsilon=self.layer_norm_epsilon, dtype=self.dtype, name="embed_norm")
    self.embed_dropout = nn.Dropout(self.dropout_rate)
    cfg = LayerConfig(d, self.num_heads, self.d_ff, self.dropout_rate, self.attention_dropout_rate,
                      relu_dropout_rate=0.0, pre_norm=self.pre_norm, relative=None, max_relative_distance=16,
                      implementation=self.implementation, dtype=self.dtype, param_dtype=jnp.float32,
                      dropout_bits="threefry", activation=self.activation,
                      layer_norm_epsilon=self.layer_norm_epsilon)
    self.layers = [EncoderLayer(cfg, name=f"layer_{i}") for i in range(self.num_layers)]
    if self.pre_norm:
      self.final_norm = nn.LayerNorm(epsilon=self.layer_norm_epsilon, dtype=self.dtype, name="final_norm")
    if self.use_pooler:
      self.pooler = nn.Dense(d, dtype=self.dtype, name="pooler",
                             kernel_init=nn.initializers.normal(std))

  def embed(self, input_ids, token_type_ids=None, positions=None, *, deterministic=True):
    """The embedding layer's output ``[B, L, D]``; ``positions [B, L]`` for packed rows (default ``0..L-1``)."""
    length = input_ids.shape[1]
    if length > self.max_length:
      raise ValueError(f"input length {length} is longer than max_length ({self.max_length}, the checkpoint's "
                       "max_position_embeddings)")
    if token_type_ids is None:
      token_type_ids = jnp.zeros_like(input_ids)
    position_embeddings = (self.position_embeddings(jnp.arange(length))[None] if positions is None
                           else self.position_embeddings(positions))
    x = (self.word_embeddings(input_ids) + position_embeddings
         + self.token_type_embeddings(token_type_ids))
    return self.embed_dropout(self.embed_norm(x), deterministic=deterministic)

  def __call__(self, input_ids, attention_mask=None, token_type_ids=None, *, segment_ids=None, positions=None,
               deterministic=True, return_hidden_states=False):
    """``segment_ids [B, L]`` (packed rows: a token attends the tokens of its own segment; 0 is padding) with
    ``positions [B, L]`` (restarting in each segment) replace ``attention_mask`` (every token attends the real
    ones)."""
    if input_ids.ndim != 2:
      raise ValueError(f"input_ids must be [B, L] token ids, got shape {input_ids.shape}")
    if segment_ids is None:
      real = jnp.ones(input_ids.shape, jnp.int32) if attention_mask is None else attention_mask.astype(jnp.int32)
      segments = (None, real)  # key padding: every query attends the real keys
    else:
      segments = (segment_ids, segment_ids)
    x = self.embed(input_ids, token_type_ids, positions, deterministic=deterministic)
    hidden = [x]
    for layer in self.layers:
      x = layer(x, None, segment_ids=segments, deterministic=deterministic)
      hidden.append(x)
    if self.pre_norm:
      x = self.final_norm(x)
    out = {"last_hidden_state": x}
    if self.use_pooler:
      out["pooler_output"] = jnp.tanh(self.pooler(x[:, 0]))
    if return_hidden_states:
      out["hidden_states"] = tuple(hidden)
    return out


def mean_pool(hidden, attention_mask, normalize: bool = True):
  """Sentence embeddings ``[B, D]``: the mean of ``hidden [B, L, D]`` over the real tokens of ``attention_mask``
  (sentence-transformers' mean pooling), L2-normalised when ``normalize``. A row with no real token gives zeros."""
  mask = attention_mask.astype(hidden.dtype)[..., None]
  summed = jnp.sum(hidden * mask, axis=1)
  pooled = summed / jnp.maximum(jnp.sum(mask, axis=1), 1e-9)
  if normalize:
    pooled = pooled / jnp.maximum(jnp.linalg.norm(pooled, axis=-1, keepdims=True), 1e-12)
  return pooled


class BertMaskedLM(nn.Module):
  """BERT with its masked-language-model head (Devlin et al. 2019, §3.1; Hugging Face's ``BertForMaskedLM``):

      logits = LayerNorm_ε(GELU(W_t h + b_t)) E_wordᵀ + b_out            the output matrix tied to the input embeddings

  ``__call__(input_ids, segment_ids, positions, mlm_positions)`` returns logits ``[B, P, V]`` at the ``mlm_positions
  [B, P]`` only (all ``[B, L, V]`` without them): the loss is taken at the masked tokens, and the vocabulary
  projection of the other positions would cost most of a step. The fields are :class:`BertEncoder`'s.
  """
  vocab_size: int
  d_model: int = 768
  num_layers: int = 12
  num_heads: int = 12
  d_ff: int = 3072
  max_length: int = 512
  type_vocab_size: int = 2
  layer_norm_epsilon: float = 1e-12
  activation: str = "gelu"
  dropout_rate: float = 0.1
  attention_dropout_rate: float = 0.1
  initializer_range: float = 0.02
  implementation: str = "auto"
  dtype: Any = jnp.float32
  pre_norm: bool = False

  def setup(self):
    self.bert = BertEncoder(self.vocab_size, self.d_model, self.num_layers, self.num_heads, self.d_ff,
                            self.max_length, self.type_vocab_size, self.layer_norm_epsilon, self.activation,
                            self.dropout_rate, self.attention_dropout_rate, use_pooler=False,
                            initializer_range=self.initializer_range, implementation=self.implementation,
                            dtype=self.dtype, pre_norm=self.pre_norm, name="bert")
    self.transform = nn.Dense(self.d_model, dtype=self.dtype, name="transform",
                              kernel_init=nn.initializers.normal(self.initializer_range))
    self.transform_norm = nn.LayerNorm(epsilon=self.layer_norm_epsilon, dtype=self.dtype, name="transform_norm")
    self.output_bias = self.param("output_bias", nn.initializers.zeros_init(), (self.vocab_size,))

  def __call__(self, input_ids, segment_ids=None, positions=None, mlm_positions=None, *, deterministic=True):
    hidden = self.bert(input_ids, segment_ids=segment_ids, positions=positions,
                       deterministic=deterministic)["last_hidden_state"]
    if mlm_positions is not None:
      hidden = jnp.take_along_axis(hidden, mlm_positions[..., None], axis=1)  # [B, P, D]
    h = self.transform_norm(ACTIVATIONS[self.activation](self.transform(hidden)))
    logits = self.bert.word_embeddings.attend(h.astype(self.dtype))
    return logits.astype(jnp.float32) + self.output_bias


def mlm_statistics(logits, mlm_ids, mlm_weights):
  """Sums over the predicted positions of a masked-LM batch: ``loss_sum`` (cross-entropy), ``correct_sum`` (argmax
  right) and ``ntokens`` (the predictions; ``mlm_weights`` 0 pads). ``logits [B, P, V]`` at ``mlm_ids [B, P]``."""
  log_probs = jax.nn.log_softmax(logits.astype(jnp.float32), axis=-1)
  nll = -jnp.take_along_axis(log_probs, mlm_ids[..., None], axis=-1)[..., 0]
  weights = mlm_weights.astype(jnp.float32)
  total = jnp.sum(nll * weights)
  correct = jnp.sum((jnp.argmax(logits, axis=-1) == mlm_ids) * weights)
  return {"loss_sum": total, "nll_sum": total, "ntokens": jnp.sum(weights), "correct_sum": correct}
