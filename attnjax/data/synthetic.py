"""Synthetic sequence-to-sequence tasks generated in code: offline, deterministic, and built to show what attention
is for.

``dates``
    Date normalisation (the classic attention demo): the source is a date written in one of :data:`DATE_FORMATS`
    ("Wednesday, 9 May 2018", "09.05.18", "the 9th of May 2018", ...), the target its ISO form "2018-05-09". Each
    target character comes from a different, format-dependent place in the source, which an alignment finds and a
    fixed-size encoding has to memorise. Dates are uniform over 1950-01-01..2049-12-31.

``reverse``
    Sequence reversal with a length split: the source is a random string over ``alphabet``, the target the string
    reversed. Train and validation lengths are in ``[min_len, train_max_len]``, test lengths in
    ``(train_max_len, test_max_len]``, so the test split measures length generalisation.

:func:`make_examples` is the entry point; :func:`register_task` adds a task to the registry it dispatches on.

Splits and seeds. Each (task, split, seed) draws from its own ``numpy.random.Generator`` seeded with the
``SeedSequence`` of ``[seed, crc32(task), split index]``, so the splits use disjoint seeds and the same arguments
always give the same examples (for a given NumPy version's generator streams).

Held-out splits never contain a (source, target) pair of the train split, whatever the seeds and sizes, because the
space of examples is partitioned up front by a fixed hash (a SplitMix64 finaliser, independent of NumPy's
generators) instead of deduplicating one drawn set against another:

* ``dates``: the 36,525 days are partitioned by ``hash(day ordinal) % 20``: 0 -> validation, 1 -> test, otherwise
  train (~90 / 5 / 5 %). A held-out split therefore only contains dates that never occur in train in *any* format,
  which also makes it a test of generalisation to unseen dates. Each split draws its days uniformly from its own
  part (so the union stays uniform over the whole range) and the format uniformly.
* ``reverse``: test lengths are disjoint from train lengths by construction. Train and validation share the length
  range and are partitioned by a hash: a string is held out for validation iff its last symbol equals
  ``hash(length, other symbols) % len(alphabet)`` (1 string in ``len(alphabet)``). Both parts are sampled uniformly
  and without rejection by drawing the other symbols and then setting the last one.

Two-digit years: every format that writes the year with two digits maps ``yy < 50`` to ``20yy`` and ``yy >= 50`` to
``19yy`` (:func:`expand_two_digit_year`), a bijection onto 1950..2049, so no generated source is ambiguous. All
numeric day-month formats are day-first (``9/5/2018`` is 9 May); the only other numeric orders start with the four-
digit year (``2018/05/09``, ``20180509``), so no month-first numeric form is ever generated.
"""

from __future__ import annotations

import datetime
import inspect
import string
import zlib
from typing import Callable

import numpy as np

SPLITS = ("train", "validation", "test")

DATE_MIN = datetime.date(1950, 1, 1)
DATE_MAX = datetime.date(2049, 12, 31)

_MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
           "November", "December")
_WEEKDAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")  # date.weekday() order

# Held-out days: hash(ordinal) % _HOLDOUT_MODULUS == 0 -> validation, == 1 -> test.
_HOLDOUT_MODULUS = 20

Example = tuple[str, str]


# ---------------------------------------------------------------------------------------------------------- dates


def expand_two_digit_year(yy: int) -> int:
  """The year a two-digit year stands for: ``yy < 50`` -> ``20yy``, else ``19yy`` (a bijection onto 1950..2049)."""
  if not 0 <= yy <= 99:
    raise ValueError(f"two-digit year must be in [0, 99], got {yy}")
  return 2000 + yy if yy < 50 else 1900 + yy


def _ordinal_suffix(day: int) -> str:
  if 11 <= day % 100 <= 13:  # 11th, 12th, 13th, not 11st/12nd/13rd
    return "th"
  return {1: "st", 2: "nd", 3: "rd"}.get(day % 10, "th")


def _month(d: datetime.date) -> str:
  return _MONTHS[d.month - 1]


def _mon(d: datetime.date) -> str:
  return _MONTHS[d.month - 1][:3]


def _yy(d: datetime.date) -> str:
  return f"{d.year % 100:02d}"


# Name -> formatter. Month and weekday names are spelled out here, not taken from strftime, so that the output does
# not depend on the process locale. The examples are for Wednesday 2018-05-09.
_DATE_FORMATTERS: dict[str, Callable[[datetime.date], str]] = {
    # "Wednesday, 9 May 2018"
    "weekday_d_month_yyyy": lambda d: f"{_WEEKDAYS[d.weekday()]}, {d.day} {_month(d)} {d.year}",
    # "09.05.18" (day first; two-digit year)
    "dd.mm.yy": lambda d: f"{d.day:02d}.{d.month:02d}.{_yy(d)}",
    # "09.05.2018"
    "dd.mm.yyyy": lambda d: f"{d.day:02d}.{d.month:02d}.{d.year}",
    # "may 9 2018"
    "month_d_yyyy_lower": lambda d: f"{_month(d).lower()} {d.day} {d.year}",
    # "9 May 2018"
    "d_month_yyyy": lambda d: f"{d.day} {_month(d)} {d.year}",
    # "May 9, 2018"
    "month_d_comma_yyyy": lambda d: f"{_month(d)} {d.day}, {d.year}",
    # "2018/05/09" (year first)
    "yyyy/mm/dd": lambda d: f"{d.year}/{d.month:02d}/{d.day:02d}",
    # "9/5/2018" (day first)
    "d/m/yyyy": lambda d: f"{d.day}/{d.month}/{d.year}",
    # "Wed 9 May 18"
    "wkd_d_mon_yy": lambda d: f"{_WEEKDAYS[d.weekday()][:3]} {d.day} {_mon(d)} {_yy(d)}",
    # "09 MAY 2018"
    "dd_MON_yyyy": lambda d: f"{d.day:02d} {_mon(d).upper()} {d.year}",
    # "the 9th of May 2018"
    "the_dth_of_month_yyyy": lambda d: f"the {d.day}{_ordinal_suffix(d.day)} of {_month(d)} {d.year}",
    # "May 9th, 2018"
    "month_dth_comma_yyyy": lambda d: f"{_month(d)} {d.day}{_ordinal_suffix(d.day)}, {d.year}",
    # "09-May-2018"
    "dd-mon-yyyy": lambda d: f"{d.day:02d}-{_mon(d)}-{d.year}",
    # "20180509"
    "yyyymmdd": lambda d: f"{d.year}{d.month:02d}{d.day:02d}",
    # "Wednesday, May 9, 2018"
    "weekday_month_d_comma_yyyy": lambda d: f"{_WEEKDAYS[d.weekday()]}, {_month(d)} {d.day}, {d.year}",
    # "9 May '18"
    "d_mon_apostrophe_yy": lambda d: f"{d.day} {_mon(d)} '{_yy(d)}",
}

DATE_FORMATS: tuple[str, ...] = tuple(_DATE_FORMATTERS)


def format_date(d: datetime.date, fmt: str) -> str:
  """``d`` written in the format named ``fmt`` (one of :data:`DATE_FORMATS`)."""
  try:
    formatter = _DATE_FORMATTERS[fmt]
  except KeyError:
    raise ValueError(f"fmt must be one of {list(DATE_FORMATS)}, got {fmt!r}") from None
  if not DATE_MIN <= d <= DATE_MAX:
    # Outside this range a two-digit year would name a different date.
    raise ValueError(f"date must be in [{DATE_MIN}, {DATE_MAX}], got {d}")
  return formatter(d)


def _mix64(x: np.ndarray) -> np.ndarray:
  """SplitMix64 finaliser, elementwise on uint64: a fixed hash that no NumPy version change can move."""
  x = np.asarray(x, dtype=np.uint64)
  x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)  # uint64 array arithmetic wraps mod 2**64
  x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
  return x ^ (x >> np.uint64(31))


_date_pools: dict[str, np.ndarray] = {}


def _date_pool(split: str) -> np.ndarray:
  """Proleptic Gregorian ordinals ``[D]`` int64 of the days that belong to ``split`` (computed once)."""
  if not _date_pools:
    days = np.arange(DATE_MIN.toordinal(), DATE_MAX.toordinal() + 1, dtype=np.int64)
    bucket = _mix64(days.astype(np.uint64)) % np.uint64(_HOLDOUT_MODULUS)
    _date_pools["validation"] = days[bucket == 0]
    _date_pools["test"] = days[bucket == 1]
    _date_pools["train"] = days[bucket >= 2]
  return _date_pools[split]


def _make_dates(split: str, num_examples: int, rng: np.random.Generator) -> list[Example]:
  pool = _date_pool(split)
  ordinals = pool[rng.integers(len(pool), size=num_examples)].tolist()
  formats = rng.integers(len(DATE_FORMATS), size=num_examples).tolist()
  formatters = [_DATE_FORMATTERS[name] for name in DATE_FORMATS]
  examples = []
  for ordinal, f in zip(ordinals, formats):
    d = datetime.date.fromordinal(ordinal)
    examples.append((formatters[f](d), d.isoformat()))
  return examples


# -------------------------------------------------------------------------------------------------------- reverse


def _to_strings(codes: np.ndarray) -> list[str]:
  """``[N, L]`` uint32 code points, 0-padded on the right -> N strings (NumPy's unicode dtype drops trailing NULs)."""
  codes = np.ascontiguousarray(codes, dtype=np.uint32)
  if codes.shape[1] == 0:
    return [""] * codes.shape[0]
  return codes.view(f"<U{codes.shape[1]}").ravel().tolist()


def _prefix_key(symbols: np.ndarray, lengths: np.ndarray, num_symbols: int) -> np.ndarray:
  """``[N]`` int64 in ``[0, num_symbols)``: a fixed hash of each row's length and first ``lengths[n] - 1`` symbols.

  A position-weighted sum (wrapping mod 2**64) with fixed odd weights, then the SplitMix64 finaliser.
  """
  num_positions = symbols.shape[1]
  weights = _mix64(np.arange(num_positions + 1, dtype=np.uint64) + np.uint64(0x9E3779B97F4A7C15)) | np.uint64(1)
  in_prefix = np.arange(num_positions)[None, :] < (lengths - 1)[:, None]
  digits = np.where(in_prefix, symbols.astype(np.uint64) + np.uint64(1), np.uint64(0))
  total = (digits * weights[None, :num_positions]).sum(axis=1, dtype=np.uint64)
  return (_mix64(total + lengths.astype(np.uint64) * weights[num_positions]) % np.uint64(num_symbols)).astype(np.int64)


def _make_reverse(split: str, num_examples: int, rng: np.random.Generator, *, min_len: int = 3,
                  train_max_len: int = 12, test_max_len: int = 18,
                  alphabet: str = string.ascii_lowercase) -> list[Example]:
  for name, value in (("min_len", min_len), ("train_max_len", train_max_len), ("test_max_len", test_max_len)):
    if not isinstance(value, (int, np.integer)) or isinstance(value, bool):
      raise TypeError(f"{name} must be an int, got {value!r}")
  if not 1 <= min_len <= train_max_len < test_max_len:
    raise ValueError(f"need 1 <= min_len <= train_max_len < test_max_len, got min_len={min_len}, "
                     f"train_max_len={train_max_len}, test_max_len={test_max_len}")
  if not isinstance(alphabet, str) or len(set(alphabet)) != len(alphabet) or len(alphabet) < 2 or "\0" in alphabet:
    raise ValueError(f"alphabet must be a str of >= 2 distinct characters and no NUL, got {alphabet!r}")
  if num_examples == 0:
    return []
  lo, hi = (train_max_len + 1, test_max_len) if split == "test" else (min_len, train_max_len)
  num_symbols = len(alphabet)
  lengths = rng.integers(lo, hi + 1, size=num_examples)
  symbols = rng.integers(num_symbols, size=(num_examples, hi))
  if split != "test":
    # Train/validation partition: a string is held out iff its last symbol equals the key of the rest (1 string in
    # num_symbols). Setting the last symbol directly (to the key, or uniformly to one of the others) samples each part
    # uniformly without rejection.
    key = _prefix_key(symbols, lengths, num_symbols)
    if split == "train":
      key = (key + 1 + rng.integers(num_symbols - 1, size=num_examples)) % num_symbols
    symbols[np.arange(num_examples), lengths - 1] = key

  valid = np.arange(hi)[None, :] < lengths[:, None]
  table = np.array([ord(c) for c in alphabet], dtype=np.uint32)
  source = np.where(valid, table[symbols], 0)
  # Row n reversed: position i takes position lengths[n] - 1 - i (clipped on the padding, which is masked anyway).
  rev_index = np.clip(lengths[:, None] - 1 - np.arange(hi)[None, :], 0, None)
  target = np.where(valid, np.take_along_axis(source, rev_index, axis=1), 0)
  return list(zip(_to_strings(source), _to_strings(target)))


# ------------------------------------------------------------------------------------------------------- registry


TaskFn = Callable[..., list[Example]]
_TASKS: dict[str, TaskFn] = {}


def register_task(name: str, fn: TaskFn | None = None):
  """Adds a task to the registry of :func:`make_examples` (usable as a decorator).

  ``fn(split, num_examples, rng, **options) -> list[(source, target)]`` gets an already split-specific
  ``numpy.random.Generator`` and must itself keep held-out splits free of train pairs.
  """
  def add(f: TaskFn) -> TaskFn:
    if name in _TASKS:
      raise ValueError(f"task {name!r} is already registered")
    _TASKS[name] = f
    return f
  return add if fn is None else add(fn)


register_task("dates", _make_dates)
register_task("reverse", _make_reverse)


def task_names() -> tuple[str, ...]:
  return tuple(sorted(_TASKS))


def _split_rng(task: str, split: str, seed: int) -> np.random.Generator:
  # crc32 of the name (not hash(), which is salted per process) keeps each task's streams fixed and distinct.
  return np.random.default_rng([seed, zlib.crc32(task.encode()), SPLITS.index(split)])


def make_examples(task: str, split: str, num_examples: int, seed: int, **options) -> list[Example]:
  """``num_examples`` (source, target) string pairs of a synthetic task.

  Args:
    task: one of :func:`task_names` (``"dates"``, ``"reverse"``).
    split: one of :data:`SPLITS`. Each split has its own random stream, and held-out splits never contain a train
      pair (see the module docstring).
    num_examples: how many pairs; drawn with replacement, so a split may repeat a pair.
    seed: non-negative int; the same (task, split, num_examples, seed, options) always gives the same list.
    **options: task options, e.g. ``min_len``, ``train_max_len``, ``test_max_len``, ``alphabet`` for ``reverse``.

  Returns:
    A list of ``num_examples`` ``(source, target)`` tuples of str.
  """
  if task not in _TASKS:
    raise ValueError(f"task must be one of {list(task_names())}, got {task!r}")
  if split not in SPLITS:
    raise ValueError(f"split must be one of {list(SPLITS)}, got {split!r}")
  if not isinstance(num_examples, (int, np.integer)) or isinstance(num_examples, bool) or num_examples < 0:
    raise ValueError(f"num_examples must be a non-negative int, got {num_examples!r}")
  if not isinstance(seed, (int, np.integer)) or isinstance(seed, bool) or seed < 0:
    raise ValueError(f"seed must be a non-negative int, got {seed!r}")
  fn = _TASKS[task]
  rng = _split_rng(task, split, int(seed))
  try:
    inspect.signature(fn).bind(split, int(num_examples), rng, **options)
  except TypeError as e:
    raise TypeError(f"invalid options {sorted(options)} for task {task!r}: {e}") from None
  return fn(split, int(num_examples), rng, **options)
