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

Sweeps (the scaling study; 13.9 hours of training on 2 CPU cores, over restarts, as the report states from the
runs' checkpoints):

* ``size`` (L(N)): six models from 2 layers of 32 to 4 of 192 (about 25k to 1.8M non-embedding parameters, 12·L·d²,
  72x), each trained on the same 20M tokens once (a fixed sample of the training rows, one epoch, 4,096 tokens a
  step), no dropout. L(N) is each model's best validation loss; their learning curves give the compute frontier
  L(C_min). The sizes stop at 1.8M so that the largest still sees 11 tokens a parameter: at this budget a larger
  model is limited by the data more than by its size, and L(N) would flatten for that reason, not the law's (the
  report also fits Kaplan et al.'s L(N, D) to both sweeps, meant to account for the data; ``docs/lm.md`` says why it
  does not fit these runs).
* ``data`` (L(D)): the 4 x 128 model on 0.125M to 4M training tokens (6 points, 32x; nested random samples of the
  training rows), repeated as epochs for up to 16M tokens or 16 epochs, whichever is more (16M up to 1M tokens, 32M
  and 64M tokens for the two largest, whose best losses came at the last step of a 16M cap), stopped early after 4
  evaluations without a better validation loss; the learning rate decays linearly to zero at the cap. Each point is
  evaluated every half epoch, at most every 125 steps (25 to 125), and warms up over at most one epoch. Its best
  validation loss is L(D).
* ``positional`` (extrapolation): the 4 x 128 model with sinusoidal, learned, relative (Shaw) and T5 positions, trained
  on 8M tokens in rows of 256 and evaluated on rows of 1,024 (``--eval seq_len=1024``): the loss at positions up to
  2x and 4x the training length.
"""

import ml_collections

from attnjax.config import base_config
from attnjax.data.catalogue import use_task

TOKENS_PER_STEP = 16 * 256
SIZES = ((2, 32), (2, 64), (4, 64), (4, 96), (4, 128), (4, 192))  # (layers, d_model): 12·L·d² from 25k to 1.8M
SIZE_TOKENS = 20_000_000
DATA_TOKENS = (125_000, 250_000, 500_000, 1_000_000, 2_000_000, 4_000_000)
DATA_CAP_TOKENS = 16_000_000  # a data point trains at most max(this, DATA_CAP_EPOCHS epochs) tokens, repeats included
DATA_CAP_EPOCHS = 16
POSITIONAL_TOKENS = 8_000_000
SMALL = {"model.num_layers": 4, "model.d_model": 128, "model.d_ff": 512, "model.num_heads": 2,
         "model.dropout_rate": 0.0, "train.steps": POSITIONAL_TOKENS // TOKENS_PER_STEP, "train.time_limit_minutes": 0.0}


def _size(layers, d):
  return {"model.num_layers": layers, "model.d_model": d, "model.d_ff": 4 * d, "model.num_heads": max(d // 64, 1),
          "model.dropout_rate": 0.0, "data.train_tokens": SIZE_TOKENS, "train.steps": SIZE_TOKENS // TOKENS_PER_STEP,
          "train.time_limit_minutes": 0.0}


def _data(tokens):
  epoch = tokens // TOKENS_PER_STEP  # steps in one epoch of the point's rows
  every = min(max(epoch // 2, 25), 125)
  cap = max(DATA_CAP_TOKENS, DATA_CAP_EPOCHS * tokens)
  return {**SMALL, "data.train_tokens": tokens, "train.steps": cap // TOKENS_PER_STEP,
          "train.warmup_steps": min(200, epoch), "train.patience": 4, "train.eval_every": every,
          "train.checkpoint_every": every}


SWEEPS = {
    "size": [{"name": f"l{layers}d{d}", "overrides": _size(layers, d)} for layers, d in SIZES],
    "data": [{"name": f"tokens{n // 1000}k", "overrides": _data(n)} for n in DATA_TOKENS],
    "positional": [{"name": p, "overrides": {**SMALL, "model.positional": p}}
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
    d.shared_cache_dir = ".cache/wikipedia_lm"  # one vocabulary and one set of packed rows for every run here
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
