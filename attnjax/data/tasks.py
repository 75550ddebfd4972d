"""Tasks as the training loop sees them: text splits, vocabularies, and how to score them.

A task yields ``(source, target)`` text pairs per split, a source and a target vocabulary (kept in the workdir, so
that evaluation of a checkpoint uses exactly the training vocabulary), and the metrics its literature reports.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any

from attnjax.data import synthetic
from attnjax.data.vocab import CharVocab

VOCAB_FILE = "vocab.json"


@dataclasses.dataclass
class TaskData:
  name: str
  src_vocab: Any  # encode(str) -> list[int], decode(ids) -> str, size
  tgt_vocab: Any
  splits: dict[str, list[tuple[str, str]]]
  metrics: tuple[str, ...]

  def encoded(self, split: str) -> list[tuple[list[int], list[int]]]:
    return [(self.src_vocab.encode(s), self.tgt_vocab.encode(t)) for s, t in self.splits[split]]


def _synthetic(data_cfg, workdir: str) -> TaskData:
  sizes = {"train": data_cfg.train_examples, "validation": data_cfg.validation_examples,
           "test": data_cfg.test_examples}
  splits = {split: synthetic.make_examples(data_cfg.task, split, n, seed=0) for split, n in sizes.items()}
  path = os.path.join(workdir, VOCAB_FILE)
  if os.path.exists(path):
    vocab = CharVocab.load(path)
  else:
    vocab = CharVocab.build(text for pair in splits["train"] for text in pair)
    os.makedirs(workdir, exist_ok=True)
    vocab.save(path)
  return TaskData(data_cfg.task, vocab, vocab, splits, ("exact_match", "bleu", "chrf"))


SOURCES = {"synthetic": _synthetic}


def load_task(data_cfg, workdir: str) -> TaskData:
  if data_cfg.source not in SOURCES:
    raise ValueError(f"config.data.source must be one of {sorted(SOURCES)}, got {data_cfg.source!r}")
  return SOURCES[data_cfg.source](data_cfg, workdir)
