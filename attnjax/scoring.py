"""Scoring a split of a workdir's checkpoint: ``python -m attnjax.evaluate`` (:func:`evaluate_checkpoint`).

The workdir's config (with the command's overrides) names its task family (:mod:`attnjax.families`), which reads
the split, predicts every example with the checkpoint's parameters, scores them and writes its files; the training
loop's validation asks the same family. Process 0 alone scores; the other processes receive its numbers.
"""

from __future__ import annotations

from typing import Any

from attnjax import config as config_lib
from attnjax import families, trained
from attnjax.data import tasks


def _apply_overrides(config, eval_overrides: dict | None, metrics: tuple[str, ...] | None) -> None:
  overrides = dict(eval_overrides or {})
  if metrics is not None:
    overrides["metrics"] = tuple(metrics)
  for key, value in overrides.items():
    if key not in config.eval:
      raise ValueError(f"--eval {key}=...: unknown eval key (known: {sorted(config.eval.keys())})")
    config.eval[key] = tuple(value) if isinstance(value, list) else value


def evaluate_checkpoint(workdir: str, *, split: str = "test", checkpoint: str = "best",
                        average_last: int | None = None, data_dir: str | None = None, limit: int | None = None,
                        heatmap: str | None = None, eval_overrides: dict | None = None,
                        metrics: tuple[str, ...] | None = None, weights: str = "auto") -> dict[str, Any]:
  """Scores ``split`` with the parameters of ``checkpoint`` (or the average of the last ``average_last``); a run
  that kept a moving average of its parameters is scored on it unless ``weights="params"``
  (:func:`attnjax.trained.load_workdir`), whose files then take ``.params`` (``metrics.<split>.params.json``).

  Writes into the workdir (process 0): ``hypotheses.<split>.step<N>.txt`` (one detokenized output per example, in
  order) for seq2seq tasks, ``predictions.<split>.step<N>.json`` (question id -> answer, the official SQuAD format)
  for extractive QA (``.avg<K>`` is added to the name for averaged parameters), and the returned result as
  ``metrics.<split>.json`` (what ``python -m attnjax.report`` reads). Returns the scores, the number of examples,
  the step(s), signatures and paths.
  """
  config = config_lib.load_config(workdir)
  _apply_overrides(config, eval_overrides, metrics)
  config.eval.split = split
  config_lib.validate(config)  # the overrides too, naming the key
  family = families.of(config)
  names = family.metric_names(config)
  family.check_evaluation(config, names)
  tasks.resolve_data_dir(config.data, workdir, data_dir)

  def load():
    return trained.load_workdir(workdir, checkpoint=checkpoint, average_last=average_last, config=config,
                                weights=weights)

  return family.evaluate_checkpoint(workdir, config, split, load, names=names, limit=limit, heatmap=heatmap)
