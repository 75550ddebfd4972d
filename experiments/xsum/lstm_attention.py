"""XSum summarization, LSTM + Bahdanau attention (See et al. 2017's baseline): ROUGE-1 / 2 / L 28.42 / 8.77 / 22.48 (Narayan et al. 2018's attention seq2seq).
Sources truncated to 400 tokens, summaries to 90.

    python -m attnjax.train --config=experiments/xsum/lstm_attention.py --workdir=gs://BUCKET/runs/NAME
    python -m attnjax.train --config=experiments/xsum/lstm_attention.py:gpu-8xh100 ...  # another target
"""

from attnjax import recipes
from attnjax.config import base_config
from attnjax.data.catalogue import use_task
from attnjax.targets import use_target


def get_config(target="tpu-v4-8"):
  config = base_config()
  use_task(config, "xsum")
  recipes.summarization(config, "lstm_attention", max_tgt_len=90)
  use_target(config, target)
  return config
