"""Masked-LM pre-training: BERT's MLM head tied to the input embeddings, the loss at the masked positions only, and
a tiny BERT trained through the same train step, checkpoints and evaluation as every other model."""

import math

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from attnjax.data import mlm
from attnjax.models.bert import BertEncoder, BertMaskedLM
from attnjax.families import masked_lm
from tests import mlm_fixture

FIELDS = dict(vocab_size=30, d_model=16, num_layers=2, num_heads=4, d_ff=24, max_length=32, layer_norm_epsilon=1e-3,
              dropout_rate=0.0, attention_dropout_rate=0.0, implementation="xla")


def _gelu(x):
  return x * 0.5 * (1.0 + np.vectorize(math.erf)(x / math.sqrt(2.0)))


def _layer_norm(x, scale, bias, eps):
  mu, var = x.mean(-1, keepdims=True), x.var(-1, keepdims=True)
  return (x - mu) / np.sqrt(var + eps) * scale + bias


def _model_and_batch():
  model = BertMaskedLM(**FIELDS)
  rng = np.random.default_rng(0)
  ids = rng.integers(5, 30, size=(3, 12)).astype(np.int32)
  segments = np.array([[1] * 7 + [2] * 5, [1] * 12, [1] * 9 + [0] * 3], np.int32)
  positions = np.concatenate([np.arange(7), np.arange(5)])[None].repeat(3, 0).astype(np.int32)
  positions[1], positions[2] = np.arange(12), np.where(segments[2] > 0, np.arange(12), 0)
  params = nn.meta.unbox(model.init(jax.random.PRNGKey(0), ids, segments, positions)["params"])
  params = jax.tree_util.tree_map(lambda p: p + 0.05 * jax.random.normal(jax.random.PRNGKey(1), p.shape),
                                  jax.tree_util.tree_map(jnp.asarray, params))  # no zero biases or unit scales
  return model, params, ids, segments, positions


def test_the_mlm_head_is_tied_to_the_input_embeddings_and_equals_its_formula():
  model, params, ids, segments, positions = _model_and_batch()
  names = {jax.tree_util.keystr(path) for path, _ in jax.tree_util.tree_flatten_with_path(params)[0]}
  assert not any("decoder" in n or "kernel" in n and "output" in n for n in names)  # no output matrix of its own
  assert any("word_embeddings" in n for n in names)
  logits = np.asarray(model.apply({"params": params}, ids, segments, positions))
  encoder = BertEncoder(**FIELDS, use_pooler=False)
  hidden = np.asarray(encoder.apply({"params": params["bert"]}, ids, segment_ids=segments,
                                    positions=positions)["last_hidden_state"], np.float64)
  p = jax.tree_util.tree_map(lambda a: np.asarray(a, np.float64), params)
  h = _layer_norm(_gelu(hidden @ p["transform"]["kernel"] + p["transform"]["bias"]), p["transform_norm"]["scale"],
                  p["transform_norm"]["bias"], 1e-3)
  expected = h @ p["bert"]["word_embeddings"]["embedding"].T + p["output_bias"]
  np.testing.assert_allclose(logits, expected, atol=1e-4, rtol=1e-4)
  chosen = np.array([[0, 3, 8], [11, 2, 2], [1, 0, 0]], np.int32)
  gathered = np.asarray(model.apply({"params": params}, ids, segments, positions, chosen))
  np.testing.assert_allclose(gathered, np.take_along_axis(logits, chosen[..., None], axis=1), atol=1e-5)


def test_the_loss_is_the_cross_entropy_at_the_masked_positions_only():
  model, params, ids, segments, positions = _model_and_batch()
  batch = {"input_ids": ids, "segment_ids": segments, "positions": positions,
           "mlm_positions": np.array([[1, 4, 0], [2, 3, 9], [5, 0, 0]], np.int32),
           "mlm_ids": np.array([[7, 8, 0], [9, 10, 11], [12, 0, 0]], np.int32),
           "mlm_weights": np.array([[1, 1, 0], [1, 1, 1], [1, 0, 0]], np.float32)}
  stats = jax.device_get(masked_lm.mlm_loss_stats(model, params, batch, None, True))
  logits = np.asarray(model.apply({"params": params}, ids, segments, positions), np.float64)
  log_probs = logits - np.log(np.exp(logits - logits.max(-1, keepdims=True)).sum(-1, keepdims=True)) - logits.max(
      -1, keepdims=True)
  nll = correct = 0.0
  for r in range(3):
    for j in range(3):
      if batch["mlm_weights"][r, j]:
        at, target = batch["mlm_positions"][r, j], batch["mlm_ids"][r, j]
        nll -= log_probs[r, at, target]
        correct += float(np.argmax(logits[r, at]) == target)
  assert stats["ntokens"] == 6 and stats["loss_sum"] == pytest.approx(nll, rel=1e-5)
  assert stats["correct_sum"] == correct
  batch["mlm_ids"] = np.where(batch["mlm_weights"] > 0, batch["mlm_ids"], 29)  # padding targets change nothing
  assert jax.device_get(masked_lm.mlm_loss_stats(model, params, batch, None, True))["loss_sum"] == pytest.approx(nll,
                                                                                                             rel=1e-5)


def _masked_lm_scores(workdir, step, batches):
  """(loss, accuracy, near ties) of checkpoint ``step`` over the masked positions of ``batches``: the model's logits
  at every position, then log-softmax and argmax at each weighted prediction, in float64. The near ties are the share
  of predictions whose two best logits are closer than float32 rounding of two differently compiled programs can
  move them (1e-4 of the row's largest logit, hundreds of float32 rounding units): the evaluation's argmax may
  take the other there, and its accuracy may differ from this one by at most that share."""
  from attnjax import trained  # pylint: disable=g-import-not-at-top
  loaded = trained.load_workdir(str(workdir), checkpoint=str(step))
  nll, correct, ties, count = 0.0, 0, 0, 0
  for b in batches:
    logits = np.asarray(loaded.model.apply({"params": loaded.params}, b["input_ids"], b["segment_ids"],
                                           b["positions"]), np.float64)
    for r, j in zip(*np.nonzero(b["mlm_weights"])):
      row, target = logits[r, b["mlm_positions"][r, j]], b["mlm_ids"][r, j]
      nll -= row[target] - row.max() - np.log(np.exp(row - row.max()).sum())
      correct += int(np.argmax(row) == target)
      second, first = np.sort(row)[-2:]
      ties += int(first - second <= 1e-4 * (1.0 + np.abs(row).max()))
      count += 1
  return nll / count, correct / count, ties / count


def test_a_tiny_bert_pre_trains_through_the_train_step_and_beats_the_frequency_baseline(tmp_path):
  from attnjax.training.loop import train_and_evaluate  # pylint: disable=g-import-not-at-top
  config = mlm_fixture.tiny_mlm_config(tmp_path / "data")
  result = train_and_evaluate(config, str(tmp_path / "run"))
  assert result["step"] == 60
  # every validation row scored: the predictions the evaluation masks, counted here from the data alone
  task = mlm.MlmTaskData(config.data, str(tmp_path / "run"))
  batches = list(task.batcher("validation", shuffle=False, seed=0, batch_size=8).iterate_epoch(0))
  assert result["mlm_predictions"] == sum(float(b["mlm_weights"].sum()) for b in batches)
  # better than always answering the validation targets' most frequent token
  targets = np.concatenate([b["mlm_ids"][b["mlm_weights"] > 0] for b in batches])
  baseline = np.bincount(targets).max() / len(targets)
  assert result["mlm_accuracy"] > baseline + 0.1, (result, baseline)
  assert result["mlm_loss"] < math.log(task.vocab.size) - 1.0
  # the last evaluation's values are step 60's over those masked positions; the best checkpoint is the more accurate
  validation = {step: _masked_lm_scores(tmp_path / "run", step, batches) for step in (30, 60)}
  assert result["mlm_loss"] == pytest.approx(validation[60][0], rel=1e-5)
  assert validation[60][2] < 0.05 and abs(result["mlm_accuracy"] - validation[60][1]) <= validation[60][2] + 1e-9
  assert validation[30][1] != validation[60][1]
  best = max(validation, key=lambda step: validation[step][1])
  # attnjax.evaluate scores every row of the test split from the best checkpoint, masked as the batcher masks it
  from attnjax.scoring import evaluate_checkpoint  # pylint: disable=g-import-not-at-top
  scored = evaluate_checkpoint(str(tmp_path / "run"), split="test")
  test_batches = list(task.batcher("test", shuffle=False, seed=0, batch_size=8).iterate_epoch(0))
  assert scored["examples"] == len(task.rows("test")[0]) and scored["mlm_predictions"] == sum(
      float(b["mlm_weights"].sum()) for b in test_batches)
  # its values are the best checkpoint's over the test split's masked positions
  loss, accuracy, ties = _masked_lm_scores(tmp_path / "run", best, test_batches)
  assert scored["step"] == best and scored["mlm_loss"] == pytest.approx(loss, rel=1e-5)
  assert abs(scored["mlm_accuracy"] - accuracy) <= ties + 1e-9
  assert (tmp_path / "run" / "metrics.test.json").exists()
  # a reader can start from this run's encoder: the parameters of its best checkpoint's "bert"
  from attnjax.training import warm_start  # pylint: disable=g-import-not-at-top
  encoder = warm_start.encoder_params(str(tmp_path / "run"))
  assert "word_embeddings" in encoder and "pooler" not in encoder and "layer_1" in encoder
  # pre-training saw token type 0 only: the reader's type 1 (its context) starts as the trained type 0, and the
  # other parameters are the checkpoint's own
  from attnjax import trained  # pylint: disable=g-import-not-at-top
  saved = trained.load_workdir(str(tmp_path / "run"), checkpoint="best").params["bert"]
  trained = np.asarray(saved["token_type_embeddings"]["embedding"])
  assert not np.array_equal(trained[0], trained[1])  # the saved type 1 is its random init
  np.testing.assert_array_equal(encoder["token_type_embeddings"]["embedding"], trained[[0, 0]])
  np.testing.assert_array_equal(encoder["word_embeddings"]["embedding"], saved["word_embeddings"]["embedding"])
