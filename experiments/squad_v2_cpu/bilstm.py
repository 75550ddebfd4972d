"""SQuAD 2.0 at CPU scale (the official dev set split by article, ``squad_v2_dev_by_article``): the BiDAF-style
BiLSTM reader with a learned no-answer score, trained 60 minutes on this machine.

    make squad2
    python -m attnjax.train --config=experiments/squad_v2_cpu/bilstm.py --workdir=runs/squad2/bilstm
    python -m attnjax.evaluate --workdir=runs/squad2/bilstm --split=validation,test

Data: ``dev-v2.0.json.gz`` in ``../shared/data/squad_v2`` (35 articles, 11,873 questions, 5,945 without an answer),
split by a hash of each article's title with seed 0 into 24 training articles (8,242 questions, 50.0% unanswerable),
6 validation (2,076, 51.1%) and 5 test (1,555, 48.9%): no paragraph is both trained and evaluated on. All 35 articles
are also in the v1.1 dev set; no reader of this study starts from anything trained on SQuAD (they start from random
weights or from ``all-MiniLM-L6-v2``, a sentence encoder never trained on SQuAD), so no v1.1 reader's checkpoint sees
these test articles. Lengths, vocabulary and optimiser as the v1.1 study's BiLSTM (``experiments/squad/
span_qa_bilstm.py``): questions of at most 32 tokens, contexts cut at 256 (an answer past the cut is dropped from
training and scored as a miss).

No answer: the reader's learned null score (a dense layer over the pooled modelling layer, as the BiDAF line of work
added to the span scores for 2.0) enters both pointer softmaxes (``attnjax.models.span_qa``), trained with the same
loss. Evaluation answers "" where the no-answer probability σ(null − best span) exceeds the threshold chosen on the
validation split (the official evaluation's best-F1 threshold), applied unchanged to test.
"""

from attnjax.data.catalogue import use_task
from experiments.squad import span_qa_bilstm

DATA_DIR = "../shared/data/squad_v2"


def to_squad2(config):
  """A v1.1 reader's config on the SQuAD 2.0 task: the data, and a model with a no-answer option."""
  use_task(config, "squad_v2_dev_by_article")
  config.data.dir = DATA_DIR
  config.model.allow_no_answer = True
  return config


def get_config():
  config = to_squad2(span_qa_bilstm.get_config())
  config.train.time_limit_minutes = 60.0
  config.train.steps = 8000
  return config
