"""The README's main command end to end, shrunk: both quickstart runs train, checkpoint, evaluate and plot."""

import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_quickstart_trains_evaluates_and_plots_both_models(tmp_path):
  proc = subprocess.run([sys.executable, "-m", "attnjax.quickstart", f"--workdir={tmp_path}", "--steps_scale=0.02",
                         "--eval_limit=32"], cwd=ROOT, capture_output=True, text=True, timeout=900)
  assert proc.returncode == 0, proc.stderr[-3000:]
  table = proc.stdout
  assert "transformer" in table and "lstm_bahdanau" in table and "sacreBLEU nrefs:1" in table
  for name in ("transformer", "lstm_bahdanau"):
    assert os.path.getsize(tmp_path / f"attention_{name}.png") > 1000
    assert (tmp_path / name / "config.json").exists()
    assert list((tmp_path / name / "checkpoints").iterdir())
