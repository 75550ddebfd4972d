"""Translation metrics: corpus BLEU (Papineni et al. 2002), chrF (Popović 2015) and TER (Snover et al. 2006) through
sacreBLEU (Post 2018), each with sacreBLEU's signature so that a score can be reproduced; and METEOR (Banerjee & Lavie
2005) through NLTK's ``meteor_score``, an optional extra (also used for captioning).

All of them take detokenized text; references are laid out as :mod:`attnjax.metrics.corpus` describes.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from typing import Any

from sacrebleu.metrics import BLEU, CHRF, TER

from attnjax.metrics.corpus import (MetricResult, MetricUnavailableError, References, check_hypotheses,
                                    reference_streams, references_per_segment)

METEOR_INSTALL_HINT = "pip install 'attnjax[meteor]' && python -m nltk.downloader wordnet omw-1.4"

# ------------------------------------------------------------------------------------------- sacreBLEU metrics


def _sacrebleu_result(metric, hypotheses, references) -> tuple[Any, str]:
  hypotheses = check_hypotheses(hypotheses)
  streams = reference_streams(references, len(hypotheses))
  score = metric.corpus_score(hypotheses, streams)
  return score, str(metric.get_signature())


def bleu(hypotheses: Sequence[str], references: References, *, tokenize: str = "13a", lowercase: bool = False,
         smooth_method: str = "exp") -> MetricResult:
  """Corpus BLEU (Papineni et al. 2002) as sacreBLEU computes it (Post 2018).

  Args:
    hypotheses: detokenized system outputs, one string per segment. sacreBLEU tokenizes them itself, so feeding it
      already tokenized (or BPE-split) text gives a different, non-comparable score.
    references: detokenized references, one list (single reference) or a list of streams (see
      :mod:`attnjax.metrics.corpus`).
    tokenize: sacreBLEU's tokenizer: "13a" (mteval-v13a, WMT's default), "intl", "zh", "ja-mecab", "char", "none", ...
    lowercase: case-insensitive BLEU.
    smooth_method: sacreBLEU's smoothing for zero n-gram counts: "exp" (its default), "floor", "add-k" or "none".

  Returns:
    ``score`` on 0-100; ``signature`` like "nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:2.6.0"; ``details``
    with the modified n-gram ``precisions`` (percent), brevity penalty ``bp``, ``sys_len``, ``ref_len``, ``ratio`` and
    the matched / total n-gram ``counts`` / ``totals``.
  """
  metric = BLEU(tokenize=tokenize, lowercase=lowercase, smooth_method=smooth_method)
  score, signature = _sacrebleu_result(metric, hypotheses, references)
  details = {"precisions": list(score.precisions), "bp": score.bp, "sys_len": score.sys_len, "ref_len": score.ref_len,
             "ratio": score.ratio, "counts": list(score.counts), "totals": list(score.totals)}
  return MetricResult(name="BLEU", score=float(score.score), signature=signature, details=details)


def chrf(hypotheses: Sequence[str], references: References, *, char_order: int = 6, word_order: int = 0,
         beta: int = 2, lowercase: bool = False) -> MetricResult:
  """Corpus chrF (Popović 2015), or chrF++ with ``word_order=2`` (Popović 2017), as sacreBLEU computes it.

  Inputs are detokenized text laid out as for :func:`bleu`. ``details`` holds char_order, word_order and beta.
  """
  metric = CHRF(char_order=char_order, word_order=word_order, beta=beta, lowercase=lowercase)
  score, signature = _sacrebleu_result(metric, hypotheses, references)
  details = {"char_order": score.char_order, "word_order": score.word_order, "beta": score.beta}
  return MetricResult(name=score.name, score=float(score.score), signature=signature, details=details)


def ter(hypotheses: Sequence[str], references: References, *, case_sensitive: bool = False, normalized: bool = False,
        no_punct: bool = False, asian_support: bool = False) -> MetricResult:
  """Corpus Translation Edit Rate (Snover et al. 2006) as sacreBLEU reimplements tercom: lower is better.

  Inputs are detokenized text laid out as for :func:`bleu`. ``score`` is edits per 100 reference words (so it can
  exceed 100); ``details`` holds ``num_edits`` and the average ``ref_length``.
  """
  metric = TER(case_sensitive=case_sensitive, normalized=normalized, no_punct=no_punct, asian_support=asian_support)
  score, signature = _sacrebleu_result(metric, hypotheses, references)
  details = {"num_edits": score.num_edits, "ref_length": score.ref_length}
  return MetricResult(name="TER", score=float(score.score), signature=signature, details=details)


# ---------------------------------------------------------------------------------------------------- METEOR


def load_wordnet():
  """NLTK's WordNet reader, or MetricUnavailableError saying what is missing; never downloads anything."""
  try:
    import nltk  # pylint: disable=g-import-not-at-top
  except ImportError as e:
    raise MetricUnavailableError(f"METEOR needs the nltk package, which is not installed. Install it and its WordNet "
                                 f"data with: {METEOR_INSTALL_HINT}") from e
  from nltk.corpus import wordnet  # pylint: disable=g-import-not-at-top
  try:
    wordnet.ensure_loaded()
  except LookupError as e:
    raise MetricUnavailableError(
        f"METEOR needs NLTK's 'wordnet' corpus (for synonym matching), which was not found in nltk's data path "
        f"{list(nltk.data.path)}. Install it with: python -m nltk.downloader wordnet omw-1.4 (or the full extra: "
        f"{METEOR_INSTALL_HINT}); set NLTK_DATA to use a copy elsewhere. attnjax never downloads it at run time."
    ) from e
  return wordnet


def _wordnet():
  """WordNet through the loader in force: ``attnjax.metrics._load_wordnet``, looked up at call time.

  ``attnjax.metrics._load_wordnet`` is the hook to replace WordNet (tests put a synonym-free stand-in there, and a
  missing-data error); it was the loader's name when the metrics were one module. Reading the package attribute now,
  rather than calling :func:`load_wordnet` directly, keeps such a replacement in effect for :func:`meteor` and
  :func:`check_meteor_available`.
  """
  package = importlib.import_module(__package__)  # at call time: the package imports this module
  return getattr(package, "_load_wordnet", load_wordnet)()


def check_meteor_available() -> None:
  """Raises :class:`MetricUnavailableError` (with the install command) unless nltk and its WordNet data are installed:
  what a run that will compute METEOR checks before it starts, rather than failing at its first evaluation."""
  _wordnet()


def meteor(hypotheses: Sequence[str], references: References) -> MetricResult:
  """METEOR (Banerjee & Lavie 2005) through NLTK's ``meteor_score``: the mean of sentence scores, times 100.

  NLTK's is a reimplementation of the original METEOR (exact, Porter-stem and WordNet-synonym matching; alpha 0.9,
  beta 3, gamma 0.5), not the METEOR 1.5 jar, whose scores differ. Segments are split on whitespace and lower-cased,
  so tokenize punctuation beforehand if it should count as separate words. With several references a segment scores
  its best one. References are laid out as for :func:`bleu`.

  Raises:
    MetricUnavailableError: nltk or its WordNet data is not installed (``pip install 'attnjax[meteor]'`` and
      ``python -m nltk.downloader wordnet omw-1.4``).
  """
  hypotheses = check_hypotheses(hypotheses)
  per_segment = references_per_segment(reference_streams(references, len(hypotheses)))
  wordnet = _wordnet()
  import nltk  # pylint: disable=g-import-not-at-top
  from nltk.translate.meteor_score import meteor_score  # pylint: disable=g-import-not-at-top
  # NLTK >= 3.6.6 takes token lists, not strings (a string would be scored character by character).
  scores = [meteor_score([ref.split() for ref in refs], hyp.split(), wordnet=wordnet)
            for hyp, refs in zip(hypotheses, per_segment)]
  nrefs = max(len(refs) for refs in per_segment)
  signature = f"nrefs:{nrefs}|case:lc|tok:whitespace|alpha:0.9|beta:3.0|gamma:0.5|nltk:{nltk.__version__}"
  return MetricResult(name="METEOR", score=100.0 * sum(scores) / len(scores), signature=signature,
                      details={"segment_scores": scores})
