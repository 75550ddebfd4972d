"""The scaling-law fit of the study: validation loss against model size, L(N) = (N_c / N)^α (Kaplan et al. 2020,
who report α ≈ 0.076 for language models trained to convergence, N the non-embedding parameters).

A sweep named ``size`` (``experiments/manythings_en_fr/transformer.py``) gives one run per model size. For each run:
N, the non-embedding parameters of the model its config builds (every parameter outside the token and position
embeddings, counted from the model's own parameter tree); L, its lowest validation NLL per target token among its
evaluations (the ``eval/nll`` curve, in nats; label smoothing left out). Runs still running, pending or failed are
left out, and so is a run whose model cannot be built here (reason logged): the section never fails the report.
Relative-position tables (Shaw's, T5's) count as non-embedding parameters. The fit is least squares of log L on log N:
log L = α log N_c − α log N, so α is minus the slope, with its standard error from the residuals (n − 2 degrees of
freedom) and N_c from the intercept.

Each size's table row also gives the local exponent from the size before it, −Δlog L / Δlog N: a power law keeps it
constant, and a fixed training budget shows up as it falling with N. When the loss stops falling before the largest
size, the section adds the fit over the sizes up to the lowest loss, the range where a law can hold, marked as a range
chosen after seeing the losses.
"""

from __future__ import annotations

import json
import math

import numpy as np
from absl import logging

from attnjax import fs
from attnjax.report import figures

SWEEP = "size"
QUOTED_ALPHA = 0.076  # Kaplan et al. 2020, eq. 1.1: L(N) = (N_c / N)^0.076, N_c = 8.8e13


def non_embedding_params(config: dict, *, embeddings: bool = False, vocab_size: int | None = None) -> int:
  """Parameters of ``config["model"]`` (a run's config.json) outside its embedding tables (all of them with
  ``embeddings=True``), counted on the model the config builds: a vocabulary of ``vocab_size`` (default
  ``data.vocab_size``), padded as training pads it (``data.vocab_multiple``)."""
  from attnjax.models.registry import count_params  # pylint: disable=g-import-not-at-top  (JAX only when counting)
  data = config.get("data") or {}
  vocab = int(vocab_size or data.get("vocab_size") or 8000)
  multiple = int(data.get("vocab_multiple") or 1)
  vocab = -(-vocab // multiple) * multiple
  key = json.dumps([config["model"], vocab, embeddings], sort_keys=True, default=str)
  if key not in _COUNTED:  # a sweep's runs share their shapes: each model is traced once per report
    _COUNTED[key] = count_params(dict(config["model"]), vocab, embeddings=embeddings)
  return _COUNTED[key]


_COUNTED: dict[str, int] = {}


def fit_power_law(n, loss) -> dict:
  """Least-squares fit of ``log loss = a + b log n``: ``{"alpha" (−b), "alpha_se", "intercept" (a), "n_c"
  (exp(a / α); inf where that overflows, as for a flat curve), "r2", "points"}``. Needs at least 3 points of distinct
  ``n`` (2 would leave no residual to estimate the error)."""
  x, y = np.log(np.asarray(n, np.float64)), np.log(np.asarray(loss, np.float64))
  if x.size < 3 or np.unique(x).size < 3:
    raise ValueError(f"fit_power_law: need at least 3 distinct sizes, got {np.unique(x).size}")
  xm, ym = x.mean(), y.mean()
  sxx = float(np.sum((x - xm) ** 2))
  slope = float(np.sum((x - xm) * (y - ym)) / sxx)
  intercept = ym - slope * xm
  residuals = y - (intercept + slope * x)
  dof = x.size - 2
  se = math.sqrt(float(np.sum(residuals ** 2)) / dof / sxx)
  total = float(np.sum((y - ym) ** 2))
  alpha = -slope
  try:
    n_c = math.exp(intercept / alpha) if alpha else math.inf
  except OverflowError:  # |α| tiny: the law's scale is beyond any number (the fitted line itself is fine)
    n_c = math.inf
  return {"alpha": alpha, "alpha_se": se, "intercept": float(intercept), "n_c": n_c,
          "r2": 1.0 - float(np.sum(residuals ** 2)) / total if total else 1.0, "points": int(x.size)}


def local_exponents(n, loss) -> list[float | None]:
  """−Δlog L / Δlog N from each size to the next larger (None for the smallest): the power law's α, locally."""
  x, y = np.log(np.asarray(n, np.float64)), np.log(np.asarray(loss, np.float64))
  return [None] + [float(-(y[i] - y[i - 1]) / (x[i] - x[i - 1])) if x[i] != x[i - 1] else None
                   for i in range(1, x.size)]


def falling_range(loss) -> int:
  """How many of the sizes (sorted by N) come before the loss stops falling: up to and including the lowest loss."""
  return int(np.argmin(np.asarray(loss, np.float64))) + 1


def _best_nll(record: dict) -> float | None:
  values = [v for _, v in record.get("eval_curves", {}).get("eval/nll", [])]
  return min(values) if values else None


def scaling_points(records: list[dict]) -> dict[str, list[dict]]:
  """``{experiment_name: [{"run", "point", "n", "loss", "steps"}]}`` for the runs of every ``size`` sweep that have a
  config and a validation NLL curve, sorted by N."""
  out: dict[str, list[dict]] = {}
  for r in records:
    if r.get("sweep") != SWEEP or not (r.get("config") or {}).get("model") or r.get("kind") == "lm":
      continue  # a language model's sweeps: attnjax.report.lm_scaling
    if r["state"] in ("running", "pending", "failed") or r["state"].startswith("unreadable"):
      continue
    loss = _best_nll(r)
    if loss is None:
      continue
    try:
      n = non_embedding_params(r["config"])
    except Exception as e:  # pylint: disable=broad-except  (an optional section: never the report's failure)
      logging.warning("scaling: %s: cannot count its parameters (%s: %s)", r["run"], type(e).__name__, e)
      continue
    out.setdefault(r["experiment_name"] or r["run"], []).append(
        {"run": r["run"], "point": r["point"], "n": n, "loss": loss,
         "steps": max((s for s, _ in r["eval_curves"]["eval/nll"]), default=None)})
  return {name: sorted(points, key=lambda p: p["n"]) for name, points in out.items()}


def scaling_section(name: str, points: list[dict], plot: str) -> str:
  """The markdown of one sweep: its points, then the fit (or why there is none)."""
  n, loss = [p["n"] for p in points], [p["loss"] for p in points]
  lines = [f"### {name}: sweep `{SWEEP}`", "", "| point | non-embedding parameters | best validation NLL | "
           "at step ≤ | α from the size before | run |", "|---|---|---|---|---|---|"]
  for p, local in zip(points, local_exponents(n, loss)):
    lines.append(f"| {p['point']} | {p['n']:,} | {p['loss']:.4f} | {p['steps']} | "
                 f"{'—' if local is None else f'{local:.3f}'} | {p['run']} |")
  lines.append("")
  try:
    fit = fit_power_law(n, loss)
  except ValueError as e:
    return "\n".join(lines + [f"No fit: {e}."])
  lines += [f"Fit of L(N) = (N_c / N)^α over {fit['points']} sizes spanning {n[-1] / n[0]:.0f}× in N: "
            f"**α = {fit['alpha']:.3f} ± {fit['alpha_se']:.3f}** (standard error), N_c = {fit['n_c']:.3g}, "
            f"R² = {fit['r2']:.3f}; the figure quoted for language models at convergence is α ≈ {QUOTED_ALPHA}."]
  k = falling_range(loss)
  if k < len(points) and k >= 3:
    head = fit_power_law(n[:k], loss[:k])
    lines += ["", f"The loss stops falling after {points[k - 1]['point']}: over the {k} sizes up to it "
              f"({n[k - 1] / n[0]:.0f}× in N; a range chosen after seeing the losses), α = {head['alpha']:.3f} ± "
              f"{head['alpha_se']:.3f}, N_c = {head['n_c']:.3g}, R² = {head['r2']:.3f}."]
  elif k < len(points):
    lines += ["", f"The loss stops falling after {points[k - 1]['point']}, too soon for a fit over the sizes up to it."]
  return "\n".join(lines + ["", f"![scaling]({plot})"])


def plot_scaling(name: str, points: list[dict], path: fs.PathLike) -> None:
  """Validation NLL against N on log-log axes, with the fitted line when there is one."""
  figure = figures.figure(5.0, 3.6)
  ax = figure.add_subplot()
  n = np.array([p["n"] for p in points], np.float64)
  loss = np.array([p["loss"] for p in points], np.float64)
  ax.loglog(n, loss, "o", label="runs")
  try:
    fit = fit_power_law(n, loss)
    grid = np.geomspace(n.min(), n.max(), 50)
    ax.loglog(grid, np.exp(fit["intercept"] - fit["alpha"] * np.log(grid)), "-",
              label=f"(N_c / N)^α, all sizes: α = {fit['alpha']:.3f} ± {fit['alpha_se']:.3f}")
    k = falling_range(loss)
    if 3 <= k < n.size:
      head = fit_power_law(n[:k], loss[:k])
      grid = np.geomspace(n.min(), n[k - 1], 50)
      ax.loglog(grid, np.exp(head["intercept"] - head["alpha"] * np.log(grid)), "--",
                label=f"up to the lowest loss ({k} sizes): α = {head['alpha']:.3f} ± {head['alpha_se']:.3f}")
  except ValueError:
    pass
  from matplotlib import ticker  # pylint: disable=g-import-not-at-top
  # the losses span less than a decade: plain numbers on the loss axis, not 1.2×10⁰
  ax.yaxis.set_major_formatter(ticker.FormatStrFormatter("%.2f"))
  ax.yaxis.set_minor_formatter(ticker.FormatStrFormatter("%.2f"))
  # the sizes label the parameter axis (0.35M, 1.39M, ...): log minor labels (3×10⁶) collide across a decade or two
  ax.xaxis.set_major_locator(ticker.FixedLocator(n))
  ax.xaxis.set_major_formatter(ticker.FuncFormatter(lambda x, _: f"{x / 1e6:.3g}M"))
  ax.xaxis.set_minor_formatter(ticker.NullFormatter())
  ax.tick_params(axis="x", labelsize=7)
  ax.set_xlabel("non-embedding parameters N")
  ax.set_ylabel("best validation NLL (nats / token)")
  ax.grid(alpha=0.3, which="both")
  ax.legend(fontsize=7)
  ax.set_title(f"{name}: loss against size", fontsize=9)
  figures.write_png(figure, path)
