"""Extractive QA through the whole system: config → SQuAD-format files → sharded training → the best
checkpoint → ``attnjax.evaluate``'s code path → SQuAD EM / F1, checked against the predictions file it writes."""

import json
import os

import ml_collections
import numpy as np
import pytest

from attnjax.config import base_config
from attnjax.scoring import evaluate_checkpoint
from attnjax.config import load_config
from attnjax.training.loop import Experiment, train_and_evaluate
from tests.squad_fixture import synthetic_squad, write_squad


def qa_config(directory, *, steps, unanswerable=0.0, model=None):
  write_squad(os.path.join(directory, "train.json"), synthetic_squad(2000, seed=0, unanswerable=unanswerable))
  write_squad(os.path.join(directory, "dev.json"), synthetic_squad(40, seed=1, unanswerable=unanswerable))
  config = base_config()
  with config.data.unlocked():
    config.data.source = "squad_json"
    config.data.dir = str(directory)
    config.data.splits = {"train": "train.json", "validation": "dev.json"}
    config.data.vocab_size = 56
    config.data.max_question_len = 16
    config.data.max_context_len = 64
  config.data.batch_size, config.data.max_tokens, config.data.bucket_boundaries = 32, None, ()
  config.model = ml_collections.ConfigDict(model or dict(name="span_qa", encoder="bilstm", d_model=32, num_layers=1,
                                                         dropout_rate=0.0))
  t = config.train
  t.steps, t.eval_every, t.checkpoint_every, t.log_every = steps, steps, steps, steps
  t.schedule, t.learning_rate, t.warmup_steps, t.label_smoothing, t.best_metric = "constant", 3e-3, 20, 0.0, "f1"
  config.eval.batch_size = 64
  return config


def answers(dataset):
  return {qa["id"]: [a["text"] for a in qa["answers"]] for article in dataset["data"]
          for paragraph in article["paragraphs"] for qa in paragraph["qas"]}


# the check that a 1.1 reader learns at all: 300 steps (about 30 s on 2 cores, compilation most of it)
def test_span_qa_learns_to_answer_and_evaluate_scores_its_predictions_file(tmp_path):
  config = qa_config(tmp_path, steps=300)
  workdir = str(tmp_path / "run")
  last = train_and_evaluate(config, workdir)
  assert last["step"] == 300 and np.isfinite(last["loss"])
  result = evaluate_checkpoint(workdir, split="validation")
  with open(result["predictions"], encoding="utf-8") as f:
    predictions = json.load(f)
  gold = answers(synthetic_squad(40, seed=1))
  assert sorted(predictions) == sorted(gold)  # every question is answered, unreachable ones included
  # Single-word answers: EM is the share of predictions equal to the gold text, and F1 (token overlap) is 1 exactly
  # then; a wrong value word has no token in common with the gold one.
  exact = 100 * np.mean([predictions[qid] in texts for qid, texts in gold.items()])
  assert result["exact_match"] == pytest.approx(exact) and result["f1"] >= result["exact_match"]
  assert result["exact_match"] >= 90, result  # chance is 1 in 3 facts per paragraph
  assert result["step"] == 300 and last["exact_match"] == pytest.approx(result["exact_match"])
  # the per-question scores beside them: each question's own EM, their mean the EM, and its paragraph by context
  with open(result["question_scores"], encoding="utf-8") as f:
    per_question = json.load(f)
  dataset = synthetic_squad(40, seed=1)
  paragraph_of = {qa["id"]: i for i, paragraph in enumerate(p for a in dataset["data"] for p in a["paragraphs"])
                  for qa in paragraph["qas"]}
  assert sorted(per_question) == sorted(gold)
  for qid, (em, f1, paragraph) in per_question.items():
    assert em == float(predictions[qid] in gold[qid]) and em <= f1 <= 1.0
    assert paragraph == paragraph_of[qid]
  assert 100 * np.mean([em for em, _, _ in per_question.values()]) == pytest.approx(result["exact_match"])


def test_squad2_unanswerable_questions_are_scored_as_the_v2_script_does(tmp_path):
  config = qa_config(tmp_path, steps=10, unanswerable=0.3)
  workdir = str(tmp_path / "run")
  train_and_evaluate(config, workdir)
  gold = answers(synthetic_squad(40, seed=1, unanswerable=0.3))
  no_answer = [qid for qid, texts in gold.items() if not texts]
  has_answer = [qid for qid, texts in gold.items() if texts]
  assert no_answer and has_answer
  # The null score decides: pushed far up every answer is "", far down none is.
  exp = Experiment(load_config(workdir), workdir)
  exp.restore()
  head = exp.state.params["no_answer_head"]
  for shift, expected in ((1e6, True), (-1e6, False)):
    params = {**exp.state.params, "no_answer_head": {**head, "bias": head["bias"] + shift}}
    exp.state = exp.state.replace(params=params)
    predictions = exp.predict("validation", limit=None)
    assert all((answer == "") == expected for answer in predictions.answers.values())
    if expected:  # (a span such as "." normalizes to "" too, so the converse has no such exact value)
      assert predictions.scores["NoAns_exact"] == 100.0 and predictions.scores["HasAns_exact"] == 0.0
  exp.checkpointer.close()

  result = evaluate_checkpoint(workdir, split="validation", checkpoint="latest")
  with open(result["predictions"], encoding="utf-8") as f:
    predictions = json.load(f)
  # v2.0: "no answer" is the empty string, right exactly when the question has no answer.
  assert result["NoAns_exact"] == pytest.approx(100 * np.mean([predictions[q] == "" for q in no_answer]))
  assert result["HasAns_exact"] == pytest.approx(100 * np.mean([predictions[q] in gold[q] for q in has_answer]))
  n = len(gold)
  assert result["exact_match"] == pytest.approx(
      (len(no_answer) * result["NoAns_exact"] + len(has_answer) * result["HasAns_exact"]) / n)


def test_qa_config_mismatches_are_named_before_anything_is_built(tmp_path):
  config = qa_config(tmp_path, steps=1)
  config.model.name = "transformer"
  with pytest.raises(ValueError, match="config.model.name: extractive QA sources"):
    Experiment(config, str(tmp_path / "a"))
  config = qa_config(tmp_path, steps=1, model=dict(name="span_qa", encoder="transformer", d_model=32, num_heads=4,
                                                     num_layers=1, positional="learned", max_length=64))
  with pytest.raises(ValueError, match="config.model.max_length=64 is too short .* at least 90"):
    Experiment(config, str(tmp_path / "b"))
  config = qa_config(tmp_path, steps=1)
  config.eval.metrics = ("bleu",)
  with pytest.raises(ValueError, match=r"config.eval.metrics: \['bleu'\] not available"):
    Experiment(config, str(tmp_path / "c"))
  config = qa_config(tmp_path, steps=1, unanswerable=0.3,
                     model=dict(name="span_qa", encoder="bilstm", d_model=32, num_layers=1, allow_no_answer=False))
  with pytest.raises(ValueError, match="allow_no_answer is False but the data has unanswerable"):
    Experiment(config, str(tmp_path / "d"))


def _fixed_margins(monkeypatch, seed=0):
  """The reader's answers replaced by fixed ones after its training: the gold span for an answerable question (its
  text is then a gold answer), the reader's own for an unanswerable one, and null margins drawn per question id, about
  +1 where there is no answer and -1 where there is, 1.5 apart in spread: the two kinds overlap, so the best
  threshold answers some questions and blanks others, and two splits have different best thresholds. (A reader
  trained for a few steps answers nothing at every threshold, and a test on it holds whatever the threshold logic
  does.)"""
  import zlib  # pylint: disable=g-import-not-at-top
  from attnjax import inference  # pylint: disable=g-import-not-at-top
  from attnjax.data.squad import NO_ANSWER  # pylint: disable=g-import-not-at-top
  real = inference.predict_spans

  def fixed(*args, **kwargs):
    out = []
    for example, span, _ in real(*args, **kwargs):
      draw = np.random.default_rng([seed, zlib.crc32(example.qid.encode())]).normal(0.0, 1.5)
      gold = (example.start, example.end)
      out.append((example, span if gold == (NO_ANSWER, NO_ANSWER) else gold,
                  (1.0 if example.is_impossible else -1.0) + draw))
    return out

  monkeypatch.setattr(inference, "predict_spans", fixed)


def _f1_at(threshold, probs, gold):
  """SQuAD 2.0 F1 (in %) of answering the questions whose no-answer probability is at most ``threshold`` with the
  fixed spans (a gold answer, F1 1, where there is one; wrong, 0, where there is none) and blanking the others (1
  where there is no answer)."""
  return 100 * float(np.mean([not gold[q] if p > threshold else bool(gold[q]) for q, p in probs.items()]))


def test_squad2_threshold_is_chosen_on_validation_and_applied_to_test_with_the_official_files(tmp_path, monkeypatch):
  """``attnjax.evaluate --split=test`` on a 2.0 run: the no-answer threshold is the validation split's best-F1 one
  (chosen first, since none was), applied unchanged, though another threshold would score more on test; the
  prediction and no-answer probability files hold every test question, and the official rules scored on those
  files give the reported numbers. The answers' null margins are fixed (:func:`_fixed_margins`)."""
  from attnjax import metrics  # pylint: disable=g-import-not-at-top
  from attnjax.families import span_qa  # pylint: disable=g-import-not-at-top
  config = qa_config(tmp_path, steps=10, unanswerable=0.4)
  test_path = write_squad(os.path.join(tmp_path, "test.json"), synthetic_squad(30, seed=2, unanswerable=0.4))
  config.data.splits = {"train": "train.json", "validation": "dev.json", "test": "test.json"}
  with config.data.unlocked():
    config.data.squad_version = "2.0"
  config.train.best_metric = "best_f1_spans"  # what the SQuAD 2.0 tasks rank checkpoints by
  workdir = str(tmp_path / "run")
  train_and_evaluate(config, workdir)
  _fixed_margins(monkeypatch)
  # a quick look first: the threshold it chooses on 5 validation questions serves only evaluations of 5
  quick = evaluate_checkpoint(workdir, split="test", checkpoint="latest", limit=5)
  tag = f"step{quick['step']}"
  chosen = json.load(open(os.path.join(workdir, span_qa.THRESHOLD_FILE.format(tag=tag)), encoding="utf-8"))
  assert (chosen["examples"], chosen["limit"], quick["examples"]) == (5, 5, 5)
  result = evaluate_checkpoint(workdir, split="test", checkpoint="latest")
  chosen = json.load(open(os.path.join(workdir, span_qa.THRESHOLD_FILE.format(tag=tag)), encoding="utf-8"))
  validation = json.load(open(os.path.join(workdir, "metrics.validation.json"), encoding="utf-8"))
  assert chosen["limit"] is None and chosen["examples"] == validation["examples"] > 5
  assert chosen["split"] == "validation" and result["no_answer_threshold"] == chosen["threshold"]
  assert validation["no_answer_threshold"] == validation["best_f1_thresh_spans"] == chosen["threshold"]
  threshold = chosen["threshold"]
  # validation: the chosen threshold scores the best F1 of every threshold there, by a count of its own
  val_probs = json.load(open(validation["no_answer_probs"], encoding="utf-8"))
  val_gold = answers(synthetic_squad(40, seed=1, unanswerable=0.4))
  best_val = max(_f1_at(t, val_probs, val_gold) for t in [-1.0] + sorted(val_probs.values()))
  assert validation["f1"] == pytest.approx(_f1_at(threshold, val_probs, val_gold)) == pytest.approx(best_val)
  # test: the same threshold applied, with answers on both sides of it, where the test split's own best is another
  predictions = json.load(open(result["predictions"], encoding="utf-8"))
  probs = json.load(open(result["no_answer_probs"], encoding="utf-8"))
  gold = answers(synthetic_squad(30, seed=2, unanswerable=0.4))
  assert sorted(predictions) == sorted(probs) == sorted(gold)
  answered = {q for q, p in probs.items() if p <= threshold}
  assert 0 < len(answered) < len(gold)
  assert {q for q, text in predictions.items() if text} == answered
  assert all(predictions[q] in gold[q] for q in answered if gold[q])  # the fixed spans: gold answers
  assert result["f1"] == pytest.approx(_f1_at(threshold, probs, gold))
  best_test = max(_f1_at(t, probs, gold) for t in [-1.0] + sorted(probs.values()))
  assert best_test > result["f1"] + 1  # a threshold chosen on test would have scored more: none was
  official = metrics.score_files("squad", result["predictions"], test_path,
                                 no_answer_probs_path=result["no_answer_probs"])
  for key in ("exact_match", "f1", "HasAns_exact", "HasAns_f1", "NoAns_exact", "NoAns_f1", "best_exact",
              "best_exact_thresh", "best_f1", "best_f1_thresh"):
    assert result[key] == pytest.approx(official[key]), key
  # the spans apart from the decision: answering every question can only add to the answerable ones' F1, and the
  # AUC is the pairs' count over the written probabilities
  assert result["HasAns_f1_spans"] >= result["HasAns_f1"]
  unanswerable = [p for q, p in probs.items() if not gold[q]]
  answerable = [p for q, p in probs.items() if gold[q]]
  pairs = [1.0 if u > a else 0.5 if u == a else 0.0 for u in unanswerable for a in answerable]
  assert result["no_answer_auc"] == pytest.approx(sum(pairs) / len(pairs))
  assert 0.6 < result["no_answer_auc"] < 1.0  # the fixed margins rank, imperfectly


def test_a_squad_1_1_file_given_to_a_2_0_task_is_one_line(tmp_path):
  config = qa_config(tmp_path, steps=1)
  with config.data.unlocked():
    config.data.squad_version = "2.0"
  with pytest.raises(ValueError, match="squad_version='2.0' but .* has no unanswerable question: a SQuAD 1.1 file"):
    train_and_evaluate(config, str(tmp_path / "run"))


def test_the_always_no_answer_baseline_scores_the_share_of_unanswerable_questions(tmp_path):
  from attnjax import baselines  # pylint: disable=g-import-not-at-top
  config = qa_config(tmp_path, steps=1, unanswerable=0.4)
  gold = answers(synthetic_squad(40, seed=1, unanswerable=0.4))
  result, predictions, per_question = baselines.score_no_answer(config, "validation")
  share = 100 * np.mean([not texts for texts in gold.values()])
  assert predictions == {qid: "" for qid in gold} and result["examples"] == len(gold)
  # per question, for paired comparisons: 1 exactly where the question has no answer
  assert {qid: row[:2] for qid, row in per_question.items()} == {
      qid: [float(not texts)] * 2 for qid, texts in gold.items()}
  assert result["f1"] == pytest.approx(share) and result["exact_match"] == pytest.approx(share)
  assert result["NoAns_f1"] == 100.0 and result["HasAns_f1"] == 0.0
  (tmp_path / "v1").mkdir()
  with pytest.raises(ValueError, match="--baseline=no_answer: the validation split has no unanswerable question"):
    baselines.score_no_answer(qa_config(tmp_path / "v1", steps=1), "validation")


# the check that a 2.0 reader learns spans and its no-answer score: 300 steps (about 30 s on 2 cores)
def test_a_squad2_reader_learns_both_the_spans_and_when_there_is_no_answer(tmp_path):
  """Half the questions unanswerable: the loss's null class must teach the no-answer score (its probabilities rank
  the unanswerable questions above the answerable ones) without starving the spans (the answerable questions' F1,
  every one answered by its best span, as high as a 1.1 reader's)."""
  config = qa_config(tmp_path, steps=300, unanswerable=0.5)
  with config.data.unlocked():
    config.data.squad_version = "2.0"
  workdir = str(tmp_path / "run")
  train_and_evaluate(config, workdir)
  result = evaluate_checkpoint(workdir, split="validation")
  assert result["HasAns_f1_spans"] >= 90, result  # chance is 1 in 3 facts per paragraph
  assert result["no_answer_auc"] >= 0.9, result  # chance is 0.5
  assert result["f1"] >= 85 and result["NoAns_f1"] >= 80 and result["HasAns_f1"] >= 80, result
