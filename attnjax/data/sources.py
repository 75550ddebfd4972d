"""Where real text comes from: files and tensorflow-datasets, read into ``(source, target)`` string pairs per split.

File sources (UTF-8, optionally gzipped: by a ``.gz`` name or gzip's magic bytes):

* :func:`parallel_text`: two aligned plain-text files, one segment per line (Multi30k, WMT-style ``train.en`` /
  ``train.de``).
* :func:`tsv_pairs`: one file of tab-separated columns (manythings.org / Tatoeba ``English<TAB>French<TAB>
  attribution``); :func:`split_by_source` makes held-out splits from it.
* :func:`jsonl_summarization`: JSON lines with a document and a summary field.

Errors name the file and the line. In a training split a pair with an empty side (or, with ``max_chars``, a side
longer than that) is skipped and counted in an absl warning, never silently. An evaluation split keeps every line
(``keep_all=True``, counted in the log), so that a hypotheses file lines up with its reference file and a score covers
the whole split. Without ``max_chars``, over-long examples are left to
:class:`attnjax.data.pipeline.Seq2SeqBatcher`, which skips and counts them by token length.

tensorflow-datasets sources (:func:`tfds_translation`, :func:`tfds_summarization`, :func:`tfds_squad`) read prepared
datasets from ``data_dir`` (``download=False`` by default: nothing is fetched unless asked for). Two back ends:

* ``backend="load"``: ``tfds.load(..., as_supervised=False)`` + ``tfds.as_numpy``; needs TensorFlow.
* ``backend="data_source"``: ``tfds.data_source`` (random access to ArrayRecord files, no TensorFlow). The data must
  have been prepared in the ``array_record`` format (``tfds build --file_format=array_record``, or
  ``download=True`` here, which prepares it so), and preparing most of these datasets needs TensorFlow itself.
* ``backend="auto"`` (default): "load" when TensorFlow is installed, else "data_source".

``process_index`` / ``process_count`` read only this host's slice (``tfds.split_for_jax_process``, i.e.
``tfds.even_splits(split, process_count)[process_index]``). :class:`~attnjax.data.pipeline.Seq2SeqBatcher` shards
*global* batches itself and so wants every host to read the whole split: :func:`load_text_task` slices only when asked.

Config (:func:`load_text_task`): ``config.data.source`` picks the source; the other ``config.data`` keys it reads:

=====================  =================================================================================================
source                 keys (default)
=====================  =================================================================================================
``parallel_text``      ``dir`` (required); ``src_lang``, ``tgt_lang`` (required: file suffixes); ``splits`` (required:
                       split -> file stem, e.g. ``{"train": "train", "validation": "val", "test":
                       "test_2016_flickr"}``; reads ``<dir>/<stem>.<lang>`` or ``<dir>/<stem>.<lang>.gz``);
                       ``max_chars`` (None)
``tsv``                ``path`` (one file, relative to ``dir`` if that is set) split by hashed source text into
                       ``heldout`` (``{"validation": 0.05, "test": 0.05}``, split -> fraction; the rest is "train")
                       with ``split_seed`` (0); or instead of ``path``, ``splits`` (split -> file, relative to
                       ``dir``); ``src_column`` (0), ``tgt_column`` (1), ``dir`` (""), ``max_chars`` (None)
``jsonl``              ``splits`` (required: split -> file, relative to ``dir``); ``dir`` (""); ``document_key``
                       ("document"), ``summary_key`` ("summary"), ``max_chars`` (None)
``tfds_translation``   ``tfds_name`` ("wmt14_translate/de-en"); ``src_lang`` ("en"), ``tgt_lang`` ("de"): feature
                       keys; ``splits`` (``{"train": "train", "validation": "validation", "test": "test"}``: split ->
                       tfds split, slices like ``"train[:1%]"`` allowed); ``tfds_data_dir`` (None: tfds' default);
                       ``tfds_download`` (False); ``tfds_backend`` ("auto"); ``max_chars`` (None)
``tfds_summarization`` ``tfds_name`` (required: "cnn_dailymail" or "xsum", optionally with a config / version);
                       ``splits``, ``tfds_data_dir``, ``tfds_download``, ``tfds_backend``, ``max_chars`` as above
=====================  =================================================================================================

The extractive-QA sources (``squad_json``, ``tfds_squad``) give SQuAD records rather than text pairs: see
:func:`attnjax.data.squad.load_qa_task`.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import json
import os
from collections.abc import Iterator, Mapping
from typing import Any, BinaryIO, Callable, Sequence

import numpy as np
from absl import logging

from attnjax import fs
from attnjax.fs import open_binary  # re-exported: the readers of this package open files through it

Pair = tuple[str, str]
PathLike = str | os.PathLike

TFDS_BACKENDS = ("auto", "load", "data_source")
SUMMARIZATION_KEYS = {"cnn_dailymail": ("article", "highlights"), "xsum": ("document", "summary")}
SQUAD_NAMES = ("squad/v1.1", "squad/v2.0")
DEFAULT_TFDS_SPLITS = {"train": "train", "validation": "validation", "test": "test"}
DEFAULT_HELDOUT = {"validation": 0.05, "test": 0.05}

# ---------------------------------------------------------------------------------------------------------- files


def read_lines(path: PathLike) -> list[str]:
  """The lines of a UTF-8 (optionally gzipped) text file without their ``\\n`` / ``\\r\\n`` ends.

  Lines break at ``\\n`` only: ``str.splitlines`` would also break at ``\\x0b``, ``\\x1c``, U+2028 ..., which occur
  inside real segments and would silently misalign two parallel files.

  Raises:
    ValueError: invalid UTF-8, naming the file, the line and the byte.
  """
  lines = []
  with open_binary(path) as f:
    try:
      for number, raw in enumerate(f, start=1):
        lines.append(_decode_line(raw, path, number))
    except (OSError, EOFError) as e:  # gzip.BadGzipFile is an OSError; a truncated gzip stream raises EOFError
      raise ValueError(f"{os.fspath(path)}: cannot be read as gzip after line {len(lines)}: {e}") from None
  return lines


def _decode_line(raw: bytes, path: PathLike, number: int) -> str:
  try:
    line = raw.decode("utf-8")
  except UnicodeDecodeError as e:
    raise ValueError(f"file {os.fspath(path)}, line {number}: invalid UTF-8 (byte 0x{raw[e.start]:02x} at byte "
                     f"{e.start + 1} of the line: {e.reason})") from None
  if line.endswith("\n"):
    line = line[:-1]
  if line.endswith("\r"):
    line = line[:-1]
  if number == 1 and line.startswith("\ufeff"):
    line = line[1:]  # a byte-order mark is an editor artefact, not part of the first segment
  return line


class _Filter:
  """Skips pairs with an empty side or, with ``max_chars``, a side longer than that, and logs the counts."""

  def __init__(self, where: str, max_chars: int | None, keep_all: bool = False):
    if max_chars is not None and max_chars < 1:
      raise ValueError(f"max_chars must be positive or None, got {max_chars}")
    self.where, self.max_chars, self.keep_all = where, max_chars, keep_all
    self.total = self.empty = self.too_long = 0
    self.first_empty = self.first_too_long = None

  def keep(self, src: str, tgt: str, position: Any) -> bool:
    self.total += 1
    if not src.strip() or not tgt.strip():
      self.empty += 1
      self.first_empty = self.first_empty or position
      return self.keep_all
    if self.max_chars is not None and max(len(src), len(tgt)) > self.max_chars:
      self.too_long += 1
      self.first_too_long = self.first_too_long or position
      return self.keep_all
    return True

  def log(self) -> None:
    if self.keep_all:
      if self.empty or self.too_long:
        logging.info("%s: kept all %d pairs for evaluation, %d with an empty side%s", self.where, self.total,
                     self.empty, f", {self.too_long} longer than max_chars" if self.too_long else "")
      return
    if self.empty:
      logging.warning("%s: skipped %d of %d pairs with an empty side (first: %s)", self.where, self.empty,
                      self.total, self.first_empty)
    if self.too_long:
      logging.warning("%s: skipped %d of %d pairs with a side longer than max_chars=%d characters (first: %s)",
                      self.where, self.too_long, self.total, self.max_chars, self.first_too_long)


def parallel_text(src_path: PathLike, tgt_path: PathLike, *, max_chars: int | None = None,
                  keep_all: bool = False) -> list[Pair]:
  """Pairs line i of ``src_path`` with line i of ``tgt_path`` (UTF-8 text, optionally gzipped).

  Lines are kept as they are apart from their line ends. Pairs with an empty (or whitespace-only) side, and with
  ``max_chars`` those with a side longer than that many characters, are skipped and counted in a warning, unless
  ``keep_all`` (an evaluation split: every line is kept).

  Raises:
    ValueError: the files have different numbers of lines ("a.en has 10 lines, a.de has 9"), or a line is not valid
      UTF-8 (names the file and the line).
  """
  src_lines, tgt_lines = read_lines(src_path), read_lines(tgt_path)
  if len(src_lines) != len(tgt_lines):
    raise ValueError(f"{os.fspath(src_path)} has {len(src_lines)} lines, {os.fspath(tgt_path)} has "
                     f"{len(tgt_lines)}: parallel files must be aligned line by line (line "
                     f"{min(len(src_lines), len(tgt_lines)) + 1} has no counterpart)")
  filt = _Filter(f"{os.fspath(src_path)} / {os.fspath(tgt_path)}", max_chars, keep_all)
  pairs = [(s, t) for number, (s, t) in enumerate(zip(src_lines, tgt_lines), start=1)
           if filt.keep(s, t, f"line {number}")]
  filt.log()
  return pairs


def tsv_pairs(path: PathLike, src_column: int = 0, tgt_column: int = 1, *,
              max_chars: int | None = None, keep_all: bool = False) -> list[Pair]:
  """Pairs from two tab-separated columns of a UTF-8 (optionally gzipped) file, e.g. manythings.org's
  ``English<TAB>French<TAB>attribution`` (columns 0 and 1; swap them for French -> English).

  An empty line counts as an empty pair (skipped and counted, as are pairs with an empty side or, with ``max_chars``,
  an over-long one).

  Raises:
    ValueError: a non-empty line with too few columns, or invalid UTF-8 (names the file and the line).
  """
  if src_column < 0 or tgt_column < 0 or src_column == tgt_column:
    raise ValueError(f"src_column and tgt_column must be distinct non-negative column indices, got {src_column} and "
                     f"{tgt_column}")
  needed = max(src_column, tgt_column) + 1
  filt = _Filter(os.fspath(path), max_chars, keep_all)
  pairs = []
  for number, line in enumerate(read_lines(path), start=1):
    if not line.strip():
      if filt.keep("", "", f"line {number}"):
        pairs.append(("", ""))
      continue
    fields = line.split("\t")
    if len(fields) < needed:
      raise ValueError(f"file {os.fspath(path)}, line {number}: expected at least {needed} tab-separated columns "
                       f"(src_column={src_column}, tgt_column={tgt_column}), found {len(fields)}: {line[:80]!r}")
    src, tgt = fields[src_column], fields[tgt_column]
    if filt.keep(src, tgt, f"line {number}"):
      pairs.append((src, tgt))
  filt.log()
  return pairs


def jsonl_summarization(path: PathLike, document_key: str = "document", summary_key: str = "summary", *,
                        max_chars: int | None = None, keep_all: bool = False) -> list[Pair]:
  """(document, summary) pairs from a JSON-lines file (one JSON object per line; blank lines are ignored).

  Raises:
    ValueError: a line that is not JSON, not an object, lacks a key or has a non-string value (names file and line).
  """
  filt = _Filter(os.fspath(path), max_chars, keep_all)
  pairs = []
  for number, line in enumerate(read_lines(path), start=1):
    if not line.strip():
      continue
    where = f"file {os.fspath(path)}, line {number}"
    try:
      record = json.loads(line)
    except json.JSONDecodeError as e:
      raise ValueError(f"{where}: invalid JSON: {e.msg} at column {e.colno}") from None
    if not isinstance(record, dict):
      raise ValueError(f"{where}: expected a JSON object with {document_key!r} and {summary_key!r}, got "
                       f"{type(record).__name__}")
    for key in (document_key, summary_key):
      if key not in record:
        raise ValueError(f"{where}: missing key {key!r} (keys: {sorted(record)})")
      if not isinstance(record[key], str):
        raise ValueError(f"{where}: {key!r} must be a string, got {type(record[key]).__name__}")
    if filt.keep(record[document_key], record[summary_key], f"line {number}"):
      pairs.append((record[document_key], record[summary_key]))
  filt.log()
  return pairs


def split_by_source(pairs: Sequence[Any], heldout: Mapping[str, float], *, seed: int = 0,
                    remainder: str = "train", key: Callable[[Any], str] = lambda pair: pair[0]) -> dict[str, list]:
  """Splits pairs into ``heldout`` splits (name -> fraction) and ``remainder`` by a hash of the source text (or of
  ``key(item)``: SQuAD questions are split by article, so no paragraph is seen in training and evaluation).

  All pairs with the same source land in the same split, so the several translations Tatoeba has for one sentence
  cannot leak from training into evaluation. The split of a pair depends only on (seed, its source), not on the order
  or the other pairs, so adding data never moves an existing pair. Fractions are of distinct sources, hence only
  approximately of pairs.
  """
  if remainder in heldout:
    raise ValueError(f"heldout must not contain the remainder split {remainder!r}")
  total = sum(heldout.values())
  if any(f < 0 for f in heldout.values()) or total >= 1:
    raise ValueError(f"heldout fractions must be non-negative and sum to less than 1, got {dict(heldout)}")
  bounds, upper = [], 0.0
  for name, fraction in heldout.items():
    upper += fraction
    bounds.append((upper, name))
  out: dict[str, list] = {remainder: [], **{name: [] for name in heldout}}
  for pair in pairs:
    digest = hashlib.sha256(f"{seed}\x00{key(pair)}".encode("utf-8")).digest()
    u = int.from_bytes(digest[:8], "big") / 2.0**64
    out[next((name for bound, name in bounds if u < bound), remainder)].append(pair)
  return out


# ---------------------------------------------------------------------------------------------------------- tfds

# Datasets that tfds registers only when their module is imported: tfds imports its legacy dataset packages lazily,
# and without TensorFlow nothing triggers that import, so tfds.data_source("xsum") would say "not found".
_TFDS_MODULES = {"wmt": "tensorflow_datasets.translate", "cnn_dailymail": "tensorflow_datasets.summarization",
                 "xsum": "tensorflow_datasets.summarization"}


def _import_tfds(name: str):
  import tensorflow_datasets as tfds  # pylint: disable=g-import-not-at-top  (0.3 s; only tfds sources need it)
  base = _base_name(name)
  for prefix, module in _TFDS_MODULES.items():
    if base.startswith(prefix):
      importlib.import_module(module)
  return tfds


def _base_name(name: str) -> str:
  return name.split("/")[0].split(":")[0]


def _resolve_backend(backend: str) -> str:
  if backend not in TFDS_BACKENDS:
    raise ValueError(f"tfds backend must be one of {TFDS_BACKENDS}, got {backend!r}")
  if backend == "auto":
    return "load" if importlib.util.find_spec("tensorflow") is not None else "data_source"
  return backend


def host_split(split: Any, process_index: int | None = None, process_count: int | None = None) -> Any:
  """``split`` itself, or this process's even slice of it (``tfds.split_for_jax_process``) when process_count > 1."""
  if process_count is None and process_index is None:
    return split
  if process_count is None or process_index is None:
    raise ValueError("give both process_index and process_count, or neither")
  if process_count < 1 or not 0 <= process_index < process_count:
    raise ValueError(f"need 0 <= process_index < process_count, got {process_index} and {process_count}")
  if process_count == 1:
    return split
  import tensorflow_datasets as tfds  # pylint: disable=g-import-not-at-top
  return tfds.split_for_jax_process(split, process_index=process_index, process_count=process_count)


def tfds_examples(name: str, split: Any = "train", *, data_dir: str | None = None, download: bool = False,
                  backend: str = "auto", process_index: int | None = None,
                  process_count: int | None = None) -> Iterator[dict[str, Any]]:
  """The examples of a tensorflow-datasets split as dicts of NumPy values / Python strings, in the stored order.

  See the module docstring for ``backend`` and the per-process slicing. Text features come as ``bytes`` or ``str``
  depending on the back end; use :func:`as_text`.
  """
  tfds = _import_tfds(name)
  backend = _resolve_backend(backend)
  split = host_split(split, process_index, process_count)
  try:
    if backend == "load":
      source = tfds.as_numpy(tfds.load(name, split=split, data_dir=data_dir, download=download, as_supervised=False,
                                       shuffle_files=False))
    else:
      source = tfds.data_source(name, split=split, data_dir=data_dir, download=download)
  except Exception as e:  # pylint: disable=broad-except  (tfds raises AssertionError, FileNotFoundError, ...)
    if not download:
      e.add_note(f"attnjax: tfds dataset {name!r} split {split!r} was read with download=False from data_dir="
                 f"{data_dir!r} (None: $TFDS_DATA_DIR or ~/tensorflow_datasets). Prepare it there first (`tfds build "
                 f"{name}`, with --file_format=array_record for the data_source back end), or set "
                 f"config.data.tfds_download=True on a machine with a network.")
    raise
  if backend == "load":
    yield from source
    return
  for i in range(len(source)):
    yield source[i]


def as_text(value: Any, where: str = "") -> str:
  """A tfds text feature (``bytes``, ``np.bytes_``, ``str``) as ``str``."""
  if isinstance(value, (bytes, np.bytes_)):
    try:
      return bytes(value).decode("utf-8")
    except UnicodeDecodeError as e:
      raise ValueError(f"{where}: invalid UTF-8 in a text feature: {e}") from None
  if isinstance(value, str):
    return str(value)
  if isinstance(value, np.ndarray) and value.ndim == 0:
    return as_text(value.item(), where)
  raise TypeError(f"{where}: expected a text feature (bytes or str), got {type(value).__name__}")


def _feature(example: Mapping[str, Any], key: str, where: str) -> Any:
  if key not in example:
    raise ValueError(f"{where}: no feature {key!r} (features: {sorted(example)})")
  return example[key]


def _tfds_pairs(name: str, split: Any, src_key: str, tgt_key: str, max_chars: int | None, keep_all: bool = False,
                **read_options) -> list[Pair]:
  filt = _Filter(f"tfds {name} split {split!r}", max_chars, keep_all)
  pairs = []
  for i, example in enumerate(tfds_examples(name, split, **read_options)):
    where = f"tfds {name} split {split!r}, example {i}"
    src = as_text(_feature(example, src_key, where), where)
    tgt = as_text(_feature(example, tgt_key, where), where)
    if filt.keep(src, tgt, f"example {i}"):
      pairs.append((src, tgt))
  filt.log()
  return pairs


def tfds_translation(name: str = "wmt14_translate/de-en", src_lang: str = "en", tgt_lang: str = "de",
                     split: Any = "train", *, data_dir: str | None = None, download: bool = False,
                     backend: str = "auto", process_index: int | None = None, process_count: int | None = None,
                     max_chars: int | None = None, keep_all: bool = False) -> list[Pair]:
  """(source, target) pairs of a tfds translation dataset, whose features are named by language ("de", "en").

  Empty pairs (and with ``max_chars`` over-long ones) are skipped and counted. See :func:`tfds_examples` for the
  reading options.
  """
  return _tfds_pairs(name, split, src_lang, tgt_lang, max_chars, keep_all, data_dir=data_dir, download=download,
                     backend=backend, process_index=process_index, process_count=process_count)


def tfds_summarization(name: str = "cnn_dailymail", split: Any = "train", *, data_dir: str | None = None,
                       download: bool = False, backend: str = "auto", process_index: int | None = None,
                       process_count: int | None = None, max_chars: int | None = None,
                       document_key: str | None = None, summary_key: str | None = None,
                       keep_all: bool = False) -> list[Pair]:
  """(document, summary) pairs of CNN/DailyMail (``article`` / ``highlights``, sentences separated by newlines) or
  XSum (``document`` / ``summary``); ``document_key`` / ``summary_key`` override the feature names for other
  datasets."""
  base = _base_name(name)
  if document_key is None or summary_key is None:
    if base not in SUMMARIZATION_KEYS:
      raise ValueError(f"unknown summarization dataset {name!r}: use one of {sorted(SUMMARIZATION_KEYS)}, or give "
                       f"document_key and summary_key")
    document_key, summary_key = SUMMARIZATION_KEYS[base]
  return _tfds_pairs(name, split, document_key, summary_key, max_chars, keep_all, data_dir=data_dir, download=download,
                     backend=backend, process_index=process_index, process_count=process_count)


def tfds_squad(name: str = "squad/v1.1", split: Any = "validation", *, data_dir: str | None = None,
               download: bool = False, backend: str = "auto", process_index: int | None = None,
               process_count: int | None = None) -> list:
  """The questions of tfds' SQuAD v1.1 or v2.0 as :class:`attnjax.data.squad.SquadQuestion` records (question,
  context, answers as (text, answer_start) pairs, is_impossible; v2.0's ``plausible_answers`` are not gold and are
  dropped)."""
  from attnjax.data.squad import SquadQuestion  # pylint: disable=g-import-not-at-top  (squad imports this module)

  if name not in SQUAD_NAMES:
    raise ValueError(f"unknown SQuAD dataset {name!r}: use one of {SQUAD_NAMES}")
  questions = []
  for i, example in enumerate(tfds_examples(name, split, data_dir=data_dir, download=download, backend=backend,
                                            process_index=process_index, process_count=process_count)):
    where = f"tfds {name} split {split!r}, example {i}"
    answers = _feature(example, "answers", where)
    texts = [as_text(t, where) for t in np.asarray(_feature(answers, "text", where)).reshape(-1)]
    starts = [int(s) for s in np.asarray(_feature(answers, "answer_start", where)).reshape(-1)]
    if len(texts) != len(starts):
      raise ValueError(f"{where}: {len(texts)} answer texts but {len(starts)} answer starts")
    impossible = bool(example.get("is_impossible", False))
    qid, question = as_text(_feature(example, "id", where), where), as_text(_feature(example, "question", where), where)
    context = as_text(_feature(example, "context", where), where)
    questions.append(SquadQuestion(qid=qid, question=question, context=context,
                                   answers=() if impossible else tuple(zip(texts, starts)), is_impossible=impossible,
                                   title=as_text(example.get("title", b""), where)))
  return questions


# ------------------------------------------------------------------------------------------------------ config


_REQUIRED = object()


def _get(data_cfg, key: str, default: Any = _REQUIRED) -> Any:
  """``data_cfg[key]`` from a ConfigDict, a dict or any object with attributes; missing required key -> ValueError."""
  if isinstance(data_cfg, Mapping):
    value = data_cfg.get(key, default)
  elif hasattr(data_cfg, "get") and callable(data_cfg.get):  # ml_collections.ConfigDict
    value = data_cfg.get(key, default)
  else:
    value = getattr(data_cfg, key, default)
  if value is _REQUIRED:
    source = _get(data_cfg, "source", None)
    raise ValueError(f"config.data.{key} is required for config.data.source={source!r} (see attnjax.data.sources)")
  return value


def _splits(data_cfg, default: Any = _REQUIRED, only: Sequence[str] | None = None) -> dict[str, Any]:
  """split -> file / tfds split from ``config.data.splits``; with ``only``, just those splits (an unknown one is an
  error naming the configured ones)."""
  splits = _get(data_cfg, "splits", default)
  if not isinstance(splits, Mapping) and not hasattr(splits, "items"):
    raise ValueError(f"config.data.splits must map split names to files / tfds splits, got {splits!r}")
  splits = dict(splits.items())
  if only is None:
    return splits
  missing = [name for name in only if name not in splits]
  if missing:
    raise ValueError(f"split(s) {missing} are not in config.data.splits (configured: {sorted(splits)})")
  return {name: splits[name] for name in only}


def _keep_all(split: str) -> bool:
  """Evaluation splits keep every line (see the module docstring); only training skips unusable pairs."""
  return split != "train"


def _only(split_dict: dict, only: Sequence[str] | None) -> dict:
  if only is None:
    return split_dict
  missing = [name for name in only if name not in split_dict]
  if missing:
    raise ValueError(f"split(s) {missing} are not among this source's splits {sorted(split_dict)}")
  return {name: split_dict[name] for name in only}


def _in_dir(directory: str, name: str) -> str:
  """``name`` inside ``directory`` (a local path or a URL such as ``gs://bucket/data``), or ``name`` itself."""
  return os.fspath(fs.join(directory, name)) if directory else name


def _find_file(stem: str) -> str:
  for candidate in (stem, stem + ".gz"):
    if fs.exists(candidate):
      return candidate
  raise FileNotFoundError(f"neither {stem} nor {stem}.gz exists")


def _load_parallel_text(data_cfg, only=None, **_) -> dict[str, list[Pair]]:
  directory = os.fspath(_get(data_cfg, "dir"))
  src_lang, tgt_lang = _get(data_cfg, "src_lang"), _get(data_cfg, "tgt_lang")
  max_chars = _get(data_cfg, "max_chars", None)
  out = {}
  for split, stem in _splits(data_cfg, only=only).items():
    base = _in_dir(directory, stem)
    out[split] = parallel_text(_find_file(f"{base}.{src_lang}"), _find_file(f"{base}.{tgt_lang}"),
                               max_chars=max_chars, keep_all=_keep_all(split))
  return out


def _load_tsv(data_cfg, only=None, **_) -> dict[str, list[Pair]]:
  directory = os.fspath(_get(data_cfg, "dir", "") or "")
  columns = {"src_column": _get(data_cfg, "src_column", 0), "tgt_column": _get(data_cfg, "tgt_column", 1),
             "max_chars": _get(data_cfg, "max_chars", None)}
  path, splits = _get(data_cfg, "path", None), _get(data_cfg, "splits", None)
  if (path is None) == (splits is None):
    raise ValueError("config.data.source='tsv' needs exactly one of config.data.path (one file, split by "
                     "config.data.heldout) and config.data.splits (split -> file)")
  if splits is not None:
    return {split: tsv_pairs(_in_dir(directory, name), keep_all=_keep_all(split), **columns)
            for split, name in _splits(data_cfg, only=only).items()}
  # one file split by hashed source: its unusable lines belong to no split (they define the splits, not a reference)
  heldout = dict(_get(data_cfg, "heldout", DEFAULT_HELDOUT).items())
  return _only(split_by_source(tsv_pairs(_in_dir(directory, os.fspath(path)), **columns), heldout,
                               seed=_get(data_cfg, "split_seed", 0)), only)


def _load_jsonl(data_cfg, only=None, **_) -> dict[str, list[Pair]]:
  directory = os.fspath(_get(data_cfg, "dir", "") or "")
  keys = {"document_key": _get(data_cfg, "document_key", "document"),
          "summary_key": _get(data_cfg, "summary_key", "summary"), "max_chars": _get(data_cfg, "max_chars", None)}
  return {split: jsonl_summarization(_in_dir(directory, name), keep_all=_keep_all(split), **keys)
          for split, name in _splits(data_cfg, only=only).items()}


def _tfds_options(data_cfg, process_index, process_count) -> dict[str, Any]:
  return {"data_dir": _get(data_cfg, "tfds_data_dir", None), "download": bool(_get(data_cfg, "tfds_download", False)),
          "backend": _get(data_cfg, "tfds_backend", "auto"), "process_index": process_index,
          "process_count": process_count, "max_chars": _get(data_cfg, "max_chars", None)}


def _load_tfds_translation(data_cfg, process_index=None, process_count=None, only=None) -> dict[str, list[Pair]]:
  options = _tfds_options(data_cfg, process_index, process_count)
  name = _get(data_cfg, "tfds_name", "wmt14_translate/de-en")
  src_lang, tgt_lang = _get(data_cfg, "src_lang", "en"), _get(data_cfg, "tgt_lang", "de")
  return {split: tfds_translation(name, src_lang, tgt_lang, tfds_split, keep_all=_keep_all(split), **options)
          for split, tfds_split in _splits(data_cfg, DEFAULT_TFDS_SPLITS, only=only).items()}


def _load_tfds_summarization(data_cfg, process_index=None, process_count=None, only=None) -> dict[str, list[Pair]]:
  options = _tfds_options(data_cfg, process_index, process_count)
  name = _get(data_cfg, "tfds_name")
  return {split: tfds_summarization(name, tfds_split, keep_all=_keep_all(split), **options)
          for split, tfds_split in _splits(data_cfg, DEFAULT_TFDS_SPLITS, only=only).items()}


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
  source = _get(data_cfg, "source", None)
  if source not in TEXT_SOURCES:
    raise ValueError(f"config.data.source must be one of {sorted(TEXT_SOURCES)} for a text task, got {source!r}")
  return TEXT_SOURCES[source](data_cfg, process_index=process_index, process_count=process_count, only=splits)


__all__ = [
    "DEFAULT_HELDOUT", "DEFAULT_TFDS_SPLITS", "Pair", "SQUAD_NAMES", "SUMMARIZATION_KEYS", "TEXT_SOURCES",
    "TFDS_BACKENDS", "as_text", "host_split", "jsonl_summarization", "load_text_task", "open_binary", "parallel_text",
    "read_lines", "split_by_source", "tfds_examples", "tfds_squad", "tfds_summarization", "tfds_translation",
    "tsv_pairs",
]
