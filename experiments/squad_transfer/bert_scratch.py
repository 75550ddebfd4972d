"""The transfer study on SQuAD v1.1 (dev split by article): a MiniLM-sized BERT reader trained from scratch.

    make minilm
    python -m attnjax.train --config=experiments/squad_transfer/bert_scratch.py --workdir=runs/transfer/scratch

Three readers of this study share this file's architecture (``SpanQA(encoder="bert")``: 6 post-norm layers of 384,
12 heads, d_ff 1,536, exact GELU; BERT's SQuAD head) and its WordPiece vocabulary (BERT's uncased 30,522, from
``all-MiniLM-L6-v2``), and differ only in their starting weights: random here, the masked-LM run's
(``bert_from_mlm.py``), or ``all-MiniLM-L6-v2``'s (``bert_from_minilm.py``). The fourth reader is the BiLSTM
(``bilstm.py``). Every reader fine-tunes for the same 60 minutes of this machine, is selected on validation F1, and
is scored on every test question.

Data: the split and lengths of ``experiments/squad/span_qa_bilstm.py`` (80 / 10 / 10% of the articles; questions of
at most 32 tokens, contexts cut at 256, an answer past the cut dropped from training and scored as a miss).
Fine-tuning: BERT's (AdamW, weight decay 0.01 on matrices, linear warm-up over 10% of the steps then linear decay to
0 at the end of the budget, batches of 32 questions), at 5e-4 from scratch and 1e-4 from pre-trained weights
(``bert_from_*.py``).
"""

import ml_collections

from experiments.squad import span_qa_bilstm

MINILM_DIR = ".cache/all-MiniLM-L6-v2"
# A step of 32 questions takes about 10.5 s on this 2-core machine and a validation pass (loss and every question's
# span) 2.5 minutes, so the 60 minutes reach about 300 steps with four evaluations. The schedule is sized to 280 (1.1
# epochs of the 8,141 training questions), so that it decays to 0 within the budget, as BERT's fine-tuning does.
STEPS = 280


def get_config():
  config = span_qa_bilstm.get_config()
  d = config.data
  with d.unlocked():
    d.vocab_file = f"{MINILM_DIR}/vocab.txt"
    d.lowercase = True
  d.batch_size, d.max_tokens, d.bucket_boundaries = 32, None, (128, 192)
  d.vocab_multiple = 1  # BERT's embedding table of 30,522 rows, as the pre-trained encoders have it
  config.model = ml_collections.ConfigDict(dict(
      name="span_qa", encoder="bert", d_model=384, num_layers=6, num_heads=12, d_ff=1536, max_length=512,
      dropout_rate=0.1, layer_norm_epsilon=1e-12, cls_id=101, sep_id=102, allow_no_answer=False,
      max_answer_length=30))
  t = config.train
  t.optimizer, t.schedule = "adam", "linear"
  t.learning_rate = 5e-4
  t.adam_b2, t.adam_eps, t.weight_decay = 0.999, 1e-6, 0.01
  t.steps = STEPS
  t.warmup_steps = STEPS // 10
  t.time_limit_minutes = 60.0
  t.eval_every = STEPS // 4
  t.checkpoint_every = STEPS // 4
  return config
