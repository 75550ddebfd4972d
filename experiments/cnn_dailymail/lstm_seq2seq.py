"""CNN/DailyMail summarization, LSTM seq2seq without attention: ROUGE-1 / 2 / L not reported by See et al. for a model without attention.
Sources truncated to 400 tokens, summaries to 100.

    python -m attnjax.train --config=experiments/cnn_dailymail/lstm_seq2seq.py --workdir=gs://BUCKET/runs/NAME
    python -m attnjax.train --config=experiments/cnn_dailymail/lstm_seq2seq.py:gpu-8xh100 ...  # another target
"""

from attnjax import recipes
from attnjax.config import base_config
from attnjax.data.catalogue import use_task
from attnjax.targets import use_target


def get_config(target="tpu-v4-8"):
  config = base_config()
  use_task(config, "cnn_dailymail")
  recipes.summarization(config, "lstm_seq2seq", max_tgt_len=100)
  use_target(config, target)
  return config
