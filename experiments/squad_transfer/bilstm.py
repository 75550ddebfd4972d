"""The transfer study's baseline: the BiDAF-style BiLSTM reader of ``experiments/squad/span_qa_bilstm.py``, given
the same 60 minutes of fine-tuning as the three BERT readers (``bert_scratch.py``).

    python -m attnjax.train --config=experiments/squad_transfer/bilstm.py --workdir=runs/transfer/bilstm
"""

from experiments.squad import span_qa_bilstm


def get_config():
  config = span_qa_bilstm.get_config()
  config.train.time_limit_minutes = 60.0
  config.train.steps = 8000
  return config
