"""The SQuAD 2.0 reader of ``bert_from_minilm.py`` with the no-answer signal from SQuAD 2.0's own unanswerable
questions instead of made-up ones: no paragraph negatives, and each of the 4,125 unanswerable training questions
(written on the same paragraph to look answerable, all from 2.0 dev's training articles) shown ten times an epoch
(``data.unanswerable_repeats``), which makes them 31% of train, about SQuAD 2.0's own train set's share.

    make minilm
    python -m launch.launch --workdir_root=runs/squad_official \\
        --experiment=experiments/squad_v2_with_v1_train/bert_from_minilm_repeats.py --split=validation,test

Distant paragraphs teach the null score to notice a paragraph on another subject; SQuAD 2.0's questions are asked
of the paragraph they seem to be about, which the negatives never show.
"""

from experiments.squad_v2_with_v1_train import bert_from_minilm

REPEATS = 10


def get_config():
  config = bert_from_minilm.get_config()
  with config.data.unlocked():
    config.data.paragraph_negatives = 0.0
    config.data.unanswerable_repeats = REPEATS
  return config
