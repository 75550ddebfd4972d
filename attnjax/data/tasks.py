"""Tasks as the training loop sees them: text splits, vocabularies, and how to score them.

A task yields ``(source, target)`` text pairs per split, a source and a target vocabulary (kept in the workdir, so
that evaluation of a checkpoint uses exactly the training vocabulary), and the metrics its literature reports.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any

from attnjax.data import synthetic
from attnjax.data.sources import TEXT_SOURCES, load_text_task
from attnjax.data.tokenizer import load_or_train_pair
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


SUMMARIZATION_SOURCES = ("jsonl", "tfds_summarization")


def _text(data_cfg, workdir: str) -> TaskData:
  """Real text (files or tfds) with a SentencePiece vocabulary trained once on the training split, cached in the
  workdir (``spm.model``, or ``spm_src``/``spm_tgt`` with ``data.joint_vocab=False``)."""
  splits = load_text_task(data_cfg)
  if "train" not in splits:
    raise ValueError(f"config.data.splits must include 'train' (got {sorted(splits)})")
  src_vocab, tgt_vocab = load_or_train_pair(workdir, lambda: splits["train"], int(data_cfg.get("vocab_size", 8000)),
                                            joint=bool(data_cfg.get("joint_vocab", True)),
                                            model_type=data_cfg.get("spm_model_type", "unigram"))
  metrics = ("rouge",) if data_cfg.source in SUMMARIZATION_SOURCES else ("bleu", "chrf", "ter")
  return TaskData(data_cfg.source, src_vocab, tgt_vocab, splits, metrics)


SOURCES = {"synthetic": _synthetic, **{name: _text for name in TEXT_SOURCES}}


def load_task(data_cfg, workdir: str) -> TaskData:
  if data_cfg.source not in SOURCES:
    raise ValueError(f"config.data.source must be one of {sorted(SOURCES)}, got {data_cfg.source!r}")
  return SOURCES[data_cfg.source](data_cfg, workdir)
