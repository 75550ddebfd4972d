"""SQuAD 2.0, the BiLSTM (BiDAF-style) reader trained from scratch: BiDAF-No-Answer (Rajpurkar et al. 2018): 59.8 EM / 62.6 F1 on the dev set.
Ours has no pretrained or character embeddings.

    python -m attnjax.train --config=experiments/squad_v2/bilstm_reader.py --workdir=gs://BUCKET/runs/NAME
    python -m attnjax.train --config=experiments/squad_v2/bilstm_reader.py:gpu-8xh100 ...  # another target
"""

from attnjax import recipes
from attnjax.config import base_config
from attnjax.data.catalogue import use_task
from attnjax.targets import use_target


def get_config(target="tpu-v4-8"):
  config = base_config()
  use_task(config, "squad_v2")
  recipes.reader(config, "bilstm", version2=True)
  use_target(config, target)
  return config
