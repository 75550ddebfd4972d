"""Fault injection on the 2-process gloo run, the quick subset ``make test-slow`` runs: real ``attnjax.train``
processes killed with SIGKILL (one mid-run, both during an asynchronous checkpoint write, process 0 in the final
evaluation), frozen with SIGSTOP, starved of disk space under a checkpoint write (the bucket faults are left to ``make
faults``). After the faults and a restart of all processes, the final train state and data position must be
bit-identical to those of an uninterrupted 2-process run made first. ``make faults`` (python -m tools.faults) runs 20
random faults, each on its own workdir.

One test, so that the reference run is made once (a module fixture would be made again on each pytest-xdist worker).
"""

import re

import pytest

from tools import faults


@pytest.mark.slow  # minutes: a dozen launches of two real training processes (make test-slow)
def test_quick_faults_end_bit_identical_to_an_uninterrupted_two_process_run(tmp_path, capsys):
  no_tmpfs = faults.Tmpfs.available()
  ctx = faults.Context(tmp_path)
  ctx.make_reference()
  rows = faults.run_quick(ctx, with_enospc=not no_tmpfs)
  with capsys.disabled():
    print()
    faults.print_table(rows)
  for row in rows:
    assert row.ok, f"{row.fault}: {row.message}"
    assert row.identical == "yes"
  chain = rows[0].message
  # each fault did what it is meant to, each survivor's last log line naming the process hit: process 1 killed after
  # step 4, both killed while the write of step 16 was in flight (its temporary directory there, the step not
  # committed), process 0 frozen after step 20 (the peer watchdog), process 0 killed in the final evaluation (JAX's
  # abort, caught, or the collective's error), and the disk really filled up
  assert re.search(r"killed at step:4; exit [1-9]\d*: [^;]*process 1 \(", chain), chain
  assert "write of step 16 in flight at the kill" in chain
  assert re.search(r"killed at evaluating step 24; exit [1-9]\d*: [^;]*process 0 \(", chain), chain
  # each launch resumed from the newest committed checkpoint (the harness checks it against the checkpoint directory
  # and fails otherwise); the launch after the in-flight kill from step 12, the write before it
  starts = re.findall(r"(?:^|; )(from scratch|resumed from step \d+): ", chain)
  assert starts[0] == "from scratch" and len(starts) == len(rows[0].step.split(", ")), chain
  resumed = [0 if start == "from scratch" else int(start.split()[-1]) for start in starts]
  assert resumed == sorted(resumed), chain
  after_the_write = re.search(r"write of step 16 in flight at the kill.*?; resumed from step (\d+): ", chain)
  assert after_the_write and after_the_write.group(1) == "12", chain
  assert "restart: checkpoint: restored step" in chain
  assert re.search(r"exit 75: peer timeout: process 1 of 2 [^;]*process 0 \(", chain), chain
  if no_tmpfs:
    pytest.skip(f"the full-disk fault was left out: {no_tmpfs}")
  assert "No space left on device: checkpoint: writing step" in chain
