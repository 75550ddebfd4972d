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

Restoring walks the steps from the newest down: a step whose files are damaged (e.g. a truncated copy) is skipped with
a warning and the previous one is used. On several processes they agree: a step is used only if every process could
read its part, else all of them fall back together. A skipped step is set aside (moved to ``<directory>.unreadable/``
on a local disk, deleted in a bucket) so that the resumed run can write that step again. Restoring into a different
mesh is a matter of the target shardings passed in ``abstract_state``; Orbax reshards.

A write that fails (a full disk, a bucket that keeps failing after the client's retries) raises
:class:`CheckpointWriteError`, naming the step, the directory and the process, at the next :meth:`Checkpointer.save`
or :meth:`Checkpointer.wait` (asynchronous writes fail in the background); the step is left uncommitted, which Orbax
never lists as a checkpoint and removes on the next start.
"""

from __future__ import annotations

import os
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
      saved = self.manager.save(step, args=ocp.args.Composite(state=ocp.args.StandardSave(state),
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
    """Restores ``step`` (default: the newest readable one) into ``abstract_state``'s shapes and shardings.

    Returns ``(state, data_state, step, meta)``, or None if there is no checkpoint. A damaged step is skipped with a
    warning in favour of an older one, and set aside once an older one is restored; if an explicitly requested step
    is damaged the error is raised. If no step can be restored (the run's state no longer fits any of them: another
    model or optimiser layout), nothing is set aside and :class:`CheckpointRestoreError` names the newest step and
    why: training from scratch there would bury every checkpoint of the run.
    """
    candidates = [step] if step is not None else sorted(self.steps(), reverse=True)
    unreadable: list[tuple[int, str]] = []
    for candidate in candidates:
      try:
        restored, error = self.manager.restore(candidate, args=ocp.args.Composite(
            state=ocp.args.StandardRestore(abstract_state), data=ocp.args.JsonRestore(),
            meta=ocp.args.JsonRestore())), None
      except Exception as e:  # pylint: disable=broad-except
        if step is not None and jax.process_count() == 1:
          raise
        restored, error = None, e
      # Every process reads its own part: all of them must have read this step, or they would resume from different
      # steps (different parameters, data positions and step counts: a hang at the first collective they disagree on).
      failed = _processes_that_failed(error is not None)
      if not failed:
        logging.info("checkpoint: restored step %d from %s", candidate, self.directory)
        for bad, _ in unreadable:  # newer steps that could not be read: out of the way of the steps to come
          self._set_aside(bad)
        return restored["state"], restored["data"], candidate, dict(restored["meta"] or {})
      reason = f"{type(error).__name__}: {_first_line(error)[:300]}" if error is not None else "see its log"
      if step is not None:
        raise RuntimeError(f"checkpoint: step {candidate} in {self.directory} is unreadable on process(es) {failed}"
                           f" (this one, {_process()}: {reason})") from error
      logging.warning("checkpoint: step %d in %s is unreadable on process(es) %s (here: %s); falling back to the "
                      "previous step", candidate, self.directory, failed, reason if error is not None else "read fine")
      unreadable.append((candidate, reason))
    if unreadable:
      newest, reason = unreadable[0]
      raise CheckpointRestoreError(
          f"checkpoint: none of the {len(unreadable)} step(s) in {self.directory} can be restored into this run's "
          f"state (newest, step {newest}: {reason}); they are left in place. Was the model or the optimiser changed "
          "under this workdir? Resume with the code and config that wrote them, or start another --workdir.")
    return None

  def _set_aside(self, step: int) -> None:
    """Moves an unreadable step out of the way (on every process's say-so, see :meth:`restore`): left in place it
    would stop the resumed run from saving that step again (Orbax refuses an existing step). On a local disk it goes
    to ``<directory>.unreadable/<step>-<time>`` for inspection; in a bucket (no atomic rename) it is deleted."""
    if jax.process_index() == 0:
      source = self.directory / str(step)
      try:
        if fs.is_url(self.directory):
          source.rmtree()
          where = "deleted"
        else:
          target = self.directory.parent / f"{self.directory.name}.unreadable" / f"{step}-{int(time.time())}"
          target.parent.mkdir(parents=True, exist_ok=True)
          os.replace(source, target)
          where = f"moved to {target}"
        logging.warning("checkpoint: unreadable step %d %s", step, where)
      except Exception as e:  # pylint: disable=broad-except
        logging.warning("checkpoint: could not set aside unreadable step %d (%s: %s)", step, type(e).__name__,
                        _first_line(e))
    if jax.process_count() > 1:
      from jax.experimental import multihost_utils  # pylint: disable=g-import-not-at-top
      multihost_utils.sync_global_devices(f"attnjax checkpoint set aside {step}")
    self.manager.reload()

  def restore_bookkeeping(self, step: int) -> tuple[dict, dict]:
    """``(data_state, meta)`` of ``step`` alone: the data position and the bookkeeping, without the state."""
    restored = self.manager.restore(step, args=ocp.args.Composite(data=ocp.args.JsonRestore(),
                                                                  meta=ocp.args.JsonRestore()))
    return dict(restored["data"] or {}), dict(restored["meta"] or {})

  def restore_params(self, abstract_params, step: int):
    """Only the parameters of ``step`` (an Orbax partial restore of ``state.params``: the optimiser state is never
    read), into ``abstract_params``' shapes, dtypes and shardings."""
    if step not in self.steps():
      raise FileNotFoundError(f"checkpoint step {step} is not in {self.directory} (steps: {self.steps()})")
    item = {"params": abstract_params}
    restore_args = ocp.checkpoint_utils.construct_restore_args(item)
    restored = self.manager.restore(step, args=ocp.args.Composite(
        state=ocp.args.PyTreeRestore(item=item, restore_args=restore_args, partial_restore=True)))
    logging.info("checkpoint: restored the parameters of step %d from %s", step, self.directory)
    return restored["state"]["params"]

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


def _processes_that_failed(failed_here: bool) -> list[int]:
  """The indices of the processes for which ``failed_here`` is True (one all-gather when there are several)."""
  if jax.process_count() == 1:
    return [0] if failed_here else []
  from jax.experimental import multihost_utils  # pylint: disable=g-import-not-at-top
  flags = np.asarray(multihost_utils.process_allgather(np.array([failed_here]))).reshape(-1)
  return [int(i) for i in np.flatnonzero(flags)]
