"""A trained workdir, loaded for inference: workdir → config → vocabularies → model → parameters (only).

:func:`load_workdir` reads nothing else: no optimiser state, no training batcher, no training split
(``python -m attnjax.evaluate``, ``python -m attnjax.translate``, ``python -m attnjax.generate``). The vocabularies
are the ones the run's task family keeps in the workdir (:meth:`attnjax.families.base.TaskFamily.load_vocabularies`).

A Hugging Face checkpoint directory (``config.json`` with a ``model_type``: :mod:`attnjax.transfer.published`) loads
in its place: its model, its tokenizer as the vocabularies, and a config whose ``eval`` section is its
``generation_config.json`` (:func:`checkpoint_config`), so that translating and generating with it decode as the
library does.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from absl import logging
import jax

from attnjax import config as config_lib
from attnjax import families, fs
from attnjax.data import tasks
from attnjax.inference import average_params, choose_steps, inference_mesh, replicate
from attnjax.models.registry import model_for
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
  checkpoint: Any = None  # a Hugging Face directory's attnjax.transfer.published.Imported (its generation settings)
  # which of the checkpoint's trees: "params", or "average" (the moving average a run with train.ema_decay keeps)
  weights: str = "params"


def checkpoint_config(model_dir: str):
  """The config of a Hugging Face checkpoint directory: :func:`attnjax.config.base_config` with its model
  (:func:`attnjax.transfer.published.model_config`), no padding of its vocabulary, sources as long as its positions
  allow, and its ``generation_config.json`` as ``eval`` (decoding, beams, α, length limits, ``eval.rules`` of
  :class:`attnjax.decoding.SearchRules`). No weight is read."""
  import ml_collections  # pylint: disable=g-import-not-at-top
  from attnjax.transfer import published  # pylint: disable=g-import-not-at-top
  model, vocab_map, g = published.settings(model_dir)
  config = config_lib.base_config()
  config.model = ml_collections.ConfigDict(model)
  config.data.vocab_multiple = 1
  config.data.max_src_len = config.data.max_tgt_len = int(config.model.max_length)
  with config.eval.unlocked():
    config.eval.update(decode="beam" if g.num_beams > 1 else "greedy", beam_size=g.num_beams,
                       alpha=float(g.length_penalty), max_len_a=0.0, max_len_b=g.new_tokens(1), min_len=g.min_new(1),
                       no_repeat_ngram_size=g.no_repeat_ngram_size, rules=g.rules(vocab_map, 1))
  return config


def load_config(workdir: str):
  """The config of a workdir, or of a Hugging Face checkpoint directory (:func:`checkpoint_config`)."""
  from attnjax.transfer import published  # pylint: disable=g-import-not-at-top
  if published.is_checkpoint_dir(workdir):
    return checkpoint_config(workdir)
  return config_lib.load_config(workdir)


WEIGHTS = ("auto", "average", "params")


def load_workdir(workdir: str, *, checkpoint: str = "best", average_last: int | None = None,
                 config=None, weights: str = "auto") -> Loaded:
  """workdir → config → vocabularies → model → parameters (only: an Orbax partial restore; the moving average of
  the parameters where the run kept one), replicated for decoding.

  Args:
    workdir: a training workdir (local path or URL).
    checkpoint: "best" (by the validation metric it was saved with), "latest" or a step number.
    average_last: average the parameters of the last N kept checkpoints instead.
    config: the workdir's config with overrides applied (default: as saved).
    weights: "auto" (the moving average of the parameters where the run kept one, else the parameters), "average"
      (the moving average; a run without one is an error) or "params" (the parameters themselves).
  """
  if weights not in WEIGHTS:
    raise ValueError(f"weights must be one of {', '.join(WEIGHTS)}, got {weights!r}")
  from attnjax.transfer import published  # pylint: disable=g-import-not-at-top
  if published.is_checkpoint_dir(workdir):
    if weights == "average":
      raise ValueError(f"weights='average': {workdir} is a Hugging Face checkpoint directory, which holds the "
                       "parameters only")
    return _load_checkpoint_dir(workdir, config)
  config = config_lib.load_config(workdir) if config is None else config
  # a run that keeps a moving average of its parameters (train.ema_decay) is evaluated on it
  kept = config.train.get("ema_decay") is not None
  if weights == "average" and not kept:
    raise ValueError(f"weights='average': {workdir} kept no moving average of its parameters (train.ema_decay "
                     "was not set)")
  key = "ema_params" if kept and weights != "params" else "params"
  vocabularies = families.load_vocabularies(config.data, workdir)
  model = model_for(config, src_vocab_size=vocabularies.src.size, tgt_vocab_size=vocabularies.tgt.size)
  mesh = inference_mesh(config)
  abstract, sharding = param_shardings(model, mesh, config.mesh.rules, config.seed)
  target = jax.tree_util.tree_map(lambda a, s: jax.ShapeDtypeStruct(a.shape, a.dtype, sharding=s), abstract, sharding)
  checkpointer = Checkpointer(fs.join(workdir, "checkpoints"), keep=config.train.keep_checkpoints,
                              best_metric=config.train.best_metric, best_mode=config.train.best_mode, async_save=False)
  try:
    steps = choose_steps(checkpointer, checkpoint, average_last)
    trees = [checkpointer.restore_params(target, step, key=key) for step in steps]
  finally:
    checkpointer.close()
  params = trees[0] if len(trees) == 1 else average_params(trees)
  if len(steps) > 1:
    logging.info("averaged the parameters of steps %s", list(steps))
  return Loaded(str(workdir), config, vocabularies, model, mesh, replicate(params, mesh), steps[-1], steps,
                weights="average" if key == "ema_params" else "params")


def _load_checkpoint_dir(model_dir: str, config=None) -> Loaded:
  """A Hugging Face checkpoint directory as a :class:`Loaded` (step 0): its weights, tokenizer and generation
  settings; ``config``: :func:`checkpoint_config`'s with overrides (its ``model.implementation`` is used)."""
  import jax.numpy as jnp  # pylint: disable=g-import-not-at-top
  from attnjax.transfer import published  # pylint: disable=g-import-not-at-top
  imported = published.import_checkpoint(model_dir)
  config = checkpoint_config(model_dir) if config is None else config
  model = imported.module.clone(implementation=config.model.get("implementation", "auto"))
  mesh = inference_mesh(config)
  params = jax.tree_util.tree_map(lambda x: jnp.asarray(x, model.param_dtype), imported.params)
  return Loaded(str(model_dir), config, tasks.Vocabularies(imported.source, imported.target), model, mesh,
                replicate(params, mesh), 0, (0,), imported)
