"""The transfer study on SQuAD's official protocol (``bilstm.py``): the reader of the budget pre-training's shape
(``experiments/squad_transfer/bert_scratch_budget.py``: pre-norm 4 × 256, windows of 128 positions) trained from
random weights for 120 minutes of this machine. ``bert_from_wikipedia_mlm.py`` and ``bert_from_task_text_mlm.py``
start the same reader from the two pre-trained encoders; only the initial weights (and the learning rate, the
transfer study's: 5e-4 from scratch, 2e-4 from pre-trained weights) differ.

    python -m launch.launch --workdir_root=runs/transfer_official \\
        --experiment=experiments/squad_v1_official/bert_scratch_budget.py --split=validation,test
"""

from experiments.squad_transfer import bert_scratch_budget
from experiments.squad_v1_official.bilstm import to_official


def official_budget_reader(config, learning_rate: float):
  """A budget-shaped reader's config on the official protocol: 120 minutes, the rate decaying to 0 at their end,
  checkpoints chosen on the first 1,000 validation questions."""
  config = to_official(config)
  t = config.train
  t.schedule, t.warmup_steps, t.learning_rate = "budget_linear", 100, learning_rate
  t.steps = 1_000_000  # the 120 minutes end the run
  t.eval_every = t.checkpoint_every = 500
  config.eval.num_decode_examples = 1000
  return config


def get_config():
  return official_budget_reader(bert_scratch_budget.get_config(), learning_rate=5e-4)
