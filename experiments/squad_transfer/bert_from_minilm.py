"""The transfer study's reader fine-tuned from ``all-MiniLM-L6-v2`` (a BERT pre-trained elsewhere, imported from its
safetensors): see ``bert_scratch.py``.

    make minilm
    python -m attnjax.train --config=experiments/squad_transfer/bert_from_minilm.py --workdir=runs/transfer/minilm
"""

from experiments.squad_transfer import bert_scratch


def get_config():
  config = bert_scratch.get_config()
  with config.train.unlocked():
    config.train.init_encoder_from = bert_scratch.MINILM_DIR
  config.train.learning_rate = 1e-4
  return config
