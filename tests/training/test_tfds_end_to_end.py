"""Each tfds task through the whole config path on tfds' mock data (no network, no TensorFlow): read, train a
SentencePiece vocabulary, tokenize, batch, one sharded train step."""

import ml_collections
import numpy as np
import pytest

from attnjax.data.catalogue import use_task
from attnjax.runtime import partitioning
from attnjax.training.loop import Experiment
from tests.squad_fixture import synthetic_squad
from tests.training.run_steps import tiny_config


def _train_one_step(tfds, config, workdir, examples):
  def data_source(builder, split, decoders=None, deserialize_method=None, **kwargs):
    del builder, split, decoders, deserialize_method, kwargs
    return list(examples)

  with tfds.testing.mock_data(as_data_source_fn=data_source):
    exp = Experiment(config, workdir)
  batch = next(exp.train_batches)
  exp.state, metrics = exp.train_step(exp.state, partitioning.global_batch(batch, exp.mesh, exp.rules))
  exp.checkpointer.close()
  assert np.isfinite(float(metrics["loss"])) and float(metrics["ntokens"]) > 0
  return exp, batch


def test_wmt14_mock_examples_tokenize_batch_and_train_one_step(tmp_path):
  tfds = pytest.importorskip("tensorflow_datasets")
  rng = np.random.default_rng(0)
  words = ["the", "cat", "dog", "sat", "on", "mat", "der", "die", "das", "Hund", "Katze", "sass", "auf", "Matte"]
  examples = [{"en": " ".join(rng.choice(words[:6], 5)).encode(), "de": " ".join(rng.choice(words[6:], 5)).encode()}
              for _ in range(200)]
  config = tiny_config((1, 1, 1))
  use_task(config, "wmt14_en_de")
  with config.data.unlocked():
    config.data.tfds_backend = "data_source"
    config.data.vocab_size = 32
  exp, batch = _train_one_step(tfds, config, str(tmp_path), examples)
  assert exp.metrics == ("bleu", "chrf", "ter")
  assert exp.task.splits["train"][0] == tuple(x.decode() for x in (examples[0]["en"], examples[0]["de"]))
  assert (tmp_path / "spm.model").exists()
  assert exp.task.src_vocab.decode(exp.task.src_vocab.encode("the cat sat")) == "the cat sat"
  assert batch["src"].shape[0] == 32 and (batch["src_mask"].sum(1) > 0).all()


@pytest.mark.parametrize("name, keys", [("cnn_dailymail", ("article", "highlights")),
                                        ("xsum", ("document", "summary"))])
def test_summarization_mock_examples_tokenize_batch_and_train_one_step(tmp_path, name, keys):
  tfds = pytest.importorskip("tensorflow_datasets")
  rng = np.random.default_rng(1)
  words = "the council said on monday that the new bridge will open next year after delays".split()
  examples = []
  for _ in range(200):
    document = " ".join(rng.choice(words, 20))
    examples.append({keys[0]: document.encode(), keys[1]: " ".join(document.split()[:5]).encode()})
  config = tiny_config((1, 1, 1))
  use_task(config, name)
  with config.data.unlocked():
    config.data.tfds_backend = "data_source"
    config.data.vocab_size = 40
  config.data.max_src_len, config.data.max_tgt_len = 64, 16
  config.train.best_metric = "rougeL"
  exp, _ = _train_one_step(tfds, config, str(tmp_path), examples)
  assert exp.metrics == ("rouge",)
  assert exp.task.splits["train"][0] == (examples[0][keys[0]].decode(), examples[0][keys[1]].decode())


def test_squad_mock_examples_tokenize_batch_and_train_one_step(tmp_path):
  tfds = pytest.importorskip("tensorflow_datasets")
  examples = []
  for article in synthetic_squad(60, seed=0, unanswerable=0.2)["data"]:
    for paragraph in article["paragraphs"]:
      for qa in paragraph["qas"]:  # tfds' squad/v2.0 features
        examples.append({"id": qa["id"].encode(), "title": article["title"].encode(),
                         "question": qa["question"].encode(), "context": paragraph["context"].encode(),
                         "answers": {"text": [a["text"].encode() for a in qa["answers"]],
                                     "answer_start": [a["answer_start"] for a in qa["answers"]]},
                         "is_impossible": qa["is_impossible"]})
  config = tiny_config((1, 1, 1))
  use_task(config, "squad_v2")
  with config.data.unlocked():
    config.data.update(dict(tfds_backend="data_source", vocab_size=56, max_question_len=16, max_context_len=64))
  config.data.bucket_boundaries = ()
  config.model = ml_collections.ConfigDict(dict(name="span_qa", encoder="bilstm", d_model=32, num_layers=1))
  exp, batch = _train_one_step(tfds, config, str(tmp_path), examples)
  assert exp.task.kind == "span" and exp.task.version == "2.0" and sorted(exp.task.splits) == ["train", "validation"]
  real = batch["weights"] == 1
  assert real.any() and batch["is_impossible"][real].any() and (batch["context_mask"][real].sum(1) > 0).all()
  assert not batch["context_mask"][~real].any()
