"""Errors a person can act on: every command line ends a user's mistake with one line naming the key, file, flag or
value, and exit status 2; a traceback only with --verbose or for an internal error."""

import os
import subprocess
import sys
import textwrap

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TRAIN = ["-m", "attnjax.train", "--config=experiments/dates_transformer.py"]


def _run(*args, cwd=ROOT):
  env = dict(os.environ, JAX_PLATFORMS="cpu")
  return subprocess.run([sys.executable, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("args,line", [
    (["--config.model.num_head=4"],
     "attnjax.train: error: --config.model.num_head: config.model has no key 'num_head' (did you mean num_heads?)"),
    (["--config.trian.steps=4"], "attnjax.train: error: --config.trian.steps: config has no key 'trian' (did you mean "
                                 "train?)"),
    (["--config.model.num_heads=-3"], "attnjax.train: error: config.model: invalid model config (transformer): "
                                      "num_heads must be a positive integer, got -3"),
    (["--config.model.num_heads=5"], "attnjax.train: error: config.model: invalid model config (transformer): "
                                     "num_heads (5) must divide d_model (128)"),
    (["--bogus"], "attnjax.train: error: unknown flag --bogus (see --helpshort)"),
])
def test_a_users_mistake_is_one_line_naming_it_and_exit_2(tmp_path, args, line):
  proc = _run(*TRAIN, f"--workdir={tmp_path / 'run'}", *args)
  assert proc.returncode == 2, proc.stderr[-2000:]
  assert proc.stderr.strip().splitlines() == [line], proc.stderr[-2000:]
  assert not (tmp_path / "run" / "checkpoints").exists()


def test_a_missing_experiment_file_and_a_missing_workdir_are_named(tmp_path):
  proc = _run("-m", "attnjax.train", "--config=experiments/nope.py", f"--workdir={tmp_path}")
  assert (proc.returncode, proc.stderr.strip().splitlines()) == (
      2, ["attnjax.train: error: --config=experiments/nope.py: no such experiment file"])
  proc = _run("-m", "attnjax.evaluate", f"--workdir={tmp_path / 'nothing'}")
  assert proc.returncode == 2, proc.stderr[-2000:]
  (last,) = proc.stderr.strip().splitlines()[-1:]
  assert last.startswith("attnjax.evaluate: error: ") and str(tmp_path / "nothing") in last, proc.stderr[-2000:]
  assert "Traceback" not in proc.stderr


def test_verbose_shows_the_traceback_and_an_internal_error_keeps_it(tmp_path):
  proc = _run(*TRAIN, f"--workdir={tmp_path}", "--config.model.num_heads=5", "--verbose")
  assert proc.returncode != 0 and "Traceback" in proc.stderr and "must divide d_model" in proc.stderr
  script = textwrap.dedent("""
      from attnjax import cli
      def main(argv):
        raise RuntimeError("an internal error")
      cli.run(main)
  """)
  proc = _run("-c", script)
  assert proc.returncode == 1 and "Traceback" in proc.stderr and "RuntimeError: an internal error" in proc.stderr


def test_a_workdir_whose_checkpoints_do_not_fit_the_run_is_one_line_and_exit_2():
  """What Checkpointer.restore raises for a changed model or optimiser is the user's to act on: one line, no trace."""
  script = textwrap.dedent("""
      from attnjax import cli
      from attnjax.runtime.checkpointing import CheckpointRestoreError
      def main(argv):
        raise CheckpointRestoreError("checkpoint: step 8 in /w/checkpoints does not fit this run's state (w: saved "
                                     "float32[4], expected float32[8]); 2 step(s) left in place.")
      cli.run(main)
  """)
  proc = _run("-c", script)
  assert (proc.returncode, proc.stderr.strip().splitlines()) == (2, [
      "-c: error: checkpoint: step 8 in /w/checkpoints does not fit this run's state (w: saved float32[4], "
      "expected float32[8]); 2 step(s) left in place."]), proc.stderr[-2000:]


def test_no_libtpu_noise_on_a_machine_without_a_tpu(tmp_path):
  """No TPU here (and the test extra's libtpu installed): a command line starts JAX on the CPU quietly; a
  JAX_PLATFORMS the user set is kept."""
  script = textwrap.dedent("""
      import os
      from attnjax import cli
      def main(argv):
        import jax
        print(os.environ.get("JAX_PLATFORMS"), jax.default_backend())
      cli.run(main)
  """)
  env = {k: v for k, v in os.environ.items() if k != "JAX_PLATFORMS"}
  proc = subprocess.run([sys.executable, "-c", script], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
  assert proc.returncode == 0, proc.stderr[-2000:]
  assert proc.stdout.split() == ["cpu", "cpu"]
  assert "TPU" not in proc.stderr and "libtpu" not in proc.stderr, proc.stderr[-2000:]
  proc = subprocess.run([sys.executable, "-c", script], cwd=ROOT, env=dict(env, JAX_PLATFORMS="cpu"),
                        capture_output=True, text=True, timeout=300)
  assert proc.stdout.split() == ["cpu", "cpu"]


def test_a_decoding_command_gets_a_cpu_device_per_core_unless_the_count_is_set_or_jax_has_started(tmp_path):
  """The cores this process may use (the affinity mask, set here with taskset-like sched_setaffinity), as JAX CPU
  devices, for a command run with cpu_cores=True; an XLA_FLAGS count, a command without it, and a JAX whose
  backends already started keep theirs."""
  script = textwrap.dedent("""
      import os, sys
      os.sched_setaffinity(0, set(list(os.sched_getaffinity(0))[:int(sys.argv[1])] or [0]))
      from attnjax import cli
      if sys.argv[3] == "started":
        import jax
        jax.devices()
      def main(argv):
        import jax
        print(jax.device_count())
      cli.run(main, cpu_cores=sys.argv[2] == "cores")
  """)
  env = {k: v for k, v in os.environ.items() if k not in ("XLA_FLAGS",)}
  env["JAX_PLATFORMS"] = "cpu"

  def devices(cores, mode="cores", started="fresh", **extra):
    proc = subprocess.run([sys.executable, "-c", script, str(cores), mode, started], cwd=ROOT, env=dict(env, **extra),
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return int(proc.stdout.split()[-1])

  cores = len(os.sched_getaffinity(0))
  if cores < 2:
    pytest.skip("one core: nothing to split")
  assert devices(2) == 2 and devices(1) == 1
  assert devices(2, "plain") == 1  # not a decoding command
  assert devices(2, started="started") == 1  # JAX already running: its one device stays, and no error
  assert devices(2, XLA_FLAGS="--xla_force_host_platform_device_count=3") == 3
