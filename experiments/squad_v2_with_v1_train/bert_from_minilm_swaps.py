"""The SQuAD 2.0 reader of ``bert_from_minilm.py`` (SQuAD 1.1 train + the task's train articles, half the answerable
questions also asked of a paragraph without their answer), with half the answerable questions also asked of their
own paragraph with one name or number swapped for one that paragraph lacks (``data.question_negatives``), and the
weights' moving average (decay 0.999, warmed up as min(0.999, (1 + t) / (10 + t))) read by evaluation and the
checkpoint choice.

    make minilm
    python -m launch.launch --workdir_root=runs/squad_official \\
        --experiment=experiments/squad_v2_with_v1_train/bert_from_minilm_swaps.py --split=validation,test
    python -m attnjax.evaluate \\
        --workdir=runs/squad_official/squad_v2_with_v1_train/bert_from_minilm_swaps/single/default \\
        --split=validation,test --weights=params

The three recorded readers of this task stop at 55-56 F1 on test with their null scores ranked at 0.605-0.640 AUC,
while they answer at 70-72 HasAns F1 when made to answer everything: what they lack is telling an answerable
question from one that only looks it. Their unanswerable training questions are the 4,125 written ones and questions
moved to another paragraph, which share little with it; SQuAD 2.0's writers made theirs mostly by swapping an entity
or a number, so that the question still overlaps its paragraph word for word. The swapped questions (27,784: of the
half of the 91,716 answerable ones drawn, about 61% have a name or number to swap; train is then 46% unanswerable,
77,874 of 169,590) teach that reading. The moving average
with its warm-up holds almost none of the initial weights after the run's few thousand updates (the constant
decay kept 9% of them at update 2,400), and scoring the raw parameters of the same checkpoint measures what it gives.
Model, rate, batch and 120 minutes as ``bert_from_minilm.py``.
"""

from experiments.squad_v2_with_v1_train import bert_from_minilm

SWAPS, EMA_DECAY = 0.5, 0.999


def get_config():
  config = bert_from_minilm.get_config()
  with config.data.unlocked():
    config.data.question_negatives = SWAPS
  config.train.ema_decay = EMA_DECAY
  config.train.ema_warmup = True
  return config
