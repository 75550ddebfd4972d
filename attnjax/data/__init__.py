"""Data for training and evaluation: synthetic tasks, vocabularies and the batching pipeline.

* :mod:`attnjax.data.synthetic`: offline tasks generated in code (``dates``, ``reverse``), :func:`make_examples`.
* :mod:`attnjax.data.vocab`: :class:`CharVocab`, a character vocabulary with the model interface's special ids.
* :mod:`attnjax.data.pipeline`: :class:`Seq2SeqBatcher`, deterministic, resumable, bucketed or packed batches.
* :mod:`attnjax.data.sources`: :func:`~attnjax.data.sources.load_text_task`, real text as ``config.data`` names it,
  read by :mod:`attnjax.data.files` (plain text, TSV, JSON lines) or :mod:`attnjax.data.tfds_sources`
  (tensorflow-datasets); :mod:`attnjax.data.pairs`: the text pairs and the filter of unusable ones;
  :mod:`attnjax.data.config_keys`: how every source reads ``config.data``.
* :mod:`attnjax.data.tokenizer`: SentencePiece vocabularies trained once per workdir.
* :mod:`attnjax.data.squad`: SQuAD records (:mod:`attnjax.data.squad_question`), answer spans in tokens and back to
  text; :mod:`attnjax.data.spans`: :class:`~attnjax.data.spans.SpanBatcher` for extractive QA.
* :mod:`attnjax.data.catalogue`: the named tasks of the literature (:func:`~attnjax.data.catalogue.use_task`).
* :mod:`attnjax.data.tasks`: the task data the task families build (:mod:`attnjax.families`).
"""

from attnjax.data.pipeline import Batch, BucketSpec, Seq2SeqBatcher
from attnjax.data.synthetic import (DATE_FORMATS, DATE_MAX, DATE_MIN, SPLITS, expand_two_digit_year, format_date,
                                    make_examples, register_task, task_names)
from attnjax.data.vocab import NUM_RESERVED, UNK_ID, UNK_TEXT, CharVocab

__all__ = [
    "Batch", "BucketSpec", "CharVocab", "DATE_FORMATS", "DATE_MAX", "DATE_MIN", "NUM_RESERVED", "SPLITS", "UNK_ID",
    "UNK_TEXT", "Seq2SeqBatcher", "expand_two_digit_year", "format_date", "make_examples", "register_task",
    "task_names",
]
