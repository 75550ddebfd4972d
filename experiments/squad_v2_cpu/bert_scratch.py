"""SQuAD 2.0 at CPU scale (see ``bilstm.py``): the MiniLM-sized BERT reader of the transfer study
(``experiments/squad_transfer/bert_scratch.py``: 6 post-norm layers of 384, BERT's uncased WordPiece vocabulary)
trained from random weights for 60 minutes of this machine.

    python -m attnjax.train --config=experiments/squad_v2_cpu/bert_scratch.py --workdir=runs/squad2/bert_scratch

No answer: BERT's for 2.0 (Devlin et al. 2019, §4.3): the null span is the [CLS] position, its score
start[CLS] + end[CLS] compared with the best span; the threshold on σ(null − best span) is chosen on validation.
"""

from experiments.squad_transfer import bert_scratch
from experiments.squad_v2_cpu.bilstm import to_squad2


def get_config():
  return to_squad2(bert_scratch.get_config())
