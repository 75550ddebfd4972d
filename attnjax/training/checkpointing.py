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
a warning and the previous one is used. Restoring into a different mesh is a matter of the target shardings passed in
``abstract_state``; Orbax reshards.
"""

from __future__ import annotations

from typing import Any

from absl import logging
import orbax.checkpoint as ocp
from orbax.checkpoint.checkpoint_managers import preservation_policy as pp

from attnjax import fs

ITEMS = ("state", "data", "meta")


class Checkpointer:
  """Save/restore of ``(TrainState, data_state)`` in ``directory`` with latest-N + best-1 preservation.

  Args:
    directory: where step directories go (created).
    keep: latest checkpoints kept.
    best_metric: key of the metrics dict passed to :meth:`save` that ranks checkpoints; None keeps no best.
    best_mode: ``"max"`` or ``"min"``.
    async_save: write in a background thread.
  """

  def __init__(self, directory: str, *, keep: int = 3, best_metric: str | None = None, best_mode: str = "max",
               async_save: bool = True):
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
                                           enable_async_checkpointing=async_save, create=True,
                                           cleanup_tmp_directories=True)
    self.manager = ocp.CheckpointManager(self.directory, item_names=ITEMS, options=options)

  def save(self, step: int, state, data_state: dict, metrics: dict | None = None, *, force: bool = False,
           meta: dict | None = None) -> bool:
    """Saves ``state`` and the data position (and ``meta``, small JSON bookkeeping) as ``step``."""
    saved = self.manager.save(step, args=ocp.args.Composite(state=ocp.args.StandardSave(state),
                                                            data=ocp.args.JsonSave(data_state),
                                                            meta=ocp.args.JsonSave(dict(meta or {}))),
                              metrics=metrics, force=force)
    if saved:
      logging.info("checkpoint: saving step %d to %s%s", step, self.directory,
                   f" with {metrics}" if metrics else "")
    return saved

  def wait(self) -> None:
    self.manager.wait_until_finished()

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
    warning; if an explicitly requested step is damaged the error is raised.
    """
    candidates = [step] if step is not None else sorted(self.steps(), reverse=True)
    for candidate in candidates:
      try:
        restored = self.manager.restore(candidate, args=ocp.args.Composite(
            state=ocp.args.StandardRestore(abstract_state), data=ocp.args.JsonRestore(),
            meta=ocp.args.JsonRestore()))
      except Exception as e:  # pylint: disable=broad-except
        if step is not None:
          raise
        logging.warning("checkpoint: step %d in %s is unreadable (%s: %s); falling back to the previous step",
                        candidate, self.directory, type(e).__name__, str(e).splitlines()[0][:200])
        continue
      logging.info("checkpoint: restored step %d from %s", candidate, self.directory)
      return restored["state"], restored["data"], candidate, dict(restored["meta"] or {})
    return None

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
