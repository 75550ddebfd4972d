"""One run per workdir: the lock a training run holds on its workdir.

Two ``attnjax.train`` processes on one workdir (a relaunch while the first still runs, a scheduler's requeue) would
write into each other's checkpoints. Training therefore takes ``<workdir>/run.lock`` before it touches anything
else, and a second run stops at start-up with one line naming the holder::

    WorkdirBusy: workdir /runs/x is in use by another run: host h, pid 123, started 2026-11-25T10:00:00+00:00, last
    heard from 4 s ago. Stop it first, or give this run another --workdir.

The lock file is JSON: host, pid (and the pid's start time, so that a reused pid is not mistaken for the holder),
start time, a heartbeat the holder rewrites every ``heartbeat_seconds``, and a random token. A lock whose holder is
gone is taken over, with a log line: on the same host, its pid no longer runs; from another host, its heartbeat is
older than ``stale_seconds``. A holder on this host that still runs is never taken over, however old its heartbeat
(a frozen process: stop it).

Every change is a compare-and-swap, so two runs racing for one lock cannot both win:

* local disk: an exclusive create (``O_EXCL``), and an ``flock`` on ``run.lock.guard`` around read-compare-replace;
* Cloud Storage: object writes and deletes with a generation precondition (``ifGenerationMatch``; 0 to create).

Multi-host runs hold one lock: process 0 takes it and tells the others (:func:`hold`).
"""

from __future__ import annotations

import contextlib
import datetime
import json
import os
import socket
import threading
import time
import uuid
from typing import Any

from absl import logging

from attnjax import fs

LOCK_FILE = "run.lock"


class WorkdirBusy(RuntimeError):
  """Another run holds the workdir."""


def _now() -> float:
  return time.time()


def _iso(seconds: float) -> str:
  return datetime.datetime.fromtimestamp(seconds, datetime.timezone.utc).isoformat(timespec="seconds")


def _pid_start(pid: int) -> str | None:
  """The start time of ``pid`` (clock ticks since boot, Linux), to tell a reused pid from the holder; None elsewhere."""
  try:
    with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
      return f.read().rsplit(")", 1)[1].split()[19]
  except (OSError, IndexError):
    return None


def _running(pid: int, start: str | None) -> bool:
  try:
    os.kill(pid, 0)
  except ProcessLookupError:
    return False
  except PermissionError:
    pass  # someone else's process: it runs
  return start is None or _pid_start(pid) in (None, start)


# --------------------------------------------------------------------------------------------- compare and swap


class _LocalStore:
  """The lock file on a local (or network) disk: ``O_EXCL`` creates it; an ``flock`` on a guard file makes each
  read-compare-replace atomic. The token of a version is its content."""

  def __init__(self, path):
    self.path = os.fspath(path)
    self.guard = self.path + ".guard"

  @contextlib.contextmanager
  def _guarded(self):
    import fcntl  # pylint: disable=g-import-not-at-top
    with open(self.guard, "a") as f:
      fcntl.flock(f, fcntl.LOCK_EX)
      try:
        yield
      finally:
        fcntl.flock(f, fcntl.LOCK_UN)

  def _read(self) -> tuple[bytes, Any] | None:
    try:
      with open(self.path, "rb") as f:
        data = f.read()
    except FileNotFoundError:
      return None
    return data, data

  def read(self) -> tuple[bytes, Any] | None:
    """The lock file under the guard, so that a run creating it is never seen halfway (an empty file)."""
    with self._guarded():
      return self._read()

  def create(self, data: bytes) -> Any:
    with self._guarded():
      fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)  # FileExistsError if there is one
      with os.fdopen(fd, "wb") as f:
        f.write(data)
    return data

  def replace(self, data: bytes, token: Any) -> Any:
    with self._guarded():
      current = self._read()
      if current is None or current[1] != token:
        raise FileExistsError(self.path)
      tmp = f"{self.path}.{uuid.uuid4().hex}.tmp"
      with open(tmp, "wb") as f:
        f.write(data)
      os.replace(tmp, self.path)
    return data

  def delete(self, token: Any) -> bool:
    with self._guarded():
      current = self._read()
      if current is None or current[1] != token:
        return False
      os.remove(self.path)
    return True


class _GcsStore:
  """The lock object in Cloud Storage: every write and delete carries the generation it expects (0: none), so the
  service rejects it (412) if another run changed the object first. The token of a version is its generation."""

  def __init__(self, url: str):
    import gcsfs  # pylint: disable=g-import-not-at-top
    self.url = url
    self.fs = gcsfs.GCSFileSystem()
    self.bucket, self.key, _ = self.fs.split_path(url)

  def read(self) -> tuple[bytes, Any] | None:
    try:
      meta = self.fs.call("GET", "b/{}/o/{}", self.bucket, self.key, json_out=True)
      generation = meta["generation"]
      _, data = self.fs.call("GET", "b/{}/o/{}", self.bucket, self.key, alt="media", generation=generation)
    except FileNotFoundError:
      return None
    return data, generation

  def _upload(self, data: bytes, generation: Any) -> Any:
    from urllib.parse import quote  # pylint: disable=g-import-not-at-top
    path = f"{self.fs._location}/upload/storage/v1/b/{quote(self.bucket)}/o"  # pylint: disable=protected-access
    meta = self.fs.call("POST", path, uploadType="media", name=self.key, ifGenerationMatch=str(generation),
                        headers={"Content-Type": "application/octet-stream"}, data=data, json_out=True)
    self.fs.invalidate_cache(self.url)
    return meta["generation"]

  def create(self, data: bytes) -> Any:
    return self._upload(data, 0)

  def replace(self, data: bytes, token: Any) -> Any:
    return self._upload(data, token)

  def delete(self, token: Any) -> bool:
    try:
      self.fs.call("DELETE", "b/{}/o/{}", self.bucket, self.key, ifGenerationMatch=str(token))
    except (FileNotFoundError, FileExistsError):
      return False
    self.fs.invalidate_cache(self.url)
    return True


def _store(path):
  text = os.fspath(path)
  if text.startswith("gs://"):
    return _GcsStore(text)
  if fs.is_url(text):
    raise ValueError(f"{text}: the workdir lock supports local paths and gs:// URLs")
  return _LocalStore(text)


# --------------------------------------------------------------------------------------------- the lock


class WorkdirLock:
  """``<workdir>/run.lock`` held by this process (see the module docstring).

  Args:
    workdir: a local path or a ``gs://`` URL.
    heartbeat_seconds: how often the holder rewrites its heartbeat.
    stale_seconds: a holder on another host not heard from for this long is gone (default: 4 heartbeats).
  """

  def __init__(self, workdir, *, heartbeat_seconds: float = 30.0, stale_seconds: float | None = None):
    self.workdir = os.fspath(workdir)
    self.path = fs.join(workdir, LOCK_FILE)
    self.heartbeat_seconds = heartbeat_seconds
    self.stale_seconds = 4 * heartbeat_seconds if stale_seconds is None else stale_seconds
    self.lost: str | None = None  # set when another run took the lock from this one
    self._store = None
    self._token = None
    self._record: dict = {}
    self._done = threading.Event()
    self._thread: threading.Thread | None = None

  def _encode(self) -> bytes:
    return (json.dumps(self._record, sort_keys=True) + "\n").encode()

  def _holder_text(self, record: dict) -> str:
    heard = _now() - float(record.get("heartbeat", 0.0))
    return (f"host {record.get('host', '?')}, pid {record.get('pid', '?')}, started {record.get('started', '?')}, "
            f"last heard from {heard:.0f} s ago")

  def _gone(self, record: dict) -> str | None:
    """Why the holder of ``record`` counts as gone, or None if it may still run."""
    if record.get("host") == socket.gethostname():
      if not _running(int(record.get("pid", -1)), record.get("pid_start")):
        return f"its process (pid {record.get('pid')}) no longer runs on this host"
      return None
    silent = _now() - float(record.get("heartbeat", 0.0))
    if silent > self.stale_seconds:
      return f"its heartbeat is {silent:.0f} s old (stale after {self.stale_seconds:.0f} s)"
    return None

  def acquire(self) -> None:
    """Takes the lock, taking over one whose holder is gone. Raises :class:`WorkdirBusy` naming the holder."""
    fs.makedirs(self.workdir)
    self._store = _store(self.path)
    now = _now()
    self._record = {"host": socket.gethostname(), "pid": os.getpid(), "pid_start": _pid_start(os.getpid()),
                    "started": _iso(now), "heartbeat": now, "token": uuid.uuid4().hex}
    for _ in range(5):  # a race lost to another run starting or leaving at the same moment: look again
      current = self._store.read()
      try:
        if current is None:
          self._token = self._store.create(self._encode())
        else:
          try:
            record = json.loads(current[0])
          except ValueError:
            record = {}  # a lock file cut short (a crash while writing it): nobody holds it
          why = self._gone(record) if record else "it is unreadable"
          if why is None:
            raise WorkdirBusy(f"workdir {self.workdir} is in use by another run: {self._holder_text(record)}. Stop "
                              "it first, or give this run another --workdir.")
          self._token = self._store.replace(self._encode(), current[1])
          logging.warning("workdir lock: took over %s from %s: %s", self.path,
                          self._holder_text(record) if record else "an unreadable lock", why)
      except FileExistsError:
        continue
      break
    else:
      raise WorkdirBusy(f"workdir {self.workdir}: could not take {self.path}: other runs keep changing it")
    self._thread = threading.Thread(target=self._beat, name="attnjax-workdir-lock", daemon=True)
    self._thread.start()

  def _beat(self) -> None:
    while not self._done.wait(self.heartbeat_seconds):
      self._record["heartbeat"] = _now()
      try:
        self._token = self._store.replace(self._encode(), self._token)
      except FileExistsError:
        holder = self._new_holder()
        self.lost = f"another run took the lock on workdir {self.workdir}: {holder}"
        logging.error("workdir lock: %s", self.lost)
        return
      except Exception as e:  # pylint: disable=broad-except
        logging.warning("workdir lock: heartbeat failed (retried at the next one): %s", e)

  def _new_holder(self) -> str:
    """Who holds the lock now, for the message of a run that lost it. A lock file written by something that ignores
    the guard can be read halfway: read again for a moment before calling it unreadable."""
    for attempt in range(20):
      current = self._store.read()
      if current is None:
        return "nobody (the lock was removed)"
      try:
        return self._holder_text(json.loads(current[0]))
      except ValueError:
        if attempt < 19:
          time.sleep(0.05)
    return "an unreadable lock file"

  def check(self) -> None:
    """Raises :class:`WorkdirBusy` if another run took the lock from this one."""
    if self.lost:
      raise WorkdirBusy(self.lost)

  def release(self) -> None:
    self._done.set()
    if self._thread is not None:
      self._thread.join(timeout=5)
    if self._store is not None and self._token is not None and not self.lost:
      try:
        self._store.delete(self._token)
      except Exception as e:  # pylint: disable=broad-except
        logging.warning("workdir lock: could not remove %s: %s", self.path, e)
    self._token = None

  def __enter__(self):
    self.acquire()
    return self

  def __exit__(self, *exc):
    self.release()


@contextlib.contextmanager
def hold(workdir, **kwargs):
  """The workdir's lock for the whole run: process 0 takes it and tells the others, which stop with it if it is
  busy (each with a one-line :class:`WorkdirBusy`). Yields the lock (None on the other processes)."""
  import jax  # pylint: disable=g-import-not-at-top
  lock, error = None, ""
  if jax.process_index() == 0:
    lock = WorkdirLock(workdir, **kwargs)
    try:
      lock.acquire()
    except WorkdirBusy as e:
      lock, error = None, str(e)
  if jax.process_count() > 1:
    import numpy as np  # pylint: disable=g-import-not-at-top
    from jax.experimental import multihost_utils  # pylint: disable=g-import-not-at-top
    busy = bool(multihost_utils.broadcast_one_to_all(np.asarray(bool(error))))
    if busy and not error:
      error = f"workdir {os.fspath(workdir)} is in use by another run (process 0's log names it)"
  if error:
    raise WorkdirBusy(error)
  try:
    yield lock
  finally:
    if lock is not None:
      lock.release()
