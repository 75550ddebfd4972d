"""Character-level vocabulary for the synthetic tasks (real data gets a sentencepiece model instead).

Ids: ``PAD_ID = 0``, ``BOS_ID = 1``, ``EOS_ID = 2`` (the model interface's, :mod:`attnjax.models.interface`),
``UNK_ID = 3`` for characters not seen when the vocabulary was built, then one id per character from 4 upwards in
sorted (code point) order, so that the same texts always give the same ids whatever their order.
"""

from __future__ import annotations

import json
import os
from typing import Iterable, Sequence

import numpy as np

from attnjax import fs
from attnjax.tokens import BOS_ID, EOS_ID, NUM_RESERVED, PAD_ID, UNK_ID

UNK_TEXT = "\u2047"  # "⁇", what decode() writes for UNK_ID (as sentencepiece does)

_FORMAT = "attnjax.CharVocab"
_VERSION = 1


class CharVocab:
  """Maps characters to ids and back; see the module docstring for the id layout.

  Build with :meth:`build` (from texts) or ``CharVocab(chars)`` (an explicit character list, in id order).
  """

  def __init__(self, chars: Sequence[str]):
    chars = list(chars)
    for c in chars:
      if not isinstance(c, str) or len(c) != 1:
        raise ValueError(f"every vocabulary entry must be a single character, got {c!r}")
    if len(set(chars)) != len(chars):
      duplicates = sorted({c for c in chars if chars.count(c) > 1})
      raise ValueError(f"vocabulary characters must be distinct, got duplicates {duplicates}")
    self._chars = tuple(chars)
    self._ids = {c: i + NUM_RESERVED for i, c in enumerate(chars)}

  @classmethod
  def build(cls, texts: Iterable[str]) -> CharVocab:
    """The vocabulary of every character in ``texts`` (an iterable of str), sorted by code point."""
    if isinstance(texts, str):
      # A bare string would iterate over characters and silently work; it is almost always a missing list.
      raise TypeError("texts must be an iterable of strings, not a single str (wrap it in a list)")
    seen: set[str] = set()
    for i, text in enumerate(texts):
      if not isinstance(text, str):
        raise TypeError(f"texts[{i}] must be a str, got {type(text).__name__}")
      seen.update(text)
    return cls(sorted(seen))

  @property
  def size(self) -> int:
    """Number of ids, reserved ones included: the embedding / logits size."""
    return NUM_RESERVED + len(self._chars)

  def __len__(self) -> int:
    return self.size

  @property
  def chars(self) -> tuple[str, ...]:
    """The characters, in id order (id = index + :data:`NUM_RESERVED`)."""
    return self._chars

  def __eq__(self, other) -> bool:
    return isinstance(other, CharVocab) and self._chars == other._chars

  def __hash__(self) -> int:
    return hash(self._chars)

  def __repr__(self) -> str:
    return f"CharVocab(size={self.size}, chars={''.join(self._chars)!r})"

  def encode(self, text: str) -> list[int]:
    """Ids of ``text``'s characters (no BOS/EOS added); unknown characters become :data:`UNK_ID`."""
    if not isinstance(text, str):
      raise TypeError(f"encode expects a str, got {type(text).__name__}")
    ids = self._ids
    return [ids.get(c, UNK_ID) for c in text]

  def decode(self, ids: Iterable[int]) -> str:
    """The text of ``ids`` (a list or a 1-D array): stops at the first EOS, skips PAD and BOS, writes
    :data:`UNK_TEXT` for UNK. Raises ValueError on an id outside ``[0, size)``."""
    if isinstance(ids, np.ndarray) and ids.ndim != 1:
      raise ValueError(f"decode expects a 1-D sequence of ids, got an array of shape {ids.shape}")
    out = []
    for i in ids:
      i = int(i)
      if i == EOS_ID:
        break
      if i in (PAD_ID, BOS_ID):
        continue
      if i == UNK_ID:
        out.append(UNK_TEXT)
      elif NUM_RESERVED <= i < self.size:
        out.append(self._chars[i - NUM_RESERVED])
      else:
        raise ValueError(f"id {i} is outside the vocabulary [0, {self.size})")
    return "".join(out)

  def save(self, path: str | os.PathLike) -> None:
    """Writes the vocabulary as JSON (UTF-8)."""
    fs.write_json(path, {"format": _FORMAT, "version": _VERSION, "chars": list(self._chars)}, indent=1)

  @classmethod
  def load(cls, path: str | os.PathLike) -> CharVocab:
    """Reads a vocabulary written by :meth:`save`."""
    try:
      data = fs.read_json(path)
    except json.JSONDecodeError as e:
      raise ValueError(f"{path} is not a CharVocab JSON file: {e}") from None
    if not isinstance(data, dict) or data.get("format") != _FORMAT or "chars" not in data:
      raise ValueError(f"{path} is not a CharVocab JSON file (expected a 'format': {_FORMAT!r} object)")
    if data.get("version") != _VERSION:
      raise ValueError(f"{path} has CharVocab format version {data.get('version')!r}; this code reads {_VERSION}")
    return cls(data["chars"])
