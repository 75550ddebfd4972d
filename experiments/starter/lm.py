"""A language model of your own text: a decoder-only Transformer (4 layers of 256, learned positions) on a
plain-text file (one document per line, or documents separated by blank lines) or JSON lines, with a BPE
SentencePiece vocabulary trained on your training documents. See docs/own_data.md:

    python -m attnjax.train --config=experiments/starter/lm.py --workdir=runs/my_lm --config.data.path=corpus.txt
    python -m attnjax.generate --workdir=runs/my_lm --prompt="Once upon a time"

The file is split by a hash of each document into train and 0.5% validation and 0.5% test (``data.heldout``);
``--config.data.splits`` (split -> file) reads your own. Documents are laid end to end into rows of 256 tokens;
evaluation reports the loss and bits per byte of every row of the split.
"""

from attnjax.config import base_config
from experiments.wikipedia import lm as wikipedia_lm


def get_config():
  config = base_config()
  d = config.data
  d.source = "lm_text"
  with d.unlocked():
    d.seq_len = 256
    d.vocab_size = 8000
    d.spm_model_type = "bpe"
  d.batch_size, d.max_tokens = 16, None  # rows of seq_len tokens per step
  config.model = wikipedia_lm.get_config().model  # the language-model study's 4 × 256 model, as it is
  t = config.train
  t.optimizer, t.schedule, t.learning_rate, t.warmup_steps = "adam", "linear", 1e-3, 200
  t.adam_b1, t.adam_b2, t.adam_eps, t.weight_decay, t.label_smoothing = 0.9, 0.95, 1e-8, 0.1, 0.0
  t.steps = 4000
  t.eval_every = t.checkpoint_every = 250
  config.eval.split, config.eval.loss_batches = "validation", 8
  return config
