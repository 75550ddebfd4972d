"""SQuAD 2.0 at CPU scale (see ``bilstm.py``): the BERT reader fine-tuned from ``all-MiniLM-L6-v2`` (imported from
its safetensors, ``make minilm``) for 60 minutes of this machine, at the transfer study's 1e-4.

    make minilm
    python -m attnjax.train --config=experiments/squad_v2_cpu/bert_from_minilm.py --workdir=runs/squad2/minilm
"""

from experiments.squad_transfer import bert_from_minilm
from experiments.squad_v2_cpu.bilstm import to_squad2


def get_config():
  return to_squad2(bert_from_minilm.get_config())
