"""``(source, target)`` text pairs, the unit every text reader gives, and :class:`PairFilter`, which skips and counts
the unusable ones (an empty side, or a side longer than ``max_chars``) the same way for files and tensorflow-datasets.
"""

from __future__ import annotations

from typing import Any

from absl import logging

Pair = tuple[str, str]


class PairFilter:
  """Skips pairs with an empty side or, with ``max_chars``, a side longer than that, and logs the counts.

  With ``keep_all`` (an evaluation split) nothing is skipped, so that a hypotheses file lines up with its reference
  file and a score covers the whole split; the unusable pairs are still counted in the log.
  """

  def __init__(self, where: str, max_chars: int | None, keep_all: bool = False):
    if max_chars is not None and max_chars < 1:
      raise ValueError(f"max_chars must be positive or None, got {max_chars}")
    self.where, self.max_chars, self.keep_all = where, max_chars, keep_all
    self.total = self.empty = self.too_long = 0
    self.first_empty = self.first_too_long = None

  def keep(self, src: str, tgt: str, position: Any) -> bool:
    """Whether to keep the pair; ``position`` ("line 3", "example 7") names it in the log."""
    self.total += 1
    if not src.strip() or not tgt.strip():
      self.empty += 1
      self.first_empty = self.first_empty or position
      return self.keep_all
    if self.max_chars is not None and max(len(src), len(tgt)) > self.max_chars:
      self.too_long += 1
      self.first_too_long = self.first_too_long or position
      return self.keep_all
    return True

  def log(self) -> None:
    """Logs what was skipped (a warning) or, with ``keep_all``, kept though unusable (info)."""
    if self.keep_all:
      if self.empty or self.too_long:
        logging.info("%s: kept all %d pairs for evaluation, %d with an empty side%s", self.where, self.total,
                     self.empty, f", {self.too_long} longer than max_chars" if self.too_long else "")
      return
    if self.empty:
      logging.warning("%s: skipped %d of %d pairs with an empty side (first: %s)", self.where, self.empty,
                      self.total, self.first_empty)
    if self.too_long:
      logging.warning("%s: skipped %d of %d pairs with a side longer than max_chars=%d characters (first: %s)",
                      self.where, self.too_long, self.total, self.max_chars, self.first_too_long)
