"""One run per workdir: the lock's rules (busy, taken over from a dead pid, a reused pid or a stale heartbeat, lost to
another run), its compare-and-swap under a race, the same on the Cloud Storage emulator (generation preconditions),
and two real ``attnjax.train`` processes on one workdir."""

import json
import os
import re
import socket
import subprocess
import sys
import threading
import time

import pytest

from attnjax.runtime import workdir_lock
from attnjax.runtime.workdir_lock import LOCK_FILE, WorkdirBusy, WorkdirLock
from tests.fake_gcs import fake_gcs_server  # noqa: F401  pylint: disable=unused-import  (a fixture)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _write_holder(path, **record):
  start = workdir_lock._pid_start(os.getpid())  # pylint: disable=protected-access
  base = {"host": socket.gethostname(), "pid": os.getpid(), "pid_start": start, "started": "2026-01-01T00:00:00+00:00",
          "heartbeat": time.time(), "token": "theirs"}
  path.write_text(json.dumps({**base, **record}))


def _dead_pid():
  proc = subprocess.Popen([sys.executable, "-c", "pass"])
  proc.wait()
  return proc.pid


def test_a_second_run_is_refused_with_the_holder_named_until_the_first_releases(tmp_path):
  first = WorkdirLock(tmp_path)
  first.acquire()
  record = json.loads((tmp_path / LOCK_FILE).read_text())
  assert (record["host"], record["pid"]) == (socket.gethostname(), os.getpid())
  with pytest.raises(WorkdirBusy, match=rf"workdir {tmp_path} is in use by another run: host {socket.gethostname()}, "
                                        rf"pid {os.getpid()}, started .*, last heard from \d+ s ago"):
    WorkdirLock(tmp_path).acquire()
  first.release()
  assert not (tmp_path / LOCK_FILE).exists()
  with WorkdirLock(tmp_path):
    assert (tmp_path / LOCK_FILE).exists()


@pytest.mark.parametrize("holder,why", [
    (lambda: {"pid": _dead_pid()}, "no longer runs on this host"),
    (lambda: {"pid_start": "1"}, "no longer runs on this host"),  # this pid, reused by another process
    (lambda: {"host": "elsewhere", "heartbeat": time.time() - 200}, r"heartbeat is 20\d s old"),
    (lambda: {}, "it is unreadable"),
])
def test_a_lock_whose_holder_is_gone_is_taken_over_with_a_log_line(tmp_path, caplog, holder, why):
  record = holder()
  if record:
    _write_holder(tmp_path / LOCK_FILE, **record)
  else:
    (tmp_path / LOCK_FILE).write_text('{"host": ')  # cut short
  with caplog.at_level("WARNING"), WorkdirLock(tmp_path, heartbeat_seconds=30):
    assert json.loads((tmp_path / LOCK_FILE).read_text())["pid"] == os.getpid()
  assert any("took over" in r.getMessage() and re.search(why, r.getMessage()) for r in caplog.records)


def test_a_live_holder_is_never_taken_over_on_its_host_nor_a_fresh_one_from_elsewhere(tmp_path):
  _write_holder(tmp_path / LOCK_FILE, heartbeat=time.time() - 10_000)  # this process: alive, heartbeat ancient
  with pytest.raises(WorkdirBusy, match="last heard from 10\\d\\d\\d s ago"):
    WorkdirLock(tmp_path).acquire()
  _write_holder(tmp_path / LOCK_FILE, host="elsewhere", pid=1, heartbeat=time.time() - 5)
  with pytest.raises(WorkdirBusy, match="host elsewhere, pid 1"):
    WorkdirLock(tmp_path).acquire()


def test_the_holder_beats_and_learns_when_another_run_took_the_lock(tmp_path):
  lock = WorkdirLock(tmp_path, heartbeat_seconds=0.05)
  lock.acquire()
  first = json.loads((tmp_path / LOCK_FILE).read_text())["heartbeat"]
  time.sleep(0.3)
  assert json.loads((tmp_path / LOCK_FILE).read_text())["heartbeat"] > first
  lock.check()
  _write_holder(tmp_path / LOCK_FILE, host="elsewhere", pid=7)  # another run took over (it found us stale)
  deadline = time.time() + 5
  while lock.lost is None and time.time() < deadline:
    time.sleep(0.05)
  with pytest.raises(WorkdirBusy, match="another run took the lock on workdir .*host elsewhere, pid 7"):
    lock.check()
  lock.release()
  assert json.loads((tmp_path / LOCK_FILE).read_text())["host"] == "elsewhere"  # not removed: it is theirs


def test_a_holder_that_reads_the_new_lock_halfway_written_still_names_its_new_holder(tmp_path):
  lock = WorkdirLock(tmp_path, heartbeat_seconds=0.05)
  lock.acquire()
  (tmp_path / LOCK_FILE).write_text("")  # the other run's write, caught between truncation and content
  time.sleep(0.2)
  _write_holder(tmp_path / LOCK_FILE, host="elsewhere", pid=7)
  deadline = time.time() + 5
  while lock.lost is None and time.time() < deadline:
    time.sleep(0.05)
  with pytest.raises(WorkdirBusy, match="another run took the lock on workdir .*host elsewhere, pid 7"):
    lock.check()
  lock.release()


def _race(workdir, n=8):
  """``n`` threads acquire at once; returns how many won."""
  barrier, won = threading.Barrier(n), []

  def one():
    lock = WorkdirLock(workdir, heartbeat_seconds=60)
    barrier.wait()
    try:
      lock.acquire()
      won.append(lock)
    except WorkdirBusy:
      pass

  threads = [threading.Thread(target=one) for _ in range(n)]
  for t in threads:
    t.start()
  for t in threads:
    t.join()
  for lock in won:
    lock.release()
  return len(won)


def _slow_reads(monkeypatch, store):
  """Every run reads the lock, then waits: all of them decide on what they read before any writes, the race that
  only the store's compare-and-swap settles."""
  original = store.read

  def read(self):
    out = original(self)
    time.sleep(0.2)
    return out

  monkeypatch.setattr(store, "read", read)


def test_racing_runs_cannot_both_win(tmp_path, monkeypatch):
  _slow_reads(monkeypatch, workdir_lock._LocalStore)  # pylint: disable=protected-access
  assert _race(tmp_path) == 1
  _write_holder(tmp_path / LOCK_FILE, pid=_dead_pid())  # a takeover race: one of them takes over
  assert _race(tmp_path) == 1


def test_on_cloud_storage_with_generation_preconditions(fake_gcs_server, monkeypatch):  # noqa: F811
  workdir = f"{fake_gcs_server.root}/runs/locked"
  first = WorkdirLock(workdir, heartbeat_seconds=0.05)
  first.acquire()
  with pytest.raises(WorkdirBusy, match=f"host {socket.gethostname()}, pid {os.getpid()}"):
    WorkdirLock(workdir).acquire()
  time.sleep(0.3)  # heartbeats are conditional rewrites: each needs the generation of the last
  assert first.lost is None
  first.release()
  with monkeypatch.context() as patch:
    _slow_reads(patch, workdir_lock._GcsStore)  # pylint: disable=protected-access
    assert _race(workdir, n=4) == 1
  store = workdir_lock._GcsStore(f"{workdir}/{LOCK_FILE}")  # pylint: disable=protected-access
  generation = store.create(json.dumps({"host": "elsewhere", "pid": 1, "heartbeat": time.time() - 500}).encode())
  with pytest.raises(FileExistsError):
    store.create(b"{}")  # 412: it exists
  with pytest.raises(FileExistsError):
    store.replace(b"{}", int(generation) + 1)  # 412: not the current generation
  with WorkdirLock(workdir):  # the stale holder is taken over
    assert json.loads(store.read()[0])["pid"] == os.getpid()
  assert store.read() is None


def test_two_train_processes_on_one_workdir_the_second_stops_naming_the_first(tmp_path):
  workdir = tmp_path / "run"
  env = dict(os.environ, JAX_PLATFORMS="cpu")
  args = [sys.executable, "-m", "attnjax.train", "--config=experiments/dates_transformer.py", f"--workdir={workdir}",
          "--config.train.steps=60", "--config.train.eval_every=60", "--config.train.checkpoint_every=10",
          "--config.train.log_every=10", "--config.data.train_examples=512", "--config.data.validation_examples=16",
          "--config.data.test_examples=16", "--config.eval.num_decode_examples=4", "--config.model.d_model=16",
          "--config.model.d_ff=32", "--config.model.num_encoder_layers=1", "--config.model.num_decoder_layers=1",
          "--config.data.bucket_boundaries=()"]
  first = subprocess.Popen(args, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
  deadline = time.time() + 300
  while not (workdir / "checkpoints").exists() and first.poll() is None and time.time() < deadline:
    time.sleep(0.2)
  assert first.poll() is None, first.communicate()[1][-3000:]
  second = subprocess.run(args, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
  assert second.returncode == 2
  last = second.stderr.strip().splitlines()[-1]
  assert last.startswith(f"attnjax.train: error: workdir {workdir} is in use by another run: host "
                         f"{socket.gethostname()}, pid {first.pid}, started "), second.stderr[-2000:]
  assert "Traceback" not in second.stderr
  _, err = first.communicate(timeout=600)
  assert first.returncode == 0, err[-3000:]
  assert "done: {'step': 60" in err
  checkpoints = sorted(os.listdir(workdir / "checkpoints"))
  assert not [name for name in checkpoints if "tmp" in name], checkpoints
  assert not (workdir / LOCK_FILE).exists()  # released at the end
