"""The accelerator check in its dry mode, so that it cannot rot before an accelerator is at hand: every section runs
and lands in the report, with its own numbers; and the GPU targets' figures are the published ones."""

import json
import os
import subprocess
import sys

import pytest

from attnjax import targets

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


# about a minute: every section's programs compiled on the CPU; in make test, so that CI runs the dry mode
@pytest.mark.slow  # end to end, by `make test-slow`
def test_the_dry_run_measures_every_section_and_writes_both_reports(tmp_path):
  from tools import accelerator_check  # pylint: disable=g-import-not-at-top
  env = dict(os.environ, JAX_PLATFORMS="cpu")
  proc = subprocess.run([sys.executable, "-m", "tools.accelerator_check", "--dry_run", f"--out={tmp_path}"],
                        cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
  assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
  report = json.loads((tmp_path / "accelerator_check.json").read_text())
  assert report["ok"] and report["dry_run"] and report["machine"]["platform"] == "cpu"
  assert [r["case"] for r in report["attention"]] == ["encoder self, key padding", "decoder self, causal, packed",
                                                      "cross, key padding"]
  for row in report["attention"]:  # on a CPU "auto" is XLA's own attention: the same numbers
    assert row["auto_chose"] in ("xla", "blockwise") and row["out_rel_diff"] < 1e-6 and row["grad_rel_diff"] < 1e-6
  assert [r["family"] for r in report["curves"]] == ["transformer", "lstm_bahdanau", "convs2s", "span_qa_transformer"]
  for row in report["curves"]:
    assert row["ok"] and row["gap"] < 0.05 and row["fell"], row  # bfloat16 follows float32, and both learn
    assert len(row["bf16_curve"]) == len(row["f32_curve"]) == row["steps"]
  for row in report["steps"]:
    assert row["tokens_per_s"] > 0 and row["model_flops"] > 0 and row["mfu"] is None  # no published CPU peak
    assert row["tokens_per_s"] == pytest.approx(row["batch"][0] * row["batch"][2] / row["step_seconds"])
    assert 0 < row["forward_seconds"] < row["forward_backward_seconds"]  # the backward pass costs more than nothing
    assert row["forward_backward_no_dropout_seconds"] > 0 and row["forward_backward_rbg_seconds"] > 0
  assert report["matmul"]["n"] == 256 and report["matmul"]["flops_per_s"] > 0 and report["matmul"]["of_peak"] is None
  assert report["decoding"]["sentences_per_s"] > 0 and report["decoding"]["beam"] == 4
  text = (tmp_path / "accelerator_check.md").read_text()
  for heading in ("## Fused attention", "## bfloat16 training", "## Train step", "## Beam-4 decoding"):
    assert heading in text
  assert f"JAX {report['machine']['jax']}" in text and "Overall: **pass**" in text
  assert "| forward (ms) | forward + backward (ms) | no dropout (ms) | rbg dropout (ms) |" in text and "One 256² float32 matmul" in text
  profiled = [r for r in report["steps"] if r["profile"]]  # the "chip" batch's steps are traced
  assert [r["batch_from"] for r in profiled] == ["chip", "chip"]
  for row in profiled:
    p = row["profile"]
    assert p["steps"] == accelerator_check.PROFILE_STEPS and p["kernels_per_step"] > 0 and 0 < p["busy_fraction"] <= 1
    assert 0 < p["device_ms_per_step"] <= p["span_ms_per_step"] and 0 < len(p["top_ops"]) <= 10
  assert "### Profile (" in text and "Ten most expensive ops of wmt14_en_de/transformer_big.py" in text


@pytest.mark.parametrize("name", ["gpu-8xh100", "gpu-2x8xh100", "gpu-1xh100", "gpu-1xh200"])
def test_gpu_targets_hold_the_published_chip_figures(name):
  """NVIDIA's data sheets: H100 SXM 989 TFLOP/s dense bfloat16, 80 GB at 3.35 TB/s; H200 the same compute, 141 GB
  at 4.8 TB/s."""
  target = targets.get(name)
  h200 = "h200" in name
  assert (target.peak_flops, target.hbm_bytes, target.hbm_bandwidth) == (
      989e12, 141e9 if h200 else 80e9, 4.8e12 if h200 else 3.35e12)
  assert target.platform == "gpu" and target.dtype == "bfloat16"


def test_curves_agree_within_the_tolerance_of_the_loss_drop_when_finite_and_not_stalled():
  from tools.accelerator_check import CURVE_TOLERANCE, compare_curves  # pylint: disable=g-import-not-at-top
  reference = [4.0 - 0.01 * i for i in range(100)]  # last 10 steps: mean 3.055; drop 0.945
  assert compare_curves(reference, reference) == (pytest.approx(3.055), pytest.approx(3.055), 0.0, True)
  drop = 4.0 - 3.055
  near = [x + 0.9 * CURVE_TOLERANCE * drop for x in reference]
  far = [x + 1.1 * CURVE_TOLERANCE * drop for x in reference]
  assert compare_curves(near, reference)[2] == pytest.approx(0.9 * CURVE_TOLERANCE)
  assert compare_curves(near, reference)[3] and not compare_curves(far, reference)[3]
  lagging = reference[:2] + reference[:-2]  # two steps behind: |difference| 0.02 from step 2 on
  assert compare_curves(lagging, reference)[2] == pytest.approx(0.02 * 98 / 100 / drop)
  assert compare_curves(lagging, reference)[3]
  stalled = reference[:50] + [reference[50]] * 50  # stops learning halfway: the mean gap is 0.1225 / 0.945
  assert not compare_curves(stalled, reference)[3]
  diverged = reference[:50] + [float("nan")] + reference[51:]
  assert not compare_curves(diverged, reference)[3]  # a NaN early on fails, though the tails match


def test_a_failing_section_is_reported_and_fails_the_check_without_costing_the_others(tmp_path, monkeypatch):
  from tools import accelerator_check  # pylint: disable=g-import-not-at-top

  def broken(*args, **kwargs):
    raise RuntimeError("out of memory on the device")

  monkeypatch.setattr(accelerator_check, "step_throughput", broken)
  monkeypatch.setattr(accelerator_check, "curves_check", lambda steps, rows, done, dry: [])
  monkeypatch.setattr(accelerator_check, "attention_check", lambda dry: [])
  monkeypatch.setattr(accelerator_check, "decode_throughput", lambda dry, n: {
      "model": "m", "beam": 4, "batch": 1, "source_length": 14, "sentences": 1, "sentences_per_s": 5.0})
  assert accelerator_check.main(["--dry_run", f"--out={tmp_path}"]) == 1
  report = json.loads((tmp_path / "accelerator_check.json").read_text())
  assert report["errors"] == {f"step transformer_{size} {batch}": "RuntimeError: out of memory on the device"
                              for size in ("base", "big") for batch in ("share", "chip")}
  assert report["decoding"]["sentences_per_s"] == 5.0 and not report["ok"]
  assert "## Errors" in (tmp_path / "accelerator_check.md").read_text()


def test_a_call_cut_short_keeps_the_report_of_what_was_measured_before(tmp_path, monkeypatch):
  """The machine's time limit kills the check without warning: every finished section is already on disk."""
  from tools import accelerator_check  # pylint: disable=g-import-not-at-top

  class Killed(BaseException):
    pass

  def curves(steps, rows, done, dry):
    rows.append({"family": "transformer", "steps": steps, "first_loss": 6.0, "last_loss_bf16": 1.0,
                 "last_loss_f32_cpu": 1.0, "gap": 0.0, "ok": True})
    done()
    raise Killed()  # the second family never finishes

  monkeypatch.setattr(accelerator_check, "step_throughput", lambda *a, **k: {
      "experiment": "e", "dtype": "float32", "batch": [1, 2, 3], "fused_attention": ["none"], "step_seconds": 0.5,
      "tokens_per_s": 6.0, "flops_per_s": 1e9, "mfu": None, "aot_estimate_seconds": None, "memory_gib": 0.0})
  monkeypatch.setattr(accelerator_check, "curves_check", curves)
  monkeypatch.setattr(accelerator_check, "attention_check", lambda dry: [])
  monkeypatch.setattr(accelerator_check, "decode_throughput", lambda dry, n: {
      "model": "m", "beam": 4, "batch": 1, "source_length": 14, "sentences": 1, "sentences_per_s": 5.0})
  with pytest.raises(Killed):
    accelerator_check.main(["--dry_run", f"--out={tmp_path}"])
  report = json.loads((tmp_path / "accelerator_check.json").read_text())
  assert len(report["steps"]) == 4 and report["decoding"]["sentences_per_s"] == 5.0
  assert [r["family"] for r in report["curves"]] == ["transformer"]
  assert "| transformer | 6.0000 |" in (tmp_path / "accelerator_check.md").read_text()


@pytest.mark.parametrize("chip", ["gpu-1xh100", "gpu-1xh200"])
def test_the_step_is_measured_at_the_slice_s_share_and_at_the_batch_one_chip_trains_with(chip):
  """Transformer-big's batch (97 rows of 256 tokens) over its 32-chip slice is 3 rows a device; one GPU holds all 97
  (its memory estimate is tested in tests/test_single_chip_batch.py); a chip no target names gets 8x the share."""
  from attnjax import targets  # pylint: disable=g-import-not-at-top
  from tools import accelerator_check  # pylint: disable=g-import-not-at-top
  big = "wmt14_en_de/transformer_big.py"
  assert accelerator_check.step_batch(big, "share", targets.get(chip)) == (3, 256, 256)
  assert accelerator_check.step_batch(big, "chip", targets.get(chip)) == (97, 256, 256)
  assert accelerator_check.step_batch(big, "chip", None) == (3 * accelerator_check.STEP_FILL_SCALE, 256, 256)
  with pytest.raises(ValueError, match="batch must be 'share' or 'chip'"):
    accelerator_check.step_throughput(big, True, 1, "fill")


def _gpu_trace():
  """A GPU trace as the profiler writes one (Chrome format): the host's step annotations, the device's XLA Modules
  and XLA Ops lines, and a stream line that repeats the ops (not to be counted twice). Times in µs."""
  meta = [{"ph": "M", "name": "process_name", "pid": 1, "args": {"name": "/host:CPU"}},
          {"ph": "M", "name": "process_name", "pid": 2, "args": {"name": "/device:GPU:0"}},
          {"ph": "M", "name": "thread_name", "pid": 1, "tid": 1, "args": {"name": "python"}},
          {"ph": "M", "name": "thread_name", "pid": 2, "tid": 1, "args": {"name": "XLA Modules"}},
          {"ph": "M", "name": "thread_name", "pid": 2, "tid": 2, "args": {"name": "XLA Ops"}},
          {"ph": "M", "name": "thread_name", "pid": 2, "tid": 3, "args": {"name": "Stream #7"}}]
  x = lambda pid, tid, name, ts, dur: {"ph": "X", "pid": pid, "tid": tid, "name": name, "ts": ts, "dur": dur}
  events = [x(1, 1, "train", 0, 100), x(1, 1, "train", 100, 100), x(1, 1, "train", 200, 100)]
  for base in (0, 100, 200):  # each step: gemm 10..40, fusion 30..50 (overlapping it), copy 60..65
    events += [x(2, 1, "jit_step", base + 10, 55), x(2, 2, "gemm", base + 10, 30), x(2, 2, "fusion.1", base + 30, 20),
               x(2, 2, "copy", base + 60, 5), x(2, 3, "gemm_kernel", base + 10, 30)]
  events.append(x(2, 2, "outside", 400, 50))  # after the last step: not the steps' work
  return meta + events


def test_the_profile_summary_of_a_trace_against_its_hand_computed_figures():
  from tools.accelerator_check import profile_summary  # pylint: disable=g-import-not-at-top
  p = profile_summary(_gpu_trace(), [(0, 100), (100, 200), (200, 300)], top=2)
  # per step: busy = [10, 50) ∪ [60, 65) = 45 µs; the span runs from 10 to 265: 255 µs over three steps
  assert p["steps"] == 3 and p["kernels_per_step"] == 3
  assert p["device_ms_per_step"] == pytest.approx(0.045) and p["span_ms_per_step"] == pytest.approx(0.255 / 3)
  assert p["busy_fraction"] == pytest.approx(135 / 255)
  assert p["gap_ms"] == pytest.approx(0.045)  # from 65 to the next step's 110
  assert p["top_ops"] == [{"name": "gemm", "ms_per_step": pytest.approx(0.03), "calls_per_step": 1.0},
                          {"name": "fusion.1", "ms_per_step": pytest.approx(0.02), "calls_per_step": 1.0}]
  with pytest.raises(ValueError, match="no device kernel inside the 1 annotated steps"):
    profile_summary(_gpu_trace(), [(1000, 2000)])
