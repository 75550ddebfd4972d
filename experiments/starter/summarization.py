"""Summarization of your own documents: a pre-norm Transformer (3 + 3 layers of 256) on JSON lines, sized for a
CPU or one accelerator. Name your file and its keys by flag (see docs/own_data.md):

    python -m attnjax.train --config=experiments/starter/summarization.py --workdir=runs/my_summaries \\
        --config.data.path=articles.jsonl --config.data.document_key=body --config.data.summary_key=abstract

One file is split by a hash of each document into train and 5% validation and 5% test; ``--config.data.splits``
(split -> file) reads files of your own instead. Documents are cut to their first 400 SentencePiece pieces and
summaries to 100 for training (``data.truncate``); evaluation decodes every document of the split with beam 4 and
scores ROUGE against the whole reference.
"""

from attnjax import recipes
from attnjax.config import base_config


def get_config():
  config = base_config()
  recipes.transformer(config, "base", vocab_size=8000)
  config.model.update(num_encoder_layers=3, num_decoder_layers=3, d_model=256, num_heads=4, d_ff=1024,
                      dropout_rate=0.1, pre_norm=True, max_length=512)
  d = config.data
  d.source = "jsonl"
  d.max_src_len, d.max_tgt_len, d.truncate = 400, 101, True  # 100 summary tokens + EOS
  d.max_tokens, d.batch_size, d.bucket_boundaries = None, 16, (200,)
  t = config.train
  t.label_smoothing, t.steps, t.warmup_steps = 0.0, 20_000, 1000
  t.eval_every = t.checkpoint_every = 1000
  e = config.eval
  e.split, e.decode, e.beam_size, e.alpha = "validation", "beam", 4, 1.0
  e.max_len_a, e.max_len_b, e.min_len = 0.0, 100, 10  # summaries of 10 to 100 pieces, whatever the document's length
  e.num_decode_examples, e.batch_size = 200, 32  # checkpoints chosen on 200 validation documents; evaluate: all
  return config
