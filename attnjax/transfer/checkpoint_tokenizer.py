"""The tokenizer of a Hugging Face checkpoint directory, as an attnjax vocabulary over its model's ids.

Two kinds of files, read without ``transformers``:

* ``tokenizer.json`` (every "fast" tokenizer: GPT-2's byte-level BPE, Pegasus's, attnjax's own exports), run by the
  ``tokenizers`` library as ``transformers`` runs it: the special tokens of its post-processor added to an input
  (``add_special_tokens``), skipped on decoding, and ``clean_up_tokenization_spaces`` applied where
  ``tokenizer_config.json`` asks for it (by transformers 5's rule: never to a BPE model's text);
* ``MarianTokenizer``'s ``source.spm`` + ``vocab.json`` (opus-mt): a text's leading language code (``>>fr<<``) kept
  as one token, the rest cut into pieces by SentencePiece, each piece numbered by ``vocab.json`` (``<unk>`` where it
  is not there), and ``</s>`` appended; decoding drops the special tokens and joins the pieces again (the source
  model decodes, as the library's does for one shared vocabulary).

:class:`CheckpointVocab` turns the checkpoint's ids into attnjax's (:class:`attnjax.tokens.VocabularyMap`): a source
side encodes as the library does for a model's input (Marian's ``</s>`` appended), a target side gives the content
alone (the data pipeline adds BOS and EOS), and ``decode`` stops at EOS as every attnjax vocabulary does.
"""

from __future__ import annotations

import hashlib
import json
import re

from attnjax import fs
from attnjax.tokens import EOS_ID, VocabularyMap

TOKENIZER_FILE, TOKENIZER_CONFIG_FILE = "tokenizer.json", "tokenizer_config.json"
MARIAN_FILES = ("source.spm", "target.spm", "vocab.json")
_LANGUAGE_CODE = re.compile(r">>[^<>]+<<")


class TokenizerError(ValueError):
  """A checkpoint's tokenizer files that cannot be read or run as the library runs them: the message names them."""


def clean_up_tokenization(text: str) -> str:
  """``transformers``' ``clean_up_tokenization``: no space before punctuation and English contractions."""
  for before, after in ((" .", "."), (" ?", "?"), (" !", "!"), (" ,", ","), (" ' ", "'"), (" n't", "n't"),
                        (" 'm", "'m"), (" 's", "'s"), (" 've", "'ve"), (" 're", "'re")):
    text = text.replace(before, after)
  return text


class _FastTokenizer:
  """``tokenizer.json`` run by ``tokenizers``."""

  def __init__(self, model_dir, settings: dict):
    from tokenizers import Tokenizer  # pylint: disable=g-import-not-at-top
    self.files = (fs.read_bytes(fs.join(model_dir, TOKENIZER_FILE)),)
    self._tokenizer = Tokenizer.from_str(self.files[0].decode("utf-8"))
    self._tokenizer.no_padding()
    self._tokenizer.no_truncation()
    # transformers 5 leaves a BPE model's text alone (the clean-up would delete spaces that belong to it)
    bpe = json.loads(self.files[0]).get("model", {}).get("type") == "BPE"
    self._clean_up = bool(settings.get("clean_up_tokenization_spaces", False)) and (not bpe or bool(
        settings.get("clean_up_tokenization_spaces_for_bpe_even_though_it_will_corrupt_output", False)))
    self.special = {t: i for t, i in self._tokenizer.get_vocab(with_added_tokens=True).items()
                    if t in {a.content for a in self._tokenizer.get_added_tokens_decoder().values() if a.special}}

  def token_id(self, token: str | None) -> int | None:
    return None if token is None else self._tokenizer.token_to_id(token)

  def encode(self, text: str, with_special: bool) -> list[int]:
    return self._tokenizer.encode(text, add_special_tokens=with_special).ids

  def decode(self, ids) -> str:
    text = self._tokenizer.decode(list(ids), skip_special_tokens=True)
    return clean_up_tokenization(text) if self._clean_up else text


class _MarianTokenizer:
  """``MarianTokenizer``'s files run by ``sentencepiece``."""

  def __init__(self, model_dir, settings: dict):
    import sentencepiece as spm  # pylint: disable=g-import-not-at-top
    if settings.get("separate_vocabs") or fs.exists(fs.join(model_dir, "target_vocab.json")):
      raise TokenizerError(f"{model_dir}: separate_vocabs (a target_vocab.json): Marian with separate source and "
                           "target vocabularies is not imported")
    self.files = tuple(fs.read_bytes(fs.join(model_dir, name)) for name in ("source.spm", "vocab.json"))
    self._spm = spm.SentencePieceProcessor(model_proto=self.files[0])
    self._vocab = json.loads(self.files[1].decode("utf-8"))
    self._pieces = {i: piece for piece, i in self._vocab.items()}
    names = {key: settings.get(key, default) for key, default in (("unk_token", "<unk>"), ("eos_token", "</s>"),
                                                                   ("pad_token", "<pad>"))}
    if names["unk_token"] not in self._vocab:
      raise TokenizerError(f"{model_dir}/vocab.json: no {names['unk_token']!r} (MarianTokenizer needs it)")
    self.special = {token: self._vocab[token] for token in names.values() if token in self._vocab}
    self._unk, self._eos = self._vocab[names["unk_token"]], self._vocab.get(names["eos_token"])

  def token_id(self, token: str | None) -> int | None:
    return None if token is None else self._vocab.get(token)

  def encode(self, text: str, with_special: bool) -> list[int]:
    code = _LANGUAGE_CODE.match(text)
    pieces = ([code.group(0)] if code else []) + self._spm.encode(text[code.end():] if code else text, out_type=str)
    ids = [self._vocab.get(piece, self._unk) for piece in pieces]
    return ids + [self._eos] if with_special else ids

  def decode(self, ids) -> str:
    special = set(self.special.values())
    pieces = [self._pieces.get(i) or self._spm.id_to_piece(i) for i in ids if i not in special]
    return self._spm.decode_pieces(pieces).replace("\u2581", " ").strip()


def read_tokenizer(model_dir):
  """The directory's tokenizer (``tokenizer.json``, else Marian's SentencePiece files) and ``tokenizer_config.json``'s
  settings; :class:`TokenizerError` naming the files when there is neither."""
  path = fs.join(model_dir, TOKENIZER_CONFIG_FILE)
  settings = json.loads(fs.read_text(path)) if fs.exists(path) else {}
  for key in ("bos_token", "eos_token", "unk_token", "pad_token"):  # older files write {"content": ...}
    if isinstance(settings.get(key), dict):
      settings[key] = settings[key].get("content")
  if fs.exists(fs.join(model_dir, TOKENIZER_FILE)):
    return _FastTokenizer(model_dir, settings), settings
  if all(fs.exists(fs.join(model_dir, name)) for name in ("source.spm", "vocab.json")):
    return _MarianTokenizer(model_dir, settings), settings
  raise TokenizerError(f"{model_dir}: no tokenizer: neither {TOKENIZER_FILE} nor MarianTokenizer's source.spm and "
                       "vocab.json")


class CheckpointVocab:
  """A checkpoint's tokenizer as attnjax's vocabulary interface (``encode``, ``decode``, ``size``), over attnjax's ids
  of ``vocab_map``. ``side``: ``"source"`` encodes a model input (the tokenizer's special tokens added, as the
  library does), ``"target"`` the content alone; ``prompt_ids`` is a language model's prompt, as the library's
  tokenizer gives it."""

  def __init__(self, tokenizer, vocab_map: VocabularyMap, side: str):
    if side not in ("source", "target"):
      raise ValueError(f"side must be 'source' or 'target', got {side!r}")
    self.tokenizer, self.vocab_map, self.side = tokenizer, vocab_map, side

  @property
  def size(self) -> int:
    return self.vocab_map.size

  def __len__(self) -> int:
    return self.size

  def encode(self, text: str) -> list[int]:
    return self.vocab_map.to_attnjax(self.tokenizer.encode(text, self.side == "source"))

  def prompt_ids(self, text: str) -> list[int]:
    return self.vocab_map.to_attnjax(self.tokenizer.encode(text, True))

  def decode(self, ids) -> str:
    """The text of ``ids`` up to the first EOS; special tokens dropped as the library's ``skip_special_tokens``."""
    ids = [int(i) for i in ids]
    if EOS_ID in ids:
      ids = ids[:ids.index(EOS_ID)]
    return self.tokenizer.decode(self.vocab_map.to_table(ids))

  @property
  def model_proto(self) -> bytes:
    """What the ids depend on (the tokenizer's files, the map and the side), for caches keyed by a vocabulary."""
    digest = hashlib.sha256(json.dumps([self.side, self.vocab_map.as_tuple()]).encode())
    for data in self.tokenizer.files:
      digest.update(data)
    return digest.digest()

  def __eq__(self, other) -> bool:
    return isinstance(other, CheckpointVocab) and self.model_proto == other.model_proto

  def __hash__(self) -> int:
    return hash(self.model_proto)

  def __repr__(self) -> str:
    return f"CheckpointVocab({type(self.tokenizer).__name__}, size={self.size}, side={self.side!r})"
