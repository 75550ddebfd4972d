"""The README's main command end to end, shrunk (both quickstart runs train, checkpoint, evaluate and plot), its
exact-match floors, and the JAX platforms it starts on."""

import os
import subprocess
import sys
import textwrap

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.mark.slow  # minutes: both experiments' real models compile, train, decode with beam search (make test-slow)
def test_quickstart_trains_evaluates_and_plots_both_models(tmp_path):
  proc = subprocess.run([sys.executable, "-m", "attnjax.quickstart", f"--workdir={tmp_path}", "--steps_scale=0.02",
                         "--eval_limit=32"], cwd=ROOT, capture_output=True, text=True, timeout=900)
  assert proc.returncode == 0, proc.stderr[-3000:]
  table = proc.stdout
  assert "transformer" in table and "lstm_bahdanau" in table and "sacreBLEU nrefs:1" in table
  for name in ("transformer", "lstm_bahdanau"):
    assert os.path.getsize(tmp_path / f"attention_{name}.png") > 1000
    assert (tmp_path / name / "config.json").exists()
    assert list((tmp_path / name / "checkpoints").iterdir())


def _row(name, exact_match):
  return (name, 900, 5.0, {"exact_match": exact_match, "bleu": 99.0, "chrf": 99.0})


def test_a_run_below_an_exact_match_floor_names_the_model_its_score_and_the_floor():
  from attnjax import quickstart  # pylint: disable=g-import-not-at-top
  floors = quickstart.EXACT_MATCH_FLOORS
  assert set(floors) == set(quickstart.EXPERIMENTS)
  assert floors["transformer"] == quickstart.TRANSFORMER_EXACT_MATCH_FLOOR < 98.9  # the lowest correct run measured
  assert floors["lstm_bahdanau"] == quickstart.LSTM_BAHDANAU_EXACT_MATCH_FLOOR < 100.0
  assert not quickstart.below_floor([_row("transformer", 98.9), _row("lstm_bahdanau", 100.0)])
  assert not quickstart.below_floor([_row("transformer", floors["transformer"])])  # the floor itself passes
  lines = quickstart.below_floor([_row("transformer", 41.3), _row("lstm_bahdanau", 100.0)])
  assert lines == [f"attnjax.quickstart: transformer reached 41.30% exact match on the test split, below the "
                   f"quickstart's floor of {floors['transformer']:.1f}%"]


def test_no_tpu_probe_without_libtpu_and_jax_imported_before_the_command_starts():
  """The quickstart's module imports JAX before ``cli.run`` picks the platforms; they still take effect, an empty
  JAX_PLATFORMS counts as unset and one the user set is kept."""
  script = textwrap.dedent("""
      import os
      import attnjax.quickstart  # imports JAX
      import jax
      from attnjax import cli
      def main(argv):
        print(os.environ.get("JAX_PLATFORMS"), jax.config.jax_platforms, jax.default_backend())
      cli.run(main)
  """)
  env = {k: v for k, v in os.environ.items() if k != "JAX_PLATFORMS"}
  for given in (None, ""):
    proc = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=300,
                          env=env if given is None else dict(env, JAX_PLATFORMS=given))
    assert proc.returncode == 0, proc.stderr[-2000:]
    chosen, config, _ = proc.stdout.split()
    assert config == chosen  # JAX, imported first, uses the platforms cli.run chose
    if chosen == "cpu":
      assert "libtpu" not in proc.stderr and "backend 'tpu'" not in proc.stderr, proc.stderr[-2000:]
  proc = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=300,
                        env=dict(env, JAX_PLATFORMS="cpu"))
  assert proc.stdout.split() == ["cpu", "cpu", "cpu"]


@pytest.mark.parametrize("plugins,want", [((), "cpu"), (("jax_cuda12_plugin",), "cuda,cpu"),
                                          (("libtpu",), None), (("libtpu", "jax_cuda13_plugin"), None)])
def test_platforms_on_a_machine_that_looks_like_a_tpu_vm(monkeypatch, plugins, want):
  """TPU signs skip the platform choice only where libtpu is installed; a GPU plugin keeps the GPU."""
  import importlib.util  # pylint: disable=g-import-not-at-top
  from attnjax import cli  # pylint: disable=g-import-not-at-top
  monkeypatch.setenv("TPU_ACCELERATOR_TYPE", "v5litepod-8")
  monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: object() if name in plugins else None)
  for given in (None, "", " "):
    if given is None:
      monkeypatch.delenv("JAX_PLATFORMS", raising=False)
    else:
      monkeypatch.setenv("JAX_PLATFORMS", given)
    assert cli.platforms_without_tpu_noise() == want
  monkeypatch.setenv("JAX_PLATFORMS", "cpu")
  assert cli.platforms_without_tpu_noise() is None
