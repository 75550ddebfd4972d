"""The decoder-only LM trains through the same step, checkpoints and evaluation as every other model; attnjax.evaluate
scores every held-out token and reports bits per byte over the split's own bytes."""

import math

import numpy as np
import pytest

from attnjax.data.mlm import read_articles, split_articles
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
