"""Evaluation metrics of the attention literature's tasks, computed by the tools that define them.

* :mod:`attnjax.metrics.translation`: corpus BLEU (Papineni et al. 2002), chrF (Popović 2015) and TER (Snover et al.
  2006) through sacreBLEU (Post 2018), on detokenized text, each with sacreBLEU's signature so that a score can be
  reproduced; METEOR (Banerjee & Lavie 2005) through NLTK's ``meteor_score``, an optional extra.
* :mod:`attnjax.metrics.summarization`: ROUGE-N / ROUGE-L / ROUGE-Lsum (Lin 2004) through Google's ``rouge-score``.
* :mod:`attnjax.metrics.squad`: SQuAD exact match and token F1 (Rajpurkar et al. 2016, 2018) with the answer
  normalisation of the official v1.1 / v2.0 evaluation scripts.
* :mod:`attnjax.metrics.files`: scoring hypothesis / reference files; :mod:`attnjax.metrics.cli` is
  ``python -m attnjax.metrics --metric=bleu --hyp=H --ref=R``.
* :mod:`attnjax.metrics.corpus`: :class:`MetricResult`, :class:`MetricUnavailableError` and the reference layout of
  the corpus metrics (one reference per hypothesis, or sacreBLEU's reference streams).

Everything is importable from here: ``from attnjax import metrics; metrics.bleu(hypotheses, references)``.
"""

from attnjax.metrics.cli import main
from attnjax.metrics.corpus import MetricResult, MetricUnavailableError, References
from attnjax.metrics.files import FILE_METRICS, PathLike, read_segments, score_files, score_squad_files
from attnjax.metrics.squad import (best_no_answer_threshold, no_answer_auc, normalize_answer, squad_exact_match,
                                  squad_f1, squad_question_scores, squad_scores)
from attnjax.metrics.summarization import (ROUGE_TYPES, lead, novel_ngrams, repeated_ngrams, rouge, rouge_signature,
                                           split_sentences, summary_statistics)
from attnjax.metrics.translation import (METEOR_INSTALL_HINT, METEOR_STEMMERS, bleu, check_meteor_available,
                                         check_meteor_language, chrf, load_wordnet, meteor, ter)

# The hook through which METEOR loads WordNet (its name from when the metrics were one module): meteor() and
# check_meteor_available() look it up here at call time, so replacing it here (a test's stand-in without synonyms, or a
# loader of a private copy) takes effect.
_load_wordnet = load_wordnet

__all__ = [
    "FILE_METRICS", "METEOR_INSTALL_HINT", "METEOR_STEMMERS", "ROUGE_TYPES", "MetricResult", "MetricUnavailableError",
    "PathLike", "References", "bleu", "check_meteor_available", "check_meteor_language", "chrf", "lead",
    "load_wordnet", "main", "meteor", "no_answer_auc", "normalize_answer", "novel_ngrams", "read_segments",
    "repeated_ngrams", "rouge", "rouge_signature", "score_files", "score_squad_files", "split_sentences",
    "squad_exact_match", "squad_f1", "squad_question_scores", "squad_scores", "best_no_answer_threshold",
    "summary_statistics", "ter",
]
