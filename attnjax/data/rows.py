"""Batches of fixed-length rows (packed documents for language modelling), deterministic and resumable, with the API
of :class:`attnjax.data.pipeline.Seq2SeqBatcher`: ``next``, ``iterate_epoch``, ``state``, ``restore``."""

from __future__ import annotations

import hashlib
from typing import Any, Callable, Iterator

import numpy as np

Arrays = dict[str, np.ndarray]


class RowBatcher:
  """Global batches of ``batch_size`` rows of ``arrays`` (every array ``[N, ...]``), each made into model inputs by
  ``make(rows, rng)`` with a generator seeded by (seed, epoch, batch): a resumed run draws what an uninterrupted one
  would, and an evaluation batch the same at every evaluation.

  Training (``shuffle``) reshuffles the rows each epoch and drops a last partial batch. Evaluation keeps the rows in
  order and pads the last batch with all-zero rows (which a ``make`` must give zero weight), so that every row is
  scored. ``num_shards`` / ``shard_index``: each process takes every ``num_shards``-th row of every global batch.
  ``settings`` enter the fingerprint that a restored state must match.
  """

  def __init__(self, arrays: Arrays, *, batch_size: int, make: Callable[[Arrays, np.random.Generator], Arrays],
               seed: int = 0, shuffle: bool = True, num_shards: int = 1, shard_index: int = 0,
               batch_multiple: int = 1, settings: Any = None):
    n = len(next(iter(arrays.values())))
    if batch_size % max(batch_multiple, 1) or batch_size % num_shards:
      raise ValueError(f"data.batch_size={batch_size} must be a multiple of {max(batch_multiple, num_shards)} (the "
                       "data-parallel devices, processes and gradient-accumulation steps)")
    if shuffle and n < batch_size:
      raise ValueError(f"{n} packed rows are fewer than one batch of data.batch_size={batch_size}")
    self.arrays, self.num_rows, self.make = arrays, n, make
    self.batch_size, self.seed, self.shuffle = batch_size, seed, shuffle
    self.num_shards, self.shard_index = num_shards, shard_index
    first = b"".join(np.ascontiguousarray(a[:64]).tobytes() for _, a in sorted(arrays.items()))
    self._fingerprint = hashlib.sha256(first + str((n, batch_size, shuffle, settings)).encode()).hexdigest()[:16]
    self._epoch = self._position = 0

  def num_batches(self, epoch: int | None = None) -> int:
    del epoch
    return self.num_rows // self.batch_size if self.shuffle else -(-self.num_rows // self.batch_size)

  def _batch(self, epoch: int, position: int) -> Arrays:
    order = (np.random.default_rng((self.seed, epoch)).permutation(self.num_rows) if self.shuffle
             else np.arange(self.num_rows))
    rows = order[position * self.batch_size:(position + 1) * self.batch_size]
    chosen = {key: value[rows] for key, value in self.arrays.items()}
    if len(rows) < self.batch_size:  # evaluation's last batch: empty rows
      chosen = {key: np.pad(value, ((0, self.batch_size - len(rows)),) + ((0, 0),) * (value.ndim - 1))
                for key, value in chosen.items()}
    batch = self.make(chosen, np.random.default_rng((self.seed, epoch, position, 0x6d6c6d)))
    return {key: value[self.shard_index::self.num_shards] for key, value in batch.items()}

  def iterate_epoch(self, epoch: int = 0) -> Iterator[Arrays]:
    for position in range(self.num_batches(epoch)):
      yield self._batch(epoch, position)

  def __iter__(self):
    return self

  def __next__(self) -> Arrays:
    if not self.num_batches():
      raise RuntimeError("no batch: fewer rows than one batch")
    batch = self._batch(self._epoch, self._position)
    self._position += 1
    if self._position == self.num_batches():
      self._epoch, self._position = self._epoch + 1, 0
    return batch

  def state(self) -> dict[str, Any]:
    return {"version": 1, "seed": self.seed, "epoch": self._epoch, "position": self._position,
            "fingerprint": self._fingerprint}

  def restore(self, state: dict[str, Any]) -> None:
    if not isinstance(state, dict) or state.get("fingerprint") != self._fingerprint or state.get("seed") != self.seed:
      raise ValueError("state was saved by a batcher with other rows, seed or settings (fingerprint mismatch)")
    if not 0 <= int(state["position"]) < max(self.num_batches(), 1):
      raise ValueError(f"state position {state['position']} is past the {self.num_batches()} batches of an epoch")
    self._epoch, self._position = int(state["epoch"]), int(state["position"])
