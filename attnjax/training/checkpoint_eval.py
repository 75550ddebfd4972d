"""Restore a checkpoint of a training workdir, decode a split, score it: the path ``attnjax.evaluate`` and the
quickstart share."""

from __future__ import annotations

import json
import os

from absl import logging

from attnjax.training.loop import Experiment, load_config


def evaluate_checkpoint(workdir: str, *, split: str = "test", checkpoint: str = "best", limit: int | None = None,
                        heatmap: str | None = None, eval_overrides: dict | None = None,
                        metrics: tuple[str, ...] | None = None) -> dict:
  """Restores ``checkpoint`` of ``workdir``, predicts ``split`` and returns scores (+ signatures, paths).

  Args:
    workdir: a training workdir (its ``config.json``, vocabulary and ``checkpoints/``).
    split: the split to evaluate.
    checkpoint: "best" (by the validation metric it was saved with), "latest" or a step number.
    limit: only the first N examples.
    heatmap: write the first example's cross-attention to this PNG (seq2seq models).
    eval_overrides: ``config.eval`` values to change (``{"beam_size": 8}``).
    metrics: the metrics to compute instead of the task's own (e.g. ``("bleu", "meteor")``); see ``eval.metrics``.

  Writes the predictions next to the checkpoints: ``hypotheses.<split>.step<N>.txt`` (one detokenized output per
  line) for seq2seq tasks, ``predictions.<split>.step<N>.json`` (question id -> answer, the official SQuAD format)
  for extractive QA.
  """
  config = load_config(workdir)
  overrides = dict(eval_overrides or {})
  if metrics is not None:
    overrides["metrics"] = metrics
  for key, value in overrides.items():
    if key not in config.eval:
      raise ValueError(f"--eval {key}=...: unknown eval key (known: {sorted(config.eval.keys())})")
    config.eval[key] = tuple(value) if isinstance(value, list) else value
  config.eval.split = split
  exp = Experiment(config, workdir)
  if heatmap and exp.task.kind != "seq2seq":
    raise ValueError("heatmap: attention heatmaps are drawn for sequence-to-sequence models, not for "
                     f"model.name={config.model.name!r}")
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
  scores, signatures, outputs = exp.predict_and_score(split, limit=limit, return_attention=heatmap is not None)
  if exp.task.kind == "span":
    out_path = os.path.join(workdir, f"predictions.{split}.step{restored_step}.json")
    with open(out_path, "w", encoding="utf-8") as f:
      json.dump(outputs["predictions"], f, ensure_ascii=False, indent=1)
    examples = len(outputs["predictions"])
  else:
    out_path = os.path.join(workdir, f"hypotheses.{split}.step{restored_step}.txt")
    with open(out_path, "w", encoding="utf-8") as f:
      f.writelines(h + "\n" for h in outputs["hypotheses"])
    examples = len(outputs["hypotheses"])
  result = {"step": restored_step, "split": split, "examples": examples, **scores, "signatures": signatures,
            ("predictions" if exp.task.kind == "span" else "hypotheses"): out_path}
  attention = outputs.get("attention")
  if heatmap and attention:
    from attnjax.visualize import attention_heatmap  # pylint: disable=g-import-not-at-top
    hyps, sources = outputs["hypotheses"], outputs["sources"]
    out_tokens = list(hyps[0]) + ["</s>"]
    weights = attention[0][:len(out_tokens)]
    result["heatmap"] = attention_heatmap(weights, list(sources[0]), out_tokens[:len(weights)], heatmap,
                                          title=f"{sources[0]} → {hyps[0]}")
  exp.checkpointer.close()
  return result
