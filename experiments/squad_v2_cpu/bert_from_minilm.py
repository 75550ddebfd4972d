"""SQuAD 2.0 at CPU scale (see ``bilstm.py``): the BERT reader fine-tuned from ``all-MiniLM-L6-v2`` (imported from
its safetensors, ``make minilm``) for 60 minutes of this machine, at 2e-4: twice the v1.1 transfer study's 1e-4,
for a budget of 480 steps (``bert_scratch.STEPS``) where BERT's fine-tuning takes thousands.

    make minilm
    python -m attnjax.train --config=experiments/squad_v2_cpu/bert_from_minilm.py --workdir=runs/squad2/minilm
"""

from experiments.squad_transfer import bert_from_minilm
from experiments.squad_v2_cpu.bert_scratch import squad2_budget
from experiments.squad_v2_cpu.bilstm import to_squad2


def get_config():
  return squad2_budget(to_squad2(bert_from_minilm.get_config()), learning_rate=2e-4)
