"""The transfer study in the report: SQuAD readers that differ only in their starting weights, beside the seed
study's published numbers, their pre-training budgets, their fine-tuning curves, the claim and the goals.

A task gets this section when one of its span-QA runs starts from a pre-trained encoder (``train.init_encoder_from``).
Every evaluated reader of that task is a row: the BiLSTM, the BERT reader from scratch, and the BERT reader from each
pre-trained source, scored on the split the run was evaluated on (the test articles), after fine-tuning for the
steps and minutes shown (from the newest checkpoint's bookkeeping). The pre-training budget of a source that is a run
of this project (a masked-LM workdir among the report's runs, or a Hugging Face directory ``attnjax.export`` wrote from
one, which names its workdir and step) is that of the checkpoint the readers load, its best:
training time, steps, and tokens seen (steps x rows x row length); a published checkpoint's is the publisher's, not
measured here. Under the table, such a run's scored MLM loss and accuracy stand beside what token frequencies alone
reach on the same rows (:func:`attnjax.data.mlm.context_free_scores`): a pre-training still above that loss had not
learnt to use context. Several runs of one reader (seeds) are averaged in the claim.

The seed study reports 71.3 EM for LSTM + attention and 84.1 for the pre-trained Transformer on SQuAD v1.1; they
stand beside the BiLSTM reader and the pre-trained BERT readers (different data: SQuAD's 87,599 training questions,
against the 8,141 of the dev-by-article split here).

The claim, "pre-trained Transformers transfer; fine-tuned, they beat the LSTM reader", holds when every pre-trained
reader beats both the reader from scratch and the BiLSTM reader in exact match. "Beats" is judged on the 95%
interval of the EM difference, from a paired bootstrap over the split's paragraphs (the questions of one paragraph
are not independent; ``question_scores.<split>.*.json``, written by the evaluation): an interval above 0 beats, one
below 0 loses, one across 0 (or a split of fewer than 20 paragraphs) decides nothing ("inconclusive"). Every
pair of pre-trained readers also gets the interval of their difference (which start transfers better), shown with the
first of the two by name, and each is judged against the reader from scratch where the BiLSTM is not among the runs
(the claim is then not measured). The interval
speaks for this split's articles, whose paragraphs are themselves related, and for the runs as trained (several
seeds are averaged, their spread is not in it). Runs without per-question scores are judged on their point
estimates, and the verdict says so. The goals: the reader from ``all-MiniLM-L6-v2`` reaches 40 EM, and the
reader from the project's own pre-training beats the one from scratch by 5 EM; where that one is missed, the
tokens that pre-training saw stand beside BERT's (1,000,000 steps of 128,000 tokens).

``all-MiniLM-L6-v2`` was trained on more than Wikipedia: its contrastive fine-tuning pairs include SQuAD's training
questions with their paragraphs (its model card). The split here is cut from SQuAD's dev set, so no test question
was seen; but that reader starts with a head start on the task that the project's own pre-training does not have.
"""

from __future__ import annotations

import json
import pathlib

import numpy as np
from absl import logging

from attnjax import fs
from attnjax.transfer import PROVENANCE_FILE
from attnjax.report import figures
from attnjax.report.pretraining import tokens_per_step
from attnjax.data.wordpiece import WORDPIECE_FILE
from attnjax.report.runs import checkpoint_seconds, evaluation_file, init_label
from attnjax.report.tables import format_wall, markdown_table

REPOSITORY = pathlib.Path(__file__).resolve().parents[2]
SEED_EM = {"BiLSTM reader": 71.3, "pre-trained": 84.1}  # the seed study: LSTM + attention, pre-trained Transformer
MINILM = "all-MiniLM-L6-v2"
GOAL_MINILM_EM = 40.0
GOAL_OWN_OVER_SCRATCH = 5.0
BERT_TOKENS = 1_000_000 * 128_000  # BERT's pre-training: 1,000,000 steps of 128,000-token batches (Devlin et al.)
BOOTSTRAP_SAMPLES = 2000
MIN_PARAGRAPHS = 20


def _source(record: dict) -> str | None:
  return ((record.get("config") or {}).get("train") or {}).get("init_encoder_from")


def _readers(records: list[dict]) -> dict[str, list[dict]]:
  """``{task: [evaluated span-QA runs]}`` for the SQuAD 1.1 tasks where one of them starts from a pre-trained encoder
  (2.0 runs have their own section, :mod:`attnjax.report.squad2`)."""
  by_task: dict[str, list[dict]] = {}
  for r in records:
    if (r.get("kind") == "extractive_qa" and r["state"] == "evaluated" and r["scores"].get("exact_match") is not None
        and "HasAns_f1" not in (r.get("metrics") or {})):
      by_task.setdefault(r["task"], []).append(r)
  return {task: runs for task, runs in by_task.items() if any(_source(r) for r in runs)}


def exported_from(source: str) -> dict | None:
  """What ``attnjax.export`` wrote beside a Hugging Face directory it exported
  (:data:`attnjax.transfer.PROVENANCE_FILE`: the workdir, checkpoint and step), or None for any other source. A
  relative source is read as given, else from the repository's root, where experiment files name it from
  (``results/...``)."""
  for base in (str(source), fs.join(str(REPOSITORY), str(source))):
    path = fs.join(base, PROVENANCE_FILE)
    if fs.exists(path):
      try:
        return fs.read_json(path)
      except ValueError as e:
        logging.warning("transfer: %s is not JSON (%s): the source is taken for a published checkpoint", path, e)
        return None
    if str(source).startswith(("/", "gs://")):
      break
  return None


def _pretraining(source: str, records: list[dict]) -> tuple[str, dict | None]:
  """The budget of a pre-trained source: the matching masked-LM run of the report (the source's workdir, or for an
  export of one, the workdir it was exported from), at the checkpoint the readers load (its best, the one its
  evaluation scored): training hours, steps and tokens seen; else the published checkpoint's name."""
  exported = exported_from(source)
  tail = str(exported["workdir"] if exported else source).rstrip("/").removeprefix("./")
  for r in records:
    workdir = str(r["workdir"]).rstrip("/")
    if r.get("kind") == "mlm" and (workdir == tail or workdir.endswith("/" + tail) or _same_run(tail, r["run"])):
      step = (exported or {}).get("step") or r.get("step") or r.get("trained_step") or 0
      tokens = _tokens_seen({**r, "step": step})
      hours = (checkpoint_seconds(r["workdir"], step) or 0.0) / 3600
      total = (f"; the run trained {(r.get('train_seconds') or 0.0) / 3600:.1f} h, {r['trained_step']:,} steps"
               if r.get("trained_step") and r["trained_step"] != step else "")
      which = f"the checkpoint exported to {source}" if exported else "its best checkpoint"
      text = f"{hours:.1f} h, {step:,} steps, {tokens / 1e6:.0f}M tokens ({which}{total}; {r['run']})"
      return text, {**r, "step": step}
  return "published checkpoint, not pre-trained here", None


def _same_run(source: str, run: str) -> bool:
  """Whether ``init_encoder_from`` names the run ``run`` (its path under its launch root,
  ``<experiment>/<sweep>/<point>``) under another root: the readers trained from ``runs/transfer/...`` and the report
  reads the records of the same runs from ``results/transfer/...``, or from a record one level deeper
  (``results/transfer_official/pretraining/...``): the launcher's last four levels (task, experiment, sweep, point)
  agree."""
  parts, theirs = str(run).strip("/").split("/"), str(source).strip("/").split("/")
  if len(parts) >= 3 and theirs[-len(parts):] == parts:
    return True
  return len(parts) >= 4 and len(theirs) >= 4 and theirs[-4:] == parts[-4:]


def _tokens_seen(record: dict) -> int:
  """Tokens a masked-LM run had seen at its scored checkpoint: steps x rows x row length."""
  return (record.get("step") or record.get("trained_step") or 0) * tokens_per_step(record)


def _pretraining_reached(record: dict) -> str | None:
  """What a masked-LM run's scored checkpoint reached, beside what token frequencies alone reach on the same split
  (:meth:`attnjax.data.mlm.MlmTaskData.context_free`, from the rows cached in its workdir): a loss above theirs means
  the encoder had not yet learnt to use context, and then little is there to transfer."""
  scores, split = record.get("scores") or {}, record.get("split")
  if scores.get("mlm_loss") is None or scores.get("mlm_accuracy") is None:
    return None
  text = (f"- The masked-LM run {record['run']} reaches {split} MLM loss {scores['mlm_loss']:.2f} and accuracy "
          f"{100 * scores['mlm_accuracy']:.1f}% at the checkpoint the readers load")
  metrics = record.get("metrics") or {}
  baseline = None
  data = (record.get("config") or {}).get("data") or {}
  if metrics.get("context_free_mlm_loss") is not None and metrics.get("context_free_mlm_accuracy") is not None:
    # written by the evaluation (or python -m attnjax.baselines --baseline=context_free), so a record keeps it
    baseline = {"mlm_loss": metrics["context_free_mlm_loss"], "mlm_accuracy": metrics["context_free_mlm_accuracy"]}
  elif data and fs.exists(fs.join(record["workdir"], WORDPIECE_FILE)):
    try:
      from attnjax.data.mlm import MlmTaskData  # pylint: disable=g-import-not-at-top
      baseline = MlmTaskData(data, record["workdir"]).context_free(split)
    except (OSError, ValueError, KeyError) as e:
      logging.warning("transfer: %s: no context-free baseline (%s: %s)", record.get("run"), type(e).__name__, e)
  if baseline is None:
    return text + "."
  return text + (f". Token frequencies alone, ignoring the context, reach loss {baseline['mlm_loss']:.2f} and "
                 f"accuracy {100 * baseline['mlm_accuracy']:.1f}% on the same rows: "
                 + context_verdict(scores, baseline))


def context_verdict(scores: dict, baseline: dict) -> str:
  """Whether a masked LM uses context, from its MLM loss and accuracy against token frequencies' on the same rows: a
  lower loss says it does; a higher accuracy at a loss that is not lower says it has begun to (its top guesses use
  context, its distributions are not yet better than the frequencies); neither says it has not."""
  if scores["mlm_loss"] < baseline["mlm_loss"]:
    return "its loss is below theirs, so it uses context."
  if scores["mlm_accuracy"] > baseline["mlm_accuracy"]:
    return ("its accuracy is above theirs but its loss is not below, so it has begun to use context: its top guesses "
            "do, while its predicted distributions are not yet better than the frequencies.")
  return "its loss is above theirs, so it had not yet learnt to use context."


def fine_tuning(record: dict) -> str:
  data = (record.get("config") or {}).get("data") or {}
  step = record.get("trained_step")
  if not step:
    return "—"
  batch = int(data.get("batch_size") or 0)  # 0: batches by token count (the BiLSTM's)
  unit = "windows" if data.get("doc_stride") else "questions"  # a reader of windows: a question can give several
  seen = f" ({step * batch:,} {unit})" if batch else ""
  return f"{step:,} steps{seen}, {format_wall(record.get('train_seconds'))} (h:mm)"


def transfer_section(records: list[dict], out: fs.PathLike) -> str | None:
  """The markdown of the transfer study (and its curves' PNG in ``out``), or None without one."""
  sections = []
  for task, readers in sorted(_readers(records).items()):
    readers = sorted(readers, key=lambda r: (bool(_source(r)), r["label"] != "BiLSTM reader", r["label"] or ""))
    rows, by_role, own, reached = [], {}, {}, {}
    for r in readers:
      source = _source(r)
      start = init_label(source) if source else "random"
      by_role.setdefault(start if source else "lstm" if r["label"] == "BiLSTM reader" else "scratch", []).append(r)
      budget, mlm = _pretraining(source, records) if source else ("—", None)
      if mlm is not None:
        own[start] = _tokens_seen(mlm)
        reached[mlm["run"]] = _pretraining_reached(mlm)
      seed = SEED_EM["pre-trained"] if source else SEED_EM.get(r["label"])
      rows.append([r["label"] or "?", start, f"{r['scores']['exact_match']:.2f}", f"{r['scores'].get('f1', 0):.2f}",
                   "—" if seed is None else f"{seed}", fine_tuning(r), budget, r["run"]])
    table = markdown_table(["reader", "starts from", f"{readers[0]['split']} EM", f"{readers[0]['split']} F1",
                            "seed EM (SQuAD v1.1)", "fine-tuning", "pre-training", "run"], rows)
    plot = f"transfer_{task}.png"
    plot_f1_curves(readers, fs.join(out, plot))
    lines = "".join(f"{line}\n\n" for line in reached.values() if line)
    sections.append(f"### {task}\n\n{table}\n\n{lines}{_claim_and_goals(by_role, own)}\n\n"
                    f"![fine-tuning curves]({plot})")
  if not sections:
    return None
  return ("## Transfer: readers from pre-trained encoders\n\nSpan-QA readers that differ only in their starting "
          "weights, each fine-tuned for the same time; the seed study's numbers are on SQuAD's full training set "
          "(`attnjax/report/transfer.py`).\n\n" + "\n\n".join(sections))


def question_scores(runs: list[dict], column: int = 0) -> tuple[dict[str, float], dict[str, int]] | None:
  """Question id -> EM (``column`` 0) or F1 (1), in 0..1, the mean over the runs (seeds of one reader), and question
  id -> paragraph, from the runs' ``question_scores`` files; None when a run has none (scored before they were
  written) or they differ in their questions."""
  tables = []
  for r in runs:
    path = evaluation_file(r, "question_scores")
    if path is None:
      return None
    try:
      tables.append(json.loads(fs.read_text(path)))
    except (OSError, ValueError) as e:  # missing, or torn: the claim falls back to the point estimates
      logging.warning("transfer: %s: no per-question scores (%s: %s)", r.get("run"), type(e).__name__, e)
      return None
  if any(set(t) != set(tables[0]) for t in tables):
    return None
  return ({qid: float(np.mean([t[qid][column] for t in tables])) for qid in tables[0]},
          {qid: int(row[2]) for qid, row in tables[0].items()})


def paired_interval(a: dict[str, float], b: dict[str, float], paragraph: dict[str, int], *,
                    samples: int = BOOTSTRAP_SAMPLES, seed: int = 0) -> tuple[float, float] | None:
  """The 95% percentile interval of mean(a) - mean(b) over the questions, in EM points, from a paired bootstrap
  that resamples whole paragraphs (with replacement) and takes every question of each drawn paragraph; None with
  fewer than ``MIN_PARAGRAPHS`` paragraphs, too few for the resamples to stand for a split."""
  qids = sorted(paragraph)
  groups = sorted({paragraph[q] for q in qids})
  if len(groups) < MIN_PARAGRAPHS:
    return None
  index = {g: i for i, g in enumerate(groups)}
  diff_sum, count = np.zeros(len(groups)), np.zeros(len(groups))
  for q in qids:
    diff_sum[index[paragraph[q]]] += a[q] - b[q]
    count[index[paragraph[q]]] += 1
  draws = np.random.default_rng(seed).integers(0, len(groups), size=(samples, len(groups)))
  means = 100.0 * diff_sum[draws].sum(axis=1) / count[draws].sum(axis=1)
  return float(np.percentile(means, 2.5)), float(np.percentile(means, 97.5))


def _claim_and_goals(by_role: dict[str, list[dict]], own: dict[str, int]) -> str:
  """``by_role``: the readers by "lstm", "scratch" and each pre-trained source's name, several runs of one (seeds)
  averaged; ``own``: the sources pre-trained by this project (runs of the report), each with the tokens it had seen
  (0 where unknown; a missed goal sets them against BERT's)."""
  em = {role: sum(r["scores"]["exact_match"] for r in runs) / len(runs) for role, runs in by_role.items()}
  per_question = {role: question_scores(runs) for role, runs in by_role.items()}
  paired = all(v is not None for v in per_question.values()) and len(
      {frozenset(v[0]) for v in per_question.values()}) == 1
  scratch, lstm = em.get("scratch"), em.get("lstm")
  pretrained = {role: value for role, value in em.items() if role not in ("lstm", "scratch")}
  names = {"lstm": "BiLSTM", "scratch": "BERT from scratch"}
  intervals: dict[tuple[str, str], tuple[float, float]] = {}

  def compare(role: str, other: str) -> int:
    """+1: ``role`` beats ``other``; -1: it loses; 0: the interval straddles 0."""
    if not paired:
      return (em[role] > em[other]) - (em[role] < em[other])
    interval = paired_interval(per_question[role][0], per_question[other][0], per_question[role][1])
    if interval is None:
      return 0
    lo, hi = intervals[role, other] = interval
    return 1 if lo > 0 else -1 if hi < 0 else 0

  # every pre-trained reader against the baselines present, and each pair of pre-trained readers (which start helps)
  outcomes = {(role, other): compare(role, other) for role in pretrained for other in ("scratch", "lstm")
              if other in em}
  ordered = sorted(pretrained)
  for i, role in enumerate(ordered):
    for other in ordered[i + 1:]:
      compare(role, other)
  if scratch is None or lstm is None or not pretrained:
    verdict = "not measured (needs the BiLSTM reader, the reader from scratch and a pre-trained one)"
  else:
    outcome = {role: min(outcomes[role, "scratch"], outcomes[role, "lstm"]) for role in pretrained}
    beats = [role for role, o in outcome.items() if o == 1]
    verdict = ("holds" if len(beats) == len(pretrained) else
               f"holds for {', '.join(beats)} only" if beats else
               "does not hold" if any(o == -1 for o in outcome.values()) else "inconclusive")
    verdict += (" (95% intervals of paired EM differences, paragraphs resampled)" if paired else
                " (on point estimates: no per-question scores)")
  evidence = []
  for role, value in sorted(em.items()):
    text = f"{names.get(role, 'from ' + role)} {value:.2f}" + (
        f" (mean of {len(by_role[role])})" if len(by_role[role]) > 1 else "")
    versus = [f"{intervals[role, other][0]:+.1f} to {intervals[role, other][1]:+.1f} vs "
              f"{names.get(other, 'from ' + other)}" for other in ("scratch", "lstm", *ordered)
              if (role, other) in intervals]
    evidence.append(text + (f" ({'; '.join(versus)})" if versus else ""))
  lines = [markdown_table(["claim", "evidence (EM)", "verdict"],
                          [["pre-trained Transformers transfer; fine-tuned, they beat the LSTM reader",
                            ", ".join(evidence), verdict]]), ""]
  minilm = em.get(MINILM)
  if minilm is not None or not own:  # a study of the project's own encoders alone is not judged on MiniLM's goal
    lines.append(f"- Goal: the reader from {MINILM} reaches {GOAL_MINILM_EM:g} EM: " + (
        "not measured." if minilm is None else f"{'met' if minilm >= GOAL_MINILM_EM else 'missed'} ({minilm:.2f})."))
  mine = {role: value for role, value in pretrained.items() if role in own}
  best = max(mine, key=mine.get) if mine else None
  interval = intervals.get((best, "scratch"))
  lines.append(f"- Goal: the reader from this project's pre-training beats the one from scratch by "
               f"{GOAL_OWN_OVER_SCRATCH:g} EM: " + (
                   "not measured." if best is None or scratch is None else
                   f"{'met' if mine[best] - scratch >= GOAL_OWN_OVER_SCRATCH else 'missed'} "
                   f"({mine[best] - scratch:+.2f} EM" + (
                       f"; 95% interval {interval[0]:+.1f} to {interval[1]:+.1f}" if interval else "") + ")"
                   + _why_missed(mine[best] - scratch, own.get(best)) + "."))
  if MINILM in em:
    lines.append(f"- {MINILM} was fine-tuned on sentence pairs that include SQuAD's training questions and "
                 "paragraphs (its model card): no question of this split, which is cut from SQuAD's dev set, but a "
                 "head start on the task that this project's own pre-training does not have.")
  return "\n".join(lines)


def _why_missed(gain: float, tokens: int | None) -> str:
  """For a missed goal of the project's own pre-training, the tokens it saw against BERT's."""
  if gain >= GOAL_OWN_OVER_SCRATCH or not tokens:
    return ""
  return (f": its pre-training saw {tokens / 1e6:.1f}M tokens, 1/{BERT_TOKENS / tokens:,.0f} of BERT's "
          f"{BERT_TOKENS / 1e9:.0f}B (1,000,000 steps of 128,000 tokens); the line above says whether its encoder "
          "had learnt to use context")


def plot_f1_curves(readers: list[dict], path: fs.PathLike) -> None:
  """Validation F1 against fine-tuning step, one line per reader."""
  figure = figures.figure(5.0, 3.4)
  ax = figure.add_subplot()
  for r in readers:
    curve = r.get("eval_curves", {}).get("eval/f1", [])
    if curve:
      ax.plot([s for s, _ in curve], [v for _, v in curve], "o-", ms=3, label=r["label"])
  ax.set_xlabel("fine-tuning step")
  ax.set_ylabel("validation F1")
  ax.grid(alpha=0.3)
  if ax.get_lines():
    ax.legend(fontsize=7)
  figures.write_png(figure, path)
