"""CNN/DailyMail summarization, LSTM + Bahdanau attention (See et al. 2017's baseline): ROUGE-1 / 2 / L 31.33 / 11.81 / 28.83 (See et al. 2017's attention baseline, 50k vocabulary).
Sources truncated to 400 tokens, summaries to 100.

    python -m attnjax.train --config=experiments/cnn_dailymail/lstm_attention.py --workdir=gs://BUCKET/runs/NAME
    python -m attnjax.train --config=experiments/cnn_dailymail/lstm_attention.py:gpu-8xh100 ...  # another target
"""

from attnjax import recipes
from attnjax.config import base_config
from attnjax.data.catalogue import use_task
from attnjax.targets import use_target


def get_config(target="tpu-v4-8"):
  config = base_config()
  use_task(config, "cnn_dailymail")
  recipes.summarization(config, "lstm_attention", max_tgt_len=100)
  use_target(config, target)
  return config
