"""BLEU by source-sentence length (Bahdanau et al. 2015, Fig. 2, on the runs' own test translations).

Each evaluated translation run's hypotheses file (``hypotheses.<split>.step<N>.txt``, one line per example, written
by ``attnjax.evaluate``) is paired with its split's sources and references, read again through the run's own data
config (``attnjax.families.load_split``), and the examples are bucketed by the number of whitespace-separated words
of the source. Each bucket gets its own corpus BLEU (sacreBLEU, default settings), so a bucket's score is the BLEU of
those sentences alone, as in the paper's figure; each bucket's sentence count is printed beside it.

Position extrapolation is the same idea on the synthetic ``reverse`` task, whose test strings are longer
than any seen in training: :func:`extrapolation_rows` gives each run's exact match per source length (characters),
over its validation split (the training lengths) and its test split (the longer ones), as a table and
``extrapolation.png``.

Both are stored in the run's record (``bleu_by_length``: ``{"edges", "buckets"}``; ``exact_match_by_length``:
``{split: {length: [examples, right]}}``), so that a report that only has an earlier ``results.json`` of the run
(:func:`attnjax.report.runs.read_archive`: its workdir is gone) draws it again from there. A run whose data cannot be
found, or whose hypotheses file does not have one line per example, is left out with the reason logged; the rest of
the report does not depend on it.
"""

from __future__ import annotations

import math

from absl import logging

from attnjax import fs
from attnjax.report import figures

# Upper bounds (inclusive) of the source-length buckets, in words; the last bucket is open. Multi30k's sources have a
# median of 12 words and a 99th percentile near 30 (the paper's WMT buckets ran to 60 words).
EDGES = (8, 11, 14, 18, 24)


def bucket_names(edges=EDGES) -> list[str]:
  names, low = [], 1
  for high in edges:
    names.append(f"{low}-{high}")
    low = high + 1
  return names + [f"≥{low}"]


def bucket_of(words: int, edges=EDGES) -> int:
  for i, high in enumerate(edges):
    if words <= high:
      return i
  return len(edges)


def bleu_by_length(sources: list[str], hypotheses: list[str], references: list[str], edges=EDGES) -> list[dict]:
  """Per bucket: ``{"bucket", "sentences", "bleu"}`` (``bleu`` None for an empty bucket)."""
  import sacrebleu  # pylint: disable=g-import-not-at-top
  if not len(sources) == len(hypotheses) == len(references):
    raise ValueError(f"bleu_by_length: {len(sources)} sources, {len(hypotheses)} hypotheses and {len(references)} "
                     "references; they must pair up line by line")
  groups: list[tuple[list[str], list[str]]] = [([], []) for _ in range(len(edges) + 1)]
  for source, hypothesis, reference in zip(sources, hypotheses, references):
    hyps, refs = groups[bucket_of(len(source.split()), edges)]
    hyps.append(hypothesis)
    refs.append(reference)
  return [{"bucket": name, "sentences": len(hyps),
           "bleu": sacrebleu.corpus_bleu(hyps, [refs]).score if hyps else None}
          for name, (hyps, refs) in zip(bucket_names(edges), groups)]


def _hypotheses_file(workdir: str, metrics: dict | None):
  written = (metrics or {}).get("hypotheses")
  if not written:
    return None
  return fs.join(workdir, fs.path(written).name)  # where evaluate wrote it, seen from this workdir


def _split_and_hypotheses(record: dict, split: str, metrics: dict | None, what: str):
  """``(examples, hypotheses)`` of one evaluated split of a run, read through the run's own data config, or None
  (reason logged)."""
  path = _hypotheses_file(record["workdir"], metrics)
  if path is None or not fs.exists(path):
    logging.warning("%s: %s has no hypotheses file for %s", what, record["run"], split)
    return None
  from attnjax import config as config_lib  # pylint: disable=g-import-not-at-top
  from attnjax import families  # pylint: disable=g-import-not-at-top
  from attnjax.data import tasks  # pylint: disable=g-import-not-at-top
  import ml_collections  # pylint: disable=g-import-not-at-top
  data = config_lib.base_config().data
  with data.unlocked():
    data.update(ml_collections.ConfigDict(record["config"]["data"]))
  try:
    tasks.resolve_data_dir(data, record["workdir"])
    examples = families.load_split(data, split)
  except Exception as e:  # pylint: disable=broad-except  (an optional section: never the report's failure)
    logging.warning("%s: %s: cannot read its %s split (%s)", what, record["run"], split, e)
    return None
  hypotheses = fs.read_text(path).split("\n")[:-1]
  if len(hypotheses) != len(examples):
    logging.warning("%s: %s: %d hypotheses for %d examples in %s", what, record["run"], len(hypotheses),
                    len(examples), path)
    return None
  return examples, hypotheses


def _synthetic(record: dict) -> bool:
  return ((record.get("config") or {}).get("data") or {}).get("source") == "synthetic"


def _scorable(record: dict) -> bool:
  return (record.get("kind") == "translation" and record.get("state") == "evaluated" and bool(record.get("config"))
          and not _synthetic(record))


def run_buckets(record: dict, edges=EDGES) -> list[dict] | None:
  """:func:`bleu_by_length` of one :func:`attnjax.report.runs.read_run` record, or None (reason logged). Natural
  language only: the synthetic tasks have no words (their length study is :func:`extrapolation_rows`)."""
  if not _scorable(record):
    return None
  if record.get("archived"):
    stored = record.get("bleu_by_length")
    if not stored or list(stored.get("edges") or ()) != list(edges):
      logging.warning("BLEU by length: archived run %s has no per-length scores for buckets %s", record["run"], edges)
      return None
    return stored["buckets"]
  read = _split_and_hypotheses(record, record["split"], record.get("metrics"), "BLEU by length")
  if read is None:
    return None
  examples, hypotheses = read
  buckets = bleu_by_length([s for s, _ in examples], hypotheses, [t for _, t in examples], edges)
  record["bleu_by_length"] = {"edges": list(edges), "buckets": buckets}  # for a later report from results.json
  return buckets


def best_validation(record: dict) -> float | None:
  """The best validation score of the run's training evaluations (its headline metric's ``eval/`` curve), or None."""
  curve = (record.get("eval_curves") or {}).get(f"eval/{record.get('headline') or 'bleu'}")
  return max(value for _, value in curve) if curve else None


def selected_runs(records: list[dict]) -> list[dict]:
  """One run per experiment (``experiment_name``): the one with the best validation score during training, so that a
  model's tuning and ablation runs give one curve, chosen without the test set. Runs without an experiment or without
  validation curves are each kept."""
  groups: dict[str, list[dict]] = {}
  for record in records:
    groups.setdefault(record.get("experiment_name") or record["run"], []).append(record)
  chosen = set()
  for group in groups.values():
    scores = {id(r): best_validation(r) for r in group}
    chosen |= {id(r) for r in group if scores[id(r)] is None}
    scored = [r for r in group if scores[id(r)] is not None]
    if scored:
      chosen.add(id(max(scored, key=lambda r: scores[id(r)])))
  return [r for r in records if id(r) in chosen]


def compared_splits(records: list[dict]) -> dict[str, str]:
  """Per task, the one split its length curve compares the runs on: ``test`` when any scorable run was scored on it,
  else the alphabetically first split its runs were scored on. A run scored on another split (a sweep evaluated on
  validation, say) is not set beside runs scored on the test set."""
  splits: dict[str, set] = {}
  for record in records:
    if _scorable(record):
      splits.setdefault(record.get("task"), set()).add(record.get("split") or "")
  return {task: "test" if "test" in found else sorted(found)[0] for task, found in splits.items()}


def own_budget(record: dict) -> bool:
  """Whether the run's sweep point sets its own training budget (``train.time_limit_minutes``): a point of a sweep
  over the budget, which the length curve does not set beside the arms that share the experiments' budget."""
  return "train.time_limit_minutes" in (record.get("overrides") or {})


def length_rows(records: list[dict], edges=EDGES) -> list[tuple[dict, list[dict]]]:
  """``[(record, buckets)]``: :func:`run_buckets` of the :func:`selected_runs` among the scorable translation runs
  scored on their task's :func:`compared_splits` split, at the budget the experiments share (:func:`own_budget`)."""
  compared = compared_splits(records)
  scorable = [r for r in records if _scorable(r)]
  kept, left_out, budgeted = [], [], []
  for r in scorable:
    if own_budget(r):
      budgeted.append(r)
    else:
      (kept if (r.get("split") or "") == compared[r.get("task")] else left_out).append(r)
  if left_out:
    logging.info("BLEU by length: %d run(s) scored on another split than their task's %s left out: %s",
                 len(left_out), compared, sorted(r["run"] for r in left_out))
  if budgeted:
    logging.info("BLEU by length: %d run(s) trained for a budget of their own left out: %s", len(budgeted),
                 sorted(r["run"] for r in budgeted))
  out = []
  for record in selected_runs(kept):
    buckets = run_buckets(record, edges)
    if buckets is not None:
      out.append((record, buckets))
  return out


def length_table(rows: list[tuple[dict, list[dict]]]) -> str:
  names = [b["bucket"] for b in rows[0][1]]
  header = ["model", "run", "split"] + [f"{n} words" for n in names]
  lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
  for record, buckets in rows:
    cells = [record["label"] or "—", record["run"], record["split"] or "—"]
    cells += ["—" if b["bleu"] is None else f"{b['bleu']:.2f} ({b['sentences']})" for b in buckets]
    lines.append("| " + " | ".join(cells) + " |")
  return "\n".join(lines)


def plot_length(rows: list[tuple[dict, list[dict]]], path: fs.PathLike) -> None:
  """BLEU against the source-length bucket, a line per run (the paper's Fig. 2)."""
  names = [b["bucket"] for b in rows[0][1]]
  figure = figures.figure(6.0, 3.6)
  ax = figure.add_subplot()
  for record, buckets in rows:
    values = [math.nan if b["bleu"] is None else b["bleu"] for b in buckets]
    label = record["label"] if sum(r["label"] == record["label"] for r, _ in rows) == 1 else record["run"]
    ax.plot(range(len(names)), values, "o-", markersize=4, label=label)
  ax.set_xticks(range(len(names)), names)
  ax.set_xlabel("source sentence length (words)")
  ax.set_ylabel("BLEU of the bucket")
  ax.grid(alpha=0.3)
  ax.legend(fontsize=7)
  ax.set_title("BLEU by source length", fontsize=9)
  figures.write_png(figure, path)


# ---------------------------------------------------------------------------------------------------------------------
# Position extrapolation on the synthetic reversal task


def exact_match_by_length(sources: list[str], hypotheses: list[str], references: list[str]) -> dict[int, list[int]]:
  """``{source length in characters: [examples, exactly right]}``."""
  if not len(sources) == len(hypotheses) == len(references):
    raise ValueError(f"exact_match_by_length: {len(sources)} sources, {len(hypotheses)} hypotheses and "
                     f"{len(references)} references; they must pair up line by line")
  counts: dict[int, list[int]] = {}
  for source, hypothesis, reference in zip(sources, hypotheses, references):
    count = counts.setdefault(len(source), [0, 0])
    count[0] += 1
    count[1] += int(hypothesis.strip() == reference.strip())
  return counts


def longer_string_outputs(sources: list[str], hypotheses: list[str], longest: int) -> dict[str, int]:
  """How a model answers the strings longer than any it trained on: over the sources longer than ``longest``
  characters, ``{"strings", "of_longest_length", "reversed_prefix"}``, how many there are, how many of their outputs
  have exactly ``longest`` characters, and how many are the reversal of the source's first ``longest`` characters
  (the model reading the string as if it ended where the training strings did)."""
  if len(sources) != len(hypotheses):
    raise ValueError(f"longer_string_outputs: {len(sources)} sources and {len(hypotheses)} hypotheses; they must pair "
                     "up line by line")
  pairs = [(source, hypothesis.strip()) for source, hypothesis in zip(sources, hypotheses) if len(source) > longest]
  return {"strings": len(pairs), "of_longest_length": sum(len(h) == longest for _, h in pairs),
          "reversed_prefix": sum(h == s[:longest][::-1] for s, h in pairs)}


def extrapolation_rows(records: list[dict]) -> list[tuple[dict, dict[str, dict[int, list[int]]]]]:
  """``[(record, {split: exact_match_by_length})]`` for every evaluated run of the ``reverse`` task, over the splits
  it was evaluated on (validation: the training lengths; test: longer). A run scored on both also gets
  ``record["longer_string_outputs"]``: :func:`longer_string_outputs` of its test split past the longest validation
  length."""
  out = []
  for record in records:
    if record.get("task") != "reverse" or record.get("state") != "evaluated" or not record.get("config"):
      continue
    if record.get("archived"):
      stored = record.get("exact_match_by_length") or {}
      by_split = {split: {int(n): list(count) for n, count in counts.items()} for split, counts in stored.items()}
      if by_split:
        out.append((record, by_split))
      else:
        logging.warning("Extrapolation: archived run %s has no per-length exact match", record["run"])
      continue
    by_split, read_splits = {}, {}
    for split in sorted({record["split"], *(record.get("other_splits") or {})}):
      metrics = record.get("metrics") if split == record["split"] else _read_metrics(record["workdir"], split)
      read = _split_and_hypotheses(record, split, metrics, "Extrapolation")
      if read is not None:
        examples, hypotheses = read_splits[split] = read
        by_split[split] = exact_match_by_length([s for s, _ in examples], hypotheses, [t for _, t in examples])
    if "validation" in by_split and "test" in read_splits:
      examples, hypotheses = read_splits["test"]
      record["longer_string_outputs"] = longer_string_outputs([s for s, _ in examples], hypotheses,
                                                              max(by_split["validation"]))
    if by_split:
      record["exact_match_by_length"] = by_split  # for a later report from results.json
      out.append((record, by_split))
  return out


def _read_metrics(workdir: str, split: str) -> dict | None:
  try:
    return fs.read_json(fs.join(workdir, f"metrics.{split}.json"))
  except (OSError, ValueError):
    return None


def _run_label(record: dict, rows) -> str:
  label = (record.get("model") or {}).get("positional") or record["label"] or record["run"]
  same = sum(((r.get("model") or {}).get("positional") or r["label"] or r["run"]) == label for r, _ in rows)
  if same == 1:
    return label
  return f"{label} (seed {record['seed']})" if record.get("seed") is not None else f"{label} ({record['run']})"


def _percent(count) -> str:
  return f"{100.0 * count[1] / count[0]:.1f}" if count[0] else "—"


def _validation_score(record: dict) -> float | None:
  scores = record["scores"] if record.get("split") == "validation" else (record.get("other_splits") or {}).get(
      "validation", {})
  return scores.get("exact_match")


def extrapolation_table(rows) -> str:
  """A row per run: exact match (%) over the validation lengths pooled, then at each longer test length. An archived
  run that kept only its test lengths shows its validation split's exact match in the pooled column."""
  seen = sorted({n for _, by_split in rows for n in by_split.get("validation", {})})
  longer = sorted({n for _, by_split in rows for n in by_split.get("test", {})} - set(seen))
  pooled_column = bool(seen) or any(_validation_score(record) is not None for record, _ in rows)
  header = ["positions", "run"]
  if pooled_column:
    header.append(f"lengths {seen[0]}–{seen[-1]} (validation)" if seen else "validation (training lengths)")
  header += [f"length {n}" for n in longer]
  lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
  for record, by_split in rows:
    cells = [_run_label(record, rows), record["run"]]
    if pooled_column:
      pooled = [sum(c[i] for c in by_split.get("validation", {}).values()) for i in (0, 1)]
      validation = _validation_score(record)
      cells.append(_percent(pooled) if pooled[0] or validation is None else f"{validation:.1f}")
    cells += [_percent(by_split.get("test", {}).get(n, [0, 0])) for n in longer]
    lines.append("| " + " | ".join(cells) + " |")
  return "\n".join(lines)


def longer_strings_table(rows) -> str | None:
  """A row per run that has :func:`longer_string_outputs` (None when none has): of its test strings longer than the
  training ones, the share of outputs exactly as long as the longest training string, and the share that are the
  reversal of the source's first that many characters."""
  longest = max((n for _, by_split in rows for n in by_split.get("validation", {})), default=None)
  counted = [(record, record["longer_string_outputs"]) for record, _ in rows if record.get("longer_string_outputs")]
  if longest is None or not counted:
    return None
  lines = [f"| positions | run | test strings longer than {longest} | outputs of {longest} characters | reversal of "
           f"the first {longest} characters |", "|---|---|---|---|---|"]
  for record, counts in counted:
    strings = counts["strings"]
    cells = [_run_label(record, rows), record["run"], str(strings)]
    cells += [f"{counts[key]} ({_percent([strings, counts[key]])}%)" for key in ("of_longest_length", "reversed_prefix")]
    lines.append("| " + " | ".join(cells) + " |")
  return "\n".join(lines)


def plot_extrapolation(rows, path: fs.PathLike) -> None:
  """Exact match against the source length, a line per run; a dashed line after the longest validation length."""
  figure = figures.figure(6.0, 3.6)
  ax = figure.add_subplot()
  longest_seen = max((n for _, by_split in rows for n in by_split.get("validation", {})), default=None)
  for record, by_split in rows:
    merged: dict[int, list[int]] = {}
    for counts in by_split.values():
      for n, (total, right) in counts.items():
        merged.setdefault(n, [0, 0])
        merged[n][0] += total
        merged[n][1] += right
    lengths = sorted(merged)
    ax.plot(lengths, [100.0 * merged[n][1] / merged[n][0] for n in lengths], "o-", markersize=3,
            label=_run_label(record, rows))
  if longest_seen is not None:
    ax.axvline(longest_seen + 0.5, color="gray", linestyle="--", linewidth=1)
  ax.set_xlabel("source length (characters); dashed: the longest training length")
  ax.set_ylabel("exact match (%)")
  ax.set_ylim(-2, 102)
  ax.grid(alpha=0.3)
  ax.legend(fontsize=7)
  ax.set_title("Position extrapolation: string reversal", fontsize=9)
  figures.write_png(figure, path)
