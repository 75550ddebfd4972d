"""The markdown of the report: one table per task kind beside the seed's numbers, ablation tables."""

from __future__ import annotations

import datetime
import json
import math
import re
from typing import Any, Iterable

from absl import logging

from attnjax.report.runs import (
    HEADLINE, KINDS, KIND_METRICS, KIND_TITLES, LABEL_ORDER, METRIC_TITLES, NOT_COMPUTED, SEED_REPORTED, SUBSET_TASKS,
    TASK_KINDS, experiment_path)

# a point whose single run lands within this many headline points (BLEU, exact match %) of a neighbouring
# point's gets a second seed before the ordering of the two is read as a result; a headline on another scale has its
# own margin (a language model's bits per byte, about 2 here, moves by hundredths where BLEU moves by points)
SECOND_SEED_MARGIN = 1.0
SECOND_SEED_MARGINS = {"bits_per_byte": 0.01, "lm_loss": 0.01, "mlm_loss": 0.01}


def second_seed_margin(metric: str) -> float:
  """How close two points' headline ``metric`` may be on one run each before the pair wants a second seed."""
  return SECOND_SEED_MARGINS.get(metric, SECOND_SEED_MARGIN)

# ---------------------------------------------------------------------------------------------------------------------
# Markdown


def format_score(value: float) -> str:
  return f"{value:.2f}"


def format_seed(value: float) -> str:
  return f"{value:g}"  # as the paper printed it: 27.3, 25.16


def format_wall(seconds) -> str:
  """``h:mm`` (rounded to the minute), "—" if unknown."""
  if not isinstance(seconds, (int, float)) or isinstance(seconds, bool) or not math.isfinite(seconds):
    return "—"
  minutes = int(round(seconds / 60))
  return f"{minutes // 60}:{minutes % 60:02d}"


TIME_TITLE = "train (h:mm)"


def format_time(record: dict) -> str:
  """A run's training time: its newest checkpoint's bookkeeping, which adds up every launch of a resumed run
  (evaluations during training included; a warm-started run's clock includes its source's, up to the step it
  started from); without one, its last launch's wall time, marked "(wall)"."""
  if record.get("train_seconds"):
    return format_wall(record["train_seconds"])
  wall = format_wall(record.get("wall_seconds"))
  return wall if wall == "—" else f"{wall} (wall)"


def _format_millions(count: int | None) -> str:
  return "—" if count is None else f"{count / 1e6:.1f}M"


def _format_steps(record: dict) -> str:
  if record["state"] != "evaluated" or record["step"] is None:
    return "—"
  steps = record["steps"]
  if isinstance(steps, list) and len(steps) > 1:
    return f"{record['step']} (avg of {len(steps)})"  # averaged parameters (--average_last)
  return str(record["step"])


def _cell(record: dict, metric: str) -> str:
  """Our score (or why there is none), then the seed's reported score for that task, model and metric."""
  if record["state"] == "evaluated":
    value = record["scores"].get(metric)
    text = NOT_COMPUTED if value is None else format_score(value)
  else:
    text = record["state"]
  seed = SEED_REPORTED.get((record["task"], record["label"]), {}).get(metric)
  if seed is None:
    return text
  # a subset's published numbers are the full set's: named as such, never as the seed's claim for this split
  return f"{text} ({'full set' if record['task'] in SUBSET_TASKS else 'seed'} {format_seed(seed)})"


def _escape(text) -> str:
  return "—" if text is None or text == "" else str(text).replace("|", "\\|").replace("\n", " ")


def markdown_table(header: list[str], rows: list[list[str]]) -> str:
  lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
  lines.extend("| " + " | ".join(row) + " |" for row in rows)
  return "\n".join(lines)


def _start_key(record: dict) -> float:
  """Seconds since the epoch of launch.json's ``start`` (ISO-8601; a naive time is local), +inf if unknown."""
  start = record.get("start")
  if not start:
    return math.inf
  try:
    return datetime.datetime.fromisoformat(str(start).replace("Z", "+00:00")).timestamp()
  except ValueError:
    return math.inf


def _order(sequence: Iterable[str], canonical: Iterable[str]) -> list[str]:
  canonical = list(canonical)
  return sorted(set(sequence), key=lambda x: (canonical.index(x) if x in canonical else len(canonical), x))


def _in_table_order(records: list[dict]) -> list[dict]:
  """Rows by model (the seed tables' order), then task, then start and run path: the same order however the records
  were gathered (an archived run and a live one, a replay, sit where they belong)."""
  labels = _order((r["label"] or "" for r in records), LABEL_ORDER)
  tasks = _order((r["task"] or "" for r in records), TASK_KINDS)
  return sorted(records, key=lambda r: (labels.index(r["label"] or ""), tasks.index(r["task"] or ""), _start_key(r),
                                        r["run"]))


def _columns(kind: str, task: str, records: list[dict]) -> list[str]:
  """The metrics a task's column group shows: the kind's own that a run computed or the seed reports, in the seed
  tables' order (plus exact match for tasks scored by it, such as the synthetic ones)."""
  computed = {metric for r in records if r["task"] == task for metric in r["scores"]}
  reported = {metric for (t, _), values in SEED_REPORTED.items() if t == task for metric in values}
  metrics = [m for m in KIND_METRICS[kind] if m in computed | reported]
  if "exact_match" in computed and "exact_match" not in metrics:
    metrics.append("exact_match")
  return metrics or [HEADLINE[kind]]  # a table of runs that are all still running: show the headline column


def kind_table(kind: str, records: list[dict]) -> str:
  """The table of one task kind: a row per run (ordered by model, task, start), a column per (task, metric)."""
  records = [r for r in records if r["kind"] == kind and r["task"] and r["label"]]
  tasks = _order((r["task"] for r in records), TASK_KINDS)
  groups = [(task, _columns(kind, task, records)) for task in tasks]
  header = ["model", "split"] + [f"{task} {METRIC_TITLES.get(m, m)}" for task, metrics in groups for m in metrics]
  header += ["params", "steps", "train tok/s", TIME_TITLE, "hardware", "point", "run"]
  records = _in_table_order(records)
  rows = []
  for r in records:
    cells = [_escape(r["label"]), _escape(r.get("split"))]
    for task, metrics in groups:
      cells += [_escape(_cell(r, m)) if r["task"] == task else "" for m in metrics]
    cells += [_format_millions(r.get("parameters")), _format_steps(r),
              "—" if r.get("tokens_per_s") is None else f"{r['tokens_per_s']:.0f}", format_time(r),
              _escape(r["target"]), _escape(r["point"]), _escape(r["run"])]
    rows.append(cells)
  return markdown_table(header, rows)


def _flat(tree: dict, prefix: str = "") -> dict:
  out = {}
  for key, value in tree.items():
    if isinstance(value, dict):
      out.update(_flat(value, f"{prefix}{key}."))
    else:
      out[prefix + key] = value
  return out


def _sweep_definition(experiment: str | None, sweep: str) -> list[dict] | None:
  """The sweep's ``[{"name", "overrides"}]`` from its experiment file (:func:`attnjax.report.runs.experiment_path`: the same from any
  directory), or None when the file cannot be read (the report then keeps launch order and no stand-ins)."""
  if not experiment:
    return None
  from attnjax import config as config_lib  # pylint: disable=g-import-not-at-top  (the experiment imports JAX anyway)
  try:
    points = list(config_lib.experiment_module(experiment_path(experiment), "launch.json experiment").SWEEPS[sweep])
    return [{"name": p["name"], "overrides": json.loads(json.dumps(dict(p["overrides"])))} for p in points]
  except Exception as e:  # pylint: disable=broad-except  (a report of what is there, never its failure)
    logging.info("report: sweep %r of %s: its definition is not readable here (%s: %s); points in launch order",
                 sweep, experiment, type(e).__name__, e)
    return None


# How long a run trains, not what it trains: a run replayed to the step count its wall-clock budget reached
# (``--config.train.steps=771 --config.train.time_limit_minutes=0``) follows the same trajectory as the budgeted run
# (training is deterministic), so these keys do not keep it from standing in. Its steps column shows what it trained.
_LENGTH_KEYS = frozenset({"train.steps", "train.time_limit_minutes"})
# What is scored, not what is trained: a replay that adds METEOR to the metrics is the same model.
_SCORING_KEYS = frozenset({"eval.metrics", "eval.meteor_language"})


def _stand_ins(definition: list[dict], runs: list[dict], records: list[dict]) -> list[dict]:
  """Runs of the same experiment outside the sweep that trained one of its points' configs, counted for that point.

  A stand-in is evaluated and its config equals the sweep's own runs' outside the swept keys, the seed, the
  training length and what is scored (:data:`_LENGTH_KEYS`, :data:`_SCORING_KEYS`; on the keys both configs have), and the point's overrides at the swept keys;
  a point's own run with the same seed wins. So the experiment's default run stands in for the sweep point that is the
  default (4 heads, 3 layers, sinusoidal) instead of the same model being trained again."""
  swept = {key for point in definition for key in point["overrides"]} | _LENGTH_KEYS | _SCORING_KEYS
  reference = next((_flat(r["config"]) for r in runs if r["config"]), None)
  if reference is None:
    return []
  experiment, ids = runs[0]["experiment_name"], {id(r) for r in runs}
  found = []
  for point in definition:
    seeds = {r["seed"] for r in runs if (r["point"] or r["run"]) == point["name"]}
    for r in records:
      if (id(r) in ids or r["experiment_name"] != experiment or r["state"] != "evaluated" or not r["config"]
          or r["seed"] in seeds):
        continue
      config = _flat(r["config"])
      if any(config.get(key) != value for key, value in point["overrides"].items()):
        continue
      if any(config[key] != reference[key] for key in config.keys() & reference.keys() - swept - {"seed"}):
        continue
      seeds.add(r["seed"])
      found.append({**r, "point": point["name"], "overrides": point["overrides"], "status": "stand-in"})
  return found


def sweeps(records: list[dict]) -> list[dict[str, Any]]:
  """The ablation sweeps among ``records``: ``[{"experiment_name", "sweep", "headline", "points": [point, ...],
  "runs": [record, ...], "stand_ins": count, "plot": file name}]``.

  Points are in the order of the experiment file's sweep when the report can read it (``launch.json``'s path, from
  where the report runs), with :func:`_stand_ins` added; otherwise in launch order (each point's earliest ``start``)."""
  groups: dict[tuple[str, str], list[dict]] = {}
  for r in records:
    if r["sweep"]:
      groups.setdefault((r["experiment_name"] or r["experiment"] or "", r["sweep"]), []).append(r)
  names = [sweep for _, sweep in groups]
  found = []
  for (experiment, sweep), runs in sorted(groups.items()):
    runs = sorted(runs, key=lambda r: (_start_key(r), r["run"]))
    definition = _sweep_definition(next((r["experiment"] for r in runs if r["experiment"]), None), sweep)
    stand_ins = _stand_ins(definition, runs, records) if definition else []
    points = list(dict.fromkeys(r["point"] or r["run"] for r in runs + stand_ins))
    if definition:
      order = {p["name"]: i for i, p in enumerate(definition)}
      points.sort(key=lambda p: order.get(p, len(order)))
      runs = sorted(runs + stand_ins, key=lambda r: points.index(r["point"] or r["run"]))
    # ablation_<sweep>.png; a sweep name that two experiments share gets the experiment in its file name too
    stem = sweep if names.count(sweep) == 1 else f"{experiment}_{sweep}"
    found.append({"experiment_name": experiment, "sweep": sweep, "points": points, "runs": runs,
                  "stand_ins": len(stand_ins), "headline": next((r["headline"] for r in runs if r["headline"]), None),
                  "plot": f"ablation_{_slug(stem)}.png"})
  return found


def _overrides_text(overrides) -> str:
  if not overrides:
    return "—"
  return ", ".join(f"{key}={json.dumps(value)}" for key, value in overrides.items())


def common_eval_step(sweep: dict) -> int | None:
  """The last step at which every run of ``sweep`` with a validation curve of its headline metric was evaluated, or
  None when fewer than two runs have such a curve or they share no step.

  Arms with the same wall-clock budget reach different step counts when their steps cost different time, so the
  headline score mixes how well a configuration learns with how fast it runs; the score at a step every run reached
  separates the two."""
  tag = f"eval/{sweep['headline']}"
  steps = [{step for step, _ in r["eval_curves"][tag]} for r in sweep["runs"] if r.get("eval_curves", {}).get(tag)]
  if len(steps) < 2:
    return None
  shared = set.intersection(*steps)
  return max(shared) if shared else None


def _curve_value(record: dict, metric: str, step: int) -> float | None:
  """The run's validation ``metric`` at ``step`` (its ``eval/<metric>`` curve), or None when not evaluated there."""
  return dict(map(tuple, record.get("eval_curves", {}).get(f"eval/{metric}", []))).get(step)


def sweep_table(sweep: dict) -> str:
  """One sweep's table: a row per run in launch order, with the headline metric, budget and launch status, the
  training throughput, and the validation headline score at :func:`common_eval_step` when there is one."""
  metric = sweep["headline"]
  title = METRIC_TITLES.get(metric, "headline")
  at = common_eval_step(sweep)
  header = ["point", "overrides", title, "steps", "train tok/s"]
  header += [] if at is None else [f"validation {title} at step {at}"]
  header += [TIME_TITLE, "hardware", "status", "run"]
  rows = []
  for r in sweep["runs"]:
    if r["state"] != "evaluated":
      value = r["state"]
    elif metric in r["scores"]:
      value = format_score(r["scores"][metric])
    else:
      value = NOT_COMPUTED
    status = r["state"] if r["state"].startswith("unreadable") else (r["status"] or r["state"])
    row = [_escape(r["point"]), _escape(_overrides_text(r["overrides"])), _escape(value), _format_steps(r),
           "—" if r.get("tokens_per_s") is None else f"{r['tokens_per_s']:.0f}"]
    if at is not None:
      value = _curve_value(r, metric, at)
      row.append("—" if value is None else format_score(value))
    rows.append(row + [format_time(r), _escape(r["target"]), _escape(status), _escape(r["run"])])
  return markdown_table(header, rows)


def _mean_and_range(values: list[float]) -> list[str]:
  if not values:
    return ["—", "—"]
  spread = f"{format_score(min(values))}–{format_score(max(values))}" if len(values) > 1 else "—"
  return [format_score(sum(values) / len(values)), spread]


def seed_table(sweep: dict) -> str | None:
  """Each point's headline metric over its random seeds (mean, range, number of scored runs), or None when no point
  has two scored runs. The same point launched under two ``--runs`` roots counts as two runs too. When the sweep's
  runs share an evaluation step (:func:`common_eval_step`), the validation score there gets its mean and range too:
  the comparison at equal steps, over the same scored runs."""
  metric = sweep["headline"]
  at = common_eval_step(sweep)
  rows, repeated = [], False
  for point, values in _point_values(sweep):
    runs = [r for r in sweep["runs"] if (r["point"] or r["run"]) == point]
    seeds = sorted({str(r["seed"]) for r in runs if r["seed"] is not None})
    repeated |= len(values) > 1
    row = [_escape(point), ", ".join(seeds) or "—", str(len(values))] + _mean_and_range(values)
    if at is not None:
      values_at = [_curve_value(r, metric, at) for r in runs if r["state"] == "evaluated"]
      row += _mean_and_range([v for v in values_at if v is not None])
    rows.append(row)
  if not repeated:
    return None
  title = METRIC_TITLES.get(metric, "headline")
  header = ["point", "random seeds", "scored runs", f"{title} mean", f"{title} min–max"]
  if at is not None:
    header += [f"validation {title} at step {at} mean", f"validation {title} at step {at} min–max"]
  return markdown_table(header, rows)


def _point_values(sweep: dict) -> list[tuple[str, list[float]]]:
  metric = sweep["headline"]
  out = []
  for point in sweep["points"]:
    runs = [r for r in sweep["runs"] if (r["point"] or r["run"]) == point]
    out.append((point, [r["scores"][metric] for r in runs if r["state"] == "evaluated" and metric in r["scores"]]))
  return out


def second_seed_points(sweep: dict, margin: float | None = None) -> list[str]:
  """The points that want another seed by the study's rule: a point scored by a single run whose mean headline score is
  within ``margin`` (default: :func:`second_seed_margin` of the sweep's headline) of a neighbouring point's (the next
  or previous in the sweep's order, among scored points).

  A one-run difference that small is within what a change of seed moves, so the ordering it suggests is not evidence
  until both points have a second run."""
  margin = second_seed_margin(sweep["headline"]) if margin is None else margin
  scored = [(point, sum(v) / len(v), len(v)) for point, v in _point_values(sweep) if v]
  wanted = []
  for i, (point, mean, n) in enumerate(scored):
    neighbours = scored[max(i - 1, 0):i] + scored[i + 1:i + 2]
    if n == 1 and any(abs(mean - other) < margin for _, other, _ in neighbours):
      wanted.append(point)
  return wanted


def curve_groups(records: list[dict]) -> dict[str, list[dict]]:
  """Runs by experiment (``experiment_name``; for a run without launch.json, task and model), for the curve plots."""
  groups: dict[str, list[dict]] = {}
  for r in records:
    name = r["experiment_name"] or (f"{r['task']}/{r['label']}" if r["task"] and r["label"] else r["run"])
    groups.setdefault(name, []).append(r)
  return groups


def _slug(name: str) -> str:
  return re.sub(r"[^A-Za-z0-9._-]+", "_", name.replace("/", "_")).strip("_") or "unnamed"


def curves_file(experiment_name: str) -> str:
  return f"curves_{_slug(experiment_name)}.png"


def other_splits_table(records: list[dict]) -> str | None:
  """A row per (run, split) for the splits evaluated besides the one the kind tables show, or None."""
  rows = []
  for r in _in_table_order([r for r in records if r.get("other_splits")]):
    for split, scores in sorted(r["other_splits"].items()):
      metrics = [m for m in KIND_METRICS.get(r["kind"], ()) if m in scores]
      rows.append([_escape(r["label"]), _escape(split),
                   ", ".join(f"{METRIC_TITLES.get(m, m)} {format_score(scores[m])}" for m in metrics) or "—",
                   _escape(r["run"])])
  return markdown_table(["model", "split", "scores", "run"], rows) if rows else None


def render_markdown(records: list[dict], *, plots: dict[str, str] | None = None, roots: Iterable[str] = (),
                    sections: Iterable[str] = ()) -> str:
  """``results.md``: the kind tables, the ablation tables (with their plots) and the runs no table could place.

  Args:
    records: :func:`read_run` records.
    plots: PNG file name -> title, for the plots written next to results.md (linked from it).
    roots: the ``--runs`` entries, named in the preamble.
    sections: further markdown sections, placed after the kind tables (BLEU by source length).
  """
  plots = plots or {}
  lines = ["# Results", ""]
  if roots:
    lines += [f"{len(records)} run{'s' if len(records) != 1 else ''} from {', '.join(f'`{r}`' for r in roots)}.", ""]
  archives = sorted({r["archived"] for r in records if r.get("archived")})
  if archives:
    count = sum(bool(r.get("archived")) for r in records)
    lines += [f"{count} of them as {', '.join(f'`{a}`' for a in archives)} recorded them (an earlier report, whose "
              "runs' workdirs are gone): their scores, curves and per-length results are reported again, not "
              "recomputed.", ""]
  replays = [r["run"] for r in records if r.get("replay_of")]
  if replays:
    lines += [f"{len(replays)} run{'s' if len(replays) != 1 else ''} replayed from the same seed to the step count the "
              "archived run trained, reproducing every archived score exactly: the replay's scores (with those the "
              "archive lacked) beside the archived run's throughput and wall time, which are the budget's: "
              f"{', '.join(f'`{run}`' for run in replays)}.", ""]
  damaged = [(r["run"], e) for r in records for e in r.get("checkpoints_set_aside") or []]
  if damaged:
    lines += [f"{len(damaged)} damaged checkpoint step{'s' if len(damaged) != 1 else ''} set aside by a restart "
              "(`checkpoints.unreadable/set_aside.json`): "
              + "; ".join(f"`{run}` step {e.get('step')} ({e.get('file') or 'a file of the step'}: {e.get('reason')}; "
                          f"the run then {e.get('then')})" for run, e in damaged) + ".", ""]
  lines += ["Each cell: our score on the run's evaluated split (column `split`, `metrics.<split>.json`: `test`, or "
            "`validation` for a task without a test split or a sweep selected on validation), then in parentheses the "
            "seed study's reported score where it reports one. A run without a score says why: `running`, `pending`, "
            "`failed`, `no evaluation` (finished, no metrics file) or `unreadable: <file>`; "
            f"`{NOT_COMPUTED}` is a metric the run's evaluation did not compute. Budget: steps of the evaluated "
            "checkpoint, wall time of the launch, hardware target, sweep point.", ""]
  for kind in KINDS:
    if any(r["kind"] == kind and r["task"] and r["label"] for r in records):
      lines += [f"## {KIND_TITLES[kind]}", "", kind_table(kind, records), ""]
  others_table = other_splits_table(records)
  if others_table:
    lines += ["## Other evaluated splits", "", others_table, ""]
  for section in sections:
    lines += [section.rstrip("\n"), ""]
  found = sweeps(records)
  if found:
    lines += ["## Ablations", ""]
    for sweep in found:
      lines += [f"### {sweep['experiment_name']}: sweep `{sweep['sweep']}`", "",
                f"Points: {', '.join(sweep['points'])}.", "", sweep_table(sweep), ""]
      at = common_eval_step(sweep)
      if at is not None:
        lines += [f"The validation column is each run's score at step {at}, the last evaluation every run reached: "
                  "under one wall-clock budget a slower configuration trains fewer steps, and this column compares "
                  "the points at equal steps.", ""]
      if sweep["stand_ins"]:
        lines += ["A `stand-in` row is a run of the same experiment outside this sweep whose config is the point's (the "
                  "sweep's config with the point's values, seed aside): it counts for the point instead of the same "
                  "model being trained again.", ""]
      by_seed = seed_table(sweep)
      if by_seed:
        lines += ["Over random seeds (the runs above, by point):", "", by_seed, ""]
      wanted = second_seed_points(sweep)
      if wanted:
        metric = sweep["headline"]
        lines += [f"Within {second_seed_margin(metric):g} {METRIC_TITLES.get(metric, metric)} of a neighbouring point "
                  f"on one run, so wanting another seed before the ordering counts: {', '.join(wanted)}.", ""]
      if sweep["plot"] in plots:
        lines += [f"![{sweep['sweep']}]({sweep['plot']})", ""]
  curve_plots = [(name, title) for name, title in plots.items() if name.startswith("curves_")]
  if curve_plots:
    lines += ["## Training curves", ""]
    for name, title in curve_plots:
      lines += [f"![{title}]({name})", ""]
  others = [r for r in records if not (r["kind"] and r["task"] and r["label"])]
  if others:
    lines += ["## Runs not placed in a table", "", "Task or model unknown (no readable config.json).", "",
              markdown_table(["run", "experiment", "point", "state"],
                     [[_escape(r["run"]), _escape(r["experiment_name"]), _escape(r["point"]), _escape(r["state"])]
                      for r in others]), ""]
  return "\n".join(lines).rstrip("\n") + "\n"
