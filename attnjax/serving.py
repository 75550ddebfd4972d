"""A trained model as an object: loaded once, then asked for batches of strings with per-call decoding options.

    import attnjax
    model = attnjax.load("runs/multi30k")             # a workdir, or a Hugging Face directory (Marian, Pegasus, GPT-2)
    model.translate(["A man is riding a bike ."])                    # the workdir's own search (eval.*)
    model.translate(lines, beam_size=8, alpha=1.0, n_best=4)         # n-best lists: out.nbest[i] = [(text, score)]
    model.translate(lines, decode="greedy", min_len=5, no_repeat_ngram_size=3)
    model.translate(lines, temperature=0.8, top_p=0.9, n_best=3, seed=1)    # three samples a sentence
    lm = attnjax.load("runs/lm")
    lm.generate(["The history of"], max_new_tokens=40, temperature=0.8, top_k=40)

:func:`load` reads the configuration, the vocabularies and the parameters once (:func:`attnjax.trained.load_workdir`)
and returns a :class:`Translator` (an encoder-decoder: translation and summarization) or a :class:`Generator` (a
decoder-only language model). Each distinct set of decoding options builds its search once and keeps it, so repeated
calls reuse the compiled programs (one per batch and width bucket). ``attnjax.translate`` and ``attnjax.generate``
are command lines over these classes.

An option left at ``None`` takes the model's own setting: a workdir's ``config.eval`` (``decode``, ``beam_size``,
``alpha``, ``max_len_a``, ``max_len_b``, ``min_len``, ``no_repeat_ngram_size``), or a Hugging Face directory's
``generation_config.json``, so that its output is the library's ``generate``. Giving ``temperature``, ``top_k`` or
``top_p`` without ``decode`` samples.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Sequence

from attnjax import inference, trained
from attnjax.data import squad

__all__ = ["load", "Translator", "Generator", "Translations"]

Translations = inference.Translations
_SAMPLING = ("temperature", "top_k", "top_p")


def load(path: str, *, checkpoint: str = "best", average_last: int | None = None, weights: str = "auto"):
  """The model of ``path`` (a training workdir, local or a bucket URL, or a Hugging Face checkpoint directory)
  ready to decode: a :class:`Translator` for an encoder-decoder, a :class:`Generator` for a ``decoder_lm``.

  Args:
    path: the workdir or directory.
    checkpoint: "best", "latest" or a step number (a workdir's).
    average_last: average the parameters of the last N kept checkpoints.
    weights: "auto", "average" or "params" (:func:`attnjax.trained.load_workdir`).
  """
  config = trained.load_config(path)
  if config.data.source in squad.QA_SOURCES:
    raise ValueError(f"{path} holds an extractive QA model (model.name={config.model.name!r}): it answers questions "
                     "about a context, use python -m attnjax.evaluate")
  if config.model.name == "bert_mlm":
    raise ValueError(f"{path} holds a masked language model (model.name={config.model.name!r}): it decodes nothing; "
                     "fine-tune it (train.init_from) or export it (python -m attnjax.export)")
  loaded = trained.load_workdir(path, checkpoint=checkpoint, average_last=average_last, weights=weights)
  return Generator(loaded) if loaded.config.model.name == "decoder_lm" else Translator(loaded)


@dataclasses.dataclass(frozen=True)
class _Search:
  """One set of decoding options, resolved (the key of a kept decoder)."""
  decode: str
  beam_size: int
  alpha: float
  max_len_a: float
  max_len_b: int
  min_len: int
  no_repeat_ngram_size: int
  n_best: int
  temperature: float
  top_k: int
  top_p: float


class Translator:
  """An encoder-decoder model loaded once (see the module docstring); ``loaded``: :func:`attnjax.trained.load_workdir`'s
  result. :meth:`translate` and :meth:`summarize` are the same search."""

  def __init__(self, loaded: trained.Loaded):
    if loaded.config.model.name == "decoder_lm":
      raise ValueError(f"{loaded.workdir}: a decoder_lm continues text; use Generator")
    self.loaded = loaded
    self.config = loaded.config
    self._decoders: dict[_Search, inference.Decoder] = {}
    e = self.config.eval
    rules = e.get("rules")
    self._rules = inference.search_rules(rules)
    g = None if loaded.checkpoint is None else loaded.checkpoint.generation
    sampled = g is not None and g.do_sample
    self.defaults = dict(decode="sample" if sampled else e.decode, beam_size=int(e.beam_size), alpha=float(e.alpha),
                         max_len_a=float(e.max_len_a), max_len_b=int(e.max_len_b), min_len=int(e.get("min_len", 0)),
                         no_repeat_ngram_size=int(e.get("no_repeat_ngram_size", 0)),
                         temperature=float(g.temperature) if sampled else 1.0, top_k=int(g.top_k) if sampled else 0,
                         top_p=float(g.top_p) if sampled else 1.0)

  @property
  def max_src_len(self) -> int:
    return int(self.config.data.max_src_len)

  def search(self, *, decode: str | None = None, n_best: int = 1, **options) -> _Search:
    """The options of a call, with the model's own settings for those left at None."""
    unknown = sorted(set(options) - set(self.defaults))
    if unknown:
      raise TypeError(f"unknown decoding option(s) {unknown}; the options are {sorted(self.defaults)} and n_best")
    if decode is None:
      decode = "sample" if any(options.get(k) is not None for k in _SAMPLING) else self.defaults["decode"]
    if decode not in inference.DECODES:
      raise ValueError(f"decode must be one of {', '.join(inference.DECODES)}, got {decode!r}")
    values = {k: (self.defaults[k] if options.get(k) is None else options[k]) for k in self.defaults if k != "decode"}
    if decode == "beam" and not 1 <= n_best <= values["beam_size"]:
      raise ValueError(f"n_best must be in [1, beam_size={values['beam_size']}], got {n_best}")
    return _Search(decode=decode, n_best=int(n_best), **values)

  def decoder(self, search: _Search) -> inference.Decoder:
    """The search's decoder, built at its first use and kept (with its compiled programs)."""
    if search not in self._decoders:
      self._decoders[search] = inference.Decoder(
          self.loaded.model, self.loaded.mesh, decode=search.decode, beam_size=search.beam_size, alpha=search.alpha,
          max_len_a=search.max_len_a, max_len_b=search.max_len_b, n_best=search.n_best,
          vocab_size=self.loaded.vocabularies.tgt.size, min_len=search.min_len,
          no_repeat_ngram_size=search.no_repeat_ngram_size, rules=self._rules, temperature=search.temperature,
          top_k=search.top_k, top_p=search.top_p)
    return self._decoders[search]

  def translate(self, texts: Sequence[str], *, decode: str | None = None, beam_size: int | None = None,
                alpha: float | None = None, n_best: int = 1, min_len: int | None = None,
                no_repeat_ngram_size: int | None = None, max_len_a: float | None = None,
                max_len_b: int | None = None, temperature: float | None = None, top_k: int | None = None,
                top_p: float | None = None, seed: int = 0, batch_size: int | None = None,
                log_progress: bool = True) -> Translations:
    """The outputs of ``texts``, one a text, in order (:class:`attnjax.inference.Translations`).

    Args:
      texts: source strings; an empty one gives ""; one longer than ``data.max_src_len`` tokens is truncated and
        counted in ``truncated_sources``.
      decode: "beam", "greedy" or "sample".
      beam_size, alpha: beam search's K and GNMT length-penalty exponent.
      n_best: hypotheses a text (beam: best first, at most K; sampling: that many samples, in draw order).
      min_len: EOS is banned before this many tokens; no_repeat_ngram_size: no n-gram of it twice (0: off).
      max_len_a, max_len_b: an output has at most ``a · source length + b`` tokens.
      temperature, top_k, top_p: sampling (:func:`attnjax.decoding.sample_search`).
      seed: sampling's seed: the k-th sample of a text depends only on it and the text.
      batch_size: sentences per decoding step (default ``eval.batch_size``).
      log_progress: log the progress of long calls.
    """
    import jax  # pylint: disable=g-import-not-at-top
    if isinstance(texts, str):
      raise TypeError("texts must be a sequence of strings, got one string (wrap it in a list)")
    search = self.search(decode=decode, beam_size=beam_size, alpha=alpha, n_best=n_best, min_len=min_len,
                         no_repeat_ngram_size=no_repeat_ngram_size, max_len_a=max_len_a, max_len_b=max_len_b,
                         temperature=temperature, top_k=top_k, top_p=top_p)
    vocab = self.loaded.vocabularies
    return inference.translate_texts(self.decoder(search), self.loaded.params, vocab.src, vocab.tgt, list(texts),
                                     max_src_len=self.max_src_len,
                                     batch_size=int(batch_size or self.config.eval.batch_size),
                                     rng=jax.random.PRNGKey(seed), log_progress=log_progress)

  summarize = translate


class Generator:
  """A decoder-only language model loaded once (see the module docstring)."""

  def __init__(self, loaded: trained.Loaded):
    if loaded.config.model.name != "decoder_lm":
      raise ValueError(f"{loaded.workdir}: model.name is {loaded.config.model.name!r}; a Generator continues text "
                       "with a decoder_lm (Translator decodes the encoder-decoder models)")
    self.loaded = loaded
    self.config = loaded.config
    self.vocab = loaded.vocabularies.tgt

  def prompt_ids(self, text: str) -> list[int]:
    """The prompt's ids: BOS and the text's for attnjax's vocabularies, a checkpoint tokenizer's own (GPT-2: no
    BOS)."""
    if hasattr(self.vocab, "prompt_ids"):
      ids = self.vocab.prompt_ids(text)
      if not ids:
        raise ValueError(f"the prompt {text!r} gives no token: the checkpoint's tokenizer adds no BOS to start from")
      return ids
    from attnjax.tokens import BOS_ID  # pylint: disable=g-import-not-at-top
    return [BOS_ID] + self.vocab.encode(text)

  def search(self, prompt_length: int, *, max_new_tokens: int | None = None, temperature: float | None = None,
             top_k: int | None = None, top_p: float | None = None, beam_size: int | None = None,
             alpha: float | None = None) -> dict[str, Any]:
    """How to continue a prompt: the options given, and for those left at None a Hugging Face checkpoint's
    ``generation_config.json`` (with its :class:`attnjax.decoding.SearchRules`) or attnjax's defaults (sampling at
    temperature 1 from the whole distribution, 100 new tokens, α = 0.6)."""
    from attnjax import decoding  # pylint: disable=g-import-not-at-top
    g = None if self.loaded.checkpoint is None else self.loaded.checkpoint.generation
    sampled = g is not None and g.do_sample
    pick = lambda given, own, default: given if given is not None else (default if g is None else own)
    s = dict(beam_size=pick(beam_size, g and (g.num_beams if g.num_beams > 1 else 0), 0),
             temperature=pick(temperature, g and (g.temperature if sampled else 0.0), 1.0),
             top_k=pick(top_k, g and (g.top_k if sampled else 0), 0),
             top_p=pick(top_p, g and (g.top_p if sampled else 1.0), 1.0),
             max_new=pick(max_new_tokens, g and g.new_tokens(prompt_length), 100),
             alpha=pick(alpha, g and g.length_penalty, 0.6),
             min_len=0 if g is None else g.min_new(prompt_length), rules=decoding.ATTNJAX)
    if s["temperature"] < 0 or not 0 < s["top_p"] <= 1 or s["top_k"] < 0 or s["beam_size"] < 0:
      raise ValueError(f"temperature must be >= 0, top_p in (0, 1], top_k >= 0 and beam_size >= 0; got "
                       f"temperature={s['temperature']}, top_p={s['top_p']}, top_k={s['top_k']}, "
                       f"beam_size={s['beam_size']}")
    if g is not None:
      s["rules"] = decoding.SearchRules(**g.rules(self.loaded.checkpoint.vocab_map, prompt_length))
      if not s["beam_size"] and (s["rules"].first_token is not None or s["rules"].at_limit == "forced_eos"):
        raise ValueError(f"{self.loaded.workdir}: generation_config.json forces a first or last token, which attnjax "
                         "applies in beam search only (beam_size)")
    return s

  def continue_ids(self, ids: list[int], *, num_samples: int = 1, seed: int = 0, key=None, **options):
    """``[num_samples, new tokens]`` int32 continuations of one prompt's ids (PAD after EOS)."""
    import jax  # pylint: disable=g-import-not-at-top
    import numpy as np  # pylint: disable=g-import-not-at-top
    from attnjax import generation  # pylint: disable=g-import-not-at-top
    if num_samples < 1:
      raise ValueError(f"num_samples must be >= 1, got {num_samples}")
    s = self.search(len(ids), **options)
    loaded, prompt = self.loaded, np.asarray([ids], np.int32)
    if s["beam_size"]:
      return generation.beam(loaded.model, loaded.params, prompt, max_new_tokens=s["max_new"],
                             beam_size=s["beam_size"], alpha=s["alpha"], n_best=num_samples,
                             vocab_size=self.vocab.size, min_len=s["min_len"], rules=s["rules"]).tokens[0]
    return generation.generate(loaded.model, loaded.params, np.repeat(prompt, num_samples, axis=0),
                               jax.random.PRNGKey(seed) if key is None else key, max_new_tokens=s["max_new"],
                               temperature=s["temperature"], top_k=s["top_k"], top_p=s["top_p"],
                               vocab_size=self.vocab.size, banned=s["rules"].banned, min_len=s["min_len"])

  def text(self, prompt: str, ids: list[int], continuation) -> str:
    """One line: the prompt and a continuation (a checkpoint tokenizer's decoding of both, as the library's)."""
    import numpy as np  # pylint: disable=g-import-not-at-top
    from attnjax.tokens import EOS_ID, PAD_ID  # pylint: disable=g-import-not-at-top
    row = np.asarray(continuation)
    if hasattr(self.vocab, "prompt_ids"):
      return self.vocab.decode(list(ids) + row.tolist()).replace("\n", " ")
    tokens = [int(t) for t in row if t not in (PAD_ID, EOS_ID)]
    return f"{prompt}{' ' if tokens else ''}{self.vocab.decode(tokens)}".replace("\n", " ")

  def generate(self, prompts: Sequence[str], *, max_new_tokens: int | None = None, temperature: float | None = None,
               top_k: int | None = None, top_p: float | None = None, num_samples: int = 1, seed: int = 0,
               beam_size: int | None = None, alpha: float | None = None) -> list[list[str]]:
    """For each prompt, ``num_samples`` lines of prompt and continuation (beam search: the n-best list, best first).

    Args:
      prompts: the prompts.
      max_new_tokens: tokens generated after each prompt.
      temperature: 0 greedy, else sampling at it; top_k, top_p: the sampling cuts (0 / 1: none).
      num_samples: continuations a prompt.
      seed: the i-th prompt samples with ``fold_in(PRNGKey(seed), i)``.
      beam_size: beam search with this many beams instead of sampling (0: sample); alpha: its length penalty.
    """
    import jax  # pylint: disable=g-import-not-at-top
    if isinstance(prompts, str):
      raise TypeError("prompts must be a sequence of strings, got one string (wrap it in a list)")
    key = jax.random.PRNGKey(seed)
    out = []
    for i, prompt in enumerate(prompts):
      ids = self.prompt_ids(prompt)
      rows = self.continue_ids(ids, num_samples=num_samples, key=jax.random.fold_in(key, i),
                               max_new_tokens=max_new_tokens, temperature=temperature, top_k=top_k, top_p=top_p,
                               beam_size=beam_size, alpha=alpha)
      out.append([self.text(prompt, ids, row) for row in rows])
    return out
