"""Experiment configs: validation names the offending key before anything is built; a workdir's config round-trips."""

import ml_collections
import pytest

from attnjax import config as config_lib
from attnjax.models.registry import build_model
from attnjax.config import load_config, save_config


def _config(**changes):
  config = config_lib.base_config()
  for dotted, value in changes.items():
    section, key = dotted.split(".")
    with config[section].unlocked() if hasattr(config[section], "unlocked") else config.unlocked():
      config[section][key] = value
  return config


@pytest.mark.parametrize("changes, match", [
    ({"model.num_heads": 5}, "num_heads"),
    ({"model.name": "lstm"}, "model.name"),
    ({"model.n_layers": 3}, "model.n_layers"),
    ({"model.share_source_embeddings": True, "model.shared_vocab": False}, "shared_vocab"),
    ({"train.label_smoothing": 1.5}, "train.label_smoothing"),
    ({"train.best_metric": "accuracy"}, "train.best_metric"),
    ({"eval.decode": "sampling"}, "eval.decode"),
    ({"data.source": "csv"}, "data.source"),
    ({"data.batch_size": 32}, "data.batch_size"),  # together with max_tokens
    ({"data.shuffle_buffer": 10}, "data.shuffle_buffer"),
    ({"mesh.shape": (2, 2)}, "mesh.shape"),
    ({"mesh.rules": (("batch", "pipeline"),)}, "mesh.rules"),
])
def test_invalid_configs_are_refused_naming_the_key(changes, match):
  with pytest.raises(ValueError, match=match):
    config_lib.validate(_config(**changes))


def test_packing_is_refused_for_models_without_segment_masks():
  config = config_lib.base_config()
  config.model = ml_collections.ConfigDict(dict(name="rnn_seq2seq", attention="bahdanau"))
  config.data.pack = True
  with pytest.raises(ValueError, match="data.pack"):
    config_lib.validate(config)


def test_the_base_config_and_experiment_overrides_validate():
  config_lib.validate(config_lib.base_config())
  model = build_model(dict(name="transformer", preset="base"), src_vocab_size=100, tgt_vocab_size=100)
  assert (model.d_model, model.num_heads, model.d_ff) == (512, 8, 2048)


def test_saved_config_loads_back_identically(tmp_path):
  config = config_lib.base_config()
  config.model = ml_collections.ConfigDict(dict(name="rnn_seq2seq", attention="luong_general", hidden_dim=64))
  config.mesh.shape = (2, 1, 4)
  with config.data.unlocked():
    config.data.splits = {"train": "train", "test": "test2016"}
  save_config(config, str(tmp_path))
  loaded = load_config(str(tmp_path))
  assert loaded.to_dict() == config.to_dict()
  config_lib.validate(loaded)


def test_a_copy_model_needs_one_vocabulary_for_both_sides():
  config = config_lib.base_config()
  config.model = dict(name="rnn_seq2seq", attention="bahdanau", copy=True)
  config.data.joint_vocab = False
  with pytest.raises(ValueError, match=r"config.model.copy: .*data.joint_vocab=True"):
    config_lib.validate(config)
