"""Timing helpers for the benchmark scripts: interleaved repetitions, medians, ratios in one run."""

from __future__ import annotations

import os
import platform
import statistics
import time


def machine_description() -> str:
  cpu = platform.processor() or platform.machine()
  try:
    with open("/proc/cpuinfo") as f:
      for line in f:
        if line.startswith("model name"):
          cpu = line.split(":", 1)[1].strip()
          break
  except OSError:
    pass
  import jax  # pylint: disable=g-import-not-at-top
  return f"{cpu}, {os.cpu_count()} cores, jax {jax.__version__} ({jax.default_backend()})"


def interleaved_medians(fns: dict, reps: int, min_seconds: float = 0.0) -> dict:
  """Median wall time of each callable, running them round-robin so that machine noise hits all alike.

  Each callable must block until its result is ready. One untimed call each first (compilation, caches).
  """
  for fn in fns.values():
    fn()
  times = {name: [] for name in fns}
  start = time.perf_counter()
  rep = 0
  while rep < reps or time.perf_counter() - start < min_seconds:
    for name, fn in fns.items():
      t0 = time.perf_counter()
      fn()
      times[name].append(time.perf_counter() - t0)
    rep += 1
  return {name: statistics.median(ts) for name, ts in times.items()}


def markdown_table(header: list[str], rows: list[list]) -> str:
  lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
  lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
  return "\n".join(lines)
