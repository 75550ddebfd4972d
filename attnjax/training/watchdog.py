"""Multi-host failure handling for the training loop: a peer watchdog that names a hung process, and the immediate
exit of a process that cannot go on (see :func:`attnjax.training.loop.train_and_evaluate`)."""

from __future__ import annotations

import ctypes
import logging as py_logging
import os
import re
import signal
import socket
import sys
import threading
import time

from absl import logging
import jax

from attnjax.runtime.processes import peer_timeout_seconds

PEER_TIMEOUT_EXIT_CODE = 75  # EX_TEMPFAIL: a peer hung or died; restart all processes to resume


def this_process() -> str:
  return f"process {jax.process_index()} of {jax.process_count()} (host {socket.gethostname()}, pid {os.getpid()})"


_BEFORE_EXIT: list = []  # quick last acts of a process ending at once (PeerWatchdog.before_exit)


def exit_now(code: int, message: str, exc: BaseException | None = None) -> None:
  """Logs ``exc``'s traceback, then ``message`` (the last line of the log: the one a person reads), and ends the
  process at once: no atexit handlers, no joining of threads. What a multi-host process does when it cannot go on
  (see :func:`train_and_evaluate`)."""
  if exc is not None:
    logging.error("the error:", exc_info=exc)
  for action in _BEFORE_EXIT:
    try:
      action()
    except Exception:  # pylint: disable=broad-except
      pass
  logging.error("%s", message)
  for handler in py_logging.getLogger().handlers + [logging.get_absl_handler()]:
    try:
      handler.flush()
    except Exception:  # pylint: disable=broad-except
      pass
  sys.stderr.flush()
  os._exit(code)  # pylint: disable=protected-access


class PeerWatchdog:
  """Multi-host: a peer that hangs must not hold the other processes forever, and they must say which one it is.

  A frozen process (SIGSTOP, a hung kernel, a paused VM) keeps its sockets open, so the others wait in their next
  collective or barrier; jax.distributed's heartbeat check eventually aborts them with "Terminating process because
  the JAX distributed service detected fatal errors", naming a task number but no host and no way forward. This
  watchdog runs in a daemon thread of every process: every ``timeout / 10`` seconds it bumps this process's counter in
  the coordination service's key-value store and reads everyone's. A peer whose counter has not moved for ``timeout``
  seconds (local clock), or a coordination service that has not answered for that long (process 0, which hosts it,
  is the one hung), ends this process with a message naming that process and its host, what this one was doing, and
  exit code :data:`PEER_TIMEOUT_EXIT_CODE`. Nothing is lost that a restart does not recover: a save in flight is
  never taken for a checkpoint (Orbax commits a step only when every process has written its part).

  A peer that dies outright is usually met first in a collective, whose error the loop reports naming this process
  (exit 1). When process 0 dies, though, the coordination service it hosts dies with it, and JAX's client in every
  other process aborts at once, from a thread of its own, wherever the process is (compiling, evaluating, saving,
  exiting): "Terminating process because the JAX distributed service detected fatal errors". The watchdog also
  catches that abort (SIGABRT, for as long as the process lives), and ends the process with a last line naming the
  peer that died and what this process was doing, and exit code :data:`PEER_TIMEOUT_EXIT_CODE`.

  Not covered: a process whose main thread hangs while the process itself runs on (a deadlock); its counter moves.
  """

  _PREFIX = "attnjax/watchdog/"

  def __init__(self, timeout: int, checkpoint_dir: str):
    from orbax.checkpoint import multihost  # pylint: disable=g-import-not-at-top
    self.client = multihost.get_jax_distributed_client()  # the coordination service jax.distributed connected
    self.timeout, self.checkpoint_dir = timeout, checkpoint_dir
    self.interval = max(timeout / 10, 0.2)
    self.where = "starting"  # what this process is doing, for the message (set by the loop)
    self.me, self.count = jax.process_index(), jax.process_count()
    self._ticks = 0
    self._answered = time.monotonic()  # last time the coordination service answered
    self._seen: dict[int, tuple[str, float]] = {}  # peer -> (its counter, local time it last changed)
    self._hosts: dict[int, str] = {}
    self._done = threading.Event()
    self._me_text = this_process()  # formatted now: the abort handler must not call into JAX
    self.before_exit = _BEFORE_EXIT  # what exit_now does last (release the workdir lock)
    self.client.key_value_set(f"{self._PREFIX}host/{self.me}", f"{socket.gethostname()}, pid {os.getpid()}",
                              allow_overwrite=True)
    _catch_jax_abort(self)
    start = time.monotonic()
    self._seen = {p: ("", start) for p in range(self.count) if p != self.me}
    threading.Thread(target=self._tick_loop, name="attnjax-peer-ticks", daemon=True).start()
    threading.Thread(target=self._check_loop, name="attnjax-peer-watchdog", daemon=True).start()

  @classmethod
  def start_if_multihost(cls, distributed_config, checkpoint_dir: str):
    if jax.process_count() == 1:
      return None
    return cls(peer_timeout_seconds(distributed_config), checkpoint_dir)

  def _tick_loop(self):
    while not self._done.is_set():
      try:
        self._ticks += 1
        self.client.key_value_set(f"{self._PREFIX}tick/{self.me}", str(self._ticks), allow_overwrite=True)
        entries = dict(self.client.key_value_dir_get(self._PREFIX))
      except Exception:  # pylint: disable=broad-except
        entries = None  # the coordination service is gone or hung: _check_loop notices the silence
      if entries is not None:
        now = time.monotonic()
        self._answered = now
        for key, value in entries.items():
          kind, _, process = key[len(self._PREFIX):].rpartition("/")
          if not process.isdigit() or int(process) == self.me:
            continue
          if kind == "host":
            self._hosts[int(process)] = value
          elif kind == "tick" and self._seen.get(int(process), ("", 0.0))[0] != value:
            self._seen[int(process)] = (value, now)
      self._done.wait(self.interval)

  def _check_loop(self):
    last = time.monotonic()
    while not self._done.wait(self.interval):
      now = time.monotonic()
      if now - last > self.timeout / 2:  # this process itself was stopped or starved: nobody else is to blame yet
        self._answered = now
        self._seen = {p: (tick, now) for p, (tick, _) in self._seen.items()}
      last = now
      if now - self._answered > self.timeout:
        self._give_up(0, now - self._answered, ", which hosts the coordination service, has not answered")
      for peer, (tick, changed) in list(self._seen.items()):
        if tick == "done":
          continue
        if now - changed > self.timeout:
          self._give_up(peer, now - changed, " has not been heard from")

  def _give_up(self, peer: int, silent: float, how: str):
    if self._done.is_set():
      return
    host = self._hosts.get(peer, "host unknown")
    exit_now(PEER_TIMEOUT_EXIT_CODE,
              f"peer timeout: {this_process()} gives up while {self.where}: process {peer} ({host}){how} for "
              f"{silent:.0f} s (config.distributed.peer_timeout_seconds={self.timeout}): it died, hangs or is cut "
              f"off. Stop it and restart all processes: training resumes from the newest complete checkpoint in "
              f"{self.checkpoint_dir}.")

  def dead_peer(self, wait: float = 0.0) -> str | None:
    """Which peer failed, for the message of a process that cannot go on: a peer on this host whose pid is gone; else,
    watching for ``wait`` seconds, the coordination service gone silent (process 0, which hosts it) or a peer that
    stopped ticking; else, without a wait, the most likely one (process 0 for the others, the peer silent longest for
    process 0). None when every peer was seen alive: the failure is this process's own."""
    gone = self._gone_on_this_host()
    if gone:
      return gone
    if wait > 0:
      start = time.monotonic()
      time.sleep(wait)  # the tick thread goes on updating what it hears
      gone = self._gone_on_this_host()  # a peer may take a moment to die
      if gone:
        return gone
      if self._answered < start:
        return (f"process 0 ({self._hosts.get(0, 'host unknown')}), which hosts the coordination service, stopped "
                f"answering")
      silent = [p for p, (tick, changed) in sorted(self._seen.items()) if changed < start and tick != "done"]
      if silent:
        return ", ".join(f"process {p} ({self._hosts.get(p, 'host unknown')})" for p in silent) + " stopped ticking"
      return None
    if self.me != 0:
      return (f"process 0 ({self._hosts.get(0, 'host unknown')}), which hosts the coordination service, most likely "
              "died")
    peer = min(self._seen, key=lambda p: self._seen[p][1])
    return f"process {peer} ({self._hosts.get(peer, 'host unknown')}) most likely died"

  def _gone_on_this_host(self) -> str | None:
    for peer in sorted(self._seen):
      host = self._hosts.get(peer, "")
      pid = re.search(r"^(.*), pid (\d+)$", host)
      if pid and pid.group(1) == socket.gethostname() and not _alive(int(pid.group(2))):
        return f"process {peer} ({host}) died: its pid is gone"
    return None

  def explain_abort(self) -> str:
    return (f"peer died: {self._me_text} was stopped by JAX's distributed service while {self.where}: "
            f"{self.dead_peer()}. Restart all processes: training resumes from the newest complete checkpoint in "
            f"{self.checkpoint_dir}.")

  def stop(self):
    """This process is done with training (its peers may take a little longer): they stop watching it."""
    self.where = "exiting after training"
    self._done.set()
    _BEFORE_EXIT.clear()
    try:
      self.client.key_value_set(f"{self._PREFIX}tick/{self.me}", "done", allow_overwrite=True)
    except Exception:  # pylint: disable=broad-except
      pass


def _alive(pid: int) -> bool:
  try:
    os.kill(pid, 0)
  except ProcessLookupError:
    return False
  except PermissionError:
    return True
  return True


_ABORT_HANDLER = ctypes.CFUNCTYPE(None, ctypes.c_int)
_ABORT: list = []  # the installed handler (kept alive) and the watchdog it explains


def _catch_jax_abort(watchdog: PeerWatchdog) -> None:
  """Installs a C-level SIGABRT handler that writes :meth:`PeerWatchdog.explain_abort` as the process's last line and
  exits with :data:`PEER_TIMEOUT_EXIT_CODE`. JAX's client aborts from one of its own threads (Python's signal module
  would run a handler only in the main thread, later: never, as abort does not return); this one runs in the aborting
  thread, taking the GIL that thread does not hold."""

  def on_abort(signum):
    del signum
    try:
      message = _ABORT[1].explain_abort()
    except Exception as e:  # pylint: disable=broad-except
      message = f"peer died: this process was stopped by JAX's distributed service ({type(e).__name__} naming it)"
    os.write(2, f"\n{message}\n".encode("utf-8", "replace"))
    os._exit(PEER_TIMEOUT_EXIT_CODE)  # pylint: disable=protected-access

  handler = _ABORT_HANDLER(on_abort)
  try:
    libc = ctypes.CDLL(None)
    libc.signal.restype = ctypes.c_void_p
    libc.signal.argtypes = (ctypes.c_int, _ABORT_HANDLER)
    libc.signal(signal.SIGABRT, handler)
  except (OSError, AttributeError) as e:  # no C library to call (not Linux or macOS): JAX's abort stays -6
    logging.warning("could not catch JAX's abort to name a dead peer: %s", e)
    return
  _ABORT[:] = [handler, watchdog]
