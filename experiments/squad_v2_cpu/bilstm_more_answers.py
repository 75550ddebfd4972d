"""SQuAD 2.0 at CPU scale: the BiLSTM reader (``bilstm.py``: the same model, budget and no-answer score) with
v1.1 dev's 13 articles that v2.0 dev lacks added to train (4,557 answerable questions; ``config.data.train_also``, as
``bert_from_minilm_more_answers.py`` adds them). The recorded BiLSTM's spans stayed at 7 to 13 validation F1 for its
whole hour, where the v1.1 reader of the same recipe, with twice the answers, passed 33: this asks whether the
answers it lacked are what held its spans back.

    python -m launch.launch --workdir_root=runs/squad2_bilstm_more_answers \
      --experiment=experiments/squad_v2_cpu/bilstm_more_answers.py --split=validation,test
"""

from experiments.squad_v2_cpu import bilstm
from experiments.squad_v2_cpu.bert_from_minilm_more_answers import with_more_answers


def get_config():
  return with_more_answers(bilstm.get_config())
