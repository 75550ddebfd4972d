"""The reserved token ids every vocabulary and every model share, below both ``data/`` and ``models/``.

``PAD_ID = 0`` (padding, never a target), ``BOS_ID = 1`` (the decoder's first input, never a target), ``EOS_ID = 2``
(ends every target), ``UNK_ID = 3`` (text the vocabulary does not cover); learned ids start at ``NUM_RESERVED``. A
model's embedding tables may be padded past the vocabulary (``data.vocab_multiple``) so the vocab axis shards evenly:
those ids, PAD and BOS are never predicted (:func:`never_predicted`), and label smoothing gives them no mass.

A model imported from another library keeps that library's table, whose special tokens sit elsewhere (opus-mt: ``</s>``
0, ``<unk>`` 1, ``<pad>`` last and also the decoder's start; GPT-2: one ``<|endoftext|>``, its last id, for BOS and
EOS): :class:`VocabularyMap` lays attnjax's ids over it, so that data, losses and searches keep the ids above.
"""

from __future__ import annotations

import dataclasses

import numpy as np

PAD_ID = 0
BOS_ID = 1
EOS_ID = 2
UNK_ID = 3
NUM_RESERVED = 4

DEFAULT_VOCAB_SIZE = 8000  # config.data.vocab_size where a config leaves it out
PAD_TO_MULTIPLE = 8  # every batch pads its lengths to a multiple of this


def round_up(n: int, multiple: int = PAD_TO_MULTIPLE) -> int:
  """``n`` rounded up to a multiple of ``multiple`` (a padded length, a padded vocabulary)."""
  return -(-int(n) // int(multiple)) * int(multiple)


def vocab_size(data_cfg) -> int:
  """The size of the vocabulary a task trains (``config.data.vocab_size``, else :data:`DEFAULT_VOCAB_SIZE`)."""
  value = data_cfg.get("vocab_size") if hasattr(data_cfg, "get") else getattr(data_cfg, "vocab_size", None)
  return int(DEFAULT_VOCAB_SIZE if value is None else value)


def never_predicted(vocab_ids, vocab_size):
  """Boolean mask over ``vocab_ids`` (an array of ids, e.g. ``arange(V_padded)``): True for ids a decoder must never
  emit and a smoothed target never weights: PAD, BOS, and the padding ids at or past the real ``vocab_size``."""
  return (vocab_ids == PAD_ID) | (vocab_ids == BOS_ID) | (vocab_ids >= vocab_size)


NO_ROW = -1  # VocabularyMap: attnjax ids that no row of the table stands for


@dataclasses.dataclass(frozen=True)
class VocabularyMap:
  """attnjax's ids over another vocabulary's table of ``rows`` entries, whose ids of PAD, BOS (the decoder's first
  input), EOS and UNK are ``pad``, ``bos``, ``eos`` and ``unk`` (:data:`NO_ROW` where it has none).

  attnjax ids 0-3 are the four reserved ones; id ``NUM_RESERVED + k`` is the table's k-th other id, in increasing
  order. One table id may be several reserved ones (opus-mt's ``<pad>`` is PAD and BOS, GPT-2's ``<|endoftext|>`` BOS
  and EOS): each table row is *read* for every reserved id it is (:meth:`input_rows`), but its logit appears once
  (:meth:`output_rows`), at EOS, else BOS, else UNK, else PAD; the other attnjax ids get no logit (their logits are
  blocked), so that a softmax over attnjax's ids is the table's own, re-ordered.
  """
  rows: int
  pad: int = NO_ROW
  bos: int = NO_ROW
  eos: int = NO_ROW
  unk: int = NO_ROW

  def __post_init__(self):
    for name in ("pad", "bos", "eos", "unk"):
      value = getattr(self, name)
      if not NO_ROW <= value < self.rows:
        raise ValueError(f"{name} id {value} is not in the table of {self.rows} rows (or {NO_ROW}: none)")
    if self.eos == NO_ROW or self.bos == NO_ROW:
      raise ValueError("a vocabulary map needs the table's EOS and BOS (decoder start) ids")

  @classmethod
  def of(cls, spec) -> VocabularyMap | None:
    """From :meth:`as_tuple`'s ``(rows, pad, bos, eos, unk)`` (a model field, a config list); None for ``()``."""
    return cls(*(int(x) for x in spec)) if spec else None

  def as_tuple(self) -> tuple[int, int, int, int, int]:
    return (self.rows, self.pad, self.bos, self.eos, self.unk)

  @property
  def reserved(self) -> tuple[int, int, int, int]:
    """The table ids of PAD, BOS, EOS and UNK, in attnjax's order."""
    return (self.pad, self.bos, self.eos, self.unk)

  def content(self) -> np.ndarray:
    """The table ids of attnjax ids ``NUM_RESERVED`` onwards."""
    return np.setdiff1d(np.arange(self.rows), [i for i in self.reserved if i != NO_ROW])

  @property
  def size(self) -> int:
    """How many attnjax ids the map gives (a model's embedding of attnjax ids may be padded past it)."""
    return NUM_RESERVED + len(self.content())

  def input_rows(self, size: int | None = None) -> np.ndarray:
    """``[size]`` int32: the table row each attnjax id reads (row 0 for ids without one: padding and the ids past
    :attr:`size`, which no text gives)."""
    rows = np.concatenate([self.reserved, self.content()]).astype(np.int32)
    return np.maximum(self._padded(rows, size), 0)

  def output_rows(self, size: int | None = None) -> np.ndarray:
    """``[size]`` int32: the table logit each attnjax id takes, :data:`NO_ROW` where its logit is blocked."""
    reserved = [NO_ROW] * NUM_RESERVED
    for i in (EOS_ID, BOS_ID, UNK_ID, PAD_ID):  # a table id shared by several reserved ones: its logit at the first
      row = self.reserved[i]
      if row != NO_ROW and row not in reserved:
        reserved[i] = row
    return self._padded(np.concatenate([reserved, self.content()]).astype(np.int32), size)

  def _padded(self, rows: np.ndarray, size: int | None) -> np.ndarray:
    size = self.size if size is None else size
    if size < self.size:
      raise ValueError(f"{size} ids cannot hold the {self.size} that the table's {self.rows} rows give")
    return np.concatenate([rows, np.full(size - self.size, NO_ROW, np.int32)])

  def to_attnjax(self, ids) -> list[int]:
    """attnjax's ids of the table's ``ids`` (a reserved one where the table id is several: EOS, BOS, UNK, PAD)."""
    table = np.full(self.rows, NO_ROW, np.int64)
    table[self.content()] = np.arange(NUM_RESERVED, self.size)
    for i in (PAD_ID, UNK_ID, BOS_ID, EOS_ID):  # the last written wins
      if self.reserved[i] != NO_ROW:
        table[self.reserved[i]] = i
    return [int(table[i]) for i in ids]

  def to_table(self, ids) -> list[int]:
    """The table's ids of attnjax ``ids``; ids without a row are dropped."""
    rows = np.concatenate([self.reserved, self.content()])
    return [int(rows[i]) for i in ids if 0 <= i < len(rows) and rows[i] != NO_ROW]
