"""The summarization sections of the report: See et al. (2017)'s measures per run, ROUGE by article length, and the
claims the study tests with them.

* :func:`statistics_table`: per evaluated summarization run, ROUGE beside repetition (the share of a summary's
  trigrams it already used) and novelty (the share of its n-grams that are not in the article), as
  :func:`attnjax.families.seq2seq.decode_and_score` and :mod:`attnjax.baselines` store them in
  ``metrics.<split>.json``, and the decoding speed of the split (articles per second of the evaluation's beam search, compilation included).
* :func:`length_rows` / :func:`length_table`: ROUGE-1 of each article-length bucket, from a run's hypotheses file
  and the split's articles (the data must be readable where the report runs).
* :func:`claims_table`: the seed's ordering "seq2seq < LSTM + attention < Transformer", See et al.'s "copy and
  coverage add ROUGE and remove repetition" and Gehrmann et al.'s "copy attention adds ROUGE to the Transformer",
  each with the numbers it rests on and a verdict.
"""

from __future__ import annotations

from typing import Any

from absl import logging

from attnjax import fs
from attnjax.report.runs import LABEL_ORDER, evaluation_file
from attnjax.report.tables import markdown_table

STATISTICS = ("repeated_trigrams", "novel_1grams", "novel_2grams", "novel_3grams")
STATISTIC_TITLES = {"repeated_trigrams": "repeated 3-grams %", "novel_1grams": "novel 1-grams %",
                    "novel_2grams": "novel 2-grams %", "novel_3grams": "novel 3-grams %"}
# article length in words (whitespace tokens of the tokenized article): the upper bounds of the buckets
LENGTH_BUCKETS = (400, 800, 1200)

SEED_ORDER = ("LSTM seq2seq", "LSTM + Bahdanau", "Transformer")
SEE_ET_AL = ("LSTM + Bahdanau", "LSTM + Bahdanau + pointer-generator", "LSTM + Bahdanau + pointer-generator + coverage")
GEHRMANN = ("Transformer", "Transformer + copy")


def _evaluated(records: list[dict]) -> list[dict]:
  rows = [r for r in records if r["kind"] == "summarization" and r["state"] == "evaluated" and r["label"]]
  order = {label: i for i, label in enumerate(LABEL_ORDER)}
  return sorted(rows, key=lambda r: (r["task"] or "", order.get(r["label"], len(order)), r["run"]))


def _number(value, digits: int = 2) -> str:
  return "—" if not isinstance(value, (int, float)) or isinstance(value, bool) else f"{value:.{digits}f}"


def _rate(examples, seconds) -> str:
  """Articles decoded per second (the evaluation's search, compilation included), "—" where not measured."""
  if not isinstance(examples, int) or not isinstance(seconds, (int, float)) or seconds <= 0:
    return "—"
  return f"{examples / seconds:.2f}"


def _training_examples(record: dict) -> int | None:
  """The pairs of the run's training split, from its token cache (``tokens.train.*.npz``); None if it has none."""
  import numpy as np  # pylint: disable=g-import-not-at-top
  if not record.get("workdir") or not fs.exists(record["workdir"]):
    return None
  for path in sorted(fs.path(record["workdir"]).glob("tokens.train.*.npz")):
    try:
      with np.load(fs.open_binary(path)) as arrays:
        return int(arrays["src_offsets"].size - 1)
    except (OSError, ValueError, KeyError):
      return None
  return None


def epochs(record: dict) -> str:
  """Passes over the training split up to the evaluated step: step × batch rows / training pairs ("—" if unknown:
  token batches, or no token cache)."""
  batch = ((record.get("config") or {}).get("data") or {}).get("batch_size")
  examples = _training_examples(record) if record.get("step") else None
  if not isinstance(batch, int) or not examples:
    return "—"
  return f"{record['step'] * batch / examples:.2f}"


def statistics_table(records: list[dict]) -> str | None:
  """ROUGE, repetition and novelty of every evaluated summarization run, and how far it trained (None: no run)."""
  rows = []
  for r in _evaluated(records):
    s = {**(r.get("metrics") or {}), **r["scores"]}  # the statistics are not among the report's metrics
    rows.append([r["label"], r["task"], r["split"] or "—", str(r.get("examples") or "—"),
                 *(_number(s.get(m)) for m in ("rouge1", "rouge2", "rougeLsum")),
                 *(_number(s.get(m)) for m in STATISTICS),
                 str(s.get("empty_sources", "—")), _rate(r.get("examples"), s.get("decode_seconds")),
                 str(r["step"] if r["step"] else "—"), epochs(r), r["run"]])
  if not rows:
    return None
  header = ["model", "task", "split", "articles", "ROUGE-1", "ROUGE-2", "ROUGE-Lsum",
            *(STATISTIC_TITLES[m] for m in STATISTICS), "empty articles", "decoded articles/s", "step", "epochs", "run"]
  return markdown_table(header, rows)


def _by_label(records: list[dict], task: str) -> dict[str, dict]:
  """The first evaluated run of each label on ``task`` (rows are in run order)."""
  out: dict[str, dict] = {}
  for r in _evaluated(records):
    if r["task"] == task:
      out.setdefault(r["label"], r)
  return out


def _increasing(values: list[float]) -> bool:
  return all(a < b for a, b in zip(values, values[1:]))


def _missing(labels: tuple[str, ...], found: list) -> tuple[str, str]:
  """The verdict and evidence of a claim whose arms are not all evaluated."""
  return "not measured", "missing: " + ", ".join(label for label, r in zip(labels, found) if not r)


def claims_table(records: list[dict]) -> str | None:
  """One row per claim and task: the numbers it rests on (ROUGE-1 on the evaluated split; repetition beside it for
  the copy claims, judged on it for See et al.'s) and a verdict: "holds", "does not hold" or "not measured" (an arm
  missing)."""
  tasks = sorted({r["task"] for r in _evaluated(records)})
  rows = []
  for task in tasks:
    runs = _by_label(records, task)
    found = [runs.get(label) for label in SEED_ORDER]
    if all(found):
      rouge = [r["scores"].get("rouge1") for r in found]
      verdict = "holds" if None not in rouge and _increasing(rouge) else "does not hold"
      evidence = ", ".join(f"{label} {_number(v)}" for label, v in zip(SEED_ORDER, rouge))
    else:
      verdict, evidence = _missing(SEED_ORDER, found)
    rows.append(["seed: seq2seq < LSTM + attention < Transformer (ROUGE-1)", task, evidence, verdict])
    found = [runs.get(label) for label in SEE_ET_AL]
    if all(found):
      rouge = [r["scores"].get("rouge1") for r in found]
      repeated = [(r.get("metrics") or {}).get("repeated_trigrams") for r in found]
      more_rouge = None not in rouge and _increasing(rouge)
      less_repetition = None not in repeated and _increasing(repeated[::-1])
      verdict = {(True, True): "holds", (True, False): "ROUGE holds, repetition does not",
                 (False, True): "repetition holds, ROUGE does not"}.get((more_rouge, less_repetition), "does not hold")
      evidence = "; ".join(f"{label.replace('LSTM + Bahdanau', 'attention')}: ROUGE-1 {_number(a)}, repeated "
                           f"3-grams {_number(b)}%" for label, a, b in zip(SEE_ET_AL, rouge, repeated))
    else:
      verdict, evidence = _missing(SEE_ET_AL, found)
    rows.append(["See et al.: copy and coverage add ROUGE and remove repetition", task, evidence, verdict])
    found = [runs.get(label) for label in GEHRMANN]
    if all(found):
      rouge = [r["scores"].get("rouge1") for r in found]
      verdict = "holds" if None not in rouge and _increasing(rouge) else "does not hold"
      evidence = "; ".join(f"{label}: ROUGE-1 {_number(r['scores'].get('rouge1'))}, repeated 3-grams "
                           f"{_number((r.get('metrics') or {}).get('repeated_trigrams'))}%"
                           for label, r in zip(GEHRMANN, found))
    else:
      verdict, evidence = _missing(GEHRMANN, found)
    rows.append(["Gehrmann et al.: copy attention adds ROUGE to the Transformer", task, evidence, verdict])
  return markdown_table(["claim", "task", "evidence", "verdict"], rows) if rows else None


GOAL_ROUGE1 = 31.33  # See et al. 2017, Table 1: the attention baseline (150k vocabulary) on the full test set
AMBITION_GAP = 3.0  # pointer-generator + coverage within this much ROUGE-1 of Lead-3, on the same split
FULL = "LSTM + Bahdanau + pointer-generator + coverage"


def goal_lines(records: list[dict]) -> list[str]:
  """Per task with a model arm: the goal (the best arm reaches See et al.'s attention baseline in ROUGE-1) and the
  ambition (pointer-generator + coverage within 3 ROUGE-1 of Lead-3), each met or missed, with the step and epochs of
  the runs they rest on (why a goal is missed: how far those runs trained)."""
  lines = []
  for task in sorted({r["task"] for r in _evaluated(records)}):
    runs = _by_label(records, task)
    arms = {label: r for label, r in runs.items() if label != "Lead-3" and r["scores"].get("rouge1") is not None}
    if not arms:
      continue
    label, best = max(arms.items(), key=lambda item: item[1]["scores"]["rouge1"])
    rouge = best["scores"]["rouge1"]
    lines.append(f"- {task}, goal: the best arm reaches See et al.'s attention baseline, {GOAL_ROUGE1} ROUGE-1: "
                 f"{'met' if rouge >= GOAL_ROUGE1 else 'missed'} ({label}, {rouge:.2f}, at step {best['step']}, "
                 f"{epochs(best)} epochs).")
    lead, full = runs.get("Lead-3"), arms.get(FULL)
    if lead is None or full is None:
      lines.append(f"- {task}, ambition: pointer-generator + coverage within {AMBITION_GAP:g} ROUGE-1 of Lead-3: not "
                   f"measured (missing: {', '.join(n for n, r in (('Lead-3', lead), (FULL, full)) if r is None)}).")
      continue
    gap = lead["scores"]["rouge1"] - full["scores"]["rouge1"]
    lines.append(f"- {task}, ambition: pointer-generator + coverage within {AMBITION_GAP:g} ROUGE-1 of Lead-3: "
                 f"{'met' if gap <= AMBITION_GAP else 'missed'} ({gap:.2f} below Lead-3's "
                 f"{lead['scores']['rouge1']:.2f}, at step {full['step']}, {epochs(full)} epochs).")
  return lines


# ------------------------------------------------------------------------------------------- ROUGE by article length


def _bucket(words: int) -> str:
  lower = 0
  for upper in LENGTH_BUCKETS:
    if words <= upper:
      return f"{lower + 1}-{upper}"
    lower = upper
  return f">{LENGTH_BUCKETS[-1]}"


def bucket_names() -> list[str]:
  return [_bucket(b) for b in LENGTH_BUCKETS] + [_bucket(LENGTH_BUCKETS[-1] + 1)]


def rouge_by_length(articles: list[str], hypotheses: list[str], references: list[str]) -> dict[str, list[float]]:
  """Bucket name -> [mean ROUGE-1 F1 (0-100), articles] over the examples whose article has that many words."""
  from attnjax.metrics.summarization import rouge_scorer  # pylint: disable=g-import-not-at-top
  if not len(articles) == len(hypotheses) == len(references):
    raise ValueError(f"articles ({len(articles)}), hypotheses ({len(hypotheses)}) and references "
                     f"({len(references)}) must pair up")
  scorer = rouge_scorer(["rouge1"])
  totals: dict[str, list[float]] = {}
  for article, hypothesis, reference in zip(articles, hypotheses, references):
    entry = totals.setdefault(_bucket(len(article.split())), [0.0, 0])
    entry[0] += scorer.score(reference, hypothesis)["rouge1"].fmeasure
    entry[1] += 1
  return {name: [100.0 * total / count, count] for name, (total, count) in totals.items()}


def _hypotheses_path(record: dict) -> Any:
  return evaluation_file(record, "hypotheses")


def length_rows(records: list[dict]) -> list[tuple[dict, dict[str, list[float]]]]:
  """(record, :func:`rouge_by_length`) of every evaluated summarization run whose hypotheses file and split can be
  read here; a run that cannot is logged and left out."""
  from attnjax import config as config_lib  # pylint: disable=g-import-not-at-top
  from attnjax import families  # pylint: disable=g-import-not-at-top
  from attnjax.data import tasks  # pylint: disable=g-import-not-at-top
  rows, splits = [], {}
  for r in _evaluated(records):
    path = _hypotheses_path(r)
    if path is None or not r.get("config"):
      logging.info("report: %s: no hypotheses file to score by article length", r["run"])
      continue
    try:
      key = (r["task"], r["split"])
      if key not in splits:
        data = config_lib.load_config(r["workdir"]).data
        tasks.resolve_data_dir(data, r["workdir"])
        splits[key] = families.load_split(data, r["split"])
      pairs = splits[key]
      hypotheses = fs.read_text(path).split("\n")[:len(pairs)]
      rows.append((r, rouge_by_length([a for a, _ in pairs], hypotheses, [s for _, s in pairs])))
    except (OSError, ValueError, KeyError) as e:
      logging.warning("report: %s: cannot score by article length (%s: %s)", r["run"], type(e).__name__, e)
  return rows


def length_table(rows: list[tuple[dict, dict[str, list[float]]]]) -> str:
  names = bucket_names()
  counts = {name: next((int(by[name][1]) for _, by in rows if name in by), 0) for name in names}
  header = ["model", "split"] + [f"{name} words ({counts[name]})" for name in names] + ["run"]
  table_rows = [[r["label"], r["split"] or "—"] + [_number(by[name][0]) if name in by else "—" for name in names]
                + [r["run"]] for r, by in rows]
  return markdown_table(header, table_rows)
