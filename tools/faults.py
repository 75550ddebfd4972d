"""Fault injection at multi-host scale: kill either host, fill the disk, break the bucket, lose nothing.

Drives real ``python -m attnjax.train`` processes, two of them joined by gloo over 127.0.0.1 as ``launch/`` runs them,
on a tiny experiment (``tests/faults/tiny_experiment.py``: 24 steps, checkpoints every 4, sync points every 2),
injects one fault per scenario, restarts every process, and checks that the run ends with a train state (parameters,
optimizer state, step, RNG) and a data position bit-identical to those of an uninterrupted 2-process run made first
(the reference). The faults:

* ``kill9``: ``kill -9`` of process 0, 1 or both, after a random step or in a phase after the last one (the final
  evaluation, the final save, the exit): the survivors must name the killed process in their last log line;
* ``kill9-save``: the same while an asynchronous checkpoint write is in flight (its temporary directory exists);
* ``sigterm``: SIGTERM to one process only: both must save the same step at the next sync point and exit 0;
* ``sigstop``: one process frozen: the other must give up within the peer timeout with a message naming the frozen
  process (exit code 75), and leave a resumable state; the frozen one is then killed, as an operator would;
* ``enospc``: the disk fills up (a real tmpfs, mounted in a private mount namespace, nearly filled by another file)
  under a checkpoint write: a clear error, the previous checkpoint intact; space is freed before the restart;
* ``torn``: a crash right after a checkpoint is committed, and one process's files of that step cut short (a disk
  that lost its last writes): the restart must skip the step on both processes, set it aside, and save that step
  again later;
* ``partial`` (``--only``, ``--checkpoints``): the same, with that process's array files of the step gone instead
  of cut short (writes that never reached the disk);
* ``changed`` (``--only``, ``--checkpoints``): a restart with another optimiser (``--allow_config_change``): both
  processes must refuse, naming a leaf of the optimiser state, and leave the checkpoints and config.json as they
  were;
* ``flaky-bucket``: the workdir in a (local, emulated) Cloud Storage bucket whose HTTP proxy answers 503 to a share
  of the requests: the clients' retries must absorb it, and the run finishes without a restart;
* ``bucket-outage``: the bucket answers 503 to everything for a while from a random step on: the run either rides it
  out on retries or stops with an error; the restart (bucket healthy) must not take a damaged step for a checkpoint.

    python -m tools.faults [--faults=20] [--seed=0] [--quick] [--keep=DIR] [--kinds=kill9,sigstop]

prints one row per fault (fault, process, step, bit-identical, outcome, seconds, message) and exits 1 if any failed.
Faults are aimed by step, not by clock: the processes run ``tools/aimed_train.py`` (``attnjax.train`` that stops
itself at the fault's mark), and the fault strikes once the process has stopped there (after ``delay`` seconds of
running on, if any). A run that ends before its mark is a miss, aimed again on a fresh workdir. A check of how the
processes ended that fails does not skip the restart: bit-identity is known for every fault.

Each fault runs on a fresh workdir, followed by one restart of both processes that must finish. The quick subset
(``--quick``, and tests/faults/test_faults.py in ``make test-slow``, for a budget of minutes) chains kill -9 of
process 1, a full disk, kill -9 of both during a checkpoint write, SIGSTOP of process 0 and kill -9 of process 0 in
the final evaluation on one workdir (each restart meets the next fault). Runs and logs go to ``--keep`` (default: a
temporary directory, removed on success).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import http.client
import http.server
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

# attnjax.runtime.processes.PREEMPTED_EXIT (not imported: this tool starts no JAX of its own): the exit status of a
# run stopped by SIGTERM after writing its checkpoint
PREEMPTED_EXIT = 75

ROOT = Path(__file__).resolve().parent.parent
CONFIG = "tests/faults/tiny_experiment.py"
STEPS, CHECKPOINT_EVERY, LOG_EVERY = 24, 4, 4  # as in tests/faults/tiny_experiment.py (checked by the reference run)
PEER_TIMEOUT = 10  # seconds: config.distributed.peer_timeout_seconds of every run (jax.distributed's heartbeat: twice that)
PEER_TIMEOUT_EXIT_CODE = 75  # attnjax.training.loop.PEER_TIMEOUT_EXIT_CODE
RUN_TIMEOUT = 300  # seconds a run may take before it counts as hung
SURVIVOR_TIMEOUT = 2 * PEER_TIMEOUT + 30  # seconds the processes left after a fault may take to end by themselves
KINDS = ("kill9", "kill9-save", "sigterm", "sigstop", "enospc", "torn", "flaky-bucket", "bucket-outage")
# Faults of the checkpoint directory itself, beside torn (see CHECKPOINT_CHAIN): a step some of whose files never
# reached the disk, and a restart whose optimiser changed under the workdir (it must be refused, nothing moved)
CHECKPOINT_KINDS = ("partial", "changed")
DAMAGE_KINDS = ("torn", "partial")  # a crash that leaves the newest step damaged: the restart must set it aside
CHANGED_ARGS = ("--config.train.optimizer=sgd", "--allow_config_change")  # Adam's state saved, SGD's restored
# The checkpoint subset `make test` runs, on one workdir: the only step torn (a fresh start), a step with an older one
# partly missing (the older one restored), a changed optimiser (refused, every checkpoint kept), then the restart.
CHECKPOINT_CHAIN = (("torn", (1,), 4, "step"), ("partial", (0,), 12, "step"), ("changed", (0, 1), 12, "step"))
# The quick subset: these faults one after the other on one workdir (see run_chain).
QUICK_CHAIN = (("kill9", (1,), 4, "step"), ("enospc", (0, 1), 8, "step"), ("kill9-save", (0, 1), 16, "step"),
               ("sigstop", (0,), 20, "step"), ("kill9", (0,), STEPS, "final-eval"))


# Where a fault strikes after the last training step: the phase as the loop names it (see tools/aimed_train.py)
PHASES = {"final-eval": f"evaluating step {STEPS}", "final-save": f"saving step {STEPS}",
          "exit": "exiting after training"}


@dataclasses.dataclass
class Fault:
  kind: str
  processes: tuple[int, ...]  # the processes it hits (all for the disk and bucket faults)
  after_step: int  # injected right after this optimizer step (kill9-save: during the save of this step)
  delay: float = 0.0  # seconds after the mark
  outage: float = 20.0  # bucket-outage: seconds the bucket answers 503 to everything
  phase: str = "step"  # "step" (after after_step), or a phase after the last step: a key of PHASES

  def describe(self) -> str:
    return self.kind

  def mark(self) -> str:
    """Where the hit processes stop themselves for the fault (ATTNJAX_FAULT_MARK of tools/aimed_train.py)."""
    return f"step:{self.after_step}" if self.phase == "step" else PHASES[self.phase]

  def label(self) -> str:
    where = str(self.after_step) if self.phase == "step" else self.phase
    return f"{where}+{self.delay:.2f}s" if self.delay else where


@dataclasses.dataclass
class Row:
  fault: str
  processes: str
  step: str
  identical: str
  ok: bool
  message: str
  seconds: float
  missed: bool = False  # the fault never struck: its run ended before the mark


class Failed(Exception):
  """A fault's expectation that did not hold."""


class Missed(Failed):
  """The run ended before a hit process reached the fault's mark: the fault did not happen (re-aimed, not counted)."""


# ------------------------------------------------------------------------------------------------ processes


def _free_port() -> int:
  with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    return s.getsockname()[1]


class Cluster:
  """One launch of the two training processes (as launch/backends.py's Local does), logs in ``logdir``."""

  def __init__(self, ctx: "Context", workdir: str, name: str, env: dict | None = None, prefix: tuple = (),
               marks: dict[int, str] | None = None, args: tuple = ()):
    port = _free_port()
    self.logs = [ctx.logdir / f"{name}.p{i}.log" for i in range(2)]
    self.procs = []
    env = dict(ctx.env, **(env or {}))
    for i in range(2):
      # attnjax.train, stopping itself at its mark if it has one (the fault's process)
      penv = dict(env, ATTNJAX_FAULT_MARK=(marks or {}).get(i, ""))
      cmd = [*prefix, sys.executable, "-m", "tools.aimed_train", f"--config={CONFIG}", f"--workdir={workdir}",
             "--config.distributed.initialize=True", "--config.distributed.cpu_collectives=gloo",
             f"--config.distributed.coordinator_address=127.0.0.1:{port}", "--config.distributed.num_processes=2",
             f"--config.distributed.process_id={i}", f"--config.distributed.peer_timeout_seconds={PEER_TIMEOUT}",
             *args]
      with open(self.logs[i], "w") as log:
        self.procs.append(subprocess.Popen(cmd, cwd=ROOT, env=penv, stdout=log, stderr=subprocess.STDOUT,
                                           start_new_session=True))

  def log(self, i: int) -> str:
    return self.logs[i].read_text(errors="replace")

  def logged_step(self, i: int) -> int:
    steps = re.findall(rf"\] step (\d+)/{STEPS} ", self.log(i))
    return int(steps[-1]) if steps else 0

  def signal(self, i: int, sig: int) -> None:
    if self.procs[i].poll() is None:
      os.kill(self.procs[i].pid, sig)
      if sig == signal.SIGKILL:
        self.procs[i].wait()  # reaped at once, as a launcher or the kernel on another host would: no zombie pid

  def wait_for(self, condition, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
      if all(p.poll() is not None for p in self.procs):
        raise Failed(f"the run ended (exit codes {self.codes()}) before {what}")
      if time.monotonic() > deadline:
        raise Failed(f"timed out after {timeout:.0f} s waiting for {what}")
      time.sleep(0.005)

  def stopped(self, i: int) -> bool:
    try:
      with open(f"/proc/{self.procs[i].pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()[0] == "T"
    except OSError:
      return False

  def wait_mark(self, i: int, mark: str) -> None:
    """Until process ``i`` has stopped itself at ``mark``; :class:`Missed` if it ends before."""
    deadline = time.monotonic() + RUN_TIMEOUT
    while not self.stopped(i):
      if self.procs[i].poll() is not None:
        raise Missed(f"process {i} ended (exit code {self.procs[i].poll()}) before its mark {mark!r}")
      if time.monotonic() > deadline:
        raise Failed(f"timed out after {RUN_TIMEOUT} s waiting for process {i} to reach {mark!r}")
      time.sleep(0.005)

  def wait_step(self, i: int, step: int) -> None:
    self.wait_for(lambda: self.logged_step(i) >= step, RUN_TIMEOUT, f"process {i} to log step {step}")

  def wait(self, timeout: float, processes=(0, 1)) -> list[int | None]:
    """Exit codes of ``processes`` (None: still running after ``timeout``)."""
    deadline = time.monotonic() + timeout
    for i in processes:
      try:
        self.procs[i].wait(max(deadline - time.monotonic(), 0.01))
      except subprocess.TimeoutExpired:
        pass
    return [self.procs[i].poll() for i in processes]

  def codes(self) -> list[int | None]:
    return [p.poll() for p in self.procs]

  def kill(self) -> None:
    for p in self.procs:
      if p.poll() is None:
        os.kill(p.pid, signal.SIGKILL)
        p.wait()


def _tail(text: str, pattern: str) -> str:
  """The last line of ``text`` matching ``pattern`` (stripped of absl's prefix), or ''."""
  lines = [line for line in text.splitlines() if re.search(pattern, line)]
  if not lines:
    return ""
  return re.sub(r"^[IWEF]\d{4} [\d:.]+\s+\d+ \S+\] ", "", lines[-1]).strip()


# ------------------------------------------------------------------------------------------------ a full disk


class Tmpfs:
  """A size-limited tmpfs in a private mount namespace (``unshare``; no root needed where user namespaces are
  allowed): a disk that really fills up. Processes run in it through ``prefix``; this process sees it at ``view``."""

  def __init__(self, mountpoint: Path, size_kib: int):
    mountpoint.mkdir(parents=True, exist_ok=True)
    self.holder = subprocess.Popen(["unshare", "-rm", "--propagation", "private", "sleep", "100000"],
                                   stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    self.nsenter = ["nsenter", "-t", str(self.holder.pid), "-U", "-m", "--preserve-credentials"]
    for _ in range(100):  # until the holder has entered its namespaces
      if os.readlink(f"/proc/{self.holder.pid}/ns/mnt") != os.readlink("/proc/self/ns/mnt"):
        break
      time.sleep(0.02)
    self.mountpoint = mountpoint
    self._mount("mount", "-t", "tmpfs", "-o", f"size={size_kib}k", "tmpfs", str(mountpoint))
    self.prefix = (*self.nsenter, f"--wd={ROOT}")
    self.view = Path(f"/proc/{self.holder.pid}/root") / str(mountpoint).lstrip("/")

  def _mount(self, *args):
    subprocess.run([*self.nsenter, *args], check=True, capture_output=True, text=True)

  @staticmethod
  def available() -> str | None:
    """None if a tmpfs can be mounted here, else why not."""
    if not shutil.which("unshare") or not shutil.which("nsenter"):
      return "unshare/nsenter (util-linux) are not installed"
    mountpoint = tempfile.mkdtemp(prefix="attnjax_tmpfs_probe_")
    try:
      probe = subprocess.run(["unshare", "-rm", "mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", mountpoint],
                             capture_output=True, text=True)
    finally:
      os.rmdir(mountpoint)
    return None if probe.returncode == 0 else f"cannot mount a tmpfs in a user namespace: {probe.stderr.strip()}"

  def free_bytes(self) -> int:
    st = os.statvfs(self.view)
    return st.f_bavail * st.f_frsize

  def close(self):
    self.holder.kill()
    self.holder.wait()


def _disk_usage(path: Path) -> int:
  """Bytes a directory tree takes on a tmpfs (whole 4 KiB pages per file)."""
  total = 0
  for dirpath, _, files in os.walk(path):
    for name in files:
      total += -(-os.path.getsize(os.path.join(dirpath, name)) // 4096) * 4096
  return total


# ------------------------------------------------------------------------------------------------ a flaky bucket


class FlakyProxy:
  """An HTTP proxy in front of the Cloud Storage emulator that answers 503 to a share of the requests (``rate``), or
  to all of them while ``down`` is set. TensorStore (arrays) and gcsfs (everything else) both retry 503s."""

  def __init__(self, upstream_port: int, seed: int):
    self.rate, self.down, self.failed, self.served = 0.0, False, 0, 0
    self.rng, self.lock = random.Random(seed), threading.Lock()
    proxy = self

    class Handler(http.server.BaseHTTPRequestHandler):
      protocol_version = "HTTP/1.1"

      def log_message(self, *args):  # pylint: disable=arguments-differ
        pass

      def _forward(self):
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        with proxy.lock:
          fail = proxy.down or proxy.rng.random() < proxy.rate
          proxy.failed += fail
          proxy.served += 1
        if fail:
          payload = b'{"error": {"code": 503, "message": "injected by tools/faults.py"}}'
          self.send_response(503)
          self.send_header("Content-Type", "application/json")
          self.send_header("Content-Length", str(len(payload)))
          self.end_headers()
          self.wfile.write(payload)
          return
        conn = http.client.HTTPConnection("127.0.0.1", upstream_port, timeout=120)
        headers = {k: v for k, v in self.headers.items() if k.lower() not in ("connection", "keep-alive")}
        conn.request(self.command, self.path, body=body or None, headers=headers)  # Host kept: the emulator's
        response = conn.getresponse()  # upload URLs then point back at this proxy
        data = response.read()
        self.send_response(response.status)
        for key, value in response.getheaders():
          if key.lower() not in ("transfer-encoding", "connection", "content-length", "keep-alive"):
            self.send_header(key, value)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if self.command != "HEAD":
          self.wfile.write(data)
        conn.close()

      do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = do_HEAD = _forward

    self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    self.server.daemon_threads = True
    default_error = self.server.handle_error

    def handle_error(request, client_address):  # a client hanging up early (retries, range reads) is no error
      if not isinstance(sys.exc_info()[1], (BrokenPipeError, ConnectionResetError)):
        default_error(request, client_address)

    self.server.handle_error = handle_error
    self.port = self.server.server_address[1]
    threading.Thread(target=self.server.serve_forever, daemon=True).start()

  def close(self):
    self.server.shutdown()
    self.server.server_close()


@contextlib.contextmanager
def flaky_bucket(seed: int):
  """The emulator (tests/fake_gcs.py) behind a :class:`FlakyProxy`: yields (bucket root, env for the trainers,
  the proxy, the emulator)."""
  from tests.fake_gcs import fake_gcs  # pylint: disable=g-import-not-at-top
  with fake_gcs() as gcs:
    upstream = int(gcs.env["STORAGE_EMULATOR_HOST"].rsplit(":", 1)[1])
    proxy = FlakyProxy(upstream, seed)
    url = f"http://127.0.0.1:{proxy.port}"
    env = dict(gcs.env, STORAGE_EMULATOR_HOST=url, TENSORSTORE_GCS_HTTP_URL=url)
    try:
      yield gcs.root, env, proxy, gcs
    finally:
      proxy.close()


# ------------------------------------------------------------------------------------------------ the final state


def final_state(workdir: str, env: dict | None = None) -> dict:
  """The newest checkpoint of ``workdir`` as NumPy: ``{"step", "state": {path: array}, "data": data position}``.

  Read by Orbax straight into host arrays (no model, no mesh), so that it compares what was written."""
  import jax  # pylint: disable=g-import-not-at-top
  import orbax.checkpoint as ocp  # pylint: disable=g-import-not-at-top
  from etils import epath  # pylint: disable=g-import-not-at-top
  previous = {key: os.environ.get(key) for key in (env or {})}
  os.environ.update(env or {})
  try:
    if env:
      from tests.fake_gcs import _clear_gcsfs_cache  # pylint: disable=g-import-not-at-top
      _clear_gcsfs_cache()
    directory = epath.Path(workdir) / "checkpoints"
    steps = sorted(int(p.name) for p in directory.iterdir() if p.name.isdigit())
    if not steps:
      raise Failed(f"no checkpoint in {directory}")
    step_dir = directory / str(steps[-1])
    with ocp.PyTreeCheckpointer() as checkpointer:
      tree = checkpointer.metadata(step_dir / "state").item_metadata.tree
      restore_args = jax.tree_util.tree_map(lambda _: ocp.RestoreArgs(restore_type=np.ndarray), tree)
      state = checkpointer.restore(step_dir / "state", args=ocp.args.PyTreeRestore(restore_args=restore_args))
    with ocp.Checkpointer(ocp.JsonCheckpointHandler()) as checkpointer:
      data = checkpointer.restore(step_dir / "data")
  finally:
    for key, value in previous.items():
      if value is None:
        os.environ.pop(key, None)
      else:
        os.environ[key] = value
  leaves = {jax.tree_util.keystr(path): np.asarray(x) for path, x in jax.tree_util.tree_leaves_with_path(state)}
  return {"step": steps[-1], "state": leaves, "data": data}


def differences(state: dict, reference: dict) -> list[str]:
  """What differs, bit for bit, between two :func:`final_state` results (empty: identical)."""
  out = []
  if state["step"] != reference["step"]:
    out.append(f"newest checkpoint is step {state['step']}, the reference's {reference['step']}")
  if state["data"] != reference["data"]:
    out.append(f"data position {state['data']} != {reference['data']}")
  if state["state"].keys() != reference["state"].keys():
    out.append("different state trees")
  for key in sorted(state["state"].keys() & reference["state"].keys()):
    a, b = state["state"][key], reference["state"][key]
    if a.dtype != b.dtype or a.shape != b.shape or a.tobytes() != b.tobytes():
      out.append(key)
  return out


# ------------------------------------------------------------------------------------------------ scenarios


class Context:
  """What every fault of a session shares: a temporary root, the trainers' environment (a JAX compilation cache,
  the peer timeout), the logs and the reference run's final state."""

  def __init__(self, root: Path, seed: int = 0):
    self.root, self.seed = root, seed
    self.logdir = root / "logs"
    self.logdir.mkdir(parents=True, exist_ok=True)
    self.env = dict(os.environ, JAX_PLATFORMS="cpu", XLA_FLAGS="--xla_force_host_platform_device_count=1",
                    PYTHONPATH=str(ROOT),
                    # compiled once by the reference run, loaded by every later one: seconds instead of tens
                    JAX_COMPILATION_CACHE_DIR=str(root / "jax_cache"), JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS="0",
                    JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES="0")
    self.reference: dict | None = None
    self.checkpoint_bytes = self.other_bytes = 0
    self._count = 0

  def name(self, kind: str) -> str:
    self._count += 1
    return f"{self._count:02d}-{kind}"

  def make_reference(self) -> float:
    """The uninterrupted 2-process run every fault is compared with; returns its seconds."""
    start = time.monotonic()
    workdir = self.root / "reference"
    cluster = Cluster(self, str(workdir), "reference")
    codes = cluster.wait(RUN_TIMEOUT)
    if codes != [0, 0]:
      cluster.kill()
      raise RuntimeError(f"the reference run failed (exit codes {codes}); see {cluster.logs}")
    self.reference = final_state(str(workdir))
    if self.reference["step"] != STEPS:
      raise RuntimeError(f"the reference run ended at step {self.reference['step']}, expected {STEPS}: "
                         f"{CONFIG} and tools/faults.py disagree")
    self.checkpoint_bytes = max(_disk_usage(p) for p in (workdir / "checkpoints").iterdir() if p.name.isdigit())
    self.other_bytes = sum(_disk_usage(p) if p.is_dir() else os.path.getsize(p) for p in workdir.iterdir()
                           if p.name != "checkpoints")
    return time.monotonic() - start


def _resume(ctx: Context, workdir: str, name: str, env=None, prefix=()) -> str:
  """Restarts both processes on ``workdir``; they must finish. Returns what they restored ('' if nothing)."""
  cluster = Cluster(ctx, workdir, f"{name}.resume", env, prefix)
  codes = cluster.wait(RUN_TIMEOUT)
  if codes != [0, 0]:
    cluster.kill()
    raise Failed(f"the restart failed (exit codes {codes}): {_tail(cluster.log(0) + cluster.log(1), 'Error|error')}")
  return _tail(cluster.log(0), r"restored step \d+")


SURVIVOR_LINES = r"peer timeout:|peer died:|The failed peer:"  # what a survivor's last words start with


def _expect_survivors_exit(cluster: Cluster, survivors, failed: int, reason: str, may_finish: bool = False) -> str:
  """The processes not hit must end by themselves, non-zero, their last log line naming process ``failed``; returns
  that line. With ``may_finish`` (a fault at exit, when a survivor's run may be complete) a survivor may also end
  with its run done and exit 0."""
  codes = cluster.wait(SURVIVOR_TIMEOUT, survivors)
  if any(c is None for c in codes):
    raise Failed(f"process(es) {list(survivors)} still running {SURVIVOR_TIMEOUT} s after {reason}")
  lines = [_last_line(cluster.log(i)) for i in survivors]
  if may_finish and codes == [0] * len(survivors) and all(line.startswith("done: ") for line in lines):
    return "exit 0: its run was complete"
  if not all(re.search(SURVIVOR_LINES, line) and f"process {failed} (" in line for line in lines):
    raise Failed(f"process(es) {list(survivors)} exited {codes} after {reason} without naming the failed process "
                 f"as their last words: {lines}")
  if any(c == 0 for c in codes):
    raise Failed(f"process(es) {list(survivors)} exited 0 after {reason}")
  return f"exit {codes[0]}: {lines[0]}"


def _last_line(text: str) -> str:
  """The last line of a log that says something (stripped of absl's prefix), or ''."""
  return _tail(text, r"\S")


def run_fault(ctx: Context, fault: Fault) -> Row:
  """Injects ``fault`` into a fresh 2-process run, restarts all processes, compares with the reference. A fault that
  missed its mark is aimed again on a fresh run (once): a miss is never counted as another fault."""
  processes = "both" if len(fault.processes) == 2 else str(fault.processes[0])
  row = _scenario(ctx, [fault], fault.kind, processes)
  if row.missed:
    again = _scenario(ctx, [fault], fault.kind, processes)
    again.message = f"{row.message.split(' [logs:')[0]}; again: {again.message}"
    row = again
  return row


def run_chain(ctx: Context, faults: list[Fault]) -> Row:
  """The faults one after the other on one workdir (each restart meets the next fault; steps must increase), then a
  last restart that finishes, compared with the reference: the cheap form of :func:`run_fault` that CI runs."""
  return _scenario(ctx, faults, " > ".join(f"{f.kind}[{''.join(map(str, f.processes))}]" for f in faults), "-")


def _scenario(ctx: Context, faults: list[Fault], label: str, processes: str) -> Row:
  name = ctx.name(faults[0].kind if len(faults) == 1 else "chain")
  start = time.monotonic()
  steps, messages, identical, ok, missed, check_failures = [], [], "-", False, False, []
  try:
    with contextlib.ExitStack() as stack:
      if faults[0].kind in ("flaky-bucket", "bucket-outage"):
        step, message, workdir, env = _bucket_fault(ctx, faults[0], name, stack)
        steps.append(step)
        messages.append(message)
      else:
        workdir, env, prefix, tmpfs = ctx.root / name, None, (), None
        if any(f.kind == "enospc" for f in faults):  # the whole workdir on a disk that can fill up
          size = ctx.other_bytes + 5 * ctx.checkpoint_bytes  # keep=2, one write in flight, and room to spare
          tmpfs = Tmpfs(workdir, size // 1024 + 256)
          stack.callback(tmpfs.close)
          prefix = tmpfs.prefix
        view = tmpfs.view if tmpfs else workdir
        for i, fault in enumerate(faults):
          newest = None if _after_damage(faults[:i]) else max(_committed(view), default=0)
          try:
            step, message = _fault_run(ctx, fault, f"{name}.{i}", str(workdir), view, prefix, tmpfs, newest)
          except Missed:
            raise
          except Failed as e:  # a check of how the fault ended failed: still restart, so that bit-identity is known
            steps.append(fault.label())
            check_failures.append(f"FAILED: {e}")
            messages.append(check_failures[-1])
            break
          steps.append(step)
          messages.append(message)
        last = faults[len(steps) - 1]
        damaged = next((f for f in reversed(faults[:len(steps)]) if f.kind in DAMAGE_KINDS), None)
        newest = None if _after_damage(faults[:len(steps)]) else max(_committed(view), default=0)
        restored = _resume(ctx, str(workdir), name, prefix=prefix)
        if damaged and re.search(rf"restored step {damaged.after_step}\b", restored):
          raise Failed(f"the damaged step {damaged.after_step} was taken for a checkpoint")
        _check_resumed_from(newest, _restored_step(restored), "the restart")
        messages.append(f"restart: {restored or 'from scratch'}")
        workdir = view
      diff = differences(final_state(str(workdir), env), ctx.reference)
      identical = "yes" if not diff else "no"
      if diff:
        raise Failed(f"final state differs from the uninterrupted run: {', '.join(diff[:5])}"
                     f"{f' (+{len(diff) - 5} more)' if len(diff) > 5 else ''}")
      ok = not check_failures
  except Missed as e:
    missed = True
    messages.append(f"MISSED (re-aimed): {e}")
  except Failed as e:
    messages.append(f"FAILED: {e}")
  except Exception as e:  # pylint: disable=broad-except
    messages.append(f"harness error: {type(e).__name__}: {e}")
  planned = ", ".join(f"{f.label()}?" for f in faults[len(steps):])  # the marks of the faults not reached
  return Row(label, processes, ", ".join(steps + ([planned] if planned else [])), identical, ok,
             f"{'; '.join(messages)} [logs: {ctx.logdir}/{name}.*]", time.monotonic() - start, missed)


def _after_damage(faults: list[Fault]) -> bool:
  """Whether the newest step may be damaged after ``faults`` (a damage fault not followed by a launch that set it
  aside: a refused launch moves nothing), so that the next launch resumes from an older step or from scratch."""
  for fault in reversed(faults):
    if fault.kind != "changed":
      return fault.kind in DAMAGE_KINDS
  return False


def _restored_step(text: str) -> int:
  """The step of the first "restored step N" line of a log (0: the run started from scratch)."""
  found = re.search(r"restored step (\d+)", text)
  return int(found.group(1)) if found else 0


def _check_resumed_from(newest: int | None, restored: int, what: str) -> None:
  """A launch must resume from the newest checkpoint committed before it (None: not checked, after a torn step)."""
  if newest is not None and restored != newest:
    raise Failed(f"{what} resumed from {f'step {restored}' if restored else 'scratch'}, but step {newest} was the "
                 "newest committed checkpoint")


def _fault_run(ctx: Context, fault: Fault, name: str, workdir: str, view: Path, prefix: tuple, tmpfs,
               newest: int | None = None) -> tuple:
  """One launch of both processes on ``workdir`` (resuming whatever is there) that ``fault`` hits, and the checks
  of how they end; returns (where the fault landed, what happened). The launch must resume from ``newest``, the
  newest checkpoint committed before it (0: none; None: not checked)."""
  kind, hit = fault.kind, fault.processes
  survivors = tuple(i for i in (0, 1) if i not in hit)
  aimed = kind in ("kill9", "sigstop", "sigterm", "enospc")
  if kind == "changed":
    return _changed_run(ctx, name, workdir, view, prefix)
  cluster = Cluster(ctx, workdir, name, prefix=prefix, marks={i: fault.mark() for i in hit} if aimed else None)
  try:
    if aimed:  # each hit process stops itself at the mark; the fault strikes there (after the delay, running)
      for i in hit:
        cluster.wait_mark(i, fault.mark())
      label = fault.label()
      if fault.delay and kind != "enospc":
        for i in hit:
          cluster.signal(i, signal.SIGCONT)
        time.sleep(fault.delay)
    if kind == "kill9":
      for i in hit:
        cluster.signal(i, signal.SIGKILL)
      message = f"killed at {fault.mark()}"
      if survivors:
        message += "; " + _expect_survivors_exit(cluster, survivors, hit[0], f"kill -9 of process {hit[0]}",
                                                 may_finish=fault.phase == "exit")
    elif kind == "kill9-save":
      tmp = view / "checkpoints" / f"{fault.after_step}.orbax-checkpoint-tmp"
      cluster.wait_for(tmp.exists, RUN_TIMEOUT, f"the write of step {fault.after_step} to start")
      for i in hit:
        cluster.signal(i, signal.SIGKILL)
      in_flight = tmp.exists() and not (view / "checkpoints" / str(fault.after_step)).exists()
      label = f"save {fault.after_step}"
      message = f"write of step {fault.after_step} {'in flight' if in_flight else 'just committed'} at the kill"
      if survivors:
        message += "; " + _expect_survivors_exit(cluster, survivors, hit[0], f"kill -9 of process {hit[0]}")
    elif kind == "sigterm":
      cluster.signal(hit[0], signal.SIGTERM)
      cluster.signal(hit[0], signal.SIGCONT)  # stopped at its mark without a delay
      codes = cluster.wait(RUN_TIMEOUT)
      saved = [_tail(cluster.log(i), r"preempted: checkpoint of step") for i in (0, 1)]
      finished = [f"done: {{'step': {STEPS}," in cluster.log(i) for i in (0, 1)]
      if codes == [0, 0] and not any(saved) and all(finished):
        message = "both processes finished the run: the signal came after its last sync point"
      elif codes != [PREEMPTED_EXIT] * 2 or not all(saved) or saved[0] != saved[1]:  # both saved, "try again"
        raise Failed(f"after SIGTERM to process {hit[0]} only: exit codes {codes}, saved: {saved}")
      else:
        message = f"both processes: {saved[0]}"
    elif kind == "sigstop":
      cluster.signal(hit[0], signal.SIGSTOP)  # still stopped at its mark without a delay
      t0 = time.monotonic()
      message = _expect_survivors_exit(cluster, survivors, hit[0], f"SIGSTOP of process {hit[0]}")
      code = cluster.codes()[survivors[0]]
      if code != PEER_TIMEOUT_EXIT_CODE:
        raise Failed(f"process {survivors[0]} exited {code} after SIGSTOP of process {hit[0]}: {message!r}")
      message = f"after {time.monotonic() - t0:.0f} s: {message}"
    elif kind == "enospc":
      filler = view / "filler"  # leaves half a checkpoint free: the next write fails part-way
      with open(filler, "wb") as f:
        f.write(b"\0" * max(tmpfs.free_bytes() - ctx.checkpoint_bytes // 2, 0))
        committed_before = _committed(view)
        for i in hit:
          cluster.signal(i, signal.SIGCONT)
        # topped up while the run goes on: Orbax deleting an old step (keep=2) after a commit frees a checkpoint's
        # room, which would let the next write through
        deadline = time.monotonic() + RUN_TIMEOUT
        while any(c is None for c in cluster.codes()) and time.monotonic() < deadline:
          spare = tmpfs.free_bytes() - ctx.checkpoint_bytes // 2
          if spare > 0:
            f.write(b"\0" * spare)
            f.flush()
          time.sleep(0.02)
      codes = cluster.wait(RUN_TIMEOUT)
      logs = cluster.log(0) + cluster.log(1)
      if all(c == 0 for c in codes):
        raise Failed("the disk filled up but the run finished")
      error = _tail(logs, r"checkpoint: writing step \d+ .* failed on process")
      if "No space left on device" not in logs or not error:
        raise Failed(f"no clear 'No space left on device' error (exit codes {codes})")
      message = "No space left on device: " + error[error.index("checkpoint: writing"):][:170] + "..."
      filler.unlink()  # the operator frees space
      committed = _committed(view)
      if max(committed_before, default=0) > max(committed, default=0):
        raise Failed(f"checkpoints lost: {committed_before} before the disk filled up, {committed} after")
    elif kind in DAMAGE_KINDS:
      # a crash right after step `after_step` is committed, and a filesystem that lost part of that step's files:
      # cut short (torn) or never written (partial: the array data files of the process)
      torn = fault.after_step
      cluster.wait_for((view / "checkpoints" / str(torn)).exists, RUN_TIMEOUT, f"step {torn} to be committed")
      for i in (0, 1):
        cluster.signal(i, signal.SIGKILL)
      cluster.wait(RUN_TIMEOUT)
      cut = 0
      for path in (view / "checkpoints" / str(torn) / "state" / f"ocdbt.process_{hit[0]}").rglob("*"):
        if kind == "torn" and path.is_file() and path.stat().st_size > 64:
          with open(path, "r+b") as f:
            f.truncate(16)
          cut += 1
        elif kind == "partial" and path.is_file() and path.parent.name == "d":
          path.unlink()
          cut += 1
      if not cut:
        raise Failed(f"no file of process {hit[0]} to damage in step {torn}")
      label = f"{torn} ({kind})"
      message = (f"{cut} file(s) of process {hit[0]} in step {torn} "
                 f"{'cut short' if kind == 'torn' else 'missing'} after a crash")
    else:
      raise ValueError(f"unknown fault kind {kind!r}")
  finally:
    cluster.kill()  # what is left (a frozen process) is killed, as an operator or a scheduler would
  restored = _restored_step(cluster.log(0))
  _check_resumed_from(newest, restored, "the launch")
  return label, f"{f'resumed from step {restored}' if restored else 'from scratch'}: {message}"


def _changed_run(ctx: Context, name: str, workdir: str, view: Path, prefix: tuple) -> tuple:
  """A launch of both processes with another optimiser (:data:`CHANGED_ARGS`) on a workdir with checkpoints: both
  must stop non-zero, their last log line naming the step that does not fit and a leaf of the optimiser state, and
  leave every checkpoint and config.json as they were."""
  before = _committed(view)
  config_before = (view / "config.json").read_bytes()
  if not before:
    raise Failed("no checkpoint to refuse: the changed optimiser needs a workdir with checkpoints")
  cluster = Cluster(ctx, workdir, name, prefix=prefix, args=CHANGED_ARGS)
  try:
    codes = cluster.wait(RUN_TIMEOUT)
  finally:
    cluster.kill()
  lines = [_last_line(cluster.log(i)) for i in (0, 1)]
  if any(c in (0, None) for c in codes):
    raise Failed(f"a run with another optimiser was not refused (exit codes {codes}): {lines}")
  if not all(re.search(r"does not fit this run's state \(opt_state\.", line) for line in lines):
    raise Failed(f"the refusal does not name a leaf of the optimiser state: {lines}")
  if _committed(view) != before or (view / "config.json").read_bytes() != config_before:
    raise Failed(f"the refused run changed the workdir: checkpoints {before} -> {_committed(view)}"
                 f"{', config.json rewritten' if (view / 'config.json').read_bytes() != config_before else ''}")
  refusal = lines[0][lines[0].index("checkpoint: step"):]
  return "changed optimiser", f"refused (exit codes {codes}): {refusal[:200]}..."


def _committed(view: Path) -> list[int]:
  directory = view / "checkpoints"
  return sorted(int(p.name) for p in directory.iterdir() if p.name.isdigit()) if directory.exists() else []


def _bucket_fault(ctx: Context, fault: Fault, name: str, stack: contextlib.ExitStack):
  root, env, proxy, _ = stack.enter_context(flaky_bucket(ctx.seed * 1000 + fault.after_step))
  workdir = f"{root}/{name}"
  if fault.kind == "flaky-bucket":
    proxy.rate = 0.02
    cluster = Cluster(ctx, workdir, name, env)
    stack.callback(cluster.kill)
    codes = cluster.wait(RUN_TIMEOUT)
    if codes != [0, 0]:
      raise Failed(f"a bucket failing {proxy.rate:.0%} of requests stopped the run (exit codes {codes}): "
                   f"{_tail(cluster.log(0) + cluster.log(1), 'Error|error')}")
    proxy.rate = 0.0
    return "all", f"{proxy.failed} of {proxy.served} requests answered 503; retried", workdir, env
  # bucket-outage: everything fails for a while from a random step on
  cluster = Cluster(ctx, workdir, name, env, marks={i: fault.mark() for i in (0, 1)})
  stack.callback(cluster.kill)
  for i in (0, 1):
    cluster.wait_mark(i, fault.mark())
    cluster.signal(i, signal.SIGCONT)
  time.sleep(fault.delay)
  proxy.down = True
  outage = fault.outage
  time.sleep(outage)
  proxy.down = False
  codes = cluster.wait(RUN_TIMEOUT)
  if any(c is None for c in codes):
    raise Failed(f"still running {RUN_TIMEOUT} s after a {outage:.0f} s outage")
  logs = cluster.log(0) + cluster.log(1)
  if codes == [0, 0]:
    message = f"rode out a {outage:.0f} s outage on retries ({proxy.failed} requests answered 503)"
  else:
    message = (f"a {outage:.0f} s outage stopped the run (exit codes {codes}): "
               f"{_tail(logs, 'failed while|failed on process|Error')[:200]}...")
  cluster.kill()
  restored = _resume(ctx, workdir, name, env)
  return fault.label(), f"{message}; restart: {restored or 'from scratch'}", workdir, env


# ------------------------------------------------------------------------------------------------ the session


def random_faults(n: int, seed: int, kinds=KINDS) -> list[Fault]:
  """``n`` faults: each kind in turn (so every kind occurs), random processes, steps and delays. A kill -9 strikes
  after a random step or in a phase after the last one (final evaluation, final save, exit); the first kill -9 of
  the session hits process 0, which hosts the coordination service, after the last step."""
  rng = random.Random(seed)
  faults = []
  for i in range(n):
    kind = kinds[i % len(kinds)]
    processes = rng.choice([(0,), (1,), (0, 1)]) if kind in ("kill9", "kill9-save") else (rng.choice([(0,), (1,)]))
    if kind in ("enospc", "flaky-bucket", "bucket-outage"):
      processes = (0, 1)
    after = rng.choice(range(2, STEPS, 2))  # any step, on and between sync points and checkpoints
    if kind in ("kill9-save", "torn"):  # a checkpoint's step
      after = rng.choice(range(CHECKPOINT_EVERY, STEPS, CHECKPOINT_EVERY))
    phase = "step"
    if kind == "kill9":
      first = not any(f.kind == "kill9" for f in faults)
      phase = rng.choice(sorted(PHASES)) if first else rng.choice(["step", "step", *sorted(PHASES)])
      processes = (0,) if first else processes
    delay = round(rng.uniform(0.0, 0.5), 2)
    # outages shorter and longer than gcsfs' retries (6, about a minute in all; TensorStore's last longer)
    faults.append(Fault(kind, processes, STEPS if phase != "step" else after, delay,
                        outage=rng.choice([20.0, 80.0]), phase=phase))
  rng.shuffle(faults)
  return faults


def quick_chain() -> list[Fault]:
  return [Fault(kind, processes, step, 0.1, phase=phase) for kind, processes, step, phase in QUICK_CHAIN]


def run_quick(ctx: Context, with_enospc: bool = True) -> list[Row]:
  """The CI subset: :data:`QUICK_CHAIN` as one chain on one workdir (the bucket faults run in ``make faults``)."""
  chain = [f for f in quick_chain() if with_enospc or f.kind != "enospc"]
  return [run_chain(ctx, chain)]


def checkpoint_chain() -> list[Fault]:
  return [Fault(kind, processes, step, 0.0, phase=phase) for kind, processes, step, phase in CHECKPOINT_CHAIN]


def run_checkpoints(ctx: Context) -> list[Row]:
  """The checkpoint subset `make test` runs: :data:`CHECKPOINT_CHAIN` as one chain on one workdir."""
  return [run_chain(ctx, checkpoint_chain())]


def print_table(rows: list[Row], out=sys.stdout) -> None:
  header = ("#", "fault", "process", "step", "bit-identical", "outcome", "seconds", "message")
  table = [header] + [(str(i), r.fault, r.processes, r.step, r.identical, "ok" if r.ok else "FAILED",
                       f"{r.seconds:.0f}", r.message) for i, r in enumerate(rows, 1)]
  widths = [max(len(row[c]) for row in table) for c in range(len(header) - 1)]
  for row in table:
    print("  ".join(cell.ljust(w) for cell, w in zip(row, widths)) + "  " + row[-1], file=out)


def main(argv=None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("--faults", type=int, default=20)
  parser.add_argument("--seed", type=int, default=0)
  parser.add_argument("--quick", action="store_true", help="the quick subset: one fault of the main kinds")
  parser.add_argument("--checkpoints", action="store_true", help="the checkpoint subset `make test` runs: torn, "
                      "partial, changed on one workdir")
  parser.add_argument("--kinds", default=",".join(KINDS), help="comma-separated kinds to draw from")
  parser.add_argument("--only", default=None, help="these faults: KIND:PROCESSES:STEP[:OUTAGE_SECONDS],... where STEP "
                      f"may be a phase after the last step ({', '.join(sorted(PHASES))}); e.g. sigstop:0:8,"
                      "kill9:01:12,kill9:0:final-eval,bucket-outage:01:16:80")
  parser.add_argument("--keep", default=None, help="directory for the runs and logs (kept); default: a temporary one")
  args = parser.parse_args(argv)
  os.environ.setdefault("JAX_PLATFORMS", "cpu")  # this process reads checkpoints with JAX: no TPU probing (libtpu)
  kinds = tuple(k for k in args.kinds.split(",") if k)
  unknown = set(kinds) - set(KINDS)
  if unknown:
    parser.error(f"unknown kinds {sorted(unknown)}; known: {KINDS}")
  if args.checkpoints:
    faults = checkpoint_chain()
  else:
    faults = quick_chain() if args.quick else random_faults(args.faults, args.seed, kinds)
  if args.only:
    faults = []
    for one in args.only.split(","):
      kind, processes, step, *outage = one.split(":")
      phase = step if step in PHASES else "step"
      faults.append(Fault(kind, tuple(int(c) for c in processes), STEPS if step in PHASES else int(step), 0.1,
                          outage=float(outage[0]) if outage else 20.0, phase=phase))
  no_tmpfs = Tmpfs.available() if any(f.kind == "enospc" for f in faults) else None
  if no_tmpfs:
    print(f"enospc faults skipped: {no_tmpfs}", file=sys.stderr)
    faults = [f for f in faults if f.kind != "enospc"]
  if args.quick or args.checkpoints:
    print(f"{'quick' if args.quick else 'checkpoints'}: {' > '.join(f.kind for f in faults)} on one workdir",
          flush=True)
  root = Path(args.keep or tempfile.mkdtemp(prefix="attnjax_faults_")).resolve()  # Orbax needs absolute paths
  root.mkdir(parents=True, exist_ok=True)
  ctx = Context(root, args.seed)
  t0 = time.monotonic()
  print(f"reference: an uninterrupted 2-process run of {CONFIG} ({STEPS} steps) in {root}", flush=True)
  print(f"reference: {ctx.make_reference():.0f} s", flush=True)
  rows = []
  if args.quick:
    rows = run_quick(ctx, with_enospc=not no_tmpfs)
  elif args.checkpoints:
    rows = run_checkpoints(ctx)
  else:
    for i, fault in enumerate(faults, 1):
      rows.append(run_fault(ctx, fault))
      row = rows[-1]
      print(f"[{i}/{len(faults)}] {row.fault} on {row.processes} at {row.step}: "
            f"{'ok' if row.ok else 'FAILED'} in {row.seconds:.0f} s: {row.message}", flush=True)
  print()
  print_table(rows)
  failed = sum(not r.ok for r in rows)
  print(f"\n{len(rows) - failed} of {len(rows)} faults ended bit-identical to the uninterrupted run "
        f"({time.monotonic() - t0:.0f} s in all)")
  if not failed and not args.keep:
    shutil.rmtree(root, ignore_errors=True)
  elif failed:
    print(f"runs and logs kept in {root}")
  return 1 if failed else 0


if __name__ == "__main__":
  sys.exit(main())
