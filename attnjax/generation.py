"""Text generation from a decoder-only language model (:class:`attnjax.models.lm.DecoderLM`): greedy decoding and
sampling with temperature, top-k (Fan et al. 2018) and top-p / nucleus (Holtzman et al. 2020), one jit-compiled loop
over the model's cache, reproducible from a seed.

At each step the next token is drawn from softmax(logits / T) restricted to the k most probable tokens (``top_k``)
and to the smallest set of most probable tokens whose probability reaches ``top_p`` (``top_p``), renormalised.
``temperature=0`` takes the argmax (greedy). PAD and BOS are never generated; a row that has produced EOS stops
(later positions are PAD).
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp

from attnjax.tokens import BOS_ID, EOS_ID, PAD_ID

NEG_INF = -1e30


def filter_logits(logits, *, temperature: float = 1.0, top_k: int = 0, top_p: float = 1.0):
  """``logits [..., V]`` float32 scaled by ``1/temperature`` with the tokens outside top-k and top-p set to
  ``NEG_INF`` (``top_k=0``, ``top_p=1``: no restriction). ``temperature`` must be positive here."""
  logits = logits.astype(jnp.float32) / temperature
  vocab = logits.shape[-1]
  if top_k and top_k < vocab:
    kth = jax.lax.top_k(logits, top_k)[0][..., -1:]
    logits = jnp.where(logits < kth, NEG_INF, logits)
  if top_p < 1.0:
    order = jnp.argsort(-logits, axis=-1)
    sorted_logits = jnp.take_along_axis(logits, order, axis=-1)
    probs = jax.nn.softmax(sorted_logits, axis=-1)
    before = jnp.cumsum(probs, axis=-1) - probs  # the mass of the more probable tokens
    keep_sorted = before < top_p  # the smallest prefix whose mass reaches top_p (the first token always)
    keep = jnp.take_along_axis(keep_sorted, jnp.argsort(order, axis=-1), axis=-1)  # back in vocabulary order
    logits = jnp.where(keep, logits, NEG_INF)
  return logits


def next_token(logits, rng, *, temperature: float, top_k: int, top_p: float, vocab_size: int | None = None):
  """``[B]`` int32: the argmax when ``temperature`` is 0, else a draw from the filtered distribution; never PAD, BOS
  or an id at or past ``vocab_size`` (the rows a model's table is padded with)."""
  logits = logits.astype(jnp.float32).at[..., PAD_ID].set(NEG_INF).at[..., BOS_ID].set(NEG_INF)
  if vocab_size is not None and vocab_size < logits.shape[-1]:
    logits = logits.at[..., vocab_size:].set(NEG_INF)
  if temperature == 0:
    return jnp.argmax(logits, axis=-1).astype(jnp.int32)
  filtered = filter_logits(logits, temperature=temperature, top_k=top_k, top_p=top_p)
  return jax.random.categorical(rng, filtered, axis=-1).astype(jnp.int32)


@functools.partial(jax.jit, static_argnames=("model", "max_new_tokens", "temperature", "top_k", "top_p",
                                             "vocab_size"))
def generate(model, params, prompt, rng, *, max_new_tokens: int, temperature: float = 1.0, top_k: int = 0,
             top_p: float = 1.0, vocab_size: int | None = None):
  """``[B, max_new_tokens]`` int32 continuations of ``prompt [B, P]`` (all rows the same prompt length; BOS first),
  PAD after a row's EOS. ``rng``: a key; the same key gives the same text. ``vocab_size``: the tokenizer's (the
  model's table may be padded past it)."""
  b, p = prompt.shape
  cache = model.apply({"params": params}, b, p + max_new_tokens, method=model.init_cache)
  logits, cache = model.apply({"params": params}, prompt, cache, method=model.decode)
  logits = logits[:, -1]  # [B, V]: the distribution of the first new token
  sample = functools.partial(next_token, temperature=temperature, top_k=top_k, top_p=top_p, vocab_size=vocab_size)

  def body(i, carry):
    out, logits, cache, done = carry
    token = sample(logits, jax.random.fold_in(rng, i))
    token = jnp.where(done, PAD_ID, token)
    out = out.at[:, i].set(token)
    done = done | (token == EOS_ID)
    logits, cache = model.apply({"params": params}, token[:, None], cache, method=model.decode)
    return out, logits[:, -1], cache, done

  out = jnp.full((b, max_new_tokens), PAD_ID, jnp.int32)
  out, _, _, _ = jax.lax.fori_loop(0, max_new_tokens, body, (out, logits, cache, jnp.zeros((b,), bool)))
  return out
