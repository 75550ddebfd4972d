"""CNN/DailyMail (the offline subset of See et al.'s version) at CPU scale: LSTM + Bahdanau attention (See et al.
2017's baseline). One arm of the summarization table: the recipe and budget every arm shares are in
:func:`attnjax.recipes.cnndm_cpu`.

    python -m launch.launch --experiment=experiments/cnn_dailymail_cpu/lstm_bahdanau.py \
        --workdir_root=runs/summarization --split=validation,test
"""

from attnjax import recipes
from attnjax.config import base_config
from attnjax.data.catalogue import use_task


def get_config():
  config = base_config()
  use_task(config, "cnn_dailymail_subset")
  recipes.cnndm_cpu(config, "lstm_bahdanau")
  return config
