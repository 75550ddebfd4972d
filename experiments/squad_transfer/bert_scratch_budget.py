"""The transfer study's readers of the budget pre-training's shape (``experiments/wikipedia/bert_mlm_budget.py``): a
pre-norm BERT of 4 layers of 256 (4 heads, d_ff 1,024, no pooler) reading windows of 128 positions, the length
that pre-training saw, trained here from random weights; ``bert_from_mlm_budget.py`` starts the same reader from the
pre-training's best checkpoint. The two differ only in their initial weights.

    python -m attnjax.train --config=experiments/squad_transfer/bert_scratch_budget.py --workdir=runs/transfer/scratch_b

Data: the v1.1 study's split and question length (at most 32 tokens), contexts read in windows of 87 tokens every 64
(``data.doc_stride``): the batches pad each side to a multiple of 8 (the context side with room for an end token),
so [CLS] + 32 + [SEP] + 88 + [SEP] = 123 of the 128 positions. A training question keeps the windows that
hold its whole answer; evaluation takes the best span over every window of a question, so no answer is cut off.
Fine-tuning: the other readers' 60 minutes and batches of 32, AdamW with weight decay 0.01 on matrices, warm-up over
10% of the steps then linear decay to 0 at the end of the budget (``budget_linear``), dropout 0.1.
"""

from experiments.squad_transfer import bert_scratch
from experiments.wikipedia import bert_mlm_budget as mlm

QUESTION, WINDOW, STRIDE = 32, 87, 64  # the longest window that fits: span_qa.packed_length(32, 87) + 1 = 123 <= 128


def get_config():
  config = bert_scratch.get_config()
  d = config.data
  d.max_question_len, d.max_context_len = QUESTION, WINDOW
  with d.unlocked():
    d.doc_stride = STRIDE
  d.bucket_boundaries = None  # every window is one length
  m = config.model
  m.d_model, m.num_layers, m.num_heads, m.d_ff, m.max_length = mlm.D_MODEL, mlm.LAYERS, mlm.HEADS, mlm.D_FF, mlm.SEQ_LEN
  with m.unlocked():
    m.pre_norm = True
  t = config.train
  t.schedule, t.warmup_steps = "budget_linear", 30
  t.steps = 1_000_000  # the 60 minutes end the run
  t.eval_every = t.checkpoint_every = 150
  return config
