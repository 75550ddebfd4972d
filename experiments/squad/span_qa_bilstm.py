"""A BiDAF-style reader (``SpanQA(encoder="bilstm")``) on SQuAD v1.1, trained on this CPU.

    python -m attnjax.train --config=experiments/squad/span_qa_bilstm.py --workdir=runs/squad_bilstm \
        --config.data.dir=../shared/data/squad
    python -m attnjax.evaluate --workdir=runs/squad_bilstm --split=test --checkpoint=best

Data: offline, only the official v1.1 *dev* file exists (48 articles, 10,570 questions), so it is split by article
(a hash of the title) into 80% train / 10% validation / 10% test: no paragraph is both trained and evaluated on. With
the real training set (87,599 questions; ``data.source="tfds_squad"``, or ``data.splits`` naming train-v1.1.json and
dev-v1.1.json) the same config trains the usual way. A joint 8k SentencePiece vocabulary is trained on the training
questions and contexts; contexts are truncated to 256 tokens (answers past the cut are dropped from training, logged,
and scored as misses in evaluation, as the official script counts every question).

Model: embeddings learned from scratch (no GloVe: nothing is downloaded), contextual and modelling BiLSTMs of 128
units (64 per direction), Luong 'general' context-to-question attention; see attnjax.models.span_qa.
"""

import ml_collections

from attnjax.config import base_config
from attnjax.data.catalogue import use_task


def get_config():
  config = base_config()
  use_task(config, "squad_v1_dev_by_article")  # squad_json: dev-v1.1.json.gz split 80/10/10 by article
  d = config.data
  d.dir = "../shared/data/squad"
  d.vocab_size = 8000
  d.max_question_len = 32
  d.max_context_len = 256
  d.max_tokens = 8192  # rows · max(Q, C + 1) per batch
  d.bucket_boundaries = (96, 128, 192)
  config.model = ml_collections.ConfigDict(dict(
      name="span_qa", encoder="bilstm", d_model=128, num_layers=1, dropout_rate=0.2, allow_no_answer=False,
      max_answer_length=30))
  t = config.train
  t.schedule = "constant"
  t.learning_rate = 1e-3
  t.warmup_steps = 200
  t.label_smoothing = 0.0
  t.steps = 4000
  t.time_limit_minutes = 30.0
  t.eval_every = 250
  t.checkpoint_every = 250
  t.best_metric = "f1"
  e = config.eval
  e.split = "validation"
  e.batch_size = 64
  e.num_decode_examples = 100_000  # i.e. the whole validation split
  e.loss_batches = 10
  return config
