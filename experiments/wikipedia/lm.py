"""A decoder-only Transformer language model on English Wikipedia, and the scaling laws of the seed study measured on
it (Kaplan et al. 2020's protocol at this machine's scale).

    python -m attnjax.train --config=experiments/wikipedia/lm.py --workdir=runs/lm --config.data.dir=../shared/data/wikipedia_en
    python -m launch.launch --experiment=experiments/wikipedia/lm.py --sweep=size --workdir_root=runs/scaling
    python -m attnjax.generate --workdir=runs/lm --prompt="The history of" --top_p=0.9

Data: ``enwiki_2015_AA.jsonl.gz`` (6,503 articles, 101M characters), the held-out articles of the masked-LM run
(0.5% validation, 0.5% test, by title), an 8k byte-pair SentencePiece vocabulary trained on the training articles,
rows of 256 tokens with documents packed and kept apart by segment ids. Scored in loss per token and bits per byte.

Model (the default point): GPT-2's layout (pre-norm, causal, tied output, GELU), 4 layers of 256, learned positions.
Optimiser: AdamW (β 0.9 / 0.95, weight decay 0.1 on matrices), linear warm-up then linear decay, gradient clip 1.

Sweeps:

* ``size`` (L(N)): six models from 4 layers of 64 to 6 of 384 (about 0.2M to 10.6M non-embedding parameters,
  12·L·d²), each trained on the same 16M tokens without repeats (4,096 tokens a step), no dropout.
* ``data`` (L(D)): the 4 x 256 model on 0.5M to 16M training tokens (5 points, 32x), repeated as epochs for the
  steps of the largest, with the best validation loss (early stopping) as L(D).
* ``positional`` (extrapolation): the 4 x 256 model with sinusoidal, learned, relative (Shaw) and T5 positions, trained
  on rows of 256 and evaluated on rows of 512 and 1,024 (``--config.data.seq_len``).
"""

import ml_collections

from attnjax.config import base_config
from attnjax.data.tasks import use_task

TOKENS_PER_STEP = 16 * 256
SIZES = ((4, 64), (4, 96), (4, 128), (4, 192), (6, 256), (6, 384))  # (layers, d_model): 12·L·d² from 0.2M to 10.6M
SIZE_TOKENS = 16_000_000
DATA_TOKENS = (500_000, 1_000_000, 2_000_000, 4_000_000, 16_000_000)


def _size(layers, d):
  return {"model.num_layers": layers, "model.d_model": d, "model.d_ff": 4 * d, "model.num_heads": max(d // 64, 1),
          "model.dropout_rate": 0.0, "train.steps": SIZE_TOKENS // TOKENS_PER_STEP, "train.time_limit_minutes": 0.0}


SWEEPS = {
    "size": [{"name": f"l{layers}d{d}", "overrides": _size(layers, d)} for layers, d in SIZES],
    "data": [{"name": f"tokens{n // 1000}k", "overrides": {"data.train_tokens": n, "model.dropout_rate": 0.0,
                                                             "train.steps": SIZE_TOKENS // TOKENS_PER_STEP,
                                                             "train.time_limit_minutes": 0.0}}
             for n in DATA_TOKENS],
    "positional": [{"name": p, "overrides": {"model.positional": p}}
                   for p in ("sinusoidal", "learned", "relative", "t5")],
}


def get_config():
  config = base_config()
  use_task(config, "wikipedia_lm")
  d = config.data
  d.dir = "../shared/data/wikipedia_en"
  with d.unlocked():
    d.seq_len = 256
    d.vocab_size = 8000
    d.spm_model_type = "bpe"
    d.train_tokens = 0
  d.batch_size = TOKENS_PER_STEP // 256
  d.max_tokens = None
  config.model = ml_collections.ConfigDict(dict(
      name="decoder_lm", num_layers=4, d_model=256, num_heads=4, d_ff=1024, dropout_rate=0.1, positional="learned",
      max_length=1024, max_relative_distance=64, activation="gelu_tanh"))
  t = config.train
  t.optimizer, t.schedule = "adam", "linear"
  t.learning_rate = 1e-3
  t.adam_b1, t.adam_b2, t.adam_eps, t.weight_decay = 0.9, 0.95, 1e-8, 0.1
  t.label_smoothing = 0.0
  t.steps = 4000
  t.warmup_steps = 200
  t.time_limit_minutes = 120.0
  t.log_every = 50
  t.eval_every = 250
  t.checkpoint_every = 250
  config.eval.split = "validation"
  config.eval.loss_batches = 8
  return config
