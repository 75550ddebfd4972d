"""The SQuAD 2.0 section of the report (attnjax.report.squad2), from workdirs laid out as `make squad2` leaves them:
each reader's scores, the share it answered and its threshold against its own files, which side carries its F1
against the official breakdown computed here, and the claims and goals against per-question F1 chosen by hand."""

import importlib
import json

import numpy as np
import pytest

from attnjax import report
from attnjax.report import squad2
from tests.markdown_tables import table_rows

SECTION = "## SQuAD 2.0"


def _questions(f1_by_paragraph: list[list[float]], unanswerable_share: float = 0.5):
  """{qid: [EM, F1, paragraph]} and the gold "answerable?" of each question: the first half of each paragraph's
  questions unanswerable."""
  scores, answerable = {}, {}
  for p, f1s in enumerate(f1_by_paragraph):
    for i, f1 in enumerate(f1s):
      qid = f"p{p}q{i}"
      scores[qid] = [float(f1 == 1.0), float(f1), p]
      answerable[qid] = i >= len(f1s) * unanswerable_share
  return scores, answerable


def _metrics(scores: dict, answerable: dict, predictions: dict) -> dict:
  """The official v2.0 breakdown of per-question scores, computed here."""
  has = [q for q in scores if answerable[q]]
  no = [q for q in scores if not answerable[q]]
  mean = lambda qs, col: 100.0 * float(np.mean([scores[q][col] for q in qs]))  # noqa: E731
  return {"exact_match": mean(list(scores), 0), "f1": mean(list(scores), 1), "HasAns_exact": mean(has, 0),
          "HasAns_f1": mean(has, 1), "NoAns_exact": mean(no, 0), "NoAns_f1": mean(no, 1),
          "examples": len(scores), "answered": sum(bool(t) for t in predictions.values())}


def _run(root, name: str, experiment: str | None, scores: dict, answerable: dict, *, threshold=None, step=480):
  """A run directory with config, manifest, metrics, predictions and per-question scores."""
  if experiment is None:  # the baseline, as attnjax.baselines writes it
    config = importlib.import_module("experiments.squad_v2_cpu.bilstm").get_config()
    with config.unlocked():
      config.model = {"name": "no_answer"}
    run = root / name
  else:
    config = importlib.import_module("experiments." + experiment.replace("/", ".")).get_config()
    run = root / experiment / "single" / "default"
    (run / "checkpoints" / str(step) / "meta").mkdir(parents=True)
    (run / "checkpoints" / str(step) / "meta" / "metadata").write_text(json.dumps({"train_seconds": 3600.0}))
  run.mkdir(parents=True, exist_ok=True)
  # a reader answers every answerable question (right or wrong) and the unanswerable ones it scored 0 on; the
  # baseline answers nothing
  predictions = {q: ("x" if experiment is not None and (answerable[q] or s[1] == 0) else "")
                 for q, s in scores.items()}
  (run / "predictions.json").write_text(json.dumps(predictions))
  (run / "question_scores.json").write_text(json.dumps(scores))
  metrics = _metrics(scores, answerable, predictions)
  answered = metrics.pop("answered")
  metrics.update(split="test", step=None if experiment is None else step, predictions=str(run / "predictions.json"),
                 question_scores=str(run / "question_scores.json"))
  if threshold is not None:
    metrics.update(no_answer_threshold=threshold, no_answer_threshold_from="validation",
                   HasAns_f1_spans=metrics["HasAns_f1"] + 10.0, no_answer_auc=0.5 + threshold / 10)
  (run / "metrics.test.json").write_text(json.dumps(metrics))
  (run / "config.json").write_text(config.to_json_best_effort())
  (run / "launch.json").write_text(json.dumps({"experiment_name": experiment, "point": "default", "status": "done"}))
  return metrics, answered


PARAGRAPHS = 30


def test_the_section_gives_each_reader_its_breakdown_what_it_answered_the_seed_and_the_verdicts(tmp_path):
  root = tmp_path / "runs" / "squad2"
  # four questions a paragraph, two unanswerable; the baseline gets exactly the unanswerable ones
  baseline, answerable = _questions([[1, 1, 0, 0]] * PARAGRAPHS)
  # the BiLSTM: the unanswerable ones and half an answer in every paragraph: +12.5 F1 everywhere
  lstm, _ = _questions([[1, 1, 0.5, 0]] * PARAGRAPHS)
  # MiniLM: one answerable question right everywhere, one unanswerable one wrong in half the paragraphs
  minilm, _ = _questions([[1, 1, 1, 0]] * 15 + [[0, 1, 1, 0]] * 15)
  # from scratch: answers everything, all wrong
  scratch, _ = _questions([[0, 0, 0, 0]] * PARAGRAPHS)
  made = {"no_answer": _run(root, "no_answer", None, baseline, answerable),
          "bilstm": _run(root, "squad_v2_cpu/bilstm", "squad_v2_cpu/bilstm", lstm, answerable, threshold=0.61),
          "minilm": _run(root, "squad_v2_cpu/bert_from_minilm", "squad_v2_cpu/bert_from_minilm", minilm, answerable,
                         threshold=0.45),
          "scratch": _run(root, "squad_v2_cpu/bert_scratch", "squad_v2_cpu/bert_scratch", scratch, answerable,
                          threshold=0.5)}
  markdown = report.write_report([str(root)], str(tmp_path / "report"))
  assert "## Transfer" not in markdown  # 2.0 readers are compared here, not in the v1.1 transfer section
  rows = {row["run"].split("/")[-3] if "/" in row["run"] else row["run"]: row for row in table_rows(markdown, SECTION)}
  assert list(rows) == ["no_answer", "bilstm", "bert_scratch", "bert_from_minilm"]  # baseline, LSTM, scratch, pre-trained
  for name, key in (("no_answer", "no_answer"), ("bilstm", "bilstm"), ("bert_from_minilm", "minilm"),
                    ("bert_scratch", "scratch")):
    metrics, answered = made[key]
    row = rows[name]
    assert row["test F1"] == f"{metrics['f1']:.2f}" and row["test EM"] == f"{metrics['exact_match']:.2f}"
    assert row["HasAns F1"] == f"{metrics['HasAns_f1']:.2f}" and row["NoAns F1"] == f"{metrics['NoAns_f1']:.2f}"
    assert row["answered"] == f"{100 * answered / (4 * PARAGRAPHS):.1f}%"
  assert rows["no_answer"]["answered"] == "0.0%" and rows["bert_scratch"]["answered"] == "100.0%"
  assert rows["bilstm"]["seed EM / F1 (SQuAD 2.0)"] == "64.7 / 68.9"
  assert rows["bert_from_minilm"]["seed EM / F1 (SQuAD 2.0)"] == "78.5 / 81.9"
  assert rows["bert_scratch"]["seed EM / F1 (SQuAD 2.0)"] == "—" and rows["no_answer"]["starts from"] == "—"
  assert rows["bert_from_minilm"]["no-answer threshold (chosen on)"] == "0.45 (validation)"
  assert rows["bert_from_minilm"]["HasAns F1 answering all"] == f"{made['minilm'][0]['HasAns_f1'] + 10:.2f}"
  assert rows["bert_from_minilm"]["no-answer AUC"] == "0.545" and rows["no_answer"]["no-answer AUC"] == "—"
  # the baseline's F1 is all from the unanswerable side; MiniLM's: 37.5 answerable, 37.5 of 50 unanswerable
  assert ("- Always no answer: F1 50.00 = 0.00 from answerable and 50.00 from unanswerable questions (50.0% "
          "answerable): the unanswerable questions (NoAns) carry it.") in markdown
  claims = {row["claim (F1)"]: row for row in table_rows(markdown, "| claim (F1)")}
  # MiniLM 62.5 vs BiLSTM 62.5: +25 in half the paragraphs, -25 in the other... (1 - 0.5 = +0.5, 0 - 1 = -1)
  minilm_vs_lstm = claims["pre-trained Transformers beat the LSTM reader on 2.0"]
  assert minilm_vs_lstm["verdict"].startswith("inconclusive (95% interval")
  assert claims["BiLSTM beats always answering nothing"]["verdict"].startswith("holds (95% interval")
  assert "(difference +12.5 to +12.5)" in claims["BiLSTM beats always answering nothing"]["evidence"]
  assert claims["BERT from scratch beats always answering nothing"]["verdict"].startswith("does not hold")
  assert claims["from all-MiniLM-L6-v2 beats always answering nothing"]["verdict"].startswith("holds")
  minilm_f1 = made["minilm"][0]["f1"]
  assert minilm_f1 >= squad2.GOAL_MINILM_F1
  assert (f"- Goal: the reader from all-MiniLM-L6-v2 reaches 58 F1 and beats always answering nothing: met "
          f"(F1 {minilm_f1:.2f}; beats the baseline (interval") in markdown
  assert f"- Ambition: the reader from all-MiniLM-L6-v2 reaches 65 F1: missed ({minilm_f1:.2f})." in markdown
  assert "- Goal: the BiLSTM reader beats always answering nothing: met (F1 62.50" in markdown
  assert (tmp_path / "report" / "squad2_squad_v2_dev_by_article.png").read_bytes().startswith(b"\x89PNG")


@pytest.mark.parametrize("share_has, has_f1, no_f1, side", [
    (0.511, 21.55, 85.53, "unanswerable"), (0.5, 80.0, 30.0, "answerable"), (0.9, 40.0, 100.0, "answerable")])
def test_the_side_that_carries_the_f1_is_the_larger_weighted_part(share_has, has_f1, no_f1, side):
  f1 = share_has * has_f1 + (1 - share_has) * no_f1
  text = squad2.carried_by({"f1": f1, "HasAns_f1": has_f1, "NoAns_f1": no_f1})
  assert text.startswith(f"F1 {f1:.2f} = {share_has * has_f1:.2f} from answerable and "
                         f"{(1 - share_has) * no_f1:.2f} from unanswerable questions ({100 * share_has:.1f}% answerable)")
  assert text.endswith(f"the {side} questions ({'HasAns' if side == 'answerable' else 'NoAns'}) carry it")


def test_without_per_question_scores_the_verdicts_say_they_are_point_estimates():
  by_role = {"baseline": [{"scores": {"f1": 50.0}, "metrics": {}}], "lstm": [{"scores": {"f1": 55.0}, "metrics": {}}],
             "all-MiniLM-L6-v2": [{"scores": {"f1": 54.0}, "metrics": {}}]}
  text = squad2.claims_and_goals(by_role)
  claims = {row["claim (F1)"]: row["verdict"] for row in table_rows(text, "| claim (F1)")}
  assert claims["pre-trained Transformers beat the LSTM reader on 2.0"] == (
      "does not hold (on point estimates: no per-question scores)")
  assert claims["BiLSTM beats always answering nothing"] == "holds (on point estimates: no per-question scores)"
  assert "reaches 58 F1 and beats always answering nothing: missed (F1 54.00; beats the baseline (on point " \
         "estimates))." in text
  assert "BiLSTM reader beats always answering nothing: met (F1 55.00; beats the baseline (on point estimates))" in text
  text = squad2.claims_and_goals({"all-MiniLM-L6-v2": [{"scores": {"f1": 60.0}, "metrics": {}}]})
  assert "not measured (needs the BiLSTM reader" in text
  assert "reaches 58 F1 and beats always answering nothing: missed (F1 60.00; the baseline not measured)." in text


def test_a_reader_with_the_baselines_score_on_every_question_does_not_beat_it(tmp_path):
  """A reader that answers nothing, like the baseline: the paired differences are all 0, and the verdict says so
  rather than calling a zero-width interval inconclusive."""
  root = tmp_path / "runs" / "squad2"
  baseline, answerable = _questions([[1, 1, 0, 0]] * PARAGRAPHS)
  _run(root, "no_answer", None, baseline, answerable)
  _run(root, "squad_v2_cpu/bilstm", "squad_v2_cpu/bilstm", baseline, answerable, threshold=0.0)
  markdown = report.write_report([str(root)], str(tmp_path / "report"))
  claims = {row["claim (F1)"]: row for row in table_rows(markdown, "| claim (F1)")}
  assert claims["BiLSTM beats always answering nothing"]["verdict"] == "does not hold (the same F1 on every question)"
  assert claims["BiLSTM beats always answering nothing"]["evidence"] == "BiLSTM 50.00, always no answer 50.00"
  assert ("- Goal: the BiLSTM reader beats always answering nothing: missed (F1 50.00; does not beat the baseline "
          "(the same F1 on every question)).") in markdown


def test_a_baseline_scored_for_a_fine_tuned_readers_experiment_is_the_baseline_not_a_reader():
  """attnjax.baselines keeps the experiment's config it was scored for; its init_encoder_from is no weights of its."""
  from attnjax.report import runs, squad2  # pylint: disable=g-import-not-at-top
  config = {"model": {"name": "no_answer"}, "train": {"init_encoder_from": ".cache/all-MiniLM-L6-v2"}}
  label = runs._label(config["model"], config)  # pylint: disable=protected-access
  assert label == squad2.BASELINE
  assert squad2.role({"label": label, "config": config}) == "baseline"
  reader = {"model": {"name": "span_qa", "encoder": "bert"}, "train": config["train"]}
  assert runs._label(reader["model"], reader).endswith("(from all-MiniLM-L6-v2)")  # pylint: disable=protected-access


def test_two_recipes_from_one_encoder_are_compared_apart_and_the_seeds_of_one_recipe_together():
  """Runs from one encoder are one arm (their F1 averaged) only when they come from one experiment file: those are
  seeds or sweep points of one recipe. Another experiment file is another recipe, with its own verdict and goal."""
  source = {"train": {"init_encoder_from": ".cache/all-MiniLM-L6-v2"}}
  runs = [{"run": "task/bert_from_minilm/seeds/seed_0", "config": source},
          {"run": "task/bert_from_minilm/seeds/seed_1", "config": source},
          {"run": "task/bert_from_minilm_repeats/single/default", "config": source},
          {"run": "no_answer", "label": squad2.BASELINE, "config": {}}]
  assert squad2.recipe_keys(runs) == ["all-MiniLM-L6-v2: bert_from_minilm", "all-MiniLM-L6-v2: bert_from_minilm",
                                      "all-MiniLM-L6-v2: bert_from_minilm_repeats", "baseline"]
  assert squad2.recipe_keys(runs[:2]) == ["all-MiniLM-L6-v2"] * 2  # one recipe: the encoder names it
  score = lambda f1: {"scores": {"f1": f1}, "metrics": {}}  # noqa: E731
  text = squad2.claims_and_goals({"baseline": [score(50.0)], "all-MiniLM-L6-v2: a": [score(59.0)],
                                  "all-MiniLM-L6-v2: b": [score(55.0), score(57.0)]})
  assert "from all-MiniLM-L6-v2 (a) reaches 58 F1 and beats always answering nothing: met (F1 59.00;" in text
  assert "from all-MiniLM-L6-v2 (b) reaches 58 F1 and beats always answering nothing: missed (F1 56.00;" in text
  claims = {row["claim (F1)"]: row["evidence"] for row in table_rows(text, "| claim (F1)")}
  assert claims["from all-MiniLM-L6-v2 (b) beats always answering nothing"] == (
      "from all-MiniLM-L6-v2 (b) 56.00, always no answer 50.00")
