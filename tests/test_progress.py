"""Progress of long work: the line's numbers against a test clock, how often it is logged, and silence elsewhere
than on process 0."""

import pytest

from attnjax import progress
from attnjax.progress import Progress


class Clock:
  def __init__(self):
    self.now = 100.0

  def __call__(self):
    return self.now


def test_lines_give_done_rate_and_time_left_at_most_every_interval_and_at_the_end(caplog):
  clock = Clock()
  p = Progress("decoding test", 4490, every=10.0, clock=clock)
  with caplog.at_level("INFO"):
    for t, done in ((5.0, 100), (12.0, 421), (15.0, 600), (23.0, 1024), (40.0, 4490)):
      clock.now = 100.0 + t
      p.update(done)
  # at 12 s: 421 in 12 s = 35.1/s, 4,069 left = 116 s; at 23 s: 1,024 in 23 s = 44.5/s, 3,466 left = 78 s
  assert p.lines == ["decoding test: 421 / 4,490 examples (9.4%), 35.1 examples/s, 0:01:56 left",
                     "decoding test: 1,024 / 4,490 examples (22.8%), 44.5 examples/s, 0:01:18 left",
                     "decoding test: 4,490 / 4,490 examples (100.0%), 112.2 examples/s, 0:00:00 left"]
  assert [r.getMessage() for r in caplog.records] == p.lines


def test_nothing_done_yet_has_no_time_left_and_a_disabled_progress_is_silent():
  clock = Clock()
  p = Progress("predicting spans", 10, "windows", every=0.0, clock=clock)
  clock.now += 1.0
  p.update(0)
  assert p.lines == ["predicting spans: 0 / 10 windows (0.0%), 0.0 windows/s, ? left"]
  quiet = Progress("x", 10, every=0.0, clock=clock, enabled=False)
  quiet.update(10)
  assert quiet.lines == []


def test_the_interval_is_read_when_the_progress_starts(monkeypatch):
  monkeypatch.setattr(progress, "EVERY_SECONDS", 0.0)
  assert Progress("x", 1).every == 0.0
  monkeypatch.setattr(progress, "EVERY_SECONDS", 30.0)
  assert Progress("x", 1).every == pytest.approx(30.0)
