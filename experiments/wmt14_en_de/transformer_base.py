"""WMT14 English→German, Transformer base (Vaswani et al. 2017: 27.3 BLEU on newstest2014; 65M
parameters with their 37k BPE vocabulary). Evaluate with ``--average_last=5`` as the paper averaged 5 checkpoints.

    python -m attnjax.train --config=experiments/wmt14_en_de/transformer_base.py --workdir=gs://BUCKET/runs/NAME
    python -m attnjax.train --config=experiments/wmt14_en_de/transformer_base.py:gpu-8xh100 ...  # another target
"""

from attnjax import recipes
from attnjax.config import base_config
from attnjax.data.catalogue import use_task
from attnjax.targets import use_target

# Ablations of the seed study on this cell (Vaswani et al. 2017, Table 3 rows A, C and E): named sweeps of override
# sets for python -m launch.launch --sweep=NAME; every point also runs by hand, e.g. --config.model.num_heads=16.
SWEEPS = {
    "heads": [{"name": f"heads{h}", "overrides": {"model.num_heads": h}} for h in (1, 4, 8, 16)],
    "layers": [{"name": f"layers{n}", "overrides": {"model.num_encoder_layers": n, "model.num_decoder_layers": n}}
               for n in (3, 6, 12, 24)],
    "positional": [{"name": p, "overrides": {"model.positional": p}}
                   for p in ("sinusoidal", "learned", "relative", "t5")],
}


def get_config(target="tpu-v5e-16"):
  config = base_config()
  use_task(config, "wmt14_en_de")
  recipes.transformer(config, "base")
  use_target(config, target)
  return config
