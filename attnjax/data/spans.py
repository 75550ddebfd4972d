"""Batches of tokenized SQuAD examples for :class:`attnjax.models.span_qa.SpanQA`.

:class:`SpanBatcher` reuses :class:`attnjax.data.pipeline.Seq2SeqBatcher` with the question as the source and the
context as the target, so extractive QA gets the same length bucketing, token-based batch sizes, per-host sharding
of global batches and exact resumption as translation. Each batch is a dict of NumPy arrays:

* ``"question"`` ``[B, Q]`` int32 and ``"question_mask"`` ``[B, Q]`` bool;
* ``"context"`` ``[B, C]`` int32 and ``"context_mask"`` ``[B, C]`` bool (no BOS/EOS: position i is context token i,
  the coordinates of the answer span and of :class:`~attnjax.data.squad.SquadExample` offsets);
* ``"start_positions"``, ``"end_positions"`` ``[B]`` int32: the inclusive gold span (0 for an unanswerable question
  or a filler row, where it is ignored);
* ``"is_impossible"`` ``[B]`` bool (SQuAD 2.0 questions without an answer);
* ``"weights"`` ``[B]`` float32: 1 for a question, 0 for a filler row that completes a bucket's last batch;
* ``"example_index"`` ``[B]`` int32: the row's index in ``examples`` (-1 for a filler row); host-side only
  (:data:`attnjax.data.pipeline.HOST_ONLY_KEYS`).

Lengths: a question keeps at most ``max_question_len`` tokens and a context ``max_context_len`` tokens
(:func:`attnjax.data.squad.encode_examples` truncates them, so nothing is skipped for length here); an example with
an empty question or context is skipped and counted by the underlying batcher's log.
"""

from __future__ import annotations

from typing import Any, Iterator, Sequence

import numpy as np

from attnjax.data.pipeline import Batch, Seq2SeqBatcher
from attnjax.data.squad import NO_ANSWER, SquadExample
from attnjax.tokens import PAD_ID


class SpanBatcher:
  """Deterministic, resumable, bucketed, shardable batches of :class:`SquadExample`; see the module docstring.

  Args:
    examples: tokenized questions (:func:`attnjax.data.squad.encode_examples`).
    max_question_len, max_context_len: the longest question and context, in tokens.
    **batcher_options: :class:`Seq2SeqBatcher`'s ``batch_size`` / ``max_tokens``, ``bucket_boundaries`` (bounds on
      max(question length, context length + 1)), ``shuffle``, ``seed``, ``drop_remainder``, ``pad_to_multiple``,
      ``num_shards``, ``shard_index``, ``batch_multiple``. Packing is not available (the model takes one pair per row).
  """

  def __init__(self, examples: Sequence[SquadExample], *, max_question_len: int, max_context_len: int,
               **batcher_options: Any):
    if batcher_options.get("pack"):
      raise ValueError("SpanBatcher does not pack: SpanQA reads one question-context pair per row")
    batcher_options.pop("pack", None)
    self.examples = list(examples)
    for name, value in (("max_question_len", max_question_len), ("max_context_len", max_context_len)):
      if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ValueError(f"{name} must be a positive int, got {value!r}")
    self._batcher = Seq2SeqBatcher([(e.question_ids, e.context_ids) for e in self.examples],
                                   max_src_len=max_question_len, max_tgt_len=max_context_len + 1, **batcher_options)
    answerable = np.array([e.start != NO_ANSWER for e in self.examples], bool)
    self._start = np.where(answerable, [e.start for e in self.examples], 0).astype(np.int32)
    self._end = np.where(answerable, [e.end for e in self.examples], 0).astype(np.int32)
    self._impossible = np.array([e.is_impossible for e in self.examples], bool)
    unreachable = ~answerable & ~self._impossible
    if unreachable.any():  # only evaluation keeps these (encode_examples(drop_unreachable=False))
      raise ValueError(f"{int(unreachable.sum())} answerable examples have no token span (first: question "
                       f"{self.examples[int(np.argmax(unreachable))].qid!r}); train on examples encoded with "
                       f"drop_unreachable=True")

  @property
  def num_examples(self) -> int:
    return self._batcher.num_examples

  def _convert(self, batch: Batch) -> Batch:
    index = batch["example_index"]
    real = index >= 0
    rows = np.where(real, index, 0)
    pad = np.zeros((index.shape[0], 1), bool)
    # The target side holds BOS + context (tgt_in) and context + EOS (tgt_out): dropping BOS puts context token i at
    # position i; the last column only ever held EOS or padding.
    context = np.concatenate([batch["tgt_in"][:, 1:], np.full_like(pad, PAD_ID, np.int32)], axis=1)
    context_mask = np.concatenate([batch["tgt_mask"][:, 1:], pad], axis=1)
    return {"question": batch["src"], "question_mask": batch["src_mask"],
            "context": np.where(context_mask, context, PAD_ID).astype(np.int32), "context_mask": context_mask,
            "start_positions": np.where(real, self._start[rows], 0).astype(np.int32),
            "end_positions": np.where(real, self._end[rows], 0).astype(np.int32),
            "is_impossible": real & self._impossible[rows], "weights": real.astype(np.float32),
            "example_index": index}

  def iterate_epoch(self, epoch: int = 0) -> Iterator[Batch]:
    return (self._convert(b) for b in self._batcher.iterate_epoch(epoch))

  def num_batches(self, epoch: int | None = None) -> int:
    return self._batcher.num_batches(epoch)

  def __iter__(self) -> SpanBatcher:
    return self

  def __next__(self) -> Batch:
    return self._convert(next(self._batcher))

  def state(self) -> dict[str, Any]:
    return self._batcher.state()

  def restore(self, state: dict[str, Any]) -> None:
    self._batcher.restore(state)
