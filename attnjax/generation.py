"""Text generation from a decoder-only language model (:class:`attnjax.models.lm.DecoderLM`): greedy decoding and
sampling with temperature, top-k (Fan et al. 2018) and top-p / nucleus (Holtzman et al. 2020), one jit-compiled
program over the model's cache (a loop per length of the cache, which grows with the text), reproducible from a seed; and beam search (:func:`beam`), the project's one beam search
(:func:`attnjax.decoding.beam_search`) run over the language model.

At each step the next token is drawn from softmax(logits / T) restricted to the k most probable tokens (``top_k``)
and to the smallest set of most probable tokens whose probability reaches ``top_p`` (``top_p``), renormalised.
``temperature=0`` takes the argmax (greedy). PAD and BOS are never generated; a row that has produced EOS stops
(later positions are PAD).
"""

from __future__ import annotations

import functools

import flax.linen as nn
import jax
import jax.numpy as jnp

from attnjax import decoding
from attnjax.tokens import BOS_ID, EOS_ID, PAD_ID

NEG_INF = -1e30


def next_token(logits, rng, *, temperature: float, top_k: int, top_p: float, vocab_size: int | None = None,
               banned: tuple[int, ...] = ()):
  """``[B]`` int32: the argmax when ``temperature`` is 0, else a draw from the filtered distribution; never PAD, BOS,
  an id of ``banned`` or an id at or past ``vocab_size`` (the rows a model's table is padded with)."""
  logits = logits.astype(jnp.float32).at[..., jnp.asarray((PAD_ID, BOS_ID) + tuple(banned))].set(NEG_INF)
  if vocab_size is not None and vocab_size < logits.shape[-1]:
    logits = logits.at[..., vocab_size:].set(NEG_INF)
  if temperature == 0:
    return jnp.argmax(logits, axis=-1).astype(jnp.int32)
  filtered = decoding.filter_logits(logits, temperature=temperature, top_k=top_k, top_p=top_p)
  return jax.random.categorical(rng, filtered, axis=-1).astype(jnp.int32)


@functools.partial(jax.jit, static_argnames=("model", "max_new_tokens", "temperature", "top_k", "top_p",
                                             "vocab_size", "banned", "min_len"))
def generate(model, params, prompt, rng, *, max_new_tokens: int, temperature: float = 1.0, top_k: int = 0,
             top_p: float = 1.0, vocab_size: int | None = None, banned: tuple[int, ...] = (), min_len: int = 0):
  """``[B, max_new_tokens]`` int32 continuations of ``prompt [B, P]`` (all rows the same prompt length; BOS first),
  PAD after a row's EOS. ``rng``: a key; the same key gives the same text. ``vocab_size``: the tokenizer's (the
  model's table may be padded past it); ``banned``: more ids never generated; ``min_len``: EOS only after that many
  new tokens."""
  b, p = prompt.shape
  if max_new_tokens == 0:
    return jnp.full((b, 0), PAD_ID, jnp.int32)
  # the cache grows as the text does (decoding.CACHE_START positions past the prompt, then doubling), and the loop
  # ends when every row has ended
  lengths = decoding._cache_lengths(p + max_new_tokens, p + decoding.CACHE_START)  # pylint: disable=protected-access
  stages = tuple(n for n in lengths if n > p)
  init = lambda n: model.apply({"params": params}, b, n, method=model.init_cache)
  cache = init(stages[0])
  logits, cache = model.apply({"params": params}, prompt, cache, method=model.decode)
  logits = logits[:, -1]  # [B, V]: the distribution of the first new token
  sample = functools.partial(next_token, temperature=temperature, top_k=top_k, top_p=top_p, vocab_size=vocab_size,
                             banned=banned)

  def body(carry):
    i, out, logits, cache, done = carry
    if min_len:
      logits = jnp.where((i < min_len) & (jnp.arange(logits.shape[-1]) == EOS_ID), NEG_INF, logits)
    token = sample(logits, jax.random.fold_in(rng, i))
    token = jnp.where(done, PAD_ID, token)
    out = out.at[:, i].set(token)
    done = done | (token == EOS_ID)
    logits, cache = model.apply({"params": params}, token[:, None], cache, method=model.decode)
    return i + 1, out, logits[:, -1], cache, done

  out = jnp.full((b, max_new_tokens), PAD_ID, jnp.int32)
  state = (jnp.int32(0), out, logits, cache, jnp.zeros((b,), bool))
  # stage n writes the cache's positions below n: new token i goes to position p + i
  cond = lambda s: (s[0] < max_new_tokens) & ~jnp.all(s[4])

  def grow(s, n):
    return s[:3] + (decoding.grow_cache(s[3], jax.eval_shape(lambda: init(p + n)), "DecoderLM.init_cache"),) + s[4:]

  _, out, _, _, _ = decoding.staged_loop(cond, body, state, tuple(n - p for n in stages), lambda s: s[0], grow)
  return out


class _Continuation(nn.Module):
  """A language model behind the encoder-decoder interface that beam search drives: the "source" is the prompt,
  whose tokens but the last are prefilled into the cache, and the first decoder input is the prompt's last token."""
  lm: nn.Module

  def encode(self, src, src_mask=None):
    return {"src_mask": jnp.ones(src.shape, bool), "prompt": src}

  def init_cache(self, memory, max_length):
    prompt = memory["prompt"]
    cache = self.lm.init_cache(prompt.shape[0], prompt.shape[1] + max_length)
    if prompt.shape[1] > 1:
      _, cache = self.lm.decode(prompt[:, :-1], cache)
    return cache

  def decode(self, tgt_in, memory, cache=None, *, return_attention=False, deterministic=True):
    del memory, return_attention
    from attnjax.models.interface import DecoderOutput  # pylint: disable=g-import-not-at-top
    logits, cache = self.lm.decode(tgt_in, cache, deterministic=deterministic)
    return DecoderOutput(logits, cache, None)


@functools.partial(jax.jit, static_argnames=("model", "max_new_tokens", "beam_size", "alpha", "n_best",
                                             "vocab_size", "last", "min_len", "rules"))
def _beam(model, params, prompt, *, max_new_tokens, beam_size, alpha, n_best, vocab_size, last, min_len, rules):
  return decoding.beam_search(_Continuation(model), {"params": {"lm": params}}, prompt, beam_size=beam_size,
                              alpha=alpha, max_len_a=0.0, max_len_b=max_new_tokens, n_best=n_best, bos_id=last,
                              vocab_size=vocab_size, min_len=min_len, rules=rules)


def beam(model, params, prompt, *, max_new_tokens: int, beam_size: int = 4, alpha: float = 0.6, n_best: int = 1,
         vocab_size: int | None = None, min_len: int = 0, rules=None):
  """Beam search continuations of one prompt ``[1, P]`` (BOS first): ``DecodeResult`` with ``tokens [1, n_best,
  max_new_tokens]`` (EOS included, PAD after it), best first by the GNMT-normalised score (or as ``rules``, a
  :class:`attnjax.decoding.SearchRules`, say); ``min_len`` new tokens at least before EOS."""
  if prompt.shape[0] != 1:
    raise ValueError(f"beam search continues one prompt at a time, got a batch of {prompt.shape[0]}")
  return _beam(model, params, prompt, max_new_tokens=max_new_tokens, beam_size=beam_size, alpha=float(alpha),
               n_best=n_best, vocab_size=vocab_size, last=int(prompt[0, -1]), min_len=min_len,
               rules=decoding.ATTNJAX if rules is None else rules)
