"""The tasks of the literature by name (:data:`TASKS`, :func:`use_task`), and the task data the families build.

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
from attnjax.data.wordpiece import WORDPIECE_FILE  # noqa: F401  (as before)

VOCAB_FILE = "vocab.json"


@dataclasses.dataclass(frozen=True)
class TaskSpec:
  """A task of the literature by name: where its data comes from and how it is scored.

  Attributes:
    kind: "translation", "summarization" or "extractive_qa".
    source: the ``config.data.source`` that reads it.
    fields: the ``config.data`` keys that select the dataset and its fields (tfds name, languages, file names...).
    splits: split -> the source's split (tfds split or file stem).
    metrics: what ``attnjax.evaluate`` computes by default.
    reported: what the literature reports on it (may include opt-in metrics such as METEOR).
    language: the target text's language (ISO 639-1), which METEOR stems in, where ``fields`` has no ``tgt_lang``;
      :func:`use_task` sets it as ``config.eval.meteor_language``.
    train: other ``config.train`` values the task's loss asks for (no label smoothing for a span loss).
  """
  kind: str
  source: str
  fields: dict
  splits: dict
  metrics: tuple[str, ...]
  reported: tuple[str, ...]
  language: str | None = None
  train: tuple[tuple[str, Any], ...] = ()


_SPAN_LOSS = (("label_smoothing", 0.0),)  # the span loss has no label smoothing
_WMT_SPLITS = {"train": "train", "validation": "validation", "test": "test"}
_TRANSLATION = ("bleu", "chrf", "ter")


def _wmt14(pair: str, src: str, tgt: str) -> TaskSpec:
  return TaskSpec("translation", "tfds_translation", {"tfds_name": f"wmt14_translate/{pair}", "src_lang": src,
                                                      "tgt_lang": tgt}, _WMT_SPLITS, _TRANSLATION,
                  ("bleu", "meteor", "ter"))


TASKS: dict[str, TaskSpec] = {
    "wmt14_en_de": _wmt14("de-en", "en", "de"),
    "wmt14_de_en": _wmt14("de-en", "de", "en"),
    "wmt14_en_fr": _wmt14("fr-en", "en", "fr"),
    "wmt14_fr_en": _wmt14("fr-en", "fr", "en"),
    "cnn_dailymail": TaskSpec("summarization", "tfds_summarization", {"tfds_name": "cnn_dailymail"},
                              {"train": "train", "validation": "validation", "test": "test"}, ("rouge",),
                              ("rouge1", "rouge2", "rougeL"), language="en"),
    "xsum": TaskSpec("summarization", "tfds_summarization", {"tfds_name": "xsum"},
                     {"train": "train", "validation": "validation", "test": "test"}, ("rouge",),
                     ("rouge1", "rouge2", "rougeL"), language="en"),
    "squad_v1": TaskSpec("extractive_qa", "tfds_squad", {"tfds_name": "squad/v1.1"},
                         {"train": "train", "validation": "validation"}, ("exact_match", "f1"), ("exact_match", "f1"),
                         train=_SPAN_LOSS),
    "squad_v2": TaskSpec("extractive_qa", "tfds_squad", {"tfds_name": "squad/v2.0", "squad_version": "2.0"},
                         {"train": "train", "validation": "validation"}, ("exact_match", "f1"), ("exact_match", "f1"),
                         train=_SPAN_LOSS),
    # The offline copies in ../shared/data (see experiments/): Multi30k task 1, manythings English–French, and
    # SQuAD v1.1 dev split by article.
    "multi30k_en_de": TaskSpec("translation", "parallel_text", {"src_lang": "en", "tgt_lang": "de"},
                               {"train": "train", "validation": "val", "test": "test_2016_flickr"}, _TRANSLATION,
                               ("bleu", "meteor")),
    # Tatoeba/manythings English→French (142,787 pairs, one TSV), split by hashed source sentence: a source sentence
    # with several translations is in one split only.
    "manythings_en_fr": TaskSpec("translation", "tsv",
                                 {"path": "eng-fra.txt.gz", "heldout": {"validation": 0.05, "test": 0.05}}, {},
                                 _TRANSLATION, ("bleu", "meteor"), language="fr"),
    # See et al.'s tokenized, lowercased CNN/DailyMail, a subset of the official splits as JSON lines (article,
    # summary with one highlight a line); 67 training articles are empty (skipped and counted), none elsewhere.
    "cnn_dailymail_subset": TaskSpec("summarization", "jsonl", {"document_key": "article", "summary_key": "summary"},
                                     {"train": "cnndm_train.jsonl.gz", "validation": "cnndm_val.jsonl.gz",
                                      "test": "cnndm_test.jsonl.gz"}, ("rouge",), ("rouge1", "rouge2", "rougeL"),
                                     language="en"),
    # English Wikipedia (2015, ../shared/data/wikipedia_en) for masked-LM pre-training, held-out articles by title hash
    "wikipedia_mlm": TaskSpec("mlm", "mlm_jsonl", {"path": "enwiki_2015_AA.jsonl.gz",
                                                   "heldout": {"validation": 0.005, "test": 0.005}},
                              {}, ("mlm_accuracy",), ("mlm_accuracy",)),
    # the same Wikipedia file for language modelling (bits per byte), with the same held-out articles
    "wikipedia_lm": TaskSpec("lm", "lm_jsonl", {"path": "enwiki_2015_AA.jsonl.gz",
                                                "heldout": {"validation": 0.005, "test": 0.005}},
                             {}, ("bits_per_byte",), ("bits_per_byte",)),
    # SQuAD 2.0 dev (35 articles, 11,873 questions, 5,945 unanswerable), split by article as v1.1's: with seed 0,
    # train 24 articles / 8,242 questions (50.0% unanswerable), validation 6 / 2,076 (51.1%), test 5 / 1,555 (48.9%)
    "squad_v2_dev_by_article": TaskSpec("extractive_qa", "squad_json",
                                        {"path": "dev-v2.0.json.gz", "heldout": {"validation": 0.2, "test": 0.2},
                                         "squad_version": "2.0"},
                                        {}, ("exact_match", "f1"), ("exact_match", "f1"),
                                        train=_SPAN_LOSS),
    "squad_v1_dev_by_article": TaskSpec("extractive_qa", "squad_json",
                                        {"path": "dev-v1.1.json.gz", "heldout": {"validation": 0.1, "test": 0.1}},
                                        {}, ("exact_match", "f1"), ("exact_match", "f1"), train=_SPAN_LOSS),
    # SQuAD 1.1 on the literature's protocol, from ../shared/data (data.dir): train on the train set (rebuilt from the
    # official explorer pages) less 5% of its articles by title hash, the validation split that chooses checkpoints
    # and settings; test is the official dev file, every question, three answers each. With seed 0: train 429
    # articles / 84,872 questions, validation 13 / 2,727, test 48 / 10,570.
    "squad_v1_official": TaskSpec("extractive_qa", "squad_json",
                                  {"path": "squad_v1_train/train-v1.1.json.gz", "heldout": {"validation": 0.05},
                                   "squad_version": "1.1"},
                                  {"test": "squad/dev-v1.1.json.gz"}, ("exact_match", "f1"), ("exact_match", "f1"),
                                  train=_SPAN_LOSS),
    # SQuAD 2.0 with real answers: the dev-by-article task's splits, its train split joined by every SQuAD 1.1
    # train question (none of whose articles is in 2.0 dev): train 466 articles / 95,841 questions, 4,125 of them
    # (4.3%) unanswerable; validation and test unchanged.
    "squad_v2_with_v1_train": TaskSpec("extractive_qa", "squad_json",
                                       {"path": "squad_v2/dev-v2.0.json.gz",
                                        "heldout": {"validation": 0.2, "test": 0.2}, "squad_version": "2.0",
                                        "train_also": "squad_v1_train/train-v1.1.json.gz"},
                                       {}, ("exact_match", "f1"), ("exact_match", "f1"),
                                       train=_SPAN_LOSS),
}


def use_task(config, name: str) -> None:
  """Points ``config.data`` at the registered task ``name`` (its source, dataset fields and splits), and sets
  ``config.eval.metrics``; the metric that ranks the best checkpoint is left to the task's family (BLEU, ROUGE-L,
  F1; SQuAD 2.0's F1 at the no-answer threshold best for its spans; bits per byte, lower is better), which training
  sets where it is unset. Experiment files call it, then set what is theirs (``data.dir``, vocabulary, lengths,
  model).

  Raises:
    ValueError: an unknown name (lists the registered ones).
  """
  if name not in TASKS:
    raise ValueError(f"unknown task {name!r}; registered tasks: {sorted(TASKS)}")
  spec = TASKS[name]
  with config.data.unlocked():
    config.data.source = spec.source
    config.data.task = name
    for key, value in spec.fields.items():
      config.data[key] = dict(value) if isinstance(value, dict) else value
    if spec.splits:
      config.data.splits = dict(spec.splits)
    elif "splits" in config.data:
      del config.data["splits"]
  config.eval.metrics = spec.metrics
  if spec.language is not None:
    config.eval.meteor_language = spec.language
  config.train.best_metric = None  # the family's own (attnjax.families.resolve_best), for this data
  config.train.best_mode = "max"
  for key, value in spec.train:
    config.train[key] = value


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
