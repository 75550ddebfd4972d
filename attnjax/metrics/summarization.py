"""Summarization metrics: ROUGE-N / ROUGE-L / ROUGE-Lsum (Lin 2004) through Google's ``rouge-score`` package, the
sentence splitting that ROUGE-Lsum needs, the Lead-n baseline, and See et al. (2017)'s measures of repetition and of
novel n-grams."""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence

from attnjax.metrics.corpus import References, check_hypotheses, reference_streams, references_per_segment

ROUGE_TYPES = ("rouge1", "rouge2", "rougeL", "rougeLsum")


@functools.lru_cache(maxsize=1)
def _porter_stem():
  """rouge-score's stemmer (NLTK's Porter, its default mode), each word stemmed once per process: stemming is most
  of the time ROUGE takes, and the words of a test set repeat."""
  from nltk.stem import porter  # pylint: disable=g-import-not-at-top
  return functools.lru_cache(maxsize=1 << 18)(porter.PorterStemmer().stem)


class _StemOnce:
  """rouge-score's default tokenizer (its ``tokenize.tokenize``: lower-case, [a-z0-9] tokens, words over 3
  characters stemmed) with :func:`_porter_stem`'s cached stems: the same tokens, about three times as fast."""

  def __init__(self):
    self.stem = _porter_stem()

  def tokenize(self, text: str) -> list[str]:
    from rouge_score import tokenize  # pylint: disable=g-import-not-at-top
    return tokenize.tokenize(text, self)


def rouge_scorer(types: Sequence[str], use_stemmer: bool = True):
  """``rouge_score.rouge_scorer.RougeScorer(types, use_stemmer=use_stemmer)``, scoring the same, with each word
  stemmed once per process."""
  from rouge_score import rouge_scorer as scorers  # pylint: disable=g-import-not-at-top
  if not use_stemmer:
    return scorers.RougeScorer(list(types), use_stemmer=False)
  return scorers.RougeScorer(list(types), tokenizer=_StemOnce())


_FINAL = frozenset({".", "!", "?"})
_CLOSERS = frozenset({")", "]", "}", "-rrb-", "-rsb-", "-rcb-", "''", "'"})


def split_sentences(text: str) -> str:
  """Puts one sentence per line, as ROUGE-Lsum expects, when ``text`` has no newline yet.

  Text that already contains a newline is returned unchanged (its lines are taken to be its sentences: the
  CNN/DailyMail references hold one highlight a line). Otherwise the rule, on whitespace-separated tokens, is:

  * a sentence ends after a token that is ``.``, ``!`` or ``?`` (the Stanford-tokenized text of See et al.'s
    CNN/DailyMail), or that ends in one of them and is followed by a token starting with a capital letter or a digit
    (untokenized text: "A cat sat. A dog ran.");
  * closing brackets and quotes that follow (``)``, ``''``, ``-rrb-``...) stay with the sentence they close, and so
    does a ``"`` that closes a quotation opened within the text (an odd number of ``"`` so far): in ``he said " no .
    " then`` the quote ends the first sentence.

  It needs no model or data, so the split of a hypothesis never depends on more than its own text. It splits after
  abbreviations in untokenized text ("Dr. Smith"); tokenized text keeps "dr." as one token and is not split there.
  """
  if "\n" in text:
    return text
  tokens = text.split()
  lines, current, quotes = [], [], 0
  i = 0
  while i < len(tokens):
    token = tokens[i]
    current.append(token)
    quotes += token.count('"')
    i += 1
    following = tokens[i][:1] if i < len(tokens) else ""
    if token in _FINAL or (token[-1] in _FINAL and (following.isupper() or following.isdigit())):
      while i < len(tokens) and (tokens[i] in _CLOSERS or (tokens[i] == '"' and quotes % 2 == 1)):
        quotes += tokens[i] == '"'
        current.append(tokens[i])
        i += 1
      lines.append(" ".join(current))
      current = []
  if current:
    lines.append(" ".join(current))
  return "\n".join(lines)


def lead(article: str, n: int = 3) -> str:
  """The first ``n`` sentences of ``article`` by :func:`split_sentences`, one a line: the Lead-3 baseline of
  summarization (See et al. 2017, Table 1) for ``n = 3``."""
  if n < 1:
    raise ValueError(f"n must be positive, got {n}")
  return "\n".join(split_sentences(article).split("\n")[:n]) if article.strip() else ""


def _ngrams(tokens: Sequence[str], n: int) -> list[tuple[str, ...]]:
  return [tuple(tokens[i:i + n]) for i in range(len(tokens) - n + 1)]


def repeated_ngrams(summaries: Sequence[str], n: int = 3) -> float:
  """See et al. (2017, Fig. 4)'s repetition: the share (0-100) of a summary's n-grams that already occurred earlier
  in the same summary, over all n-grams of all ``summaries`` (whitespace tokens)."""
  total = repeated = 0
  for summary in summaries:
    grams = _ngrams(summary.split(), n)
    seen: set = set()
    for gram in grams:
      repeated += gram in seen
      seen.add(gram)
    total += len(grams)
  return 100.0 * repeated / max(total, 1)


def novel_ngrams(summaries: Sequence[str], articles: Sequence[str], n: int) -> float:
  """The share (0-100) of the summaries' n-grams that do not appear in their article (See et al. 2017, Fig. 6: how
  abstractive a summarizer is; the reference summaries of CNN/DailyMail have about 30% novel trigrams)."""
  if len(summaries) != len(articles):
    raise ValueError(f"summaries ({len(summaries)}) and articles ({len(articles)}) must pair up")
  total = novel = 0
  for summary, article in zip(summaries, articles):
    source = set(_ngrams(article.split(), n))
    grams = _ngrams(summary.split(), n)
    novel += sum(gram not in source for gram in grams)
    total += len(grams)
  return 100.0 * novel / max(total, 1)


def summary_statistics(summaries: Sequence[str], articles: Sequence[str]) -> dict[str, float]:
  """See et al. (2017)'s measures of a split's summaries, in percent: ``repeated_trigrams`` (:func:`repeated_ngrams`)
  and ``novel_{1,2,3}grams`` (:func:`novel_ngrams` against each summary's article)."""
  stats = {"repeated_trigrams": repeated_ngrams(summaries, 3)}
  for n in (1, 2, 3):
    stats[f"novel_{n}grams"] = novel_ngrams(summaries, articles, n)
  return stats


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
  scorer = rouge_scorer(types, use_stemmer)
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
