"""The transfer study's reader fine-tuned from this project's own masked-LM pre-training
(``experiments/wikipedia/bert_mlm.py``, its best checkpoint by validation MLM accuracy): see ``bert_scratch.py``.

    python -m attnjax.train --config=experiments/squad_transfer/bert_from_mlm.py --workdir=runs/transfer/mlm \\
        --config.train.init_encoder_from=runs/bert_mlm
"""

from experiments.squad_transfer import bert_scratch

# where `make transfer` trains the masked-LM run (the launcher's layout under its workdir root)
MLM_WORKDIR = "runs/transfer/wikipedia/bert_mlm/single/default"


def get_config():
  config = bert_scratch.get_config()
  with config.train.unlocked():
    config.train.init_encoder_from = MLM_WORKDIR
  config.train.learning_rate = 1e-4
  return config
