"""Sequence packing for :class:`attnjax.data.pipeline.Seq2SeqBatcher` (``pack=True``, for the Transformer).

Packing (``pack=True``, for the Transformer). Rows have ``L = round_up(pack_length, pad_to_multiple)`` positions
(default ``pack_length = max(max_src_len, max_tgt_len)``) on both the source and the target side. Examples are taken
in the epoch's order (shuffled or not) and placed greedily, first-fit: into the oldest open row where both the source
and the target still fit, else into a new row. At most ``rows_per_batch`` rows are open at once: opening one more
closes the oldest, and a row that no example could fit any more closes at once; that bounds packing to O(N·B) time.
Closed rows are cut, in closing order, into batches of ``rows_per_batch`` rows (``batch_size``, or
``max_tokens // L`` rounded down to a multiple of ``batch_multiple``). An example is never split across rows; its
segment k of the source row pairs with segment k of the target row.

A packed row carries ``segment_ids`` (1, 2, 3, ... per example, 0 on padding) and ``positions`` (0, 1, ... restarting
at every segment, 0 on padding) on each side, from which the models build block-diagonal attention masks and
per-example positions.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from attnjax.tokens import BOS_ID, EOS_ID, PAD_ID


def first_fit_rows(order, src_len, tgt_len, *, capacity: int, max_open_rows: int) -> list[list[int]]:
  """Packs examples into rows of ``capacity`` positions per side, first-fit with at most ``max_open_rows`` open.

  Args:
    order: example indices, in the order they are placed (the epoch's order).
    src_len, tgt_len: ``[N]`` positions each example takes on the source side and on the target side (``len(tgt) +
      1``: BOS + target / target + EOS); every one ``<= capacity``.
    capacity: L, positions per row and side.
    max_open_rows: rows open at once (one batch); opening one more closes the oldest.

  Returns:
    The rows in closing order, each the list of its example indices in placement order.
  """
  order = np.asarray(order)
  if not len(order):
    return []
  src_len, tgt_len = np.asarray(src_len), np.asarray(tgt_len)
  min_src, min_tgt = int(src_len[order].min()), int(tgt_len[order].min())
  src_len, tgt_len = src_len.tolist(), tgt_len.tolist()
  open_rows: list[list] = []  # [members, src room, tgt room], oldest first
  closed: list[list[int]] = []
  for i in order.tolist():
    ls, lt = src_len[i], tgt_len[i]
    for j, row in enumerate(open_rows):
      if row[1] >= ls and row[2] >= lt:
        row[0].append(i)
        row[1] -= ls
        row[2] -= lt
        if row[1] < min_src or row[2] < min_tgt:  # nothing fits any more: stop scanning it
          closed.append(open_rows.pop(j)[0])
        break
    else:
      if len(open_rows) == max_open_rows:
        closed.append(open_rows.pop(0)[0])
      open_rows.append([[i], capacity - ls, capacity - lt])
  closed.extend(row[0] for row in open_rows)
  return closed


def packed_batch(rows: Sequence[Sequence[tuple[np.ndarray, np.ndarray]]], src_length: int, tgt_length: int) -> dict:
  """The arrays of packed rows: ``rows[r]`` is the row's ``(src_ids, tgt_ids)`` examples in order (an empty row is
  all padding). Returns ``src``, ``tgt_in`` (BOS + target per segment), ``tgt_out`` (target + EOS per segment),
  ``src_mask``/``tgt_mask``, ``src_segment_ids``/``tgt_segment_ids`` and ``src_positions``/``tgt_positions``,
  ``[B, S]`` or ``[B, T]`` each."""
  n = len(rows)
  src = np.full((n, src_length), PAD_ID, np.int32)
  tgt_in = np.full((n, tgt_length), PAD_ID, np.int32)
  tgt_out = np.full((n, tgt_length), PAD_ID, np.int32)
  src_seg, tgt_seg = np.zeros((n, src_length), np.int32), np.zeros((n, tgt_length), np.int32)
  src_pos, tgt_pos = np.zeros((n, src_length), np.int32), np.zeros((n, tgt_length), np.int32)
  for r, examples in enumerate(rows):
    ps = pt = 0
    for k, (s, t) in enumerate(examples, start=1):
      ls, lt = len(s), len(t) + 1
      src[r, ps:ps + ls] = s
      src_seg[r, ps:ps + ls] = k
      src_pos[r, ps:ps + ls] = np.arange(ls)
      tgt_in[r, pt] = BOS_ID
      tgt_in[r, pt + 1:pt + lt] = t
      tgt_out[r, pt:pt + lt - 1] = t
      tgt_out[r, pt + lt - 1] = EOS_ID
      tgt_seg[r, pt:pt + lt] = k
      tgt_pos[r, pt:pt + lt] = np.arange(lt)
      ps, pt = ps + ls, pt + lt
  return {"src": src, "tgt_in": tgt_in, "tgt_out": tgt_out, "src_mask": src_seg > 0, "tgt_mask": tgt_seg > 0,
          "src_segment_ids": src_seg, "tgt_segment_ids": tgt_seg, "src_positions": src_pos,
          "tgt_positions": tgt_pos}
