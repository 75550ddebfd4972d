"""Text pairs and SQuAD questions from tensorflow-datasets: :func:`tfds_translation`, :func:`tfds_summarization`,
:func:`tfds_squad`, and :func:`tfds_examples` under them.

They read prepared datasets from ``data_dir`` (``download=False`` by default: nothing is fetched unless asked for). Two
back ends:

* ``backend="load"``: ``tfds.load(..., as_supervised=False)`` + ``tfds.as_numpy``; needs TensorFlow.
* ``backend="data_source"``: ``tfds.data_source`` (random access to ArrayRecord files, no TensorFlow). The data must
  have been prepared in the ``array_record`` format (``tfds build --file_format=array_record``, or
  ``download=True`` here, which prepares it so), and preparing most of these datasets needs TensorFlow itself.
* ``backend="auto"`` (default): "load" when TensorFlow is installed, else "data_source".

``process_index`` / ``process_count`` read only this host's slice (``tfds.split_for_jax_process``, i.e.
``tfds.even_splits(split, process_count)[process_index]``). :class:`~attnjax.data.pipeline.Seq2SeqBatcher` shards
*global* batches itself and so wants every host to read the whole split: :func:`attnjax.data.sources.load_text_task`
slices only when asked.

Pairs with an empty side (and with ``max_chars`` over-long ones) are handled as for files
(:class:`attnjax.data.pairs.PairFilter`).
"""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np

from attnjax.data.pairs import Pair, PairFilter
from attnjax.data.squad_question import SquadQuestion

TFDS_BACKENDS = ("auto", "load", "data_source")
SUMMARIZATION_KEYS = {"cnn_dailymail": ("article", "highlights"), "xsum": ("document", "summary")}
SQUAD_NAMES = ("squad/v1.1", "squad/v2.0")

# Datasets that tfds registers only when their module is imported: tfds imports its legacy dataset packages lazily,
# and without TensorFlow nothing triggers that import, so tfds.data_source("xsum") would say "not found".
_TFDS_MODULES = {"wmt": "tensorflow_datasets.translate", "cnn_dailymail": "tensorflow_datasets.summarization",
                 "xsum": "tensorflow_datasets.summarization"}


def _import_tfds(name: str, category: str | None = None):
  """tfds, with the module that registers ``name`` imported (``category``: tfds' package of such datasets, e.g.
  "summarization", for a dataset named by the user rather than one attnjax knows)."""
  import tensorflow_datasets as tfds  # pylint: disable=g-import-not-at-top  (0.3 s; only tfds sources need it)
  base = _base_name(name)
  for prefix, module in _TFDS_MODULES.items():
    if base.startswith(prefix):
      importlib.import_module(module)
  if category is not None:  # registers the category's legacy datasets (without TensorFlow nothing else does)
    importlib.import_module(f"tensorflow_datasets.{category}")
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
                  backend: str = "auto", process_index: int | None = None, process_count: int | None = None,
                  category: str | None = None) -> Iterator[dict[str, Any]]:
  """The examples of a tensorflow-datasets split as dicts of NumPy values / Python strings, in the stored order.

  See the module docstring for ``backend`` and the per-process slicing. Text features come as ``bytes`` or ``str``
  depending on the back end; use :func:`as_text`.
  """
  tfds = _import_tfds(name, category)
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
  filt = PairFilter(f"tfds {name} split {split!r}", max_chars, keep_all)
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
                     backend=backend, process_index=process_index, process_count=process_count,
                     category="summarization")


def tfds_texts(name: str, split: Any = "train", text_key: str = "text", *, data_dir: str | None = None,
               download: bool = False, backend: str = "auto", process_index: int | None = None,
               process_count: int | None = None) -> list[str]:
  """The text feature ``text_key`` of every example of a tensorflow-datasets split, in the stored order: the
  documents of a language model's corpus (``wikipedia/20230601.en``'s ``text``, ``lm1b``'s ``text``, ...)."""
  texts = []
  for i, example in enumerate(tfds_examples(name, split, data_dir=data_dir, download=download, backend=backend,
                                            process_index=process_index, process_count=process_count,
                                            category="text")):
    where = f"tfds {name} split {split!r}, example {i}"
    texts.append(as_text(_feature(example, text_key, where), where))
  return texts


def tfds_squad(name: str = "squad/v1.1", split: Any = "validation", *, data_dir: str | None = None,
               download: bool = False, backend: str = "auto", process_index: int | None = None,
               process_count: int | None = None) -> list[SquadQuestion]:
  """The questions of tfds' SQuAD v1.1 or v2.0 as :class:`~attnjax.data.squad_question.SquadQuestion` records
  (question, context, answers as (text, answer_start) pairs, is_impossible; v2.0's ``plausible_answers`` are not gold
  and are dropped)."""
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
