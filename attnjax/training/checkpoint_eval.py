"""Restore a checkpoint of a training workdir, decode a split, score it: the path ``attnjax.evaluate`` and the
quickstart share."""

from __future__ import annotations

import os

from absl import logging

from attnjax.training import evaluation
from attnjax.training.loop import Experiment, load_config


def evaluate_checkpoint(workdir: str, *, split: str = "test", checkpoint: str = "best", limit: int | None = None,
                        heatmap: str | None = None, eval_overrides: dict | None = None) -> dict:
  """Restores ``checkpoint`` of ``workdir``, decodes ``split`` and returns scores (+ signatures, paths)."""
  config = load_config(workdir)
  for key, value in (eval_overrides or {}).items():
    if key not in config.eval:
      raise ValueError(f"--eval {key}=...: unknown eval key (known: {sorted(config.eval.keys())})")
    config.eval[key] = value
  config.eval.split = split
  exp = Experiment(config, workdir)
  steps = exp.checkpointer.steps()
  if not steps:
    raise FileNotFoundError(f"no checkpoint in {exp.checkpointer.directory}")
  if checkpoint == "best":
    step = exp.checkpointer.best_step()
    if step is None:
      logging.warning("no checkpoint was saved with a validation metric: using the latest")
  elif checkpoint == "latest":
    step = None
  else:
    step = int(checkpoint)
  restored_step = exp.restore(step)
  hyps, refs, sources, attention = evaluation.decode(exp.model, exp.state.params, exp.task, split, config.eval,
                                                     config.data.max_src_len, limit=limit,
                                                     return_attention=heatmap is not None)
  scores, signatures = evaluation.score(hyps, refs, exp.task.metrics)
  out_path = os.path.join(workdir, f"hypotheses.{split}.step{restored_step}.txt")
  with open(out_path, "w", encoding="utf-8") as f:
    f.writelines(h + "\n" for h in hyps)
  result = {"step": restored_step, "split": split, "examples": len(hyps), **scores,
            "signatures": signatures, "hypotheses": out_path}
  if heatmap and attention:
    from attnjax.visualize import attention_heatmap  # pylint: disable=g-import-not-at-top
    out_tokens = list(hyps[0]) + ["</s>"]
    weights = attention[0][:len(out_tokens)]
    result["heatmap"] = attention_heatmap(weights, list(sources[0]), out_tokens[:len(weights)], heatmap,
                                          title=f"{sources[0]} → {hyps[0]}")
  exp.checkpointer.close()
  return result
