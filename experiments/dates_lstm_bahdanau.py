"""LSTM encoder-decoder with Bahdanau attention (RNNsearch) on the synthetic date-normalisation task."""

import ml_collections

from attnjax.config import base_config


def get_config():
  config = base_config()
  config.model = ml_collections.ConfigDict(dict(
      name="rnn_seq2seq", attention="bahdanau", cell="lstm", embed_dim=64, hidden_dim=128, num_layers=1,
      dropout_rate=0.1))
  config.train.schedule = "constant"
  config.train.learning_rate = 3e-3
  config.train.warmup_steps = 100
  config.train.adam_b2 = 0.999
  config.train.adam_eps = 1e-8
  config.train.steps = 400  # 99.8% validation exact match at step 200 on this machine
  config.train.eval_every = 200
  config.train.checkpoint_every = 200
  return config
