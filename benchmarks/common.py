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


def run_side(module: str, side: str, argv: list[str], threads: int) -> dict:
  """Runs ``python -m module --side=SIDE argv`` in a process of its own and returns the JSON it prints last.

  A comparison with another framework times each side alone: in one process, torch's and XLA's thread pools slow each
  other down (torch's SDPA ran ~1.8x slower beside JAX than alone), and the ratio lies. Both sides get ``threads``.
  """
  import json  # pylint: disable=g-import-not-at-top
  import subprocess  # pylint: disable=g-import-not-at-top
  import sys  # pylint: disable=g-import-not-at-top
  env = dict(os.environ, JAX_PLATFORMS="cpu", OMP_NUM_THREADS=str(threads),
             XLA_FLAGS=os.environ.get("XLA_FLAGS", "") + " --xla_cpu_multi_thread_eigen=true")
  proc = subprocess.run([sys.executable, "-m", module, f"--side={side}", f"--threads={threads}", *argv], env=env,
                        capture_output=True, text=True)
  if proc.returncode:
    raise RuntimeError(f"{module} --side={side} failed:\n{proc.stderr[-3000:]}")
  return json.loads(proc.stdout.strip().splitlines()[-1])


def compiled_step_runner(step, params, opt_state):
  """``(run, flops)``: ``step(params, opt_state, rng) -> (params, opt_state, loss)`` compiled with the state donated,
  and a ``run()`` that takes one step (a fresh dropout key each time) and waits for it; ``flops`` is XLA's count."""
  import jax  # pylint: disable=g-import-not-at-top
  compiled = jax.jit(step, donate_argnums=(0, 1)).lower(params, opt_state, jax.random.PRNGKey(1)).compile()
  cost = compiled.cost_analysis()
  cost = cost[0] if isinstance(cost, (list, tuple)) else cost
  state = {"p": params, "o": opt_state, "i": 0}

  def run():
    state["i"] += 1
    state["p"], state["o"], value = compiled(state["p"], state["o"], jax.random.PRNGKey(state["i"]))
    jax.block_until_ready(value)
  return run, float(cost.get("flops", 0.0))
