"""Fine-tuning a translation checkpoint that ``transformers`` wrote (a Marian or Pegasus model: opus-mt's, say) on
the sentence pairs of one TSV file (source, tab, target; a tenth of the pairs held out for validation and another for
test, by hashed source sentence). The model, its tokenizer and its weights are the checkpoint's (``train.init_from``:
:mod:`attnjax.training.warm_start`); Adam at a small constant rate after a short warm-up, label smoothing 0.1 as
opus-mt was trained, 4 beams for the BLEU of each evaluation.

    python -m attnjax.train --config=experiments/finetune_checkpoint.py --workdir=runs/ft \\
        --config.train.init_from=path/to/opus-mt-en-de --config.data.path=pairs.tsv
"""

from ml_collections import config_dict

from attnjax.config import base_config


def get_config():
  config = base_config()
  d = config.data
  d.source = "tsv"
  with d.unlocked():
    d.path = config_dict.placeholder(str)  # the TSV of pairs (required)
    d.heldout = {"validation": 0.1, "test": 0.1}
  d.max_src_len = d.max_tgt_len = 128
  d.bucket_boundaries = (16, 32, 64)
  d.max_tokens = 2048
  t = config.train
  t.update(steps=1000, optimizer="adam", schedule="constant", learning_rate=3e-5, warmup_steps=50, adam_b2=0.999,
           adam_eps=1e-8, label_smoothing=0.1, eval_every=250, checkpoint_every=250, best_metric="bleu")
  config.eval.update(decode="beam", beam_size=4, alpha=0.6, max_len_a=1.2, max_len_b=10)
  return config
