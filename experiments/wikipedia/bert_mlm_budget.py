"""Masked-LM pre-training built for a few CPU hours: the recipe of the short-budget literature (Izsak et al. 2021, "How
to Train BERT with an Academic Budget"; Geiping & Goldstein 2022, "Cramming"), beside BERT's own
(``bert_mlm.py``, the right recipe for a long run on an accelerator).

    make minilm     # the WordPiece vocab.txt of BERT (from all-MiniLM-L6-v2's files) into .cache/all-MiniLM-L6-v2
    python -m attnjax.train --config=experiments/wikipedia/bert_mlm_budget.py --workdir=runs/transfer/mlm_budget \\
        --config.data.dir=../shared/data/wikipedia_en

What changes from ``bert_mlm.py``, and why:

* **Pre-norm layers and a final LayerNorm** (``model.pre_norm``): they train stably at a peak rate ten times
  BERT's, where the post-norm encoder at 5e-4 collapsed (``docs/transfer.md``).
* **No dropout** while pre-training: a few hours see each token about once, so there is nothing to overfit.
* **Rows of 128 tokens** (BERT's first phase): attention is a small part of a step, and four times the rows of 512
  fit a batch. The readers fine-tuned from this encoder read windows of 128 (``squad_transfer/*_budget.py``).
* **Sparse prediction**: the vocabulary projection at the masked positions only (``BertMaskedLM``'s
  ``mlm_positions``), about 15% of the rows' tokens; over all positions it would be most of a step.
* **A learning rate tied to the budget** (``train.schedule = "budget_linear"``): warm-up over the first steps, then
  linear decay that reaches 0 when the 240 minutes are spent, however fast this machine steps; AdamW (β 0.9 / 0.98,
  weight decay 0.01 on matrices) with gradients clipped at 0.5, at a peak of 1e-3 (both papers' neighbourhood).
* **The size, from this project's scaling study** (``docs/lm.md``): on 2 cores a decoder-only LM of 4 × 192 (1.8M
  non-embedding parameters) was the best of six sizes on 20M tokens in 89 minutes, its local exponent still rising
  (the data had not yet flattened L(N) there), and the compute frontier moves to the next larger model as compute
  grows. 240 minutes are 2.7 times that compute; Kaplan et al.'s N_opt ∝ C^0.73 puts the optimum about 2 times larger,
  about 3.6M non-embedding parameters: 4 layers of 256 (3.1M, 4 heads of 64, d_ff 1,024), the width the reader keeps
  fast to fine-tune.
* **Tokens a step**: 64 rows of 128 (8,192 tokens, at most 1,216 predictions); ``python -m benchmarks.mlm
  --batch=64 --length=128 --predictions=19`` times a step of this shape here and in Hugging Face's BertForMaskedLM.
"""

from experiments.wikipedia import bert_mlm

MINUTES = 240.0
SEQ_LEN = 128
D_MODEL, LAYERS, HEADS, D_FF = 256, 4, 4, 1024


def get_config():
  """``bert_mlm.py``'s data, vocabulary and masking, with the changes above."""
  config = bert_mlm.get_config()
  d = config.data
  d.seq_len = SEQ_LEN
  d.max_predictions = 19  # 15% of 128, as BERT's first phase (20)
  d.batch_size = 64
  m = config.model
  m.update(d_model=D_MODEL, num_layers=LAYERS, num_heads=HEADS, d_ff=D_FF, max_length=SEQ_LEN, dropout_rate=0.0,
           attention_dropout_rate=0.0)
  with m.unlocked():
    m.pre_norm = True
  t = config.train
  t.schedule = "budget_linear"
  t.learning_rate = 1e-3
  t.warmup_steps = 300
  t.adam_b2 = 0.98
  t.grad_clip_norm = 0.5
  t.steps = 1_000_000  # the budget ends the run, not the step count
  t.time_limit_minutes = MINUTES
  t.eval_every = 250  # about 10 s of held-out rows: the curves against tokens seen
  t.checkpoint_every = 200
  config.eval.loss_batches = 8
  return config
