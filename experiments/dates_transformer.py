"""Transformer (3+3 layers, d_model 128) on the synthetic date-normalisation task: the quickstart's first model."""

from attnjax.config import base_config


def get_config():
  config = base_config()
  config.train.steps = 1500
  config.train.eval_every = 500
  config.train.checkpoint_every = 500
  return config
