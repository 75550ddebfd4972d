"""The transfer study on SQuAD's official protocol (``bert_scratch_budget.py``): the reader fine-tuned from this
project's budget masked-LM pre-training on Wikipedia (``experiments/wikipedia/bert_mlm_budget.py``), read from its
Hugging Face export (``RobertaPreLayerNormModel``, the best checkpoint by validation MLM accuracy) kept under
``results/``, so that fine-tuning needs no kept workdir.

    python -m attnjax.export --workdir=runs/transfer/wikipedia/bert_mlm_budget/single/default \\
        --out=results/transfer_official/encoders/wikipedia --dtype=bfloat16
    python -m launch.launch --workdir_root=runs/transfer_official \\
        --experiment=experiments/squad_v1_official/bert_from_wikipedia_mlm.py --split=validation,test
"""

from experiments.squad_transfer import bert_scratch_budget
from experiments.squad_v1_official.bert_scratch_budget import official_budget_reader

ENCODER = "results/transfer_official/encoders/wikipedia"


def get_config():
  config = official_budget_reader(bert_scratch_budget.get_config(), learning_rate=2e-4)
  with config.train.unlocked():
    config.train.init_encoder_from = ENCODER
  return config
