"""The "add a family" skeleton trained and evaluated end to end: a family registered from its module alone
(tests/families/largest_digit.py) runs through the training loop, its evaluations and ``attnjax.evaluate``, and a
checkpoint's evaluation goes through the same ``predict`` as training's."""

from __future__ import annotations

import ml_collections
import pytest

from attnjax import config as config_lib
from attnjax import families, fs
from attnjax.scoring import evaluate_checkpoint
from attnjax.training.loop import train_and_evaluate
from tests.families import largest_digit


@pytest.fixture
def registered():
  families.register(largest_digit.FAMILY)  # the registry line
  yield largest_digit.FAMILY
  families.unregister(largest_digit.FAMILY.name)


def _config():
  config = config_lib.base_config()
  with config.data.unlocked():
    config.data.source = "largest_digit"
    config.data.train_size = 256
  config.data.batch_size, config.data.max_tokens = 32, None
  config.data.max_src_len, config.data.max_tgt_len, config.data.vocab_multiple = 8, 2, 8
  config.model = ml_collections.ConfigDict(dict(name="transformer", num_encoder_layers=1, num_decoder_layers=1,
                                                d_model=32, num_heads=2, d_ff=64, dropout_rate=0.0, max_length=16))
  t = config.train
  t.steps, t.warmup_steps, t.log_every, t.eval_every, t.checkpoint_every = 24, 4, 12, 12, 12
  t.schedule, t.learning_rate, t.label_smoothing = "constant", 3e-3, 0.0
  config.eval.loss_batches = 1
  return config


def test_a_family_from_one_module_trains_and_evaluates(registered, tmp_path):
  workdir = str(tmp_path / "run")
  final = train_and_evaluate(_config(), workdir)
  saved = config_lib.load_config(workdir)
  assert (saved.train.best_metric, saved.train.best_mode) == ("accuracy", "max")  # the family's own default
  # the checkpoint evaluated by attnjax.evaluate: every example, the family's file, its metrics file
  result = evaluate_checkpoint(workdir, split="validation", checkpoint="latest")
  assert result["examples"] == largest_digit.SPLIT_SIZES["validation"] and result["step"] == 24
  # one path to a prediction: the training run's last evaluation and the checkpoint's agree
  assert result["accuracy"] == pytest.approx(final["accuracy"], abs=1e-9)
  labels = fs.read_text(result["labels"]).splitlines()
  gold = [label for _, label in largest_digit.make_split("validation", largest_digit.SPLIT_SIZES["validation"])]
  assert result["accuracy"] == pytest.approx(100.0 * sum(a == b for a, b in zip(labels, gold)) / len(gold))
  assert fs.read_json(fs.join(workdir, "metrics.validation.json"))["accuracy"] == result["accuracy"]
  # the test split, cut by --limit: the family's checkpoint task holds those examples only
  part = evaluate_checkpoint(workdir, split="test", checkpoint="latest", limit=10)
  assert part["examples"] == 10 and len(fs.read_text(part["labels"]).splitlines()) == 10


def test_an_unregistered_family_is_named_by_the_config_check():
  with pytest.raises(ValueError, match="config.data.source: must be one of .*got 'largest_digit'"):
    config_lib.validate(_config())
