"""A BERT-style reader (``SpanQA(encoder="transformer")``, trained from scratch) on SQuAD v1.1, on this CPU.

    python -m attnjax.train --config=experiments/squad/span_qa_transformer.py --workdir=runs/squad_transformer \
        --config.data.dir=../shared/data/squad
    python -m attnjax.evaluate --workdir=runs/squad_transformer --split=test --checkpoint=best

The data, splits and vocabulary are those of ``span_qa_bilstm.py`` (see there). Model: 4 post-norm encoder layers,
d_model 128, 4 heads, d_ff 512 over "[CLS] question [SEP] context", with Shaw relative positions (clipped at 16), which
on the synthetic QA fixture learned the question-context matching several times faster than learned absolute ones.
"""

from experiments.squad import span_qa_bilstm


def get_config():
  config = span_qa_bilstm.get_config()
  config.model.encoder = "transformer"
  config.model.num_layers = 4
  with config.model.unlocked():
    config.model.update(dict(num_heads=4, d_ff=512, positional="relative", max_length=512))
  config.model.dropout_rate = 0.1
  return config
