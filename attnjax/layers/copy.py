"""Copying from the source and coverage: See, Liu & Manning (2017), "Get To The Point: Summarization with
Pointer-Generator Networks", and the Transformer's copy attention (Gehrmann et al. 2018; OpenNMT-py's ``copy_attn``).

The pointer-generator mixes generating from the vocabulary with copying a source token (See et al. eq. 8-9)::

    p_gen = σ(w_h·h*_t + w_s·s_t + w_x·x_t + b_ptr)
    P(w)  = p_gen·P_vocab(w) + (1 − p_gen)·Σ_{i: w_i = w} a_t,i

with h*_t the context vector, s_t the decoder state, x_t the decoder input and a_t the attention over the source.
Coverage (eq. 10-12) sums the attention of the steps before, lets it enter the next attention scores, and penalises
attending again where attention has already been::

    c_t = Σ_{t' < t} a_t'              (c_0 = 0)
    e_t,i = v^T tanh(W_h h_i + W_s s_t + w_c c_t,i + b_attn)
    covloss_t = Σ_i min(a_t,i, c_t,i),   loss_t = −log P(w*_t) + λ·covloss_t   (λ = 1)

**No extended vocabulary.** See et al. extend a 50k *word* vocabulary with each article's out-of-vocabulary words, so
that a rare name can be copied though it cannot be generated. Here source and summary share one SentencePiece
vocabulary of subword pieces that covers every character of the training text: a rare word is a sequence of pieces
that are all in the vocabulary, so copying piece by piece reaches it, and the distribution stays over the fixed V
(which keeps beam search, the loss and sharding free of per-article vocabularies). The mixture needs the source ids to
be target ids: copy models require one shared vocabulary.

The models return ``log P(w)`` in place of logits (the interface's contract for copy models): log-softmax leaves it
unchanged, so the loss and the beam search need no special case.
"""

from __future__ import annotations

from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp

# added inside the log: a token neither in the source nor given mass by the vocabulary softmax (exp underflow) keeps
# a finite log-probability (OpenNMT-py adds 1e-20 likewise); the total mass grows by at most V·1e-20
_EPS = 1e-20


def copy_distribution(attention, src_ids, vocab_size: int):
  """Σ_{i: w_i = w} a_t,i for every w: the attention mass on each vocabulary id.

  Args:
    attention: ``[B, T, S]`` attention weights (zero on padding).
    src_ids: ``[B, S]`` int source ids, each < ``vocab_size``.
    vocab_size: V.

  Returns:
    ``[B, T, V]`` float32.
  """
  if attention.ndim != 3 or src_ids.ndim != 2 or attention.shape[::2] != src_ids.shape:
    raise ValueError(f"attention must be [B, T, S] and src_ids [B, S], got {attention.shape} and {src_ids.shape}")
  batch, steps, _ = attention.shape
  index = jnp.broadcast_to(src_ids[:, None, :], attention.shape)
  rows = jnp.arange(batch)[:, None, None]
  cols = jnp.arange(steps)[None, :, None]
  return jnp.zeros((batch, steps, vocab_size), jnp.float32).at[rows, cols, index].add(attention.astype(jnp.float32))


def mix_log_probs(vocab_logits, p_gen, attention, src_ids):
  """log P(w) = log(p_gen·softmax(vocab_logits)(w) + (1 − p_gen)·Σ_{i: w_i = w} a_t,i) (See et al. eq. 9).

  Args:
    vocab_logits: ``[B, T, V]``.
    p_gen: ``[B, T]`` in (0, 1).
    attention: ``[B, T, S]``.
    src_ids: ``[B, S]``.

  Returns:
    ``[B, T, V]`` float32 log-probabilities.
  """
  p_vocab = jax.nn.softmax(vocab_logits.astype(jnp.float32), axis=-1)
  p_copy = copy_distribution(attention, src_ids, vocab_logits.shape[-1])
  p_gen = p_gen.astype(jnp.float32)[..., None]
  return jnp.log(p_gen * p_vocab + (1.0 - p_gen) * p_copy + _EPS)


def coverage_loss(attention, coverage):
  """covloss_t = Σ_i min(a_t,i, c_t,i) (See et al. eq. 12): ``[..., S]`` each -> ``[...]`` float32."""
  return jnp.sum(jnp.minimum(attention.astype(jnp.float32), coverage.astype(jnp.float32)), axis=-1)


class PointerGate(nn.Module):
  """p_gen = σ(Σ_k w_k·x_k + b_ptr) over the given inputs (See et al. eq. 8: the context h*_t, the state s_t and the
  input x_t; a Transformer passes its decoder output alone): one weight vector per input, one bias.

  Returns ``[...]`` (the inputs' shared leading shape) in float32.
  """
  dtype: Any = jnp.float32

  @nn.compact
  def __call__(self, *inputs):
    total = self.param("b_ptr", nn.initializers.zeros_init(), (1,), jnp.float32)
    for k, x in enumerate(inputs):
      w = self.param(f"w_{k}", nn.initializers.lecun_normal(), (x.shape[-1], 1), jnp.float32)
      total = total + jnp.dot(x.astype(self.dtype), w.astype(self.dtype)).astype(jnp.float32)
    return jax.nn.sigmoid(total[..., 0])
