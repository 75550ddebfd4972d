"""Extractive baselines scored like a model: ``python -m attnjax.baselines`` writes a workdir that the report reads.

Lead-n (See et al. 2017, Table 1: Lead-3) takes an article's first n sentences (the rule of
:func:`attnjax.metrics.split_sentences`) as its summary; it needs no training, so it is computed here on exactly the
split the models are scored on, every example of it (an empty article gives an empty summary, counted)::

    python -m attnjax.baselines --experiment=experiments/cnn_dailymail_cpu/lstm_bahdanau.py \
        --workdir=runs/summarization/lead3 --split=validation,test

The workdir gets the experiment's config (its ``model`` section replaced by ``{"name": "lead3"}``), one
``hypotheses.<split>.lead3.txt`` and one ``metrics.<split>.json`` per split, in the layout of
:func:`attnjax.scoring.evaluate_checkpoint`, plus See et al.'s repetition and novel n-gram shares.
"""

from __future__ import annotations

import json
import time

from absl import app, flags, logging

from attnjax import cli, compile as compile_lib
from attnjax import fs, scoring
from attnjax import metrics as metrics_lib
from attnjax.data import tasks

BASELINES = ("lead3",)

def define_flags() -> None:
  """The command line, defined only when run as a program (other CLIs import this module)."""
  flags.DEFINE_string("experiment", None, "experiment file whose task and splits are scored")
  flags.DEFINE_enum("baseline", "lead3", BASELINES, "which baseline")
  flags.DEFINE_string("workdir", None, "where the baseline's config, hypotheses and metrics go")
  flags.DEFINE_list("split", ["test"], "split(s) to score, comma-separated")


def score_lead(config, split: str, n: int = 3) -> tuple[dict, list[str]]:
  """Lead-n on every example of ``split``: (result in the layout of ``metrics.<split>.json``, hypotheses)."""
  pairs = tasks.load_split(config.data, split)
  hypotheses = [metrics_lib.lead(article, n) for article, _ in pairs]
  scores, _ = scoring.score(hypotheses, [summary for _, summary in pairs], ("rouge",))
  result = {"split": split, "examples": len(pairs), "step": None, "steps": [],
            "empty_sources": sum(not article.strip() for article, _ in pairs), **scores,
            **metrics_lib.summary_statistics(hypotheses, [article for article, _ in pairs])}
  return result, hypotheses


def main(argv):
  FLAGS = flags.FLAGS  # pylint: disable=invalid-name
  if len(argv) > 1:
    raise app.UsageError(f"unexpected arguments: {argv[1:]}")
  if not FLAGS.experiment or not FLAGS.workdir:
    raise app.UsageError("give --experiment=FILE and --workdir=DIR")
  config = compile_lib.load_experiment(FLAGS.experiment)
  if config.data.source not in tasks.SUMMARIZATION_SOURCES:
    raise app.UsageError(f"--baseline={FLAGS.baseline} summarizes articles; {FLAGS.experiment} is not a "
                         f"summarization task (data.source={config.data.source!r})")
  workdir = fs.path(FLAGS.workdir)
  with config.unlocked():
    config.model = {"name": FLAGS.baseline}
  fs.write_text(fs.join(workdir, "config.json"), config.to_json(indent=1))
  for split in FLAGS.split:
    start = time.perf_counter()
    result, hypotheses = score_lead(config, split, n=3)
    path = fs.join(workdir, f"hypotheses.{split}.{FLAGS.baseline}.txt")
    fs.write_text(path, "".join(h.replace("\n", " ") + "\n" for h in hypotheses))
    result["hypotheses"] = str(path)
    fs.write_json(fs.join(workdir, f"metrics.{split}.json"), result, indent=1, sort_keys=True)
    logging.info("%s on %s (%d examples, %.0f s): %s", FLAGS.baseline, split, result["examples"],
                 time.perf_counter() - start, json.dumps({k: round(v, 2) for k, v in result.items()
                                                          if isinstance(v, float)}))
    print(f"{FLAGS.baseline} {split}: " + "  ".join(f"{k} {result[k]:.2f}" for k in
                                                      ("rouge1", "rouge2", "rougeL", "rougeLsum")))


if __name__ == "__main__":
  define_flags()
  cli.run(main)
