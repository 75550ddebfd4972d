"""A language model's scaling laws in the report (attnjax.report.lm_scaling): the bootstrap error, the frontier and
the range where a law holds against hand-made data; and the report's sections from LM workdirs whose learning curves
follow known laws, with N counted by hand, C and the epochs computed here, and the claims' verdicts."""

import functools
import itertools
import json
import math
import warnings

import numpy as np
import pytest
from tensorboardX import SummaryWriter

from attnjax import report
from attnjax.report import lm_scaling
from experiments.wikipedia import lm as lm_experiment
from tests.markdown_tables import table_rows


def test_the_bootstrap_error_vanishes_on_an_exact_law_and_matches_the_residual_error_on_noisy_points():
  n = np.geomspace(1e5, 1e7, 40)
  assert lm_scaling.bootstrap_se(n, (1e9 / n) ** 0.08) < 1e-9
  noisy = (1e9 / n) ** 0.08 * np.exp(np.random.default_rng(1).normal(0, 0.01, n.size))
  fit = lm_scaling.fit_law(n, noisy)
  # with many points and independent errors, resampling the points estimates the same spread as the residuals
  assert fit["alpha_bootstrap_se"] == pytest.approx(fit["alpha_se"], rel=0.3)
  assert fit["span"] == pytest.approx(100.0)
  assert lm_scaling.bootstrap_se(n[:2], noisy[:2]) is None


def test_the_frontier_keeps_each_point_below_every_point_of_less_compute():
  points = [{"x": x, "loss": loss} for x, loss in [(1, 5.0), (2, 4.0), (3, 4.5), (4, 3.9), (5, 3.9), (6, 2.0)]]
  assert [p["x"] for p in lm_scaling.frontier(points[::-1])] == [1, 2, 4, 6]


def test_the_range_where_a_law_holds_is_the_widest_run_of_neighbours_with_a_good_fit():
  x = np.array([1e5, 3e5, 1e6, 3e6, 1e7, 3e7])
  loss = (1e9 / x) ** 0.1
  loss[4:] = loss[3] * np.array([0.995, 0.993])  # the law bends after the fourth point
  assert lm_scaling.fit_law(x, loss)["r2"] < 0.95
  assert lm_scaling.holding_range(x, loss) == (0, 4)
  assert lm_scaling.holding_range(x[:3], np.array([3.0, 1.0, 3.0])) is None


def test_an_exponent_holds_within_two_standard_errors_of_the_quoted_one_over_enough_span():
  def fit(alpha, se, r2=0.99, span=40.0):
    return {"alpha": alpha, "alpha_error": se, "r2": r2, "span": span}
  rows = lm_scaling.law_claims({"N": (fit(0.080, 0.003), None), "D": (fit(0.2, 0.01), None),
                                "C": (fit(0.05, 0.01, r2=0.5), fit(0.052, 0.002))})
  assert [row[2] for row in rows] == ["holds", "power law, another exponent", "holds"]
  assert "(chosen range)" in rows[2][1]
  rows = lm_scaling.law_claims({"N": (fit(0.080, 0.003, span=10.0), None), "D": (fit(0.095, 0.02), None),
                                "C": (fit(0.05, 0.001, r2=0.9), None)})
  assert [row[2] for row in rows] == ["inconclusive (over 10×, ± 0.003)", "inconclusive (over 40×, ± 0.020)",
                                      "does not hold (no power law)"]
  assert lm_scaling.law_claims({})[0][2] == "not measured"


def test_few_points_are_judged_on_the_residuals_error_and_a_flat_stretch_neither_crashes_nor_holds():
  x = np.array([1e5, 3e5, 1e6])
  loss = (1e9 / x) ** 0.1 * np.array([1.0, 1.01, 1.0])
  fit = lm_scaling.fit_law(x, loss)
  assert fit["alpha_bootstrap_se"] < 1e-12  # three points: every resample that keeps three is a reordering
  assert fit["alpha_error"] == fit["alpha_se"] > 0.004
  flat = lm_scaling.fit_law(x, [3.0, 2.999, 2.998])  # α ≈ 1.5e-4: N_c overflows, the line does not
  assert flat["n_c"] == math.inf and math.isfinite(flat["intercept"])
  assert lm_scaling.holding_range(x, np.array([3.0, 3.001, 3.002])) is None  # rising: no law of falling loss


def test_the_joint_law_recovers_kaplans_exponents_from_points_on_eq_1_5():
  """Points on Kaplan et al.'s eq. (1.5) with their constants, at the study's sizes (at 20M tokens) and data sizes
  (at one model): the fit gives back α_N and α_D; with 0.5% noise, they lie within three bootstrap errors."""
  sizes = np.array([24_576, 98_304, 196_608, 442_368, 786_432, 1_769_472], np.float64)
  data = np.array([2.5e5, 5e5, 1e6, 2e6, 4e6, 8e6])
  n = np.concatenate([sizes, np.full(6, 786_432.0)])
  d = np.concatenate([np.full(6, 2e7), data])
  loss = ((8.8e13 / n) ** (0.076 / 0.095) + 5.4e13 / d) ** 0.095
  fit = lm_scaling.fit_joint(n, d, loss, samples=200)
  assert fit["alpha_n"] == pytest.approx(0.076, abs=1e-4) and fit["alpha_d"] == pytest.approx(0.095, abs=1e-4)
  assert fit["rms"] < 1e-6 and fit["r2"] == pytest.approx(1.0)
  noisy = loss * np.exp(np.random.default_rng(0).normal(0, 0.005, loss.size))
  fit = lm_scaling.fit_joint(n, d, noisy, samples=400)
  for key, truth in (("alpha_n", 0.076), ("alpha_d", 0.095)):
    assert abs(fit[key] - truth) < 3 * fit[f"{key}_error"]
    assert 0.001 < fit[f"{key}_bootstrap_se"] < 0.02
    # two estimates of one spread: resampling the points, and the residuals through the Jacobian
    assert 0.4 < fit[f"{key}_residual_se"] / fit[f"{key}_bootstrap_se"] < 2.5
    assert fit[f"{key}_error"] == max(fit[f"{key}_residual_se"], fit[f"{key}_bootstrap_se"])
  assert 0.001 < fit["rms"] < 0.01
  rows = lm_scaling.joint_claims(fit)
  assert [row[2] for row in rows] == ["holds", "holds"]
  assert [row[2] for row in lm_scaling.joint_claims({**fit, "r2": 0.5})][0].startswith("does not hold")
  assert lm_scaling.fit_joint(n[:5], d[:5], loss[:5]) is None  # four parameters need more than five points
  assert lm_scaling.fit_joint(n, d, np.where(np.arange(12) == 3, np.nan, loss)) is None
  # the single law at one D flattens where the data bind: its exponent is below the joint α_N
  assert lm_scaling.fit_law(sizes, loss[:6])["alpha"] < 0.076


def test_the_joint_section_names_the_points_at_one_n_that_eq_1_5_cannot_fit_together(monkeypatch):
  """Eq. (1.5) falls as D grows at fixed N. Points on the law never contradict it; a step-limited point with more
  data and a higher loss than the data sweep's at its N is named, with the tokens each trained on."""
  # the section's text is checked, not its bootstrap errors: 200 resamples for each fit instead of 2,000
  monkeypatch.setattr(lm_scaling, "fit_joint", functools.partial(lm_scaling.fit_joint, samples=200))
  sizes = [24_576, 98_304, 196_608, 442_368, 786_432, 1_769_472]
  law = lambda n, d: ((8.8e13 / n) ** (0.076 / 0.095) + 5.4e13 / d) ** 0.095
  points = ([{"point": f"s{i}", "n": n, "d": 2e7, "loss": law(n, 2e7), "tokens": 2e7} for i, n in enumerate(sizes)]
            + [{"point": f"d{d:g}", "n": 786_432, "d": d, "loss": law(786_432, d), "tokens": 16 * d}
               for d in (2.5e5, 5e5, 1e6, 2e6, 4e6, 8e6)])
  assert lm_scaling.joint_contradictions(points) == []
  assert "cannot fit" not in lm_scaling.joint_section(points)[0]
  points[4]["loss"] = law(786_432, 3e6)  # the size run at this N stops where 3M tokens of data would
  pairs = lm_scaling.joint_contradictions(points)
  # brute force over the points: a pair at one N whose loss rises with D
  expected = {("s4", p["point"]) for p in points[6:] if p["d"] < 2e7 and p["loss"] < points[4]["loss"]}
  assert expected == {("s4", "d4e+06"), ("s4", "d8e+06")}
  assert {(a["point"], b["point"]) for a, b in pairs} == expected
  text = lm_scaling.joint_section(points)[0]
  assert text.count("cannot fit") == 1 and "s4 (D = 20M, 20.0M tokens" in text
  assert "d4e+06 (D = 4M, 64.0M tokens" in text and "s4 trained on fewer tokens" in text
  points[4]["tokens"] = 1e9  # it trained longer than either: not the step limit, and not said to be
  assert "fewer tokens" not in lm_scaling.joint_section(points)[0]


def test_a_missing_bootstrap_stays_missing_and_is_not_replaced_by_the_points():
  x = np.geomspace(1e5, 1e7, 8)
  loss = (1e9 / x) ** 0.08 * np.exp(np.random.default_rng(2).normal(0, 0.01, x.size))
  assert lm_scaling.fit_law(x, loss, bootstrap=None)["alpha_bootstrap_se"] is None
  assert lm_scaling.fit_law(x, loss)["alpha_bootstrap_se"] == lm_scaling.bootstrap_se(x, loss)


def test_the_frontiers_error_resamples_runs_not_their_correlated_evaluations():
  # two runs whose curves lie on two parallel laws, each curve evaluated 12 times: resampling the points as if
  # independent sees a near-perfect line; resampling the runs sees frontiers of one run or of both
  curves = [{"run": run, "x": c, "loss": scale * c ** -0.1}
            for run, scale, cs in (("a", 1.0, np.geomspace(1, 10, 12)), ("b", 0.9, np.geomspace(10, 100, 12)))
            for c in cs]
  points = lm_scaling.frontier(curves)
  x, loss = [p["x"] for p in points], [p["loss"] for p in points]
  by_points = lm_scaling.bootstrap_se(x, loss)
  by_runs = lm_scaling.frontier_bootstrap_se(curves, min(x), max(x))
  assert by_runs > 3 * by_points


# ------------------------------------------------------------------------------------------ from the runs' workdirs


@pytest.mark.parametrize("sinusoidal, paired, verdict", [
    (3.3, -0.01, "holds"),  # the longer rows cost nothing over the same tokens, whatever the learned model does
    (5.0, -0.01, "holds"),
    (3.3, 0.09, "in part: better than learned, but the longer rows cost it +0.090"),
    (5.0, 0.09, "does not hold"),  # worse than the learned table beyond its trained rows
    (3.3, None, "better than learned (no paired score)"),
    (5.0, None, "does not hold"),
])
def test_sinusoidal_positions_extrapolate_when_longer_rows_cost_them_nothing(sinusoidal, paired, verdict):
  def row(name, beyond, difference):
    return {"positional": name, "trained": 256, "paired": difference,
            "ranges": {"0-256": 3.0, "256-512": beyond - 0.1, "512-1024": beyond + 0.1}}
  claim = lm_scaling.extrapolation_claim([row("sinusoidal", sinusoidal, paired), row("learned", 4.0, 0.5)])
  assert claim[2] == verdict
  assert f"learned 4.000, sinusoidal {sinusoidal:.3f}" in claim[1]


def _by_hand(layers: int, d: int) -> int:
  """Non-embedding parameters of the pre-norm decoder-only LM with d_ff = 4d: attention (q, k, v, out and biases),
  the feed-forward layers, two LayerNorms per layer and the final one."""
  return layers * (4 * d * d + 4 * d + 8 * d * d + 5 * d + 4 * d) + 2 * d


def _run(root, sweep: str, point: dict, curve, metrics: dict | None = None):
  config = lm_experiment.get_config()
  for key, value in point["overrides"].items():
    section, name = key.split(".")
    config[section][name] = value
  run = root / sweep / point["name"]
  run.mkdir(parents=True)
  (run / "config.json").write_text(config.to_json_best_effort())
  (run / "launch.json").write_text(json.dumps({"experiment_name": "wikipedia/lm", "sweep": sweep,
                                               "point": point["name"], "status": "done"}))
  writer = SummaryWriter(str(run / "tensorboard"))
  for step, value in curve:
    writer.add_scalar("eval/nll", value, step)
  writer.close()
  for name, value in (metrics or {}).items():
    (run / name).write_text(json.dumps(value))
  for step, seconds in ((curve[-2][0], 900.0), (curve[-1][0], 1800.0)):  # the newest checkpoint's training time
    (run / "checkpoints" / str(step) / "meta").mkdir(parents=True)
    (run / "checkpoints" / str(step) / "meta" / "metadata").write_text(json.dumps({"train_seconds": seconds}))
  return config


def _log_fit(x, loss) -> tuple[float, float]:
  """α and R² of the least-squares line of log L on log x, by numpy.polyfit."""
  log_x, log_loss = np.log(np.asarray(x, np.float64)), np.log(np.asarray(loss, np.float64))
  slope, intercept = np.polyfit(log_x, log_loss, 1)
  residual = log_loss - (intercept + slope * log_x)
  return -slope, 1.0 - np.sum(residual ** 2) / np.sum((log_loss - log_loss.mean()) ** 2)


def _frontier(points):
  """(C, L) pairs, sorted by C, each below every pair of less compute (by more than TensorBoard's float32 rounding)."""
  kept, lowest = [], math.inf
  for c, loss in sorted(points):
    if loss < lowest - 1e-5:
      kept.append((c, loss))
      lowest = loss
  return kept


def _best_joint_r2(n, d, loss) -> float:
  """The best R² in log L of eq. (1.5), L = [(N_c/N)^(α_N/α_D) + D_c/D]^α_D, over unbounded Levenberg-Marquardt fits
  (scipy's curve_fit) from a grid of starts."""
  from scipy import optimize  # pylint: disable=g-import-not-at-top
  log_n, log_d, log_loss = np.log(n), np.log(d), np.log(loss)
  law = lambda x, a_n, a_d, log_nc, log_dc: a_d * np.logaddexp(a_n / a_d * (log_nc - x[0]), log_dc - x[1])  # noqa: E731
  best = -math.inf
  for start in itertools.product((0.03, 0.1, 0.3), (0.03, 0.1, 0.3), (10.0, 20.0, 30.0), (10.0, 20.0, 30.0)):
    try:
      with warnings.catch_warnings():
        warnings.simplefilter("ignore", optimize.OptimizeWarning)  # a flat direction: no covariance, still a fit
        theta, _ = optimize.curve_fit(law, (log_n, log_d), log_loss, p0=start, maxfev=5000)
    except (RuntimeError, ValueError):
      continue
    residual = law((log_n, log_d), *theta) - log_loss
    best = max(best, 1.0 - np.sum(residual ** 2) / np.sum((log_loss - log_loss.mean()) ** 2))
  return best


def test_the_report_measures_the_three_laws_and_extrapolation_from_the_runs(tmp_path):
  root = tmp_path / "runs"
  steps = [125] + list(range(250, 4001, 250))  # 125: inside the 200 warm-up steps
  sizes = {p["name"]: p for p in lm_experiment.SWEEPS["size"]}
  expected_n = {}
  for name in ("l2d32", "l4d64", "l4d128", "l4d192"):  # L(N) = (1e8 / N)^0.076 at the end of each curve
    layers, d = (int(part) for part in name[1:].split("d"))
    n = expected_n[name] = _by_hand(layers, d)
    _run(root, "size", sizes[name], [(s, (1e8 / n) ** 0.076 + 0.4 * (4000 / s - 1)) for s in steps])
  data = {p["name"]: p for p in lm_experiment.SWEEPS["data"]}
  best_step = {"tokens125k": 500, "tokens500k": 1000, "tokens2000k": 4000, "tokens4000k": 1750}  # 4000: the last
  for name, step in best_step.items():  # L(D) = (1e10 / D)^0.095 at the best step, overfitting after it
    d = data[name]["overrides"]["data.train_tokens"]
    _run(root, "data", data[name], [(s, (1e10 / d) ** 0.095 + 0.001 * abs(s - step) / 250) for s in steps])
  positional = {p["name"]: p for p in lm_experiment.SWEEPS["positional"]}
  for name, beyond, base_step in (("sinusoidal", (3.2, 3.4), 4000), ("learned", (4.0, 5.5), 4000),
                                  ("t5", (3.1, 3.1), 3750)):  # t5: its two files score different checkpoints
    ranges = {"0-256": 3.0, "256-512": beyond[0], "512-1024": beyond[1]}
    longer = {"seq_len": 1024, "trained_seq_len": 256, "split": "validation", "step": 4000, "lm_tokens": 9000.0,
              "lm_loss": 3.0 + beyond[1] / 10, "loss_by_position": ranges}
    trained = {"seq_len": 256, "trained_seq_len": 256, "split": "validation", "step": base_step, "lm_tokens": 9000.0,
               "lm_loss": 3.25}
    _run(root, "positional", positional[name], [(s, 3.0) for s in steps],
         {"metrics.validation.len1024.json": longer, "metrics.validation.json": trained})
  markdown = report.write_report([str(root)], str(tmp_path / "report"))

  for name, n in expected_n.items():  # all parameters: the tied table of the 8k vocabulary padded to 8,064, positions
    d, config = int(name.split("d")[1]), json.loads((root / "size" / name / "config.json").read_text())
    assert report.read_run(root / "size" / name)["parameters"] == n + (8064 + config["model"]["max_length"]) * d
  assert "11 runs (sweeps `size`, `data` and `positional`) trained for 5.5 hours in all" in markdown
  rows = table_rows(markdown, "### L(N)")
  assert [row["point"] for row in rows] == ["l2d32", "l4d64", "l4d128", "l4d192"]
  for row in rows:
    n = expected_n[row["point"]]
    assert row["non-embedding parameters N"] == f"{n:,}" and row["at step"] == "4000"
    assert float(row["best validation loss (nats/token)"]) == pytest.approx((1e8 / n) ** 0.076, abs=1e-4)
    assert float(row["tokens per parameter"]) == pytest.approx(4000 * 4096 / n, abs=0.06)
  section = markdown[markdown.index("### L(N)"):markdown.index("### L(D)")]
  assert float(section.split("**α = ")[1].split(" ±")[0]) == pytest.approx(0.076, abs=2e-3)

  rows = table_rows(markdown, "### L(D)")
  assert [row["point"] for row in rows] == ["tokens125k", "tokens500k", "tokens2000k", "tokens4000k"]
  for row in rows:
    d = data[row["point"]]["overrides"]["data.train_tokens"]
    last = best_step[row["point"]] == steps[-1]  # best at its last evaluation: marked, and said why
    assert row["at step"] == str(best_step[row["point"]]) + (" †" if last else "")
    assert float(row["epochs at the best"]) == pytest.approx(best_step[row["point"]] * 4096 / d, abs=0.06)
  section = markdown[markdown.index("### L(D)"):markdown.index("### L(C_min)")]
  assert float(section.split("**α = ")[1].split(" ±")[0]) == pytest.approx(0.095, abs=2e-3)
  assert "† Best at the run's last evaluation (tokens2000k)" in section

  # the frontier, computed here from the same curves (evaluations after the 200 warm-up steps)
  curves = {name: [(6 * n * s * 4096 / 8.64e19, (1e8 / n) ** 0.076 + 0.4 * (4000 / s - 1)) for s in steps if s > 200]
            for name, n in expected_n.items()}
  frontier_points = _frontier([point for curve in curves.values() for point in curve])
  frontier = [c for c, _ in frontier_points]
  rows = table_rows(markdown, "### L(C_min)")
  assert [float(row["compute C (PF-days)"]) for row in rows] == pytest.approx(frontier, rel=5e-3)  # 3 significant figures
  ends = sum(any(c == pytest.approx(6 * n * 4000 * 4096 / 8.64e19) for n in expected_n.values()) for c in frontier)
  assert f"{ends} of the frontier's {len(frontier)} points are a run's last evaluation" in markdown
  # both sweeps in eq. (1.5): a section and a claim per exponent
  assert "### L(N, D): both sweeps in one law" in markdown and "fitted to the 8 points" in markdown
  for law in "NDC":
    assert (tmp_path / "report" / f"lm_scaling_{law}_wikipedia_lm.png").read_bytes().startswith(b"\x89PNG")

  rows = {row["positional encoding"]: row for row in table_rows(markdown, "## Position extrapolation: language models")}
  assert rows["learned"]["512-1024 (nats/token)"] == "5.5000" and rows["learned"]["beyond / within"] == "1.83"
  paired = "rows of 1,024 − rows of 256, same tokens (nats/token)"  # 3.0 + beyond / 10 − 3.25, one checkpoint only
  assert [rows[name][paired] for name in ("learned", "sinusoidal", "t5")] == ["+0.3000", "+0.0900", "—"]
  claims = {row["claim"]: row for row in table_rows(markdown, "## Language models: claims")}
  assert set(claims) == {"L ∝ N^-0.076", "L ∝ D^-0.095", "L ∝ C_min^-0.05", "L ∝ N^-0.076 (joint L(N, D))",
                         "L ∝ D^-0.095 (joint L(N, D))", "sinusoidal positions extrapolate beyond the training length"}
  verdicts = {claim: row["verdict"] for claim, row in claims.items()}
  # L(N) and L(D): the runs' best losses lie on Kaplan et al.'s exponents exactly, over more than 30×: both hold
  best_d = {name: data[name]["overrides"]["data.train_tokens"] for name in best_step}
  for x, loss, alpha in ((list(expected_n.values()), [(1e8 / n) ** 0.076 for n in expected_n.values()], 0.076),
                         (list(best_d.values()), [(1e10 / d) ** 0.095 for d in best_d.values()], 0.095)):
    assert max(x) / min(x) >= 30 and _log_fit(x, loss) == pytest.approx((alpha, 1.0), abs=1e-9)
  assert [verdicts["L ∝ N^-0.076"], verdicts["L ∝ D^-0.095"]] == ["holds", "holds"]
  # L(C_min): the frontier of these curves is no power law over all of it; its widest stretch of neighbours with
  # R² ≥ 0.95 spans over 30×, but resampling the four runs moves that stretch's α by over five times the goal's 0.01
  assert _log_fit(*zip(*frontier_points))[1] < 0.95
  fits = {(i, j): _log_fit(*zip(*frontier_points[i:j]))
          for i in range(len(frontier_points)) for j in range(i + 3, len(frontier_points) + 1)}
  stretches = [ij for ij, (alpha, r2) in fits.items() if alpha > 0 and r2 >= 0.95]
  i, j = max(stretches, key=lambda ij: frontier_points[ij[1] - 1][0] / frontier_points[ij[0]][0])
  lo, hi = frontier_points[i][0], frontier_points[j - 1][0]
  rng, alphas = np.random.default_rng(7), []
  for _ in range(300):
    picked = [p for k in rng.integers(0, len(curves), len(curves)) for p in list(curves.values())[k]]
    kept = [p for p in _frontier(picked) if lo * (1 - 1e-9) <= p[0] <= hi * (1 + 1e-9)]
    if len(kept) >= 3:
      alphas.append(_log_fit(*zip(*kept))[0])
  spread = np.std(alphas, ddof=1)
  assert hi / lo >= 30 and spread > 0.05
  stated = claims["L ∝ C_min^-0.05"]["evidence"].split(" ± ")[1].split(",")[0]  # the report's error of α
  assert verdicts["L ∝ C_min^-0.05"] == f"inconclusive (over {hi / lo:.0f}×, ± {stated})"
  assert 0.5 < float(stated) / spread < 2
  # L(N, D): the size runs at 20M tokens and the data runs at l4d128's N; no eq. (1.5) fits these 8 points with
  # R² ≥ 0.95 (the data runs' law, carried to 20M tokens at that N, lies above the size run's point there)
  model = data["tokens125k"]["overrides"]
  data_n = _by_hand(model["model.num_layers"], model["model.d_model"])
  joint_n = list(expected_n.values()) + [data_n] * len(best_d)
  joint_d = [sizes[name]["overrides"]["data.train_tokens"] for name in expected_n] + list(best_d.values())
  joint_loss = [(1e8 / n) ** 0.076 for n in expected_n.values()] + [(1e10 / d) ** 0.095 for d in best_d.values()]
  assert data_n in expected_n.values() and (1e10 / 2e7) ** 0.095 > (1e8 / data_n) ** 0.076 + 0.3
  assert 0.5 < _best_joint_r2(joint_n, joint_d, joint_loss) < 0.95
  assert [verdicts["L ∝ N^-0.076 (joint L(N, D))"], verdicts["L ∝ D^-0.095 (joint L(N, D))"]] == [
      "does not hold (eq. 1.5 does not fit)"] * 2
  verdict = claims["sinusoidal positions extrapolate beyond the training length"]["verdict"]
  assert verdict == "in part: better than learned, but the longer rows cost it +0.090"
  evidence = claims["sinusoidal positions extrapolate beyond the training length"]["evidence"]
  assert "learned 4.750" in evidence and "same tokens: learned +0.300, sinusoidal +0.090" in evidence
  assert "## Loss against model size" not in markdown  # the translation section leaves the LM's sweep alone


@pytest.mark.parametrize("names, law, verdict", [
    # an exact power law over 70×, with 0.2 where Kaplan et al. have 0.076
    (("l2d32", "l4d64", "l4d128", "l4d192"), lambda n, i: (1e8 / n) ** 0.2, "power law, another exponent"),
    # Kaplan et al.'s law exactly, over 8× only
    (("l2d32", "l2d64", "l4d64"), lambda n, i: (1e8 / n) ** 0.076, "inconclusive (over 8×, ± 0.000)"),
    # up and down: no power law over all the sizes, nor over any three neighbours
    (("l2d32", "l4d64", "l4d128", "l4d192"), lambda n, i: (3.0, 2.0, 3.0, 2.0)[i], "does not hold (no power law)"),
], ids=["another exponent", "too narrow", "no power law"])
def test_a_size_sweep_off_kaplans_law_gets_the_verdict_its_losses_imply(tmp_path, names, law, verdict):
  """The report of `size` runs whose best losses are set here (at the last of a few evaluations): the verdict on
  L ∝ N^-0.076 follows from a numpy.polyfit of their points and the span of N counted by hand. Without a `data`
  sweep L(D) is not measured."""
  root = tmp_path / "runs"
  sizes = {p["name"]: p for p in lm_experiment.SWEEPS["size"]}
  n = [_by_hand(*(int(part) for part in name[1:].split("d"))) for name in names]
  best = [law(x, i) for i, x in enumerate(n)]
  for name, loss in zip(names, best):
    _run(root, "size", sizes[name], [(s, loss + 0.4 * (4000 / s - 1)) for s in (250, 1000, 2000, 4000)])
  alpha, r2 = _log_fit(n, best)
  span = max(n) / min(n)
  if verdict == "power law, another exponent":
    assert r2 == pytest.approx(1.0) and span >= 30 and abs(alpha - 0.076) > 0.1
  elif verdict.startswith("inconclusive"):
    assert r2 == pytest.approx(1.0) and alpha == pytest.approx(0.076) and f"{span:.0f}" == "8"
  else:
    assert r2 < 0.95 and all(a <= 0 or r < 0.95 for a, r in (_log_fit(n[i:i + 3], best[i:i + 3]) for i in (0, 1)))
  markdown = report.write_report([str(root)], str(tmp_path / "report"))
  claims = {row["claim"]: row for row in table_rows(markdown, "## Language models: claims")}
  assert claims["L ∝ N^-0.076"]["verdict"] == verdict
  assert claims["L ∝ D^-0.095"]["verdict"] == "not measured"
  assert not any("joint" in claim for claim in claims)  # eq. (1.5) needs both sweeps


def test_the_joint_fits_jacobian_is_the_derivative_of_eq_1_5():
  """The analytic Jacobian the least-squares fit of L(N, D) uses, against central differences of the function."""
  rng = np.random.default_rng(0)
  log_n, log_d = np.log(rng.uniform(1e5, 1e8, 12)), np.log(rng.uniform(1e6, 1e9, 12))
  for theta in ([0.076, 0.095, np.log(8.8e13), np.log(5.4e13)], [0.3, 0.05, np.log(1e6), np.log(1e8)],
                [0.05, 0.3, np.log(1e9), np.log(1e6)]):
    theta = np.asarray(theta)
    numeric = np.stack([(lm_scaling._joint_log_loss(theta + h, log_n, log_d)
                         - lm_scaling._joint_log_loss(theta - h, log_n, log_d)) / (2e-6)
                        for h in np.eye(4) * 1e-6], axis=-1)
    np.testing.assert_allclose(lm_scaling._joint_jacobian(theta, log_n, log_d), numeric, rtol=1e-5, atol=1e-7)
