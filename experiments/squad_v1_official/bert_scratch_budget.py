"""The transfer study on SQuAD's official protocol (``bilstm.py``): the reader of the budget pre-training's shape
(``experiments/squad_transfer/bert_scratch_budget.py``: pre-norm 4 × 256, windows of 128 positions) trained from
random weights for 120 minutes of this machine. ``bert_from_wikipedia_mlm.py`` and ``bert_from_task_text_mlm.py``
start the same reader from the two pre-trained encoders; only the initial weights (and the learning rate, the
transfer study's: 5e-4 from scratch, 2e-4 from pre-trained weights) differ.

    python -m launch.launch --workdir_root=runs/transfer_official \\
        --experiment=experiments/squad_v1_official/bert_scratch_budget.py --split=validation,test
"""

from experiments.squad_transfer import bert_scratch_budget
from experiments.squad_v1_official.bert_scratch import official_bert


def official_budget_reader(config, learning_rate: float):
  """A budget-shaped reader's config on the official protocol (its windows of 128 kept), evaluated every 500 steps."""
  return official_bert(config, learning_rate, every=500)


def get_config():
  return official_budget_reader(bert_scratch_budget.get_config(), learning_rate=5e-4)
