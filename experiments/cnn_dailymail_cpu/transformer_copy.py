"""CNN/DailyMail (the offline subset of See et al.'s version) at CPU scale: Transformer + copy attention (Gehrmann et
al. 2018). One arm of the summarization table: the recipe and budget every arm shares are in
:func:`attnjax.recipes.cnndm_cpu`.

    python -m launch.launch --experiment=experiments/cnn_dailymail_cpu/transformer_copy.py \
        --workdir_root=runs/summarization --split=validation,test
"""

from attnjax import recipes
from attnjax.config import base_config
from attnjax.data.catalogue import use_task


def get_config():
  config = base_config()
  use_task(config, "cnn_dailymail_subset")
  recipes.cnndm_cpu(config, "transformer_copy")
  return config
