"""A tiny language-modelling config over the masked-LM test corpus (patterned sentences a small model learns)."""

import ml_collections

from tests.mlm_fixture import write_corpus


def tiny_lm_config(directory, **train):
  from attnjax.config import base_config  # pylint: disable=g-import-not-at-top
  from attnjax.data.catalogue import use_task  # pylint: disable=g-import-not-at-top
  write_corpus(directory)
  config = base_config()
  use_task(config, "wikipedia_lm")
  d = config.data
  d.dir = str(directory)
  d.path = "articles.jsonl"
  with d.unlocked():
    d.seq_len = 32
    d.vocab_size = 40
    d.spm_model_type = "bpe"
  d.heldout = {"validation": 0.15, "test": 0.15}
  d.batch_size = 8
  d.max_tokens = None
  config.model = ml_collections.ConfigDict(dict(name="decoder_lm", d_model=32, num_layers=2, num_heads=2, d_ff=64,
                                                max_length=64, dropout_rate=0.0, implementation="xla"))
  t = config.train
  t.update({**dict(optimizer="adam", schedule="linear", learning_rate=3e-3, warmup_steps=5, adam_b2=0.99,
                   label_smoothing=0.0, steps=60, log_every=10, eval_every=30, checkpoint_every=30,
                   time_limit_minutes=0.0), **train})
  config.eval.loss_batches = 2
  return config
