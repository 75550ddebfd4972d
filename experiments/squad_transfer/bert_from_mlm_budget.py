"""The transfer study's reader fine-tuned from the budget masked-LM pre-training
(``experiments/wikipedia/bert_mlm_budget.py``, its best checkpoint by validation MLM accuracy): the reader of
``bert_scratch_budget.py`` with the pre-trained weights, at a lower peak rate.

    python -m attnjax.train --config=experiments/squad_transfer/bert_from_mlm_budget.py --workdir=runs/transfer/mlm_b \\
        --config.train.init_encoder_from=runs/transfer/mlm_budget
"""

from experiments.squad_transfer import bert_scratch_budget

# where `make transfer-budget` trains the masked-LM run (the launcher's layout under its workdir root)
MLM_WORKDIR = "runs/transfer/wikipedia/bert_mlm_budget/single/default"


def get_config():
  config = bert_scratch_budget.get_config()
  with config.train.unlocked():
    config.train.init_encoder_from = MLM_WORKDIR
  config.train.learning_rate = 2e-4
  return config
