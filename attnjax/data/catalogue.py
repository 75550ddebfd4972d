"""The tasks of the literature by name: :data:`TASKS` and :func:`use_task`, which points a config at one.

A :class:`TaskSpec` says where a task's data comes from (its ``config.data.source``, the dataset's fields and split
names) and how the literature scores it; the family of its source (:mod:`attnjax.families`) reads the data, trains
the vocabulary and ranks the checkpoints.
"""

from __future__ import annotations

import dataclasses
from typing import Any


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
