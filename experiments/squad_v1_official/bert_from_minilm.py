"""SQuAD 1.1 on the literature's protocol (see ``bilstm.py`` and ``bert_scratch.py``): the BERT reader fine-tuned
from ``all-MiniLM-L6-v2`` (imported from its safetensors) for 120 minutes of this machine, at 1e-4.

    make minilm
    python -m launch.launch --workdir_root=runs/squad_official \\
        --experiment=experiments/squad_v1_official/bert_from_minilm.py --split=validation,test
"""

from experiments.squad_transfer import bert_from_minilm
from experiments.squad_v1_official.bert_scratch import official_bert


def get_config():
  return official_bert(bert_from_minilm.get_config(), learning_rate=1e-4)
