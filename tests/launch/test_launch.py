"""The launcher: a 2-point sweep through the local target end to end (train, evaluate, manifests), dry runs of the
TPU VM and SLURM targets against the command lines they must produce, and clear errors for bad input."""

import json
import os
import shlex
import shutil
import subprocess
import sys

import numpy as np
import pytest

from launch import launch as launch_lib
from tests.markdown_tables import table_rows

# one worker runs this module's tests (make test: --dist=loadgroup), so its module fixture is built once
pytestmark = pytest.mark.xdist_group("tests/launch/test_launch.py")

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TINY = ["--config.train.steps=6", "--config.train.eval_every=6", "--config.train.checkpoint_every=6",
        "--config.train.log_every=3", "--config.data.train_examples=256", "--config.data.validation_examples=16",
        "--config.data.test_examples=16", "--config.eval.num_decode_examples=8", "--config.model.d_model=16",
        "--config.model.d_ff=32", "--config.model.num_encoder_layers=1", "--config.model.num_decoder_layers=1",
        # one bucket, one batch shape: one compilation of the train step instead of one per bucket (~11 s each)
        "--config.data.bucket_boundaries=()"]


def _launch(*args):
  env = dict(os.environ, JAX_PLATFORMS="cpu")
  return subprocess.run([sys.executable, "-m", "launch.launch", *args], cwd=ROOT, env=env, capture_output=True,
                        text=True, timeout=900)


@pytest.fixture(scope="module")
def sweep_root(tmp_path_factory):
  root = tmp_path_factory.mktemp("study")
  proc = _launch("--experiment=experiments/dates_transformer.py", "--sweep=heads", "--target=cpu",
                 f"--workdir_root={root}", "--split=test,validation", *TINY)
  assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
  return root


def test_local_sweep_trains_evaluates_and_records_every_point(sweep_root):
  (launch_file,) = os.listdir(sweep_root / "launches")
  manifest = json.loads((sweep_root / "launches" / launch_file).read_text())
  assert manifest["sweep"] == "heads" and manifest["target"] == "cpu" and len(manifest["commit"]) >= 40
  assert [p["point"] for p in manifest["points"]] == ["heads2", "heads4"]
  for point, heads in zip(manifest["points"], (2, 4)):
    assert point["status"] == "done" and point["returncode"] == 0 and point["wall_seconds"] > 0
    assert f"--config.model.num_heads={heads}" in shlex.split(point["commands"]["train"])
    assert "--config.train.steps=6" in shlex.split(point["commands"]["train"])  # the user's overrides follow
    workdir = point["workdir"]
    config = json.loads(open(os.path.join(workdir, "config.json")).read())
    assert config["model"]["num_heads"] == heads and config["train"]["steps"] == 6
    for split in ("test", "validation"):  # --split=test,validation: both, from the best checkpoint
      metrics = json.loads(open(os.path.join(workdir, f"metrics.{split}.json")).read())
      assert metrics["step"] == 6 and metrics["examples"] == 16 and metrics["split"] == split
    run = json.loads(open(os.path.join(workdir, "launch.json")).read())
    assert run["status"] == "done" and run["point"] == point["point"]


def test_relaunching_skips_the_points_already_done(sweep_root):
  proc = _launch("--experiment=experiments/dates_transformer.py", "--sweep=heads", "--target=cpu",
                 f"--workdir_root={sweep_root}", *TINY)
  assert proc.returncode == 0, proc.stderr[-3000:]
  assert "already done" in proc.stderr
  assert json.loads(proc.stdout) == {"heads2": "done", "heads4": "done"}


def test_report_of_the_sweep_shows_the_runs_own_numbers(sweep_root, tmp_path):
  """Each run's row, in the sweep's table and in the task table, carries that run's own scores and steps: swapped or
  shared rows fail. Six steps leave both tiny models at the same scores, so a copy of the sweep gets distinct ones."""
  root = tmp_path / "study"
  shutil.copytree(sweep_root, root)
  for point, scores in (("heads2", {"bleu": 12.345, "exact_match": 56.789}),
                        ("heads4", {"bleu": 23.456, "exact_match": 67.891})):
    path = root / "dates_transformer" / "heads" / point / "metrics.test.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), **scores}))
  out = tmp_path / "report"
  env = dict(os.environ, JAX_PLATFORMS="cpu")
  proc = subprocess.run([sys.executable, "-m", "attnjax.report", f"--runs={root}", f"--out={out}"], cwd=ROOT,
                        env=env, capture_output=True, text=True, timeout=300)
  assert proc.returncode == 0, proc.stderr[-3000:]
  markdown = (out / "results.md").read_text()
  sweep_rows = {row["point"]: row for row in table_rows(markdown, "### dates_transformer: sweep `heads`")}
  task_rows = {row["point"]: row for row in table_rows(markdown, "## Translation")}
  assert sorted(sweep_rows) == sorted(task_rows) == ["heads2", "heads4"]
  for point, heads in (("heads2", 2), ("heads4", 4)):
    workdir = root / "dates_transformer" / "heads" / point
    metrics = json.loads((workdir / "metrics.test.json").read_text())
    row = sweep_rows[point]
    assert row["EM"] == f"{metrics['exact_match']:.2f}"  # a synthetic task's sweep ranks by exact match
    assert row["overrides"] == f"model.num_heads={heads}" and row["status"] == "done"
    assert row["steps"] == "6" and row["run"].endswith(f"heads/{point}")
    row = task_rows[point]
    assert row["dates BLEU"].split(" ")[0] == f"{metrics['bleu']:.2f}"
    assert row["dates EM"].split(" ")[0] == f"{metrics['exact_match']:.2f}"
    assert row["split"] == "test" and row["run"].endswith(f"heads/{point}")


def test_record_keeps_what_the_report_reads_and_a_relaunch_skips_it(sweep_root, tmp_path):
  """A record of the sweep (launch.record) holds no checkpoint arrays, reads in the report as the runs themselves
  do (state, scores, step, training time, curves), makes a relaunch over it skip both points, and leaves out a run
  that is not done."""
  from attnjax.report import runs as runs_lib  # pylint: disable=g-import-not-at-top
  from attnjax.data.wordpiece import WORDPIECE_FILE  # pylint: disable=g-import-not-at-top
  from launch import record as record_lib  # pylint: disable=g-import-not-at-top
  src = tmp_path / "study"
  shutil.copytree(sweep_root, src)
  unfinished = src / "dates_transformer" / "heads" / "heads8"
  shutil.copytree(src / "dates_transformer" / "heads" / "heads4", unfinished)
  manifest = json.loads((unfinished / "launch.json").read_text())
  (unfinished / "launch.json").write_text(json.dumps({**manifest, "point": "heads8", "status": "running"}))
  for point in ("heads2", "heads4"):  # a reader's copy of its WordPiece file: its config names the original
    (src / "dates_transformer" / "heads" / point / WORDPIECE_FILE).write_text("[PAD]\n[UNK]\n")
    # packed rows and a token cache, rebuilt from the data
    for cache in ("mlm.train.0123abcd.npz", "lm.validation.4567cdef.npz", "tokens.train.89abcdef.npz"):
      np.savez(src / "dates_transformer" / "heads" / point / cache, rows=np.zeros((2, 4), np.int32))
  dst = tmp_path / "record"
  assert record_lib.record(src, dst) == ["dates_transformer/heads/heads2", "dates_transformer/heads/heads4"]
  assert record_lib.record(src, dst) == []  # what is done there stays as it is
  assert not (dst / "dates_transformer" / "heads" / "heads8").exists()
  for point in ("heads2", "heads4"):
    run, kept = src / "dates_transformer" / "heads" / point, dst / "dates_transformer" / "heads" / point
    steps = sorted(p.name for p in (run / "checkpoints").iterdir() if p.name.isdigit())
    assert steps and sorted(p.name for p in (kept / "checkpoints").iterdir()) == steps
    for step in steps:
      assert [p.name for p in (kept / "checkpoints" / step).iterdir()] == ["meta"]
    assert not list(kept.glob("run.lock*")) and not (kept / WORDPIECE_FILE).exists()
    assert not list(kept.glob("*.npz")) and len(list(run.glob("*.npz"))) == 3
    original, copy = runs_lib.read_run(run, src), runs_lib.read_run(kept, dst)
    for key in ("run", "state", "status", "step", "trained_step", "train_seconds", "scores", "other_splits",
                "parameters", "tokens_per_s", "eval_curves"):
      assert copy[key] == original[key], key
    assert original["state"] == "evaluated" and original["train_seconds"] > 0
  proc = _launch("--experiment=experiments/dates_transformer.py", "--sweep=heads", "--target=cpu",
                 f"--workdir_root={dst}", *TINY)
  assert proc.returncode == 0, proc.stderr[-3000:]
  assert proc.stderr.count("already done") == 2
  assert json.loads(proc.stdout) == {"heads2": "done", "heads4": "done"}


def test_tpu_vm_dry_run_prints_the_gcloud_commands_and_runs_nothing(tmp_path):
  proc = _launch("--experiment=experiments/wmt14_en_de/transformer_base.py", "--sweep=heads", "--points=heads8",
                 "--target=tpu-v5e-16", "--workdir_root=gs://bucket/study", "--zone=us-central2-b", "--spot",
                 "--repo_url=https://example.org/attnjax.git", "--project=my-project", "--dry_run",
                 "--config.train.steps=50000")
  assert proc.returncode == 0, proc.stderr[-3000:]
  commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
  lines = [shlex.split(line) for line in proc.stdout.strip().splitlines()]
  name = "attnjax-wmt14-en-de-transformer-base-heads8"
  describe, create, install, train, evaluate = lines
  assert describe[:6] == ["gcloud", "compute", "tpus", "tpu-vm", "describe", name]
  assert create[:6] == ["gcloud", "compute", "tpus", "queued-resources", "create", f"{name}-qr"]
  assert {f"--node-id={name}", "--accelerator-type=v5litepod-16", "--spot", "--zone=us-central2-b",
          "--project=my-project"} <= set(create)
  assert "--worker=all" in install and any(commit in arg and "pip install" in arg for arg in install)
  command = next(arg for arg in train if arg.startswith("--command="))
  assert "--worker=all" in train
  assert ("--config=experiments/wmt14_en_de/transformer_base.py:tpu-v5e-16 "
          "--workdir=gs://bucket/study/wmt14_en_de/transformer_base/heads/heads8 --config.model.num_heads=8 "
          "--config.train.steps=50000 --config.distributed.initialize=True") in command
  assert any("attnjax.evaluate" in arg and "--checkpoint=best" in arg for arg in evaluate)
  assert not (tmp_path / "launches").exists()


def test_slurm_dry_run_writes_nothing_and_prints_the_sbatch_script(tmp_path):
  proc = _launch("--experiment=experiments/wmt14_en_de/convs2s.py", "--target=gpu-2x8xh100",
                 f"--workdir_root={tmp_path}", "--dry_run", "--config.train.steps=10")
  assert proc.returncode == 0, proc.stderr[-3000:]
  out = proc.stdout
  assert "#SBATCH --nodes=2" in out and "#SBATCH --gpus-per-node=8" in out and "#SBATCH --signal=TERM@300" in out
  assert ("srun python -m attnjax.train --config=experiments/wmt14_en_de/convs2s.py:gpu-2x8xh100 "
          f"--workdir={tmp_path}/wmt14_en_de/convs2s/single/default --config.train.steps=10 "
          "--config.distributed.initialize=True") in out
  assert f"sbatch {tmp_path}/slurm/wmt14_en_de-convs2s-default.sbatch" in out
  assert not os.listdir(tmp_path)  # a dry run writes nothing


def test_seeds_train_every_point_once_per_seed_in_its_own_workdir(tmp_path):
  manifest = launch_lib.launch("experiments/wmt14_en_de/transformer_base.py", workdir_root=str(tmp_path),
                               sweep="heads", points=["heads1", "heads8"], seeds=["0", "1"], target="gpu-2x8xh100",
                               submit=False, config_overrides=["--config.train.steps=10"])
  base = f"{tmp_path}/wmt14_en_de/transformer_base/heads"
  assert [(p["point"], p["seed"], p["workdir"]) for p in manifest["points"]] == [
      ("heads1", 0, f"{base}/heads1/seed0"), ("heads1", 1, f"{base}/heads1/seed1"),
      ("heads8", 0, f"{base}/heads8/seed0"), ("heads8", 1, f"{base}/heads8/seed1")]
  for p in manifest["points"]:
    train = shlex.split(p["commands"]["train"])
    assert f"--config.seed={p['seed']}" in train and "--config.train.steps=10" in train
    assert p["sbatch_script"].endswith(f"-{p['point']}-seed{p['seed']}.sbatch") and p["status"] == "written"
    assert json.loads(open(os.path.join(p["workdir"], "launch.json")).read())["seed"] == p["seed"]
  assert len({p["sbatch_script"] for p in manifest["points"]}) == 4
  with pytest.raises(ValueError, match="--seeds=0,0: give distinct seeds"):
    launch_lib.launch("experiments/dates_transformer.py", workdir_root=str(tmp_path), seeds=["0", "0"], dry_run=True)
  with pytest.raises(ValueError, match="--seeds=one: seeds are integers"):
    launch_lib.launch("experiments/dates_transformer.py", workdir_root=str(tmp_path), seeds=["one"], dry_run=True)
  with pytest.raises(ValueError, match="--seeds and --config.seed both set the seed"):
    launch_lib.launch("experiments/dates_transformer.py", workdir_root=str(tmp_path), seeds=["1"], dry_run=True,
                      config_overrides=["--config.seed=3"])


def test_bad_input_is_named(tmp_path, monkeypatch):
  with pytest.raises(ValueError, match=r"--sweep=widths: the experiment has no such sweep \(its sweeps: \['heads'"):
    launch_lib.launch("experiments/wmt14_en_de/transformer_base.py", workdir_root=str(tmp_path), sweep="widths",
                      dry_run=True)
  with pytest.raises(ValueError, match="unknown target 'tpu-v9-8'"):
    launch_lib.launch("experiments/dates_transformer.py", workdir_root=str(tmp_path), target="tpu-v9-8")
  blocked = tmp_path / "file"
  blocked.write_text("")
  with pytest.raises(RuntimeError, match="cannot be written"):
    launch_lib.launch("experiments/dates_transformer.py", workdir_root=str(blocked / "root"), target="cpu")
  monkeypatch.setenv("PATH", str(tmp_path))  # no sbatch, no gcloud
  with pytest.raises(RuntimeError, match="sbatch is not installed"):
    launch_lib.launch("experiments/wmt14_en_de/convs2s.py", workdir_root=str(tmp_path / "s"))
  with pytest.raises(RuntimeError, match="gcloud is not installed"):
    launch_lib.launch("experiments/wmt14_en_de/lstm_luong.py", workdir_root=str(tmp_path / "t"), zone="z",
                      repo_url="https://example.org/a.git")
