"""WMT14 English→German, LSTM seq2seq without attention (Sutskever et al. 2014: not reported (en-fr only) BLEU).
The seed table's LSTM row (65M parameters): with our 32k vocabulary the paper's 4×1000 model has about 100M
(the paper's own 384M came from its 160k/80k word vocabularies).

    python -m attnjax.train --config=experiments/wmt14_en_de/lstm_seq2seq.py --workdir=gs://BUCKET/runs/NAME
    python -m attnjax.train --config=experiments/wmt14_en_de/lstm_seq2seq.py:gpu-8xh100 ...  # another target
"""

from attnjax import recipes
from attnjax.config import base_config
from attnjax.data.catalogue import use_task
from attnjax.targets import use_target


def get_config(target="tpu-v4-8"):
  config = base_config()
  use_task(config, "wmt14_en_de")
  recipes.sutskever(config)
  use_target(config, target)
  return config
