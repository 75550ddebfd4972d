"""SQuAD 2.0 with real answers (``squad_v2_with_v1_train``): the SQuAD 2.0 study's validation and test articles
(``experiments/squad_v2_cpu``, the official 2.0 dev set split by article), its 24 training articles joined by every
SQuAD 1.1 train question. The BERT reader fine-tuned from ``all-MiniLM-L6-v2`` for 120 minutes of this machine.

    make minilm
    python -m launch.launch --workdir_root=runs/squad_official \\
        --experiment=experiments/squad_v2_with_v1_train/bert_from_minilm.py --split=validation,test

The study's readers were starved of answers (4,121 answerable training questions); here they are 91,716, and the
unanswerable ones (4,125, all from 2.0 dev's training articles) are 4.3% of train. So that the null score keeps
examples to learn from, half the answerable training questions are also asked of another paragraph of their article
that lacks their answer, as unanswerable questions (``data.paragraph_negatives``: Clark & Gardner 2018's distant
paragraphs), which brings train to about the share of SQuAD 2.0's own train set (a third unanswerable).

Model and fine-tuning as the official-protocol 1.1 reader (``experiments/squad_v1_official/bert_from_minilm.py``),
with BERT's null span at [CLS]; the no-answer threshold is chosen on validation and applied to test; checkpoints
are ranked by validation F1 at the threshold best for their spans (``best_f1_spans``) on the first 1,000 questions.
"""

from attnjax.data.catalogue import use_task
from experiments.squad_v1_official import bert_from_minilm

NEGATIVES = 0.5


def get_config():
  config = bert_from_minilm.get_config()
  use_task(config, "squad_v2_with_v1_train")
  with config.data.unlocked():
    config.data.paragraph_negatives = NEGATIVES
  config.model.allow_no_answer = True
  return config
