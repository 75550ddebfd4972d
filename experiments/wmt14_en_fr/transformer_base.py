"""WMT14 English→French, Transformer base (Vaswani et al. 2017: 38.1 BLEU on newstest2014; 65M
parameters with their 37k BPE vocabulary). Evaluate with ``--average_last=5`` as the paper averaged 5 checkpoints.

    python -m attnjax.train --config=experiments/wmt14_en_fr/transformer_base.py --workdir=gs://BUCKET/runs/NAME
    python -m attnjax.train --config=experiments/wmt14_en_fr/transformer_base.py:gpu-8xh100 ...  # another target
"""

from attnjax import recipes
from attnjax.config import base_config
from attnjax.data.catalogue import use_task
from attnjax.targets import use_target


def get_config(target="tpu-v5e-16"):
  config = base_config()
  use_task(config, "wmt14_en_fr")
  recipes.transformer(config, "base")
  use_target(config, target)
  return config
