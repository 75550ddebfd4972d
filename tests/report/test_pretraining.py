"""The report's pre-training section: each masked-LM run's scores beside token frequencies', its budget and tokens
seen, the goals of the budget recipe, and the curves against tokens seen."""

import json

import pytest

from attnjax import report
from attnjax.report import pretraining
from tests.markdown_tables import table_rows
from tests.report.test_report import _launch, _run

HEADING = "## Pre-training curves"
# (step, value) pairs exactly representable in float32 (TensorBoard's simple_value)
LOSS = [(250, 7.5), (500, 6.25), (750, 5.5)]
ACCURACY = [(250, 0.0625), (500, 0.125), (750, 0.25)]


def _mlm(root, name, *, task="wikipedia_mlm", schedule="budget_linear", loss=4.875, accuracy=0.25, step=750,
         validation=True):
  config = {"data": {"task": task, "batch_size": 64, "seq_len": 128},
            "model": {"name": "bert_mlm"}, "train": {"schedule": schedule, "time_limit_minutes": 140.0}, "eval": {},
            "target": "cpu"}
  path = _run(root / name, launch=_launch(f"{task}/{name}", target="cpu"), config=config,
              metrics={"step": step, "steps": [step], "examples": 300, "mlm_loss": loss, "mlm_accuracy": accuracy,
                       "context_free_mlm_loss": 6.5, "context_free_mlm_accuracy": 0.0625},
              curves={"eval/mlm_loss": LOSS, "eval/mlm_accuracy": ACCURACY})
  for s, seconds in ((step, 7200.0), (step + 50, 7800.0)):  # the scored checkpoint, then a newer one
    (path / "checkpoints" / str(s) / "meta").mkdir(parents=True)
    (path / "checkpoints" / str(s) / "meta" / "metadata").write_text(json.dumps({"train_seconds": seconds}))
  if validation:
    (path / "metrics.validation.json").write_text(json.dumps(
        {"split": "validation", "step": step, "mlm_loss": 5.0, "mlm_accuracy": 0.2,
         "context_free_mlm_loss": 6.75, "context_free_mlm_accuracy": 0.05}))
  return path


def test_each_run_stands_beside_token_frequencies_with_its_budget_and_the_tokens_it_saw(tmp_path):
  _mlm(tmp_path / "runs", "budget")
  text = report.write_report([tmp_path / "runs"], tmp_path / "out")
  (row,) = table_rows(text, HEADING)
  assert row["budget"] == "140 min"
  assert (row["steps"], row["trained (h:mm)"]) == ("750", "2:00")  # the scored checkpoint's, not the newest's 2:10
  assert row["tokens seen"] == f"{750 * 64 * 128 / 1e6:.1f}M"  # 6.1M: every position of 64 rows of 128, a step
  assert (row["split"], row["MLM loss"], row["MLM accuracy"]) == ("test", "4.875", "25.0%")
  assert (row["frequencies: loss"], row["frequencies: accuracy"]) == ("6.500", "6.2%")
  assert (tmp_path / "out" / pretraining.FIGURE).read_bytes().startswith(b"\x89PNG")


@pytest.mark.parametrize("loss, accuracy, verdicts", [
    (5.0, 0.25, ("met", "met")),  # the goals' own values meet them
    (5.0625, 0.25, ("missed", "met")),
    (4.5, 0.2475, ("met", "missed")),
])
def test_the_budget_recipe_on_wikipedia_is_held_to_its_goals_at_their_boundaries(tmp_path, loss, accuracy, verdicts):
  _mlm(tmp_path / "runs", "budget", loss=loss, accuracy=accuracy)
  text = report.write_report([tmp_path / "runs"], tmp_path / "out")
  lines = [line for line in text.splitlines() if line.startswith("- Goal:")]
  assert [line.split(": ")[2].split(" ")[0] for line in lines] == list(verdicts)
  assert f"({loss:.3f} on test)" in lines[0] and f"({100 * accuracy:.1f}% on test)" in lines[1]


@pytest.mark.parametrize("task, schedule", [("wikipedia_mlm", "cosine"), ("squad_v1_official_text", "budget_linear")])
def test_other_recipes_and_corpora_get_their_row_but_no_goals(tmp_path, task, schedule):
  _mlm(tmp_path / "runs", "other", task=task, schedule=schedule, loss=9.0)
  text = report.write_report([tmp_path / "runs"], tmp_path / "out")
  assert table_rows(text, HEADING)[0]["MLM loss"] == "9.000"
  assert "- Goal:" not in text


def test_the_curves_stand_beside_the_validation_rows_frequencies_else_the_scored_splits(tmp_path):
  _mlm(tmp_path / "runs", "with", validation=True)
  _mlm(tmp_path / "runs", "without", validation=False)
  records = {r["run"]: r for r in report.collect([str(tmp_path / "runs")])}
  assert pretraining.curve_baseline(records["with"]) == ("validation", (6.75, 0.05))
  assert pretraining.curve_baseline(records["without"]) == ("test", (6.5, 0.0625))
  assert records["with"]["eval_curves"]["eval/mlm_loss"] == [list(p) for p in LOSS]


def test_a_report_without_a_scored_masked_lm_has_no_such_section(tmp_path):
  _mlm(tmp_path / "runs", "budget")
  (tmp_path / "runs" / "budget" / "metrics.test.json").unlink()
  (tmp_path / "runs" / "budget" / "metrics.validation.json").unlink()
  records = report.collect([str(tmp_path / "runs")], curves=False)
  assert pretraining.pretraining_section(records, tmp_path / "out") is None
