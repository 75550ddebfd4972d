"""SQuAD 2.0 at CPU scale: the reader from ``all-MiniLM-L6-v2`` (``bert_from_minilm.py``) with batches of 16
questions instead of 32, for more updates in the same 60 minutes. The recorded reader's no-answer ROC AUC on the
first 600 validation questions was still rising when its learning rate reached 0 (0.52 at step 240, 0.64 at 480):
this asks whether more, smaller steps teach the decision to answer sooner.

The schedule is sized to 880 steps (14,080 questions, against the recorded reader's 480 of 32 = 15,360). Measured
here one after the other (means over 8 and 4 steps, the cores otherwise idle): 3.5 s a step of 16 against 8.0 to 8.7 s a
step of 32, about 800 tokens a second either way. At half the recorded reader's 7.1 s a step the 880 steps take about
52 of the 60 training minutes, a margin for a noisy machine so that the schedule decays to 0 in time. The learning rate
stays 2e-4: halving the batch without rescaling it is the second half of the change.

    make minilm
    python -m launch.launch --workdir_root=runs/squad2_batch16 \
      --experiment=experiments/squad_v2_cpu/bert_from_minilm_batch16.py --split=validation,test
"""

from experiments.squad_v2_cpu import bert_from_minilm
from experiments.squad_v2_cpu.bert_scratch import squad2_budget

STEPS = 880


def get_config():
  config = bert_from_minilm.get_config()
  config.data.batch_size = 16
  return squad2_budget(config, learning_rate=config.train.learning_rate, steps=STEPS)
