"""Extractive baselines scored like a model: ``python -m attnjax.baselines`` writes a workdir that the report reads.

Lead-n (See et al. 2017, Table 1: Lead-3) takes an article's first n sentences (the rule of
:func:`attnjax.metrics.split_sentences`) as its summary; it needs no training, so it is computed here on exactly the
split the models are scored on, every example of it (an empty article gives an empty summary, counted)::

    python -m attnjax.baselines --experiment=experiments/cnn_dailymail_cpu/lstm_bahdanau.py \
        --workdir=runs/summarization/lead3 --split=validation,test

The workdir gets the experiment's config (its ``model`` section replaced by ``{"name": "lead3"}``), one
``hypotheses.<split>.lead3.txt`` and one ``metrics.<split>.json`` per split, in the layout of
:func:`attnjax.scoring.evaluate_checkpoint`, plus See et al.'s repetition and novel n-gram shares, and a
``launch.json`` that says it is done (so that :mod:`launch.record` keeps it with the study's runs).

The context-free masked-LM baseline (:func:`attnjax.data.mlm.context_free_scores`: token frequencies alone, the best
a predictor that ignores its input can do) is written by every masked-LM evaluation beside its scores. For a run
evaluated before that, or its record (``results/``, which keeps no packed rows and no vocabulary copy), it is
computed from the run's config, rebuilding the split's rows in a temporary directory from the data and
``data.vocab_file``, and added to the run's ``metrics.<split>.json``::

    python -m attnjax.baselines --baseline=context_free --workdir=results/transfer/wikipedia/bert_mlm/single/default \
        --split=test
"""

from __future__ import annotations

import datetime
import json
import os
import shlex
import subprocess
import sys
import tempfile
import time

from absl import app, flags, logging

from attnjax import cli, compile as compile_lib
from attnjax import fs
from attnjax import metrics as metrics_lib
from attnjax import families
from attnjax.data import tasks
from attnjax.families.seq2seq import SUMMARIZATION_SOURCES, score

BASELINES = ("lead3", "context_free", "no_answer")


def define_flags() -> None:
  """The command line, defined only when run as a program (other CLIs import this module)."""
  flags.DEFINE_string("experiment", None, "experiment file whose task and splits are scored (lead3: a summarization "
                      "task; no_answer: a SQuAD 2.0 task)")
  flags.DEFINE_enum("baseline", "lead3", BASELINES, "which baseline")
  flags.DEFINE_string("workdir", None, "where the baseline's config, hypotheses and metrics go (lead3); the masked-LM "
                      "run whose metrics files get the baseline (context_free)")
  flags.DEFINE_list("split", ["test"], "split(s) to score, comma-separated")


def score_lead(config, split: str, n: int = 3) -> tuple[dict, list[str]]:
  """Lead-n on every example of ``split``: (result in the layout of ``metrics.<split>.json``, hypotheses)."""
  pairs = families.load_split(config.data, split)
  hypotheses = [metrics_lib.lead(article, n) for article, _ in pairs]
  scores, _ = score(hypotheses, [summary for _, summary in pairs], ("rouge",))
  result = {"split": split, "examples": len(pairs), "step": None, "steps": [],
            "empty_sources": sum(not article.strip() for article, _ in pairs), **scores,
            **metrics_lib.summary_statistics(hypotheses, [article for article, _ in pairs])}
  return result, hypotheses


def score_no_answer(config, split: str) -> tuple[dict, dict[str, str], dict[str, list]]:
  """Always "no answer" on every question of ``split`` (a SQuAD 2.0 task): (result in the layout of
  ``metrics.<split>.json``, the predictions, ``""`` for every question id, and the per-question scores a reader's
  evaluation writes, for paired comparisons). Its F1 is the share of unanswerable questions: what a reader must beat
  to show it answers where there is an answer."""
  from attnjax.data import squad  # pylint: disable=g-import-not-at-top
  from attnjax.families.span_qa import question_scores, score_spans  # pylint: disable=g-import-not-at-top
  questions = families.load_split(config.data, split)
  if squad.squad_version(questions) != "2.0":
    raise ValueError(f"--baseline=no_answer: the {split} split has no unanswerable question (a SQuAD 1.1 task)")
  predictions = {q.qid: "" for q in questions}
  scores = score_spans(predictions, questions, ("exact_match", "f1"), "2.0",
                       no_answer_probs={q.qid: 1.0 for q in questions})
  per_question = question_scores(predictions, questions, "2.0")
  return ({"split": split, "examples": len(questions), "step": None, "steps": [], **scores}, predictions,
          per_question)


def context_free(workdir, split: str) -> dict[str, float]:
  """:func:`attnjax.data.mlm.context_free_scores` of ``split``'s packed rows of the masked-LM run in ``workdir``
  (a workdir or its record), rebuilt from the run's config in a temporary directory, as
  ``{"context_free_mlm_loss", "context_free_mlm_accuracy"}``."""
  from attnjax import config as config_lib  # pylint: disable=g-import-not-at-top
  from attnjax.data.mlm import MlmTaskData, context_free_scores  # pylint: disable=g-import-not-at-top
  config = config_lib.load_config(workdir)
  from attnjax import families  # pylint: disable=g-import-not-at-top
  if families.of(config).name != "masked_lm":
    raise ValueError(f"--baseline=context_free: {workdir} is not a masked-LM run (data.source="
                     f"{config.data.source!r})")
  tasks.resolve_data_dir(config.data, str(workdir))
  with tempfile.TemporaryDirectory() as scratch:  # the rows and the vocabulary copy, never into the record
    task = MlmTaskData(config.data, scratch)
    ids, segments, _ = task.rows(split)
    scores = context_free_scores(ids, segments, task.special_ids)
  return {f"context_free_{key}": value for key, value in scores.items()}


def _add_context_free(workdir, splits) -> None:
  for split in splits:
    path = fs.join(workdir, f"metrics.{split}.json")
    if not fs.exists(path):
      raise FileNotFoundError(f"--split={split}: no {path}; evaluate the run on that split first")
    result = json.loads(fs.read_text(path))
    result.update(context_free(workdir, split))
    fs.write_json(path, result, indent=1, sort_keys=True)
    print(f"context_free {split}: mlm_loss {result['context_free_mlm_loss']:.4f}  mlm_accuracy "
          f"{result['context_free_mlm_accuracy']:.4f}  (the run: {result.get('mlm_loss', float('nan')):.4f}, "
          f"{result.get('mlm_accuracy', float('nan')):.4f})")


def _commit() -> str | None:
  try:
    return subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, check=True,
                          cwd=os.path.dirname(os.path.abspath(__file__))).stdout.strip()
  except (OSError, subprocess.CalledProcessError):
    return None


def main(argv):
  FLAGS = flags.FLAGS  # pylint: disable=invalid-name
  if len(argv) > 1:
    raise app.UsageError(f"unexpected arguments: {argv[1:]}")
  if FLAGS.baseline == "context_free":
    if not FLAGS.workdir:
      raise app.UsageError("--baseline=context_free: give --workdir=RUN (a masked-LM run or its record)")
    _add_context_free(FLAGS.workdir, FLAGS.split)
    return
  if not FLAGS.experiment or not FLAGS.workdir:
    raise app.UsageError("give --experiment=FILE and --workdir=DIR")
  started, start_time = datetime.datetime.now(datetime.timezone.utc), time.perf_counter()
  config = compile_lib.load_experiment(FLAGS.experiment)
  if FLAGS.baseline == "lead3" and config.data.source not in SUMMARIZATION_SOURCES:
    raise app.UsageError(f"--baseline={FLAGS.baseline} summarizes articles; {FLAGS.experiment} is not a "
                         f"summarization task (data.source={config.data.source!r})")
  if FLAGS.baseline == "no_answer" and families.of(config).name != "span_qa":
    raise app.UsageError(f"--baseline=no_answer answers questions; {FLAGS.experiment} is not an extractive QA task "
                         f"(data.source={config.data.source!r})")
  workdir = fs.path(FLAGS.workdir)
  with config.unlocked():
    config.model = {"name": FLAGS.baseline}
  fs.write_text(fs.join(workdir, "config.json"), config.to_json(indent=1))
  for split in FLAGS.split:
    start = time.perf_counter()
    if FLAGS.baseline == "no_answer":
      result, predictions, per_question = score_no_answer(config, split)
      result["predictions"] = str(fs.join(workdir, f"predictions.{split}.no_answer.json"))
      fs.write_json(result["predictions"], predictions, indent=1)
      result["question_scores"] = str(fs.join(workdir, f"question_scores.{split}.no_answer.json"))
      fs.write_json(result["question_scores"], per_question)
      shown = ("exact_match", "f1", "HasAns_f1", "NoAns_f1")
    else:
      result, hypotheses = score_lead(config, split, n=3)
      path = fs.join(workdir, f"hypotheses.{split}.{FLAGS.baseline}.txt")
      fs.write_text(path, "".join(h.replace("\n", " ") + "\n" for h in hypotheses))
      result["hypotheses"] = str(path)
      shown = ("rouge1", "rouge2", "rougeL", "rougeLsum")
    fs.write_json(fs.join(workdir, f"metrics.{split}.json"), result, indent=1, sort_keys=True)
    logging.info("%s on %s (%d examples, %.0f s): %s", FLAGS.baseline, split, result["examples"],
                 time.perf_counter() - start, json.dumps({k: round(v, 2) for k, v in result.items()
                                                          if isinstance(v, float)}))
    print(f"{FLAGS.baseline} {split}: " + "  ".join(f"{k} {result[k]:.2f}" for k in shown if k in result))
  # the manifest of a finished run, as the launcher writes one: launch.record keeps the baseline with the study
  fs.write_json(fs.join(workdir, "launch.json"), {
      "status": "done", "returncode": 0, "target": "cpu", "commit": _commit(),
      "start": started.isoformat(timespec="seconds"),
      "end": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
      "wall_seconds": round(time.perf_counter() - start_time, 1),
      "commands": {"baseline": shlex.join(["python", "-m", "attnjax.baselines", *sys.argv[1:]])}}, indent=1)


def run() -> None:
  """The command line: the ``attnjax-baselines`` console script, and ``python -m attnjax.baselines``."""
  define_flags()
  cli.run(main)


if __name__ == "__main__":
  run()
