"""The moving average of the weights against the raw parameters it averaged: for each span-QA run trained with
``train.ema_decay`` and evaluated both ways (``metrics.<split>.json`` from the average, ``metrics.<split>.params.json``
from the raw parameters of the same checkpoint: ``python -m attnjax.evaluate --weights=params``), the two scores and
the 95% interval of their paired difference, paragraphs resampled (:func:`attnjax.report.transfer.paired_interval`).
"""

from __future__ import annotations

import json

from absl import logging

from attnjax import fs
from attnjax.report.tables import markdown_table
from attnjax.report.transfer import paired_interval

SUFFIX = ".params"


def _scores_file(workdir: str, metrics: dict) -> dict | None:
  """The per-question scores an evaluation wrote (``question_scores``), read from its recorded path or, when the run
  was recorded elsewhere, from the same file name in ``workdir``; None when missing or torn."""
  path = metrics.get("question_scores")
  if not path:
    return None
  if not fs.exists(path):
    path = fs.join(workdir, fs.path(path).name)
  try:
    return json.loads(fs.read_text(path))
  except (OSError, ValueError) as e:
    logging.warning("averaging: %s: unreadable per-question scores (%s: %s)", path, type(e).__name__, e)
    return None


def _difference(average: dict, raw: dict, column: int) -> tuple[float, tuple[float, float] | None]:
  """(mean(average) - mean(raw), its paired interval) in points over the questions of both tables."""
  qids = sorted(set(average) & set(raw))
  a = {q: float(average[q][column]) for q in qids}
  b = {q: float(raw[q][column]) for q in qids}
  paragraph = {q: int(average[q][2]) for q in qids}
  delta = 100.0 * sum(a[q] - b[q] for q in qids) / len(qids)
  return delta, paired_interval(a, b, paragraph)


def _cell(delta: float, interval: tuple[float, float] | None) -> str:
  return f"{delta:+.2f}" + (f" [{interval[0]:+.2f}, {interval[1]:+.2f}]" if interval else "")


def averaging_rows(records: list[dict]) -> list[list[str]]:
  """One row per run and split that was scored with the average and with the raw parameters."""
  rows = []
  for r in records:
    decay = ((r.get("config") or {}).get("train") or {}).get("ema_decay")
    if not decay or r.get("kind") != "extractive_qa":
      continue
    for split in sorted(s for s in (r.get("other_splits") or {}) if s.endswith(SUFFIX)):
      base = split[:-len(SUFFIX)]
      try:
        averaged = json.loads(fs.read_text(fs.join(r["workdir"], f"metrics.{base}.json")))
        raw = json.loads(fs.read_text(fs.join(r["workdir"], f"metrics.{split}.json")))
      except (OSError, ValueError) as e:
        logging.warning("averaging: %s: %s: %s", r["run"], type(e).__name__, e)
        continue
      if averaged.get("step") != raw.get("step") or averaged.get("weights", "average") != "average":
        continue  # not the same checkpoint, or the base file is not the average's
      tables = _scores_file(r["workdir"], averaged), _scores_file(r["workdir"], raw)
      cells = []
      for column, metric in ((0, "exact_match"), (1, "f1")):
        if None in tables or set(tables[0]) != set(tables[1]):
          cells.append(_cell(averaged[metric] - raw[metric], None))
        else:
          cells.append(_cell(*_difference(tables[0], tables[1], column)))
      rows.append([r["label"], base, f"{decay:g}", str(averaged.get("step")), f"{averaged['exact_match']:.2f}",
                   f"{raw['exact_match']:.2f}", cells[0], f"{averaged['f1']:.2f}", f"{raw['f1']:.2f}", cells[1],
                   r["run"]])
  return rows


def averaging_section(records: list[dict]) -> str | None:
  """The report's section (None without such a run)."""
  rows = averaging_rows(records)
  if not rows:
    return None
  table = markdown_table(["reader", "split", "decay", "step", "EM average", "EM raw", "EM difference", "F1 average",
                          "F1 raw", "F1 difference", "run"], rows)
  return ("## Moving average of the weights\n\nThe same checkpoint scored with the exponential moving average of its "
          "parameters (what evaluation uses) and with the raw parameters (`--weights=params`); each difference is "
          "average minus raw, in points, with the 95% interval of the paired difference, paragraphs resampled "
          f"(`attnjax/report/averaging.py`).\n\n{table}")
