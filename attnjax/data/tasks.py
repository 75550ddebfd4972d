"""Tasks as the training loop sees them: text splits, vocabularies, and how to score them.

Two kinds (``task.kind``):

* ``"seq2seq"`` (:class:`TaskData`): ``(source, target)`` text pairs per split, a source and a target vocabulary, and
  the decoding metrics its literature reports (translation: BLEU, chrF, TER; summarization: ROUGE).
* ``"span"`` (:class:`SpanTaskData`): extractive QA. :class:`~attnjax.data.squad.SquadQuestion` records per split, one
  SentencePiece vocabulary for questions and contexts, and SQuAD's exact match and F1.

Vocabularies are trained once and kept in the workdir, so that evaluating a checkpoint uses exactly the training
vocabulary.
"""

from __future__ import annotations

import dataclasses
import json
import os
from typing import Any

from attnjax import fs
from attnjax.data import squad, synthetic, token_cache
from attnjax.data.sources import TEXT_SOURCES, load_text_task
from attnjax.data.tokenizer import load_or_train, load_or_train_pair
from attnjax.data.vocab import CharVocab
from attnjax.data.wordpiece import WORDPIECE_FILE, wordpiece_in_workdir  # noqa: F401  (WORDPIECE_FILE: as before)

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
  """
  kind: str
  source: str
  fields: dict
  splits: dict
  metrics: tuple[str, ...]
  reported: tuple[str, ...]
  language: str | None = None


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
                         {"train": "train", "validation": "validation"}, ("exact_match", "f1"), ("exact_match", "f1")),
    "squad_v2": TaskSpec("extractive_qa", "tfds_squad", {"tfds_name": "squad/v2.0"},
                         {"train": "train", "validation": "validation"}, ("exact_match", "f1"), ("exact_match", "f1")),
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
    "squad_v1_dev_by_article": TaskSpec("extractive_qa", "squad_json",
                                        {"path": "dev-v1.1.json.gz", "heldout": {"validation": 0.1, "test": 0.1}},
                                        {}, ("exact_match", "f1"), ("exact_match", "f1")),
}


_HEADLINE = {"translation": "bleu", "summarization": "rougeL", "extractive_qa": "f1", "mlm": "mlm_accuracy",
             "lm": "bits_per_byte"}  # ranks "best" checkpoints


def use_task(config, name: str) -> None:
  """Points ``config.data`` at the registered task ``name`` (its source, dataset fields and splits), and sets
  ``config.eval.metrics`` and the metric that ranks the best checkpoint (BLEU, ROUGE-L, F1). Experiment files call
  it, then set what is theirs (``data.dir``, vocabulary, lengths, model).

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
  config.train.best_metric = _HEADLINE[spec.kind]
  config.train.best_mode = "min" if spec.kind == "lm" else "max"  # bits per byte: lower is better
  if spec.kind == "extractive_qa":
    config.train.label_smoothing = 0.0  # the span loss has none


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
  metrics: tuple[str, ...]
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


def _synthetic_splits(data_cfg, only=None) -> dict[str, list[tuple[str, str]]]:
  sizes = {"train": data_cfg.train_examples, "validation": data_cfg.validation_examples,
           "test": data_cfg.test_examples}
  if only is not None:
    unknown = [name for name in only if name not in sizes]
    if unknown:
      raise ValueError(f"split(s) {unknown} are not splits of the synthetic task (train, validation, test)")
    sizes = {name: sizes[name] for name in only}
  return {split: synthetic.make_examples(data_cfg.task, split, n, seed=0) for split, n in sizes.items()}


# What a synthetic task is scored with by default. A reversed string is one unspaced word, which sacreBLEU's 13a
# tokenizer leaves whole: no bigrams, so BLEU is 0 for every output, right or wrong, and only misleads a table. Dates
# keep BLEU ("2018-05-09" splits at the hyphens into five tokens).
_SYNTHETIC_METRICS = {"reverse": ("exact_match", "chrf")}
_SYNTHETIC_DEFAULT_METRICS = ("exact_match", "bleu", "chrf")


def default_metrics(data_cfg) -> tuple[str, ...]:
  """What a task is scored with when ``config.eval.metrics`` is empty: the one answer that training's evaluations
  and ``attnjax.evaluate`` share."""
  if data_cfg.source == "synthetic":
    return _SYNTHETIC_METRICS.get(data_cfg.task, _SYNTHETIC_DEFAULT_METRICS)
  if data_cfg.source in squad.QA_SOURCES:
    return ("exact_match", "f1")
  return ("rouge",) if data_cfg.source in SUMMARIZATION_SOURCES else ("bleu", "chrf", "ter")


def _synthetic(data_cfg, workdir: str) -> TaskData:
  splits = _synthetic_splits(data_cfg)
  path = fs.join(workdir, VOCAB_FILE)
  if path.exists():
    vocab = CharVocab.load(path)
  else:
    vocab = CharVocab.build(text for pair in splits["train"] for text in pair)
    vocab.save(path)
  return TaskData(data_cfg.task, vocab, vocab, splits, default_metrics(data_cfg))


SUMMARIZATION_SOURCES = ("jsonl", "tfds_summarization")
# config.data keys that only shape batches: left out of the token cache's source_key, so that tuning them keeps the
# cache. Every other key counts, so a key added to a source later can never leave stale ids behind.
_BATCHING_KEYS = ("max_src_len", "max_tgt_len", "batch_size", "max_tokens", "bucket_boundaries", "pack",
                  "vocab_multiple", "truncate")


def _source_key(data_cfg) -> str:
  """Where a text task's text comes from, as JSON: the config.data keys other than the batching ones."""
  values = data_cfg.to_dict() if hasattr(data_cfg, "to_dict") else dict(data_cfg)
  return json.dumps({k: v for k, v in values.items() if k not in _BATCHING_KEYS}, sort_keys=True, default=str)


def _require_train(splits) -> None:
  if "train" not in splits:
    raise ValueError(f"the data has no 'train' split (got {sorted(splits)}): config.data.splits must name one (with "
                     f"config.data.path + config.data.heldout, 'train' is what the held-out splits leave)")


def _text(data_cfg, workdir: str) -> TaskData:
  """Real text (files or tfds) with a SentencePiece vocabulary trained once on the training split, cached in the
  workdir (``spm.model``, or ``spm_src``/``spm_tgt`` with ``data.joint_vocab=False``)."""
  splits = load_text_task(data_cfg)
  _require_train(splits)
  src_vocab, tgt_vocab = load_or_train_pair(workdir, lambda: splits["train"], int(data_cfg.get("vocab_size", 8000)),
                                            joint=bool(data_cfg.get("joint_vocab", True)),
                                            model_type=data_cfg.get("spm_model_type", "unigram"))
  return TaskData(data_cfg.source, src_vocab, tgt_vocab, splits, default_metrics(data_cfg), token_cache_dir=workdir,
                  source_key=_source_key(data_cfg))


@dataclasses.dataclass
class SpanTaskData:
  """Extractive QA: questions per split, one vocabulary, SQuAD EM / F1 (``version`` "2.0" if any question of any split
  is unanswerable).

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
  metrics: tuple[str, ...] = ("exact_match", "f1")
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
                                                   doc_stride=self.doc_stride, train=train)
    return self._cache[split, train]


def _qa(data_cfg, workdir: str) -> SpanTaskData:
  """SQuAD-format data (files or tfds) with a joint SentencePiece vocabulary trained once on the training split's
  questions and (distinct) contexts, cached in the workdir."""
  splits = squad.load_qa_task(data_cfg)
  _require_train(splits)

  def texts():  # each context once, although several questions share it
    return [q.question for q in splits["train"]] + list(dict.fromkeys(q.context for q in splits["train"]))

  if data_cfg.get("vocab_file"):  # a pre-trained encoder's WordPiece vocabulary, kept in the workdir
    vocab = wordpiece_in_workdir(data_cfg, workdir)
  else:
    vocab = load_or_train(workdir, "spm", texts, int(data_cfg.get("vocab_size", 8000)),
                          model_type=data_cfg.get("spm_model_type", "unigram"))
  version = "2.0" if any(squad.squad_version(qs) == "2.0" for qs in splits.values()) else "1.1"
  return SpanTaskData(data_cfg.source, vocab, splits, int(data_cfg.get("max_question_len", 64)),
                      int(data_cfg.get("max_context_len", 384)), version, doc_stride=data_cfg.get("doc_stride"))


def encode_questions(questions, vocab, *, max_context_len: int, max_question_len: int, doc_stride: int | None,
                     train: bool):
  """SQuAD questions as examples: contexts truncated to ``max_context_len`` tokens, or with ``doc_stride`` read in
  overlapping windows (:mod:`attnjax.data.squad_windows`). ``train`` drops what has no target; evaluation keeps every
  question."""
  if doc_stride:
    from attnjax.data.squad_windows import encode_windows  # pylint: disable=g-import-not-at-top
    return encode_windows(questions, vocab, max_context_tokens=max_context_len, doc_stride=int(doc_stride),
                          max_question_tokens=max_question_len, drop_unreachable=train)
  return squad.encode_examples(questions, vocab, max_context_tokens=max_context_len,
                               max_question_tokens=max_question_len, drop_unreachable=train)


def _lm(data_cfg, workdir: str):
  from attnjax.data.lm import LmTaskData  # pylint: disable=g-import-not-at-top
  return LmTaskData(data_cfg, workdir)


def _mlm(data_cfg, workdir: str):
  from attnjax.data.mlm import MlmTaskData  # pylint: disable=g-import-not-at-top
  return MlmTaskData(data_cfg, workdir)


SOURCES = {"synthetic": _synthetic, **{name: _text for name in TEXT_SOURCES},
           **{name: _qa for name in squad.QA_SOURCES}, "mlm_jsonl": _mlm, "lm_jsonl": _lm}


def load_task(data_cfg, workdir: str) -> TaskData | SpanTaskData:
  if data_cfg.source not in SOURCES:
    raise ValueError(f"config.data.source must be one of {sorted(SOURCES)}, got {data_cfg.source!r}")
  return SOURCES[data_cfg.source](data_cfg, workdir)


# ------------------------------------------------------------------------------------------- inference from a workdir


def _missing_vocab(workdir):
  def fail():
    raise FileNotFoundError(f"no vocabulary in {workdir}: a training run writes it there (spm*.model or {VOCAB_FILE}); "
                            f"evaluation never trains one")
  return fail


def load_vocabularies(data_cfg, workdir: str) -> Vocabularies:
  """The vocabularies a training run left in ``workdir`` (never trains one, never reads training data)."""
  if data_cfg.source == "synthetic":
    path = fs.join(workdir, VOCAB_FILE)
    if not path.exists():
      _missing_vocab(workdir)()
    vocab = CharVocab.load(path)
    return Vocabularies(vocab, vocab)
  size, model_type = int(data_cfg.get("vocab_size", 8000)), data_cfg.get("spm_model_type", "unigram")
  if data_cfg.source == "lm_jsonl":
    return Vocabularies(*(2 * [load_or_train(workdir, "spm", _missing_vocab(workdir), size, model_type=model_type)]))
  if data_cfg.source == "mlm_jsonl" or (data_cfg.source in squad.QA_SOURCES and data_cfg.get("vocab_file")):
    if not fs.exists(fs.join(workdir, WORDPIECE_FILE)):
      _missing_vocab(workdir)()
    vocab = wordpiece_in_workdir(data_cfg, workdir)
    return Vocabularies(vocab, vocab)
  if data_cfg.source in squad.QA_SOURCES:
    vocab = load_or_train(workdir, "spm", _missing_vocab(workdir), size, model_type=model_type)
    return Vocabularies(vocab, vocab)
  src, tgt = load_or_train_pair(workdir, _missing_vocab(workdir), size, joint=bool(data_cfg.get("joint_vocab", True)),
                                model_type=model_type)
  return Vocabularies(src, tgt)


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
    candidates = [fs.join(workdir, saved), fs.path(saved)]
    for candidate in candidates:
      if candidate.exists():
        data_cfg.dir = str(candidate)
        return
    raise FileNotFoundError(f"config.data.dir={saved!r} (relative) is neither in the workdir nor in the current "
                            f"directory (tried {[str(c) for c in candidates]}): pass --data_dir")


def load_split(data_cfg, split: str) -> list:
  """Only ``split`` of a task, every example of it in order: ``(source, target)`` pairs, or SQuAD questions."""
  if data_cfg.source == "synthetic":
    return _synthetic_splits(data_cfg, only=(split,))[split]
  if data_cfg.source in squad.QA_SOURCES:
    return squad.load_qa_task(data_cfg, splits=(split,))[split]
  return load_text_task(data_cfg, splits=(split,))[split]
