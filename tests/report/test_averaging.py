"""The report's moving-average section: the difference between a checkpoint scored with its averaged and with its raw
parameters, computed from the per-question files and against the metrics files' own scores, with its interval."""

import json

import numpy as np
import pytest

from attnjax.report import averaging
from tests.markdown_tables import table_rows


def _evaluation(workdir, split: str, step: int, em: np.ndarray, f1: np.ndarray, paragraph: np.ndarray, weights: str):
  """Writes metrics.<split>.json and its question_scores file, as attnjax.evaluate does (path recorded elsewhere)."""
  scores = {f"q{i}": [float(em[i]), float(f1[i]), int(paragraph[i])] for i in range(len(em))}
  name = f"question_scores.{split}.step{step}.json"
  (workdir / name).write_text(json.dumps(scores))
  metrics = {"step": step, "split": split.split(".")[0], "weights": weights, "exact_match": 100 * float(em.mean()),
             "f1": 100 * float(f1.mean()), "question_scores": f"/gone/{name}"}
  (workdir / f"metrics.{split}.json").write_text(json.dumps(metrics))
  return metrics


def _record(workdir, decay=0.999, kind="extractive_qa"):
  return {"run": "task/reader/single/default", "label": "reader", "kind": kind, "workdir": str(workdir),
          "config": {"train": {"ema_decay": decay}}, "other_splits": {"test.params": {}}}


@pytest.fixture
def scored(tmp_path):
  rng = np.random.default_rng(0)
  n = 600
  paragraph = np.repeat(np.arange(n // 4), 4)
  raw_em = rng.integers(0, 2, n).astype(float)
  avg_em = np.where(rng.random(n) < 0.1, 1.0, raw_em)  # the average answers a tenth more questions
  raw_f1, avg_f1 = np.maximum(raw_em, rng.random(n) * 0.8), np.maximum(avg_em, rng.random(n) * 0.8)
  _evaluation(tmp_path, "test", 900, avg_em, avg_f1, paragraph, "average")
  _evaluation(tmp_path, "test.params", 900, raw_em, raw_f1, paragraph, "params")
  return tmp_path, (avg_em, raw_em, avg_f1, raw_f1)


def test_the_difference_is_the_paired_mean_with_an_interval_around_it(scored):
  workdir, (avg_em, raw_em, avg_f1, raw_f1) = scored
  [row] = table_rows(averaging.averaging_section([_record(workdir)]), "| reader")
  assert row["EM average"] == f"{100 * avg_em.mean():.2f}" and row["EM raw"] == f"{100 * raw_em.mean():.2f}"
  for column, (a, b) in (("EM difference", (avg_em, raw_em)), ("F1 difference", (avg_f1, raw_f1))):
    delta, interval = row[column].split(" ", 1)
    assert float(delta) == pytest.approx(100 * (a - b).mean(), abs=0.005)
    lo, hi = (float(x) for x in interval.strip("[]").split(", "))
    assert lo < float(delta) < hi
  assert row["decay"] == "0.999" and row["step"] == "900" and row["split"] == "test"


def test_no_row_without_a_moving_average_for_another_checkpoint_or_another_kind(scored):
  workdir, _ = scored
  assert averaging.averaging_section([_record(workdir, decay=None)]) is None
  assert averaging.averaging_section([_record(workdir, kind="translation")]) is None
  metrics = json.loads((workdir / "metrics.test.params.json").read_text())
  (workdir / "metrics.test.params.json").write_text(json.dumps(dict(metrics, step=800)))
  assert averaging.averaging_section([_record(workdir)]) is None
