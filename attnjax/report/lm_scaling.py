"""The scaling laws of a language model, measured as Kaplan et al. (2020) did, read from an LM experiment's sweeps
(``experiments/wikipedia/lm.py``); and its position extrapolation.

Three laws, each a least-squares line of log L on log x, L in nats per token on the validation split (the
``eval/nll`` curve of the runs; lower is better):

* **L(N)**, sweep ``size``: N the non-embedding parameters (:func:`attnjax.report.scaling.non_embedding_params`),
  L each run's best validation loss. Kaplan et al. report α_N = 0.076.
* **L(D)**, sweep ``data``: D the training tokens (``data.train_tokens``, the rows cut to about that many), L the best
  validation loss, i.e. early stopping (``train.patience`` stops a run once it no longer improves). The epochs a
  point had taken at its best evaluation are counted. Kaplan et al. report α_D = 0.095.
* **L(C_min)**, from the ``size`` runs' learning curves: each evaluation is a point at compute C = 6·N·(tokens
  trained), in PF-days as in Kaplan et al. (8.64e19 FLOPs); evaluations inside the learning-rate warm-up are left
  out (the loss there is the schedule's, not the model's). The compute-efficient frontier keeps the points with a
  lower loss than every point of less compute, whichever model; L(C_min) is the fit over them. Kaplan et al. report
  α_C = 0.050 for this frontier (their C_min also corrects for the batch size, which is fixed here).

* **L(N, D)**, both sweeps in Kaplan et al.'s eq. (1.5), L = [(N_c/N)^(α_N/α_D) + D_c/D]^α_D: each ``size`` run
  at its N and the D it trained on, each ``data`` run at its model's N and its D; fitted by least squares in log L
  (several starts). Each exponent's error is the larger of a bootstrap over the points and the residuals' (through
  the fit's Jacobian), judged as the single laws' are (R² of log L ≥ 0.95, error ≤ 0.01). L(N) alone is measured at
  one D, where the larger models are limited by the data as much as by their size; this fit separates the two and
  gives α_N and α_D of the law that holds at every N and D. The ``size`` runs train one epoch of their D rather
  than to early stopping, so their D term also carries that step limit. The law falls as D grows at fixed N; the
  report names each point with more data but a higher loss than others at its N, which no such law can fit, and
  the tokens each trained on.

A ``data`` point whose best evaluation is its run's last is marked: the step cap, not the data, may have ended it.
The frontier's points that are a run's last evaluation are counted: the learning rate decays to 0 at a run's end, so
those points are annealed where the others are not.

Each fit gives α with two standard errors: the bootstrap one (2,000 resamples with replacement, a fixed seed,
resamples with fewer than three distinct x left out; the points for N and D, the runs for the frontier, whose
neighbouring points are evaluations of one run) and the residuals' (n − 2 degrees of freedom). The larger of the two
is the error stated and judged: with few points, resampling sees few distinct sets (with three, only their order).
The local exponent between neighbouring points, −Δlog L / Δlog x, shows where a law bends. When the fit over all
points misses R² ≥ 0.95, the section also fits the widest run of neighbouring points (at least three, falling) where
it holds, marked as a range chosen after seeing the losses. The goal: each law over at least 30× in x, with R² ≥
0.95 and a standard error ≤ 0.01. Only runs their launcher marked done (or run without one) count.

Position extrapolation, sweep ``positional``: each run's validation loss over the positions of rows longer than its
training rows (``python -m attnjax.evaluate --eval seq_len=N``, written to ``metrics.validation.len<N>.json``), per
range of positions: [0, T), [T, 2T), [2T, 4T) for training rows of T tokens, and the longer rows' loss minus the
training-length rows' over the same tokens. The sinusoidal claim holds when that difference is at most 0 for the
sinusoidal model, and holds in part when it is above 0 but the model still beats learned positions beyond T.
"""

from __future__ import annotations

import json
import math

import numpy as np
from absl import logging

from attnjax import fs
from attnjax.report import figures
from attnjax.report.scaling import fit_power_law, local_exponents, non_embedding_params

QUOTED = {"N": 0.076, "D": 0.095, "C": 0.050}  # Kaplan et al. 2020, eqs. 1.1-1.3 (and the seed study)
GOAL = {"span": 30.0, "r2": 0.95, "se": 0.01}
PF_DAY = 8.64e19
BOOTSTRAP = 2000
SWEEPS = {"N": "size", "D": "data"}


def bootstrap_se(x, loss, *, samples: int = BOOTSTRAP, seed: int = 0) -> float | None:
  """The standard deviation of α over fits to the points resampled with replacement (None below 3 points)."""
  x, loss = np.asarray(x, np.float64), np.asarray(loss, np.float64)
  if x.size < 3:
    return None
  rng = np.random.default_rng(seed)
  alphas = []
  for _ in range(samples):
    pick = rng.integers(0, x.size, x.size)
    if np.unique(x[pick]).size >= 3:
      alphas.append(fit_power_law(x[pick], loss[pick])["alpha"])
  return float(np.std(alphas, ddof=1)) if len(alphas) > 1 else None


def frontier_bootstrap_se(curves: list[dict], lo: float, hi: float, *, samples: int = BOOTSTRAP,
                          seed: int = 0) -> float | None:
  """For the compute frontier, whose neighbouring points are evaluations of one run and not independent: the
  standard deviation of α over the frontiers of the runs resampled with replacement, each fitted over [lo, hi]."""
  runs = sorted({p["run"] for p in curves})
  by_run = {run: [p for p in curves if p["run"] == run] for run in runs}
  rng = np.random.default_rng(seed)
  alphas = []
  for _ in range(samples):
    picked = [p for i in rng.integers(0, len(runs), len(runs)) for p in by_run[runs[i]]]
    kept = [p for p in frontier(picked) if lo <= p["x"] <= hi]
    if len({p["x"] for p in kept}) >= 3:
      alphas.append(fit_power_law([p["x"] for p in kept], [p["loss"] for p in kept])["alpha"])
  return float(np.std(alphas, ddof=1)) if len(alphas) > 1 else None


POINTS = "points"  # fit_law's bootstrap: resample the fitted points themselves


def fit_law(x, loss, *, bootstrap: float | str | None = POINTS) -> dict | None:
  """:func:`fit_power_law` plus ``alpha_bootstrap_se`` (the points resampled, or the one ``bootstrap`` gives, which
  may be None: no bootstrap error, never the points' in its place),
  ``alpha_error`` (the larger of it and the residuals' standard error: with few points resampling sees too few
  distinct sets, and with three only their order) and ``span`` (largest x / smallest); None below 3 distinct x."""
  try:
    fit = fit_power_law(x, loss)
  except ValueError:
    return None
  boot = bootstrap_se(x, loss) if bootstrap == POINTS else bootstrap
  return {**fit, "alpha_bootstrap_se": boot, "alpha_error": max(fit["alpha_se"], boot or 0.0),
          "span": float(max(x) / min(x))}


def holding_range(x, loss, *, r2: float = GOAL["r2"]) -> tuple[int, int] | None:
  """``(i, j)``: the neighbouring points ``x[i:j]`` (at least 3) spanning the largest ratio in x whose fit falls
  (α > 0) with R² ≥ ``r2``; None when no such run exists."""
  best = None
  for i in range(len(x)):
    for j in range(i + 3, len(x) + 1):
      if len(set(x[i:j])) < 3:
        continue
      fit = fit_power_law(x[i:j], loss[i:j])
      if fit["alpha"] > 0 and fit["r2"] >= r2 and (best is None or x[j - 1] / x[i] > x[best[1] - 1] / x[best[0]]):
        best = (i, j)
  return best


def meets_goal(fit: dict | None) -> bool:
  return (bool(fit) and fit["span"] >= GOAL["span"] and fit["r2"] >= GOAL["r2"]
          and fit["alpha_error"] <= GOAL["se"])


def _joint_log_loss(theta, log_n, log_d):
  """log L of Kaplan et al.'s eq. (1.5) at θ = (α_N, α_D, log N_c, log D_c)."""
  alpha_n, alpha_d, log_nc, log_dc = theta
  return alpha_d * np.logaddexp(alpha_n / alpha_d * (log_nc - log_n), log_dc - log_d)


def _joint_jacobian(theta, log_n, log_d):
  """∂ log L / ∂θ of :func:`_joint_log_loss`, [points, 4]: with a = (α_N/α_D)(log N_c − log N), b = log D_c − log D
  and w = σ(a − b), the derivatives by α_N, α_D, log N_c and log D_c are w (log N_c − log N), logaddexp(a, b) − w a,
  w α_N and α_D (1 − w)."""
  alpha_n, alpha_d, log_nc, log_dc = theta
  a, b = alpha_n / alpha_d * (log_nc - log_n), log_dc - log_d
  w = 0.5 * (1.0 + np.tanh(0.5 * (a - b)))  # σ(a − b) without overflow
  return np.stack([w * (log_nc - log_n), np.logaddexp(a, b) - w * a, w * alpha_n, alpha_d * (1.0 - w)], axis=-1)


def _joint_least_squares(log_n, log_d, log_loss, starts):
  """The least-squares result (scipy's) of eq. (1.5) in log L from the best of ``starts``; None if none converged."""
  from scipy import optimize  # pylint: disable=g-import-not-at-top
  best = None
  for start in starts:
    try:
      result = optimize.least_squares(lambda t: _joint_log_loss(t, log_n, log_d) - log_loss, start,
                                      jac=lambda t: _joint_jacobian(t, log_n, log_d),
                                      bounds=([1e-3, 1e-3, -50.0, -50.0], [3.0, 3.0, 120.0, 120.0]))
    except ValueError:
      continue
    if np.all(np.isfinite(result.x)) and (best is None or result.cost < best.cost):
      best = result
  return best


JOINT_STARTS = [(a_n, a_d, log_nc, log_dc) for a_n in (0.05, 0.1, 0.3) for a_d in (0.05, 0.1, 0.3)
                for log_nc in (np.log(1e8), np.log(1e11), np.log(1e14))
                for log_dc in (np.log(1e9), np.log(1e12), np.log(1e14))]


def enough_for_joint(n, d) -> bool:
  """Eq. (1.5) has 4 parameters: at least 6 points, 5 distinct (N, D) pairs, 3 distinct N and 3 distinct D."""
  pairs = {(float(a), float(b)) for a, b in zip(n, d)}
  return len(n) >= 6 and len(pairs) >= 5 and len({a for a, _ in pairs}) >= 3 and len({b for _, b in pairs}) >= 3


def fit_joint(n, d, loss, *, samples: int = BOOTSTRAP, seed: int = 0) -> dict | None:
  """Kaplan et al.'s L(N, D) = [(N_c/N)^(α_N/α_D) + D_c/D]^α_D by least squares in log L, from several starts.

  Returns ``{"alpha_n", "alpha_d", "n_c", "d_c", "rms"`` (of the log residuals), ``"r2"`` (of log L), ``"points"``,
  and for each exponent ``"<alpha>_bootstrap_se"`` (resampled points, each refit from the fit and one other start;
  None with fewer than 50 resamples that fit), ``"<alpha>_residual_se"`` (from the Jacobian: the residuals' variance
  over n − 4 times (JᵀJ)⁻¹) and ``"<alpha>_error"``, the larger of the two}``; None without enough points
  (:func:`enough_for_joint`) or when no start converges."""
  log_n, log_d = np.log(np.asarray(n, np.float64)), np.log(np.asarray(d, np.float64))
  log_loss = np.log(np.asarray(loss, np.float64))
  if not enough_for_joint(n, d) or not np.all(np.isfinite(log_loss)):
    return None
  best = _joint_least_squares(log_n, log_d, log_loss, JOINT_STARTS)
  if best is None:
    return None
  theta = best.x
  residuals = _joint_log_loss(theta, log_n, log_d) - log_loss
  dof = log_n.size - 4
  try:
    covariance = np.linalg.inv(best.jac.T @ best.jac) * float(np.sum(residuals ** 2)) / dof
    residual_se = np.sqrt(np.clip(np.diag(covariance)[:2], 0.0, None))
  except np.linalg.LinAlgError:  # a flat direction: the exponents are not determined
    residual_se = np.full(2, np.inf)
  rng = np.random.default_rng(seed)
  draws = []
  for _ in range(samples):
    pick = rng.integers(0, log_n.size, log_n.size)
    if enough_for_joint(log_n[pick], log_d[pick]):
      refit = _joint_least_squares(log_n[pick], log_d[pick], log_loss[pick], [theta, (0.1, 0.1, np.log(1e11),
                                                                                       np.log(1e12))])
      if refit is not None:
        draws.append(refit.x[:2])
  boot = np.std(draws, axis=0, ddof=1) if len(draws) >= 50 else None
  total = float(np.sum((log_loss - log_loss.mean()) ** 2))
  out = {"alpha_n": float(theta[0]), "alpha_d": float(theta[1]), "n_c": float(np.exp(theta[2])),
         "d_c": float(np.exp(theta[3])), "rms": float(np.sqrt(np.mean(residuals ** 2))),
         "r2": 1.0 - float(np.sum(residuals ** 2)) / total if total else 1.0, "points": int(log_n.size)}
  for i, key in enumerate(("alpha_n", "alpha_d")):
    out[f"{key}_bootstrap_se"] = None if boot is None else float(boot[i])
    out[f"{key}_residual_se"] = float(residual_se[i])
    out[f"{key}_error"] = max(float(residual_se[i]), 0.0 if boot is None else float(boot[i]))
  return out


def joint_points(laws: dict) -> list[dict]:
  """The points of L(N, D): each ``size`` point at (its N, the tokens it trained on), each ``data`` point at (its
  model's N, its D)."""
  return ([{"point": p["point"], "n": p["x"], "d": p["d"], "loss": p["loss"], "tokens": p.get("tokens")}
           for p in laws["N"]]
          + [{"point": p["point"], "n": p["n"], "d": p["x"], "loss": p["loss"], "tokens": p.get("tokens")}
             for p in laws["D"]])


def joint_contradictions(points: list[dict]) -> list[tuple[dict, dict]]:
  """The pairs (a, b) of points at one N where a has more data but the higher loss. Eq. (1.5) falls as D grows at
  fixed N, so it cannot pass through both: such a pair says the two sweeps' points are not of one law (one run
  limited by its steps, the other by its data)."""
  return [(a, b) for a in points for b in points
          if a is not b and a["n"] == b["n"] and a["d"] > b["d"] and a["loss"] > b["loss"]]


def _contradiction_texts(pairs: list[tuple[dict, dict]]) -> list[str]:
  """One sentence per point with more data and a higher loss than others at its N."""
  def described(p):
    tokens = "" if p.get("tokens") is None else f", {p['tokens'] / 1e6:.1f}M tokens trained at its best"
    return f"{p['point']} (D = {p['d'] / 1e6:g}M{tokens}, loss {p['loss']:.4f})"

  texts = []
  for a in {id(a): a for a, _ in pairs}.values():
    below = [b for x, b in pairs if x is a]
    text = (f"At N = {a['n']:,}, {described(a)} is above {' and '.join(described(b) for b in below)}, with less "
            "data: eq. (1.5) falls as D grows at fixed N, so it cannot fit them all.")
    if all(a.get("tokens") is not None and b.get("tokens") is not None and a["tokens"] < b["tokens"] for b in below):
      text += (f" {a['point']} trained on fewer tokens than each of them: its loss is limited by its steps, not "
               "its data.")
    texts.append(text)
  return texts


def joint_section(points: list[dict]) -> tuple[str, dict | None]:
  n, d, loss = [p["n"] for p in points], [p["d"] for p in points], [p["loss"] for p in points]
  lines = ["### L(N, D): both sweeps in one law", ""]
  if not enough_for_joint(n, d):
    return "\n".join(lines + [f"No fit: {len(points)} point(s); eq. (1.5) has 4 parameters and needs 6 points, "
                                "5 distinct (N, D), 3 distinct N and 3 distinct D.", ""]), None
  fit = fit_joint(n, d, loss)
  if fit is None:
    return "\n".join(lines + ["No fit: the least squares converged from no start (a loss that is not finite?).",
                                ""]), None

  def exponent(key):
    boot = fit[f"{key}_bootstrap_se"]
    return (f"{fit[key]:.3f} ± {fit[f'{key}_error']:.3f}** (the larger of the bootstrap's "
            f"{'—' if boot is None else f'{boot:.3f}'} and the residuals' {fit[f'{key}_residual_se']:.3f})")

  lines += [f"Kaplan et al.'s eq. (1.5), L = [(N_c/N)^(α_N/α_D) + D_c/D]^α_D, fitted to the {fit['points']} points "
            f"of the `size` and `data` sweeps: **α_N = {exponent('alpha_n')}, **α_D = {exponent('alpha_d')}; "
            f"N_c = {fit['n_c']:.3g}, D_c = {fit['d_c']:.3g}; R² = {fit['r2']:.3f} in log L, off by "
            f"{100 * fit['rms']:.2f}% of L (root mean square). Kaplan et al.: α_N = {QUOTED['N']}, α_D = "
            f"{QUOTED['D']} (N_c = 8.8e13, D_c = 5.4e13, in their tokens). The `size` points trained one epoch of "
            "their D, not until early stopping: their D term also carries the step limit.", ""]
  lines += [text + "\n" for text in _contradiction_texts(joint_contradictions(points))]
  return "\n".join(lines), fit


def joint_claims(fit: dict | None) -> list[list[str]]:
  """The two exponents of L(N, D), judged as the single laws are (their span aside: both sweeps span 30x): "does
  not hold" when eq. (1.5) fits log L with R² < 0.95; "inconclusive" with an error above 0.01; else "holds" within
  two errors of Kaplan et al.'s, "another exponent" beyond. The error is the larger of the bootstrap's and the
  residuals'."""
  rows = []
  for law, key in (("N", "alpha_n"), ("D", "alpha_d")):
    claim = f"L ∝ {law}^-{QUOTED[law]} (joint L(N, D))"
    if fit is None:
      rows.append([claim, "no joint fit", "not measured"])
      continue
    alpha, error = fit[key], fit[f"{key}_error"]
    distance = abs(alpha - QUOTED[law]) / error if error else math.inf
    if fit["r2"] < GOAL["r2"]:
      verdict = "does not hold (eq. 1.5 does not fit)"
    elif not math.isfinite(error) or error > GOAL["se"]:
      verdict = f"inconclusive (± {error:.3f})"
    else:
      verdict = "holds" if distance <= 2 else "power law, another exponent"
    rows.append([claim, f"α = {alpha:.3f} ± {error:.3f}, R² {fit['r2']:.3f}; {distance:.1f} SE from {QUOTED[law]}",
                 verdict])
  return rows


# ---------------------------------------------------------------------------------------------------- the points


def _curve(record: dict) -> list[tuple[int, float]]:
  return [(int(s), float(v)) for s, v in record.get("eval_curves", {}).get("eval/nll", [])]


def _tokens_per_step(config: dict) -> int:
  data = config.get("data") or {}
  return int(data.get("batch_size") or 0) * int(data.get("seq_len") or 0)


def _finished(record: dict) -> bool:
  """Done by its launcher's word (or run without one), and readable: a run still going has a partial curve."""
  return record.get("status") in (None, "done") and not record["state"].startswith("unreadable")


def law_points(records: list[dict]) -> dict[str, dict]:
  """``{experiment: {"N": [...], "D": [...], "C": [...], "frontier": [...]}}`` for the language-model runs of the
  ``size`` and ``data`` sweeps that finished with a validation curve. A point: ``x``, ``loss``, ``step`` (of the best
  evaluation), ``run``, ``point`` and, for N, ``tokens_per_param``; for D, ``epochs`` (at the best evaluation)."""
  out: dict[str, dict] = {}
  for r in records:
    config = r.get("config") or {}
    if r.get("kind") != "lm" or r.get("sweep") not in SWEEPS.values() or not config.get("model") or not _finished(r):
      continue
    curve = _curve(r)
    if not curve:
      continue
    step, loss = min(curve, key=lambda point: point[1])
    last = max(s for s, _ in curve)
    tokens_per_step = _tokens_per_step(config)
    laws = out.setdefault(r["experiment_name"] or r["run"], {"N": [], "D": [], "C": []})
    common = {"run": r["run"], "point": r["point"], "loss": loss, "step": step, "last": step == last}
    try:
      n = non_embedding_params(config)
    except Exception as e:  # pylint: disable=broad-except  (an optional section: never the report's failure)
      logging.warning("scaling: %s: cannot count its parameters (%s: %s)", r["run"], type(e).__name__, e)
      continue
    subset = int((config.get("data") or {}).get("train_tokens") or 0)
    if r["sweep"] == "data":
      if subset:
        laws["D"].append({**common, "x": subset, "n": n, "epochs": step * tokens_per_step / subset,
                          "tokens": step * tokens_per_step})
      continue
    trained = last * tokens_per_step
    laws["N"].append({**common, "x": n, "tokens_per_param": trained / n, "d": subset or trained,
                      "tokens": step * tokens_per_step})
    warmup = int((config.get("train") or {}).get("warmup_steps") or 0)
    laws["C"] += [{"x": 6.0 * n * s * tokens_per_step / PF_DAY, "loss": v, "step": s, "run": r["run"],
                   "point": r["point"], "tokens": s * tokens_per_step, "last": s == last}
                  for s, v in curve if s > warmup]
  for laws in out.values():
    for key in laws:
      laws[key].sort(key=lambda p: p["x"])
    laws["frontier"] = frontier(laws["C"])
  return out


def frontier(points: list[dict]) -> list[dict]:
  """The points (sorted by compute) with a lower loss than every point of less compute."""
  kept, lowest = [], math.inf
  for p in sorted(points, key=lambda p: p["x"]):
    if p["loss"] < lowest:
      kept.append(p)
      lowest = p["loss"]
  return kept


# ---------------------------------------------------------------------------------------------------- markdown

_TITLES = {"N": ("L(N): loss against model size", "non-embedding parameters N", "size"),
           "D": ("L(D): loss against data", "training tokens D", "data"),
           "C": ("L(C_min): the compute-efficient frontier", "compute C (PF-days)", "size (curves)")}


def _number(x: float, law: str) -> str:
  return f"{x:.3g}" if law == "C" else f"{x:,.0f}"


def _fit_text(fit: dict, law: str, what: str) -> str:
  boot = "—" if fit["alpha_bootstrap_se"] is None else f"{fit['alpha_bootstrap_se']:.3f}"
  return (f"{what}: **α = {fit['alpha']:.3f} ± {fit['alpha_error']:.3f}** (the larger of the bootstrap's {boot} "
          f"and the residuals' {fit['alpha_se']:.3f}), R² = {fit['r2']:.3f}, over {fit['points']} points spanning "
          f"{fit['span']:.0f}× in {law}; Kaplan et al.: α = {QUOTED[law]}.")


def _table(law: str, points: list[dict]) -> list[str]:
  x, loss = [p["x"] for p in points], [p["loss"] for p in points]
  extra = {"N": ("tokens per parameter", "tokens_per_param", "{:.1f}"), "D": ("epochs at the best", "epochs", "{:.1f}"),
           "C": ("tokens trained", "tokens", "{:,}")}[law]
  loss_title = "validation loss" if law == "C" else "best validation loss"
  lines = [f"| point | {_TITLES[law][1]} | {loss_title} (nats/token) | at step | {extra[0]} | "
           "α from the point before |", "|---|---|---|---|---|---|"]
  for p, local in zip(points, local_exponents(x, loss)):
    mark = " †" if law == "D" and p.get("last") else ""
    lines.append(f"| {p['point']} | {_number(p['x'], law)} | {p['loss']:.4f} | {p['step']}{mark} | "
                 f"{extra[2].format(p[extra[1]])} | {'—' if local is None else f'{local:.3f}'} |")
  return lines


def law_section(law: str, points: list[dict], plot: str,
                curves: list[dict] | None = None) -> tuple[str, dict | None, dict | None]:
  """The markdown of one law (its points, the fit over all, and over the range where it holds when that differs),
  with the fits (all points; the chosen range or None). ``curves``: for the compute frontier, every evaluation, whose
  runs are resampled for the bootstrap."""

  def fit_over(i, j):
    boot = POINTS if curves is None else frontier_bootstrap_se(curves, x[i], x[j - 1])
    return fit_law(x[i:j], loss[i:j], bootstrap=boot)

  title = _TITLES[law][0]
  lines = [f"### {title}", ""]
  if law == "C":
    lines += ["The frontier's evaluations (lower loss than every evaluation of less compute):", ""]
  lines += _table(law, points) + [""]
  capped = [p["point"] for p in points if p.get("last")]
  if law == "D" and capped:
    lines += [f"† Best at the run's last evaluation ({', '.join(capped)}): the step cap, not the data, may have "
              "ended it; its loss may still have been falling.", ""]
  if law == "C":
    ends = sum(bool(p.get("last")) for p in points)
    lines += [f"{ends} of the frontier's {len(points)} points are a run's last evaluation, where its learning rate "
              "has decayed to 0; the others are taken mid-schedule.", ""]
  x, loss = [p["x"] for p in points], [p["loss"] for p in points]
  fit = fit_over(0, len(x))
  if fit is None:
    return "\n".join(lines + [f"No fit: {len(points)} point(s), a fit needs 3 distinct.", ""]), None, None
  lines.append(_fit_text(fit, law, "Fit over all points"))
  chosen = None
  if fit["r2"] < GOAL["r2"]:
    kept = holding_range(x, loss)
    if kept is None:
      lines += ["", f"No run of three or more neighbouring points has R² ≥ {GOAL['r2']}: the data do not follow one "
                "power law here."]
    else:
      i, j = kept
      chosen = {**fit_over(i, j), "range": (x[i], x[j - 1])}
      lines += ["", f"The law bends: it holds from {law} = {_number(x[i], law)} ({points[i]['point']}) to "
                f"{_number(x[j - 1], law)} ({points[j - 1]['point']}), a range chosen after seeing the losses. "
                + _fit_text(chosen, law, "Fit over that range")]
  judged = chosen or fit
  lines += ["", f"Goal (≥ {GOAL['span']:.0f}× in {law}, R² ≥ {GOAL['r2']}, standard error ≤ {GOAL['se']}): "
            f"{'met' if meets_goal(judged) else 'not met'}.", "", f"![{title}]({plot})", ""]
  return "\n".join(lines), fit, chosen


def plot_law(law: str, points: list[dict], fits: tuple[dict | None, dict | None], path: fs.PathLike,
             curves: list[dict] | None = None) -> None:
  """Loss against x on log-log axes, the fitted law(s) over their ranges; for C, every evaluation faintly."""
  figure = figures.figure(5.0, 3.6)
  ax = figure.add_subplot()
  for run in sorted({p["point"] for p in curves or []}):
    mine = [p for p in curves if p["point"] == run]
    ax.loglog([p["x"] for p in mine], [p["loss"] for p in mine], "-", alpha=0.35, lw=1, label=run)
  x = np.array([p["x"] for p in points])
  ax.loglog(x, [p["loss"] for p in points], "ko", ms=4, label="frontier" if law == "C" else "runs")
  for fit, style, what in ((fits[0], "-", "all points"), (fits[1], "--", "chosen range")):
    if fit:
      grid = np.geomspace(*fit.get("range", (x.min(), x.max())), 50)
      ax.loglog(grid, np.exp(fit["intercept"] - fit["alpha"] * np.log(grid)), style,
                label=f"{what}: α = {fit['alpha']:.3f} ± {fit['alpha_error']:.3f}")
  from matplotlib import ticker  # pylint: disable=g-import-not-at-top
  for axis in (ax.yaxis.set_major_formatter, ax.yaxis.set_minor_formatter):  # less than a decade: plain numbers
    axis(ticker.FormatStrFormatter("%.2f"))
  ax.set_xlabel(_TITLES[law][1])
  ax.set_ylabel("validation loss (nats / token)")
  ax.grid(alpha=0.3, which="both")
  ax.legend(fontsize=6)
  ax.set_title(_TITLES[law][0], fontsize=9)
  figures.write_png(figure, path)


# ---------------------------------------------------------------------------------------------------- extrapolation


def extrapolation_rows(records: list[dict]) -> list[dict]:
  """One row per finished language-model run of a ``positional`` sweep that was scored on longer rows: ``{"run",
  "positional", "trained", "ranges": {"0-256": loss, ...}}`` from its longest ``metrics.<split>.len<N>.json``."""
  rows = []
  for r in records:
    if r.get("kind") != "lm" or r.get("sweep") != "positional" or not _finished(r):
      continue
    longest = None
    for path in fs.path(r["workdir"]).glob("metrics.*.len*.json"):
      try:
        metrics = json.loads(fs.read_text(path))
      except (ValueError, OSError):
        continue
      if longest is None or metrics.get("seq_len", 0) > longest.get("seq_len", 0):
        longest = metrics
    if longest and longest.get("loss_by_position"):
      rows.append({"run": r["run"], "positional": (r.get("model") or {}).get("positional") or r["point"],
                   "trained": longest.get("trained_seq_len"), "seq_len": longest.get("seq_len"),
                   "ranges": longest["loss_by_position"], "paired": _paired_difference(r["workdir"], longest)})
  return sorted(rows, key=lambda row: row["positional"])


def _paired_difference(workdir: str, longer: dict) -> float | None:
  """The loss on the longer rows minus the loss on rows of the training length, over the same tokens: both files of
  one split, one checkpoint and as many scored tokens (every token is scored once at any row length), else None. It
  is below 0 when the farther context helps, above 0 when the positions beyond the trained ones hurt."""
  try:
    base = json.loads(fs.read_text(fs.join(workdir, f"metrics.{longer.get('split')}.json")))
  except (ValueError, OSError):
    return None
  same = all(base.get(key) == longer.get(key) and base.get(key) is not None for key in ("step", "lm_tokens"))
  if not same or base.get("lm_loss") is None or longer.get("lm_loss") is None:
    return None
  return float(longer["lm_loss"]) - float(base["lm_loss"])


def extrapolation_table(rows: list[dict]) -> str:
  """Loss by range of positions, the last range over the first ("beyond / within": different tokens, since the
  first range holds every document's start), and the paired difference over the same tokens (``_paired_difference``).
  """
  ranges = sorted({key for row in rows for key in row["ranges"]}, key=lambda key: int(key.split("-")[0]))
  lengths = sorted({(row["seq_len"], row["trained"]) for row in rows if row.get("seq_len") and row.get("trained")})
  paired = (f"rows of {lengths[0][0]:,} − rows of {lengths[0][1]:,}, same tokens (nats/token)" if len(lengths) == 1
            else "longer rows − training-length rows, same tokens (nats/token)")
  lines = ["| positional encoding | " + " | ".join(f"{key} (nats/token)" for key in ranges)
           + f" | beyond / within | {paired} |", "|---|" + "---|" * (len(ranges) + 2)]
  for row in rows:
    within = row["ranges"].get(ranges[0])
    beyond = [row["ranges"][key] for key in ranges[1:] if key in row["ranges"]]
    ratio = f"{beyond[-1] / within:.2f}" if within and beyond else "—"
    difference = f"{row['paired']:+.4f}" if row.get("paired") is not None else "—"
    cells = [f"{row['ranges'][key]:.4f}" if key in row["ranges"] else "—" for key in ranges] + [ratio, difference]
    lines.append(f"| {row['positional']} | " + " | ".join(cells) + " |")
  return "\n".join(lines)


# ---------------------------------------------------------------------------------------------------- claims


def law_claims(fits: dict[str, tuple[dict | None, dict | None]]) -> list[list[str]]:
  """A row per exponent: the claim, the evidence, the verdict. "does not hold" when no power law fits (R² < 0.95
  over the fitted range); "inconclusive" when one fits but over less than 30× or with a standard error above 0.01;
  else "holds" when Kaplan et al.'s α lies within two standard errors of ours, and "power law, another exponent"
  when it does not."""
  rows = []
  for law, symbol in (("N", "N"), ("D", "D"), ("C", "C_min")):
    fit, chosen = fits.get(law, (None, None))
    judged = chosen or fit
    claim = f"L ∝ {symbol}^-{QUOTED[law]}"
    if judged is None:
      rows.append([claim, "fewer than 3 points", "not measured"])
      continue
    se = judged["alpha_error"]
    distance = abs(judged["alpha"] - QUOTED[law]) / se if se else math.inf
    if judged["r2"] < GOAL["r2"]:
      verdict = "does not hold (no power law)"
    elif not meets_goal(judged):
      verdict = f"inconclusive (over {judged['span']:.0f}×, ± {se:.3f})"
    else:
      verdict = "holds" if distance <= 2 else "power law, another exponent"
    rows.append([claim, f"α = {judged['alpha']:.3f} ± {se:.3f}, R² {judged['r2']:.3f} over {judged['span']:.0f}×"
                 f"{' (chosen range)' if chosen else ''}; {distance:.1f} SE from {QUOTED[law]}", verdict])
  return rows


def extrapolation_claim(rows: list[dict]) -> list[str]:
  """The claim that sinusoidal positions extrapolate. It holds when the longer rows do not raise the sinusoidal
  model's loss over the same tokens (its paired difference is at most 0: the positions beyond the trained ones cost
  nothing). It holds in part when they do, but its mean loss over those positions is still below the
  learned-position model's, whose table beyond the training length was never trained. Without the paired difference
  only that comparison is made. The evidence gives every model's numbers."""
  claim = "sinusoidal positions extrapolate beyond the training length"
  by_name = {row["positional"]: row for row in rows}
  if "sinusoidal" not in by_name or "learned" not in by_name:
    return [claim, "missing: " + ", ".join(n for n in ("sinusoidal", "learned") if n not in by_name), "not measured"]

  def beyond(row):
    keys = [key for key in row["ranges"] if int(key.split("-")[0]) >= (row["trained"] or 0)]
    return float(np.mean([row["ranges"][key] for key in keys])) if keys else math.nan

  losses = {name: beyond(row) for name, row in by_name.items()}
  best = min(losses, key=lambda name: losses[name])
  better = losses["sinusoidal"] < losses["learned"]
  own = by_name["sinusoidal"].get("paired")
  if own is None:
    verdict = "better than learned (no paired score)" if better else "does not hold"
  elif own <= 0:
    verdict = "holds"
  else:
    verdict = (f"in part: better than learned, but the longer rows cost it {own:+.3f}" if better
               else "does not hold")
  paired = sorted((name, row["paired"]) for name, row in by_name.items() if row.get("paired") is not None)
  same_tokens = ("; longer rows minus training-length rows over the same tokens: "
                 + ", ".join(f"{name} {value:+.3f}" for name, value in paired)) if paired else ""
  return [claim, "mean loss beyond the training length: " + ", ".join(
      f"{name} {value:.3f}" for name, value in sorted(losses.items())) + f" (lowest: {best})" + same_tokens, verdict]


def sections(records: list[dict], out: fs.PathLike) -> list[str]:
  """The report's markdown sections (each language-model experiment's laws, the extrapolation table, the claims),
  and the plots in ``out``."""
  from attnjax.report.tables import markdown_table  # pylint: disable=g-import-not-at-top
  result, claims = [], []
  extrapolation = extrapolation_rows(records)
  for name, laws in sorted(law_points(records).items()):
    parts, fits = [], {}
    for law in ("N", "D", "C"):
      points = laws["frontier"] if law == "C" else laws[law]
      if not points:
        continue
      plot = f"lm_scaling_{law}_{name.replace('/', '_')}.png"
      text, fit, chosen = law_section(law, points, plot, curves=laws["C"] if law == "C" else None)
      fits[law] = (fit, chosen)
      plot_law(law, points, fits[law], fs.join(out, plot), curves=laws["C"] if law == "C" else None)
      parts.append(text)
    if laws["N"] and laws["D"]:
      text, joint = joint_section(joint_points(laws))
      parts.append(text)
      claims += [[name] + row for row in law_claims(fits) + joint_claims(joint)]
    else:
      claims += [[name] + row for row in law_claims(fits)]
    runs = [r for r in records if r.get("kind") == "lm" and (r["experiment_name"] or r["run"]) == name
            and r.get("sweep") in ("size", "data", "positional")]
    timed = [r["train_seconds"] for r in runs if r.get("train_seconds")]
    untimed = f"; {len(runs) - len(timed)} without a recorded time" if len(timed) < len(runs) else ""
    result.append(f"## Scaling laws: {name}\n\nKaplan et al. (2020)'s three laws measured on this language model; "
                  "how each is measured is in `attnjax/report/lm_scaling.py`. The study's "
                  f"{len(timed)} runs (sweeps `size`, `data` and `positional`) trained for {sum(timed) / 3600:.1f} "
                  "hours in all (over their restarts, evaluations during training included; each newest "
                  f"checkpoint's bookkeeping{untimed}).\n\n" + "\n".join(parts))
  if extrapolation:
    result.append("## Position extrapolation: language models\n\nValidation loss by range of positions, on rows "
                  "longer than the training rows (`python -m attnjax.evaluate --eval seq_len=N`).\n\n"
                  + extrapolation_table(extrapolation) + "\n\nThe first range holds every document's start, the later "
                  "ones tokens deep into long articles, so \"beyond / within\" compares different tokens; the last "
                  "column compares the same tokens, scored with the longer context and with the training length's. "
                  "Learned positions beyond the training length read rows of the position table that training never "
                  "updated (their initial values, shrunk by weight decay).")
    claims.append(["positional"] + extrapolation_claim(extrapolation))
  if claims:
    result.append("## Language models: claims\n\n" + markdown_table(["sweep(s)", "claim", "evidence", "verdict"],
                                                                     claims))
  return result
