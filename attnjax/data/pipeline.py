"""Deterministic, resumable batching of (source ids, target ids) examples for sequence-to-sequence training.

:class:`Seq2SeqBatcher` turns a list of ``(src_ids, tgt_ids)`` pairs (token ids without BOS/EOS) into batches of
NumPy arrays for :mod:`attnjax.models.interface` models:

* ``"src"`` ``[B, S]`` int32, ``"tgt_in"`` ``[B, T]`` int32 = BOS + target, ``"tgt_out"`` ``[B, T]`` int32 = target +
  EOS, ``"src_mask"`` ``[B, S]`` / ``"tgt_mask"`` ``[B, T]`` bool (True = real token), padded with ``PAD_ID``.
* Unpacked batches also carry ``"example_index"`` ``[B]`` int32: the row's index in ``examples`` (-1 for a filler
  row), so evaluation can put bucketed predictions back in order.
* Packed batches (``pack=True``) carry ``"src_segment_ids"`` / ``"tgt_segment_ids"`` ``[B, L]`` int32 (1, 2, 3, ...
  per example in the row, 0 on padding) and ``"src_positions"`` / ``"tgt_positions"`` ``[B, L]`` int32 (0, 1, ...
  restarting at every segment, 0 on padding).

Lengths. An example's target takes ``len(tgt) + 1`` positions (BOS + tgt, tgt + EOS). Examples with an empty source
or target, or with ``len(src) > max_src_len`` or ``len(tgt) + 1 > max_tgt_len``, are skipped and counted
(``num_skipped_empty``, ``num_skipped_too_long``, logged with absl); an empty example counts as empty even if too
long. With ``truncate=True`` over-long examples are cut instead (``num_truncated``): the source to its first
``max_src_len`` tokens, the target to its first ``max_tgt_len`` tokens with no EOS after it.

Buckets (unpacked). ``bucket_boundaries`` are inclusive upper bounds on ``max(len(src), len(tgt) + 1)``; those not
below ``max(max_src_len, max_tgt_len)`` are dropped and that maximum is appended as the last bound (no boundaries:
one bucket). A bucket with bound ``b`` pads sources to ``S = round_up(min(b, max_src_len), pad_to_multiple)`` and
targets to ``T = round_up(min(b, max_tgt_len), pad_to_multiple)``, and has a fixed global batch size: ``batch_size``,
or ``max_tokens // max(S, T)`` rounded down to a multiple of ``batch_multiple`` (token-based batching: every batch
has ``B·max(S, T) <= max_tokens`` padded positions). The last, partial batch of a bucket is dropped
(``drop_remainder=True``) or filled up with all-padding rows (all masks False), so that every bucket has exactly one
batch shape: the number of shapes a jitted step sees is the number of non-empty buckets. The attention kernels give
zeros, never NaN, for such all-padding rows, and losses must be weighted by ``tgt_mask`` anyway.

Order. Epoch ``e`` uses ``numpy.random.default_rng([seed, e])``: with ``shuffle=True`` each bucket's examples are
permuted, cut into batches, and then the batches of all buckets are permuted together. With ``shuffle=False``: buckets
in increasing length, examples in their input order.

Packing (``pack=True``, for the Transformer): several examples per row of ``L = round_up(pack_length,
pad_to_multiple)`` positions (default ``pack_length = max(max_src_len, max_tgt_len)``), placed first-fit in the epoch's
order; see :mod:`attnjax.data.packing`.

Multi-host. Global batches do not depend on ``num_shards``: with ``num_shards = n`` the process ``shard_index = i``
yields the contiguous block of rows ``[i·B/n, (i+1)·B/n)`` of every global batch, so concatenating the shards in
index order (as ``jax.make_array_from_process_local_data`` does) gives the unsharded batch. Global batch sizes must
be multiples of ``num_shards``; with ``max_tokens`` the default ``batch_multiple = num_shards`` guarantees it, and an
explicit ``batch_multiple`` that every shard count divides also keeps the global batches identical across shard
counts (and states restorable across them).

Resuming. :meth:`Seq2SeqBatcher.state` is ``{"seed", "epoch", "position", ...}`` (JSON-serialisable): the next
batch is batch ``position`` of epoch ``epoch``'s order. :meth:`Seq2SeqBatcher.restore` continues from there with
exactly the batches an uninterrupted run would have produced, as every epoch's order is a pure function of (seed,
epoch). A fingerprint of the configuration and example lengths in the state catches restoring into a different
pipeline.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import zlib
from typing import Any, Iterator, Sequence

import numpy as np
from absl import logging

from attnjax.data import packing
from attnjax.data.token_cache import TokenizedSplit
from attnjax.tokens import BOS_ID, EOS_ID, PAD_ID, PAD_TO_MULTIPLE, round_up

Batch = dict[str, np.ndarray]
# batch bookkeeping for the host (e.g. putting predictions back in order), never a model input
HOST_ONLY_KEYS = ("example_index",)

_STATE_VERSION = 1
_STATE_KEYS = frozenset({"version", "seed", "epoch", "position", "fingerprint"})


@dataclasses.dataclass(frozen=True)
class BucketSpec:
  """One bucket's fixed batch shape. For packing there is a single spec: one row per batch line."""
  max_length: int  # inclusive bound on max(len(src), len(tgt) + 1); the row length L when packing
  batch_size: int  # global rows per batch (each of the num_shards processes gets batch_size // num_shards)
  src_length: int  # S, padded source length
  tgt_length: int  # T, padded target length


def _check_int(name: str, value, minimum: int | None = None, allow_none: bool = False) -> None:
  if value is None and allow_none:
    return
  if not isinstance(value, (int, np.integer)) or isinstance(value, bool):
    raise TypeError(f"{name} must be an int, got {value!r}")
  if minimum is not None and value < minimum:
    raise ValueError(f"{name} must be >= {minimum}, got {value}")


def _flatten(seqs: list, what: str) -> tuple[np.ndarray, np.ndarray]:
  """Ragged int sequences -> (flat ``[sum(len)]`` int32, offsets ``[N + 1]`` int64)."""
  lengths = np.fromiter((len(s) for s in seqs), dtype=np.int64, count=len(seqs))
  offsets = np.zeros(len(seqs) + 1, dtype=np.int64)
  np.cumsum(lengths, out=offsets[1:])
  try:
    flat = np.fromiter(itertools.chain.from_iterable(seqs), dtype=np.int64, count=int(offsets[-1]))
  except (TypeError, ValueError) as e:
    raise TypeError(f"every {what} must be a sequence of int token ids: {e}") from None
  return _check_ids(flat, offsets, what), offsets


def _check_ids(flat: np.ndarray, offsets: np.ndarray, what: str) -> np.ndarray:
  """``flat`` as int32, after checking that every id is in [1, 2**31)."""
  if flat.size:
    bad = np.flatnonzero((flat <= PAD_ID) | (flat >= 2**31))
    if bad.size:
      example = int(np.searchsorted(offsets, bad[0], side="right") - 1)
      # A PAD inside the content would be counted as real by the masks here but as padding by models that derive
      # masks from src != PAD_ID; a negative id is a bug upstream.
      raise ValueError(f"{what} of example {example} holds id {flat[bad[0]]}; ids must be in [1, 2**31) "
                       f"(PAD_ID={PAD_ID} is reserved for padding)")
  return flat.astype(np.int32, copy=False)


def _check_options(batch_size, max_tokens, max_src_len, max_tgt_len, seed, pad_to_multiple, num_shards,
                   shard_index, batch_multiple, pack, pack_length, truncate, bucket_boundaries) -> int:
  """:class:`Seq2SeqBatcher`'s arguments checked, naming the first bad one; returns ``batch_multiple`` (default:
  ``num_shards``)."""
  if (batch_size is None) == (max_tokens is None):
    raise ValueError(f"give exactly one of batch_size and max_tokens, got batch_size={batch_size}, "
                     f"max_tokens={max_tokens}")
  _check_int("batch_size", batch_size, 1, allow_none=True)
  _check_int("max_tokens", max_tokens, 1, allow_none=True)
  _check_int("max_src_len", max_src_len, 1)
  _check_int("max_tgt_len", max_tgt_len, 2)  # room for at least one token plus EOS
  _check_int("seed", seed, 0)
  _check_int("pad_to_multiple", pad_to_multiple, 1)
  _check_int("num_shards", num_shards, 1)
  _check_int("shard_index", shard_index, 0)
  if shard_index >= num_shards:
    raise ValueError(f"shard_index must be in [0, num_shards={num_shards}), got {shard_index}")
  batch_multiple = num_shards if batch_multiple is None else batch_multiple
  _check_int("batch_multiple", batch_multiple, 1)
  if batch_multiple % num_shards:
    raise ValueError(f"batch_multiple={batch_multiple} must be a multiple of num_shards={num_shards}")
  if batch_size is not None and batch_size % num_shards:
    raise ValueError(f"batch_size={batch_size} must be a multiple of num_shards={num_shards}")
  if not pack and pack_length is not None:
    raise ValueError("pack_length is only used with pack=True")
  if pack and truncate:
    raise ValueError("truncate is not supported with pack=True (packed rows end every target with EOS)")
  if pack and bucket_boundaries is not None:
    raise ValueError("bucket_boundaries do not apply with pack=True (all rows have pack_length)")
  return batch_multiple


class Seq2SeqBatcher:
  """Deterministic, resumable, bucketed (or packed), shardable batches; see the module docstring.

  Iterating (``for batch in batcher`` / ``next(batcher)``) yields batches forever, epoch after epoch, advancing the
  state that :meth:`state` / :meth:`restore` save and load. :meth:`iterate_epoch` yields one epoch without touching
  that state (for evaluation, build the batcher with ``shuffle=False``).

  Args:
    examples: sequence of ``(src_ids, tgt_ids)`` pairs of int sequences (lists or 1-D arrays), without BOS/EOS, or
      a :class:`~attnjax.data.token_cache.TokenizedSplit`, whose flat arrays are used as they are (no copy).
    batch_size: global rows per batch. Exactly one of ``batch_size`` and ``max_tokens`` must be given.
    max_tokens: bound on ``rows · max(S, T)`` per global batch (``rows · L`` when packing).
    max_src_len: longest source kept, in tokens.
    max_tgt_len: longest target kept, counting the EOS (or BOS) that is added.
    bucket_boundaries: increasing inclusive bounds on ``max(len(src), len(tgt) + 1)``; None = a single bucket.
    shuffle: shuffle examples and batches each epoch.
    seed: non-negative int; with the epoch number it fixes every epoch's order.
    drop_remainder: drop each bucket's last partial batch instead of filling it up with padding rows.
    pad_to_multiple: padded lengths (S, T, L) are rounded up to a multiple of this.
    num_shards: number of processes sharing each global batch.
    shard_index: which block of rows this process yields, in ``[0, num_shards)``.
    pack: pack several examples per row (segment ids and positions are added).
    pack_length: row length before rounding; default ``max(max_src_len, max_tgt_len)``, and at least that.
    truncate: cut over-long examples to ``max_src_len`` / ``max_tgt_len`` instead of skipping them (summarization:
      See et al. 2017 train on an article's first 400 tokens and a summary's first 100); a cut target gets no EOS.
      Counted in ``num_truncated`` and logged.
    batch_multiple: with ``max_tokens``, batch sizes are rounded down to a multiple of this (default
      ``num_shards``; must be a multiple of ``num_shards``).
  """

  def __init__(self, examples: Sequence[tuple[Sequence[int], Sequence[int]]], *, batch_size: int | None = None,
               max_tokens: int | None = None, max_src_len: int, max_tgt_len: int,
               bucket_boundaries: Sequence[int] | None = None, shuffle: bool = True, seed: int = 0,
               drop_remainder: bool = False, pad_to_multiple: int = PAD_TO_MULTIPLE, num_shards: int = 1,
               shard_index: int = 0, pack: bool = False, pack_length: int | None = None,
               batch_multiple: int | None = None, truncate: bool = False):
    batch_multiple = _check_options(batch_size, max_tokens, max_src_len, max_tgt_len, seed, pad_to_multiple,
                                    num_shards, shard_index, batch_multiple, pack, pack_length, truncate,
                                    bucket_boundaries)
    self.batch_size, self.max_tokens = batch_size, max_tokens
    self.max_src_len, self.max_tgt_len = int(max_src_len), int(max_tgt_len)
    self.shuffle, self.seed, self.drop_remainder = bool(shuffle), int(seed), bool(drop_remainder)
    self.pad_to_multiple, self.num_shards, self.shard_index = int(pad_to_multiple), int(num_shards), int(shard_index)
    self.pack, self.batch_multiple, self.truncate = bool(pack), int(batch_multiple), bool(truncate)

    kept, src_len, tgt_len = self._keep(examples)
    self._plan_buckets(kept, src_len, tgt_len, bucket_boundaries, pack_length)
    self._fingerprint = self._fingerprint_of(kept, src_len, tgt_len, self.num_examples_total)
    self._epoch, self._position = 0, 0
    self._plans: dict[int, list] = {}

  def _keep(self, examples):
    """Stores the examples flat and chooses the ones to batch: empty ones and (without ``truncate``) over-long ones
    are skipped and counted; returns the kept indices and every example's source and target lengths."""
    if isinstance(examples, TokenizedSplit):
      # Already flat (e.g. from the token cache): iterating would re-flatten every id in Python, ~40 s and GBs of
      # temporaries for WMT14 en-de.
      self._src, self._src_offsets = _check_ids(examples.src, examples.src_offsets, "source"), examples.src_offsets
      self._tgt, self._tgt_offsets = _check_ids(examples.tgt, examples.tgt_offsets, "target"), examples.tgt_offsets
    else:
      examples = list(examples)
      for i, ex in enumerate(examples):
        if not isinstance(ex, (tuple, list)) or len(ex) != 2:
          raise TypeError(f"examples[{i}] must be a (src_ids, tgt_ids) pair, got {type(ex).__name__}")
      self._src, self._src_offsets = _flatten([ex[0] for ex in examples], "source")
      self._tgt, self._tgt_offsets = _flatten([ex[1] for ex in examples], "target")
    src_len = np.diff(self._src_offsets)
    tgt_len = np.diff(self._tgt_offsets) + 1  # BOS + tgt / tgt + EOS
    empty = (src_len == 0) | (tgt_len == 1)
    over = ~empty & ((src_len > self.max_src_len) | (tgt_len > self.max_tgt_len))
    self.num_truncated = int(over.sum()) if self.truncate else 0
    if self.truncate:
      # See et al. (2017): the article's first max_src_len tokens, the summary's first max_tgt_len (no EOS after a
      # cut summary: the model is not taught to stop where the text did not)
      src_len, tgt_len = np.minimum(src_len, self.max_src_len), np.minimum(tgt_len, self.max_tgt_len)
      logging.info("Seq2SeqBatcher truncated %d of %d examples to %d source / %d target tokens", self.num_truncated,
                   len(src_len), self.max_src_len, self.max_tgt_len)
    too_long = over & ~self.truncate
    kept = np.flatnonzero(~empty & ~too_long)
    self.num_examples_total = len(examples)
    self.num_skipped_empty = int(empty.sum())
    self.num_skipped_too_long = int(too_long.sum())
    self.num_examples = len(kept)  # kept ones
    if self.num_skipped_empty or self.num_skipped_too_long:
      logging.warning("Seq2SeqBatcher skipped %d of %d examples: %d too long (source > %d or target + EOS > %d "
                      "tokens), %d empty", self.num_skipped_empty + self.num_skipped_too_long, len(examples),
                      self.num_skipped_too_long, self.max_src_len, self.max_tgt_len, self.num_skipped_empty)
    if not len(kept):
      raise ValueError(f"no example left: all {len(examples)} were skipped ({self.num_skipped_too_long} too long, "
                       f"{self.num_skipped_empty} empty)")
    self._src_len, self._tgt_len, self._kept = src_len, tgt_len, kept
    return kept, src_len, tgt_len

  def _plan_buckets(self, kept, src_len, tgt_len, bucket_boundaries, pack_length) -> None:
    """The batch shapes: one row length when packing, else a (source, target) shape per bucket, and each
    bucket's examples."""
    longest = max(self.max_src_len, self.max_tgt_len)
    if self.pack:
      pack_length = longest if pack_length is None else pack_length
      _check_int("pack_length", pack_length, 1)
      if pack_length < longest:
        raise ValueError(f"pack_length={pack_length} must be >= max(max_src_len, max_tgt_len)={longest} so that every "
                         "kept example fits in a row")
      row = round_up(pack_length, self.pad_to_multiple)
      self.bucket_boundaries = (row,)
      self.bucket_specs = (BucketSpec(row, self._rows_per_batch(row), row, row),)
      self._bucket_members = [kept]
    else:
      bounds = [] if bucket_boundaries is None else [int(b) for b in bucket_boundaries]
      for b in bounds:
        _check_int("bucket_boundaries entry", b, 1)
      if any(a >= b for a, b in zip(bounds, bounds[1:])):
        raise ValueError(f"bucket_boundaries must be strictly increasing, got {list(bucket_boundaries)}")
      self.bucket_boundaries = tuple(b for b in bounds if b < longest) + (longest,)
      specs = []
      for b in self.bucket_boundaries:
        s = round_up(min(b, self.max_src_len), self.pad_to_multiple)
        t = round_up(min(b, self.max_tgt_len), self.pad_to_multiple)
        specs.append(BucketSpec(b, self._rows_per_batch(max(s, t)), s, t))
      self.bucket_specs = tuple(specs)
      bucket_of = np.searchsorted(np.asarray(self.bucket_boundaries), np.maximum(src_len, tgt_len)[kept], side="left")
      self._bucket_members = [kept[bucket_of == b] for b in range(len(self.bucket_boundaries))]
    logging.info("Seq2SeqBatcher: %d examples; buckets (bound, count, global batch, S, T): %s", len(kept),
                 [(s.max_length, len(m), s.batch_size, s.src_length, s.tgt_length)
                  for s, m in zip(self.bucket_specs, self._bucket_members)])

  def _fingerprint_of(self, kept, src_len, tgt_len, num_examples: int) -> int:
    """What a saved position is valid for: the settings, the kept examples and their lengths."""
    config = dict(batch_size=self.batch_size, max_tokens=self.max_tokens, max_src_len=self.max_src_len,
                  max_tgt_len=self.max_tgt_len, boundaries=self.bucket_boundaries, shuffle=self.shuffle,
                  drop_remainder=self.drop_remainder, pad_to_multiple=self.pad_to_multiple, pack=self.pack,
                  **({"truncate": True} if self.truncate else {}),
                  batch_sizes=[s.batch_size for s in self.bucket_specs], num_examples=num_examples)
    crc = zlib.crc32(json.dumps(config, sort_keys=True).encode())
    crc = zlib.crc32(kept.astype(np.int64).tobytes(), crc)
    crc = zlib.crc32(src_len[kept].astype(np.int64).tobytes(), crc)
    return zlib.crc32(tgt_len[kept].astype(np.int64).tobytes(), crc)

  def _rows_per_batch(self, length: int) -> int:
    if self.batch_size is not None:
      return self.batch_size
    rows = self.max_tokens // length // self.batch_multiple * self.batch_multiple
    if rows == 0:
      raise ValueError(f"max_tokens={self.max_tokens} is too small for batches of length {length} "
                       f"(a multiple of batch_multiple={self.batch_multiple} rows): need at least "
                       f"{length * self.batch_multiple}")
    return rows

  # ------------------------------------------------------------------------------------------------ epoch plans

  def _plan(self, epoch: int) -> list:
    """The global batches of ``epoch``: a list of ``(bucket, rows)``; ``rows`` is an int64 array of example indices
    (-1 = filler) when unpacked, a list of per-row example-index lists when packed."""
    if epoch not in self._plans:
      if len(self._plans) >= 2:  # the current epoch and one look-up (restore, iterate_epoch) are enough
        self._plans.pop(next(iter(self._plans)))
      rng = np.random.default_rng([self.seed, epoch]) if self.shuffle else None
      self._plans[epoch] = self._packed_plan(rng) if self.pack else self._bucketed_plan(rng)
    return self._plans[epoch]

  def _bucketed_plan(self, rng: np.random.Generator | None) -> list:
    batches = []
    for bucket, (spec, members) in enumerate(zip(self.bucket_specs, self._bucket_members)):
      if rng is not None:
        members = rng.permutation(members)
      size = spec.batch_size
      for start in range(0, len(members), size):
        rows = members[start:start + size]
        if len(rows) < size:
          if self.drop_remainder:
            break
          rows = np.concatenate([rows, np.full(size - len(rows), -1, dtype=rows.dtype)])
        batches.append((bucket, rows))
    if rng is not None:
      batches = [batches[i] for i in rng.permutation(len(batches))]
    return batches

  def _packed_plan(self, rng: np.random.Generator | None) -> list:
    spec = self.bucket_specs[0]
    window = spec.batch_size
    order = rng.permutation(self._kept) if rng is not None else self._kept
    closed = packing.first_fit_rows(order, self._src_len, self._tgt_len, capacity=spec.src_length,
                                    max_open_rows=window)
    batches = []
    for start in range(0, len(closed), window):
      rows = closed[start:start + window]
      if len(rows) < window:
        if self.drop_remainder:
          break
        rows = rows + [[] for _ in range(window - len(rows))]
      batches.append((0, rows))
    return batches

  # -------------------------------------------------------------------------------------------- materialising

  def _local(self, rows):
    per_shard = len(rows) // self.num_shards
    return rows[self.shard_index * per_shard:(self.shard_index + 1) * per_shard]

  def _example(self, i: int) -> tuple[np.ndarray, np.ndarray]:
    """Example ``i``'s ids; with ``truncate``, its source cut to ``max_src_len`` tokens and its target to
    ``max_tgt_len`` (one more than fits with an EOS: :meth:`_batch` adds no EOS to a cut target)."""
    src = self._src[self._src_offsets[i]:self._src_offsets[i + 1]]
    tgt = self._tgt[self._tgt_offsets[i]:self._tgt_offsets[i + 1]]
    if self.truncate:
      src, tgt = src[:self.max_src_len], tgt[:self.max_tgt_len]
    return src, tgt

  def _batch(self, bucket: int, rows) -> Batch:
    spec = self.bucket_specs[bucket]
    rows = self._local(rows)
    n, s_len, t_len = len(rows), spec.src_length, spec.tgt_length
    if self.pack:
      return packing.packed_batch([[self._example(i) for i in members] for members in rows], s_len, t_len)
    src = np.full((n, s_len), PAD_ID, np.int32)
    tgt_in = np.full((n, t_len), PAD_ID, np.int32)
    tgt_out = np.full((n, t_len), PAD_ID, np.int32)
    src_lengths, tgt_lengths = np.zeros(n, np.int64), np.zeros(n, np.int64)
    for r, i in enumerate(rows.tolist()):
      if i < 0:
        continue  # filler row: all padding
      s, t = self._example(i)
      src[r, :len(s)] = s
      tgt_in[r, 0] = BOS_ID
      if self.truncate and len(t) == self.max_tgt_len:  # cut: t_1..t_T taught from BOS, t_1..t_{T-1}; no EOS
        tgt_in[r, 1:len(t)] = t[:-1]
        tgt_out[r, :len(t)] = t
        src_lengths[r], tgt_lengths[r] = len(s), len(t)
        continue
      tgt_in[r, 1:len(t) + 1] = t
      tgt_out[r, :len(t)] = t
      tgt_out[r, len(t)] = EOS_ID
      src_lengths[r], tgt_lengths[r] = len(s), len(t) + 1
    return {"src": src, "tgt_in": tgt_in, "tgt_out": tgt_out,
            "src_mask": np.arange(s_len)[None, :] < src_lengths[:, None],
            "tgt_mask": np.arange(t_len)[None, :] < tgt_lengths[:, None],
            "example_index": rows.astype(np.int32)}

  # --------------------------------------------------------------------------------------------- public API

  def num_batches(self, epoch: int | None = None) -> int:
    """Global batches in ``epoch`` (default: the current one). Constant across epochs unless packing."""
    return len(self._plan(self._epoch if epoch is None else epoch))

  def iterate_epoch(self, epoch: int = 0) -> Iterator[Batch]:
    """Yields the batches of one epoch, in the same order as iteration would; does not change :meth:`state`."""
    _check_int("epoch", epoch, 0)
    for bucket, rows in self._plan(epoch):
      yield self._batch(bucket, rows)

  def __iter__(self) -> Seq2SeqBatcher:
    return self

  def __next__(self) -> Batch:
    plan = self._plan(self._epoch)
    if not plan:
      raise RuntimeError(f"epoch {self._epoch} has no batch: drop_remainder=True with fewer examples "
                         f"({self.num_examples}) than one batch")
    batch = self._batch(*plan[self._position])
    # Advance before returning, so that state() taken after receiving a batch names the next one.
    self._position += 1
    if self._position == len(plan):
      self._epoch, self._position = self._epoch + 1, 0
    return batch

  def state(self) -> dict[str, Any]:
    """JSON-serialisable position of the next batch; identical on every shard."""
    return {"version": _STATE_VERSION, "seed": self.seed, "epoch": self._epoch, "position": self._position,
            "fingerprint": self._fingerprint}

  def restore(self, state: dict[str, Any]) -> None:
    """Continues from ``state`` (from :meth:`state` of an identically configured batcher, any shard)."""
    if not isinstance(state, dict) or set(state) != _STATE_KEYS:
      raise ValueError(f"state must be a dict with keys {sorted(_STATE_KEYS)}, got "
                       f"{sorted(state) if isinstance(state, dict) else type(state).__name__}")
    if state["version"] != _STATE_VERSION:
      raise ValueError(f"state version {state['version']!r} is not supported (expected {_STATE_VERSION})")
    if state["seed"] != self.seed:
      raise ValueError(f"state was saved with seed={state['seed']} but this batcher has seed={self.seed}")
    if state["fingerprint"] != self._fingerprint:
      raise ValueError("state was saved by a batcher with other examples or another configuration (fingerprint "
                       "mismatch); its position would not mean the same batches here")
    _check_int("state['epoch']", state["epoch"], 0)
    _check_int("state['position']", state["position"], 0)
    epoch, position = int(state["epoch"]), int(state["position"])
    if position >= self.num_batches(epoch) and position > 0:
      raise ValueError(f"state position {position} is past the {self.num_batches(epoch)} batches of epoch {epoch}")
    self._epoch, self._position = epoch, position
