"""A tiny Wikipedia-like corpus and WordPiece vocabulary for masked-LM tests: articles whose sentences follow
patterns a small model can learn in a few dozen steps."""

import json
import os

import numpy as np

SUBJECTS = ["the cat", "a dog", "the man", "a woman", "the bird", "a child"]
VERBS = ["sees", "likes", "finds", "follows"]
OBJECTS = ["the ball", "a tree", "the house", "a river", "the road"]
WORDS = sorted({w for phrase in SUBJECTS + VERBS + OBJECTS for w in phrase.split()} | {"."})


def write_corpus(directory, articles=80, seed=0):
  """``(articles.jsonl path, vocab.txt path)`` under ``directory``; two articles are empty (skipped, counted)."""
  rng = np.random.default_rng(seed)
  os.makedirs(directory, exist_ok=True)
  lines = []
  for i in range(articles):
    sentences = [f"{rng.choice(SUBJECTS)} {rng.choice(VERBS)} {rng.choice(OBJECTS)} ." for _ in range(rng.integers(3, 12))]
    text = "" if i in (5, 17) else "\n".join(sentences)
    lines.append(json.dumps({"id": i, "title": f"Article {i}", "text": text}))
  path = os.path.join(directory, "articles.jsonl")
  with open(path, "w", encoding="utf-8") as f:
    f.write("\n".join(lines) + "\n")
  vocab = os.path.join(directory, "vocab.txt")
  with open(vocab, "w", encoding="utf-8") as f:
    f.write("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + WORDS) + "\n")
  return path, vocab


def tiny_mlm_config(directory, **train):
  from attnjax.config import base_config  # pylint: disable=g-import-not-at-top
  from attnjax.data.catalogue import use_task  # pylint: disable=g-import-not-at-top
  import ml_collections  # pylint: disable=g-import-not-at-top
  path, vocab = write_corpus(directory)
  config = base_config()
  use_task(config, "wikipedia_mlm")
  d = config.data
  d.dir = str(directory)
  d.path = "articles.jsonl"
  with d.unlocked():
    d.vocab_file = vocab
    d.seq_len = 32
    d.max_predictions = 6
  d.heldout = {"validation": 0.15, "test": 0.15}
  d.batch_size = 8
  d.max_tokens = None
  d.vocab_multiple = 1
  config.model = ml_collections.ConfigDict(dict(name="bert_mlm", d_model=32, num_layers=2, num_heads=2, d_ff=64,
                                                max_length=64, dropout_rate=0.0, attention_dropout_rate=0.0,
                                                implementation="xla"))
  t = config.train
  t.update(dict(optimizer="adam", schedule="linear", learning_rate=3e-3, warmup_steps=5, adam_b2=0.999,
                adam_eps=1e-6, weight_decay=0.01, label_smoothing=0.0, steps=60, log_every=10, eval_every=30,
                checkpoint_every=30, best_metric="mlm_accuracy", time_limit_minutes=0.0, **train))
  config.eval.loss_batches = 2
  return config
