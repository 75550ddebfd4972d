"""SQuAD 2.0, the Transformer reader trained from scratch: no from-scratch Transformer reader is reported on SQuAD 2.0.
Ours has no pretrained or character embeddings.

    python -m attnjax.train --config=experiments/squad_v2/transformer_reader.py --workdir=gs://BUCKET/runs/NAME
    python -m attnjax.train --config=experiments/squad_v2/transformer_reader.py:gpu-8xh100 ...  # another target
"""

from attnjax import recipes
from attnjax.config import base_config
from attnjax.data.catalogue import use_task
from attnjax.targets import use_target


def get_config(target="tpu-v4-8"):
  config = base_config()
  use_task(config, "squad_v2")
  recipes.reader(config, "transformer", version2=True)
  use_target(config, target)
  return config
