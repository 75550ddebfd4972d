"""The decoder-only LM trains through the same step, checkpoints and evaluation as every other model; attnjax.evaluate
scores every held-out token and reports bits per byte over the split's own bytes."""

import json
import math

import numpy as np
import pytest

from attnjax.data.lm import stream_rows
from attnjax.data.articles import read_articles, split_articles
from attnjax.scoring import evaluate_checkpoint
from attnjax.training.loop import train_and_evaluate
from tests import lm_fixture


def test_a_tiny_lm_trains_and_is_scored_in_bits_per_byte_of_its_held_out_text(tmp_path):
  config = lm_fixture.tiny_lm_config(tmp_path / "data")
  result = train_and_evaluate(config, str(tmp_path / "run"))
  assert result["step"] == 60 and config.train.best_mode == "min"
  scored = evaluate_checkpoint(str(tmp_path / "run"), split="test")
  # independently: the test split's texts, their tokens (+ EOS each) and their bytes (+ 1 each)
  from attnjax.data.tokenizer import SentencePieceVocab  # pylint: disable=g-import-not-at-top
  vocab = SentencePieceVocab.load(tmp_path / "run" / "spm.model")
  texts = split_articles(read_articles(tmp_path / "data" / "articles.jsonl"), dict(config.data.heldout))["test"]
  tokens = sum(len(vocab.encode(t)) + 1 for t in texts)
  num_bytes = sum(len(t.encode("utf-8")) + 1 for t in texts)
  assert scored["lm_tokens"] == tokens
  assert scored["bits_per_byte"] == pytest.approx(scored["lm_loss"] * tokens / math.log(2) / num_bytes)
  uniform = math.log2(vocab.size) * tokens / num_bytes  # a model that learned nothing
  assert scored["bits_per_byte"] < 0.6 * uniform, (scored, uniform)
  assert np.isfinite(result["bits_per_byte"])
  # rows twice as long as in training: the same tokens, their loss split by how far each input is from its row's or
  # document's start (position extrapolation)
  longer = evaluate_checkpoint(str(tmp_path / "run"), split="test", eval_overrides={"seq_len": 64})
  assert longer["lm_tokens"] == tokens and longer["trained_seq_len"] == 32 and longer["seq_len"] == 64
  rows = stream_rows([vocab.encode(t) for t in texts], 64)
  beyond = float(rows["weights"][rows["positions"] >= 32].sum())
  assert set(longer["loss_by_position"]) == {"0-32", "32-64"} and beyond > 0
  mean = ((tokens - beyond) * longer["loss_by_position"]["0-32"] + beyond * longer["loss_by_position"]["32-64"]) / tokens
  assert mean == pytest.approx(longer["lm_loss"], rel=1e-6)
  # written beside the split's own scores, which stay those of the training length
  saved = {p.name: json.loads(p.read_text()) for p in (tmp_path / "run").glob("metrics.test*.json")}
  assert saved["metrics.test.json"]["lm_loss"] == pytest.approx(scored["lm_loss"])
  assert saved["metrics.test.len64.json"]["loss_by_position"] == longer["loss_by_position"]


def test_runs_sharing_a_cache_build_the_vocabulary_and_rows_once_and_get_the_same(tmp_path):
  from attnjax.families import load_task  # pylint: disable=g-import-not-at-top
  config = lm_fixture.tiny_lm_config(tmp_path / "data")
  with config.data.unlocked():
    config.data.shared_cache_dir = str(tmp_path / "shared")
  first = load_task(config.data, str(tmp_path / "run1"))
  rows = first.rows("train")
  second = load_task(config.data, str(tmp_path / "run2"))
  assert (tmp_path / "run2" / "spm.model").read_bytes() == (tmp_path / "run1" / "spm.model").read_bytes()
  assert sorted(p.name.split(".")[1] for p in (tmp_path / "shared").glob("lm.*.npz")) == ["train"]
  assert not list((tmp_path / "run1").glob("lm.*.npz"))  # the rows are kept once, in the shared directory
  for key, value in second.rows("train").items():
    np.testing.assert_array_equal(value, rows[key])
  alone = load_task(lm_fixture.tiny_lm_config(tmp_path / "data").data, str(tmp_path / "alone"))
  for key, value in alone.rows("train").items():  # what a run builds for itself
    np.testing.assert_array_equal(value, rows[key])


def test_a_data_sweeps_subsets_are_nested_samples_of_every_article_not_the_first(tmp_path):
  from attnjax.families import load_task  # pylint: disable=g-import-not-at-top
  config = lm_fixture.tiny_lm_config(tmp_path / "data")
  task = load_task(config.data, str(tmp_path / "run"))
  rows = task.rows("train")
  n = len(rows["inputs"])
  kept = {}
  for tokens in (4 * 32, 8 * 32, 16 * 32):
    with config.data.unlocked():
      config.data.train_tokens = tokens
    batcher = load_task(config.data, str(tmp_path / "run")).batcher("train", shuffle=False, seed=0, batch_size=4)
    seen = np.concatenate([b["inputs"] for b in batcher.iterate_epoch(0)])
    # the batches are exactly the chosen rows, each once: look each up among all rows
    index = [int(np.flatnonzero((rows["inputs"] == row).all(axis=1))[0]) for row in seen]
    assert len(index) == tokens // 32 and len(set(index)) == len(index)
    kept[tokens] = set(index)
  assert kept[4 * 32] < kept[8 * 32] < kept[16 * 32]  # nested
  assert kept[4 * 32] != set(range(4)) and n > 16  # not the file's first rows (the first articles by title)
  with config.data.unlocked():
    config.data.train_tokens = (n + 1) * 32
  with pytest.raises(ValueError, match=r"data.train_tokens=\d+ is more than the training split's"):
    load_task(config.data, str(tmp_path / "run")).batcher("train", shuffle=False, seed=0, batch_size=4)
