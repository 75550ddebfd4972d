"""Tatoeba/manythings English→French at CPU scale: the Transformer row of the second language pair, with
the recipe and 30-minute budget of the Multi30k arms (:func:`attnjax.recipes.manythings_cpu`), and the ``size`` sweep
of the scaling-law fit.

    python -m launch.launch --experiment=experiments/manythings_en_fr/transformer.py --workdir_root=runs/study
    python -m launch.launch --experiment=experiments/manythings_en_fr/transformer.py --sweep=size \\
        --workdir_root=runs/study --split=validation

``size``: five widths of the same 3 + 3 layer Transformer (d_ff = 4 · d_model, 4 heads), d_model 64 to 384, that
is 0.35M to 12.4M non-embedding parameters (35×), each trained on the same token budget (1,500 batches of 4,096
target tokens, at most 4.7 passes over the training split's 1.3M target tokens; the 10-hour limit never binds:
d_model 64 and 128 took 36 and 40 minutes here, the larger sizes take longer)
without dropout, so that the validation loss measures what each size can fit in that budget. ``attnjax.report``
fits L(N) = (N_c / N)^α to the sweep's best validation losses (Kaplan et al. 2020 report α ≈ 0.076 for language
models trained to convergence).
"""

from attnjax import recipes
from attnjax.config import base_config
from attnjax.data.catalogue import use_task

SWEEPS = {
    "size": [{"name": f"d{d}", "overrides": {"model.d_model": d, "model.d_ff": 4 * d, "model.dropout_rate": 0.0,
                                              "model.attention_dropout_rate": 0.0, "train.steps": 1500,
                                              "train.time_limit_minutes": 600.0, "train.warmup_steps": 400,
                                              "train.eval_every": 500, "train.checkpoint_every": 500}}
             for d in (64, 128, 192, 256, 384)],
}


def get_config():
  config = base_config()
  use_task(config, "manythings_en_fr")
  recipes.manythings_cpu(config, "transformer")
  return config
