"""Extractive question answering on your own SQuAD-format JSON (v1.1, or v2.0 with unanswerable questions): the
BiDAF-style BiLSTM reader of ``experiments/squad/span_qa_bilstm.py``, with a SentencePiece vocabulary trained on
your training questions and paragraphs. See docs/own_data.md:

    python -m attnjax.train --config=experiments/starter/qa.py --workdir=runs/my_qa --config.data.path=my_squad.json

One file is split by article (a hash of its title) into train, 10% validation and 10% test, so that no paragraph is
both trained and scored on; ``--config.data.splits`` (split -> file) reads your own splits instead, and both together
add a file (a test set) to one split by hash. A v2.0 file needs ``--config.model.allow_no_answer=true`` (the reader's
no-answer option). Evaluation scores every question of the split by the official rules (the best over its answers).
"""

from attnjax.config import base_config
from experiments.squad import span_qa_bilstm


def get_config():
  config = base_config()
  d = config.data
  d.source = "squad_json"
  with d.unlocked():
    d.heldout = {"validation": 0.1, "test": 0.1}
    d.vocab_size = 8000
    d.max_question_len = 32
    d.max_context_len = 256
    d.doc_stride = 128  # longer paragraphs are read in windows of 256 tokens every 128: no answer out of reach
  d.max_tokens = 8192  # rows · max(question, context + 1) per batch
  d.bucket_boundaries = (96, 128, 192)
  config.model = span_qa_bilstm.get_config().model  # the SQuAD study's reader, as it is
  t = config.train
  t.schedule, t.learning_rate, t.warmup_steps, t.label_smoothing = "constant", 1e-3, 200, 0.0
  t.steps = 4000
  t.eval_every = t.checkpoint_every = 250
  e = config.eval
  e.split, e.batch_size, e.loss_batches = "validation", 64, 10
  e.num_decode_examples = 1000  # checkpoints chosen on 1,000 validation questions; attnjax.evaluate scores them all
  return config
