"""The scaling-law fit of attnjax.report.scaling: the fit against a known law and numpy.polyfit, the parameter count
against the Transformer's layer formula, and the report section from runs of a `size` sweep."""

import json

import numpy as np
import pytest
from tensorboardX import SummaryWriter

from attnjax import report
from attnjax.config import base_config
from attnjax.report import scaling
from tests.markdown_tables import table_rows


def test_power_law_fit_recovers_a_known_law_and_matches_numpy_polyfit():
  n = np.array([3e5, 1e6, 3e6, 1e7, 3e7])
  fit = scaling.fit_power_law(n, (8.8e13 / n) ** 0.076)  # the quoted law itself: recovered exactly
  assert fit["alpha"] == pytest.approx(0.076, rel=1e-9) and fit["n_c"] == pytest.approx(8.8e13, rel=1e-6)
  assert fit["alpha_se"] < 1e-9 and fit["r2"] == pytest.approx(1.0)
  noisy = (2e6 / n) ** 0.2 * np.exp(np.random.default_rng(0).normal(0, 0.02, n.size))
  fit = scaling.fit_power_law(n, noisy)
  slope, intercept = np.polyfit(np.log(n), np.log(noisy), 1)  # an independent least-squares fit
  assert fit["alpha"] == pytest.approx(-slope, rel=1e-9) and fit["n_c"] == pytest.approx(np.exp(-intercept / slope))
  residual = np.log(noisy) - (intercept + slope * np.log(n))
  se = np.sqrt(np.sum(residual ** 2) / (n.size - 2) / np.sum((np.log(n) - np.log(n).mean()) ** 2))
  assert fit["alpha_se"] == pytest.approx(se) and abs(fit["alpha"] - 0.2) < 3 * fit["alpha_se"] + 1e-3
  with pytest.raises(ValueError, match="need at least 3 distinct sizes, got 2"):
    scaling.fit_power_law([1e6, 1e6, 2e6], [3.0, 3.1, 2.9])


def _by_hand(d: int, layers: int) -> int:
  """Non-embedding parameters of a pre-norm encoder-decoder Transformer with d_ff = 4d, from its layers' shapes."""
  f = 4 * d
  attention, ffn, norm = 4 * d * d + 4 * d, 2 * d * f + f + d, 2 * d  # q, k, v, out (+ biases); two dense; LayerNorm
  return layers * (attention + ffn + 2 * norm) + layers * (2 * attention + ffn + 3 * norm) + 2 * norm  # + final


def _config(d_model: int, layers: int):
  config = base_config()
  config.model.update(d_model=d_model, d_ff=4 * d_model, num_encoder_layers=layers, num_decoder_layers=layers,
                      pre_norm=True, positional="learned")
  return config


@pytest.mark.parametrize("d_model,layers", [(64, 3), (128, 2)])
def test_non_embedding_parameters_follow_the_transformer_layer_formula(d_model, layers):
  config = _config(d_model, layers)
  assert scaling.non_embedding_params({"model": config.model.to_dict(), "data": {"vocab_size": 500}}) == _by_hand(
      d_model, layers)


def test_report_fits_the_size_sweep_from_its_runs_validation_nll(tmp_path):
  """Three runs of a `size` sweep whose best eval/nll follow L = (1e6 / N)^0.1 exactly, N counted by hand (the last
  point of each curve is worse, so the best one must be picked): the report's N column is the hand count and its α
  is 0.1."""
  root = tmp_path / "runs"
  for d in (32, 64, 128):
    config = _config(d, 2)
    run = root / "size" / f"d{d}"
    run.mkdir(parents=True)
    (run / "config.json").write_text(config.to_json_best_effort())
    (run / "launch.json").write_text(json.dumps({"experiment_name": "toy/transformer", "sweep": "size",
                                                 "point": f"d{d}", "status": "done"}))
    best = (1e6 / _by_hand(d, 2)) ** 0.1
    writer = SummaryWriter(str(run / "tensorboard"))
    for step, value in ((100, best + 0.5), (200, best), (300, best + 0.25)):
      writer.add_scalar("eval/nll", value, step)
    writer.close()
  markdown = report.write_report([str(root)], str(tmp_path / "report"))
  assert "## Loss against model size" in markdown and "### toy/transformer: sweep `size`" in markdown
  rows = {row["point"]: row for row in table_rows(markdown, "## Loss against model size")}
  assert sorted(rows) == ["d128", "d32", "d64"]
  for d in (32, 64, 128):
    assert rows[f"d{d}"]["non-embedding parameters"] == f"{_by_hand(d, 2):,}"
    assert float(rows[f"d{d}"]["best validation NLL"]) == pytest.approx((1e6 / _by_hand(d, 2)) ** 0.1, abs=1e-4)
    assert rows[f"d{d}"]["at step ≤"] == "300"  # the steps the run trained
  alpha = float(markdown.split("**α = ")[1].split(" ±")[0])
  assert alpha == pytest.approx(0.1, abs=2e-3)  # TensorBoard stores float32
  assert (tmp_path / "report" / "scaling_toy_transformer.png").read_bytes().startswith(b"\x89PNG")


def test_a_size_sweep_that_stops_falling_gets_local_exponents_and_a_fit_up_to_its_lowest_loss():
  """L = (1e7 / N)^0.09 for the three smallest sizes, then flat, then worse (a fixed step budget): each row's local
  exponent is −Δlog L / Δlog N by hand, and the second fit, over the sizes up to the lowest loss, recovers 0.09."""
  n = [3.5e5, 1.4e6, 3.1e6, 5.5e6, 1.24e7]
  law = [(1e7 / x) ** 0.09 for x in n[:3]]
  loss = law + [law[-1] * 1.001, law[-1] * 1.05]
  points = [{"point": f"d{i}", "n": int(x), "loss": y, "steps": 1500, "run": f"size/d{i}"}
            for i, (x, y) in enumerate(zip(n, loss))]
  local = scaling.local_exponents([p["n"] for p in points], loss)
  assert local[0] is None and local[1] == pytest.approx(0.09, rel=1e-3) and local[2] == pytest.approx(0.09, rel=1e-3)
  assert local[4] == pytest.approx(-np.log(1.05 / 1.001) / np.log(int(1.24e7) / int(5.5e6)), rel=1e-9)
  assert scaling.falling_range(loss) == 3 and scaling.falling_range(loss[:3]) == 3
  markdown = scaling.scaling_section("toy", points, "plot.png")
  rows = [line.split(" | ") for line in markdown.splitlines() if line.startswith("| d")]
  assert [r[4] for r in rows] == ["—"] + [f"{x:.3f}" for x in local[1:]]
  assert float(rows[4][4]) < 0  # the largest size is worse than the one before
  tail = markdown.split("The loss stops falling after d2: over the 3 sizes up to it")[1]
  assert float(tail.split("α = ")[1].split(" ±")[0]) == pytest.approx(0.09, abs=1e-3)
  whole = float(markdown.split("**α = ")[1].split(" ±")[0])
  assert whole == pytest.approx(scaling.fit_power_law(n, loss)["alpha"], abs=1e-3) and whole < 0.09
  # a sweep whose loss falls at every size has no second fit
  assert "stops falling" not in scaling.scaling_section("toy", points[:3], "plot.png")
