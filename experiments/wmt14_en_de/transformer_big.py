"""WMT14 English→German, Transformer big (Vaswani et al. 2017: 28.4 BLEU on newstest2014; 213M
parameters; dropout 0.3, 300k steps). Evaluate with ``--average_last=20``.

    python -m attnjax.train --config=experiments/wmt14_en_de/transformer_big.py --workdir=gs://BUCKET/runs/NAME
    python -m attnjax.train --config=experiments/wmt14_en_de/transformer_big.py:gpu-8xh100 ...  # another target
"""

from attnjax import recipes
from attnjax.config import base_config
from attnjax.data.catalogue import use_task
from attnjax.targets import use_target


def get_config(target="tpu-v5p-64"):
  config = base_config()
  use_task(config, "wmt14_en_de")
  recipes.transformer(config, "big")
  use_target(config, target)
  return config
