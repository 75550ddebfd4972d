"""Shared test fixtures. Tests run on CPU; multi-device tests set XLA_FLAGS in their own subprocess."""

import atexit
import contextlib
import os
import shutil
import subprocess
import sys
import tempfile

# libtpu is installed for the compile tool's TPU topologies: keep every test process (and its subprocesses) on the
# CPU instead of probing for TPU chips at start-up. ATTNJAX_TEST_PLATFORMS opts into an accelerator instead, for the
# tests marked `gpu` (`ATTNJAX_TEST_PLATFORMS=cuda pytest -m gpu`): without it they are skipped, even on a GPU host.
if os.environ.get("ATTNJAX_TEST_PLATFORMS"):
  os.environ["JAX_PLATFORMS"] = os.environ["ATTNJAX_TEST_PLATFORMS"]
os.environ.setdefault("JAX_PLATFORMS", "cpu")

# One JAX persistent compilation cache per test session, shared by the xdist workers and every subprocess (they
# inherit the environment; set before jax is imported). Many tests build the same tiny model again: a run and its
# resumption, training and then `attnjax.evaluate` on the same checkpoint, a second Experiment on a workdir. Each
# compiled the same programs anew (most of their time on CPU); now the later ones load them. The cache is keyed by
# the program, the compile options, XLA_FLAGS and the jax version, so a changed model compiles afresh, and it starts
# empty in every session (the process that made it removes it at exit). tools/faults.py does the same for its runs.
if "JAX_COMPILATION_CACHE_DIR" not in os.environ:
  _cache_dir = tempfile.mkdtemp(prefix="attnjax-test-jax-cache-")
  os.environ["JAX_COMPILATION_CACHE_DIR"] = _cache_dir
  os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0.5")
  atexit.register(shutil.rmtree, _cache_dir, ignore_errors=True)

# Most tests are compile-bound on CPU: tiny models, a few steps, many programs. JAX's switch for that case keeps XLA's
# HLO passes (fusion, sharding propagation, memory analysis are unchanged) and drops the LLVM backend's optimisation
# (-O0, no expensive passes). Measured on two compile-bound tests (Transformer conformance [linear], gradient
# accumulation), each pair twice: 89 s and 94 s without it, 62 s and 62 s with it; the quickstart test, which runs
# more than it compiles, 152 s without, 162 s with. The whole suite (`make test`, 2 workers, the machine otherwise
# idle, one run each): 23:53 without, 22:04 with; CPU time 44:06 -> 39:38. Set here so that every subprocess a test
# starts inherits it; JAX_DISABLE_MOST_OPTIMIZATIONS=0 in the environment turns it off.
os.environ.setdefault("JAX_DISABLE_MOST_OPTIMIZATIONS", "1")
# And the CPU backend's older loop emitters in place of its MLIR fusion emitters: each compile has less fixed cost (a
# jitted tanh: ~34 ms -> ~22 ms), and the two tests that compile most (Transformer conformance [copy_attention], the
# pointer-generator LSTM's [copy, coverage, 2 layers]) took 35 s instead of 56 s together. With it, and the RNN and
# decoding tests applying their models jitted (tests/models/conformance.py: Jitted), `make test` on an idle 2-core
# AMD EPYC took 13:49 instead of 20:29 (CPU time 26:39 instead of 39:18). The subprocesses a test starts keep the
# flag (tests/devices.py); XLA_FLAGS naming it already wins.
# XLA aborts a process on a flag it does not know, and jax is not pinned: a subprocess asks this jaxlib first (once:
# the xdist workers and the tests' subprocesses inherit the result in XLA_FLAGS).
_LOOP_EMITTERS = "--xla_cpu_use_fusion_emitters=false"
if "xla_cpu_use_fusion_emitters" not in os.environ.get("XLA_FLAGS", ""):
  _flags = (os.environ.get("XLA_FLAGS", "") + " " + _LOOP_EMITTERS).strip()
  _probe = subprocess.run([sys.executable, "-c", "import jax; jax.devices()"], capture_output=True, timeout=300,
                          env=dict(os.environ, XLA_FLAGS=_flags, JAX_PLATFORMS="cpu"), check=False)
  if _probe.returncode == 0:
    os.environ["XLA_FLAGS"] = _flags

import jax  # pylint: disable=g-import-not-at-top,wrong-import-position
import numpy as np
import pytest


@contextlib.contextmanager
def _x64():
  previous = jax.config.jax_enable_x64
  jax.config.update("jax_enable_x64", True)
  try:
    yield
  finally:
    jax.config.update("jax_enable_x64", previous)


@pytest.fixture
def x64():
  """Runs a test in float64, for tight numerical-gradient checks."""
  with _x64():
    yield


@pytest.fixture
def rng():
  return np.random.default_rng(0)


# The slowest tests (by `--durations` of CI runs), started first: `make test` runs pytest-xdist with `--dist=loadgroup
# --no-loadscope-reorder`, which hands work out in collection order, a test or an `xdist_group` at a time, so the long
# ones spread over the workers at the start instead of one of them, collected last, keeping a worker busy after the
# other has finished (the suite's tail was ~7 minutes). The modules whose module fixture trains a model or runs a
# sweep are each an xdist_group (their `pytestmark`): one worker runs them, and builds the fixture once.
SLOW_FIRST = (
    "tests/test_quickstart.py",
    "tests/faults/test_faults.py",
    "tests/launch/test_launch.py",
    "tests/training/test_sharded_training.py",
    "tests/test_accelerator_check.py::test_the_dry_run",
    "tests/test_experiments.py::test_compile_tool",
    "tests/cloud/test_gcs_workdir.py",
    "tests/models/test_transformer.py::test_transformer_conforms",
    "tests/training/test_span_qa_training.py",
    "tests/training/test_checkpointing.py",
    "tests/training/test_sharded_evaluation.py",
    "tests/training/test_evaluate_metrics.py",
    "tests/test_decoding.py",
)


def pytest_collection_modifyitems(config, items):  # pylint: disable=unused-argument
  def rank(item):
    return next((i for i, prefix in enumerate(SLOW_FIRST) if item.nodeid.startswith(prefix)), len(SLOW_FIRST))
  items.sort(key=rank)  # stable: the order within each group is kept
