"""Position extrapolation: a small Transformer learns to reverse strings of 3-12 characters (the synthetic
``reverse`` task) and is tested on strings of 13-18, longer than any it saw, with each positional encoding of the
``positional`` sweep: sinusoidal (Vaswani et al. 2017 chose it hoping it would extrapolate), learned absolute
embeddings (positions past 13 never trained), Shaw's relative positions and T5's relative buckets.

    python -m launch.launch --experiment=experiments/reverse_positions.py --sweep=positional --seeds=0,1 \\
        --workdir_root=runs/study --split=validation,test
    python -m attnjax.report --runs=runs/study --out=runs/study/report     # "Position extrapolation"

Shaw's clipping distance is 8 here, not the 16 of the translation models, so that every relative embedding is
trained on the 3-12 character strings (distances up to 12): the test then asks only for longer strings, not for
embeddings never trained. Selection is on validation exact match (training lengths): the test lengths are never
looked at before the end.
"""

from attnjax.config import base_config

SWEEPS = {"positional": [{"name": p, "overrides": {"model.positional": p}}
                         for p in ("sinusoidal", "learned", "relative", "t5")]}


def get_config():
  config = base_config()
  config.data.task = "reverse"
  config.data.train_examples = 50_000
  config.data.max_src_len = config.data.max_tgt_len = 24
  config.data.bucket_boundaries = (8, 16)
  m = config.model
  m.num_encoder_layers = m.num_decoder_layers = 2
  m.d_model, m.num_heads, m.d_ff, m.pre_norm, m.dropout_rate = 128, 4, 512, True, 0.1
  with m.unlocked():
    m.max_relative_distance = 8
  t = config.train
  t.learning_rate, t.warmup_steps = 0.6, 200  # peak 0.6 · 128^-0.5 · 200^-0.5 = 2.6e-3, as the dates Transformer
  t.steps, t.eval_every, t.checkpoint_every = 1200, 300, 300
  t.best_metric = "exact_match"
  config.eval.split = "validation"
  return config
