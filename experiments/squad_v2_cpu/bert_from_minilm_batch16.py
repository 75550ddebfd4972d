"""SQuAD 2.0 at CPU scale: the reader from ``all-MiniLM-L6-v2`` (``bert_from_minilm.py``) with batches of 16
questions instead of 32, so that the same 60 minutes make about twice the updates over about the same questions
(the schedule sized to 880 steps: a step of 16 costs a little more than half of one of 32 on this machine). The
recorded reader's no-answer ROC AUC was still rising when its learning rate reached 0 (0.52 at step 240, 0.64 at
480): this asks whether more, smaller steps teach the decision to answer sooner.

    make minilm
    python -m launch.launch --workdir_root=runs/squad2_batch16 \
      --experiment=experiments/squad_v2_cpu/bert_from_minilm_batch16.py --split=validation,test
"""

from experiments.squad_transfer import bert_from_minilm
from experiments.squad_v2_cpu.bert_scratch import squad2_budget
from experiments.squad_v2_cpu.bilstm import to_squad2

STEPS = 880


def get_config():
  config = to_squad2(bert_from_minilm.get_config())
  config.data.batch_size = 16
  return squad2_budget(config, learning_rate=2e-4, steps=STEPS)
