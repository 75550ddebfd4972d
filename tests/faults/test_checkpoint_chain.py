"""The checkpoint faults of the 2-process gloo run, chained on one workdir (``python -m tools.faults --checkpoints``):
real ``attnjax.train`` processes killed right after a commit, with the only step's files of process 1 cut short (the
restart must start from scratch), then a step of process 0 whose array files never reached the disk with an older
step beside it, then a restart with another optimiser (refused by both processes, naming a leaf, nothing moved), then
a restart with the run's own optimiser (the damaged step set aside, the older one restored), which must end
bit-identical to an uninterrupted run.

One test, so that the reference run is made once (a module fixture would be made again on each pytest-xdist worker).
"""

import json
import re

import pytest

from tools import faults


@pytest.mark.slow  # end to end, by `make test-slow`
def test_damaged_steps_are_set_aside_and_a_changed_optimiser_is_refused_on_two_processes(tmp_path, capsys):
  ctx = faults.Context(tmp_path)
  ctx.make_reference()
  [row] = faults.run_checkpoints(ctx)
  with capsys.disabled():
    print()
    faults.print_table([row])
  assert row.ok, row.message
  assert row.identical == "yes"
  message = row.message
  # 1: a fresh run; both killed after step 4, the only checkpoint, was committed, process 1's files cut short
  assert re.match(r"from scratch: \d+ file\(s\) of process 1 in step 4 cut short after a crash; ", message), message
  # 2: nothing could be restored, so the restart started from scratch (not refused); killed after step 12's commit,
  # process 0's array files of that step gone
  assert re.search(r"; from scratch: \d+ file\(s\) of process 0 in step 12 missing after a crash; ", message), message
  # 3: another optimiser: the newest step's saved tree (read before its damaged arrays) does not fit; both processes
  # exit non-zero and nothing is set aside
  assert re.search(r"; refused \(exit codes \[1, 1\]\): checkpoint: step 12 in \S+ does not fit this run's state "
                   r"\(opt_state\.", message), message
  # 4: the restart with the run's own optimiser sets step 12 aside and resumes from step 8
  assert re.search(r"; restart: checkpoint: 1 damaged step\(s\) set aside \(12\); the run restored step 8 ",
                   message), message
  workdir = tmp_path / "01-chain"
  record = (workdir / "checkpoints.unreadable" / "set_aside.json").read_text()
  assert [(e["step"], e["then"]) for e in json.loads(record)] == [(4, "started from scratch"),
                                                                         (12, "restored step 8")]
