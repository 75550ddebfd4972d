"""XSum summarization, Transformer (TransformerAbs sizes): ROUGE-1 / 2 / L 29.41 / 9.77 / 23.01 (TransformerAbs, Liu & Lapata 2019).
Sources truncated to 400 tokens, summaries to 90.

    python -m attnjax.train --config=experiments/xsum/transformer.py --workdir=gs://BUCKET/runs/NAME
    python -m attnjax.train --config=experiments/xsum/transformer.py:gpu-8xh100 ...  # another target
"""

from attnjax import recipes
from attnjax.config import base_config
from attnjax.data.catalogue import use_task
from attnjax.targets import use_target


def get_config(target="tpu-v4-8"):
  config = base_config()
  use_task(config, "xsum")
  recipes.summarization(config, "transformer", max_tgt_len=90)
  use_target(config, target)
  return config
