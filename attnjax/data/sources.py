"""Config-driven text tasks: :func:`load_text_task` reads the ``(source, target)`` string pairs of every split named
by ``config.data``, through the file readers of :mod:`attnjax.data.files` and the tensorflow-datasets readers of
:mod:`attnjax.data.tfds_sources`.

A training split skips (and counts) pairs with an empty side; an evaluation split keeps every line, so that a
hypotheses file lines up with its reference file and a score covers the whole split
(:class:`~attnjax.data.pairs.PairFilter`). tfds splits are sliced per host only when ``process_index`` /
``process_count`` are given.

Config (:func:`load_text_task`): ``config.data.source`` picks the source; the other ``config.data`` keys it reads:

======================  ================================================================================================
source                  keys (default)
======================  ================================================================================================
``parallel_text``       ``dir`` (""); ``src_lang``, ``tgt_lang`` (required: file suffixes); ``splits`` (required:
                        split -> file stem, e.g. ``{"train": "train", "validation": "val", "test":
                        "test_2016_flickr"}``; reads ``<dir>/<stem>.<lang>`` or ``<dir>/<stem>.<lang>.gz``);
                        ``max_chars`` (None)
``tsv``                 ``path`` (one file, relative to ``dir`` if that is set) split by hashed source text into
                        ``heldout`` (``{"validation": 0.05, "test": 0.05}``, split -> fraction; the rest is "train")
                        with ``split_seed`` (0); and / or ``splits`` (split -> file, relative to ``dir``);
                        ``src_column`` (0), ``tgt_column`` (1), ``dir`` (""), ``max_chars`` (None)
``jsonl``               ``path`` and / or ``splits`` as for ``tsv`` (split by hashed document); ``dir`` ("");
                        ``document_key`` ("document"), ``summary_key`` ("summary"), ``max_chars`` (None)
``tfds_translation``    ``tfds_name`` ("wmt14_translate/de-en"); ``src_lang`` ("en"), ``tgt_lang`` ("de"): feature
                        keys; ``splits`` (``{"train": "train", "validation": "validation", "test": "test"}``: split ->
                        tfds split, slices like ``"train[:1%]"`` allowed); ``tfds_data_dir`` (None: tfds' default);
                        ``tfds_download`` (False); ``tfds_backend`` ("auto"); ``max_chars`` (None)
``tfds_summarization``  ``tfds_name`` (required: any tfds dataset, optionally with a config / version);
                        ``document_key``, ``summary_key`` (its feature names; known for "cnn_dailymail" and "xsum");
                        ``splits``, ``tfds_data_dir``, ``tfds_download``, ``tfds_backend``, ``max_chars`` as above
======================  ================================================================================================

Every file source splits the same way (:func:`attnjax.data.config_keys.file_splits`): ``splits`` without a
validation file has one carved out of its train file by hash (``config.data.heldout``, default 5%), and a split that
comes out empty is an error naming it.

The extractive-QA sources (``squad_json``, ``tfds_squad``) give SQuAD records rather than text pairs: see
:func:`attnjax.data.squad.load_qa_task`.

The readers used to live here and are still importable from here (``from attnjax.data.sources import parallel_text``).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any, Callable

from attnjax import fs
from attnjax.data.config_keys import configured_splits, file_splits, get, in_dir
# Re-exported (see __all__): the readers were defined here before they moved to files.py and tfds_sources.py.
from attnjax.data.files import jsonl_summarization, parallel_text, read_lines, split_by_source, tsv_pairs
from attnjax.data.pairs import Pair
from attnjax.data.tfds_sources import (SQUAD_NAMES, SUMMARIZATION_KEYS, TFDS_BACKENDS, as_text, host_split,
                                       tfds_examples, tfds_squad, tfds_summarization, tfds_translation)
from attnjax.fs import open_binary  # re-exported: it was importable from here

DEFAULT_TFDS_SPLITS = {"train": "train", "validation": "validation", "test": "test"}
DEFAULT_HELDOUT = {"validation": 0.05, "test": 0.05}


def _keep_all(split: str) -> bool:
  """Evaluation splits keep every line (see the module docstring); only training skips unusable pairs."""
  return split != "train"


def _find_file(stem: str) -> str:
  for candidate in (stem, stem + ".gz"):
    if fs.exists(candidate):
      return candidate
  raise FileNotFoundError(f"neither {stem} nor {stem}.gz exists")


def _load_parallel_text(data_cfg, only=None, **_) -> dict[str, list[Pair]]:
  directory = os.fspath(get(data_cfg, "dir", "") or "")
  src_lang, tgt_lang = get(data_cfg, "src_lang"), get(data_cfg, "tgt_lang")
  max_chars = get(data_cfg, "max_chars", None)

  def read(stem, split):
    base = in_dir(directory, os.fspath(stem))
    return parallel_text(_find_file(f"{base}.{src_lang}"), _find_file(f"{base}.{tgt_lang}"), max_chars=max_chars,
                         keep_all=_keep_all(split))

  return file_splits(data_cfg, read, key=_source_text, default_heldout=DEFAULT_HELDOUT, only=only, what="pair")


def _source_text(pair: Pair) -> str:
  return pair[0]


def _load_tsv(data_cfg, only=None, **_) -> dict[str, list[Pair]]:
  directory = os.fspath(get(data_cfg, "dir", "") or "")
  columns = {"src_column": get(data_cfg, "src_column", 0), "tgt_column": get(data_cfg, "tgt_column", 1),
             "max_chars": get(data_cfg, "max_chars", None)}

  def read(name, split):  # one file split by hashed source: its unusable lines belong to no split
    return tsv_pairs(in_dir(directory, os.fspath(name)), keep_all=_keep_all(split), **columns)

  return file_splits(data_cfg, read, key=_source_text, default_heldout=DEFAULT_HELDOUT, only=only, what="pair")


def _load_jsonl(data_cfg, only=None, **_) -> dict[str, list[Pair]]:
  directory = os.fspath(get(data_cfg, "dir", "") or "")
  keys = {"document_key": get(data_cfg, "document_key", "document"),
          "summary_key": get(data_cfg, "summary_key", "summary"), "max_chars": get(data_cfg, "max_chars", None)}

  def read(name, split):
    return jsonl_summarization(in_dir(directory, os.fspath(name)), keep_all=_keep_all(split), **keys)

  return file_splits(data_cfg, read, key=_source_text, default_heldout=DEFAULT_HELDOUT, only=only, what="document")


def _tfds_options(data_cfg, process_index, process_count) -> dict[str, Any]:
  return {"data_dir": get(data_cfg, "tfds_data_dir", None), "download": bool(get(data_cfg, "tfds_download", False)),
          "backend": get(data_cfg, "tfds_backend", "auto"), "process_index": process_index,
          "process_count": process_count, "max_chars": get(data_cfg, "max_chars", None)}


def _load_tfds_translation(data_cfg, process_index=None, process_count=None, only=None) -> dict[str, list[Pair]]:
  options = _tfds_options(data_cfg, process_index, process_count)
  name = get(data_cfg, "tfds_name", "wmt14_translate/de-en")
  src_lang, tgt_lang = get(data_cfg, "src_lang", "en"), get(data_cfg, "tgt_lang", "de")
  return {split: tfds_translation(name, src_lang, tgt_lang, tfds_split, keep_all=_keep_all(split), **options)
          for split, tfds_split in configured_splits(data_cfg, DEFAULT_TFDS_SPLITS, only=only).items()}


def _load_tfds_summarization(data_cfg, process_index=None, process_count=None, only=None) -> dict[str, list[Pair]]:
  options = _tfds_options(data_cfg, process_index, process_count)
  name = get(data_cfg, "tfds_name")
  keys = {"document_key": get(data_cfg, "document_key", None), "summary_key": get(data_cfg, "summary_key", None)}
  return {split: tfds_summarization(name, tfds_split, keep_all=_keep_all(split), **keys, **options)
          for split, tfds_split in configured_splits(data_cfg, DEFAULT_TFDS_SPLITS, only=only).items()}


TEXT_SOURCES: dict[str, Callable[..., dict[str, list[Pair]]]] = {
    "parallel_text": _load_parallel_text,
    "tsv": _load_tsv,
    "jsonl": _load_jsonl,
    "tfds_translation": _load_tfds_translation,
    "tfds_summarization": _load_tfds_summarization,
}


def load_text_task(data_cfg, *, process_index: int | None = None, process_count: int | None = None,
                   splits: Sequence[str] | None = None) -> dict[str, list[Pair]]:
  """The ``(source, target)`` text pairs of every configured split (or of ``splits`` only), read by
  ``config.data.source``.

  See the module docstring for each source's config keys. ``process_index`` / ``process_count`` slice tfds splits
  per host (file sources are small and always read whole). An evaluation reads only its split: ``splits=("test",)``
  never opens the training files (a source that splits one file, ``tsv`` with ``path``, reads that file).

  Raises:
    ValueError: an unknown ``config.data.source`` (lists the valid ones) or a missing required key (names it).
  """
  source = get(data_cfg, "source", None)
  if source not in TEXT_SOURCES:
    raise ValueError(f"config.data.source must be one of {sorted(TEXT_SOURCES)} for a text task, got {source!r}")
  return TEXT_SOURCES[source](data_cfg, process_index=process_index, process_count=process_count, only=splits)


__all__ = [
    "DEFAULT_HELDOUT", "DEFAULT_TFDS_SPLITS", "Pair", "SQUAD_NAMES", "SUMMARIZATION_KEYS", "TEXT_SOURCES",
    "TFDS_BACKENDS", "as_text", "host_split", "jsonl_summarization", "load_text_task", "open_binary", "parallel_text",
    "read_lines", "split_by_source", "tfds_examples", "tfds_squad", "tfds_summarization", "tfds_translation",
    "tsv_pairs",
]
