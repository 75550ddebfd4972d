"""attnjax.report on hand-made run workdirs: the numbers of the metrics files beside the seed's, a failed sweep point
shown as "failed" (never 0), the ablation table in launch order, valid PNG plots, the TensorBoard reader, an
unreadable file in one run, a missing --runs directory, the CLI, and a whole report read from and written to a bucket
(a local emulator)."""

import json
import os
import shutil
import subprocess
import sys

import pytest
from tensorboardX import SummaryWriter

from attnjax import fs, report
from tests.fake_gcs import fake_gcs_server  # noqa: F401  pylint: disable=unused-import  (a fixture)
from tests.markdown_tables import table_rows

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"

TRANSFORMER_BASE = {"name": "transformer", "d_model": 512, "num_heads": 8}
# (step, value) pairs exactly representable in float32 (TensorBoard's simple_value), so they read back exactly
BLEU_CURVE = [(10, 12.5), (20, 21.25), (30, 26.75)]
TOKS_CURVE = [(5, 100.0), (10, 2000.0), (15, 3000.0), (20, 2500.0)]
LOSS_CURVE = [(10, 4.5), (20, 3.25), (30, 2.875)]


def _launch(experiment_name, *, point="default", sweep=None, status="done", start="2025-01-01T10:00:00+00:00",
            wall_seconds=3725.0, overrides=None, target="tpu-v5e-16"):
  return {"experiment": f"experiments/{experiment_name}.py", "experiment_name": experiment_name, "sweep": sweep,
          "point": point, "overrides": overrides or {}, "extra_overrides": ["--config.train.steps=30"],
          "target": target, "commit": "abc123", "commands": {"train": "python -m attnjax.train ...",
                                                             "evaluate": "python -m attnjax.evaluate ..."},
          "start": start, "end": None if status in ("running", "pending") else "2025-01-01T11:02:05+00:00",
          "status": status, "returncode": {"done": 0, "failed": 1}.get(status), "wall_seconds": wall_seconds}


def _config(task, model, target="tpu-v5e-16"):
  return {"data": {"task": task}, "model": model, "train": {"steps": 30}, "eval": {}, "target": target}


def _run(path, *, launch=None, config=None, metrics=None, split="test", curves=None):
  """Writes a run workdir by hand: launch.json, config.json, metrics.<split>.json and TensorBoard events."""
  path.mkdir(parents=True)
  if launch is not None:
    (path / "launch.json").write_text(json.dumps(launch))
  if config is not None:
    (path / "config.json").write_text(json.dumps(config))
  if metrics is not None:
    (path / f"metrics.{split}.json").write_text(json.dumps({"split": split, **metrics}))
  if curves:
    writer = SummaryWriter(str(path / "tensorboard"))
    for tag, points in curves.items():
      for step, value in points:
        writer.add_scalar(tag, value, step)
    writer.close()
  (path / "checkpoints" / "30").mkdir(parents=True)  # never searched for runs
  return path


@pytest.fixture
def runs(tmp_path):
  """A launch root with: a finished Transformer base run on WMT14 en-de (with TensorBoard curves); a 2-point heads
  sweep where heads8 finished and heads16 failed with no metrics (heads16 sorts first by name but was launched
  second); a SQuAD BiLSTM reader run made by hand (no launch.json, validation split); and a run whose metrics file is
  not JSON."""
  root = tmp_path / "runs"
  base = "wmt14_en_de/transformer_base"
  _run(root / "base", launch=_launch(base), config=_config("wmt14_en_de", TRANSFORMER_BASE),
       metrics={"step": 30, "steps": [30], "examples": 1000, "bleu": 27.1234, "chrf": 55.0, "ter": 60.2, "meteor": 40.1,
                "truncated_sources": 0, "empty_sources": 0, "signatures": {"bleu": "nrefs:1|case:mixed"}},
       curves={"train/loss": [(5, 6.0), (10, 5.0)], "eval/bleu": BLEU_CURVE, "eval/loss": LOSS_CURVE,
               # the first window includes compiling and is left out: the median of the other three is 2500
               "train/tokens_per_s": [(5, 100.0), (10, 2000.0), (15, 3000.0), (20, 2500.0)]})
  _run(root / "heads" / "heads8",
       launch=_launch(base, sweep="heads", point="heads8", start="2025-01-02T09:00:00+00:00", wall_seconds=1800.0,
                      overrides={"model.num_heads": 8}),
       config=_config("wmt14_en_de", TRANSFORMER_BASE),
       metrics={"step": 30, "steps": [30], "examples": 1000, "bleu": 25.5, "chrf": 50.0, "ter": 65.0},
       curves={"eval/bleu": [(30, 25.5)], "eval/loss": [(30, 3.0)]})
  _run(root / "heads" / "heads16",
       launch=_launch(base, sweep="heads", point="heads16", status="failed", start="2025-01-02T10:00:00+00:00",
                      wall_seconds=60.0, overrides={"model.num_heads": 16}),
       config=_config("wmt14_en_de", {**TRANSFORMER_BASE, "num_heads": 16}))
  _run(root / "manual" / "squad", config=_config("squad_v1", {"name": "span_qa", "encoder": "bilstm"}, "cpu"),
       metrics={"step": 2000, "steps": [2000], "examples": 10570, "exact_match": 60.1234, "f1": 70.456},
       split="validation")
  broken = _run(root / "broken", launch=_launch("xsum/transformer"),
                config=_config("xsum", {"name": "transformer", "d_model": 512}))
  (broken / "metrics.test.json").write_text('{"rouge1": 30.0, ')  # cut short
  return root


def _assert_png(path):
  data = fs.read_bytes(path)
  assert data.startswith(PNG_MAGIC), path
  import matplotlib.image  # pylint: disable=g-import-not-at-top
  import io  # pylint: disable=g-import-not-at-top
  image = matplotlib.image.imread(io.BytesIO(data), format="png")
  assert image.ndim == 3 and image.shape[0] > 100 and image.shape[1] > 100


def test_a_point_without_a_score_is_a_gap_in_the_ablation_plot_not_a_zero(runs, tmp_path, monkeypatch):
  """The failed heads16 run: its point carries no marker, the line through the means breaks there (NaN), and its
  state is written at the bottom of the plot."""
  import numpy as np  # pylint: disable=g-import-not-at-top
  from attnjax.report import plots  # pylint: disable=g-import-not-at-top
  figures = []
  monkeypatch.setattr("attnjax.report.figures.write_png", lambda figure, path: figures.append(figure))
  (sweep,) = report.sweeps(report.collect([str(runs)]))
  assert sweep["points"] == ["heads8", "heads16"]
  plots.plot_ablation(sweep, tmp_path / "ablation.png")
  (ax,) = figures[0].axes
  *markers, means = ax.lines
  assert [(list(line.get_xdata()), list(line.get_ydata())) for line in markers] == [([0], [25.5])]
  assert means.get_ydata()[0] == 25.5 and np.isnan(means.get_ydata()[1])
  assert [text.get_text() for text in ax.texts] == ["failed"]


def test_curves_get_a_row_of_panels_per_sweep_with_the_legend_outside_the_data(runs, tmp_path, monkeypatch):
  from attnjax.report import plots  # pylint: disable=g-import-not-at-top
  records = report.collect([str(runs)])
  group = report.curve_groups(records)["wmt14_en_de/transformer_base"]
  panels = plots.curve_panels(group)
  assert [(title, [label for label, *_ in series]) for title, series in panels] == [
      ("runs", ["default"]), ("sweep heads", ["heads8"])]  # heads16 failed: no curve
  assert [tuple(p) for p in panels[0][1][0][2]] == BLEU_CURVE and panels[0][1][0][1] == "bleu"
  figures = []
  monkeypatch.setattr("attnjax.report.figures.write_png", lambda figure, path: figures.append(figure))
  assert plots.plot_curves("wmt14_en_de/transformer_base", group, tmp_path / "curves.png")
  axes = figures[0].axes
  assert len(axes) == 4  # two rows of (validation BLEU, eval loss)
  for right in axes[1::2]:
    legend = right.get_legend()
    box = legend.get_window_extent(figures[0].canvas.get_renderer())
    assert box.x0 >= right.get_window_extent().x1  # beside the panel, not over its data


def test_runs_whose_task_or_model_is_unknown_are_listed_apart_with_their_state(runs, tmp_path):
  """A run of an experiment the report cannot place (no config.json, or one that is not JSON) is named in "Runs not
  placed in a table" with its experiment, point and state, and in no other table."""
  _run(runs / "lab" / "mystery", launch=_launch("lab/mystery_model", point="p1"),
       metrics={"step": 30, "steps": [30], "examples": 10, "bleu": 12.5})
  unreadable = _run(runs / "lab" / "torn_config", launch=_launch("lab/other", status="running"))
  (unreadable / "config.json").write_text('{"model": ')
  markdown = report.write_report([str(runs)], str(tmp_path / "report"))
  unplaced = table_rows(markdown, "## Runs not placed in a table")
  assert unplaced == [{"run": "lab/mystery", "experiment": "lab/mystery_model", "point": "p1", "state": "evaluated"},
                      {"run": "lab/torn_config", "experiment": "lab/other", "point": "default",
                       "state": "unreadable: config.json"}]
  placed = markdown[:markdown.index("## Runs not placed in a table")]
  assert "lab/mystery" not in placed and "lab/torn_config" not in placed and "12.50" not in placed


def test_tensorboard_reader_returns_the_scalars_written(runs):
  scalars = report.read_scalars(runs / "base" / "tensorboard")
  assert scalars == {"eval/bleu": BLEU_CURVE, "eval/loss": LOSS_CURVE, "train/loss": [(5, 6.0), (10, 5.0)],
                     "train/tokens_per_s": [(5, 100.0), (10, 2000.0), (15, 3000.0), (20, 2500.0)]}
  assert report.read_scalars(runs / "base" / "tensorboard", tags=["eval/loss"]) == {"eval/loss": LOSS_CURVE}
  assert report.read_scalars(runs / "heads" / "heads16" / "tensorboard") == {}  # no events at all


def test_tensorboard_reader_resumed_run_and_torn_tail(tmp_path):
  logdir = tmp_path / "tensorboard"
  first = SummaryWriter(str(logdir), filename_suffix=".a")
  for step, value in [(10, 1.0), (20, 2.0)]:
    first.add_scalar("eval/loss", value, step)
  first.close()
  second = SummaryWriter(str(logdir), filename_suffix=".b")  # a resumed run logs step 20 again, in a newer file
  for step, value in [(20, 1.5), (30, 1.25)]:
    second.add_scalar("eval/loss", value, step)
  second.close()
  assert report.read_scalars(logdir) == {"eval/loss": [(10, 1.0), (20, 1.5), (30, 1.25)]}
  newest = max(logdir.iterdir(), key=lambda p: p.name)
  newest.write_bytes(newest.read_bytes()[:-7])  # a record still being written: its partial tail is skipped
  assert report.read_scalars(logdir) == {"eval/loss": [(10, 1.0), (20, 1.5)]}


def test_report_tables_plots_and_json(runs, tmp_path):
  out = tmp_path / "report"
  # heads8 was resumed: 90 training minutes over its launches by its checkpoint's bookkeeping, 30 in its last launch
  (runs / "heads" / "heads8" / "checkpoints" / "30" / "meta").mkdir(parents=True)
  (runs / "heads" / "heads8" / "checkpoints" / "30" / "meta" / "metadata").write_text(json.dumps({"train_seconds": 5400}))
  markdown = report.write_report([str(runs)], str(out))
  assert (out / "results.md").read_text() == markdown

  translation = table_rows(markdown, "## Translation")
  by_run = {row["run"]: row for row in translation}
  assert set(by_run) == {"base", "heads/heads8", "heads/heads16"}
  base = by_run["base"]
  assert (base["model"], base["split"]) == ("Transformer", "test")
  assert base["wmt14_en_de BLEU"] == "27.12 (seed 27.3)"  # ours as in metrics.test.json, 2 decimals; the seed's beside
  assert (base["wmt14_en_de METEOR"], base["wmt14_en_de TER"], base["wmt14_en_de chrF"]) == ("40.10", "60.20", "55.00")
  # no checkpoint bookkeeping: the launch's wall time, marked as such
  assert (base["steps"], base["train (h:mm)"], base["hardware"], base["point"]) == ("30", "1:02 (wall)", "tpu-v5e-16",
                                                                                    "default")
  assert by_run["heads/heads8"]["train (h:mm)"] == "1:30"  # every launch's training, not the last launch's 0:30
  assert base["train tok/s"] == "2500" and by_run["heads/heads8"]["train tok/s"] == "—"  # heads8: no such scalar
  # the Transformer's defaults (6 + 6 layers, d_ff 2048, post-norm, separate source and target embeddings, the output
  # layer tied) with d_model 512 and the report's default 8k vocabulary, counted by hand
  d, f, v = 512, 2048, 8000
  attention, ffn, norm = 4 * d * d + 4 * d, 2 * d * f + f + d, 2 * d
  expected = 6 * (attention + ffn + 2 * norm) + 6 * (2 * attention + ffn + 3 * norm) + 2 * v * d
  assert report.read_run(runs / "base")["parameters"] == expected
  assert base["params"] == f"{expected / 1e6:.1f}M"
  assert by_run["heads/heads8"]["wmt14_en_de BLEU"] == "25.50 (seed 27.3)"
  assert by_run["heads/heads8"]["wmt14_en_de METEOR"] == report.NOT_COMPUTED  # evaluated without METEOR
  failed = by_run["heads/heads16"]
  assert failed["wmt14_en_de BLEU"] == "failed (seed 27.3)"
  assert all(failed[f"wmt14_en_de {m}"].startswith("failed") for m in ("METEOR", "TER", "chrF"))
  assert failed["steps"] == "—" and failed["train (h:mm)"] == "0:01 (wall)"
  assert "0.00" not in " ".join(failed.values())

  qa = table_rows(markdown, "## Question answering")
  assert qa == [{"model": "BiLSTM reader", "split": "validation", "squad_v1 EM": "60.12 (seed 67.7)",
                 "squad_v1 F1": "70.46 (seed 77.3)", "params": "—", "steps": "2000", "train tok/s": "—",
                 "train (h:mm)": "—", "hardware": "cpu", "point": "—", "run": "manual/squad"}]
  summarization = table_rows(markdown, "## Summarization")  # the unreadable run is still placed, and says why
  assert [row["xsum ROUGE-L"] for row in summarization] == ["unreadable: metrics.test.json (seed 23.01)"]

  ablation = table_rows(markdown, "### wmt14_en_de/transformer_base: sweep `heads`")
  assert [(row["point"], row["BLEU"], row["status"]) for row in ablation] == [("heads8", "25.50", "done"),
                                                                              ("heads16", "failed", "failed")]
  assert ablation[1]["overrides"] == "model.num_heads=16"
  assert "![heads](ablation_heads.png)" in markdown

  for name in ("ablation_heads.png", "curves_wmt14_en_de_transformer_base.png"):
    _assert_png(out / name)
  assert "(curves_wmt14_en_de_transformer_base.png)" in markdown

  results = json.loads((out / "results.json").read_text())
  records = {r["run"]: r for r in results["runs"]}
  assert results["roots"] == [str(runs)] and len(records) == 5
  assert records["base"]["scores"] == {"bleu": 27.1234, "chrf": 55.0, "ter": 60.2, "meteor": 40.1}
  assert records["base"]["eval_curves"] == {"eval/bleu": [list(p) for p in BLEU_CURVE],
                                            "eval/loss": [list(p) for p in LOSS_CURVE]}
  assert (records["heads/heads16"]["state"], records["heads/heads16"]["scores"]) == ("failed", {})
  assert records["manual/squad"]["split"] == "validation" and records["manual/squad"]["kind"] == "extractive_qa"
  assert records["broken"]["state"] == "unreadable: metrics.test.json"


def test_a_point_run_with_several_seeds_gets_its_mean_and_range(tmp_path):
  root, base = tmp_path / "runs", "multi30k/transformer"
  bleu = {("heads1", 0): 30.5, ("heads1", 1): 31.75, ("heads8", 0): 34.0, ("heads8", 1): 33.0, ("heads8", 2): 35.5}
  for i, ((point, seed), value) in enumerate(bleu.items()):
    _run(root / "heads" / point / f"seed{seed}",
         launch=_launch(base, sweep="heads", point=point, start=f"2025-01-02T{10 + i:02d}:00:00+00:00"),
         config={**_config("multi30k_en_de", TRANSFORMER_BASE), "seed": seed},
         metrics={"step": 30, "steps": [30], "examples": 1000, "bleu": value})
  _run(root / "heads" / "heads16" / "seed0", launch=_launch(base, sweep="heads", point="heads16", status="failed",
                                                            start="2025-01-02T20:00:00+00:00"),
       config={**_config("multi30k_en_de", TRANSFORMER_BASE), "seed": 0})
  markdown = report.render_markdown(report.collect([str(root)], curves=False))
  rows = table_rows(markdown, "Over random seeds")
  assert [(r["point"], r["random seeds"], r["scored runs"], r["BLEU mean"], r["BLEU min–max"]) for r in rows] == [
      ("heads1", "0, 1", "2", "31.12", "30.50–31.75"),  # (30.5 + 31.75) / 2 = 31.125
      ("heads8", "0, 1, 2", "3", "34.17", "33.00–35.50"),
      ("heads16", "0", "0", "—", "—")]  # failed: no score, not a 0
  one_seed = [r for r in report.collect([str(root)], curves=False) if r["run"].endswith("seed0")]
  assert report.seed_table(report.sweeps(one_seed)[0]) is None  # one run per point: no such table


def test_a_seed_run_inside_its_points_own_workdir_is_found(tmp_path):
  # the launcher's layout when a point first ran without --seeds (its workdir <point>, config seed 0) and then with
  # --seeds=1 (<point>/seed1, inside the first): both are runs of the point, and the seed table has both
  root, base = tmp_path / "runs", "multi30k/transformer"
  for workdir, seed, value in (("dropout60/dropout0.1", 0, 37.5), ("dropout60/dropout0.1/seed1", 1, 38.25),
                               ("dropout60/dropout0.3", 0, 36.5)):
    _run(root / workdir, launch=_launch(base, sweep="dropout60", point=workdir.split("/")[1]),
         config={**_config("multi30k_en_de", TRANSFORMER_BASE), "seed": seed},
         metrics={"step": 30, "steps": [30], "examples": 1000, "bleu": value})
  assert [str(p.relative_to(root)) for p in report.find_runs(root)] == [
      "dropout60/dropout0.1", "dropout60/dropout0.1/seed1", "dropout60/dropout0.3"]  # not checkpoints/30
  rows = table_rows(report.render_markdown(report.collect([str(root)], curves=False)), "Over random seeds")
  assert [(r["point"], r["random seeds"], r["BLEU mean"], r["BLEU min–max"]) for r in rows] == [
      ("dropout0.1", "0, 1", "37.88", "37.50–38.25"), ("dropout0.3", "0", "36.50", "—")]


def test_a_run_given_as_its_own_runs_entry_keeps_its_launcher_name(tmp_path):
  # --runs=results/study,results/other/squad_v1_official/bilstm/single/default: the second run is named as the
  # launcher named it, not by its last directory; a workdir the launcher did not lay out keeps its relative name
  run = tmp_path / "other" / "squad_v1_official" / "bilstm" / "single" / "default"
  _run(run, launch=_launch("squad_v1_official/bilstm"), config=_config("squad_v1_official", {"name": "bilstm"}),
       metrics={"step": 30, "steps": [30], "examples": 10, "exact_match": 50.0, "f1": 60.0})
  assert report.read_run(run, run, curves=False)["run"] == "squad_v1_official/bilstm/single/default"
  assert report.read_run(run, tmp_path / "other", curves=False)["run"] == "squad_v1_official/bilstm/single/default"
  elsewhere = tmp_path / "copied" / "bilstm_run"
  shutil.copytree(run, elsewhere)
  assert report.read_run(elsewhere, elsewhere, curves=False)["run"] == "bilstm_run"


def test_points_that_ran_different_step_counts_are_compared_at_a_step_all_reached(tmp_path):
  # one wall-clock budget: heads8 ran 740 steps, heads16 only 569; both were evaluated at 500, heads1 at 250 and 500
  root, base = tmp_path / "runs", "multi30k/transformer"
  arms = {"heads1": ([(250, 12.5), (500, 24.25), (700, 29.5)], 29.0, [(100, 9.0), (200, 1300.0), (300, 1310.0)]),
          "heads8": ([(500, 25.0), (740, 30.5)], 29.75, [(100, 9.0), (200, 1250.0), (300, 1350.0)]),
          "heads16": ([(500, 24.5), (569, 27.75)], 28.0, [(100, 9.0), (200, 960.0), (300, 970.0)])}
  for i, (point, (bleu, test, speed)) in enumerate(arms.items()):
    _run(root / "heads" / point, launch=_launch(base, sweep="heads", point=point,
                                                start=f"2025-01-02T{10 + i:02d}:00:00+00:00"),
         config=_transformer(0, num_heads=int(point[5:])),
         metrics={"step": bleu[-1][0], "steps": [bleu[-1][0]], "examples": 1000, "bleu": test},
         curves={"eval/bleu": bleu, "train/tokens_per_s": speed})
  _run(root / "heads" / "heads4", launch=_launch(base, sweep="heads", point="heads4", status="failed",
                                                 start="2025-01-02T20:00:00+00:00"), config=_transformer(0, num_heads=4))
  found = report.sweeps(report.collect([str(root)]))[0]
  assert report.common_eval_step(found) == 500
  markdown = report.render_markdown(report.collect([str(root)]))
  rows = {r["point"]: r for r in table_rows(markdown, "sweep `heads`")}
  assert {p: (r["BLEU"], r["steps"], r["train tok/s"], r["validation BLEU at step 500"]) for p, r in rows.items()} == {
      "heads1": ("29.00", "700", "1305", "24.25"), "heads8": ("29.75", "740", "1300", "25.00"),
      "heads16": ("28.00", "569", "965", "24.50"), "heads4": ("failed", "—", "—", "—")}
  assert "score at step 500, the last evaluation every run reached" in markdown
  # no step in common (or a single curve): no such column
  found["runs"] = [r for r in found["runs"] if r["point"] == "heads8"]
  assert report.common_eval_step(found) is None and "validation BLEU" not in report.sweep_table(found)


def test_the_seed_table_gives_the_equal_step_validation_score_over_the_scored_runs(tmp_path):
  # heads1 ran two seeds, heads8 two (one failed after its step-500 evaluation): the mean at step 500 is over the
  # scored runs only, as the 30-minute mean is
  root, base = tmp_path / "runs", "multi30k/transformer"
  arms = {("heads1", 0): ([(500, 24.0), (700, 29.5)], 29.0), ("heads1", 1): ([(500, 25.5), (800, 30.0)], 30.5),
          ("heads8", 0): ([(500, 26.25), (740, 30.5)], 31.0), ("heads8", 1): ([(500, 27.0), (760, 31.5)], 32.0),
          ("heads8", 2): ([(500, 99.0)], None)}
  for i, ((point, seed), (bleu, test)) in enumerate(arms.items()):
    failed = test is None
    _run(root / "heads" / point / f"seed{seed}",
         launch=_launch(base, sweep="heads", point=point, status="failed" if failed else "done",
                        start=f"2025-01-02T{10 + i:02d}:00:00+00:00"),
         config=_transformer(seed, num_heads=int(point[5:])),
         metrics=None if failed else {"step": bleu[-1][0], "steps": [bleu[-1][0]], "examples": 1000, "bleu": test},
         curves={"eval/bleu": bleu})
  markdown = report.render_markdown(report.collect([str(root)]))
  rows = table_rows(markdown, "Over random seeds")
  assert [(r["point"], r["scored runs"], r["BLEU mean"], r["BLEU min–max"], r["validation BLEU at step 500 mean"],
           r["validation BLEU at step 500 min–max"]) for r in rows] == [
      ("heads1", "2", "29.75", "29.00–30.50", "24.75", "24.00–25.50"),
      ("heads8", "2", "31.50", "31.00–32.00", "26.62", "26.25–27.00")]  # (26.25 + 27) / 2 = 26.625; not the 99


def _transformer(seed, **model):
  config = _config("multi30k_en_de", {"name": "transformer", "d_model": 256, "num_heads": 4, "num_encoder_layers": 3,
                                      "num_decoder_layers": 3, **model})
  config["train"]["warmup_steps"] = 800
  return {**config, "seed": seed}


def test_a_point_within_one_bleu_of_a_neighbour_on_one_run_wants_a_second_seed(tmp_path):
  # heads1 31.0, heads4 31.9 (0.9 apart: both want a seed), heads8 35.0, heads16 36.5 (1.5 from heads8: neither);
  # layers: layers1 20.0 on two seeds (mean 20.4), layers2 20.6 once: 0.2 from a two-seed mean, so only layers2 wants one
  root, base = tmp_path / "runs", "multi30k/transformer"
  bleu = {("heads", "heads1", 0): 31.0, ("heads", "heads4", 0): 31.9, ("heads", "heads8", 0): 35.0,
          ("heads", "heads16", 0): 36.5, ("layers", "layers1", 0): 20.0, ("layers", "layers1", 1): 20.8,
          ("layers", "layers2", 0): 20.6}
  for i, ((sweep, point, seed), value) in enumerate(bleu.items()):
    model = ({"num_heads": int(point[5:])} if sweep == "heads"
             else {"num_encoder_layers": int(point[6:]), "num_decoder_layers": int(point[6:])})
    _run(root / sweep / point / f"seed{seed}",
         launch=_launch(base, sweep=sweep, point=point, start=f"2025-01-02T{10 + i:02d}:00:00+00:00"),
         config=_transformer(seed, **model), metrics={"step": 30, "steps": [30], "examples": 1000, "bleu": value})
  found = {s["sweep"]: s for s in report.sweeps(report.collect([str(root)], curves=False))}
  assert report.second_seed_points(found["heads"]) == ["heads1", "heads4"]
  assert report.second_seed_points(found["layers"]) == ["layers2"]
  assert report.second_seed_points(found["heads"], margin=1.6) == ["heads1", "heads4", "heads8", "heads16"]
  markdown = report.render_markdown(report.collect([str(root)], curves=False))
  assert "wanting another seed before the ordering counts: heads1, heads4." in markdown


def test_a_run_outside_the_sweep_with_a_points_config_stands_in_for_it(tmp_path):
  # experiments/multi30k/transformer.py's heads sweep is 1/4/8/16 over a 4-head default: the default run (seed 0) and
  # a re-run of it with seed 1 are the heads4 point; runs differing elsewhere (warm-up, width) are not
  root, base = tmp_path / "runs", "multi30k/transformer"
  metrics = lambda bleu: {"step": 30, "steps": [30], "examples": 1000, "bleu": bleu}  # noqa: E731
  _run(root / "heads/heads8/seed0", launch=_launch(base, sweep="heads", point="heads8", start="2025-01-02T10:00:00Z"),
       config=_transformer(0, num_heads=8), metrics=metrics(30.0))
  _run(root / "heads/heads1/seed0", launch=_launch(base, sweep="heads", point="heads1", start="2025-01-02T11:00:00Z"),
       config=_transformer(0, num_heads=1), metrics=metrics(28.0))
  _run(root / "single/default/seed0", launch=_launch(base), config=_transformer(0), metrics=metrics(29.0))
  _run(root / "single/default/seed1", launch=_launch(base, start="2025-01-03T10:00:00Z"), config=_transformer(1),
       metrics=metrics(29.5))
  warm = _transformer(2)
  warm["train"]["warmup_steps"] = 400
  _run(root / "warmup/warmup400", launch=_launch(base, sweep="warmup", point="warmup400"), config=warm,
       metrics=metrics(31.0))
  _run(root / "wide", launch=_launch(base, point="wide"), config=_transformer(3, d_model=512), metrics=metrics(32.0))
  _run(root / "heads/heads16/seed0", launch=_launch(base, sweep="heads", point="heads16", status="running"),
       config=_transformer(0, num_heads=16))  # not evaluated: stands in for nothing, shown as running
  heads = next(s for s in report.sweeps(report.collect([str(root)], curves=False)) if s["sweep"] == "heads")
  assert heads["points"] == ["heads1", "heads4", "heads8", "heads16"]  # the experiment file's order, not launch order
  assert [(r["point"], r["run"], r["status"]) for r in heads["runs"]] == [
      ("heads1", "heads/heads1/seed0", "done"), ("heads4", "single/default/seed0", "stand-in"),
      ("heads4", "single/default/seed1", "stand-in"), ("heads8", "heads/heads8/seed0", "done"),
      ("heads16", "heads/heads16/seed0", "running")]
  assert heads["stand_ins"] == 2
  markdown = report.render_markdown(report.collect([str(root)], curves=False))
  rows = table_rows(markdown, "Over random seeds")
  assert [(r["point"], r["random seeds"], r["BLEU mean"]) for r in rows][:2] == [("heads1", "0", "28.00"),
                                                                                  ("heads4", "0, 1", "29.25")]
  assert "A `stand-in` row is a run of the same experiment outside this sweep" in markdown
  # the warm-up sweep's own point is not a stand-in for the 800-step default's heads sweep, nor is the wider model
  assert all(r["run"] not in ("warmup/warmup400", "wide") for r in heads["runs"])


def test_a_replay_to_a_fixed_step_count_still_stands_in(tmp_path):
  # the default's 30-minute run, replayed to the 771 steps its budget reached (train.steps=771, no time limit), is
  # still the heads4 point, with METEOR added to what it scores; a replay that also changes the warm-up is not
  root, base = tmp_path / "runs", "multi30k/transformer"
  metrics = {"step": 771, "steps": [771], "examples": 1000, "bleu": 30.5}

  def config(seed, **model):
    c = _transformer(seed, **model)
    c["train"].update(steps=100_000, time_limit_minutes=30.0)
    c["eval"] = {"metrics": ["bleu", "chrf", "ter"]}
    return c

  _run(root / "heads/heads8/seed0", launch=_launch(base, sweep="heads", point="heads8"), config=config(0, num_heads=8),
       metrics=metrics)
  replay = config(0)
  replay["train"].update(steps=771, time_limit_minutes=0)
  replay["eval"].update(metrics=["bleu", "chrf", "ter", "meteor"], meteor_language="de")
  _run(root / "single/default", launch=_launch(base), config=replay, metrics=metrics)
  other = json.loads(json.dumps(replay))
  other["seed"], other["train"]["warmup_steps"] = 1, 400
  _run(root / "single/warm", launch=_launch(base, point="warm"), config=other, metrics=metrics)
  heads = next(s for s in report.sweeps(report.collect([str(root)], curves=False)) if s["sweep"] == "heads")
  assert [(r["point"], r["run"], r["status"]) for r in heads["runs"]] == [
      ("heads4", "single/default", "stand-in"), ("heads8", "heads/heads8/seed0", "done")]


def test_runs_without_config_are_placed_from_their_experiment(tmp_path):
  root = tmp_path / "launch"
  _run(root / "big", launch=_launch("wmt14_en_fr/transformer_big", status="pending", start=None, wall_seconds=None))
  _run(root / "luong", launch=_launch("wmt14_en_de/lstm_luong", status="running", wall_seconds=None,
                                      overrides={"model.attention": "luong_dot"}))
  _run(root / "done", config=_config("wmt14_en_fr", {"name": "rnn_seq2seq", "attention": None, "cell": "lstm"}))
  records = {r["run"]: r for r in report.collect([str(root)])}
  assert (records["big"]["label"], records["big"]["task"], records["big"]["state"]) == ("Transformer big",
                                                                                         "wmt14_en_fr", "pending")
  assert (records["luong"]["label"], records["luong"]["state"]) == ("LSTM + Luong (dot)", "running")
  assert records["done"]["state"] == "no evaluation"
  rows = {row["run"]: row for row in table_rows(report.render_markdown(list(records.values())), "## Translation")}
  assert rows["big"]["wmt14_en_fr BLEU"] == "pending (seed 41.8)"
  assert rows["luong"]["wmt14_en_de BLEU"] == "running"
  assert rows["done"]["wmt14_en_fr BLEU"] == "no evaluation (seed 34.81)"
  assert rows["big"]["wmt14_en_de BLEU"] == ""  # not run on that task


def test_model_labels():
  assert report.model_label({"name": "rnn_seq2seq", "attention": None}) == "LSTM seq2seq"
  assert report.model_label({"name": "rnn_seq2seq", "attention": "bahdanau"}) == "LSTM + Bahdanau"
  assert report.model_label({"name": "rnn_seq2seq", "attention": "luong_general"}) == "LSTM + Luong (general)"
  assert report.model_label({"name": "convs2s"}) == "ConvS2S"
  assert report.model_label({"name": "transformer", "d_model": 1024}) == "Transformer big"
  assert report.model_label({"name": "span_qa", "encoder": "transformer"}) == "Transformer reader"
  assert report.format_wall(3725.0) == "1:02" and report.format_wall(None) == "—"


def test_missing_runs_directory_is_named(tmp_path):
  missing = tmp_path / "nope"
  with pytest.raises(FileNotFoundError, match=str(missing)):
    report.write_report([str(missing)], str(tmp_path / "out"))


def test_an_earlier_reports_results_json_is_reported_again_and_a_workdir_supersedes_it(tmp_path):
  root = tmp_path / "launch"
  config = _config("wmt14_en_de", TRANSFORMER_BASE)
  _run(root / "a", launch=_launch("wmt14_en_de/transformer", status="running", wall_seconds=None), config=config)
  _run(root / "b", launch=_launch("wmt14_en_de/transformer"), config=config,
       metrics={"step": 30, "bleu": 21.5}, curves={"eval/bleu": BLEU_CURVE})
  report.write_report([str(root)], str(tmp_path / "first"))
  archive = tmp_path / "first" / "results.json"
  shutil.rmtree(root / "b")  # b's workdir is gone: only the report remembers it
  (root / "a" / "metrics.test.json").write_text(json.dumps({"split": "test", "step": 30, "bleu": 19.0}))
  launch = json.loads((root / "a" / "launch.json").read_text())
  (root / "a" / "launch.json").write_text(json.dumps({**launch, "status": "done", "returncode": 0}))

  collected = report.collect([str(archive), str(root)])
  # archived a superseded by its workdir, not listed twice; the live a before the archived b: by run path, not origin
  assert [r["run"] for r in collected] == ["a", "b"]
  records = {r["run"]: r for r in collected}
  assert (records["a"]["state"], records["a"]["scores"], records["a"].get("archived")) == ("evaluated",
                                                                                             {"bleu": 19.0}, None)
  assert (records["b"]["state"], records["b"]["scores"]["bleu"], records["b"]["archived"]) == ("evaluated", 21.5,
                                                                                                 str(archive))
  assert records["b"]["eval_curves"]["eval/bleu"] == [list(p) for p in BLEU_CURVE]
  markdown = report.render_markdown(list(records.values()))
  rows = {row["run"]: row for row in table_rows(markdown, "## Translation")}
  assert rows["a"]["wmt14_en_de BLEU"].startswith("19.00") and rows["b"]["wmt14_en_de BLEU"].startswith("21.50")
  assert f"1 of them as `{archive}` recorded them" in markdown

  (tmp_path / "bad.json").write_text(json.dumps({"roots": [], "runs": [{"state": "evaluated"}]}))
  with pytest.raises(ValueError, match=r"bad.json: runs\[0\] is not a run record"):
    report.collect([str(tmp_path / "bad.json")])
  (tmp_path / "list.json").write_text("[]")
  with pytest.raises(ValueError, match="list.json is not a report's results.json"):
    report.collect([str(tmp_path / "list.json")])
  with pytest.raises(FileNotFoundError, match="gone.json"):
    report.collect([str(tmp_path / "gone.json")])


def test_an_archive_of_one_root_per_experiment_keeps_every_run_whose_paths_repeat(tmp_path):
  """A report over one launch root per experiment names each run ``single/default``: reported again from its
  results.json, every run stays, under the launcher's layout (``<experiment>/single/default``)."""
  config = _config("wmt14_en_de", TRANSFORMER_BASE)
  roots = []
  for name, bleu in (("wmt14_en_de/transformer", 21.5), ("wmt14_en_de/convs2s", 19.25)):
    roots.append(tmp_path / name)
    _run(roots[-1] / "single" / "default", launch=_launch(name), config=config, metrics={"step": 30, "bleu": bleu})
  report.write_report([str(r) for r in roots], str(tmp_path / "first"))
  collected = report.collect([str(tmp_path / "first" / "results.json")])
  assert {r["run"]: r["scores"]["bleu"] for r in collected} == {
      "wmt14_en_de/transformer/single/default": 21.5, "wmt14_en_de/convs2s/single/default": 19.25}


def test_an_exact_replay_keeps_the_budgeted_runs_throughput_and_adds_its_new_scores(tmp_path):
  # three archived runs, trained again: "same" reproduces BLEU and chrF on test and test2017 to the digit (and adds
  # METEOR), "moved" does not (its BLEU differs in the 10th digit), "busy" is still training
  root, config = tmp_path / "launch", _config("wmt14_en_de", TRANSFORMER_BASE)
  scores = {"bleu": 27.123456789012345, "chrf": 55.5}
  for name in ("same", "moved", "busy"):
    path = _run(root / name, launch=_launch("wmt14_en_de/transformer", point=name, wall_seconds=1800.0), config=config,
                metrics={"step": 30, **scores}, curves={"eval/bleu": BLEU_CURVE, "train/tokens_per_s": TOKS_CURVE})
    (path / "metrics.test2017.json").write_text(json.dumps({"split": "test2017", "step": 30, "bleu": 20.25}))
  report.write_report([str(root)], str(tmp_path / "first"))
  archive = tmp_path / "first" / "results.json"
  archived = {r["run"]: r for r in report.collect([str(archive)])}
  again = report.collect([str(archive), str(root)])  # the same workdirs read again: the same runs, not replays
  assert [r["run"] for r in again if r.get("replay_of")] == [] and len(again) == 3
  shutil.rmtree(root)
  replay_launch = dict(_launch("wmt14_en_de/transformer", wall_seconds=2400.0, start="2025-02-01T10:00:00+00:00"))
  faster = [(step, 2 * value) for step, value in TOKS_CURVE]
  for name, bleu in (("same", scores["bleu"]), ("moved", scores["bleu"] + 1e-6)):
    path = _run(root / name, launch={**replay_launch, "point": name}, config=config,
                metrics={"step": 30, "bleu": bleu, "chrf": 55.5, "meteor": 48.0},
                curves={"eval/bleu": BLEU_CURVE, "train/tokens_per_s": faster})
    (path / "metrics.test2017.json").write_text(json.dumps({"split": "test2017", "step": 30, "bleu": 20.25,
                                                           "meteor": 40.0}))
  _run(root / "busy", launch={**replay_launch, "point": "busy", "status": "running"}, config=config)

  records = {r["run"]: r for r in report.collect([str(archive), str(root)])}
  same, moved, busy = records["same"], records["moved"], records["busy"]
  assert same["scores"]["meteor"] == 48.0 and same["other_splits"]["test2017"]["meteor"] == 40.0
  assert (same["tokens_per_s"], same["wall_seconds"], same["start"]) == (
      archived["same"]["tokens_per_s"], 1800.0, archived["same"]["start"])
  assert same["replay_of"]["replay_wall_seconds"] == 2400.0
  assert same["replay_of"]["replay_tokens_per_s"] == pytest.approx(2 * archived["same"]["tokens_per_s"])
  assert "replay_of" not in moved and moved["wall_seconds"] == 2400.0 and moved["scores"]["meteor"] == 48.0
  assert busy.get("archived") == str(archive) and busy["scores"] == archived["busy"]["scores"]  # not lost meanwhile
  markdown = report.render_markdown(list(records.values()))
  assert "1 run replayed from the same seed to the step count the archived run trained" in markdown
  assert "`same`" in markdown.split("1 run replayed")[1].split("\n")[0]


def test_cli(runs, tmp_path):
  env = {**os.environ, "PYTHONPATH": ROOT}
  out = tmp_path / "cli"
  done = subprocess.run([sys.executable, "-m", "attnjax.report", f"--runs={runs}", f"--out={out}"], env=env, cwd=ROOT,
                        capture_output=True, text=True, timeout=120, check=True)
  assert done.stdout == (out / "results.md").read_text()
  missing = tmp_path / "missing"
  failed = subprocess.run([sys.executable, "-m", "attnjax.report", f"--runs={runs},{missing}", f"--out={out}"],
                          env=env, cwd=ROOT, capture_output=True, text=True, timeout=120)
  assert failed.returncode != 0 and f"--runs directory {missing} does not exist" in failed.stderr


def test_report_from_and_to_a_bucket(runs, fake_gcs_server):  # noqa: F811  pylint: disable=redefined-outer-name
  bucket_runs = f"{fake_gcs_server.root}/study"
  for path in runs.rglob("*"):
    if path.is_file():
      fs.write_bytes(fs.join(bucket_runs, str(path.relative_to(runs))), path.read_bytes())
  out = f"{fake_gcs_server.root}/report"
  markdown = report.write_report([bucket_runs], out)
  assert fs.read_text(fs.join(out, "results.md")) == markdown
  rows = {row["run"]: row for row in table_rows(markdown, "## Translation")}
  assert rows["base"]["wmt14_en_de BLEU"] == "27.12 (seed 27.3)"
  assert rows["heads/heads16"]["wmt14_en_de BLEU"] == "failed (seed 27.3)"
  _assert_png(fs.join(out, "ablation_heads.png"))
  _assert_png(fs.join(out, "curves_wmt14_en_de_transformer_base.png"))
  results = fs.read_json(fs.join(out, "results.json"))
  assert {r["run"] for r in results["runs"]} == {"base", "heads/heads8", "heads/heads16", "manual/squad", "broken"}
  assert next(r for r in results["runs"] if r["run"] == "base")["eval_curves"]["eval/bleu"] == [
      list(p) for p in BLEU_CURVE]


def test_other_splits_rows_follow_the_model_order_of_the_tables_whatever_the_records_order():
  def record(label, run, start):
    return {"label": label, "task": "multi30k_en_de", "kind": "translation", "run": run, "start": start,
            "other_splits": {"test2017": {"bleu": 1.0}}}

  records = [record("Transformer", "a/transformer", "2026-01-01T00:00:00"),
             record("LSTM + Luong (concat)", "z/concat", "2026-01-03T00:00:00"),
             record("LSTM seq2seq", "m/seq2seq", "2026-01-02T00:00:00")]
  for ordering in (records, records[::-1]):
    rows = [line for line in report.tables.other_splits_table(ordering).splitlines() if "test2017" in line]
    assert [row.split(" | ")[-1].rstrip(" |") for row in rows] == ["m/seq2seq", "z/concat", "a/transformer"]


def test_a_run_without_config_is_placed_from_the_config_its_experiment_file_builds(tmp_path):
  """A pending point has only launch.json: the report loads its experiment file (not a table of file names) and
  applies the point's overrides; a file that is gone leaves the run unplaced, never guessed."""
  from attnjax.config import experiment_module  # pylint: disable=g-import-not-at-top
  repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
  built = experiment_module(os.path.join(repo, "experiments/multi30k/lstm_luong.py")).get_config()
  _run(tmp_path / "scores" / "dot", launch=_launch("multi30k/lstm_luong", sweep="scores", point="dot", status="pending",
                                                   overrides={"model.attention": "luong_dot"}))
  _run(tmp_path / "gone", launch=_launch("multi30k/no_such_arm", status="pending"))
  pending = report.read_run(tmp_path / "scores" / "dot", tmp_path)
  assert pending["task"] == built.data.task == "multi30k_en_de" and pending["kind"] == "translation"
  assert pending["model"] == {**built.model.to_dict(), "attention": "luong_dot"}
  assert pending["label"] == "LSTM + Luong (dot)" and pending["state"] == "pending"
  gone = report.read_run(tmp_path / "gone", tmp_path)
  assert (gone["task"], gone["model"], gone["kind"]) == (None, None, None)


def test_a_language_models_second_seed_rule_reads_its_bits_per_byte_on_their_own_scale(tmp_path):
  # l4d96 1.920 and l4d128 1.914 (0.006 apart, under 0.01 bits/byte: both want a seed), l4d192 1.750 (0.164: not);
  # on BLEU's margin of 1 every point would want one
  root = tmp_path / "runs"
  for i, (point, bpb) in enumerate((("l4d96", 1.920), ("l4d128", 1.914), ("l4d192", 1.750))):
    _run(root / "size" / point, launch=_launch("wikipedia/lm", sweep="size", point=point,
                                               start=f"2025-01-02T{10 + i:02d}:00:00+00:00", target="cpu"),
         config=_config("wikipedia_lm", {"name": "decoder_lm", "d_model": int(point.split("d")[1])}, "cpu"),
         metrics={"step": 30, "steps": [30], "examples": 40, "bits_per_byte": bpb, "lm_loss": 2.5 * bpb})
  found = {s["sweep"]: s for s in report.sweeps(report.collect([str(root)], curves=False))}
  assert found["size"]["headline"] == "bits_per_byte"
  assert report.second_seed_points(found["size"]) == ["l4d96", "l4d128"]
  assert report.second_seed_points(found["size"], margin=1.0) == ["l4d96", "l4d128", "l4d192"]
  markdown = report.render_markdown(report.collect([str(root)], curves=False))
  assert "Within 0.01 bits/byte of a neighbouring point on one run, so wanting another seed before the ordering " \
         "counts: l4d96, l4d128." in markdown


def test_pre_training_language_modelling_and_fine_tuned_readers_get_their_own_tables_and_labels(tmp_path):
  runs = tmp_path / "runs"
  bert = {"name": "span_qa", "encoder": "bert", "d_model": 384}
  _run(runs / "wikipedia" / "bert_mlm", config=_config("wikipedia_mlm", {"name": "bert_mlm"}, "cpu"),
       metrics={"step": 900, "steps": [900], "examples": 50, "mlm_accuracy": 0.4321, "mlm_loss": 3.2109})
  _run(runs / "wikipedia" / "lm", config=_config("wikipedia_lm", {"name": "decoder_lm"}, "cpu"),
       metrics={"step": 700, "steps": [700], "examples": 40, "bits_per_byte": 1.2345, "lm_loss": 3.4567})
  for name, source in (("scratch", None), ("minilm", ".cache/all-MiniLM-L6-v2"),
                       ("mlm", "runs/transfer/wikipedia/bert_mlm/single/default")):
    config = _config("squad_v1_dev_by_article", bert, "cpu")
    if source:
      config["train"]["init_encoder_from"] = source
    _run(runs / "readers" / name, config=config,
         metrics={"step": 600, "steps": [600], "examples": 1330, "exact_match": 40.0 + len(name), "f1": 50.0})
  text = report.write_report([runs], tmp_path / "out")
  rows = {row["model"]: row for row in table_rows(text, "## Masked-LM pre-training")}
  assert rows["BERT (masked LM)"]["wikipedia_mlm MLM accuracy"] == "0.43"
  rows = {row["model"]: row for row in table_rows(text, "## Language modelling")}
  assert rows["Decoder-only LM"]["wikipedia_lm bits/byte"] == "1.23"
  readers = {row["model"]: row for row in table_rows(text, "## Question answering")}
  assert readers["BERT reader"]["squad_v1_dev_by_article EM"] == "47.00"
  assert readers["BERT reader (from all-MiniLM-L6-v2)"]["squad_v1_dev_by_article EM"] == "46.00"
  assert readers["BERT reader (from wikipedia/bert_mlm)"]["squad_v1_dev_by_article EM"] == "43.00"


def test_a_restart_that_set_aside_a_damaged_checkpoint_is_named_on_the_page(tmp_path):
  """What a restart recorded in checkpoints.unreadable/set_aside.json (attnjax.runtime.checkpointing) reaches the
  run's record and the page; a run without that file gets an empty list and no line."""
  root = tmp_path / "runs"
  base = "wmt14_en_de/transformer_base"
  config = _config("wmt14_en_de", TRANSFORMER_BASE)
  metrics = {"step": 30, "steps": [30], "examples": 10, "bleu": 20.0}
  _run(root / "clean", launch=_launch(base), config=config, metrics=metrics)
  damaged = _run(root / "damaged", launch=_launch(base, point="again"), config=config, metrics=metrics)
  (damaged / "checkpoints.unreadable").mkdir()
  (damaged / "checkpoints.unreadable" / "set_aside.json").write_text(json.dumps([
      {"step": 12, "process": 1, "file": "/w/checkpoints/12/state/d/ab", "reason": "ValueError: OUT_OF_RANGE: short",
       "moved_to": "/w/checkpoints.unreadable/12-1", "then": "restored step 8", "time": "2026-01-01T00:00:00Z"}]))
  records = {r["run"]: r for r in report.collect([str(root)], curves=False)}
  assert records["clean"]["checkpoints_set_aside"] == []
  assert [e["step"] for e in records["damaged"]["checkpoints_set_aside"]] == [12]
  markdown = report.render_markdown(list(records.values()))
  assert ("1 damaged checkpoint step set aside by a restart (`checkpoints.unreadable/set_aside.json`): `damaged` step "
          "12 (/w/checkpoints/12/state/d/ab: ValueError: OUT_OF_RANGE: short; the run then restored step 8).") in markdown
