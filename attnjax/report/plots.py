"""PNG plots of the report: the headline metric against each ablation axis, validation curves."""

from __future__ import annotations

import math


from attnjax import fs
from attnjax.report import figures
from attnjax.report.runs import METRIC_TITLES

# ---------------------------------------------------------------------------------------------------------------------
# Plots


def plot_ablation(sweep: dict, path: fs.PathLike) -> None:
  """Headline metric against the sweep's points (x in launch order): a marker per run, a line through each point's
  mean; a point without a score is a gap with its state written at the bottom, never a 0."""
  metric = sweep["headline"]
  points = sweep["points"]
  figure = figures.figure(max(4.0, 1.0 + 0.9 * len(points)), 3.4)
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
  figures.write_png(figure, path)


def _curve_label(r: dict, records: list[dict]) -> str:
  """A run's name in its panel: its point, with its seed where several runs share the point."""
  point = r["point"] or r["run"]
  same = [x for x in records if (x["point"] or x["run"]) == point and x.get("sweep") == r.get("sweep")]
  if len(same) > 1:
    return f"{point} (seed {r['seed']})" if r.get("seed") is not None else r["run"]
  return point


def curve_panels(records: list[dict]) -> list[tuple[str, list[tuple[str, str | None, list, list]]]]:
  """``[(panel title, [(label, headline, metric curve, loss curve)])]``: one panel row per sweep of the experiment
  (runs outside a sweep together in the first), each run's validation headline metric and eval loss."""
  rows: dict[str, list] = {}
  for r in records:
    headline = r["headline"] or next((t[len("eval/"):] for t in ("eval/bleu", "eval/rougeL", "eval/f1")
                                      if t in r["eval_curves"]), None)
    metric = r["eval_curves"].get(f"eval/{headline}", [])
    loss = r["eval_curves"].get("eval/loss", [])
    if metric or loss:
      title = f"sweep {r['sweep']}" if r.get("sweep") else "runs"
      rows.setdefault(title, []).append((_curve_label(r, records), headline, metric, loss))
  return sorted(rows.items(), key=lambda item: (item[0] != "runs", item[0]))


def plot_curves(experiment_name: str, records: list[dict], path: fs.PathLike) -> bool:
  """Validation headline metric and eval loss against the step (from ``eval_curves``): a row of two panels per sweep
  (see :func:`curve_panels`), a line per run, the legend beside the row, outside the data. Writes nothing and
  returns False when no run of the group has either scalar."""
  panels = curve_panels(records)
  if not panels:
    return False
  longest = max(len(label) for _, series in panels for label, *_ in series)
  figure = figures.figure(8.0 + 0.07 * longest, 0.4 + 2.6 * len(panels))
  for row, (title, series) in enumerate(panels):
    left = figure.add_subplot(len(panels), 2, 2 * row + 1)
    right = figure.add_subplot(len(panels), 2, 2 * row + 2)
    colors = [f"C{i % 10}" for i in range(len(series))]
    styles = ["-", "--", ":", "-."]
    for i, (label, _, metric, loss) in enumerate(series):
      style = dict(color=colors[i], linestyle=styles[i // 10 % len(styles)], marker="o", markersize=3, label=label)
      if metric:
        left.plot([s for s, _ in metric], [v for _, v in metric], **style)
      if loss:
        right.plot([s for s, _ in loss], [v for _, v in loss], **style)
    headlines = sorted({h for _, h, m, _ in series if m and h})
    left.set_ylabel("validation " + "/".join(METRIC_TITLES.get(h, h) for h in headlines))
    right.set_ylabel("eval loss")
    left.set_title(title, fontsize=8, loc="left")
    for ax in (left, right):
      ax.set_xlabel("step")
      ax.grid(alpha=0.3)
    handles, labels = (right if right.lines else left).get_legend_handles_labels()
    right.legend(handles, labels, fontsize=7, loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0,
                 frameon=False)
  figure.suptitle(experiment_name, fontsize=9)
  figures.write_png(figure, path)
  return True
