"""SQuAD 1.1, the Transformer reader trained from scratch: QANet (Yu et al. 2018): 73.6 EM / 82.7 F1 on the dev set, with GloVe.
Ours has no pretrained or character embeddings.

    python -m attnjax.train --config=experiments/squad_v1/transformer_reader.py --workdir=gs://BUCKET/runs/NAME
    python -m attnjax.train --config=experiments/squad_v1/transformer_reader.py:gpu-8xh100 ...  # another target
"""

from attnjax import recipes
from attnjax.config import base_config
from attnjax.data.catalogue import use_task
from attnjax.targets import use_target


def get_config(target="tpu-v4-8"):
  config = base_config()
  use_task(config, "squad_v1")
  recipes.reader(config, "transformer", version2=False)
  use_target(config, target)
  return config
