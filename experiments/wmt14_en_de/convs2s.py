"""WMT14 English→German, ConvS2S (Gehring et al. 2017: 25.16 BLEU on newstest2014). Trained on 8 GPUs in the
paper, hence the default target.

    python -m attnjax.train --config=experiments/wmt14_en_de/convs2s.py --workdir=gs://BUCKET/runs/NAME
    python -m attnjax.train --config=experiments/wmt14_en_de/convs2s.py:gpu-8xh100 ...  # another target
"""

from attnjax import recipes
from attnjax.config import base_config
from attnjax.data.catalogue import use_task
from attnjax.targets import use_target


def get_config(target="gpu-8xh100"):
  config = base_config()
  use_task(config, "wmt14_en_de")
  recipes.convs2s(config)
  use_target(config, target)
  return config
