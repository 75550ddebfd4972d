"""Progress of long work (decoding a split, predicting spans) in the log, which absl also writes to the terminal:
done / total, the rate so far and the time left at that rate, at most every :data:`EVERY_SECONDS`, and at the end.

    decoding: 1,024 / 4,490 examples (22.8%), 35.1 examples/s, 0:01:38 left
"""

from __future__ import annotations

import datetime
import time
from typing import Callable

from absl import logging

EVERY_SECONDS = 10.0


def _clock_text(seconds: float) -> str:
  return str(datetime.timedelta(seconds=round(max(seconds, 0.0))))


class Progress:
  """Reports ``what``'s progress over ``total`` items as :meth:`update` is called with the number done.

  Args:
    what: what is being done ("decoding test").
    total: the number of items.
    unit: their name ("examples").
    every: seconds between two lines (default :data:`EVERY_SECONDS`, read when the progress starts).
    clock: seconds, monotonic (a test's own clock).
    enabled: False on the processes other than 0, which decode the same split in step with it.
  """

  def __init__(self, what: str, total: int, unit: str = "examples", *, every: float | None = None,
               clock: Callable[[], float] = time.monotonic, enabled: bool = True):
    self.what, self.total, self.unit = what, total, unit
    self.every = EVERY_SECONDS if every is None else every
    self.clock, self.enabled = clock, enabled
    self.start = self.last = clock()
    self.lines: list[str] = []  # what was logged

  def line(self, done: int) -> str:
    elapsed = max(self.clock() - self.start, 1e-9)
    rate = done / elapsed
    left = (self.total - done) / rate if rate > 0 else float("inf")
    share = 100.0 * done / self.total if self.total else 100.0
    return (f"{self.what}: {done:,} / {self.total:,} {self.unit} ({share:.1f}%), {rate:.1f} {self.unit}/s, "
            f"{_clock_text(left) if left != float('inf') else '?'} left")

  def update(self, done: int) -> None:
    now = self.clock()
    if not self.enabled or (now - self.last < self.every and done < self.total):
      return
    self.last = now
    self.lines.append(self.line(done))
    logging.info("%s", self.lines[-1])
