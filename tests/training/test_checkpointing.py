"""Orbax checkpoints: exact resumption after SIGTERM or a crash, damaged checkpoints skipped, best kept."""

import os
import re
import signal

import jax
import numpy as np
import pytest

from attnjax.runtime.checkpointing import Checkpointer
from attnjax.config import load_config
from attnjax.training.loop import Experiment, train_and_evaluate
from tests.training.run_steps import tiny_config

# one worker runs this module's tests (make test: --dist=loadgroup), so its module fixture is built once
pytestmark = pytest.mark.xdist_group("tests/training/test_checkpointing.py")


def _config(steps=30):
  config = tiny_config((1, 1, 1))
  config.train.steps = steps
  config.train.log_every = 10
  config.train.eval_every = 1000  # no evaluation inside these runs except at the end
  config.train.checkpoint_every = 10
  config.eval.num_decode_examples = 8
  config.eval.loss_batches = 1
  config.eval.batch_size = 8
  config.train.best_metric = "loss"
  config.train.best_mode = "min"
  return config


def _final_params(workdir):
  exp = Experiment(load_config(workdir), workdir)
  step = exp.restore()
  params = jax.device_get(exp.state.params)
  exp.checkpointer.close()
  return step, params


def _assert_same_params(a, b):
  for (path, x), y in zip(jax.tree_util.tree_leaves_with_path(a), jax.tree_util.tree_leaves(b)):
    np.testing.assert_array_equal(x, y, err_msg=jax.tree_util.keystr(path))


@pytest.fixture(scope="module")
def straight_run(tmp_path_factory):
  workdir = str(tmp_path_factory.mktemp("straight"))
  train_and_evaluate(_config(), workdir)
  return _final_params(workdir)


def test_sigterm_after_step_17_saves_and_resume_matches_an_uninterrupted_run(straight_run, tmp_path, caplog):
  workdir = str(tmp_path)

  def preempt(step):
    if step == 17:
      os.kill(os.getpid(), signal.SIGTERM)  # what a TPU VM gets on preemption

  result = train_and_evaluate(_config(), workdir, on_step=preempt)
  assert result["step"] == 17 and result["preempted"]  # (attnjax.train then exits with PREEMPTED_EXIT)
  assert 17 in Checkpointer(os.path.join(workdir, "checkpoints")).steps()
  with caplog.at_level("INFO"):
    train_and_evaluate(_config(), workdir)
  assert re.findall(r"checkpoint: restored step (\d+)", caplog.text)[:1] == ["17"]
  step, params = _final_params(workdir)
  assert step == straight_run[0] == 30
  _assert_same_params(params, straight_run[1])


class _Crash(Exception):
  pass


def test_crash_after_step_17_resumes_from_step_10_and_matches_an_uninterrupted_run(straight_run, tmp_path, caplog):
  workdir = str(tmp_path)

  def crash(step):
    if step == 17:
      raise _Crash()

  with pytest.raises(_Crash):
    train_and_evaluate(_config(), workdir, on_step=crash)
  assert Checkpointer(os.path.join(workdir, "checkpoints")).steps() == [10]
  with caplog.at_level("INFO"):
    train_and_evaluate(_config(), workdir)
  assert re.findall(r"checkpoint: restored step (\d+)", caplog.text)[:1] == ["10"]
  step, params = _final_params(workdir)
  assert step == 30
  _assert_same_params(params, straight_run[1])


def test_truncated_checkpoint_is_detected_and_the_previous_step_used(tmp_path, caplog):
  workdir = str(tmp_path)
  train_and_evaluate(_config(steps=20), workdir)
  step_dir = os.path.join(workdir, "checkpoints", "20", "state")
  damaged = 0
  for root, _, files in os.walk(step_dir):
    for name in files:
      path = os.path.join(root, name)
      if os.path.getsize(path) > 64:
        with open(path, "r+b") as f:
          f.truncate(16)  # a copy cut short
        damaged += 1
  assert damaged
  exp = Experiment(load_config(workdir), workdir)
  with caplog.at_level("WARNING"):
    step = exp.restore()
  exp.checkpointer.close()
  assert step == 10
  assert any("step 20" in r.getMessage() and "DAMAGED" in r.getMessage() for r in caplog.records)


def test_latest_and_best_checkpoints_are_both_kept(tmp_path):
  ckpt = Checkpointer(str(tmp_path), keep=2, best_metric="bleu", async_save=False)
  state = {"w": np.arange(3.0)}
  for step, bleu in [(1, 10.0), (2, 30.0), (3, 20.0), (4, 15.0), (5, 12.0)]:
    ckpt.save(step, state, {"position": step}, metrics={"bleu": bleu}, force=True)
  ckpt.wait()
  assert ckpt.steps() == [2, 4, 5]  # the latest two and the best (step 2)
  assert ckpt.best_step() == 2
  ckpt.close()


def test_a_state_that_fits_no_checkpoint_stops_the_run_and_every_checkpoint_stays(tmp_path):
  """A run whose state layout changed under its workdir (another optimiser, another model) must not fall back to
  training from scratch: that would bury every checkpoint of the run. An older readable step is still taken."""
  import jax  # pylint: disable=g-import-not-at-top
  from attnjax.runtime.checkpointing import CheckpointRestoreError  # pylint: disable=g-import-not-at-top
  ckpt = Checkpointer(str(tmp_path), keep=3, async_save=False)
  for step in (1, 2):
    ckpt.save(step, {"w": np.arange(3.0) + step}, {"position": step}, force=True)
  ckpt.wait()
  other_layout = {"w": jax.ShapeDtypeStruct((3,), np.float64), "mu": jax.ShapeDtypeStruct((3,), np.float64)}
  with pytest.raises(CheckpointRestoreError, match=r"step 2 in .* does not fit this run's state \(mu: missing from "
                     r"the checkpoint\); 2 step\(s\) left in place"):
    ckpt.restore(other_layout)
  assert ckpt.steps() == [1, 2] and not (tmp_path.parent / f"{tmp_path.name}.unreadable").exists()
  state, data, step, _ = ckpt.restore({"w": jax.ShapeDtypeStruct((3,), np.float64)})
  assert step == 2 and data == {"position": 2} and np.array_equal(np.asarray(state["w"]), np.arange(3.0) + 2)
  ckpt.close()
