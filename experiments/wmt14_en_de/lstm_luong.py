"""WMT14 English→German, LSTM + Luong global attention with input feeding (Luong et al. 2015: 20.9 (global general attention, input feeding, dropout, unk replacement; 18.1 without unk replacement and local attention) BLEU).
The score is a config choice: ``--config.model.attention=luong_dot`` (or ``luong_concat``); "general" was the
paper's best global score.

    python -m attnjax.train --config=experiments/wmt14_en_de/lstm_luong.py --workdir=gs://BUCKET/runs/NAME
    python -m attnjax.train --config=experiments/wmt14_en_de/lstm_luong.py:gpu-8xh100 ...  # another target
"""

from attnjax import recipes
from attnjax.config import base_config
from attnjax.data.catalogue import use_task
from attnjax.targets import use_target


def get_config(target="tpu-v4-8"):
  config = base_config()
  use_task(config, "wmt14_en_de")
  recipes.luong(config, "general")
  use_target(config, target)
  return config
