"""Scoring files: hypothesis / reference text files (one segment per line) and SQuAD prediction / dataset JSON files,
with errors that name the file and the line."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any, Union

from attnjax.metrics.corpus import MetricResult
from attnjax.metrics.squad import _squad_gold, no_answer_auc, squad_scores  # pylint: disable=protected-access
from attnjax.metrics.summarization import rouge, split_sentences
from attnjax.metrics.translation import bleu, chrf, meteor, ter

PathLike = Union[str, "os.PathLike[str]"]
FILE_METRICS = ("bleu", "chrf", "ter", "meteor", "rouge", "squad")


def read_segments(path: PathLike) -> list[str]:
  """The lines of a UTF-8 text file (gzipped or not), one segment per line, without their "\\n" / "\\r\\n" ends:
  :func:`attnjax.fs.read_lines`, which breaks at "\\n" only and names the file, line and byte of invalid UTF-8."""
  from attnjax import fs  # pylint: disable=g-import-not-at-top  (etils: ~0.1 s that importing the metrics skips)
  return fs.read_lines(path)


def _read_json(path: PathLike, what: str) -> Any:
  import json  # pylint: disable=g-import-not-at-top
  from attnjax.fs import open_binary  # pylint: disable=g-import-not-at-top  (gzip by magic bytes)
  with open_binary(path) as f:
    raw = f.read()
  try:
    return json.loads(raw.decode("utf-8"))
  except UnicodeDecodeError as e:
    raise ValueError(f"{os.fspath(path)}: {what} is not valid UTF-8 (byte {e.start})") from None
  except json.JSONDecodeError as e:
    raise ValueError(f"{os.fspath(path)}: {what} is not valid JSON (line {e.lineno}, column {e.colno}: "
                     f"{e.msg})") from None


def score_squad_files(predictions_path: PathLike, dataset_path: PathLike, *, version: str | None = None,
                      no_answer_probs_path: PathLike | None = None, allow_missing: bool = False) -> dict[str, float]:
  """SQuAD EM / F1 of a predictions file against a dataset file, as the official scripts take them: predictions
  ``{"question id": "answer text", ...}`` (``""`` = no answer), the dataset in the official JSON format (optionally
  gzipped), and for v2.0 optionally the no-answer probability file ``{"question id": p, ...}`` (adds the official
  best-threshold EM / F1 and their thresholds, and ``no_answer_auc`` over the questions it gives a probability:
  :func:`attnjax.metrics.squad.no_answer_auc`). ``version`` defaults to "2.0" if the dataset has an ``is_impossible``
  question, else "1.1". Every question of the dataset counts: a predictions (or probability) file without some of its
  ids is refused, naming how many and the first, unless ``allow_missing`` (they then score 0)."""
  predictions = _read_json(predictions_path, "the predictions file")
  dataset = _read_json(dataset_path, "the dataset file")
  if not isinstance(predictions, dict) or not all(isinstance(v, str) for v in predictions.values()):
    raise ValueError(f"{os.fspath(predictions_path)}: predictions must be a JSON object question id -> answer text")
  if not isinstance(dataset, dict) or not isinstance(dataset.get("data"), list):
    raise ValueError(f"{os.fspath(dataset_path)}: not a SQuAD dataset (no top-level 'data' list)")
  questions = [qa for article in dataset["data"] for paragraph in article.get("paragraphs", [])
               for qa in paragraph.get("qas", [])]
  if version is None:
    version = "2.0" if any(qa.get("is_impossible", False) for qa in questions) else "1.1"
  probs = None
  if no_answer_probs_path is not None:
    probs = _read_json(no_answer_probs_path, "the no-answer probability file")
    if not isinstance(probs, dict) or not all(isinstance(v, (int, float)) for v in probs.values()):
      raise ValueError(f"{os.fspath(no_answer_probs_path)}: must be a JSON object question id -> probability")
  for path, given in ((predictions_path, predictions), (no_answer_probs_path, probs)):
    missing = [qa["id"] for qa in questions if given is not None and qa["id"] not in given]
    if missing and not allow_missing:
      raise ValueError(f"{os.fspath(path)}: no entry for {len(missing)} of the dataset's {len(questions)} questions "
                       f"(first: {missing[0]!r}); every question counts")
  scores = squad_scores(predictions, dataset, version=version, no_answer_probs=probs)
  if probs is not None and version == "2.0":
    gold = {qid: answers for qid, answers in _squad_gold(dataset).items() if qid in probs}
    auc = no_answer_auc(probs, gold)
    if auc is not None:
      scores["no_answer_auc"] = auc
  return scores


def score_files(metric: str, hypothesis_path: PathLike, reference_path: PathLike | Sequence[PathLike],
                **options) -> MetricResult | dict[str, float]:
  """Scores a hypothesis file against one reference file (or several, one per reference stream).

  ``metric="squad"`` scores a predictions JSON file against a SQuAD dataset file instead
  (:func:`score_squad_files`; ``options`` may give ``version``).

  Files are plain UTF-8 text with one segment per line, aligned by line number. ``metric`` is one of "bleu", "chrf",
  "ter", "meteor", "rouge"; ``options`` go to that function (e.g. ``tokenize="intl"``). Returns what the metric function
  returns. Since a line cannot hold a newline, ROUGE first puts each segment's sentences on separate lines with
  :func:`split_sentences` (split after ". "), so that ROUGE-Lsum is summary-level.

  Raises:
    ValueError: unknown metric, a file that is not valid UTF-8 (names file and line), or files of different lengths
      (names both files and the first line without a counterpart).
  """
  name = metric.lower()
  if name not in FILE_METRICS:
    raise ValueError(f"unknown metric {metric!r}: use one of {', '.join(FILE_METRICS)}")
  if name == "squad":
    if not isinstance(reference_path, (str, os.PathLike)):
      raise ValueError("squad takes one dataset file as the reference")
    return score_squad_files(hypothesis_path, reference_path, **options)
  ref_paths = [reference_path] if isinstance(reference_path, (str, os.PathLike)) else list(reference_path)
  if not ref_paths:
    raise ValueError("reference_path is empty: give at least one reference file")
  hypotheses = read_segments(hypothesis_path)
  streams = []
  for ref_path in ref_paths:
    refs = read_segments(ref_path)
    if len(refs) != len(hypotheses):
      shorter, longer = ((hypothesis_path, ref_path) if len(hypotheses) < len(refs) else (ref_path, hypothesis_path))
      raise ValueError(f"{os.fspath(hypothesis_path)} has {len(hypotheses)} lines but {os.fspath(ref_path)} has "
                       f"{len(refs)}: line {min(len(hypotheses), len(refs)) + 1} of {os.fspath(longer)} has no "
                       f"counterpart in {os.fspath(shorter)}")
    streams.append(refs)
  if not hypotheses:
    raise ValueError(f"{os.fspath(hypothesis_path)} is empty: nothing to score")
  if name == "rouge":
    hypotheses = [split_sentences(h) for h in hypotheses]
    streams = [[split_sentences(r) for r in stream] for stream in streams]
  function = {"bleu": bleu, "chrf": chrf, "ter": ter, "meteor": meteor, "rouge": rouge}[name]
  return function(hypotheses, streams, **options)
