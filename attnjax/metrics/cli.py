"""The command-line scorer: plain-text files, one segment per line (UTF-8), or SQuAD JSON files::

    python -m attnjax.metrics --metric=bleu --hyp=hyp.detok.txt --ref=ref.detok.txt
    python -m attnjax.metrics --metric=bleu --hyp=hyp.detok.txt --ref=ref1.txt --ref=ref2.txt   # two references
    python -m attnjax.metrics --metric=rouge --hyp=summaries.txt --ref=gold.txt
    python -m attnjax.metrics --metric=meteor --language=de --hyp=hyp.detok.txt --ref=ref.detok.txt
    python -m attnjax.metrics --metric=squad --hyp=predictions.json --ref=dev-v1.1.json   # as the official script

BLEU, chrF and TER print sacreBLEU's signature next to the score, ROUGE a signature of its settings, so that a reported
number can be reproduced. Hypotheses and references are detokenized text (sacreBLEU tokenizes them itself).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any

from attnjax.metrics.corpus import MetricResult, MetricUnavailableError
from attnjax.metrics.files import FILE_METRICS, score_files
from attnjax.metrics.summarization import rouge_signature


def main(argv: Sequence[str] | None = None) -> int:
  """``python -m attnjax.metrics --metric=bleu --hyp=FILE --ref=FILE [--ref=FILE2 ...]``: prints score and signature."""
  parser = argparse.ArgumentParser(prog="python -m attnjax.metrics", description=__doc__,
                                   formatter_class=argparse.RawDescriptionHelpFormatter)
  parser.add_argument("--metric", required=True, choices=FILE_METRICS)
  parser.add_argument("--hyp", required=True, help="hypothesis file, one detokenized segment per line (UTF-8); for "
                      "squad, the predictions JSON (question id -> answer)")
  parser.add_argument("--ref", required=True, action="append",
                      help="reference file aligned with --hyp; repeat for several references; for squad, the "
                      "dataset JSON")
  parser.add_argument("--tokenize", default="13a", help="sacreBLEU tokenizer (bleu only)")
  parser.add_argument("--lowercase", action="store_true", help="case-insensitive score (bleu, chrf)")
  parser.add_argument("--no_stemmer", action="store_true", help="rouge without the Porter stemmer")
  parser.add_argument("--language", default=None, help="meteor (required): the target language, an ISO 639-1 code "
                      "(en: Porter stems and WordNet synonyms; de, fr, ...: Snowball stems)")
  parser.add_argument("--squad_version", choices=("1.1", "2.0"), default=None,
                      help="squad: the metric version (default: 2.0 if the dataset has unanswerable questions)")
  parser.add_argument("--no_answer_probs", default=None,
                      help="squad v2.0: the no-answer probability file (question id -> p): adds the best-threshold "
                      "EM / F1 and their thresholds, as the official evaluation")
  parser.add_argument("--allow_missing", action="store_true",
                      help="squad: score questions without a prediction as 0 instead of refusing the file")
  args = parser.parse_args(argv)

  options: dict[str, Any] = {}
  if args.metric == "bleu":
    options = {"tokenize": args.tokenize, "lowercase": args.lowercase}
  elif args.metric == "chrf":
    options = {"lowercase": args.lowercase}
  elif args.metric == "rouge":
    options = {"use_stemmer": not args.no_stemmer}
  elif args.metric == "meteor":
    if args.language is None:
      parser.error("--metric=meteor needs --language (the target language: en, de, fr, ...)")
    options = {"language": args.language}
  elif args.metric == "squad":
    if len(args.ref) != 1:
      parser.error("--metric=squad takes one --ref (the dataset file)")
    options = {"version": args.squad_version, "no_answer_probs_path": args.no_answer_probs,
               "allow_missing": args.allow_missing}
  try:
    result = score_files(args.metric, args.hyp, args.ref[0] if args.metric == "squad" else args.ref, **options)
  except (OSError, ValueError, MetricUnavailableError) as e:
    print(f"error: {e}", file=sys.stderr)
    return 1
  if isinstance(result, MetricResult):
    print(result)
  elif args.metric == "squad":
    print(" ".join(f"{key} = {value:.2f}" if isinstance(value, float) else f"{key} = {value}"
                   for key, value in result.items()))
  else:
    for rouge_type, value in result.items():
      print(f"{rouge_type} = {value:.2f}")
    print(rouge_signature(not args.no_stemmer, len(args.ref)))
  return 0
