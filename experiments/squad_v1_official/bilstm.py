"""SQuAD 1.1 on the literature's protocol (``squad_v1_official``): trained on the SQuAD 1.1 train set less 5% of its
articles (the validation split, which chooses the checkpoint), scored on every question of the official dev set. The
BiDAF-style BiLSTM reader of ``experiments/squad/span_qa_bilstm.py``, trained 120 minutes of this machine.

    python -m launch.launch --workdir_root=runs/squad_official \\
        --experiment=experiments/squad_v1_official/bilstm.py --split=validation,test
    python -m attnjax.evaluate --workdir=RUN --split=test     # predictions.test.<step>.json: {id: answer}, every id

Data (``../shared/data``): ``squad_v1_train/train-v1.1.json.gz`` (442 articles, 87,599 questions, rebuilt from the
official explorer pages) split by a hash of each title into train (429 articles, 84,872 questions) and validation (13,
2,727); ``squad/dev-v1.1.json.gz`` (the official dev file, byte-identical: 48 articles, 10,570 questions, three
answers each) is the test split, scored by the official rules (the best of the three answers). No article or
paragraph is in both train and an evaluated split (checked when the data load). The BiLSTM reads contexts cut at 256
tokens, as in the earlier study: an answer past the cut is dropped from training and scored as a miss.
"""

from attnjax.data.catalogue import use_task
from experiments.squad import span_qa_bilstm

DATA_DIR = "../shared/data"
MINUTES = 120.0


def to_official(config):
  """A SQuAD 1.1 reader's config on the official protocol: its data, every validation question scored at each
  evaluation unless the reader's file says otherwise."""
  use_task(config, "squad_v1_official")
  config.data.dir = DATA_DIR
  config.train.time_limit_minutes = MINUTES
  return config


def get_config():
  config = to_official(span_qa_bilstm.get_config())
  config.train.steps = 1_000_000  # the 120 minutes end the run
  config.train.eval_every = config.train.checkpoint_every = 1000
  # BiDAF's recipe: evaluation reads an exponential moving average of the weights (decay 0.999); the checkpoints keep
  # both, so `attnjax.evaluate --weights=params` scores the same step without it
  config.train.ema_decay = 0.999
  return config
