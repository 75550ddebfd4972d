"""Masked-LM pre-training in the report: what each run reached on held-out text against the tokens it had seen, beside
what token frequencies alone reach.

Every masked-LM run (kind ``mlm``) that was scored gets a row: the budget it was given
(``train.time_limit_minutes``), the training time (summed over restarts) and steps of its scored checkpoint (its
best), the tokens it had seen there (steps x rows x row length: every position of a row is read, masked or not), and
its scored split's MLM loss and accuracy beside token frequencies' on the same rows (``context_free_mlm_*`` in its
metrics, written by the evaluation): a loss below theirs is a model that uses the context.

The figure draws the held-out curves written during training (``eval/mlm_loss`` and ``eval/mlm_accuracy``, on the
validation rows) against tokens seen, a line per run, and each run's frequency baseline as a dashed line of its
colour: on the validation rows where the run was also scored on them (``metrics.validation.json``), else on its
scored split's rows (also held-out articles; the legend says which).

A run of the budget recipe on Wikipedia (``wikipedia_mlm``, ``train.schedule="budget_linear"``) is held to its
goals: held-out loss at most :data:`GOAL_LOSS` nats and accuracy at least :data:`GOAL_ACCURACY`, where BERT's own
recipe reached 6.99 and 10.4% in four hours of this machine.
"""

from __future__ import annotations

from absl import logging

from attnjax import fs
from attnjax.report import figures
from attnjax.report.runs import checkpoint_seconds
from attnjax.report.tables import format_wall, markdown_table

GOAL_LOSS = 5.0
GOAL_ACCURACY = 0.25
GOAL_TASKS = ("wikipedia_mlm",)
GOAL_SCHEDULE = "budget_linear"  # the budget recipe's (experiments/wikipedia/bert_mlm_budget.py)
FIGURE = "pretraining_curves.png"


def tokens_per_step(record: dict) -> int:
  """Rows x row length of a masked-LM run's steps (0 where the config does not say)."""
  data = (record.get("config") or {}).get("data") or {}
  return int(data.get("batch_size") or 0) * int(data.get("seq_len") or 0)


def _baseline(metrics: dict | None) -> tuple[float, float] | None:
  """``(loss, accuracy)`` of token frequencies alone, as the evaluation wrote them, or None."""
  metrics = metrics or {}
  loss, accuracy = metrics.get("context_free_mlm_loss"), metrics.get("context_free_mlm_accuracy")
  return None if loss is None or accuracy is None else (float(loss), float(accuracy))


def curve_baseline(record: dict) -> tuple[str, tuple[float, float]] | None:
  """``(split, (loss, accuracy))``: the frequency baseline the curves stand beside (see the module docstring)."""
  path = fs.join(record["workdir"], "metrics.validation.json")
  if fs.exists(path):
    try:
      found = _baseline(fs.read_json(path))
    except ValueError as e:
      logging.warning("pretraining: %s is not JSON (%s): the curves stand beside the scored split's baseline", path, e)
      found = None
    if found is not None:
      return "validation", found
  found = _baseline(record.get("metrics"))
  return (record.get("split"), found) if found is not None else None


def mlm_runs(records: list[dict]) -> list[dict]:
  """The scored masked-LM runs, in the report's order."""
  return [r for r in records if r.get("kind") == "mlm" and (r.get("scores") or {}).get("mlm_loss") is not None]


def _goal_lines(record: dict) -> list[str]:
  scores = record["scores"]
  loss, accuracy = scores["mlm_loss"], scores.get("mlm_accuracy")
  out = [f"- Goal: {record['run']} reaches held-out MLM loss at most {GOAL_LOSS:.1f} nats: "
         f"{'met' if loss <= GOAL_LOSS else 'missed'} ({loss:.3f} on {record['split']})."]
  if accuracy is not None:
    out.append(f"- Goal: {record['run']} reaches held-out MLM accuracy at least {100 * GOAL_ACCURACY:.0f}%: "
               f"{'met' if accuracy >= GOAL_ACCURACY else 'missed'} ({100 * accuracy:.1f}% on {record['split']}).")
  return out


def plot_pretraining(runs: list[dict], path: fs.PathLike) -> bool:
  """Held-out MLM loss and accuracy against tokens seen (millions), a line per run, each run's frequency baseline
  dashed in its colour. Writes nothing and returns False when no run has a curve."""
  series = [(r, (r.get("eval_curves") or {}).get("eval/mlm_loss", []),
             (r.get("eval_curves") or {}).get("eval/mlm_accuracy", [])) for r in runs]
  series = [(r, loss, accuracy) for r, loss, accuracy in series if (loss or accuracy) and tokens_per_step(r)]
  if not series:
    return False
  figure = figures.figure(9.5, 3.4)
  left, right = figure.add_subplot(1, 2, 1), figure.add_subplot(1, 2, 2)
  for i, (r, loss, accuracy) in enumerate(series):
    color, scale = f"C{i % 10}", tokens_per_step(r) / 1e6
    if loss:
      left.plot([s * scale for s, _ in loss], [v for _, v in loss], "o-", ms=3, color=color, label=r["run"])
    if accuracy:
      right.plot([s * scale for s, _ in accuracy], [100 * v for _, v in accuracy], "o-", ms=3, color=color,
                 label=r["run"])
    found = curve_baseline(r)
    if found is not None:
      split, (base_loss, base_accuracy) = found
      label = f"token frequencies ({split} rows)"
      left.axhline(base_loss, color=color, linestyle="--", linewidth=1, label=label)
      right.axhline(100 * base_accuracy, color=color, linestyle="--", linewidth=1, label=label)
  left.set_ylabel("held-out MLM loss (nats)")
  right.set_ylabel("held-out MLM accuracy (%)")
  for ax in (left, right):
    ax.set_xlabel("tokens seen (millions)")
    ax.grid(alpha=0.3)
  right.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0, frameon=False)
  figures.write_png(figure, path)
  return True


def pretraining_section(records: list[dict], out: fs.PathLike) -> str | None:
  """The markdown of the masked-LM pre-training section (and its figure in ``out``), or None without a scored run."""
  runs = mlm_runs(records)
  if not runs:
    return None
  rows, goals = [], []
  for r in runs:
    scores, baseline = r["scores"], _baseline(r.get("metrics"))
    step = r.get("step") or r.get("trained_step")
    budget = ((r.get("config") or {}).get("train") or {}).get("time_limit_minutes")
    tokens = (step or 0) * tokens_per_step(r)
    seconds = (checkpoint_seconds(r["workdir"], step) if step else None) or r.get("train_seconds")
    rows.append([r["run"], f"{budget:g} min" if budget else "—", format_wall(seconds),
                 "—" if step is None else f"{step:,}", f"{tokens / 1e6:.1f}M" if tokens else "—", r["split"],
                 f"{scores['mlm_loss']:.3f}",
                 "—" if scores.get("mlm_accuracy") is None else f"{100 * scores['mlm_accuracy']:.1f}%",
                 "—" if baseline is None else f"{baseline[0]:.3f}",
                 "—" if baseline is None else f"{100 * baseline[1]:.1f}%"])
    if r.get("task") in GOAL_TASKS and ((r.get("config") or {}).get("train") or {}).get("schedule") == GOAL_SCHEDULE:
      goals += _goal_lines(r)
  table = markdown_table(["run", "budget", "trained (h:mm)", "steps", "tokens seen", "split", "MLM loss",
                          "MLM accuracy", "frequencies: loss", "frequencies: accuracy"], rows)
  text = ("## Pre-training curves: held-out masked-LM loss against tokens seen\n\nEach masked-LM run's scored split "
          "(held-out articles), at its best checkpoint, beside token frequencies alone on the same rows; the figure "
          "draws the validation curves written during training against tokens seen, the frequencies dashed "
          f"(`attnjax/report/pretraining.py`).\n\n{table}")
  text += "\n\n" + "\n".join(goals) if goals else ""
  if plot_pretraining(runs, fs.join(out, FIGURE)):
    text += f"\n\n![masked-LM pre-training]({FIGURE})"
  return text
