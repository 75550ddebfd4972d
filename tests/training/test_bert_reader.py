"""The span-QA reader over a BERT encoder: its outputs are BERT's over "[CLS] question [SEP] context [SEP]", a
pre-trained encoder (a Hugging Face checkpoint, or the masked-LM run's workdir) loads into it exactly, and it
fine-tunes and is evaluated through the same loop, with the WordPiece vocabulary kept in the workdir."""

import json
import os

import flax.linen as nn
import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import pytest
from safetensors.numpy import load_file

from attnjax.config import base_config
from attnjax.models.bert import BertEncoder
from attnjax.models.span_qa import SpanQA
from attnjax.transfer import bert
from attnjax.training import warm_start
from attnjax.training.loop import Experiment, train_and_evaluate
from tests.squad_fixture import FILLER, NAMES, VALUES, synthetic_squad, write_squad
from tests.transfer.test_bert import CONFIG, _random_tensors

WORDS = sorted(set(NAMES + VALUES + " ".join(FILLER).split() + ["what", "is", "?", "."]))
SIZE = dict(d_model=16, num_layers=2, num_heads=4, d_ff=24, max_length=128)


def write_checkpoint(directory, **changes):
  """A random BERT checkpoint over the fixture's words (``[CLS]`` 2, ``[SEP]`` 3)."""
  config = dict(CONFIG, vocab_size=5 + len(WORDS), max_position_embeddings=128, **changes)
  os.makedirs(directory, exist_ok=True)
  with open(os.path.join(directory, "config.json"), "w", encoding="utf-8") as f:
    json.dump(config, f)
  from safetensors.numpy import save_file  # pylint: disable=g-import-not-at-top
  save_file(_random_tensors(config, seed=4), os.path.join(directory, "model.safetensors"))
  with open(os.path.join(directory, "vocab.txt"), "w", encoding="utf-8") as f:
    f.write("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + WORDS) + "\n")
  return str(directory)


def reader_config(directory, checkpoint, *, steps):
  write_squad(os.path.join(directory, "train.json"), synthetic_squad(400, seed=0))
  write_squad(os.path.join(directory, "dev.json"), synthetic_squad(20, seed=1))
  config = base_config()
  with config.data.unlocked():
    config.data.source = "squad_json"
    config.data.dir = str(directory)
    config.data.splits = {"train": "train.json", "validation": "dev.json"}
    config.data.vocab_file = os.path.join(checkpoint, "vocab.txt")
    config.data.max_question_len = 16
    config.data.max_context_len = 48
  config.data.batch_size, config.data.max_tokens, config.data.bucket_boundaries = 16, None, ()
  config.data.vocab_multiple = 1
  config.model = ml_collections.ConfigDict(dict(name="span_qa", encoder="bert", dropout_rate=0.0, cls_id=2, sep_id=3,
                                                layer_norm_epsilon=1e-3, allow_no_answer=False, **SIZE))
  t = config.train
  t.steps, t.eval_every, t.checkpoint_every, t.log_every = steps, steps, steps, steps
  t.schedule, t.learning_rate, t.warmup_steps, t.label_smoothing, t.best_metric = "constant", 1e-3, 5, 0.0, "f1"
  with t.unlocked():
    t.init_encoder_from = checkpoint
  config.eval.batch_size = 32
  return config


def test_the_bert_reader_scores_spans_with_berts_hidden_states_of_the_unpadded_pair():
  model = SpanQA(vocab_size=30, encoder="bert", dropout_rate=0.0, cls_id=2, sep_id=3, layer_norm_epsilon=1e-3, **SIZE)
  question = np.array([[5, 6, 7, 0], [8, 9, 10, 11]], np.int32)
  context = np.array([[12, 13, 14, 15, 0, 0], [16, 17, 18, 19, 20, 21]], np.int32)
  params = nn.meta.unbox(model.init(jax.random.PRNGKey(0), question, context)["params"])
  out = model.apply({"params": params}, question, context)
  encoder = BertEncoder(30, use_pooler=False, layer_norm_epsilon=1e-3, dropout_rate=0.0, attention_dropout_rate=0.0,
                        **{k: SIZE[k] for k in ("d_model", "num_layers", "num_heads", "d_ff", "max_length")})
  w = np.asarray(params["qa_outputs"]["kernel"])
  b = np.asarray(params["qa_outputs"]["bias"])
  for row in range(2):
    q, c = question[row][question[row] > 0], context[row][context[row] > 0]
    ids = np.concatenate([[2], q, [3], c, [3]])[None]
    types = np.concatenate([np.zeros(len(q) + 2), np.ones(len(c) + 1)]).astype(np.int32)[None]
    hidden = np.asarray(encoder.apply({"params": params["bert"]}, ids, token_type_ids=types)["last_hidden_state"])[0]
    logits = hidden[len(q) + 2:len(q) + 2 + len(c)] @ w + b
    np.testing.assert_allclose(np.asarray(out["start_logits"][row, :len(c)]), logits[:, 0], atol=1e-5)
    np.testing.assert_allclose(np.asarray(out["end_logits"][row, :len(c)]), logits[:, 1], atol=1e-5)
    null = hidden[0] @ w + b  # the null span's start and end at [CLS]
    np.testing.assert_allclose(np.asarray(out["no_answer_start_logit"][row]), null[0], atol=1e-5)
    np.testing.assert_allclose(np.asarray(out["no_answer_end_logit"][row]), null[1], atol=1e-5)
    np.testing.assert_allclose(np.asarray(out["no_answer_logit"][row]), null.sum(), atol=1e-5)


def test_a_hugging_face_encoder_loads_into_the_reader_exactly_and_fine_tunes(tmp_path):
  checkpoint = write_checkpoint(tmp_path / "bert")
  config = reader_config(tmp_path, checkpoint, steps=40)
  exp = Experiment(config, str(tmp_path / "probe"))
  warm_start.init_encoder(exp, checkpoint)
  expected = bert.params_from_tensors(load_file(os.path.join(checkpoint, "model.safetensors")), bert.read_config(
      checkpoint))
  expected.pop("pooler")
  got = jax.device_get(exp.state.params["bert"])
  assert jax.tree_util.tree_structure(got) == jax.tree_util.tree_structure(expected)
  assert jax.tree_util.tree_all(jax.tree_util.tree_map(lambda a, b: np.array_equal(a, b), got, expected))
  result = train_and_evaluate(config, str(tmp_path / "run"))
  assert result["step"] == 40 and np.isfinite(result["loss"]) and "f1" in result
  assert (tmp_path / "run" / "wordpiece.vocab.txt").read_text() == (tmp_path / "bert" / "vocab.txt").read_text()


def test_the_loop_starts_fine_tuning_from_the_imported_encoder_and_a_fresh_head(tmp_path):
  """What train_and_evaluate itself trains from: one step at learning rate 0 leaves the parameters where the loop
  started, so its checkpoint holds the Hugging Face encoder exactly, and the span head of a fresh initialisation."""
  from attnjax.trained import load_workdir  # pylint: disable=g-import-not-at-top
  checkpoint = write_checkpoint(tmp_path / "bert")
  config = reader_config(tmp_path, checkpoint, steps=1)
  config.train.learning_rate = 0.0
  assert train_and_evaluate(config, str(tmp_path / "run"))["step"] == 1
  saved = jax.device_get(load_workdir(str(tmp_path / "run"), checkpoint="1").params)
  expected = bert.params_from_tensors(load_file(os.path.join(checkpoint, "model.safetensors")), bert.read_config(
      checkpoint))
  expected.pop("pooler")
  assert jax.tree_util.tree_structure(saved["bert"]) == jax.tree_util.tree_structure(expected)
  jax.tree_util.tree_map(np.testing.assert_array_equal, saved["bert"], expected)
  fresh = jax.device_get(Experiment(config, str(tmp_path / "fresh")).state.params)
  assert set(saved) == set(fresh) == {"bert", "qa_outputs"}
  jax.tree_util.tree_map(np.testing.assert_array_equal, saved["qa_outputs"], fresh["qa_outputs"])


def test_an_encoder_that_does_not_fit_the_reader_is_refused_naming_the_parameter(tmp_path):
  checkpoint = write_checkpoint(tmp_path / "wide", hidden_size=32, num_attention_heads=4)
  config = reader_config(tmp_path, checkpoint, steps=1)
  exp = Experiment(config, str(tmp_path / "probe"))
  with pytest.raises(ValueError, match=r"train.init_encoder_from: parameter \S+ has shape \(\d+, 32\)"):
    warm_start.init_encoder(exp, checkpoint)
  with pytest.raises(FileNotFoundError, match="neither a Hugging Face checkpoint"):
    warm_start.init_encoder(exp, str(tmp_path))


def test_a_reader_whose_norms_sit_elsewhere_than_its_encoders_is_refused_naming_the_fix(tmp_path):
  """A Hugging Face BERT is post-norm: a pre-norm reader would put its LayerNorms in other places than the weights
  were trained with, and silently train the final one from scratch; an attnjax workdir says which it is."""
  from attnjax import config as config_lib  # pylint: disable=g-import-not-at-top
  checkpoint = write_checkpoint(tmp_path / "bert")
  config = reader_config(tmp_path, checkpoint, steps=1)
  config.model.pre_norm = True
  exp = Experiment(config, str(tmp_path / "probe"))
  with pytest.raises(ValueError, match=r"train.init_encoder_from=.*bert: its encoder is post-norm, this model's "
                                       r"pre-norm: set model.pre_norm=False"):
    warm_start.init_encoder(exp, checkpoint)
  assert not warm_start.encoder_is_pre_norm(checkpoint)
  workdir = tmp_path / "mlm"
  (workdir / "checkpoints").mkdir(parents=True)
  mlm = config_lib.base_config()
  mlm.model = dict(name="bert_mlm", pre_norm=True)
  (workdir / "config.json").write_text(mlm.to_json())
  assert warm_start.encoder_is_pre_norm(str(workdir))
  mlm.model.pre_norm = False
  (workdir / "config.json").write_text(mlm.to_json())
  assert not warm_start.encoder_is_pre_norm(str(workdir))
