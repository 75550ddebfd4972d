"""Evaluate a checkpoint: restore it, decode a split (or answer its questions), score it, write the predictions.

    python -m attnjax.evaluate --workdir=/tmp/run [--split=test] [--checkpoint=best|latest|STEP] [--heatmap=PATH]
                               [--metrics=bleu,chrf,ter,meteor] [--eval beam_size=8 ...]

The workdir is self-describing (its config.json and vocabulary travel with the checkpoints), so nothing else is
needed. ``--eval KEY=VALUE`` overrides a decoding setting; ``--metrics`` replaces the task's metrics (translation:
bleu, chrf, ter, and opt-in meteor; summarization: rouge; extractive QA: exact_match, f1).
"""

from __future__ import annotations

import json

from absl import app, flags

from attnjax.metrics import MetricUnavailableError
from attnjax.training.checkpoint_eval import evaluate_checkpoint
from attnjax.training.loop import quiet_orbax_logging

_WORKDIR = flags.DEFINE_string("workdir", None, "training workdir (holds config.json and checkpoints/)")
_SPLIT = flags.DEFINE_string("split", "test", "train, validation or test")
_CHECKPOINT = flags.DEFINE_string("checkpoint", "best", "'best', 'latest' or a step number")
_LIMIT = flags.DEFINE_integer("limit", None, "decode only the first N examples")
_HEATMAP = flags.DEFINE_string("heatmap", None, "write the attention heatmap of the first example to this PNG")
_EVAL = flags.DEFINE_multi_string("eval", [], "eval overrides KEY=VALUE (e.g. beam_size=8, decode=greedy)")
_METRICS = flags.DEFINE_list("metrics", None, "metrics to compute instead of the task's own, e.g. bleu,chrf,ter,meteor")


def _parse(value: str):
  try:
    return json.loads(value)
  except json.JSONDecodeError:
    return value


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f"unexpected arguments: {argv[1:]}")
  quiet_orbax_logging()
  overrides = {}
  for item in _EVAL.value:
    key, sep, value = item.partition("=")
    if not sep:
      raise app.UsageError(f"--eval takes KEY=VALUE, got {item!r}")
    overrides[key] = _parse(value)
  try:
    result = evaluate_checkpoint(_WORKDIR.value, split=_SPLIT.value, checkpoint=_CHECKPOINT.value, limit=_LIMIT.value,
                                 heatmap=_HEATMAP.value, eval_overrides=overrides,
                                 metrics=None if _METRICS.value is None else tuple(_METRICS.value))
  except MetricUnavailableError as e:
    raise SystemExit(f"error: {e}") from None
  print(json.dumps(result, indent=2))


if __name__ == "__main__":
  flags.mark_flag_as_required("workdir")
  app.run(main)
