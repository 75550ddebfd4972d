"""Summarization metrics: ROUGE-N / ROUGE-L / ROUGE-Lsum (Lin 2004) through Google's ``rouge-score`` package, and the
sentence splitting that ROUGE-Lsum needs."""

from __future__ import annotations

import re
from collections.abc import Sequence

from attnjax.metrics.corpus import References, check_hypotheses, reference_streams, references_per_segment

ROUGE_TYPES = ("rouge1", "rouge2", "rougeL", "rougeLsum")


def split_sentences(text: str) -> str:
  """Puts one sentence per line, as ROUGE-Lsum expects, when ``text`` has no newline yet.

  Text that already contains a newline is returned unchanged (its lines are taken to be its sentences). Otherwise it is
  split after every "." followed by whitespace: "A cat sat. A dog ran." -> "A cat sat.\\nA dog ran.". This is a crude
  rule (it also splits after "Dr. " or "e.g. "), chosen because it needs no model or data; for published numbers split
  sentences with a real sentence splitter before scoring.
  """
  if "\n" in text:
    return text
  return re.sub(r"(?<=\.)\s+", "\n", text.strip())


def rouge(hypotheses: Sequence[str], references: References, *, types: Sequence[str] = ROUGE_TYPES,
          use_stemmer: bool = True) -> dict[str, float]:
  """ROUGE (Lin 2004) with Google's ``rouge-score`` package: each type's F1 averaged over segments, times 100.

  ``rouge-score`` lower-cases text and keeps only [a-z0-9] tokens (English only: other scripts score 0) and, with
  ``use_stemmer``, Porter-stems tokens longer than 3 characters, so "running" matches "run".

  ROUGE-Lsum (summary-level LCS, the variant summarization papers report) treats each line as a sentence: give
  summaries with one sentence per line, e.g. through :func:`split_sentences`; a summary without newlines is one
  sentence and its ROUGE-Lsum equals its ROUGE-L. With several references a segment scores its best reference (the
  package's ``score_multi``). References are laid out as :mod:`attnjax.metrics.corpus` describes.

  Args:
    types: ROUGE types: "rouge1" ... "rouge9", "rougeL", "rougeLsum".
    use_stemmer: Porter-stem tokens before matching (the setting of most summarization papers).

  Returns:
    dict from type to its mean F1 on 0-100.
  """
  from rouge_score import rouge_scorer  # pylint: disable=g-import-not-at-top

  if isinstance(types, str):
    types = (types,)
  types = tuple(types)
  if not types:
    raise ValueError("types is empty: name at least one ROUGE type, e.g. ('rouge1', 'rougeL')")
  for t in types:
    if not re.fullmatch(r"rouge[1-9]|rougeL|rougeLsum", t):
      raise ValueError(f"unknown ROUGE type {t!r} in types: use 'rouge1' ... 'rouge9', 'rougeL' or 'rougeLsum'")
  hypotheses = check_hypotheses(hypotheses)
  per_segment = references_per_segment(reference_streams(references, len(hypotheses)))
  scorer = rouge_scorer.RougeScorer(list(types), use_stemmer=use_stemmer)
  totals = dict.fromkeys(types, 0.0)
  for hyp, refs in zip(hypotheses, per_segment):
    # rouge-score takes (target, prediction): the reverse of the usual (hypothesis, reference) order.
    scores = scorer.score(refs[0], hyp) if len(refs) == 1 else scorer.score_multi(refs, hyp)
    for t in types:
      totals[t] += scores[t].fmeasure
  return {t: 100.0 * total / len(hypotheses) for t, total in totals.items()}


def rouge_signature(use_stemmer: bool, nrefs: int) -> str:
  """How :func:`rouge` scored, to be reported next to the scores (rouge-score has no signature of its own)."""
  import rouge_score  # pylint: disable=g-import-not-at-top
  version = getattr(rouge_score, "__version__", None)
  if version is None:
    from importlib import metadata  # pylint: disable=g-import-not-at-top
    version = metadata.version("rouge-score")
  return f"nrefs:{nrefs}|stem:{'yes' if use_stemmer else 'no'}|lsum:newline|f:mean|rouge-score:{version}"
