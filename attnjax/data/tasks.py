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
import os
from typing import Any

from attnjax.data import squad, synthetic
from attnjax.data.sources import TEXT_SOURCES, load_text_task
from attnjax.data.tokenizer import load_or_train, load_or_train_pair
from attnjax.data.vocab import CharVocab

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
  """
  kind: str
  source: str
  fields: dict
  splits: dict
  metrics: tuple[str, ...]
  reported: tuple[str, ...]


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
                              ("rouge1", "rouge2", "rougeL")),
    "xsum": TaskSpec("summarization", "tfds_summarization", {"tfds_name": "xsum"},
                     {"train": "train", "validation": "validation", "test": "test"}, ("rouge",),
                     ("rouge1", "rouge2", "rougeL")),
    "squad_v1": TaskSpec("extractive_qa", "tfds_squad", {"tfds_name": "squad/v1.1"},
                         {"train": "train", "validation": "validation"}, ("exact_match", "f1"), ("exact_match", "f1")),
    "squad_v2": TaskSpec("extractive_qa", "tfds_squad", {"tfds_name": "squad/v2.0"},
                         {"train": "train", "validation": "validation"}, ("exact_match", "f1"), ("exact_match", "f1")),
    # The offline copies in ../shared/data (see experiments/): Multi30k task 1, and SQuAD v1.1 dev split by article.
    "multi30k_en_de": TaskSpec("translation", "parallel_text", {"src_lang": "en", "tgt_lang": "de"},
                               {"train": "train", "validation": "val", "test": "test_2016_flickr"}, _TRANSLATION,
                               ("bleu", "meteor")),
    "squad_v1_dev_by_article": TaskSpec("extractive_qa", "squad_json",
                                        {"path": "dev-v1.1.json.gz", "heldout": {"validation": 0.1, "test": 0.1}},
                                        {}, ("exact_match", "f1"), ("exact_match", "f1")),
}


_HEADLINE = {"translation": "bleu", "summarization": "rougeL", "extractive_qa": "f1"}  # ranks "best" checkpoints


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
  config.train.best_metric = _HEADLINE[spec.kind]
  if spec.kind == "extractive_qa":
    config.train.label_smoothing = 0.0  # the span loss has none


@dataclasses.dataclass
class TaskData:
  name: str
  src_vocab: Any  # encode(str) -> list[int], decode(ids) -> str, size
  tgt_vocab: Any
  splits: dict[str, list[tuple[str, str]]]
  metrics: tuple[str, ...]
  kind: str = "seq2seq"

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
  metrics = ("rouge",) if data_cfg.source in SUMMARIZATION_SOURCES else ("bleu", "chrf", "ter")
  return TaskData(data_cfg.source, src_vocab, tgt_vocab, splits, metrics)


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
      self._cache[split, train] = squad.encode_examples(
          self.splits[split], self.vocab, max_context_tokens=self.max_context_len,
          max_question_tokens=self.max_question_len, drop_unreachable=train)
    return self._cache[split, train]


def _qa(data_cfg, workdir: str) -> SpanTaskData:
  """SQuAD-format data (files or tfds) with a joint SentencePiece vocabulary trained once on the training split's
  questions and (distinct) contexts, cached in the workdir."""
  splits = squad.load_qa_task(data_cfg)
  _require_train(splits)

  def texts():  # each context once, although several questions share it
    return [q.question for q in splits["train"]] + list(dict.fromkeys(q.context for q in splits["train"]))

  vocab = load_or_train(workdir, "spm", texts, int(data_cfg.get("vocab_size", 8000)),
                        model_type=data_cfg.get("spm_model_type", "unigram"))
  version = "2.0" if any(squad.squad_version(qs) == "2.0" for qs in splits.values()) else "1.1"
  return SpanTaskData(data_cfg.source, vocab, splits, int(data_cfg.get("max_question_len", 64)),
                      int(data_cfg.get("max_context_len", 384)), version)


SOURCES = {"synthetic": _synthetic, **{name: _text for name in TEXT_SOURCES},
           **{name: _qa for name in squad.QA_SOURCES}}


def load_task(data_cfg, workdir: str) -> TaskData | SpanTaskData:
  if data_cfg.source not in SOURCES:
    raise ValueError(f"config.data.source must be one of {sorted(SOURCES)}, got {data_cfg.source!r}")
  return SOURCES[data_cfg.source](data_cfg, workdir)
