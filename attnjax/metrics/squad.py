"""Reading-comprehension metrics: SQuAD exact match and token F1 (Rajpurkar et al. 2016, 2018) with the answer
normalisation of the official v1.1 / v2.0 evaluation scripts, written here since the scripts are not a library."""

from __future__ import annotations

import collections
import re
import string
from collections.abc import Mapping, Sequence
from typing import Any

from absl import logging

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCTUATION = frozenset(string.punctuation)


def normalize_answer(s: str) -> str:
  """SQuAD's answer normalisation (official v1.1 and v2.0 evaluation scripts, Rajpurkar et al. 2016, 2018).

  Lower-cases, deletes ASCII punctuation (``string.punctuation``), deletes the articles "a", "an", "the" as whole
  words, and collapses runs of whitespace to single spaces: "The  Cat!" -> "cat". The steps run in that order, so
  punctuation removal can join pieces ("the-end" -> "theend").
  """
  s = "".join(ch for ch in s.lower() if ch not in _PUNCTUATION)
  return " ".join(_ARTICLES.sub(" ", s).split())


def _as_golds(ground_truths: str | Sequence[str]) -> list[str]:
  golds = [ground_truths] if isinstance(ground_truths, str) else list(ground_truths)
  if not golds:
    raise ValueError("ground_truths is empty: give at least one gold answer ([''] for an unanswerable SQuAD v2.0 "
                     "question)")
  return golds


def squad_exact_match(prediction: str, ground_truths: str | Sequence[str]) -> float:
  """SQuAD exact match: 1.0 if the normalized prediction equals some normalized gold answer, else 0.0."""
  target = normalize_answer(prediction)
  return float(any(target == normalize_answer(gold) for gold in _as_golds(ground_truths)))


def _token_f1(prediction: str, gold: str, version: str) -> float:
  pred_tokens = normalize_answer(prediction).split()
  gold_tokens = normalize_answer(gold).split()
  # v2.0 has unanswerable questions whose gold is "": an empty prediction must then score 1, where v1.1 scored 0.
  if version == "2.0" and (not pred_tokens or not gold_tokens):
    return float(pred_tokens == gold_tokens)
  num_same = sum((collections.Counter(pred_tokens) & collections.Counter(gold_tokens)).values())
  if num_same == 0:
    return 0.0
  precision = num_same / len(pred_tokens)
  recall = num_same / len(gold_tokens)
  return 2 * precision * recall / (precision + recall)


def _check_version(version: str) -> str:
  if version not in ("1.1", "2.0"):
    raise ValueError(f"version must be '1.1' or '2.0', got {version!r}")
  return version


def squad_f1(prediction: str, ground_truths: str | Sequence[str], *, version: str = "1.1") -> float:
  """SQuAD token-level F1 on normalized answers (bag of tokens), the maximum over the gold answers.

  ``version`` only matters when the prediction or a gold answer normalizes to nothing: v1.1 scores that 0, v2.0 scores
  1 when both are empty (a correct "no answer") and 0 otherwise.
  """
  version = _check_version(version)
  return max(_token_f1(prediction, gold, version) for gold in _as_golds(ground_truths))


def _squad_gold(dataset_or_answers: Mapping[str, Any]) -> dict[str, list[str]]:
  """qid -> gold answer texts, from a SQuAD-format dataset dict or from a qid -> answers mapping."""
  if not isinstance(dataset_or_answers, Mapping):
    raise TypeError(f"dataset_or_answers must be a SQuAD dataset dict or a dict qid -> gold answers, got "
                    f"{type(dataset_or_answers).__name__}")
  if isinstance(dataset_or_answers.get("data"), list):
    gold = {}
    for article in dataset_or_answers["data"]:
      for paragraph in article["paragraphs"]:
        for qa in paragraph["qas"]:
          # An impossible question of the v2.0 dev set has answers == [] (its "plausible_answers" are not gold).
          answers = [] if qa.get("is_impossible", False) else [a["text"] for a in qa["answers"]]
          gold[qa["id"]] = answers
    return gold
  gold = {}
  for qid, answers in dataset_or_answers.items():
    if isinstance(answers, str):  # one gold answer; "" alone marks an unanswerable question, like []
      answers = [answers] if answers else []
    if not isinstance(answers, Sequence) or not all(isinstance(a, str) for a in answers):
      raise TypeError(f"dataset_or_answers[{qid!r}] must be a list of gold answer strings, got {answers!r}")
    gold[qid] = list(answers)
  return gold


def squad_question_scores(predictions: Mapping[str, str], dataset_or_answers: Mapping[str, Any], *,
                          version: str = "1.1", no_answer_probs: Mapping[str, float] | None = None,
                          no_answer_threshold: float = 1.0) -> dict[str, tuple[float, float]]:
  """Question id -> (exact match, F1), each in [0, 1], for every gold question: the per-question scores that
  :func:`squad_scores` averages (same arguments and rules), for paired comparisons of two systems."""
  version = _check_version(version)
  if not isinstance(predictions, Mapping):
    raise TypeError(f"predictions must be a dict question id -> answer text, got {type(predictions).__name__}")
  if no_answer_probs is not None and version != "2.0":
    raise ValueError("no_answer_probs only applies to version='2.0' (v1.1 has no unanswerable questions)")
  no_answer_probs = no_answer_probs or {}
  gold = _squad_gold(dataset_or_answers)

  exact, f1, missing = {}, {}, []
  for qid, answers in gold.items():
    if version == "2.0":
      answers = [a for a in answers if normalize_answer(a)] or [""]
    elif not answers:
      raise ValueError(f"question {qid!r} has no gold answer, which SQuAD v1.1 does not allow: score with "
                       f"version='2.0' if the data has unanswerable questions")
    if qid not in predictions:
      missing.append(qid)
      exact[qid] = f1[qid] = 0.0
      continue
    prediction = predictions[qid]
    if not isinstance(prediction, str):
      raise TypeError(f"predictions[{qid!r}] must be a string, got {type(prediction).__name__}")
    if no_answer_probs.get(qid, 0.0) > no_answer_threshold:
      exact[qid] = f1[qid] = float(not gold[qid])  # right only for a question with no gold answer
    else:
      exact[qid] = squad_exact_match(prediction, answers)
      f1[qid] = squad_f1(prediction, answers, version=version)

  if missing:
    logging.warning("SQuAD: %d of %d questions have no prediction and score 0 (first: %s)", len(missing), len(gold),
                    ", ".join(map(repr, missing[:5])))
  unknown = len(set(predictions) - set(gold))
  if unknown:
    logging.warning("SQuAD: %d predictions are for question ids not in the gold data and are ignored", unknown)

  return {qid: (exact[qid], f1[qid]) for qid in gold}


def squad_scores(predictions: Mapping[str, str], dataset_or_answers: Mapping[str, Any], *, version: str = "1.1",
                 no_answer_probs: Mapping[str, float] | None = None,
                 no_answer_threshold: float = 1.0) -> dict[str, float]:
  """SQuAD v1.1 / v2.0 exact match and F1 over a dataset, by the rules of the official evaluation scripts.

  Args:
    predictions: question id -> predicted answer text ("" to predict "no answer" in v2.0).
    dataset_or_answers: a SQuAD-format dataset dict (``{"data": [{"paragraphs": [{"qas": [{"id", "answers":
      [{"text"}], "is_impossible"?}]}]}]}``) or a dict question id -> list of gold answer strings (an empty list, or
      "", marks an unanswerable v2.0 question).
    version: "1.1" (every question has an answer) or "2.0" (unanswerable questions; gold answers that normalize to
      nothing are dropped, and a question left with none has the single gold "", which only "" matches).
    no_answer_probs: v2.0 only: question id -> probability of "no answer"; a question whose probability exceeds
      ``no_answer_threshold`` is scored as a "no answer" prediction whatever its text (missing ids count as 0).
    no_answer_threshold: see ``no_answer_probs``.

  Returns:
    "exact_match", "f1" (percent) and "total"; for v2.0 also "HasAns_exact", "HasAns_f1", "HasAns_total" when some
    question has an answer and "NoAns_exact", "NoAns_f1", "NoAns_total" when some has none (as the official script,
    which leaves out an empty group). A question without a prediction scores 0 and stays in the totals (unlike the
    official v2.0 script, which drops it from "total"); how many were missing is logged as a warning.
  """
  per_question = squad_question_scores(predictions, dataset_or_answers, version=version,
                                       no_answer_probs=no_answer_probs, no_answer_threshold=no_answer_threshold)
  # as in the official script, a question "has an answer" when its answer list is non-empty, even if every answer
  # normalizes to nothing (e.g. "The") and it is then scored against the gold ""
  has_answer = {qid: bool(answers) for qid, answers in _squad_gold(dataset_or_answers).items()}
  exact = {qid: em for qid, (em, _) in per_question.items()}
  f1 = {qid: value for qid, (_, value) in per_question.items()}

  def mean(values, ids):
    return 100.0 * sum(values[q] for q in ids) / len(ids) if ids else 0.0

  ids = list(per_question)
  result = {"exact_match": mean(exact, ids), "f1": mean(f1, ids), "total": len(ids)}
  if version == "2.0":
    groups = {"HasAns": [q for q in ids if has_answer[q]], "NoAns": [q for q in ids if not has_answer[q]]}
    for prefix, group in groups.items():
      if group:
        result.update({f"{prefix}_exact": mean(exact, group), f"{prefix}_f1": mean(f1, group),
                       f"{prefix}_total": len(group)})
  if version == "2.0" and no_answer_probs is not None:
    raw = squad_question_scores(predictions, dataset_or_answers, version=version)  # the texts, no threshold
    for name, which in (("exact", 0), ("f1", 1)):
      best, threshold = best_no_answer_threshold(predictions, {q: v[which] for q, v in raw.items()},
                                                 no_answer_probs, has_answer)
      result[f"best_{name}"], result[f"best_{name}_thresh"] = best, threshold
  return result


def best_no_answer_threshold(predictions: Mapping[str, str], raw_scores: Mapping[str, float],
                             no_answer_probs: Mapping[str, float], has_answer: Mapping[str, bool]) -> tuple[float, float]:
  """The official v2.0 evaluation's best threshold: ``(best score in percent, threshold)`` over thresholds t, where a
  question whose no-answer probability exceeds t is answered "no answer" (right iff it has no gold answer) and the
  others keep their text's score (``raw_scores``, in [0, 1]). The candidates are 0 and every question's probability;
  a tie keeps the smaller threshold. Questions are taken in increasing probability, each moving from "no answer" to
  its text: a question with an answer gains its raw score, one without loses 1 if its text is not empty. A question
  without a prediction scores 0 at every threshold (as in :func:`squad_question_scores`) and stays in the total."""
  total = len(raw_scores)
  if not total:
    return 0.0, 0.0
  predicted = [qid for qid in raw_scores if qid in predictions]
  current = float(sum(1 for qid in predicted if not has_answer[qid]))  # every question answered "no answer"
  best, threshold = current, 0.0
  for qid in sorted(predicted, key=lambda q: no_answer_probs.get(q, 0.0)):
    if has_answer[qid]:
      current += raw_scores[qid]
    elif predictions.get(qid):
      current -= 1.0
    if current > best:
      best, threshold = current, float(no_answer_probs.get(qid, 0.0))
  return 100.0 * best / total, threshold


def no_answer_auc(no_answer_probs: Mapping[str, float], dataset_or_answers: Mapping[str, Any]) -> float | None:
  """How well a reader's no-answer probabilities separate the unanswerable questions from the answerable ones: the
  area under the ROC curve, the probability that a random unanswerable question gets a higher no-answer probability
  than a random answerable one (ties count a half): 0.5 is chance, 1.0 a perfect ranking, whatever the threshold.
  The Mann-Whitney U statistic over the two groups, normalised; None when the split lacks either group."""
  from scipy import stats  # pylint: disable=g-import-not-at-top

  gold = _squad_gold(dataset_or_answers)
  missing = sorted(set(gold) - set(no_answer_probs))
  if missing:
    raise ValueError(f"no_answer_probs: no probability for {len(missing)} question(s), e.g. {missing[0]!r}")
  unanswerable = [float(no_answer_probs[q]) for q, answers in gold.items() if not any(a.strip() for a in answers)]
  answerable = [float(no_answer_probs[q]) for q, answers in gold.items() if any(a.strip() for a in answers)]
  if not unanswerable or not answerable:
    return None
  u = stats.mannwhitneyu(unanswerable, answerable, alternative="two-sided").statistic
  return float(u) / (len(unanswerable) * len(answerable))
