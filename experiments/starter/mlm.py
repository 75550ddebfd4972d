"""Masked-LM pre-training (BERT's objective) on your own text: a pre-norm encoder of 4 layers of 256 on a
plain-text file or JSON lines, with a WordPiece vocabulary you give (a BERT ``vocab.txt``). See docs/own_data.md:

    python -m attnjax.train --config=experiments/starter/mlm.py --workdir=runs/my_mlm \\
        --config.data.path=corpus.txt --config.data.vocab_file=vocab.txt

The file is split by a hash of each document into train and 0.5% validation and 0.5% test; documents are packed
into rows of 128 WordPiece tokens, 15% of them masked as BERT does (80% [MASK], 10% random, 10% kept). Evaluation
reports the masked-LM loss and accuracy on every row of the split. ``python -m attnjax.export`` writes the encoder as
a Hugging Face checkpoint to fine-tune elsewhere, or here (``train.init_encoder_from``).
"""

import ml_collections

from attnjax.config import base_config


def get_config():
  config = base_config()
  d = config.data
  d.source = "mlm_text"
  with d.unlocked():
    d.lowercase = True
    d.seq_len = 128
  d.batch_size, d.max_tokens = 32, None
  d.vocab_multiple = 1
  config.model = ml_collections.ConfigDict(dict(
      name="bert_mlm", d_model=256, num_layers=4, num_heads=4, d_ff=1024, max_length=512, layer_norm_epsilon=1e-12,
      activation="gelu", dropout_rate=0.0, attention_dropout_rate=0.0, pre_norm=True))
  t = config.train
  t.optimizer, t.schedule, t.learning_rate, t.warmup_steps = "adam", "linear", 5e-4, 200
  t.adam_b2, t.adam_eps, t.weight_decay, t.label_smoothing = 0.999, 1e-6, 0.01, 0.0
  t.steps = 10_000
  t.eval_every = t.checkpoint_every = 500
  config.eval.split, config.eval.loss_batches = "validation", 4
  return config
