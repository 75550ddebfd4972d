"""What the fault harness found in the checkpointer, pinned cheaply in one process (no training), and a negative
control of the harness's own comparison."""

import copy
import os

import numpy as np
import pytest

from attnjax.runtime.checkpointing import Checkpointer
from tools import faults


def _state(value):
  return {"w": np.full((4,), value, np.float32)}


def _abstract():
  import jax  # pylint: disable=g-import-not-at-top
  return {"w": jax.ShapeDtypeStruct((4,), np.float32)}


def test_an_unreadable_step_is_set_aside_so_that_the_resumed_run_can_save_that_step_again(tmp_path):
  directory = str(tmp_path / "checkpoints")
  ckpt = Checkpointer(directory, keep=3, best_metric=None, async_save=False)
  for step in (4, 8):
    ckpt.save(step, _state(step), {"position": step}, force=True)
  ckpt.close()
  cut = 0
  for root, _, files in os.walk(os.path.join(directory, "8", "state")):
    for name in files:
      if os.path.getsize(os.path.join(root, name)) > 64:
        with open(os.path.join(root, name), "r+b") as f:
          f.truncate(16)  # a disk that lost the end of the last write
        cut += 1
  assert cut

  ckpt = Checkpointer(directory, keep=3, best_metric=None, async_save=False)
  state, data, step, _ = ckpt.restore(_abstract())
  assert step == 4 and data == {"position": 4}
  np.testing.assert_array_equal(np.asarray(state["w"]), _state(4)["w"])
  assert ckpt.steps() == [4]
  assert os.listdir(str(tmp_path / "checkpoints.unreadable"))[0].startswith("8-")  # kept for inspection
  # the resumed run reaches step 8 again: Orbax refused to save an existing step before the unreadable one was moved
  ckpt.save(8, _state(8.5), {"position": 8}, force=True)
  ckpt.wait()
  assert ckpt.steps() == [4, 8]
  state, _, step, _ = ckpt.restore(_abstract())
  assert step == 8
  np.testing.assert_array_equal(np.asarray(state["w"]), _state(8.5)["w"])
  ckpt.close()


def test_peer_timeout_is_a_config_key_checked_by_name():
  import pytest  # pylint: disable=g-import-not-at-top
  from attnjax.config import base_config  # pylint: disable=g-import-not-at-top
  from attnjax.runtime.processes import peer_timeout_seconds  # pylint: disable=g-import-not-at-top
  distributed = base_config().distributed
  assert peer_timeout_seconds(distributed) == 50
  distributed.peer_timeout_seconds = 7
  assert peer_timeout_seconds(distributed) == 7
  for bad in (0, -3, True):
    distributed = base_config().distributed
    with distributed.unlocked():
      distributed.peer_timeout_seconds = bad
    with pytest.raises(ValueError, match="config.distributed.peer_timeout_seconds"):
      peer_timeout_seconds(distributed)


def test_the_harness_reports_every_way_a_state_can_differ_down_to_one_bit():
  """A negative control for tools.faults.differences, on which every fault's "bit-identical" verdict rests."""
  rng = np.random.default_rng(0)
  reference = {"step": 24, "data": {"epoch": 1, "position": 40},
               "state": {"params/w": rng.normal(size=(3, 4)).astype(np.float32),
                         "opt_state/count": np.array(24, np.int32), "rng": np.array([0, 7], np.uint32)}}

  def changed(**what):
    state = copy.deepcopy(reference)
    state.update(what)
    return state

  assert faults.differences(copy.deepcopy(reference), reference) == []
  assert faults.differences(changed(step=20), reference) == ["newest checkpoint is step 20, the reference's 24"]
  assert faults.differences(changed(data={"epoch": 1, "position": 41}), reference) == [
      "data position {'epoch': 1, 'position': 41} != {'epoch': 1, 'position': 40}"]
  for key, mutate in (("params/w", lambda a: np.nextafter(a, np.inf)),  # one ulp of every entry
                      ("params/w", lambda a: np.where(a == a.flat[0], -a, a)),  # one entry's sign
                      ("opt_state/count", lambda a: a.astype(np.int64)),  # same value, other dtype
                      ("rng", lambda a: a.reshape(2, 1))):  # same bytes, other shape
    state = copy.deepcopy(reference)
    state["state"][key] = mutate(state["state"][key])
    assert faults.differences(state, reference) == [key], key
  zero = copy.deepcopy(reference)
  zero["state"]["params/w"][0, 0], reference["state"]["params/w"][0, 0] = -0.0, 0.0  # equal as numbers, not as bits
  assert faults.differences(zero, reference) == ["params/w"]
  missing = copy.deepcopy(reference)
  del missing["state"]["rng"]
  assert faults.differences(missing, reference) == ["different state trees"]


def test_the_harness_requires_each_launch_to_resume_from_the_newest_committed_checkpoint():
  log = ("I1125 10:00:00.000000 1 checkpointing.py:191] checkpoint: restored step 12 from /w/checkpoints\n"
         "I1125 10:00:09.000000 1 checkpointing.py:191] checkpoint: restored step 16 from /w/checkpoints\n")
  assert faults._restored_step(log) == 12  # pylint: disable=protected-access  (the launch's own restore, not later)
  assert faults._restored_step("no restore here") == 0  # pylint: disable=protected-access
  faults._check_resumed_from(12, 12, "the launch")  # pylint: disable=protected-access
  faults._check_resumed_from(None, 8, "the launch")  # pylint: disable=protected-access  (after a torn step)
  with pytest.raises(faults.Failed, match="the launch resumed from step 8, but step 12 was the newest committed"):
    faults._check_resumed_from(12, 8, "the launch")  # pylint: disable=protected-access
  with pytest.raises(faults.Failed, match="the restart resumed from scratch, but step 4 was the newest committed"):
    faults._check_resumed_from(4, 0, "the restart")  # pylint: disable=protected-access
