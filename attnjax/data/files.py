"""Text pairs from files (UTF-8, optionally gzipped: by a ``.gz`` name or gzip's magic bytes), and held-out splits.

* :func:`parallel_text`: two aligned plain-text files, one segment per line (Multi30k, WMT-style ``train.en`` /
  ``train.de``).
* :func:`tsv_pairs`: one file of tab-separated columns (manythings.org / Tatoeba ``English<TAB>French<TAB>
  attribution``); :func:`split_by_source` makes held-out splits from it.
* :func:`jsonl_summarization`: JSON lines with a document and a summary field.

Errors name the file and the line. In a training split a pair with an empty side (or, with ``max_chars``, a side
longer than that) is skipped and counted in an absl warning, never silently; an evaluation split keeps every line
(``keep_all=True``, counted in the log): see :class:`attnjax.data.pairs.PairFilter`. Without ``max_chars``, over-long
examples are left to :class:`attnjax.data.pipeline.Seq2SeqBatcher`, which skips and counts them by token length.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping
from typing import Any, Callable, Sequence

from attnjax.data.pairs import Pair, PairFilter
from attnjax.fs import read_lines

PathLike = str | os.PathLike


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
  filt = PairFilter(f"{os.fspath(src_path)} / {os.fspath(tgt_path)}", max_chars, keep_all)
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
  filt = PairFilter(os.fspath(path), max_chars, keep_all)
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
  filt = PairFilter(os.fspath(path), max_chars, keep_all)
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
  approximately of pairs. The held-out splits take their shares of [0, 1) in the order of their names.
  """
  if remainder in heldout:
    raise ValueError(f"heldout must not contain the remainder split {remainder!r}")
  total = sum(heldout.values())
  if any(f < 0 for f in heldout.values()) or total >= 1:
    raise ValueError(f"heldout fractions must be non-negative and sum to less than 1, got {dict(heldout)}")
  bounds, upper = [], 0.0
  for name, fraction in sorted(heldout.items()):  # by name, as a ConfigDict gives them: any mapping splits alike
    upper += fraction
    bounds.append((upper, name))
  out: dict[str, list] = {remainder: [], **{name: [] for name in heldout}}
  for pair in pairs:
    digest = hashlib.sha256(f"{seed}\x00{key(pair)}".encode("utf-8")).digest()
    u = int.from_bytes(digest[:8], "big") / 2.0**64
    out[next((name for bound, name in bounds if u < bound), remainder)].append(pair)
  return out
