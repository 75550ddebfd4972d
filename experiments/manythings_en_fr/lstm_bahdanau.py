"""Tatoeba/manythings English→French at CPU scale: LSTM + Bahdanau attention, the second language pair of the
baselines table, with the recipe and 30-minute budget of the Multi30k arms
(:func:`attnjax.recipes.manythings_cpu`).

    python -m launch.launch --experiment=experiments/manythings_en_fr/lstm_bahdanau.py --workdir_root=runs/study
"""

from attnjax import recipes
from attnjax.config import base_config
from attnjax.data.catalogue import use_task


def get_config():
  config = base_config()
  use_task(config, "manythings_en_fr")
  recipes.manythings_cpu(config, "lstm_bahdanau")
  return config
