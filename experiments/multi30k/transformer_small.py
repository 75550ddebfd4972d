"""Transformer-small on Multi30k task 1 (WMT16 multimodal, text only) English→German, trained on this CPU.

    python -m attnjax.train --config=experiments/multi30k/transformer_small.py --workdir=runs/multi30k \
        --config.data.dir=../shared/data/multi30k
    python -m attnjax.evaluate --workdir=runs/multi30k --split=test --checkpoint=best

Data: train 29,000 / val 1,014 / test2016 (flickr) 1,000 pairs, raw, gzipped; a joint 8k SentencePiece unigram
vocabulary trained on the training split. Model: 3+3 layers, d_model 256, 4 heads, d_ff 1024, pre-norm, dropout 0.3
(the small-data regime of Multi30k wants strong regularisation), tied embeddings.
"""

from attnjax.config import base_config
from attnjax.data.catalogue import use_task


def get_config():
  config = base_config()
  use_task(config, "multi30k_en_de")  # parallel_text: train / val / test_2016_flickr .{en,de}.gz
  d = config.data
  d.dir = "../shared/data/multi30k"
  d.vocab_size = 8000
  d.joint_vocab = True
  d.max_src_len, d.max_tgt_len = 64, 64
  d.max_tokens = 4096
  d.bucket_boundaries = (16, 24, 32, 48)
  m = config.model
  m.num_encoder_layers = m.num_decoder_layers = 3
  m.d_model, m.num_heads, m.d_ff = 256, 4, 1024
  m.dropout_rate = 0.3
  m.attention_dropout_rate = 0.1
  m.pre_norm = True
  t = config.train
  t.learning_rate = 1.0  # peak 1.0 · 256^-0.5 · 800^-0.5 = 2.2e-3
  t.warmup_steps = 800
  t.steps = 6000
  t.time_limit_minutes = 55.0  # the CPU budget of the README's run; whichever of steps / time comes first
  t.eval_every = 500
  t.checkpoint_every = 500
  t.best_metric = "bleu"
  e = config.eval
  e.split = "validation"
  e.beam_size = 4
  e.alpha = 0.6
  e.max_len_a, e.max_len_b = 1.5, 10
  e.num_decode_examples = 500  # a sample during training; attnjax.evaluate decodes the whole split
  e.batch_size = 64
  return config
