"""WMT14 English→German, RNNsearch: LSTM + Bahdanau attention (Bahdanau et al. 2015: not reported (RNNsearch was evaluated on en-fr only) BLEU).
The seed table's LSTM + attention row (72M parameters).

    python -m attnjax.train --config=experiments/wmt14_en_de/lstm_bahdanau.py --workdir=gs://BUCKET/runs/NAME
    python -m attnjax.train --config=experiments/wmt14_en_de/lstm_bahdanau.py:gpu-8xh100 ...  # another target
"""

from attnjax import recipes
from attnjax.config import base_config
from attnjax.data.catalogue import use_task
from attnjax.targets import use_target


def get_config(target="tpu-v4-8"):
  config = base_config()
  use_task(config, "wmt14_en_de")
  recipes.rnnsearch(config)
  use_target(config, target)
  return config
