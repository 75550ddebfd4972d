"""SQuAD 2.0 in the report: readers that must also say when their paragraph holds no answer.

A task gets this section when its evaluated span-QA runs carry the official v2.0 breakdown (``HasAns_f1`` in their
metrics). Every such run is a row: the always-no-answer baseline (:mod:`attnjax.baselines`), the BiLSTM reader with
its learned null score, and the BERT readers (from scratch, or from a pre-trained encoder), each scored on its
evaluated split (the test articles) with the no-answer threshold chosen on validation. The seed study's SQuAD 2.0
numbers stand beside them: 64.7 EM / 68.9 F1 for LSTM + attention and 78.5 / 81.9 for the pre-trained Transformer,
trained on SQuAD 2.0's 130,319 training questions, against the 8,242 of the dev-by-article split here.

Half of the questions have no answer, so a reader that never answers scores about 50 F1 and one that always answers
scores its HasAns F1 times about a half: the table gives HasAns and NoAns F1 and the share of questions each reader
answered, and a line per reader says which side carries its F1 (the larger of the two shares of the total, each
side's F1 weighted by its questions). Two columns tell the spans from the decision to answer, where the evaluation
computed them: the answerable questions' F1 had the reader answered every question with its best span, and the area
under the ROC curve of its no-answer probabilities (0.5: they do not tell unanswerable questions from answerable
ones).

F1 is the headline of 2.0 (the official script's), so the claim and the goals are judged on it. "Beats" is the
transfer study's rule (:func:`attnjax.report.transfer.paired_interval`): the 95% interval of the paired F1
difference, resampling the split's paragraphs, above 0; below 0 loses; across 0 (or fewer than 20 paragraphs)
decides nothing. Runs without per-question scores are compared on their point estimates, and the verdict says so.

* The claim: "pre-trained Transformers beat the LSTM reader on 2.0": every reader from a pre-trained encoder beats
  the BiLSTM reader.
* Each reader against the always-no-answer baseline.
* Goals: the reader from ``all-MiniLM-L6-v2`` reaches 58 F1 and beats the baseline (ambition: 65 F1); the BiLSTM
  reader beats the baseline.
"""

from __future__ import annotations

import json

from absl import logging

from attnjax import fs
from attnjax.report.runs import evaluation_file, init_label
from attnjax.report.tables import markdown_table
from attnjax.report.transfer import MINILM, fine_tuning, paired_interval, plot_f1_curves, question_scores

SEED_V2 = {"lstm": (64.7, 68.9), "pretrained": (78.5, 81.9)}  # the seed study's SQuAD 2.0: EM, F1
BASELINE = "Always no answer"
LSTM = "BiLSTM reader"
GOAL_MINILM_F1 = 58.0
AMBITION_MINILM_F1 = 65.0
F1 = 1  # the column of question_scores files: [exact match, F1, paragraph]


def is_v2(record: dict) -> bool:
  """Whether an evaluated span-QA run was scored as SQuAD 2.0 (the official HasAns / NoAns breakdown)."""
  return record.get("kind") == "extractive_qa" and "HasAns_f1" in (record.get("metrics") or {})


def _source(record: dict) -> str | None:
  return ((record.get("config") or {}).get("train") or {}).get("init_encoder_from")


def role(record: dict) -> str:
  """``"baseline"``, ``"lstm"``, ``"scratch"`` (a Transformer / BERT reader from random weights) or the name of the
  pre-trained encoder a reader starts from."""
  if record.get("label") == BASELINE:
    return "baseline"
  source = _source(record)
  if source:
    return init_label(source)
  return "lstm" if record.get("label") == LSTM else "scratch"


NAMES = {"baseline": "always no answer", "lstm": "BiLSTM", "scratch": "BERT from scratch"}


def experiment_name(record: dict) -> str:
  """The experiment a run belongs to: its run path less the sweep and the point (``.../bert_from_minilm``)."""
  parts = str(record.get("run") or "").split("/")
  return parts[-3] if len(parts) >= 3 else str(record.get("run"))


def recipe_keys(runs: list[dict]) -> list[str]:
  """Each run's key in the comparisons: its :func:`role`, and where runs of one role come from several experiment
  files (other recipes, not other seeds of one) the experiment too, ``"<role>: <experiment>"``; the runs of one
  experiment (its seeds, its sweep points) share a key and are averaged."""
  experiments: dict[str, set[str]] = {}
  for r in runs:
    experiments.setdefault(role(r), set()).add(experiment_name(r))
  return [role(r) if len(experiments[role(r)]) == 1 else f"{role(r)}: {experiment_name(r)}" for r in runs]


def _base(key: str) -> str:
  return key.split(": ", 1)[0]


def _name(key: str) -> str:
  base, _, experiment = key.partition(": ")
  return NAMES.get(base, f"from {base}") + (f" ({experiment})" if experiment else "")


def answered_share(record: dict) -> float | None:
  """The share (%) of the split's questions the run gave a non-empty answer, from its prediction file; None without
  one."""
  path = evaluation_file(record, "predictions")
  if path is None:
    return None
  try:
    predictions = json.loads(fs.read_text(path))
  except (OSError, ValueError) as e:
    logging.warning("squad2: %s: unreadable predictions (%s: %s)", record.get("run"), type(e).__name__, e)
    return None
  return 100.0 * sum(bool(str(text).strip()) for text in predictions.values()) / max(len(predictions), 1)


def carried_by(metrics: dict) -> str:
  """Which side carries a v2.0 F1: each side's F1 weighted by its share of the questions, the larger named."""
  has, no = metrics.get("HasAns_total"), metrics.get("NoAns_total")
  if not has and not no:  # the metrics keep the F1s; the shares come from F1 = (h·HasAns + n·NoAns) / (h + n)
    f1, has_f1, no_f1 = metrics["f1"], metrics["HasAns_f1"], metrics["NoAns_f1"]
    if abs(has_f1 - no_f1) < 1e-9:
      return "both sides alike"
    share_has = (f1 - no_f1) / (has_f1 - no_f1)
  else:
    share_has = has / (has + no)
    f1, has_f1, no_f1 = metrics["f1"], metrics["HasAns_f1"], metrics["NoAns_f1"]
  from_has, from_no = share_has * has_f1, (1 - share_has) * no_f1
  side = "answerable questions (HasAns)" if from_has > from_no else "unanswerable questions (NoAns)"
  return (f"F1 {f1:.2f} = {from_has:.2f} from answerable and {from_no:.2f} from unanswerable questions "
          f"({100 * share_has:.1f}% answerable): the {side} carry it")


def _how(paired: bool) -> str:
  return (" (95% interval of the paired F1 difference, paragraphs resampled)" if paired else
          " (on point estimates: no per-question scores)")


class _Comparisons:
  """F1 of each role (seeds averaged) and the paired comparisons between them."""

  def __init__(self, by_role: dict[str, list[dict]]):
    self.f1 = {key: sum(r["scores"]["f1"] for r in runs) / len(runs) for key, runs in by_role.items()}
    self.per_question = {key: question_scores(runs, F1) for key, runs in by_role.items()}
    self.intervals: dict[tuple[str, str], tuple[float, float]] = {}
    self.identical: set[tuple[str, str]] = set()  # pairs with the same F1 on every question

  def paired(self, a: str, b: str) -> bool:
    pa, pb = self.per_question.get(a), self.per_question.get(b)
    return pa is not None and pb is not None and set(pa[0]) == set(pb[0])

  def compare(self, a: str, b: str) -> int:
    """+1: ``a`` beats ``b``; -1: it does not (it loses, or has ``b``'s F1 on every question); 0: undecided."""
    if not self.paired(a, b):
      return (self.f1[a] > self.f1[b]) - (self.f1[a] < self.f1[b])
    if self.per_question[a][0] == self.per_question[b][0]:  # a resampled difference of 0s proves nothing more
      self.identical.add((a, b))
      return -1
    interval = paired_interval(self.per_question[a][0], self.per_question[b][0], self.per_question[a][1])
    if interval is None:
      return 0
    lo, hi = self.intervals[a, b] = interval
    return 1 if lo > 0 else -1 if hi < 0 else 0

  def how(self, a: str, b: str) -> str:
    """How the verdict on ``a`` against ``b`` was reached, for the verdict's parenthesis."""
    return " (the same F1 on every question)" if (a, b) in self.identical else _how(self.paired(a, b))

  def evidence(self, a: str, b: str) -> str:
    text = f"{_name(a)} {self.f1[a]:.2f}, {_name(b)} {self.f1[b]:.2f}"
    if (a, b) in self.intervals:
      lo, hi = self.intervals[a, b]
      text += f" (difference {lo:+.1f} to {hi:+.1f})"
    return text


def claims_and_goals(by_role: dict[str, list[dict]]) -> str:
  """The claim table (the pre-trained readers against the BiLSTM; every reader against the baseline) and the goals,
  from the runs of each role."""
  c = _Comparisons(by_role)
  pretrained = sorted(key for key in c.f1 if _base(key) not in ("baseline", "lstm", "scratch"))
  rows = []
  if "lstm" in c.f1 and pretrained:
    outcomes = {key: c.compare(key, "lstm") for key in pretrained}
    beats = [key for key, o in outcomes.items() if o == 1]
    verdict = ("holds" if len(beats) == len(pretrained) else f"holds for {', '.join(beats)} only" if beats else
               "does not hold" if any(o == -1 for o in outcomes.values()) else "inconclusive")
    verdict += _how(all(c.paired(key, "lstm") for key in pretrained))
    evidence = "; ".join(c.evidence(key, "lstm") for key in pretrained)
  else:
    verdict, evidence = "not measured (needs the BiLSTM reader and a reader from a pre-trained encoder)", "—"
  rows.append(["pre-trained Transformers beat the LSTM reader on 2.0", evidence, verdict])
  against_baseline = {}
  if "baseline" in c.f1:
    for key in sorted(k for k in c.f1 if k != "baseline"):
      against_baseline[key] = c.compare(key, "baseline")
      rows.append([f"{_name(key)} beats always answering nothing", c.evidence(key, "baseline"),
                   {1: "holds", -1: "does not hold", 0: "inconclusive"}[against_baseline[key]]
                   + c.how(key, "baseline")])
  lines = [markdown_table(["claim (F1)", "evidence", "verdict"], rows), ""]

  def beats_baseline(key: str) -> str:
    if key not in against_baseline:
      return "the baseline not measured"
    interval = c.intervals.get((key, "baseline"))
    shown = (f"interval {interval[0]:+.1f} to {interval[1]:+.1f}" if interval else
             "the same F1 on every question" if (key, "baseline") in c.identical else "on point estimates")
    return ("beats the baseline" if against_baseline[key] == 1 else "does not beat the baseline") + f" ({shown})"

  minilm_keys = [key for key in sorted(c.f1) if _base(key) == MINILM]
  if not minilm_keys:
    lines.append(f"- Goal: the reader from {MINILM} reaches {GOAL_MINILM_F1:g} F1 and beats always answering "
                 "nothing: not measured.")
    lines.append(f"- Ambition: the reader from {MINILM} reaches {AMBITION_MINILM_F1:g} F1: not measured.")
  for key in minilm_keys:  # each recipe on its own
    minilm, which = c.f1[key], "" if key == MINILM else f" ({key.split(': ', 1)[1]})"
    met = minilm >= GOAL_MINILM_F1 and against_baseline.get(key) == 1
    lines.append(f"- Goal: the reader from {MINILM}{which} reaches {GOAL_MINILM_F1:g} F1 and beats always answering "
                 f"nothing: {'met' if met else 'missed'} (F1 {minilm:.2f}; {beats_baseline(key)}).")
    lines.append(f"- Ambition: the reader from {MINILM}{which} reaches {AMBITION_MINILM_F1:g} F1: "
                 f"{'met' if minilm >= AMBITION_MINILM_F1 else 'missed'} ({minilm:.2f}).")
  if "lstm" in c.f1:
    lines.append(f"- Goal: the BiLSTM reader beats always answering nothing: "
                 f"{'met' if against_baseline.get('lstm') == 1 else 'missed'} (F1 {c.f1['lstm']:.2f}; "
                 f"{beats_baseline('lstm')}).")
  else:
    lines.append("- Goal: the BiLSTM reader beats always answering nothing: not measured.")
  return "\n".join(lines)


def _seed(key: str) -> str:
  key = _base(key)
  em_f1 = SEED_V2.get("lstm" if key == "lstm" else "pretrained" if key not in ("baseline", "scratch") else "")
  return "—" if em_f1 is None else f"{em_f1[0]} / {em_f1[1]}"


def squad2_section(records: list[dict], out: fs.PathLike) -> str | None:
  """The markdown of the SQuAD 2.0 study (and its curves' PNG in ``out``), or None without a v2.0 run."""
  by_task: dict[str, list[dict]] = {}
  for r in records:
    if is_v2(r) and r["state"] == "evaluated" and r["scores"].get("f1") is not None:
      by_task.setdefault(r["task"], []).append(r)
  sections = []
  order = {"baseline": 0, "lstm": 1, "scratch": 2}
  for task, runs in sorted(by_task.items()):
    runs = sorted(runs, key=lambda r: (order.get(role(r), 3), r["label"] or "", r["run"]))
    rows, by_role, notes = [], {}, []
    for r, key in zip(runs, recipe_keys(runs)):
      by_role.setdefault(key, []).append(r)
      m = r["metrics"]
      threshold = m.get("no_answer_threshold")
      answered = answered_share(r)
      spans, auc = m.get("HasAns_f1_spans"), m.get("no_answer_auc")
      base = _base(key)
      rows.append([r["label"] or "?", "—" if base == "baseline" else "random" if base in ("lstm", "scratch") else base,
                   f"{m['exact_match']:.2f}", f"{m['f1']:.2f}", f"{m['HasAns_f1']:.2f}", f"{m['NoAns_f1']:.2f}",
                   "—" if answered is None else f"{answered:.1f}%", "—" if spans is None else f"{spans:.2f}",
                   "—" if auc is None else f"{auc:.3f}",
                   "—" if threshold is None else f"{threshold:.2f} ({m.get('no_answer_threshold_from', 'its split')})",
                   _seed(key), fine_tuning(r), r["run"]])
      notes.append(f"- {r['label']}{'' if key == base else f' ({experiment_name(r)})'}: {carried_by(m)}.")
    split = runs[0]["split"]
    table = markdown_table(["reader", "starts from", f"{split} EM", f"{split} F1", "HasAns F1", "NoAns F1",
                            "answered", "HasAns F1 answering all", "no-answer AUC", "no-answer threshold (chosen on)", "seed EM / F1 (SQuAD 2.0)",
                            "fine-tuning", "run"], rows)
    plot = f"squad2_{task}.png"
    plot_f1_curves([r for r in runs if role(r) != "baseline"], fs.join(out, plot))
    sections.append(f"### {task}\n\n{table}\n\n" + "\n".join(notes) + f"\n\n{claims_and_goals(by_role)}\n\n"
                    f"![validation F1 during training]({plot})")
  if not sections:
    return None
  return ("## SQuAD 2.0: answering, and knowing when not to\n\nEach reader scored on its split with the official "
          "v2.0 rules: an unanswerable question counts only when the answer is empty, and the no-answer threshold is "
          "the one chosen on validation. The seed study's numbers are on SQuAD 2.0's full training set "
          "(`attnjax/report/squad2.py`).\n\n" + "\n\n".join(sections))
