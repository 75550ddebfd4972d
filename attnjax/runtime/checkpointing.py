"""Orbax checkpoints that resume exactly and never lose a checkpoint the run had.

A step directory holds the train state (params, optimiser state, step, RNG) and, as JSON, the data iterator's
position, so a resumed run sees exactly the batches an uninterrupted one would, and the run's bookkeeping (``meta``:
the training time so far, which ``train.time_limit_minutes`` counts across restarts). The directory may be local or a
bucket (``gs://...``): Orbax writes arrays through TensorStore's GCS driver and everything else through epath. Preservation keeps the latest
``keep`` checkpoints *and* the best one by the validation metric (one Orbax manager, two preservation policies).
Saving is asynchronous: the arrays are copied off the devices before ``save`` returns, the files are written in the
background, and Orbax commits a step by an atomic rename, so an interrupted write never looks like a checkpoint.

Evaluation restores only the parameters (:meth:`Checkpointer.restore_params`, an Orbax partial restore): no
optimiser state is read, which for Adam is two thirds of the bytes.

Restoring walks the steps from the newest down and tells a changed run from damaged bytes. A step whose saved tree
does not fit the run's state (another model or optimiser under the workdir) stops the run, naming the first differing
leaves, and every checkpoint stays. A step whose bytes cannot be read (a file cut short by a crash, a missing array
file, a damaged metadata file) is set aside (moved to ``<directory>.unreadable/`` on a local disk, deleted in a
bucket; each one recorded in ``<directory>.unreadable/set_aside.json``) and the previous step is tried; when none is
left the run starts from scratch. On several processes every process judges the step and they agree before any acts:
all restore the same step, set aside the same ones, or stop together. Restoring into a different
mesh is a matter of the target shardings passed in ``abstract_state``; Orbax reshards.

A write that fails (a full disk, a bucket that keeps failing after the client's retries) raises
:class:`CheckpointWriteError`, naming the step, the directory and the process, at the next :meth:`Checkpointer.save`
or :meth:`Checkpointer.wait` (asynchronous writes fail in the background); the step is left uncommitted, which Orbax
never lists as a checkpoint and removes on the next start.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import socket
import time
from typing import Any

from absl import logging
import jax
import numpy as np
import orbax.checkpoint as ocp
from orbax.checkpoint.checkpoint_managers import preservation_policy as pp

from attnjax import fs

ITEMS = ("state", "data", "meta")


class CheckpointRestoreError(RuntimeError):
  """No checkpoint of a workdir can be restored into the run's state (see :meth:`Checkpointer.restore`)."""


class CheckpointWriteError(RuntimeError):
  """Writing a checkpoint step failed; the step is not a checkpoint (the previous ones are intact)."""


def _process() -> str:
  return f"process {jax.process_index()} of {jax.process_count()} (host {socket.gethostname()}, pid {os.getpid()})"


def _first_line(e: BaseException) -> str:
  text = str(e).strip().splitlines()
  return text[0][:1000] if text else type(e).__name__


class Checkpointer:
  """Save/restore of ``(TrainState, data_state)`` in ``directory`` with latest-N + best-1 preservation.

  Args:
    directory: where step directories go (created).
    keep: latest checkpoints kept.
    best_metric: key of the metrics dict passed to :meth:`save` that ranks checkpoints; None keeps no best.
    best_mode: ``"max"`` or ``"min"``.
    async_save: write in a background thread.
    read_only: only read (another run's checkpoints): nothing is created, cleaned up or deleted.
  """

  def __init__(self, directory: str, *, keep: int = 3, best_metric: str | None = None, best_mode: str = "max",
               async_save: bool = True, read_only: bool = False):
    if best_mode not in ("max", "min"):
      raise ValueError(f"checkpoint best_mode must be 'max' or 'min', got {best_mode!r}")
    if keep < 1:
      raise ValueError(f"checkpoint keep must be >= 1 (a run must always keep its latest checkpoint), got {keep}")
    self.directory = fs.path(directory)  # absolute if local; a gs:// URL kept as it is
    self.best_metric = best_metric
    self.best_mode = best_mode
    policies = [pp.LatestN(n=keep)]
    if best_metric:
      policies.append(pp.BestN(get_metric_fn=lambda m: m[best_metric], reverse=best_mode == "min", n=1,
                               keep_checkpoints_without_metrics=False))
    # best_fn as well as the policy: it makes Orbax store each step's metrics, which best_step() reads back
    options = ocp.CheckpointManagerOptions(preservation_policy=pp.AnyPreservationPolicy(policies),
                                           best_fn=(lambda m: m[best_metric]) if best_metric else None,
                                           best_mode=best_mode,
                                           enable_async_checkpointing=async_save, create=not read_only,
                                           cleanup_tmp_directories=not read_only, read_only=read_only)
    self.manager = ocp.CheckpointManager(self.directory, item_names=ITEMS, options=options)
    self._in_flight = None  # the step whose asynchronous write may still fail
    self._background_error = None  # how this process's asynchronous write failed (see wait)
    self._record_background_errors()

  def _record_background_errors(self) -> None:
    """Keeps the error of a failed asynchronous write of this process as Orbax's finalize thread meets it (a
    wrapper around its checkpointer's ``wait_until_finished``: private Orbax attributes, skipped if absent)."""
    checkpointer = getattr(self.manager, "_checkpointer", None)
    original = getattr(checkpointer, "wait_until_finished", None)
    if original is None:
      return

    def wait_until_finished():
      try:
        return original()
      except BaseException as e:
        self._background_error = e
        raise

    checkpointer.wait_until_finished = wait_until_finished

  def save(self, step: int, state, data_state: dict, metrics: dict | None = None, *, force: bool = False,
           meta: dict | None = None) -> bool:
    """Saves ``state`` and the data position (and ``meta``, small JSON bookkeeping) as ``step``."""
    self.wait()  # Orbax would wait for the previous asynchronous write anyway: its failure is reported as its own
    try:
      tree = to_checkpoint_tree(state)
      saved = self.manager.save(step, args=ocp.args.Composite(state=ocp.args.StandardSave(tree),
                                                              data=ocp.args.JsonSave(data_state),
                                                              meta=ocp.args.JsonSave(dict(meta or {}))),
                                metrics=metrics, force=force)
    except Exception as e:  # pylint: disable=broad-except
      raise self._write_error(e, step) from e
    if saved:
      self._in_flight = step
      logging.info("checkpoint: saving step %d to %s%s", step, self.directory,
                   f" with {metrics}" if metrics else "")
    return saved

  def wait(self) -> None:
    if jax.process_count() > 1:
      # Multi-host: Orbax's finalize thread, on a failed write of this process (a full disk, a bucket that keeps
      # failing), meets the other processes at a barrier while they wait at their commit barrier for this process's
      # part: both sides would wait for Orbax's timeout (AsyncOptions.timeout_secs, 10 minutes). The fault harness
      # found this with a bucket outage longer than gcsfs' retries. Here the failure is raised as soon as it is known:
      # the process then exits (see train_and_evaluate), which ends the others' wait.
      holder = getattr(self.manager, "_finalize_thread", None)
      thread = holder.get() if hasattr(holder, "get") else None
      while thread is not None and thread.is_alive() and self._background_error is None:
        thread.join(0.1)
      if self._background_error is not None:
        raise self._write_error(self._background_error) from self._background_error
    try:
      self.manager.wait_until_finished()
    except Exception as e:  # pylint: disable=broad-except
      raise self._write_error(e) from e
    self._in_flight = None

  def _write_error(self, e: BaseException, step: int | None = None) -> CheckpointWriteError:
    """``e`` from Orbax as a :class:`CheckpointWriteError` naming what failed: the write in flight, if it failed in
    the background (e.g. ``No space left on device``), else the step being saved."""
    failed = self._in_flight if step is None else step
    self._in_flight = self._background_error = None
    return CheckpointWriteError(
        f"checkpoint: writing step {failed} to {self.directory} failed on {_process()}: {type(e).__name__}: "
        f"{_first_line(e)}. That step is not a checkpoint; the ones before it are unaffected.")

  def steps(self) -> list[int]:
    return sorted(self.manager.all_steps())

  def best_step(self) -> int | None:
    """The kept step with the best ``best_metric`` (None without metric or metrics)."""
    if not self.best_metric:
      return None
    scored = []
    for step in self.steps():
      metrics = self.manager.metrics(step)
      if metrics and self.best_metric in metrics:
        scored.append((float(metrics[self.best_metric]), step))
    if not scored:
      return None
    return (min(scored) if self.best_mode == "min" else max(scored))[1]

  def restore(self, abstract_state, step: int | None = None) -> tuple[Any, dict, int, dict] | None:
    """Restores ``step`` (default: the newest usable one) into ``abstract_state``'s shapes and shardings.

    Returns ``(state, data_state, step, meta)``, or None if there is no checkpoint to resume from. Each step, newest
    first, is judged on every process and the judgements agreed before any process acts (:func:`decide`):

    * **changed**: the step's saved tree does not fit ``abstract_state`` (a leaf missing or added, a shape or dtype
      changed: another model or optimiser under this workdir). :class:`CheckpointRestoreError` names the first
      differing leaves and nothing is moved: training from scratch there would bury every checkpoint of the run.
    * **damaged**: its bytes cannot be read (a truncated or missing array file, a damaged metadata file, a read error,
      twice). The step is set aside (:meth:`_set_aside`, recorded in ``<directory>.unreadable/set_aside.json``) with
      one warning naming the step and the file, and the next older step is judged; when none is left the run starts
      from scratch (None): the crash already lost what those steps held.
    * **usable**: restored.

    An explicitly requested ``step`` is never set aside: damage raises :class:`CheckpointRestoreError` naming it.
    """
    candidates = [step] if step is not None else sorted(self.steps(), reverse=True)
    damaged: list[dict] = []  # agreed damaged, newest first: set aside once a step is restored or none is left
    for candidate in candidates:
      verdict = _agree(self._judge_layout(candidate, abstract_state))
      restored = None
      if verdict["kind"] == USABLE:
        restored, verdict = self._read(candidate, abstract_state)
      if verdict["kind"] == CHANGED:
        raise CheckpointRestoreError(
            f"checkpoint: step {candidate} in {self.directory} does not fit this run's state ({verdict['reason']}); "
            f"{len(self.steps())} step(s) left in place. Resume with the model and optimiser that wrote them, or "
            "start another --workdir.")
      if verdict["kind"] == USABLE:
        logging.info("checkpoint: restored step %d from %s", candidate, self.directory)
        self._set_aside_all(damaged, then=f"restored step {candidate}")
        state = from_checkpoint_tree(restored["state"], abstract_state)
        return state, restored["data"], candidate, dict(restored["meta"] or {})
      where = f"{verdict['file'] or 'a file of the step'} on process {verdict['process']}: {verdict['reason']}"
      if step is not None:
        raise CheckpointRestoreError(f"checkpoint: step {candidate} in {self.directory} is damaged ({where})")
      older = [c for c in candidates if c < candidate]
      logging.warning("checkpoint: step %d in %s is DAMAGED (%s); it will be set aside, %s", candidate,
                      self.directory, where, f"trying step {older[0]}" if older else "and the run starts from scratch")
      damaged.append({"step": candidate, **{k: verdict[k] for k in ("process", "file", "reason")}})
    if damaged:
      self._set_aside_all(damaged, then="started from scratch")
    return None

  def _judge_layout(self, step: int, abstract_state) -> dict:
    """This process's verdict on ``step`` from its saved tree alone (no array is read): usable so far, changed (the
    first differing leaves), or damaged (the tree metadata cannot be read)."""
    state_dir = self.directory / str(step) / "state"
    try:
      saved = ocp.StandardCheckpointHandler().metadata(state_dir)
    except Exception as e:  # pylint: disable=broad-except
      return _verdict(DAMAGED, e, self.directory / str(step))
    differences = layout_differences(getattr(saved, "tree", saved), to_checkpoint_tree(abstract_state))
    if differences:
      more = f" and {len(differences) - 3} more" if len(differences) > 3 else ""
      return {"kind": CHANGED, "file": None, "reason": "; ".join(differences[:3]) + more}
    return {"kind": USABLE, "file": None, "reason": ""}

  def _read(self, step: int, abstract_state) -> tuple[Any, dict]:
    """``(restored items or None, the agreed verdict)``. Each process reads its own part with no collective (a process
    whose read fails midway would leave the others waiting in Orbax's closing barrier, or meet them in the wrong
    collective); then they agree. A failed read (on any process) is tried once more by every process before it counts
    as damage: a bucket's passing error must not cost a checkpoint."""
    try:  # the empty nodes the saved tree has (a None field written as such): the target must have them too
      saved = ocp.StandardCheckpointHandler().metadata(self.directory / str(step) / "state")
      saved = getattr(saved, "tree", saved)
      empty = {k for k, v in saved.items() if v is None} if isinstance(saved, dict) else set()
    except Exception:  # pylint: disable=broad-except
      empty = set()  # the read below judges the step
    args = ocp.args.Composite(state=ocp.args.StandardRestore(to_checkpoint_tree(abstract_state, empty)),
                              data=ocp.args.JsonRestore(), meta=ocp.args.JsonRestore())
    for attempt in range(2):
      restored = None
      try:
        restored = _this_process_reader().restore(self.directory / str(step), args=args)
        local = {"kind": USABLE, "file": None, "reason": ""}
      except Exception as e:  # pylint: disable=broad-except
        local = _verdict(DAMAGED, e, self.directory / str(step))
      verdict = _agree(local)
      if verdict["kind"] == USABLE or attempt == 1:
        return restored, verdict
      logging.warning("checkpoint: reading step %d failed on process %d (%s); every process tries once more", step,
                      verdict["process"], verdict["reason"])
      time.sleep(1.0)
    raise AssertionError("not reached")

  def _set_aside_all(self, damaged: list[dict], then: str) -> None:
    """Sets aside every agreed-damaged step and records them (process 0) in ``<directory>.unreadable/set_aside.json``
    (a list: step, process, file, reason, where it went, what the run did then, time)."""
    if not damaged:
      return
    entries = [dict(entry, moved_to=self._set_aside(entry["step"]), then=then,
                    time=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())) for entry in damaged]
    if jax.process_index() == 0:
      record = set_aside_record(self.directory)
      try:
        previous = fs.read_json(record) if record.exists() else []
        fs.write_json(record, list(previous) + entries, indent=1)
      except Exception as e:  # pylint: disable=broad-except
        logging.warning("checkpoint: could not record the steps set aside in %s (%s)", record, _first_line(e))
    logging.warning("checkpoint: %d damaged step(s) set aside (%s); the run %s", len(entries),
                    ", ".join(str(e["step"]) for e in entries), then)

  def _set_aside(self, step: int) -> str | None:
    """Moves a damaged step out of the way (on every process's say-so, see :meth:`restore`): left in place it
    would stop the resumed run from saving that step again (Orbax refuses an existing step). On a local disk it goes
    to ``<directory>.unreadable/<step>-<time>`` for inspection; in a bucket (no atomic rename) it is deleted. Returns
    where it went ("deleted", or the path; None where it could not be moved)."""
    where = None
    if jax.process_index() == 0:
      source = self.directory / str(step)
      try:
        if fs.is_url(self.directory):
          source.rmtree()
          where = "deleted"
        else:
          target = set_aside_record(self.directory).parent / f"{step}-{int(time.time())}"
          target.parent.mkdir(parents=True, exist_ok=True)
          os.replace(source, target)
          where = str(target)
        logging.warning("checkpoint: damaged step %d %s", step, where if where == "deleted" else f"moved to {where}")
      except Exception as e:  # pylint: disable=broad-except
        logging.warning("checkpoint: could not set aside damaged step %d (%s: %s)", step, type(e).__name__,
                        _first_line(e))
    if jax.process_count() > 1:
      from jax.experimental import multihost_utils  # pylint: disable=g-import-not-at-top
      multihost_utils.sync_global_devices(f"attnjax checkpoint set aside {step}")
    self.manager.reload()
    return where

  def restore_bookkeeping(self, step: int) -> tuple[dict, dict]:
    """``(data_state, meta)`` of ``step`` alone: the data position and the bookkeeping, without the state."""
    restored = self.manager.restore(step, args=ocp.args.Composite(data=ocp.args.JsonRestore(),
                                                                  meta=ocp.args.JsonRestore()))
    return dict(restored["data"] or {}), dict(restored["meta"] or {})

  def restore_params(self, abstract_params, step: int, key: str = "params"):
    """Only the parameters of ``step`` (an Orbax partial restore of ``state.<key>``: the optimiser state is never
    read), into ``abstract_params``' shapes, dtypes and shardings; ``key="ema_params"``: their moving average."""
    if step not in self.steps():
      raise FileNotFoundError(f"checkpoint step {step} is not in {self.directory} (steps: {self.steps()})")
    item = {key: abstract_params}
    restore_args = ocp.checkpoint_utils.construct_restore_args(item)
    restored = self.manager.restore(step, args=ocp.args.Composite(
        state=ocp.args.PyTreeRestore(item=item, restore_args=restore_args, partial_restore=True)))
    logging.info("checkpoint: restored the %s of step %d from %s",
                 "parameters" if key == "params" else "parameters' moving average", step, self.directory)
    return restored["state"][key]

  def close(self) -> None:
    self.manager.wait_until_finished()
    self.manager.close()

  def finish_after_error(self) -> None:
    """After an error of a one-process run: lets the write in flight commit and closes, so that an exception in the
    training loop does not cost the checkpoint being written. A failure of that write is logged, not raised over the
    error being handled."""
    try:
      self.close()
    except Exception as e:  # pylint: disable=broad-except
      logging.error("checkpoint: the write in flight failed after the run's error: %s", self._write_error(e))


def _this_process_reader():
  """An Orbax checkpointer that restores this process's part of a step on its own: no barrier with the others (a
  one-process view of the run). Restoring a sharded array needs none: each process reads its addressable shards."""
  this = jax.process_index()
  options = ocp.options.MultiprocessingOptions(primary_host=this, active_processes={this})
  handler = ocp.CompositeCheckpointHandler(state=ocp.StandardCheckpointHandler(multiprocessing_options=options),
                                           data=ocp.JsonCheckpointHandler(multiprocessing_options=options),
                                           meta=ocp.JsonCheckpointHandler(multiprocessing_options=options))
  return ocp.Checkpointer(handler, multiprocessing_options=options)


def set_aside_record(directory) -> Any:
  """Where a checkpoint directory records the damaged steps it set aside (a JSON list; see Checkpointer.restore)."""
  directory = fs.path(directory)
  return directory.parent / f"{directory.name}.unreadable" / "set_aside.json"


def to_checkpoint_tree(state, keep_empty=()):
  """What a checkpoint holds of a train state (a dataclass): its fields by name, leaving out the optional ones that
  are None (the parameters' moving average of a run without one), so that such a state saves and restores exactly as
  a state without the field did: the checkpoints written before an optional field existed stay readable.
  ``keep_empty``: names of None fields kept (as a restore target, where a checkpoint holds them as empty nodes)."""
  if not dataclasses.is_dataclass(state):
    return state
  return {f.name: getattr(state, f.name) for f in dataclasses.fields(state)
          if getattr(state, f.name) is not None or f.name in keep_empty}


def from_checkpoint_tree(tree, like):
  """The state of ``like``'s type from a checkpoint's :func:`to_checkpoint_tree` (the fields it left out: None)."""
  if not dataclasses.is_dataclass(like):
    return tree
  return type(like)(**dict(tree))


def layout_differences(saved_tree, abstract_state) -> list[str]:
  """How a saved tree (Orbax's metadata: leaves with ``shape`` and ``dtype``) differs from the state a run restores
  into, leaf by leaf in the saved order: ``"<path>: missing from the checkpoint"``, ``"<path>: not in this run's
  state"``, ``"<path>: saved float32[4, 8], expected float32[4, 16]"``. Empty when the state fits. Integer widths are
  not compared (a scalar step is int64 or int32 with and without ``jax_enable_x64``)."""
  saved = _leaves(saved_tree)
  expected = _leaves(ocp.tree.serialize_tree(abstract_state, keep_empty_nodes=True))  # (empty nodes: no leaves)
  out = [f"{path}: not in this run's state" for path in saved if path not in expected]
  out += [f"{path}: missing from the checkpoint" for path in expected if path not in saved]
  for path, leaf in saved.items():
    if path in expected:
      (shape, dtype), (want_shape, want_dtype) = _shape_dtype(leaf), _shape_dtype(expected[path])
      same_dtype = dtype == want_dtype or (np.issubdtype(dtype, np.integer) and np.issubdtype(want_dtype, np.integer))
      if shape != want_shape or not same_dtype:
        out.append(f"{path}: saved {dtype}{list(shape)}, expected {want_dtype}{list(want_shape)}")
  return out


def _leaves(tree) -> dict[str, Any]:
  def name(key) -> str:
    for attribute in ("key", "name", "idx"):
      if hasattr(key, attribute):
        return str(getattr(key, attribute))
    return str(key)
  flat, _ = jax.tree_util.tree_flatten_with_path(tree)
  return {".".join(name(k) for k in path): leaf for path, leaf in flat}


def _shape_dtype(leaf) -> tuple[tuple[int, ...], np.dtype]:
  dtype = getattr(leaf, "dtype", None)
  try:
    dtype = np.dtype(dtype)
  except TypeError:  # a typed PRNG key (dtype key<fry>): saved as its uint32 data
    dtype = np.dtype(jax.random.key_data(jax.ShapeDtypeStruct(leaf.shape, leaf.dtype)).dtype)
  return tuple(getattr(leaf, "shape", ())), dtype


# A process's verdict on one checkpoint step (see Checkpointer.restore)
USABLE, CHANGED, DAMAGED = "usable", "changed", "damaged"
_VERDICT_BYTES = 4096  # a verdict travels between processes as this many bytes of JSON


def _strip(text: str) -> str:
  """A TensorStore or Orbax message without the spec and the repr of a bound method TensorStore appends."""
  return re.split(r"\s*\[tensorstore_spec=|\s*See full TensorStore details", text)[0]


def _clean(text: str) -> str:
  """A TensorStore or Orbax message as one readable line (at most 300 characters)."""
  return re.sub(r"\s+", " ", _strip(text)).strip()[:300]


def _damaged_file(error: BaseException, step_dir) -> str | None:
  """The file of ``step_dir`` that ``error`` (or an exception it came from) names, or the first of the step's JSON
  files that does not parse (Orbax's JSON errors name none); None if neither."""
  texts, seen = [], error
  while seen is not None and len(texts) < 8:
    texts.append(_strip(str(seen)))
    seen = seen.__cause__ or seen.__context__
  root = str(step_dir).rstrip("/")
  for text in texts:
    missing = re.search(r"named (\S+)\) does not exist at (\S+?)\.?$", text)  # Orbax's missing metadata file
    if missing:
      return f"{missing.group(2)}/{missing.group(1)}"
    named = [quoted or bare for quoted, bare in re.findall(r'"([^"\s]+)"|(\S+/[^\s"\']+)', text)]
    files = [p.rstrip(".,:;") for p in named if root in p and not p.endswith("/")]
    if files:
      return files[-1]  # TensorStore names the database, then the file it failed on
  for text in texts:  # a chunk whose bytes are short: TensorStore names its key in the database, not the data file
    chunk = re.search(r'Error reading "([^"]+)" in OCDBT database at \S+ file "([^"]+)"', text)
    if chunk:
      return f"{chunk.group(2).rstrip('/')}/ (array chunk {chunk.group(1)})"
  step_dir = fs.path(step_dir)
  json_files = [step_dir / "_CHECKPOINT_METADATA", *(step_dir / item / "metadata" for item in ("data", "meta")),
                step_dir / "state" / "_METADATA", step_dir / "state" / "_sharding"]
  try:
    json_files += sorted((step_dir / "state" / "array_metadatas").glob("*"))
    for path in json_files:
      if path.exists():
        try:
          json.loads(path.read_text())
        except (ValueError, UnicodeDecodeError):
          return str(path)
  except OSError:
    pass
  return None


def _verdict(kind: str, error: BaseException, step_dir) -> dict:
  """A damage verdict: the file named (see :func:`_damaged_file`) and the most telling message of ``error``'s chain
  (TensorStore's own status, e.g. ``OUT_OF_RANGE: ...``, over Orbax's wrapper around it), on one line."""
  chain, seen = [], error
  while seen is not None and len(chain) < 8:
    chain.append(seen)
    seen = seen.__cause__ or seen.__context__
  telling = next((e for e in chain if re.match(r"[A-Z_]{4,}: ", str(e))), error)
  return {"kind": kind, "file": _damaged_file(error, step_dir),
          "reason": f"{type(telling).__name__}: {_clean(_first_line(telling))}"}


def decide(verdicts: list[dict]) -> dict:
  """The one verdict every process acts on, from each process's own (index = process): changed if any process
  found the layout changed (the run must not go on), else damaged if any could not read its part (all fall back
  together: resuming from different steps would hang them at the first collective), else usable. The chosen
  verdict carries the process that gave it."""
  for kind in (CHANGED, DAMAGED):
    for process, verdict in enumerate(verdicts):
      if verdict["kind"] == kind:
        return dict(verdict, process=process)
  return {"kind": USABLE, "file": None, "reason": "", "process": None}


def _agree(verdict: dict) -> dict:
  """:func:`decide` over every process's ``verdict`` (one all-gather of fixed-size JSON when there are several)."""
  if jax.process_count() == 1:
    return decide([verdict])
  from jax.experimental import multihost_utils  # pylint: disable=g-import-not-at-top
  verdict = dict(verdict, reason=verdict["reason"][:300], file=(verdict["file"] or "")[-300:] or None)
  text = json.dumps(verdict).encode()  # ASCII: at most 6 bytes a character, under the buffer's 4096
  buffer = np.zeros(_VERDICT_BYTES, np.uint8)
  buffer[:len(text)] = np.frombuffer(text, np.uint8)
  rows = np.asarray(multihost_utils.process_allgather(buffer)).reshape(jax.process_count(), _VERDICT_BYTES)
  return decide([json.loads(bytes(row).rstrip(b"\0").decode()) for row in rows])
