"""A trained workdir, loaded for inference: workdir → config → vocabularies → model → parameters (only).

:func:`load_workdir` reads nothing else: no optimiser state, no training batcher, no training split
(``python -m attnjax.evaluate``, ``python -m attnjax.translate``, ``python -m attnjax.generate``). The vocabularies
are the ones the run's task family keeps in the workdir (:meth:`attnjax.families.base.TaskFamily.load_vocabularies`).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from absl import logging
import jax

from attnjax import config as config_lib
from attnjax import families, fs
from attnjax.data import tasks
from attnjax.inference import average_params, build_model_for, choose_steps, inference_mesh, replicate
from attnjax.runtime.checkpointing import Checkpointer
from attnjax.runtime.params import param_shardings


@dataclasses.dataclass
class Loaded:
  """A workdir ready for inference: its config, vocabularies, model, mesh and (replicated) parameters."""
  workdir: str
  config: Any
  vocabularies: tasks.Vocabularies
  model: Any
  mesh: Any
  params: Any
  step: int
  steps: tuple[int, ...]  # the checkpoints whose parameters were averaged (one unless average_last)


def load_workdir(workdir: str, *, checkpoint: str = "best", average_last: int | None = None,
                 config=None) -> Loaded:
  """workdir → config → vocabularies → model → parameters (only: an Orbax partial restore; the moving average of
  the parameters where the run kept one), replicated for decoding.

  Args:
    workdir: a training workdir (local path or URL).
    checkpoint: "best" (by the validation metric it was saved with), "latest" or a step number.
    average_last: average the parameters of the last N kept checkpoints instead.
    config: the workdir's config with overrides applied (default: as saved).
  """
  config = config_lib.load_config(workdir) if config is None else config
  vocabularies = families.load_vocabularies(config.data, workdir)
  model = build_model_for(config, vocabularies)
  mesh = inference_mesh(config)
  abstract, sharding = param_shardings(model, mesh, config.mesh.rules, config.seed)
  target = jax.tree_util.tree_map(lambda a, s: jax.ShapeDtypeStruct(a.shape, a.dtype, sharding=s), abstract, sharding)
  checkpointer = Checkpointer(fs.join(workdir, "checkpoints"), keep=config.train.keep_checkpoints,
                              best_metric=config.train.best_metric, best_mode=config.train.best_mode, async_save=False)
  try:
    steps = choose_steps(checkpointer, checkpoint, average_last)
    # a run that keeps a moving average of its parameters (train.ema_decay) is evaluated on it
    key = "params" if config.train.get("ema_decay") is None else "ema_params"
    trees = [checkpointer.restore_params(target, step, key=key) for step in steps]
  finally:
    checkpointer.close()
  params = trees[0] if len(trees) == 1 else average_params(trees)
  if len(steps) > 1:
    logging.info("averaged the parameters of steps %s", list(steps))
  return Loaded(str(workdir), config, vocabularies, model, mesh, replicate(params, mesh), steps[-1], steps)
