"""Contexts longer than the reader's window, read in overlapping windows (the "doc stride" of every SQuAD reader since
BERT, Devlin et al. 2019): a context of C tokens becomes windows of ``max_context_tokens`` starting every
``doc_stride`` tokens, until one reaches the end, and each window is a :class:`~attnjax.data.squad.SquadExample` of its
own (same question id). Offsets stay character positions in the whole context, so a span predicted in any window is
cut from the original text as before.

Training keeps the windows that contain the whole gold answer (its span shifted into the window). The other windows
of an answerable question are dropped and counted, as a reader without a no-answer option must; with ``null_target``
(SQuAD 2.0) they are kept with the null target, "no answer in this window" (``is_impossible`` for the window), as
BERT's ``run_squad.py`` labels them (start = end = [CLS]), so that a window without the answer learns to rank the null
span above its own spans, as the decision over windows needs. v2.0 questions without an answer keep every window, each
with no answer. Evaluation keeps every window, and :func:`best_across_windows` picks, per
question, the span with the best score over its windows; "no answer" wins when the smallest null score over the
windows (the window most sure there is an answer) beats that span (BERT's rule for SQuAD 2.0).
"""

from __future__ import annotations

from typing import Sequence

from absl import logging

from attnjax.data.squad import NO_ANSWER, SquadExample, SquadQuestion, char_span_to_token_span


def window_starts(length: int, window: int, stride: int) -> list[int]:
  """Token offsets of the windows covering ``length`` tokens: 0, stride, 2·stride, ... until one reaches the end."""
  if window < 1 or stride < 1 or stride > window:
    raise ValueError(f"need 1 <= doc_stride <= max_context_len, got doc_stride={stride}, window={window}")
  starts = [0]
  while starts[-1] + window < length:
    starts.append(starts[-1] + stride)
  return starts


def encode_windows(questions: Sequence[SquadQuestion], vocab, *, max_context_tokens: int, doc_stride: int,
                   max_question_tokens: int | None = None, drop_unreachable: bool = True,
                   null_target: bool = False) -> list[SquadExample]:
  """Like :func:`attnjax.data.squad.encode_examples`, one example per window (see the module docstring; with
  ``drop_unreachable``, ``null_target`` keeps the windows without the answer as no-answer examples)."""
  examples, dropped, nulled, windows_total, unreachable = [], 0, 0, 0, 0
  for q in questions:
    question_ids = list(vocab.encode(q.question)[:max_question_tokens])
    context_ids, offsets = vocab.encode_with_offsets(q.context)
    answer = None
    if not q.is_impossible:
      text, char_start = q.answers[0]
      try:
        answer = char_span_to_token_span(offsets, char_start, char_start + len(text))
      except ValueError:
        unreachable += 1
        if drop_unreachable:
          continue
    starts = window_starts(len(context_ids), max_context_tokens, doc_stride)
    windows_total += len(starts)
    for begin in starts:
      end_token = begin + max_context_tokens
      start = end = NO_ANSWER
      impossible = q.is_impossible
      if answer is not None and begin <= answer[0] and answer[1] < end_token:
        start, end = answer[0] - begin, answer[1] - begin
      elif answer is not None and drop_unreachable and null_target:
        impossible = True  # the answer is not (wholly) in this window: the null span is this window's target
        nulled += 1
      elif answer is not None and drop_unreachable:
        dropped += 1  # the answer is not (wholly) in this window: no target to train on
        continue
      examples.append(SquadExample(qid=q.qid, question_ids=question_ids, context_ids=list(context_ids[begin:end_token]),
                                   offsets=list(offsets[begin:end_token]), start=start, end=end,
                                   answers=tuple(q.answer_texts), context=q.context, is_impossible=impossible))
  logging.info("SQuAD windows: %d questions -> %d windows of %d tokens every %d (%d kept%s%s)", len(questions),
               windows_total, max_context_tokens, doc_stride, len(examples),
               f"; {dropped} windows without the whole answer dropped" if dropped else "",
               f"; {nulled} windows without the whole answer trained to answer nothing" if nulled else "")
  if unreachable:
    logging.warning("SQuAD: %d answers are not a token span of their context; %s", unreachable,
                    "those questions are dropped" if drop_unreachable else "they get start = end = NO_ANSWER")
  return examples


def first_questions(examples: Sequence[SquadExample], limit: int | None) -> list[SquadExample]:
  """The examples (windows) of the first ``limit`` questions, every window of each (all examples without a limit)."""
  if not limit:
    return list(examples)
  kept = set(list(dict.fromkeys(e.qid for e in examples))[:limit])
  return [e for e in examples if e.qid in kept]


def best_across_windows(examples: Sequence[SquadExample], starts, ends, span_scores, null_scores):
  """Per question (in first-appearance order): ``(example of the winning window, (start, end))`` with the best span
  over its windows, or ``(NO_ANSWER, NO_ANSWER)`` when the smallest null score beats it (null scores of -inf: a model
  without a no-answer option, which never abstains). A window without any context token offers no span."""
  out = []
  for example, span, margin in spans_and_null_margins(examples, starts, ends, span_scores, null_scores):
    out.append((example, (NO_ANSWER, NO_ANSWER) if margin > 0 or span[0] == NO_ANSWER else span))
  return out


def spans_and_null_margins(examples: Sequence[SquadExample], starts, ends, span_scores, null_scores):
  """Per question (in first-appearance order): ``(example of the winning window, (start, end), margin)``: the best
  non-null span over its windows (``(NO_ANSWER, NO_ANSWER)`` when no window has a context token), and how far the
  null option beats it, ``min over windows of the null score - the best span score`` (as Devlin et al. compare the
  null score with the best span for SQuAD 2.0): positive means the model's own rule says "no answer"; -inf for a
  model without a no-answer option, +inf when there is no span at all."""
  best: dict[str, list] = {}  # qid -> [best span score, its example index, smallest null score]
  for i, e in enumerate(examples):
    score = float(span_scores[i]) if e.context_ids else float("-inf")
    if e.qid not in best:
      best[e.qid] = [score, i, float(null_scores[i])]
      continue
    record = best[e.qid]
    if score > record[0]:  # ties keep the earlier window
      record[0], record[1] = score, i
    record[2] = min(record[2], float(null_scores[i]))
  out = []
  for score, i, null in best.values():
    example = examples[i]
    if score == float("-inf"):
      out.append((example, (NO_ANSWER, NO_ANSWER), float("inf")))
    else:
      out.append((example, (int(starts[i]), int(ends[i])), null - score))
  return out
