"""SQuAD 2.0 at CPU scale: the reader from ``all-MiniLM-L6-v2`` (``bert_from_minilm.py``: the same data, schedule
and budget) with a verifier beside its null span (``SpanQA(no_answer_verifier=True)``): a dense logit v on [CLS],
trained jointly with its own binary cross-entropy as Retro-Reader's internal verifier is, and "no answer" iff
start[CLS] + end[CLS] + v beats the best span. An ablation of the answerability signal: everything else is the
recorded reader's.

    make minilm
    python -m launch.launch --workdir_root=runs/squad2_verifier \
      --experiment=experiments/squad_v2_cpu/bert_from_minilm_verifier.py --split=validation,test
"""

from experiments.squad_v2_cpu import bert_from_minilm


def get_config():
  config = bert_from_minilm.get_config()
  with config.model.unlocked():
    config.model.no_answer_verifier = True
  return config
