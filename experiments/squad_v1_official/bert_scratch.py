"""SQuAD 1.1 on the literature's protocol (see ``bilstm.py``): the MiniLM-sized BERT reader of the transfer study
(``experiments/squad_transfer/bert_scratch.py``: 6 post-norm layers of 384, 12 heads, BERT's uncased WordPiece
vocabulary) trained from random weights for 120 minutes of this machine; ``bert_from_minilm.py`` starts the same
reader from ``all-MiniLM-L6-v2``. The two differ only in their initial weights (and learning rate, the transfer
study's: 5e-4 from scratch, 1e-4 from pre-trained weights).

    make minilm
    python -m launch.launch --workdir_root=runs/squad_official \\
        --experiment=experiments/squad_v1_official/bert_scratch.py --split=validation,test

Contexts are read in windows of 256 tokens every 128 (``data.doc_stride``, BERT's own rule for long paragraphs): a
training question keeps the windows that hold its whole answer, and evaluation takes the best span over every window
of a question, so no answer of the official dev set is out of reach. The schedule is tied to the budget
(``budget_linear``: warm-up over the first 100 steps, then linear decay to 0 when the 120 minutes are spent, however
fast the machine steps). Checkpoints are chosen on the first 1,000 validation questions, which leaves the budget's time
to training; the launcher then scores the kept one on all of validation and on all of test.
"""

from experiments.squad_transfer import bert_scratch
from experiments.squad_v1_official.bilstm import to_official

DOC_STRIDE = 128


def official_bert(config, learning_rate: float, every: int = 400):
  """A transfer-study BERT reader's config on the official protocol: 120 minutes, the rate decaying to 0 at their
  end (``budget_linear``), an evaluation and a checkpoint ``every`` steps, checkpoints chosen on the first 1,000
  validation questions. A reader that reads windows already (``data.doc_stride``) keeps its own."""
  config = to_official(config)
  if not config.data.get("doc_stride"):
    with config.data.unlocked():
      config.data.doc_stride = DOC_STRIDE
  t = config.train
  t.schedule, t.warmup_steps, t.learning_rate = "budget_linear", 100, learning_rate
  t.steps = 1_000_000  # the 120 minutes end the run
  t.eval_every = t.checkpoint_every = every
  config.eval.num_decode_examples = 1000
  return config


def get_config():
  return official_bert(bert_scratch.get_config(), learning_rate=5e-4)
