"""A checkpoint's ``generation_config.json``: how ``transformers``' ``generate`` decodes with it, read into the
settings of attnjax's searches (:class:`attnjax.decoding.SearchRules` and the length limits), so that a model
imported from the library translates and continues text as the library does.

    settings = read_generation(model_dir, config)     # the table's ids; checked, nothing run
    settings.search(vocab_map, prompt_length=1)       # attnjax's ids: beam size, α, limits, rules

What is read: ``num_beams``, ``max_length`` / ``max_new_tokens``, ``min_length`` / ``min_new_tokens``,
``length_penalty`` and ``early_stopping`` (the library's beam-search rules), ``no_repeat_ngram_size``,
``bad_words_ids`` of one token and ``suppress_tokens`` (never generated; a bad word that is EOS is dropped, as the
library drops it), ``forced_bos_token_id`` and ``forced_eos_token_id`` (forced with the score 0), and
``renormalize_logits``; for sampling ``do_sample``, ``temperature``, ``top_k``, ``top_p``. Without the file, the same
keys of ``config.json`` (what the library falls back to), else its defaults (``max_length`` 20, greedy). Anything
else that would change the output (``repetition_penalty``, a bad word of several tokens, beam groups, ...) is refused
with one line naming it.
"""

from __future__ import annotations

import dataclasses
import json

from attnjax import fs
from attnjax.tokens import VocabularyMap

GENERATION_FILE = "generation_config.json"
# read from the file; the ids of the special tokens are checked against config.json instead
_READ = ("num_beams", "max_length", "max_new_tokens", "min_length", "min_new_tokens", "length_penalty",
         "early_stopping", "no_repeat_ngram_size", "bad_words_ids", "suppress_tokens", "forced_bos_token_id",
         "forced_eos_token_id", "renormalize_logits", "do_sample", "temperature", "top_k", "top_p")
_IDS = ("bos_token_id", "eos_token_id", "pad_token_id", "decoder_start_token_id")
_IGNORED = ("transformers_version", "_from_model_config", "use_cache", "num_return_sequences", "output_scores",
            "output_attentions", "output_hidden_states", "output_logits", "return_dict_in_generate", "max_time",
            "remove_invalid_values", "low_memory", "cache_implementation", "is_assistant", "trust_remote_code")


class GenerationError(ValueError):
  """A ``generation_config.json`` option that attnjax's searches do not reproduce: the message names it."""


@dataclasses.dataclass(frozen=True)
class GenerationSettings:
  """The library's generation settings, in the checkpoint's table ids (see the module docstring)."""
  num_beams: int = 1
  max_length: int = 20
  max_new_tokens: int | None = None
  min_length: int = 0
  min_new_tokens: int | None = None
  length_penalty: float = 1.0
  early_stopping: bool | str = False
  no_repeat_ngram_size: int = 0
  banned: tuple[int, ...] = ()
  forced_bos_token_id: int | None = None
  forced_eos_token_id: int | None = None
  renormalize_logits: bool = False
  do_sample: bool = False
  temperature: float = 1.0
  top_k: int = 50
  top_p: float = 1.0

  def new_tokens(self, prompt_length: int) -> int:
    """The most tokens generated after ``prompt_length`` (an encoder-decoder's: 1, its decoder start)."""
    return self.max_new_tokens if self.max_new_tokens is not None else max(self.max_length - prompt_length, 1)

  def min_new(self, prompt_length: int) -> int:
    """The fewest tokens generated before EOS may be."""
    return max(self.min_new_tokens or 0, self.min_length - prompt_length, 0)

  def rules(self, vocab_map: VocabularyMap, prompt_length: int) -> dict:
    """:class:`attnjax.decoding.SearchRules`' fields in attnjax's ids (a dict: this layer knows no search)."""
    banned = sorted(set(vocab_map.to_attnjax(self.banned)))
    first = None
    if self.forced_bos_token_id is not None and prompt_length == 1:  # the library forces it at length 1 only
      first = vocab_map.to_attnjax([self.forced_bos_token_id])[0]
    stop = {True: "first", False: "heuristic", "never": "bound"}[self.early_stopping]
    return dict(banned=tuple(banned), penalty="length", stop=stop, first_token=first,
                at_limit="forced_eos" if self.forced_eos_token_id is not None else "stop",
                renormalize=self.renormalize_logits)


def _settings_from(values: dict, path: str, eos: int) -> GenerationSettings:
  unknown = {k: v for k, v in values.items() if k not in _READ + _IDS + _IGNORED
             and v not in (None, False, 0, 1, 1.0, [], {}, "")}
  if unknown:
    key = sorted(unknown)[0]
    raise GenerationError(f"{path}: {key}={unknown[key]!r} is not reproduced by attnjax's searches")
  read = {k: values[k] for k in _READ if values.get(k) is not None}
  banned = []
  for word in read.pop("bad_words_ids", []):
    if len(word) != 1:
      raise GenerationError(f"{path}: bad_words_ids {word}: only bad words of one token are banned")
    if word[0] != eos:  # the library never bans EOS this way
      banned.append(int(word[0]))
  banned += [int(i) for i in read.pop("suppress_tokens", [])]
  if read.get("early_stopping", False) not in (True, False, "never"):
    raise GenerationError(f"{path}: early_stopping={read['early_stopping']!r}: True, False or 'never'")
  forced_eos = read.get("forced_eos_token_id")
  if isinstance(forced_eos, list):
    forced_eos = forced_eos[0] if len(forced_eos) == 1 else forced_eos
    read["forced_eos_token_id"] = forced_eos
  if forced_eos is not None and forced_eos != eos:
    raise GenerationError(f"{path}: forced_eos_token_id={forced_eos} is not the EOS id {eos}")
  settings = GenerationSettings(**read, banned=tuple(banned))
  if settings.num_beams < 1 or settings.num_beams > 1 and settings.do_sample:
    raise GenerationError(f"{path}: num_beams={settings.num_beams} with do_sample={settings.do_sample}: beam search "
                          "is not sampled here")
  return settings


def read_generation(model_dir, config: dict) -> GenerationSettings:
  """The directory's generation settings (see the module docstring); ``config``: its ``config.json``, whose EOS id
  is the searches' EOS (one id: a list of several is refused)."""
  path = fs.join(model_dir, GENERATION_FILE)
  if fs.exists(path):
    values = json.loads(fs.read_text(path))
  else:  # the library's fallback: the generation keys of config.json
    path = fs.join(model_dir, "config.json")
    values = {k: config[k] for k in _READ if k in config}
  eos = values.get("eos_token_id", config.get("eos_token_id"))
  if isinstance(eos, list):
    if len(eos) != 1:
      raise GenerationError(f"{path}: eos_token_id={eos}: one EOS id is searched for, not several")
    eos = eos[0]
  if eos != config.get("eos_token_id") and not (isinstance(config.get("eos_token_id"), list)
                                                and [eos] == config["eos_token_id"]):
    raise GenerationError(f"{path}: eos_token_id={eos} differs from config.json's {config.get('eos_token_id')}")
  return _settings_from(values, str(path), eos)

