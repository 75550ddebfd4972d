"""The record of one SQuAD question (Rajpurkar et al. 2016, 2018), as both readers give it: the official JSON
(:func:`attnjax.data.squad.load_squad_json`) and tensorflow-datasets (:func:`attnjax.data.tfds_sources.tfds_squad`).

A module of its own, below both readers, so that neither has to import the other for it.
"""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class SquadQuestion:
  """One question as the dataset gives it.

  Attributes:
    qid: the question id (the key of predictions and of the metric).
    question, context: the texts.
    answers: gold ``(text, answer_start)`` pairs, ``answer_start`` a character offset into ``context``; empty for an
      unanswerable (v2.0) question.
    is_impossible: v2.0's unanswerable questions (always False in v1.1).
    title: the article's title.
  """
  qid: str
  question: str
  context: str
  answers: tuple[tuple[str, int], ...]
  is_impossible: bool = False
  title: str = ""

  @property
  def answer_texts(self) -> list[str]:
    return [text for text, _ in self.answers]
