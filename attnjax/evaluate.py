"""Evaluate a checkpoint: restore it, decode a split, score it, write the hypotheses.

    python -m attnjax.evaluate --workdir=/tmp/run [--split=test] [--checkpoint=best|latest|STEP] [--heatmap=PATH]

The workdir is self-describing (its config.json and vocabulary travel with the checkpoints), so nothing else is
needed. ``--config.eval.beam_size=8``-style overrides are accepted for the decoding settings.
"""

from __future__ import annotations

import json
import os

from absl import app, flags, logging

from attnjax.training import evaluation
from attnjax.training.loop import Experiment, load_config

_WORKDIR = flags.DEFINE_string("workdir", None, "training workdir (holds config.json and checkpoints/)")
_SPLIT = flags.DEFINE_string("split", "test", "train, validation or test")
_CHECKPOINT = flags.DEFINE_string("checkpoint", "best", "'best', 'latest' or a step number")
_LIMIT = flags.DEFINE_integer("limit", None, "decode only the first N examples")
_HEATMAP = flags.DEFINE_string("heatmap", None, "write the attention heatmap of the first example to this PNG")
_EVAL = flags.DEFINE_multi_string("eval", [], "eval overrides KEY=VALUE (e.g. beam_size=8, decode=greedy)")


def _parse(value: str):
  try:
    return json.loads(value)
  except json.JSONDecodeError:
    return value


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


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f"unexpected arguments: {argv[1:]}")
  overrides = {}
  for item in _EVAL.value:
    key, sep, value = item.partition("=")
    if not sep:
      raise app.UsageError(f"--eval takes KEY=VALUE, got {item!r}")
    overrides[key] = _parse(value)
  result = evaluate_checkpoint(_WORKDIR.value, split=_SPLIT.value, checkpoint=_CHECKPOINT.value, limit=_LIMIT.value,
                               heatmap=_HEATMAP.value, eval_overrides=overrides)
  print(json.dumps(result, indent=2))


if __name__ == "__main__":
  flags.mark_flag_as_required("workdir")
  app.run(main)
