"""Convolutional sequence to sequence learning (Gehring, Auli, Grangier, Yarats & Dauphin 2017, "ConvS2S").

Shape letters: B batch, S source length, T target length, E ``embed_dim``, C ``hidden_dim`` (conv channels),
k ``kernel_width``, L ``decoder_layers``, V vocabulary size.

Embeddings (§3.1). Word plus LEARNED absolute position embedding, ``e_j = w_j + p_j`` for the source and
``g_i = w_i + p_i`` for the target, both ``[B, *, E]``, followed by a linear map E → C before the first block (and
C → E after the last one).

Blocks (§3.2). A 1-D convolution over k positions to 2C channels, a gated linear unit and a residual connection::

    h^l_i = v(W^l [h^{l-1}_{i-k/2}, ..., h^{l-1}_{i+k/2}] + b^l_w) + h^{l-1}_i,     v([A B]) = A ⊗ σ(B)

Encoder convolutions are centred and zero-padded; padded source positions are zeroed before every convolution so
that padding never leaks into real positions. Decoder convolutions are causal: the input is left-padded with k-1
positions (or, when decoding from a cache, with the last k-1 inputs of that layer), so output i sees inputs ≤ i only.

Multi-step attention (§3.3), in EVERY decoder layer l, with z^u the output of the last encoder block (mapped to E)::

    d^l_i  = W^l_d h^l_i + b^l_d + g_i                         [B, T, E]   (h^l_i: the GLU output)
    a^l_ij = exp(d^l_i · z^u_j) / Σ_t exp(d^l_i · z^u_t)        [B, T, S]   (over real source positions j only)
    c^l_i  = Σ_j a^l_ij (z^u_j + e_j)                          [B, T, E]

c^l_i is projected back to C and added to h^l_i before the residual to the next layer.

Normalisation (§3.4). Every sum of two branches is scaled by sqrt(0.5) to halve its variance; the context is scaled
by m·sqrt(1/m) = sqrt(m), m = the row's number of REAL source tokens (undoing the shrinkage of averaging m vectors,
assuming uniform attention); the gradients reaching the encoder through z^u are scaled by 1/L, the number of
attention mechanisms (the source embeddings e, which reach the decoder through z^u + e, are excluded).

Initialisation (§3.5). Embeddings ~ N(0, 0.1); a layer with n_l inputs per output unit has weights
~ N(0, sqrt(4p/n_l)) when a GLU follows (the convolutions) and N(0, sqrt(p/n_l)) otherwise, p the dropout retain
probability when dropout is applied to the layer's input (p = 1 otherwise); biases are zero. All linear maps and
convolutions are weight-normalised (Salimans & Kingma 2016, as in the paper's fairseq code): W = g · V/‖V‖ per output
unit, g initialised to ‖V‖ so that W starts as the initial V above.

Dropout (§3.5/§4.2), drawn from the ``"dropout"`` RNG stream when ``deterministic=False``: on the embeddings, on
the input of every convolution, and before the output projection to the vocabulary.

Choices the paper leaves open (taken from the authors' fairseq ``fconv`` code unless stated):

* h + proj(c) is scaled by sqrt(0.5), like every other two-branch sum (fairseq does the same).
* d = W_d h + b_d + g exactly as the paper's formula (fairseq additionally multiplies d by sqrt(0.5)).
* The encoder gradient scale is the paper's 1/L (fairseq uses 1/(2L)).
* ``kernel_width`` is shared by encoder and decoder and must be odd and ≥ 3: odd so that the encoder window
  i-k/2..i+k/2 is exactly centred, ≥ 3 so that the decoder convolution sees context (k = 1 would make it a
  position-wise network with an empty cache).
* Source and target positions count from 0 on every row; sequences are right-padded, so real tokens take positions
  0..len-1 whatever the padding.
"""

from __future__ import annotations

import functools
import math
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp

from attnjax.kernels import padding_mask, scaled_dot_product_attention
from attnjax.models.interface import DecoderOutput, source_mask

SQRT_HALF = math.sqrt(0.5)
EMBED_STD = 0.1  # §3.5: embeddings ~ N(0, 0.1)

__all__ = ["ConvS2S", "DecoderBlock", "EncoderBlock", "MultiStepAttention", "WeightNormConv", "WeightNormDense",
           "glu", "scale_gradient", "scaled_residual"]


# ------------------------------------------------------------------------------------------------- pure helpers


def glu(x):
  """Gated linear unit (Dauphin et al. 2017), v([A B]) = A ⊗ σ(B): ``[..., 2C] -> [..., C]``."""
  a, b = jnp.split(x, 2, axis=-1)
  return a * jax.nn.sigmoid(b)


def scaled_residual(x, residual):
  """(x + residual)·sqrt(0.5), §3.4: halves the variance of a sum of two branches of equal variance."""
  return (x + residual) * jnp.asarray(SQRT_HALF, x.dtype)


@functools.partial(jax.custom_vjp, nondiff_argnums=(1,))
def scale_gradient(x, scale: float):
  """Identity in the forward pass; multiplies the incoming gradient by ``scale`` in the backward pass.

  A custom VJP rather than ``x·s + stop_gradient(x·(1-s))`` so that the forward value is exactly x.
  """
  return x


def _scale_gradient_fwd(x, scale):
  return x, None


def _scale_gradient_bwd(scale, _, g):
  return (g * jnp.asarray(scale, g.dtype),)


scale_gradient.defvjp(_scale_gradient_fwd, _scale_gradient_bwd)


def _weight_norm(v, g, axes):
  """W = g · V/‖V‖, the norm taken over ``axes`` (all axes but the output one), so ‖W‖ = g per output unit."""
  return v * (g / jnp.sqrt(jnp.sum(jnp.square(v), axis=axes, keepdims=True)))


def _normal_with_std(std):
  return nn.initializers.normal(stddev=std)


# --------------------------------------------------------------------------------------------- weight-norm layers


class WeightNormDense(nn.Module):
  """Weight-normalised linear map ``[..., D_in] -> [..., features]``, V ~ N(0, sqrt(gain/D_in)) (§3.5).

  Params: ``kernel_v [D_in, features]``, ``kernel_g [features]`` (initialised to ‖V‖, so W = V at init), ``bias``.
  """
  features: int
  gain: float = 1.0  # p (retain probability) after dropout, 1 otherwise; see the module docstring
  dtype: Any = jnp.float32

  @nn.compact
  def __call__(self, x):
    fan_in = x.shape[-1]
    v = self.param("kernel_v", _normal_with_std(math.sqrt(self.gain / fan_in)), (fan_in, self.features), jnp.float32)
    g = self.param("kernel_g", lambda _: jnp.sqrt(jnp.sum(jnp.square(v), axis=0)))
    b = self.param("bias", nn.initializers.zeros, (self.features,), jnp.float32)
    w = _weight_norm(v, g, axes=(0,))
    return jnp.dot(x.astype(self.dtype), w.astype(self.dtype)) + b.astype(self.dtype)


class WeightNormConv(nn.Module):
  """Weight-normalised 1-D convolution WITHOUT padding: ``[B, N + k - 1, D_in] -> [B, N, features]``.

  The caller pads (centred for the encoder, causal for the decoder), which keeps one code path for teacher forcing
  and cached decoding. V ~ N(0, sqrt(gain/(k·D_in))); params ``kernel_v [k, D_in, features]``, ``kernel_g``, ``bias``.
  """
  features: int
  kernel_width: int
  gain: float = 4.0  # 4p: a GLU follows, which halves the variance (§3.5)
  dtype: Any = jnp.float32

  @nn.compact
  def __call__(self, x):
    fan_in = self.kernel_width * x.shape[-1]
    shape = (self.kernel_width, x.shape[-1], self.features)
    v = self.param("kernel_v", _normal_with_std(math.sqrt(self.gain / fan_in)), shape, jnp.float32)
    g = self.param("kernel_g", lambda _: jnp.sqrt(jnp.sum(jnp.square(v), axis=(0, 1))))
    b = self.param("bias", nn.initializers.zeros, (self.features,), jnp.float32)
    w = _weight_norm(v, g, axes=(0, 1))
    y = jax.lax.conv_general_dilated(x.astype(self.dtype), w.astype(self.dtype), window_strides=(1,), padding="VALID",
                                     dimension_numbers=("NWC", "WIO", "NWC"))
    return y + b.astype(self.dtype)


# ---------------------------------------------------------------------------------------------------- blocks


class EncoderBlock(nn.Module):
  """One encoder block, §3.2: h^l = (v(W^l [h^{l-1}_{i-k/2..i+k/2}] + b^l) + h^{l-1})·sqrt(0.5), ``[B, S, C]``.

  Padded positions (``mask`` False) are zeroed before the convolution, so they contribute exactly what the conv's
  own zero padding would: outputs at real positions do not depend on how much padding follows.
  """
  hidden_dim: int
  kernel_width: int
  dropout_rate: float = 0.0
  gain: float = 4.0
  dtype: Any = jnp.float32

  @nn.compact
  def __call__(self, x, mask, *, deterministic=True):
    residual = x
    x = jnp.where(mask[..., None], x, jnp.zeros((), x.dtype))
    x = nn.Dropout(self.dropout_rate)(x, deterministic=deterministic)
    half = (self.kernel_width - 1) // 2
    x = jnp.pad(x, ((0, 0), (half, half), (0, 0)))
    h = glu(WeightNormConv(2 * self.hidden_dim, self.kernel_width, gain=self.gain, dtype=self.dtype, name="conv")(x))
    return scaled_residual(h, residual)


class MultiStepAttention(nn.Module):
  """The attention of one decoder layer, §3.3 with the scaling of §3.4.

  ::

      d_i  = W_d h_i + b_d + g_i                               [B, T, E]
      a_ij = softmax_j(d_i · z_j) over real source positions  [B, T, S]
      c_i  = sqrt(m) Σ_j a_ij (z_j + e_j)                      [B, T, E]   (m·sqrt(1/m), m = real source length)
      out  = (h_i + W_c c_i + b_c)·sqrt(0.5)                   [B, T, C]

  The dot-product kernel runs with one head (layout ``[B, T, 1, E]``) and scale 1 (the paper does not divide by
  sqrt(E)). Returns ``(out, a)``.
  """
  embed_dim: int
  dtype: Any = jnp.float32

  @nn.compact
  def __call__(self, h, g, encoded, encoded_plus_embed, src_mask):
    d = WeightNormDense(self.embed_dim, dtype=self.dtype, name="in_proj")(h) + g.astype(self.dtype)
    keys = encoded.astype(self.dtype)[:, :, None, :]  # [B, S, 1, E]: one head
    values = encoded_plus_embed.astype(self.dtype)[:, :, None, :]
    context, weights = scaled_dot_product_attention(d[:, :, None, :], keys, values, mask=padding_mask(None, src_mask),
                                                    scale=1.0, return_weights=True)
    # m·sqrt(1/m) written as sqrt(m): equal for m > 0, and 0 (not 0·inf = NaN) for an all-padding row.
    m = jnp.sum(src_mask, axis=-1).astype(jnp.float32)
    context = context[:, :, 0, :] * jnp.sqrt(m)[:, None, None].astype(self.dtype)
    c = WeightNormDense(h.shape[-1], dtype=self.dtype, name="out_proj")(context)
    return scaled_residual(h, c), weights[:, 0]


class DecoderBlock(nn.Module):
  """One decoder layer: causal conv + GLU, multi-step attention, residual (§3.2–3.4), ``[B, T, C]``.

  ``state`` ``[B, k-1, C]`` holds the last k-1 inputs of this layer's convolution (zeros before the first token),
  so that the causal convolution of T new positions needs only them. Returns ``(out, new_state, attention)``.
  """
  hidden_dim: int
  embed_dim: int
  kernel_width: int
  dropout_rate: float = 0.0
  gain: float = 4.0
  dtype: Any = jnp.float32

  @nn.compact
  def __call__(self, x, g, memory, state, *, deterministic=True):
    residual = x
    x = nn.Dropout(self.dropout_rate)(x, deterministic=deterministic)
    # Causal: position i sees inputs i-k+1..i; the left context is the cached previous inputs (or zero padding).
    window = jnp.concatenate([state.astype(x.dtype), x], axis=1)
    new_state = window[:, -(self.kernel_width - 1):]
    h = glu(WeightNormConv(2 * self.hidden_dim, self.kernel_width, gain=self.gain, dtype=self.dtype,
                           name="conv")(window))
    h, weights = MultiStepAttention(self.embed_dim, dtype=self.dtype, name="attention")(
        h, g, memory["encoded"], memory["encoded_plus_embed"], memory["src_mask"])
    return scaled_residual(h, residual), new_state, weights


# ------------------------------------------------------------------------------------------------------ model


class ConvS2S(nn.Module):
  """Gehring et al. 2017 encoder-decoder implementing :mod:`attnjax.models.interface`.

  Memory (batch first): ``"src_mask" [B, S]`` bool, ``"encoded"`` z^u ``[B, S, E]`` (attention keys),
  ``"encoded_plus_embed"`` z^u + e ``[B, S, E]`` (attention values); both zero at padded positions.

  Cache (batch first): ``"index" [B]`` int32, the position of the next target token (for the learned position
  embedding), and ``"conv_inputs" [B, L, k-1, C]``, per decoder layer the last k-1 inputs of its convolution.
  Its size does not depend on the target length: ``max_length`` of ``init_cache`` is only checked.

  Defaults follow the paper's WMT'14 English-German depth (15 + 15 layers, k = 3) with a uniform width of 512.
  """
  src_vocab_size: int = 32000
  tgt_vocab_size: int = 32000
  embed_dim: int = 512
  hidden_dim: int = 512
  encoder_layers: int = 15
  decoder_layers: int = 15
  kernel_width: int = 3
  dropout_rate: float = 0.1
  max_length: int = 1024
  dtype: Any = jnp.float32

  def __post_init__(self):
    for name in ("src_vocab_size", "tgt_vocab_size", "embed_dim", "hidden_dim", "encoder_layers", "decoder_layers",
                 "max_length"):
      value = getattr(self, name)
      if not isinstance(value, int) or value <= 0:
        raise ValueError(f"{name} must be a positive int, got {value!r}")
    if not isinstance(self.kernel_width, int) or self.kernel_width < 3 or self.kernel_width % 2 == 0:
      raise ValueError(f"kernel_width must be an odd int >= 3 (centred encoder window, causal decoder context), "
                       f"got {self.kernel_width!r}")
    if not 0.0 <= self.dropout_rate < 1.0:
      raise ValueError(f"dropout_rate must be in [0, 1), got {self.dropout_rate!r}")
    super().__post_init__()

  def setup(self):
    keep = 1.0 - self.dropout_rate  # the paper's p, for the init of layers whose input went through dropout
    embed = functools.partial(nn.Embed, features=self.embed_dim, dtype=self.dtype,
                              embedding_init=_normal_with_std(EMBED_STD))
    self.src_embed = embed(self.src_vocab_size)
    self.src_positions = embed(self.max_length)
    self.tgt_embed = embed(self.tgt_vocab_size)
    self.tgt_positions = embed(self.max_length)
    self.dropout = nn.Dropout(self.dropout_rate)
    conv_gain = 4.0 * keep  # every conv input goes through dropout and a GLU follows
    self.encoder_in = WeightNormDense(self.hidden_dim, gain=keep, dtype=self.dtype)
    self.encoder_blocks = [
        EncoderBlock(self.hidden_dim, self.kernel_width, self.dropout_rate, gain=conv_gain, dtype=self.dtype)
        for _ in range(self.encoder_layers)]
    self.encoder_out = WeightNormDense(self.embed_dim, dtype=self.dtype)
    self.decoder_in = WeightNormDense(self.hidden_dim, gain=keep, dtype=self.dtype)
    self.decoder_blocks = [
        DecoderBlock(self.hidden_dim, self.embed_dim, self.kernel_width, self.dropout_rate, gain=conv_gain,
                     dtype=self.dtype)
        for _ in range(self.decoder_layers)]
    self.decoder_out = WeightNormDense(self.embed_dim, dtype=self.dtype)
    self.logits_proj = WeightNormDense(self.tgt_vocab_size, gain=keep, dtype=self.dtype)

  def _check_length(self, what, length):
    if length > self.max_length:
      raise ValueError(f"{what} length {length} exceeds max_length={self.max_length} (the size of the learned "
                       f"position embedding table)")

  def _embed(self, tokens, positions, token_table, position_table, deterministic):
    """e = w + p (§3.1), then dropout: ``[B, N] -> [B, N, E]``."""
    return self.dropout(token_table(tokens) + position_table(positions), deterministic=deterministic)

  # ------------------------------------------------------------------------------------------------ interface

  def encode(self, src, src_mask=None, *, deterministic=True):
    """``src [B, S]`` -> memory (see the class docstring)."""
    mask = source_mask(src, src_mask)
    self._check_length("source", src.shape[1])
    e = self._embed(src, jnp.arange(src.shape[1])[None, :], self.src_embed, self.src_positions, deterministic)
    x = self.encoder_in(e)
    for block in self.encoder_blocks:
      x = block(x, mask, deterministic=deterministic)
    z = jnp.where(mask[..., None], self.encoder_out(x), jnp.zeros((), x.dtype))
    # §3.4: the encoder receives gradient from L attention mechanisms; scale it by 1/L (not the embeddings in e).
    z = scale_gradient(z, 1.0 / self.decoder_layers)
    ze = jnp.where(mask[..., None], z + e, jnp.zeros((), z.dtype))
    return {"src_mask": mask, "encoded": z, "encoded_plus_embed": ze}

  def init_cache(self, memory, max_length):
    """Zeros = the causal convolutions' left padding; ``index`` 0. ``[B]`` and ``[B, L, k-1, C]``."""
    self._check_length("target", max_length)
    batch = memory["src_mask"].shape[0]
    return {
        "index": jnp.zeros((batch,), jnp.int32),
        "conv_inputs": jnp.zeros((batch, self.decoder_layers, self.kernel_width - 1, self.hidden_dim), self.dtype),
    }

  def decode(self, tgt_in, memory, cache=None, *, deterministic=True, return_attention=False):
    """``tgt_in [B, T]`` (teacher forcing, or continuing ``cache``) -> :class:`DecoderOutput` (logits ``[B, T, V]``)."""
    if tgt_in.ndim != 2:
      raise ValueError(f"tgt_in must be [B, T] token ids, got shape {tgt_in.shape}")
    batch, length = tgt_in.shape
    self._check_length("target", length)
    # With a cache the start index is traced, so index + T <= max_length cannot be checked here; init_cache checks
    # the decode length instead.
    start = jnp.zeros((batch,), jnp.int32) if cache is None else cache["index"]
    positions = start[:, None] + jnp.arange(length, dtype=jnp.int32)[None, :]
    g = self._embed(tgt_in, positions, self.tgt_embed, self.tgt_positions, deterministic)
    x = self.decoder_in(g)
    states = []
    weights = None
    for layer, block in enumerate(self.decoder_blocks):
      if cache is None:
        state = jnp.zeros((batch, self.kernel_width - 1, self.hidden_dim), self.dtype)
      else:
        state = cache["conv_inputs"][:, layer]
      x, state, weights = block(x, g, memory, state, deterministic=deterministic)
      states.append(state)
    y = self.dropout(self.decoder_out(x), deterministic=deterministic)
    logits = self.logits_proj(y).astype(jnp.float32)
    new_cache = None
    if cache is not None:
      new_cache = {"index": cache["index"] + length, "conv_inputs": jnp.stack(states, axis=1).astype(self.dtype)}
    return DecoderOutput(logits=logits, cache=new_cache, attention=weights if return_attention else None)

  def __call__(self, src, tgt_in, src_mask=None, *, deterministic=True):
    memory = self.encode(src, src_mask, deterministic=deterministic)
    return self.decode(tgt_in, memory, deterministic=deterministic).logits
