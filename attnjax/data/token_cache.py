"""Token ids of a text split, computed once per vocabulary and kept next to it, so a restart or a second host reads
arrays instead of running sentencepiece over the whole corpus again.

At WMT14 en-de scale (4.5M sentence pairs) tokenizing every split takes minutes per start on every host; reading the
arrays back takes seconds.

* :class:`TokenizedSplit` holds a split's ids flat, as :class:`~attnjax.data.pipeline.Seq2SeqBatcher` stores them:
  ``src`` int32 ``[total]`` and ``src_offsets`` int64 ``[N + 1]`` (pair ``i``'s source is
  ``src[src_offsets[i]:src_offsets[i + 1]]``), and the same for ``tgt``. Iterating gives ``(src_ids, tgt_ids)``
  pairs of 1-D int32 views, which the batcher accepts like lists.
* :func:`encode_pairs` tokenizes ``(source, target)`` text pairs: a :class:`~attnjax.data.tokenizer.SentencePieceVocab`
  through sentencepiece's multi-threaded batch encoding (identical ids to ``vocab.encode``), any other vocabulary
  with ``encode(str) -> list[int]`` (:class:`~attnjax.data.vocab.CharVocab`) one text at a time.
* :func:`load_or_encode` reads ``<cache_dir>/tokens.<split>.<fingerprint>.npz``, or encodes and writes it (through
  :func:`attnjax.fs.save_npz`, so atomically, and to a ``gs://`` bucket too).

The fingerprint hashes what the ids depend on: both vocabularies (a sentencepiece model's bytes, a CharVocab's
characters), the caller's ``source_key`` (where the text came from) and :data:`FORMAT_VERSION`. A changed vocabulary
or source therefore gets a new file rather than stale ids, and old files are simply no longer read. The file repeats
those inputs and the number of pairs, checked on load; an unreadable, inconsistent or stale file is logged and
rebuilt.

``source_key`` must describe everything that changes the text (dataset name, languages, files, splits, length
filters...): the cache cannot see the text itself without reading it, which is what it exists to avoid. Callers that
have the text anyway can pass ``expected_pairs`` as a cheap extra check.

Several hosts missing at once all encode and all write the same bytes; atomic writes make the last one win harmlessly.
"""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
import json
import os
import re
import time
from typing import Any, Callable, Iterable, Iterator, Sequence

import numpy as np
import sentencepiece as spm
from absl import logging

from attnjax import fs
from attnjax.data.tokenizer import SentencePieceVocab

FORMAT_VERSION = 1  # bump whenever the file layout or the encoding of the text changes
FILE_PREFIX = "tokens"
FILE_SUFFIX = ".npz"
# Pairs per sentencepiece batch call: its result is Python lists (~36 bytes per id), so encoding 4.5M pairs at once
# would hold ~10 GB of them; a chunk at a time holds ~100 MB and is flattened into int32 straight away.
DEFAULT_CHUNK_PAIRS = 1 << 16

IdPair = tuple[np.ndarray, np.ndarray]  # (src_ids, tgt_ids), int32


def _check_flat(name: str, flat: Any, offsets: Any) -> tuple[np.ndarray, np.ndarray]:
  """``(flat, offsets)`` as int32 / int64 arrays; raises ValueError unless they describe ragged sequences."""
  flat, offsets = np.asarray(flat), np.asarray(offsets)
  if flat.ndim != 1 or not np.issubdtype(flat.dtype, np.integer):
    raise ValueError(f"{name} must be a 1-D integer array, got {flat.dtype} of shape {flat.shape}")
  if offsets.ndim != 1 or len(offsets) < 1 or not np.issubdtype(offsets.dtype, np.integer):
    raise ValueError(f"{name}_offsets must be a non-empty 1-D integer array, got {offsets.dtype} of shape "
                     f"{offsets.shape}")
  if offsets[0] != 0 or offsets[-1] != len(flat):
    raise ValueError(f"{name}_offsets must run from 0 to len({name})={len(flat)}, got {offsets[0]} .. {offsets[-1]}")
  if np.any(offsets[1:] < offsets[:-1]):
    raise ValueError(f"{name}_offsets must be non-decreasing")
  if flat.dtype != np.int32:
    if flat.size and (flat.min() < 0 or flat.max() >= 2**31):
      raise ValueError(f"{name} ids must be in [0, 2**31), got {flat.min()} .. {flat.max()}")
    flat = flat.astype(np.int32)
  return flat, offsets.astype(np.int64, copy=False)


def _flatten_chunk(seqs: Sequence[Sequence[int]]) -> tuple[np.ndarray, np.ndarray]:
  """Ragged id lists -> (flat int32 ids, int64 lengths)."""
  lengths = np.fromiter(map(len, seqs), dtype=np.int64, count=len(seqs))
  flat = np.fromiter(itertools.chain.from_iterable(seqs), dtype=np.int32, count=int(lengths.sum()))
  return flat, lengths


def _join(parts: list[tuple[np.ndarray, np.ndarray]]) -> tuple[np.ndarray, np.ndarray]:
  """Chunks of (flat ids, lengths) -> (flat ids, offsets)."""
  flat = np.concatenate([p[0] for p in parts]) if parts else np.zeros(0, np.int32)
  lengths = np.concatenate([p[1] for p in parts]) if parts else np.zeros(0, np.int64)
  offsets = np.zeros(len(lengths) + 1, np.int64)
  np.cumsum(lengths, out=offsets[1:])
  return flat, offsets


@dataclasses.dataclass(frozen=True, eq=False)
class TokenizedSplit:
  """The token ids of ``N`` (source, target) pairs, stored flat (see the module docstring).

  Attributes:
    src: int32 ``[total source tokens]``, every source concatenated.
    src_offsets: int64 ``[N + 1]``, pair ``i``'s source is ``src[src_offsets[i]:src_offsets[i + 1]]``.
    tgt: int32 ``[total target tokens]``.
    tgt_offsets: int64 ``[N + 1]``.
  """
  src: np.ndarray
  src_offsets: np.ndarray
  tgt: np.ndarray
  tgt_offsets: np.ndarray

  def __post_init__(self):
    src, src_offsets = _check_flat("src", self.src, self.src_offsets)
    tgt, tgt_offsets = _check_flat("tgt", self.tgt, self.tgt_offsets)
    if len(src_offsets) != len(tgt_offsets):
      raise ValueError(f"src_offsets and tgt_offsets must describe as many pairs, got {len(src_offsets) - 1} and "
                       f"{len(tgt_offsets) - 1}")
    for name, value in (("src", src), ("src_offsets", src_offsets), ("tgt", tgt), ("tgt_offsets", tgt_offsets)):
      object.__setattr__(self, name, value)  # frozen: the checked, converted arrays replace the given ones

  @classmethod
  def from_pairs(cls, pairs: Iterable[tuple[Sequence[int], Sequence[int]]]) -> TokenizedSplit:
    """From ``(src_ids, tgt_ids)`` pairs of int sequences (lists or 1-D arrays), e.g. ``TaskData.encoded``'s."""
    pairs = list(pairs)
    src, src_lengths = _flatten_chunk([p[0] for p in pairs])
    tgt, tgt_lengths = _flatten_chunk([p[1] for p in pairs])
    return cls(*_join([(src, src_lengths)]), *_join([(tgt, tgt_lengths)]))

  def __len__(self) -> int:
    return len(self.src_offsets) - 1

  @property
  def src_lengths(self) -> np.ndarray:
    return np.diff(self.src_offsets)

  @property
  def tgt_lengths(self) -> np.ndarray:
    return np.diff(self.tgt_offsets)

  @property
  def nbytes(self) -> int:
    return self.src.nbytes + self.src_offsets.nbytes + self.tgt.nbytes + self.tgt_offsets.nbytes

  def pair(self, i: int) -> IdPair:
    """Pair ``i``'s ``(src_ids, tgt_ids)`` as int32 views (no copy); negative ``i`` counts from the end."""
    if not isinstance(i, (int, np.integer)) or isinstance(i, bool):
      raise TypeError(f"a pair index must be an int, got {type(i).__name__}")
    n = len(self)
    if not -n <= i < n:
      raise IndexError(f"pair index {i} is out of range for {n} pairs")
    i = int(i) % n
    return (self.src[self.src_offsets[i]:self.src_offsets[i + 1]],
            self.tgt[self.tgt_offsets[i]:self.tgt_offsets[i + 1]])

  __getitem__ = pair

  def __iter__(self) -> Iterator[IdPair]:
    src, tgt = self.src, self.tgt
    # Python ints for the bounds: slicing with NumPy scalars is several times slower over millions of pairs.
    s, t = self.src_offsets.tolist(), self.tgt_offsets.tolist()
    for i in range(len(s) - 1):
      yield src[s[i]:s[i + 1]], tgt[t[i]:t[i + 1]]

  def as_pairs(self) -> list[IdPair]:
    """Every ``(src_ids, tgt_ids)`` pair as int32 views into the flat arrays: ``Seq2SeqBatcher``'s input."""
    return list(self)

  def __eq__(self, other) -> bool:
    if not isinstance(other, TokenizedSplit):
      return NotImplemented
    return all(np.array_equal(getattr(self, k), getattr(other, k))
               for k in ("src_offsets", "tgt_offsets", "src", "tgt"))

  __hash__ = None  # mutable arrays inside

  def __repr__(self) -> str:
    return f"TokenizedSplit({len(self)} pairs, {len(self.src)} source + {len(self.tgt)} target tokens)"


# ---------------------------------------------------------------------------------------------------- encoding


def _default_threads() -> int:
  try:
    return len(os.sched_getaffinity(0))  # the cores this process may use (containers, taskset), not the machine's
  except AttributeError:  # macOS, Windows
    return os.cpu_count() or 1


def _batch_encoder(vocab, num_threads: int) -> Callable[[list[str]], list[list[int]]]:
  """A function encoding a list of texts exactly as ``vocab.encode`` would, one by one."""
  if isinstance(vocab, SentencePieceVocab):
    # A processor of our own with default options, i.e. the one SentencePieceVocab.encode uses (no BOS/EOS, no
    # sampling), so the ids are identical; its batch call runs num_threads C++ threads without the GIL.
    processor = spm.SentencePieceProcessor(model_proto=vocab.model_proto)
    return lambda texts: processor.encode(texts, out_type=int, num_threads=num_threads)
  if not callable(getattr(vocab, "encode", None)):
    raise TypeError(f"a vocabulary must have encode(str) -> list[int], got {type(vocab).__name__}")
  return lambda texts: [vocab.encode(text) for text in texts]


def encode_pairs(src_vocab, tgt_vocab, pairs: Iterable[tuple[str, str]], *, num_threads: int | None = None,
                 chunk_pairs: int = DEFAULT_CHUNK_PAIRS) -> TokenizedSplit:
  """Tokenizes ``(source, target)`` text pairs: ids identical to ``[(src_vocab.encode(s), tgt_vocab.encode(t))]``.

  Args:
    src_vocab: a :class:`~attnjax.data.tokenizer.SentencePieceVocab` (batch-encoded by sentencepiece on
      ``num_threads`` threads) or any vocabulary with ``encode(str) -> list[int]`` (encoded text by text).
    tgt_vocab: likewise for the targets (may be ``src_vocab`` itself).
    pairs: an iterable of ``(source, target)`` strings, consumed once.
    num_threads: sentencepiece threads; default: the cores this process may use.
    chunk_pairs: pairs per batch call, which bounds the memory of the intermediate Python lists.
  """
  if chunk_pairs < 1:
    raise ValueError(f"chunk_pairs must be positive, got {chunk_pairs}")
  threads = _default_threads() if num_threads is None else int(num_threads)
  if threads < 1:
    raise ValueError(f"num_threads must be positive, got {num_threads}")
  encode_src = _batch_encoder(src_vocab, threads)
  encode_tgt = encode_src if tgt_vocab is src_vocab else _batch_encoder(tgt_vocab, threads)
  src_parts, tgt_parts = [], []
  it = iter(pairs)
  done = 0
  while chunk := list(itertools.islice(it, chunk_pairs)):
    for i, p in enumerate(chunk):
      # sentencepiece would also take bytes, where vocab.encode raises: the same error on both paths
      if not (isinstance(p, (tuple, list)) and len(p) == 2 and isinstance(p[0], str) and isinstance(p[1], str)):
        raise TypeError(f"pairs[{done + i}] must be a (source, target) pair of str, got {p!r:.100}")
    srcs, tgts = [p[0] for p in chunk], [p[1] for p in chunk]
    src_parts.append(_flatten_chunk(encode_src(srcs)))
    tgt_parts.append(_flatten_chunk(encode_tgt(tgts)))
    done += len(chunk)
  return TokenizedSplit(*_join(src_parts), *_join(tgt_parts))


# ------------------------------------------------------------------------------------------------------ cache


def vocab_identity(vocab) -> str:
  """What a vocabulary's ids depend on, as a short string: a hash of a sentencepiece model's bytes or of a
  CharVocab's characters.

  Raises:
    TypeError: a vocabulary with neither ``model_proto`` nor ``chars``.
  """
  proto = getattr(vocab, "model_proto", None)
  if proto is not None:
    return "sentencepiece:sha256:" + hashlib.sha256(bytes(proto)).hexdigest()
  chars = getattr(vocab, "chars", None)
  if chars is not None:
    return "chars:sha256:" + hashlib.sha256(json.dumps(list(chars), ensure_ascii=False).encode()).hexdigest()
  raise TypeError(f"cannot fingerprint a {type(vocab).__name__}: the token cache needs a vocabulary with model_proto "
                  f"(SentencePieceVocab) or chars (CharVocab)")


def fingerprint_inputs(split: str, src_vocab, tgt_vocab, source_key: str) -> dict[str, Any]:
  """Everything a cached split's ids depend on; stored in the file and compared on load."""
  if not isinstance(source_key, str):
    raise TypeError(f"source_key must be a str, got {type(source_key).__name__}")
  return {"format_version": FORMAT_VERSION, "split": str(split), "src_vocab": vocab_identity(src_vocab),
          "tgt_vocab": vocab_identity(tgt_vocab), "source_key": source_key}


def fingerprint(inputs: dict[str, Any]) -> str:
  """16 hex digits of a hash of :func:`fingerprint_inputs` (the file repeats the inputs, so a collision is caught)."""
  return hashlib.sha256(json.dumps(inputs, sort_keys=True, ensure_ascii=False).encode()).hexdigest()[:16]


def cache_path(cache_dir: fs.PathLike, split: str, fingerprint_: str):
  """``<cache_dir>/tokens.<split>.<fingerprint>.npz`` (characters unsafe in a file name replaced by "_")."""
  safe = re.sub(r"[^A-Za-z0-9_.-]", "_", str(split)) or "_"
  return fs.join(cache_dir, f"{FILE_PREFIX}.{safe}.{fingerprint_}{FILE_SUFFIX}")


def _storage(ids: np.ndarray) -> np.ndarray:
  # Vocabularies below 65536 ids (every one attnjax trains) fit uint16: half the bytes to write, read and fetch from a
  # bucket. Ids are never negative (checked by TokenizedSplit).
  return ids.astype(np.uint16) if not ids.size or int(ids.max()) < 1 << 16 else ids


def save(path: fs.PathLike, tokens: TokenizedSplit, inputs: dict[str, Any]) -> None:
  """Writes ``tokens`` with its fingerprint ``inputs`` (atomically, see :func:`attnjax.fs.save_npz`)."""
  fs.save_npz(path, src=_storage(tokens.src), src_offsets=tokens.src_offsets, tgt=_storage(tokens.tgt),
              tgt_offsets=tokens.tgt_offsets, num_pairs=np.int64(len(tokens)),
              inputs=np.array(json.dumps(inputs, sort_keys=True, ensure_ascii=False)))


def load(path: fs.PathLike, inputs: dict[str, Any] | None = None) -> TokenizedSplit:
  """Reads a file written by :func:`save`.

  Raises:
    ValueError: ``inputs`` differ from the file's, or its arrays are inconsistent. An unreadable file raises whatever
      reading it raised (OSError, zipfile.BadZipFile, ...).
  """
  data = fs.load_npz(path)
  missing = {"src", "src_offsets", "tgt", "tgt_offsets", "num_pairs", "inputs"} - set(data)
  if missing:
    raise ValueError(f"missing arrays {sorted(missing)}")
  stored = json.loads(str(data["inputs"]))
  if inputs is not None and stored != inputs:
    changed = sorted(k for k in set(stored) | set(inputs) if stored.get(k) != inputs.get(k))
    raise ValueError(f"written for other inputs (differing: {changed})")
  for side in ("src", "tgt"):
    if data[side].dtype not in (np.uint16, np.int32):
      raise ValueError(f"{side} has dtype {data[side].dtype}, expected uint16 or int32")
  tokens = TokenizedSplit(data["src"].astype(np.int32, copy=False), data["src_offsets"],
                          data["tgt"].astype(np.int32, copy=False), data["tgt_offsets"])
  if int(data["num_pairs"]) != len(tokens):
    raise ValueError(f"records {int(data['num_pairs'])} pairs but holds {len(tokens)}")
  return tokens


def load_or_encode(cache_dir: fs.PathLike, split: str, src_vocab, tgt_vocab,
                   pairs_fn: Callable[[], Iterable[tuple[str, str]]], source_key: str, *,
                   expected_pairs: int | None = None, num_threads: int | None = None) -> TokenizedSplit:
  """The tokens of ``split`` from ``<cache_dir>/tokens.<split>.<fingerprint>.npz``, or encoded and written there.

  Args:
    cache_dir: a local directory or a URL (``gs://...``); next to the vocabulary, i.e. the workdir.
    split: the split's name ("train", "validation", ...).
    src_vocab: the source vocabulary (:class:`~attnjax.data.tokenizer.SentencePieceVocab` or
      :class:`~attnjax.data.vocab.CharVocab`).
    tgt_vocab: the target vocabulary (may be ``src_vocab``).
    pairs_fn: returns the split's ``(source, target)`` texts; only called when the cache misses.
    source_key: a description of where the text comes from (e.g. the data config's source keys as JSON): part of the
      fingerprint, so different text never reads another's ids.
    expected_pairs: if given, a cached file with another number of pairs is stale and rebuilt.
    num_threads: sentencepiece threads when encoding (default: the cores this process may use).
  """
  inputs = fingerprint_inputs(split, src_vocab, tgt_vocab, source_key)
  path = cache_path(cache_dir, split, fingerprint(inputs))
  start = time.perf_counter()
  if fs.exists(path):
    try:
      tokens = load(path, inputs)
      if expected_pairs is not None and len(tokens) != expected_pairs:
        raise ValueError(f"holds {len(tokens)} pairs but the split has {expected_pairs}")
    except Exception as e:  # pylint: disable=broad-except  (zipfile, numpy, JSON and I/O errors alike: rebuild)
      logging.warning("Token cache %s is unreadable or stale (%s: %s); encoding split %r again", path,
                      type(e).__name__, e, split)
    else:
      logging.info("Token cache hit: %s, %d pairs (%d source + %d target tokens) read in %.2f s", path, len(tokens),
                   len(tokens.src), len(tokens.tgt), time.perf_counter() - start)
      return tokens
  else:
    logging.info("Token cache miss: %s does not exist; encoding split %r", path, split)

  start = time.perf_counter()
  tokens = encode_pairs(src_vocab, tgt_vocab, pairs_fn(), num_threads=num_threads)
  seconds = time.perf_counter() - start
  logging.info("Encoded split %r: %d pairs (%d source + %d target tokens) in %.1f s (%.0f pairs/s)", split,
               len(tokens), len(tokens.src), len(tokens.tgt), seconds, len(tokens) / max(seconds, 1e-9))
  start = time.perf_counter()
  try:
    save(path, tokens, inputs)
  except Exception as e:  # pylint: disable=broad-except  (a read-only bucket must not stop training)
    logging.warning("Could not write the token cache %s (%s: %s); the next start will encode split %r again", path,
                    type(e).__name__, e, split)
  else:
    logging.info("Wrote the token cache %s in %.2f s", path, time.perf_counter() - start)
  return tokens
