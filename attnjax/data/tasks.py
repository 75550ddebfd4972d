"""The task data the families build (the tasks of the literature by name are :mod:`attnjax.data.catalogue`'s).

* :class:`TaskData`: ``(source, target)`` text pairs per split, a source and a target vocabulary.
* :class:`SpanTaskData`: extractive QA. :class:`~attnjax.data.squad.SquadQuestion` records per split, one vocabulary
  for questions and contexts.

Which of them a config's data is, and how its vocabulary is kept in the workdir, is its task family's to say
(:mod:`attnjax.families`). Vocabularies are trained once and kept in the workdir, so that evaluating a checkpoint
uses exactly the training vocabulary.
"""

from __future__ import annotations

import dataclasses
import json
import os
import pathlib
from typing import Any

from attnjax import fs
from attnjax.data import squad, synthetic, token_cache
from attnjax.data.wordpiece import WORDPIECE_FILE

VOCAB_FILE = "vocab.json"


@dataclasses.dataclass(frozen=True)
class Vocabularies:
  """A task's vocabularies: ``src`` and ``tgt`` (the same object for a joint vocabulary or extractive QA)."""
  src: Any  # encode(str) -> list[int], decode(ids) -> str, size
  tgt: Any


@dataclasses.dataclass
class TaskData:
  name: str
  src_vocab: Any  # encode(str) -> list[int], decode(ids) -> str, size
  tgt_vocab: Any
  splits: dict[str, list[tuple[str, str]]]
  kind: str = "seq2seq"
  # Where encoded() keeps each split's token ids (tokens.<split>.<fingerprint>.npz, next to the vocabulary), so a
  # restart or another host reads them instead of tokenizing again; None: tokenize on every call. source_key
  # describes where the text came from and is part of the fingerprint.
  token_cache_dir: Any = None
  source_key: str = ""

  def encoded(self, split: str) -> token_cache.TokenizedSplit:
    """The split's token ids, stored flat; iterating gives ``(src_ids, tgt_ids)`` int32 arrays."""
    pairs = self.splits[split]
    if self.token_cache_dir is None:
      return token_cache.encode_pairs(self.src_vocab, self.tgt_vocab, pairs)
    return token_cache.load_or_encode(self.token_cache_dir, split, self.src_vocab, self.tgt_vocab, lambda: pairs,
                                      self.source_key, expected_pairs=len(pairs))


def synthetic_splits(data_cfg, only=None) -> dict[str, list[tuple[str, str]]]:
  sizes = {"train": data_cfg.train_examples, "validation": data_cfg.validation_examples,
           "test": data_cfg.test_examples}
  if only is not None:
    unknown = [name for name in only if name not in sizes]
    if unknown:
      raise ValueError(f"split(s) {unknown} are not splits of the synthetic task (train, validation, test)")
    sizes = {name: sizes[name] for name in only}
  return {split: synthetic.make_examples(data_cfg.task, split, n, seed=0) for split, n in sizes.items()}


# config.data keys that only shape batches: left out of the token cache's source_key, so that tuning them keeps the
# cache. Every other key counts, so a key added to a source later can never leave stale ids behind.
_BATCHING_KEYS = ("max_src_len", "max_tgt_len", "batch_size", "max_tokens", "bucket_boundaries", "pack",
                  "vocab_multiple", "truncate")


def source_key(data_cfg) -> str:
  """Where a text task's text comes from, as JSON: the config.data keys other than the batching ones."""
  values = data_cfg.to_dict() if hasattr(data_cfg, "to_dict") else dict(data_cfg)
  return json.dumps({k: v for k, v in values.items() if k not in _BATCHING_KEYS}, sort_keys=True, default=str)


def require_train(splits) -> None:
  if "train" not in splits:
    raise ValueError(f"the data has no 'train' split (got {sorted(splits)}): config.data.splits must name one (with "
                     f"config.data.path + config.data.heldout, 'train' is what the held-out splits leave)")


@dataclasses.dataclass
class SpanTaskData:
  """Extractive QA: questions per split, one vocabulary (``version`` "2.0" if any question of any split is
  unanswerable).

  ``examples(split)`` tokenizes a split once. For training (``train=True``) an answer that is not a token span of the
  truncated context drops its question, as there is no target; for evaluation every question is kept, so EM / F1
  count all of them as the official script does.
  """
  name: str
  vocab: Any
  splits: dict[str, list[squad.SquadQuestion]]
  max_question_len: int
  max_context_len: int
  version: str
  kind: str = "span"
  doc_stride: int | None = None  # read long contexts in windows every doc_stride tokens (None: truncate)
  _cache: dict = dataclasses.field(default_factory=dict, repr=False)

  @property
  def src_vocab(self):  # the model builder sizes embeddings from src_vocab / tgt_vocab
    return self.vocab

  @property
  def tgt_vocab(self):
    return self.vocab

  def examples(self, split: str, *, train: bool) -> list[squad.SquadExample]:
    if split not in self.splits:
      raise ValueError(f"split {split!r} (config.eval.split, or attnjax.evaluate --split) is not one of this task's "
                       f"splits {sorted(self.splits)}")
    if (split, train) not in self._cache:
      self._cache[split, train] = encode_questions(self.splits[split], self.vocab,
                                                   max_context_len=self.max_context_len,
                                                   max_question_len=self.max_question_len,
                                                   doc_stride=self.doc_stride, train=train,
                                                   null_target=self.version == "2.0")
    return self._cache[split, train]


def encode_questions(questions, vocab, *, max_context_len: int, max_question_len: int, doc_stride: int | None,
                     train: bool, null_target: bool = False):
  """SQuAD questions as examples: contexts truncated to ``max_context_len`` tokens, or with ``doc_stride`` read in
  overlapping windows (:mod:`attnjax.data.squad_windows`). ``train`` drops what has no target (with ``null_target``, a
  SQuAD 2.0 task's, a window without its question's answer is trained to answer nothing instead); evaluation keeps
  every question."""
  if doc_stride:
    from attnjax.data.squad_windows import encode_windows  # pylint: disable=g-import-not-at-top
    return encode_windows(questions, vocab, max_context_tokens=max_context_len, doc_stride=int(doc_stride),
                          max_question_tokens=max_question_len, drop_unreachable=train, null_target=null_target)
  return squad.encode_examples(questions, vocab, max_context_tokens=max_context_len,
                               max_question_tokens=max_question_len, drop_unreachable=train)


def missing_vocabulary(workdir):
  """Raises the error of a workdir without the vocabulary its training run writes (evaluation never trains one)."""
  raise FileNotFoundError(f"no vocabulary in {workdir}: a training run writes it there (spm*.model, "
                          f"{WORDPIECE_FILE} or {VOCAB_FILE}); evaluation never trains one")


def resolve_data_dir(data_cfg, workdir: str, data_dir: str | None = None) -> None:
  """Points ``data_cfg.dir`` at the data for an evaluation: ``data_dir`` (``--data_dir``) if given; else the saved
  location as it is if absolute (or a URL), and if relative, inside the workdir first, then from the current
  directory. Sources without a ``dir`` are left alone."""
  with data_cfg.unlocked():
    if data_dir:
      data_cfg.dir = str(data_dir)
      return
    saved = data_cfg.get("dir")
    if not saved or fs.is_url(saved) or os.path.isabs(saved):
      return
    # experiment files name their data relative to the repository: tried last, so that output is the same from any
    # directory
    candidates = [fs.join(workdir, saved), fs.path(saved), pathlib.Path(__file__).resolve().parents[2] / saved]
    for candidate in candidates:
      if candidate.exists():
        data_cfg.dir = str(candidate)
        return
    raise FileNotFoundError(f"config.data.dir={saved!r} (relative) is neither in the workdir nor in the current "
                            f"directory (tried {[str(c) for c in candidates]}): pass --data_dir")
