"""The budget masked-LM recipe (``experiments/wikipedia/bert_mlm_budget.py``: pre-norm 4 × 256, rows of 128, sparse
prediction, a rate tied to the budget) on the task's own text instead of Wikipedia (Krishna et al. 2023,
"Downstream datasets make surprisingly good pretraining corpora"): the paragraphs of the SQuAD 1.1 official-protocol
task's train split only (``squad_v1_official``: 429 articles), never a paragraph of its validation articles or of
the official dev set. Its comparison with the Wikipedia run tells whether the corpus or the compute limits transfer.

    make minilm
    python -m launch.launch --workdir_root=runs/transfer \\
        --experiment=experiments/squad_v1_official/bert_mlm_task_text.py --split=test

Budget: 120 minutes, half the Wikipedia run's: the corpus is small enough that 120 minutes pass over it several
times, where Wikipedia's 21M training tokens are not seen once in 240. Held out for the masked-LM's own validation and
test: 2% of those articles each (by title hash), so the reader's validation articles stay unread.
"""

from experiments.wikipedia import bert_mlm_budget

MINUTES = 120.0


def get_config():
  config = bert_mlm_budget.get_config()
  d = config.data
  with d.unlocked():
    d.task = "squad_v1_official_text"
    d.squad_task = "squad_v1_official"
    del d["path"]
  d.dir = "../shared/data"
  d.heldout = {"validation": 0.02, "test": 0.02}
  config.train.time_limit_minutes = MINUTES
  return config
