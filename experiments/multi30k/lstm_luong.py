"""Multi30k English→German at CPU scale: LSTM + Luong global attention (Luong et al. 2015) with input feeding, 2
layers of 256; the ``scores`` sweep gives the baselines table its dot, general and concat rows. The recipe
and budget every arm shares are in :func:`attnjax.recipes.multi30k_cpu`.

    python -m launch.launch --experiment=experiments/multi30k/lstm_luong.py --sweep=scores --workdir_root=runs/study
"""

from attnjax import recipes
from attnjax.config import base_config
from attnjax.data.catalogue import use_task

SWEEPS = {"scores": [{"name": s, "overrides": {"model.attention": f"luong_{s}"}} for s in ("dot", "general", "concat")]}


def get_config():
  config = base_config()
  use_task(config, "multi30k_en_de")
  recipes.multi30k_cpu(config, "lstm_luong_general")
  return config
