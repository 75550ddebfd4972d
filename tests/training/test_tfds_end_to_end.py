"""A tfds translation task through the whole config path on tfds' own mock data (no network, no TensorFlow):
read, train a SentencePiece vocabulary, tokenize, batch, one sharded train step."""

import numpy as np
import pytest

from attnjax.training import steps
from attnjax.training.loop import Experiment
from tests.training.run_steps import tiny_config


def test_wmt14_mock_examples_tokenize_batch_and_train_one_step(tmp_path):
  tfds = pytest.importorskip("tensorflow_datasets")
  rng = np.random.default_rng(0)
  words = ["the", "cat", "dog", "sat", "on", "mat", "der", "die", "das", "Hund", "Katze", "sass", "auf", "Matte"]
  examples = [{"en": " ".join(rng.choice(words[:6], 5)).encode(), "de": " ".join(rng.choice(words[6:], 5)).encode()}
              for _ in range(200)]

  def data_source(builder, split, decoders=None, deserialize_method=None, **kwargs):
    del builder, split, decoders, deserialize_method, kwargs
    return list(examples)

  config = tiny_config((1, 1, 1))
  with config.data.unlocked():
    config.data.source = "tfds_translation"
    config.data.tfds_name = "wmt14_translate/de-en"
    config.data.src_lang, config.data.tgt_lang = "en", "de"
    config.data.tfds_backend = "data_source"
    config.data.vocab_size = 32
    config.data.splits = {"train": "train", "validation": "validation", "test": "test"}
  with tfds.testing.mock_data(as_data_source_fn=data_source):
    exp = Experiment(config, str(tmp_path))
  assert exp.task.metrics == ("bleu", "chrf", "ter")
  assert (tmp_path / "spm.model").exists()
  assert exp.task.src_vocab.decode(exp.task.src_vocab.encode("the cat sat")) == "the cat sat"
  batch = next(exp.train_batches)
  assert batch["src"].shape[0] == 32 and (batch["src_mask"].sum(1) > 0).all()
  exp.state, metrics = exp.train_step(exp.state, steps.global_batch(batch, exp.mesh, exp.rules))
  assert np.isfinite(float(metrics["loss"])) and float(metrics["ntokens"]) > 0
  exp.checkpointer.close()
