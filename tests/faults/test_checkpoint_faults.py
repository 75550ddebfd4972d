"""What the fault harness found in the checkpointer, pinned cheaply in one process (no training), and a negative
control of the harness's own comparison."""

import copy
import json
import os
import re
import subprocess
import sys

import jax.numpy as jnp
import numpy as np
import pytest

from attnjax.runtime import checkpointing
from attnjax.runtime.checkpointing import Checkpointer, CheckpointRestoreError
from tests.devices import cpu_devices_env
from tools import faults


def _state(value):
  return {"w": np.full((4,), value, np.float32)}


def _abstract():
  import jax  # pylint: disable=g-import-not-at-top
  return {"w": jax.ShapeDtypeStruct((4,), np.float32)}


def _save(directory, steps, value=lambda step: _state(step)):
  ckpt = Checkpointer(directory, keep=3, best_metric=None, async_save=False)
  for step in steps:
    ckpt.save(step, value(step), {"position": step}, force=True)
  ckpt.close()


def _array_files(step_dir):
  """The array data files of a step (TensorStore's OCDBT ``d/`` files), largest first."""
  found = [os.path.join(root, name) for root, _, files in os.walk(os.path.join(step_dir, "state"))
           for name in files if os.path.basename(root) == "d"]
  return sorted(found, key=os.path.getsize, reverse=True)


def _truncate(files):
  for path in files:
    with open(path, "r+b") as f:
      f.truncate(16)  # a disk that lost the end of the last write
  return files


def _truncate_arrays(step_dir):
  return _truncate(_array_files(step_dir))


def _delete_arrays(step_dir):
  files = _array_files(step_dir)
  for path in files:
    os.remove(path)  # writes that never reached the disk
  return files


def _cut_file(relative):
  def cut(step_dir):
    path = os.path.join(step_dir, relative)
    with open(path, "r+b") as f:
      f.truncate(5)
    return [path]
  return cut


DAMAGE = {"truncated arrays": _truncate_arrays, "missing array files": _delete_arrays,
          "damaged tree metadata": _cut_file("state/_METADATA"), "damaged data position": _cut_file("data/metadata")}


@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_a_damaged_only_step_is_set_aside_recorded_and_the_run_starts_from_scratch(tmp_path, damage, caplog):
  directory = str(tmp_path / "checkpoints")
  _save(directory, [4])
  damaged_files = DAMAGE[damage](os.path.join(directory, "4"))
  ckpt = Checkpointer(directory, keep=3, best_metric=None, async_save=False)
  with caplog.at_level("WARNING"):
    assert ckpt.restore(_abstract()) is None  # a fresh start: the crash already lost what step 4 held
  assert ckpt.steps() == []
  loud = [r.getMessage() for r in caplog.records if "is DAMAGED" in r.getMessage()]
  assert len(loud) == 1 and "step 4" in loud[0] and "starts from scratch" in loud[0], loud
  [entry] = json.loads((tmp_path / "checkpoints.unreadable" / "set_aside.json").read_text())
  assert entry["step"] == 4 and entry["process"] == 0 and entry["then"] == "started from scratch"
  # the file named is the damaged one, as it was in the step directory
  assert entry["file"] in damaged_files, (entry, damaged_files)
  assert os.path.isdir(entry["moved_to"]) and os.path.basename(entry["moved_to"]).startswith("4-")
  assert "bound method" not in entry["reason"] and "tensorstore_spec" not in entry["reason"] and entry["reason"]
  ckpt.save(4, _state(4.5), {"position": 4}, force=True)  # the fresh run saves step 4 again
  ckpt.wait()
  state, _, step, _ = ckpt.restore(_abstract())
  assert step == 4 and np.array_equal(np.asarray(state["w"]), _state(4.5)["w"])
  ckpt.close()


def test_a_damaged_newest_step_is_set_aside_so_that_the_resumed_run_can_save_that_step_again(tmp_path):
  directory = str(tmp_path / "checkpoints")
  _save(directory, [4, 8])
  assert _truncate_arrays(os.path.join(directory, "8"))

  ckpt = Checkpointer(directory, keep=3, best_metric=None, async_save=False)
  state, data, step, _ = ckpt.restore(_abstract())
  assert step == 4 and data == {"position": 4}
  np.testing.assert_array_equal(np.asarray(state["w"]), _state(4)["w"])
  assert ckpt.steps() == [4]
  [entry] = json.loads((tmp_path / "checkpoints.unreadable" / "set_aside.json").read_text())
  assert entry["step"] == 8 and entry["then"] == "restored step 4"
  # the resumed run reaches step 8 again: Orbax refused to save an existing step before the unreadable one was moved
  ckpt.save(8, _state(8.5), {"position": 8}, force=True)
  ckpt.wait()
  assert ckpt.steps() == [4, 8]
  state, _, step, _ = ckpt.restore(_abstract())
  assert step == 8
  np.testing.assert_array_equal(np.asarray(state["w"]), _state(8.5)["w"])
  ckpt.close()


@pytest.mark.parametrize("layout,named", [
    ({"w": ((8,), np.float32)}, r"w: saved float32\[4\], expected float32\[8\]"),
    ({"w": ((4,), jnp.bfloat16)}, r"w: saved float32\[4\], expected bfloat16\[4\]"),
    ({"w": ((4,), np.float32), "mu": ((4,), np.float32)}, r"mu: missing from the checkpoint"),
    ({"v": ((4,), np.float32)}, r"w: not in this run's state; v: missing from the checkpoint"),
])
def test_a_state_that_does_not_fit_is_refused_naming_the_leaf_and_nothing_is_moved(tmp_path, layout, named):
  import jax  # pylint: disable=g-import-not-at-top
  directory = str(tmp_path / "checkpoints")
  _save(directory, [4, 8])
  ckpt = Checkpointer(directory, keep=3, best_metric=None, async_save=False)
  abstract = {key: jax.ShapeDtypeStruct(shape, dtype) for key, (shape, dtype) in layout.items()}
  with pytest.raises(CheckpointRestoreError, match=rf"step 8 in .* does not fit this run's state \({named}\)"):
    ckpt.restore(abstract)
  assert ckpt.steps() == [4, 8] and not (tmp_path / "checkpoints.unreadable").exists()
  ckpt.close()


def test_another_optimiser_is_refused_naming_its_state_leaves(tmp_path):
  """A real train state saved with Adam, resumed with SGD + momentum: the optimiser state's leaves are named."""
  import jax  # pylint: disable=g-import-not-at-top
  import optax  # pylint: disable=g-import-not-at-top
  from attnjax.training.state import TrainState  # pylint: disable=g-import-not-at-top
  params = {"dense": {"kernel": np.ones((2, 3), np.float32)}}
  def state(tx):
    return TrainState(step=np.int32(4), params=params, opt_state=tx.init(params), rng=np.zeros(2, np.uint32))
  directory = str(tmp_path / "checkpoints")
  _save(directory, [4], value=lambda _: state(optax.adam(1e-3)))
  ckpt = Checkpointer(directory, keep=3, best_metric=None, async_save=False)
  with pytest.raises(CheckpointRestoreError, match=r"opt_state\.0\.count: not in this run's state; "
                     r"opt_state\.0\.mu\.dense\.kernel: not in this run's state; .* and \d+ more\)"):
    ckpt.restore(jax.eval_shape(lambda: state(optax.sgd(1e-3, momentum=0.9))))
  restored, _, step, _ = ckpt.restore(jax.eval_shape(lambda: state(optax.adam(1e-3))))  # the same layout: fine
  assert step == 4 and np.array_equal(np.asarray(restored.params["dense"]["kernel"]), params["dense"]["kernel"])
  ckpt.close()


def test_every_process_acts_on_the_same_verdict():
  usable = {"kind": "usable", "file": None, "reason": ""}
  damaged = {"kind": "damaged", "file": "/w/checkpoints/8/state/d/ab", "reason": "ValueError: OUT_OF_RANGE"}
  changed = {"kind": "changed", "file": None, "reason": "w: saved float32[4], expected float32[8]"}
  assert checkpointing.decide([usable, usable])["kind"] == "usable"
  assert checkpointing.decide([usable, damaged]) == dict(damaged, process=1)  # one process could not read its part
  assert checkpointing.decide([damaged, changed]) == dict(changed, process=1)  # a changed run is never set aside
  assert checkpointing.decide([changed, damaged])["process"] == 0


def _two_processes(directory, phase, size=4096):
  env = cpu_devices_env(1)
  port = faults._free_port()  # pylint: disable=protected-access
  procs = [subprocess.Popen([sys.executable, "-m", "tests.faults.two_process_restore", f"--process_id={i}",
                             f"--port={port}", f"--directory={directory}", f"--phase={phase}", f"--size={size}"],
                            cwd=faults.ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
           for i in range(2)]
  outs = [p.communicate(timeout=300) for p in procs]
  for p, (out, err) in zip(procs, outs):
    assert p.returncode == 0, err[-3000:]
  return [json.loads(out.strip().splitlines()[-1]) for out, _ in outs], [err for _, err in outs]


@pytest.mark.slow  # end to end, by `make test-slow`
def test_two_processes_agree_on_damage_only_one_of_them_can_see_and_on_a_changed_layout(tmp_path):
  """Process 1's files of a step cut short: process 0 reads its own half fine, yet both fall back to the older step
  (then, both damaged, to a fresh start) and set aside the same steps; a changed shape is refused by both."""
  directory = str(tmp_path / "checkpoints")
  _two_processes(directory, "save")
  torn = [p for p in _array_files(os.path.join(directory, "8")) if "ocdbt.process_1" in p]
  assert _truncate(torn)
  results, logs = _two_processes(directory, "restore")
  assert [r["step"] for r in results] == [4, 4] and results[0]["w"] == (np.arange(4096) + 4).tolist()
  for log in logs:
    # process 1's half of w is the second chunk of the array: TensorStore names its key, and why it is short
    assert re.search(r"step 8 in .* is DAMAGED \(\S+/8/state/ \(array chunk w/1\) on process 1: ValueError: "
                     r"OUT_OF_RANGE: .* not valid for value of size 16\); it will be set aside, trying step 4", log), log
    assert not [line for line in log.splitlines() if "checkpoint:" in line and "bound method" in line]
  assert sorted(os.listdir(directory)) == ["4"]  # both processes set aside step 8, and only it

  torn = [p for p in _array_files(os.path.join(directory, "4")) if "ocdbt.process_1" in p]
  assert _truncate(torn)
  results, _ = _two_processes(directory, "restore")
  assert [r["step"] for r in results] == [0, 0] and not os.listdir(directory)  # both start from scratch
  record = json.loads((tmp_path / "checkpoints.unreadable" / "set_aside.json").read_text())
  assert [(e["step"], e["process"], e["then"]) for e in record] == [(8, 1, "restored step 4"),
                                                                     (4, 1, "started from scratch")]

  _two_processes(directory, "save")
  results, _ = _two_processes(directory, "restore", size=8192)
  for r in results:
    assert r["step"] == 0 and re.search(r"step 8 .* does not fit .*\(w: saved float32\[4096\], expected "
                                        r"float32\[8192\]\)", r["error"]), r
  assert sorted(os.listdir(directory)) == ["4", "8"]


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
