"""PNG plots of the report: the headline metric against each ablation axis, validation curves."""

from __future__ import annotations

import io
import math


from attnjax import fs
from attnjax.report.runs import METRIC_TITLES

# ---------------------------------------------------------------------------------------------------------------------
# Plots


def _figure(width: float, height: float):
  """A figure on the Agg canvas: no pyplot (no global state, no display)."""
  from matplotlib.backends.backend_agg import FigureCanvasAgg  # pylint: disable=g-import-not-at-top
  from matplotlib.figure import Figure  # pylint: disable=g-import-not-at-top
  figure = Figure(figsize=(width, height), dpi=110)
  FigureCanvasAgg(figure)
  return figure


def _write_png(figure, path: fs.PathLike) -> None:
  buffer = io.BytesIO()
  figure.tight_layout()
  figure.savefig(buffer, format="png")  # into memory, then through attnjax.fs: matplotlib cannot open gs:// paths
  fs.write_bytes(path, buffer.getvalue())


def plot_ablation(sweep: dict, path: fs.PathLike) -> None:
  """Headline metric against the sweep's points (x in launch order): a marker per run, a line through each point's
  mean; a point without a score is a gap with its state written at the bottom, never a 0."""
  metric = sweep["headline"]
  points = sweep["points"]
  figure = _figure(max(4.0, 1.0 + 0.9 * len(points)), 3.4)
  ax = figure.add_subplot()
  means = []
  for x, point in enumerate(points):
    runs = [r for r in sweep["runs"] if (r["point"] or r["run"]) == point]
    values = [r["scores"][metric] for r in runs if r["state"] == "evaluated" and metric in r["scores"]]
    means.append(sum(values) / len(values) if values else math.nan)
    if values:
      ax.plot([x] * len(values), values, "o", color="tab:blue")
    else:
      states = sorted({r["state"] if r["state"] != "evaluated" else f"no {metric}" for r in runs})
      ax.text(x, 0.03, "\n".join(states), transform=ax.get_xaxis_transform(), ha="center", va="bottom",
              color="tab:red", fontsize=8)
  ax.plot(range(len(points)), means, "-", color="tab:blue", alpha=0.6)  # NaN breaks the line at a missing point
  ax.set_xticks(range(len(points)), points)
  ax.set_xlim(-0.5, len(points) - 0.5)
  ax.set_xlabel(f"sweep {sweep['sweep']}")
  ax.set_ylabel(METRIC_TITLES.get(metric, metric or "headline"))
  ax.set_title(f"{sweep['experiment_name']}: {sweep['sweep']}", fontsize=9)
  ax.grid(alpha=0.3)
  _write_png(figure, path)


def plot_curves(experiment_name: str, records: list[dict], path: fs.PathLike) -> bool:
  """Validation headline metric and eval loss against the step, a line per run (from ``eval_curves``). Writes
  nothing and returns False when no run of the group has either scalar."""
  points = [r["point"] or r["run"] for r in records]
  series = []
  for r, point in zip(records, points):
    headline = r["headline"] or next((t[len("eval/"):] for t in ("eval/bleu", "eval/rougeL", "eval/f1")
                                      if t in r["eval_curves"]), None)
    metric = r["eval_curves"].get(f"eval/{headline}", [])
    loss = r["eval_curves"].get("eval/loss", [])
    if metric or loss:
      series.append((point if points.count(point) == 1 else r["run"], headline, metric, loss))  # seeds: by run
  if not series:
    return False
  figure = _figure(9.0, 3.4)
  left, right = figure.add_subplot(1, 2, 1), figure.add_subplot(1, 2, 2)
  for name, _, metric, loss in series:
    if metric:
      left.plot([s for s, _ in metric], [v for _, v in metric], "o-", markersize=3, label=name)
    if loss:
      right.plot([s for s, _ in loss], [v for _, v in loss], "o-", markersize=3, label=name)
  headlines = sorted({h for _, h, m, _ in series if m and h})
  left.set_ylabel("validation " + "/".join(METRIC_TITLES.get(h, h) for h in headlines))
  right.set_ylabel("eval loss")
  for ax in (left, right):
    ax.set_xlabel("step")
    ax.grid(alpha=0.3)
    if ax.lines:
      ax.legend(fontsize=7)
  figure.suptitle(experiment_name, fontsize=9)
  _write_png(figure, path)
  return True
