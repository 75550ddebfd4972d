"""Multi30k English→German at CPU scale: LSTM seq2seq without attention (Sutskever et al. 2014), the source reversed. One arm of the
baselines table: the recipe and budget every arm shares are in :func:`attnjax.recipes.multi30k_cpu`.

    python -m launch.launch --experiment=experiments/multi30k/lstm_seq2seq.py --workdir_root=runs/study
    python -m attnjax.report --runs=runs/study --out=docs/study
"""

from attnjax import recipes
from attnjax.config import base_config
from attnjax.data.catalogue import use_task


def get_config():
  config = base_config()
  use_task(config, "multi30k_en_de")
  recipes.multi30k_cpu(config, "lstm_seq2seq")
  return config
