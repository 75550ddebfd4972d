"""Long SQuAD contexts read in overlapping windows (doc stride): the windows, their targets, and the choice of the
best span over a question's windows, including BERT's no-answer rule."""

import re

import jax
import numpy as np
import pytest

from attnjax import inference
from attnjax.data import tasks
from attnjax.data.spans import SpanBatcher
from attnjax.data.squad import NO_ANSWER, SquadQuestion, predictions_from_spans
from attnjax.data.squad_windows import (best_across_windows, encode_windows, first_questions, spans_and_null_margins,
                                        window_starts)
from attnjax.runtime import partitioning


class WordVocab:
  """One token per whitespace-separated word, with character offsets (what SQuAD needs of a vocabulary)."""

  def __init__(self):
    self.ids = {}

  def encode(self, text):
    return self.encode_with_offsets(text)[0]

  def encode_with_offsets(self, text):
    ids, offsets = [], []
    for m in re.finditer(r"\S+", text):
      ids.append(self.ids.setdefault(m.group(), 4 + len(self.ids)))
      offsets.append((m.start(), m.end()))
    return ids, offsets


def _question(answer_word_index, n_words=20, qid="q"):
  words = [f"w{i}" for i in range(n_words)]
  context = " ".join(words)
  start = context.index(f"w{answer_word_index}")
  return SquadQuestion(qid=qid, question="which word ?", context=context,
                       answers=((f"w{answer_word_index}", start),))


def test_window_starts_cover_the_context_every_stride():
  assert window_starts(20, 8, 4) == [0, 4, 8, 12]  # the last window [12, 20) reaches the end
  assert window_starts(5, 8, 4) == [0]
  with pytest.raises(ValueError, match="doc_stride"):
    window_starts(20, 8, 9)


def test_training_keeps_the_windows_holding_the_answer_with_the_span_shifted_evaluation_keeps_all():
  vocab = WordVocab()
  question = _question(answer_word_index=10)
  train = encode_windows([question], vocab, max_context_tokens=8, doc_stride=4, drop_unreachable=True)
  # windows [0, 8) [4, 12) [8, 16) [12, 20): word 10 is in the second and the third
  assert [(e.start, e.end) for e in train] == [(6, 6), (2, 2)]
  for e in train:
    assert predictions_from_spans([e], [(e.start, e.end)]) == {"q": "w10"}  # offsets stay in the whole context
  evaluation = encode_windows([question], vocab, max_context_tokens=8, doc_stride=4, drop_unreachable=False)
  assert len(evaluation) == 4 and [e.start for e in evaluation] == [NO_ANSWER, 6, 2, NO_ANSWER]


def test_for_squad2_training_a_window_without_the_answer_is_trained_to_answer_nothing():
  vocab = WordVocab()
  answerable, impossible = _question(answer_word_index=10, qid="a"), _question(3, qid="n")
  impossible = SquadQuestion(qid="n", question=impossible.question, context=impossible.context, answers=(),
                             is_impossible=True)
  train = encode_windows([answerable, impossible], vocab, max_context_tokens=8, doc_stride=4, drop_unreachable=True,
                         null_target=True)
  # BERT's run_squad.py for 2.0: windows [0, 8) and [12, 20) lack word 10 and point at [CLS], the others hold it
  assert [(e.qid, e.start, e.end, e.is_impossible) for e in train] == [
      ("a", NO_ANSWER, NO_ANSWER, True), ("a", 6, 6, False), ("a", 2, 2, False), ("a", NO_ANSWER, NO_ANSWER, True),
      ] + [("n", NO_ANSWER, NO_ANSWER, True)] * 4
  batch = next(SpanBatcher(train, max_question_len=4, max_context_len=8, batch_size=8).iterate_epoch())
  order = batch["example_index"]
  assert list(batch["is_impossible"]) == [train[i].is_impossible for i in order]
  assert list(batch["start_positions"]) == [max(train[i].start, 0) for i in order]
  # evaluation keeps the question answerable in every window (its gold answers score it); so does v1.1 training,
  # which drops the windows instead
  evaluation = encode_windows([answerable], vocab, max_context_tokens=8, doc_stride=4, drop_unreachable=False,
                              null_target=True)
  assert [e.is_impossible for e in evaluation] == [False] * 4
  assert len(encode_windows([answerable], vocab, max_context_tokens=8, doc_stride=4, drop_unreachable=True)) == 2


def test_a_squad2_task_trains_its_windows_with_the_null_target_a_v11_task_drops_them():
  vocab = WordVocab()
  answerable = _question(answer_word_index=10, qid="a")
  null = (NO_ANSWER, NO_ANSWER, True)
  # windows [0, 8) [4, 12) [8, 16) [12, 20): word 10 is in the second and the third, at tokens 6 and 2
  held = [(6, 6, False), (2, 2, False)]
  for version, expected in (("2.0", [null, *held, null]), ("1.1", held)):
    data = tasks.SpanTaskData("t", vocab, {"train": [answerable]}, max_question_len=4, max_context_len=8,
                              version=version, doc_stride=4)
    assert [(e.start, e.end, e.is_impossible) for e in data.examples("train", train=True)] == expected, version
    evaluation = data.examples("train", train=False)  # every window, the question answerable in each
    assert [(e.start, e.is_impossible) for e in evaluation] == [(NO_ANSWER, False), (6, False), (2, False),
                                                                (NO_ANSWER, False)], version


def test_a_limit_counts_questions_and_keeps_every_window_of_each():
  vocab = WordVocab()
  examples = encode_windows([_question(10, qid="a"), _question(3, qid="b", n_words=6), _question(1, qid="c")], vocab,
                            max_context_tokens=8, doc_stride=4, drop_unreachable=False)
  assert [e.qid for e in examples] == ["a"] * 4 + ["b"] + ["c"] * 4
  assert [e.qid for e in first_questions(examples, 2)] == ["a"] * 4 + ["b"]
  assert first_questions(examples, None) == examples == first_questions(examples, 9)


def test_best_span_over_windows_and_the_no_answer_rule():
  vocab = WordVocab()
  examples = encode_windows([_question(10, qid="a"), _question(3, qid="b")], vocab, max_context_tokens=8,
                            doc_stride=4, drop_unreachable=False)
  qids = [e.qid for e in examples]
  assert qids == ["a"] * 4 + ["b"] * 4
  starts = np.array([1, 6, 2, 0, 3, 0, 0, 0])
  ends = np.array([1, 6, 2, 0, 3, 0, 0, 0])
  spans = np.array([0.5, 3.0, 2.0, 0.1, 4.0, 1.0, 1.0, 1.0])
  never = np.full(8, -np.inf)
  chosen = best_across_windows(examples, starts, ends, spans, never)
  assert [(e.qid, span) for e, span in chosen] == [("a", (6, 6)), ("b", (3, 3))]
  assert predictions_from_spans([e for e, _ in chosen], [s for _, s in chosen]) == {"a": "w10", "b": "w3"}
  # "no answer" wins when the smallest null score of the question's windows beats its best span
  nulls = np.array([5.0, 3.5, 9.0, 9.0, 2.0, 9.0, 9.0, 9.0])
  chosen = best_across_windows(examples, starts, ends, spans, nulls)
  assert [span for _, span in chosen] == [(NO_ANSWER, NO_ANSWER), (3, 3)]
  # for a threshold chosen elsewhere: the best span still, and the smallest null score minus it (Devlin et al.'s
  # comparison for SQuAD 2.0, over all windows of the question)
  margins = spans_and_null_margins(examples, starts, ends, spans, nulls)
  assert [(e.qid, span) for e, span, _ in margins] == [("a", (6, 6)), ("b", (3, 3))]
  assert [m for _, _, m in margins] == [min(5.0, 3.5, 9.0, 9.0) - 3.0, min(2.0, 9.0, 9.0, 9.0) - 4.0]
  assert [m for _, _, m in spans_and_null_margins(examples, starts, ends, spans, never)] == [-np.inf, -np.inf]


def test_sharded_prediction_picks_the_window_whose_span_scores_best():
  vocab = WordVocab()
  examples = encode_windows([_question(10)], vocab, max_context_tokens=8, doc_stride=4, drop_unreachable=False)
  mesh = partitioning.create_mesh(("data",), (-1,))

  class Stub:
    """Scores each window by how close its first token is to word 8: the third window ([8, 16), where word 10 is at 2)
    wins."""
    rows = inference.RowSharding(mesh)

    def __call__(self, params, question, context):
      del params, question
      first = -np.abs(np.asarray(context)[:, 0].astype(np.float32) - vocab.ids["w8"])
      n = first.shape[0]
      return (jax.numpy.full((n,), 2), jax.numpy.full((n,), 2), jax.numpy.asarray(first),
              jax.numpy.full((n,), -np.inf))

  chosen = inference.predict_spans(Stub(), None, examples, max_question_len=8, max_context_len=8, batch_size=2)
  assert len(chosen) == 1
  example, span = chosen[0]
  assert span == (2, 2) and predictions_from_spans([example], [span]) == {"q": "w10"}
