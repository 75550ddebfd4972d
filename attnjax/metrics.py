"""Evaluation metrics of the attention literature's tasks, computed by the tools that define them.

* Translation: corpus BLEU (Papineni et al. 2002), chrF (Popović 2015) and TER (Snover et al. 2006) through sacreBLEU
  (Post 2018), on detokenized text, each with sacreBLEU's signature so that a score can be reproduced.
* Translation / captioning: METEOR (Banerjee & Lavie 2005) through NLTK's ``meteor_score``, an optional extra.
* Summarization: ROUGE-N / ROUGE-L / ROUGE-Lsum (Lin 2004) through Google's ``rouge-score`` package.
* Reading comprehension: SQuAD exact match and token F1 (Rajpurkar et al. 2016, 2018) with the answer normalisation of
  the official v1.1 / v2.0 evaluation scripts, written here since the scripts are not a library.

Reference layout for the corpus metrics (``bleu``, ``chrf``, ``ter``, ``meteor``, ``rouge``): ``references`` is either

* one list of strings, ``references[i]`` being the single reference of ``hypotheses[i]``; or
* a list of reference *streams* as sacreBLEU lays them out, ``references[k][i]`` being the k-th reference of
  ``hypotheses[i]``; every stream has one entry per hypothesis, and with several streams an entry may be ``""`` or
  ``None`` where a segment has fewer references (sacreBLEU's convention for variable reference counts).

From the shell (plain-text files, one segment per line, UTF-8)::

    python -m attnjax.metrics --metric=bleu --hyp=hyp.detok.txt --ref=ref.detok.txt
    python -m attnjax.metrics --metric=rouge --hyp=summaries.txt --ref=gold.txt
    python -m attnjax.metrics --metric=squad --hyp=predictions.json --ref=dev-v1.1.json   # as the official script
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import os
import re
import string
import sys
from collections.abc import Mapping, Sequence
from typing import Any, Union

from absl import logging
from sacrebleu.metrics import BLEU, CHRF, TER

PathLike = Union[str, "os.PathLike[str]"]
References = Union[Sequence[str], Sequence[Sequence[str]]]  # one reference per hypothesis, or reference streams
METEOR_INSTALL_HINT = "pip install 'attnjax[meteor]' && python -m nltk.downloader wordnet omw-1.4"
ROUGE_TYPES = ("rouge1", "rouge2", "rougeL", "rougeLsum")
FILE_METRICS = ("bleu", "chrf", "ter", "meteor", "rouge", "squad")


class MetricUnavailableError(RuntimeError):
  """An optional metric's library or data is not installed; the message says what is missing and how to install it."""


@dataclasses.dataclass(frozen=True)
class MetricResult:
  """One corpus-level score.

  Attributes:
    name: the metric as the tool names it ("BLEU", "chrF2", "TER", "METEOR").
    score: the corpus score on the tool's 0-100 scale (TER: edits per 100 reference words, lower is better).
    signature: the string that pins down how the score was computed (sacreBLEU's signature for BLEU/chrF/TER), to be
      reported next to the score.
    details: the metric's sufficient statistics or parameters (for BLEU: precisions, bp, sys_len, ref_len, ...).
  """
  name: str
  score: float
  signature: str = ""
  details: dict[str, Any] = dataclasses.field(default_factory=dict)

  def __str__(self) -> str:
    text = f"{self.name} = {self.score:.2f}"
    return f"{text} ({self.signature})" if self.signature else text


# ----------------------------------------------------------------------------------------------- argument checking


def _check_hypotheses(hypotheses: Sequence[str]) -> list[str]:
  # A bare string is a sequence too: scoring its characters as segments would give a plausible-looking wrong number.
  if isinstance(hypotheses, str) or not isinstance(hypotheses, Sequence):
    raise TypeError(f"hypotheses must be a list of strings, got {type(hypotheses).__name__}")
  if not hypotheses:
    raise ValueError("hypotheses is empty: a corpus score needs at least one segment")
  for i, hyp in enumerate(hypotheses):
    if not isinstance(hyp, str):
      raise TypeError(f"hypotheses[{i}] must be a string, got {type(hyp).__name__}")
  return list(hypotheses)


def _reference_streams(references: References, num_segments: int) -> list[list[str | None]]:
  """Brings ``references`` to sacreBLEU's list of streams, checking that every stream has one entry per hypothesis."""
  if isinstance(references, str) or not isinstance(references, Sequence):
    raise TypeError(f"references must be a list of strings or a list of reference streams, got "
                    f"{type(references).__name__}")
  if not references:
    raise ValueError("references is empty: give one reference per hypothesis, or a list of reference streams")
  single = all(isinstance(ref, str) for ref in references)
  if single:
    streams = [list(references)]
  elif all(isinstance(stream, Sequence) and not isinstance(stream, str) for stream in references):
    streams = [list(stream) for stream in references]
  else:
    raise TypeError("references must be either a list of strings (one reference per hypothesis) or a list of "
                    "reference streams (lists of strings), not a mixture")
  for k, stream in enumerate(streams):
    where = "references" if single else f"references[{k}]"
    if len(stream) != num_segments:
      raise ValueError(f"{where} has {len(stream)} segments but hypotheses has {num_segments}: each reference stream "
                       f"needs exactly one entry per hypothesis")
    for i, ref in enumerate(stream):
      # None marks a missing reference, which only means something when another stream has one for that segment.
      if not (isinstance(ref, str) or (ref is None and len(streams) > 1)):
        raise TypeError(f"{where}[{i}] must be a string, got {type(ref).__name__}")
  return streams


def _references_per_segment(streams: list[list[str | None]]) -> list[list[str]]:
  """Transposes streams to each segment's references, dropping the ''/None fillers of variable reference counts."""
  per_segment = []
  for refs in zip(*streams):
    kept = [ref for ref in refs if ref] if len(refs) > 1 else [refs[0]]
    per_segment.append(kept or [""])
  return per_segment


# ------------------------------------------------------------------------------------------- sacreBLEU metrics


def _sacrebleu_result(metric, hypotheses, references) -> tuple[Any, str]:
  hypotheses = _check_hypotheses(hypotheses)
  streams = _reference_streams(references, len(hypotheses))
  score = metric.corpus_score(hypotheses, streams)
  return score, str(metric.get_signature())


def bleu(hypotheses: Sequence[str], references: Sequence[str] | Sequence[Sequence[str]], *, tokenize: str = "13a",
         lowercase: bool = False, smooth_method: str = "exp") -> MetricResult:
  """Corpus BLEU (Papineni et al. 2002) as sacreBLEU computes it (Post 2018).

  Args:
    hypotheses: detokenized system outputs, one string per segment. sacreBLEU tokenizes them itself, so feeding it
      already tokenized (or BPE-split) text gives a different, non-comparable score.
    references: detokenized references, one list (single reference) or a list of streams (see the module doc).
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


def chrf(hypotheses: Sequence[str], references: Sequence[str] | Sequence[Sequence[str]], *, char_order: int = 6,
         word_order: int = 0, beta: int = 2, lowercase: bool = False) -> MetricResult:
  """Corpus chrF (Popović 2015), or chrF++ with ``word_order=2`` (Popović 2017), as sacreBLEU computes it.

  Inputs are detokenized text laid out as for :func:`bleu`. ``details`` holds char_order, word_order and beta.
  """
  metric = CHRF(char_order=char_order, word_order=word_order, beta=beta, lowercase=lowercase)
  score, signature = _sacrebleu_result(metric, hypotheses, references)
  details = {"char_order": score.char_order, "word_order": score.word_order, "beta": score.beta}
  return MetricResult(name=score.name, score=float(score.score), signature=signature, details=details)


def ter(hypotheses: Sequence[str], references: Sequence[str] | Sequence[Sequence[str]], *, case_sensitive: bool = False,
        normalized: bool = False, no_punct: bool = False, asian_support: bool = False) -> MetricResult:
  """Corpus Translation Edit Rate (Snover et al. 2006) as sacreBLEU reimplements tercom: lower is better.

  Inputs are detokenized text laid out as for :func:`bleu`. ``score`` is edits per 100 reference words (so it can
  exceed 100); ``details`` holds ``num_edits`` and the average ``ref_length``.
  """
  metric = TER(case_sensitive=case_sensitive, normalized=normalized, no_punct=no_punct, asian_support=asian_support)
  score, signature = _sacrebleu_result(metric, hypotheses, references)
  details = {"num_edits": score.num_edits, "ref_length": score.ref_length}
  return MetricResult(name="TER", score=float(score.score), signature=signature, details=details)


# ---------------------------------------------------------------------------------------------------- METEOR


def _load_wordnet():
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


def check_meteor_available() -> None:
  """Raises :class:`MetricUnavailableError` (with the install command) unless nltk and its WordNet data are installed:
  what a run that will compute METEOR checks before it starts, rather than failing at its first evaluation."""
  _load_wordnet()


def meteor(hypotheses: Sequence[str], references: Sequence[str] | Sequence[Sequence[str]]) -> MetricResult:
  """METEOR (Banerjee & Lavie 2005) through NLTK's ``meteor_score``: the mean of sentence scores, times 100.

  NLTK's is a reimplementation of the original METEOR (exact, Porter-stem and WordNet-synonym matching; alpha 0.9,
  beta 3, gamma 0.5), not the METEOR 1.5 jar, whose scores differ. Segments are split on whitespace and lower-cased,
  so tokenize punctuation beforehand if it should count as separate words. With several references a segment scores
  its best one. References are laid out as for :func:`bleu`.

  Raises:
    MetricUnavailableError: nltk or its WordNet data is not installed (``pip install 'attnjax[meteor]'`` and
      ``python -m nltk.downloader wordnet omw-1.4``).
  """
  hypotheses = _check_hypotheses(hypotheses)
  per_segment = _references_per_segment(_reference_streams(references, len(hypotheses)))
  wordnet = _load_wordnet()
  import nltk  # pylint: disable=g-import-not-at-top
  from nltk.translate.meteor_score import meteor_score  # pylint: disable=g-import-not-at-top
  # NLTK >= 3.6.6 takes token lists, not strings (a string would be scored character by character).
  scores = [meteor_score([ref.split() for ref in refs], hyp.split(), wordnet=wordnet)
            for hyp, refs in zip(hypotheses, per_segment)]
  nrefs = max(len(refs) for refs in per_segment)
  signature = f"nrefs:{nrefs}|case:lc|tok:whitespace|alpha:0.9|beta:3.0|gamma:0.5|nltk:{nltk.__version__}"
  return MetricResult(name="METEOR", score=100.0 * sum(scores) / len(scores), signature=signature,
                      details={"segment_scores": scores})


# ----------------------------------------------------------------------------------------------------- ROUGE


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


def rouge(hypotheses: Sequence[str], references: Sequence[str] | Sequence[Sequence[str]], *,
          types: Sequence[str] = ROUGE_TYPES, use_stemmer: bool = True) -> dict[str, float]:
  """ROUGE (Lin 2004) with Google's ``rouge-score`` package: each type's F1 averaged over segments, times 100.

  ``rouge-score`` lower-cases text and keeps only [a-z0-9] tokens (English only: other scripts score 0) and, with
  ``use_stemmer``, Porter-stems tokens longer than 3 characters, so "running" matches "run".

  ROUGE-Lsum (summary-level LCS, the variant summarization papers report) treats each line as a sentence: give
  summaries with one sentence per line, e.g. through :func:`split_sentences`; a summary without newlines is one
  sentence and its ROUGE-Lsum equals its ROUGE-L. With several references a segment scores its best reference (the
  package's ``score_multi``). References are laid out as for :func:`bleu`.

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
  hypotheses = _check_hypotheses(hypotheses)
  per_segment = _references_per_segment(_reference_streams(references, len(hypotheses)))
  scorer = rouge_scorer.RougeScorer(list(types), use_stemmer=use_stemmer)
  totals = dict.fromkeys(types, 0.0)
  for hyp, refs in zip(hypotheses, per_segment):
    # rouge-score takes (target, prediction): the reverse of the usual (hypothesis, reference) order.
    scores = scorer.score(refs[0], hyp) if len(refs) == 1 else scorer.score_multi(refs, hyp)
    for t in types:
      totals[t] += scores[t].fmeasure
  return {t: 100.0 * total / len(hypotheses) for t, total in totals.items()}


def _rouge_signature(use_stemmer: bool, nrefs: int) -> str:
  import rouge_score  # pylint: disable=g-import-not-at-top
  version = getattr(rouge_score, "__version__", None)
  if version is None:
    from importlib import metadata  # pylint: disable=g-import-not-at-top
    version = metadata.version("rouge-score")
  return f"nrefs:{nrefs}|stem:{'yes' if use_stemmer else 'no'}|lsum:newline|f:mean|rouge-score:{version}"


# ----------------------------------------------------------------------------------------------------- SQuAD

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCTUATION = frozenset(string.punctuation)


def normalize_answer(s: str) -> str:
  """SQuAD's answer normalisation (official v1.1 and v2.0 evaluation scripts, Rajpurkar et al. 2016, 2018).

  Lower-cases, deletes ASCII punctuation (``string.punctuation``), deletes the articles "a", "an", "the" as whole
  words, and collapses runs of whitespace to single spaces: "The  Cat!" -> "cat". The steps run in that order, so
  punctuation removal can join pieces ("the-end" -> "theend").
  """
  s = "".join(ch for ch in s.lower() if ch not in _PUNCTUATION)
  return " ".join(_ARTICLES.sub(" ", s).split())


def _as_golds(ground_truths: str | Sequence[str]) -> list[str]:
  golds = [ground_truths] if isinstance(ground_truths, str) else list(ground_truths)
  if not golds:
    raise ValueError("ground_truths is empty: give at least one gold answer ([''] for an unanswerable SQuAD v2.0 "
                     "question)")
  return golds


def squad_exact_match(prediction: str, ground_truths: str | Sequence[str]) -> float:
  """SQuAD exact match: 1.0 if the normalized prediction equals some normalized gold answer, else 0.0."""
  target = normalize_answer(prediction)
  return float(any(target == normalize_answer(gold) for gold in _as_golds(ground_truths)))


def _token_f1(prediction: str, gold: str, version: str) -> float:
  pred_tokens = normalize_answer(prediction).split()
  gold_tokens = normalize_answer(gold).split()
  # v2.0 has unanswerable questions whose gold is "": an empty prediction must then score 1, where v1.1 scored 0.
  if version == "2.0" and (not pred_tokens or not gold_tokens):
    return float(pred_tokens == gold_tokens)
  num_same = sum((collections.Counter(pred_tokens) & collections.Counter(gold_tokens)).values())
  if num_same == 0:
    return 0.0
  precision = num_same / len(pred_tokens)
  recall = num_same / len(gold_tokens)
  return 2 * precision * recall / (precision + recall)


def _check_version(version: str) -> str:
  if version not in ("1.1", "2.0"):
    raise ValueError(f"version must be '1.1' or '2.0', got {version!r}")
  return version


def squad_f1(prediction: str, ground_truths: str | Sequence[str], *, version: str = "1.1") -> float:
  """SQuAD token-level F1 on normalized answers (bag of tokens), the maximum over the gold answers.

  ``version`` only matters when the prediction or a gold answer normalizes to nothing: v1.1 scores that 0, v2.0 scores
  1 when both are empty (a correct "no answer") and 0 otherwise.
  """
  version = _check_version(version)
  return max(_token_f1(prediction, gold, version) for gold in _as_golds(ground_truths))


def _squad_gold(dataset_or_answers: Mapping[str, Any]) -> dict[str, list[str]]:
  """qid -> gold answer texts, from a SQuAD-format dataset dict or from a qid -> answers mapping."""
  if not isinstance(dataset_or_answers, Mapping):
    raise TypeError(f"dataset_or_answers must be a SQuAD dataset dict or a dict qid -> gold answers, got "
                    f"{type(dataset_or_answers).__name__}")
  if isinstance(dataset_or_answers.get("data"), list):
    gold = {}
    for article in dataset_or_answers["data"]:
      for paragraph in article["paragraphs"]:
        for qa in paragraph["qas"]:
          # An impossible question of the v2.0 dev set has answers == [] (its "plausible_answers" are not gold).
          answers = [] if qa.get("is_impossible", False) else [a["text"] for a in qa["answers"]]
          gold[qa["id"]] = answers
    return gold
  gold = {}
  for qid, answers in dataset_or_answers.items():
    answers = [answers] if isinstance(answers, str) else answers
    if not isinstance(answers, Sequence) or not all(isinstance(a, str) for a in answers):
      raise TypeError(f"dataset_or_answers[{qid!r}] must be a list of gold answer strings, got {answers!r}")
    gold[qid] = list(answers)
  return gold


def squad_scores(predictions: Mapping[str, str], dataset_or_answers: Mapping[str, Any], *, version: str = "1.1",
                 no_answer_probs: Mapping[str, float] | None = None,
                 no_answer_threshold: float = 1.0) -> dict[str, float]:
  """SQuAD v1.1 / v2.0 exact match and F1 over a dataset, by the rules of the official evaluation scripts.

  Args:
    predictions: question id -> predicted answer text ("" to predict "no answer" in v2.0).
    dataset_or_answers: a SQuAD-format dataset dict (``{"data": [{"paragraphs": [{"qas": [{"id", "answers":
      [{"text"}], "is_impossible"?}]}]}]}``) or a dict question id -> list of gold answer strings (an empty list marks
      an unanswerable v2.0 question).
    version: "1.1" (every question has an answer) or "2.0" (unanswerable questions; gold answers that normalize to
      nothing are dropped, and a question left with none has the single gold "", which only "" matches).
    no_answer_probs: v2.0 only: question id -> probability of "no answer"; a question whose probability exceeds
      ``no_answer_threshold`` is scored as a "no answer" prediction whatever its text (missing ids count as 0).
    no_answer_threshold: see ``no_answer_probs``.

  Returns:
    "exact_match", "f1" (percent) and "total"; for v2.0 also "HasAns_exact", "HasAns_f1", "HasAns_total" when some
    question has an answer and "NoAns_exact", "NoAns_f1", "NoAns_total" when some has none (as the official script,
    which leaves out an empty group). A question without a prediction scores 0 and stays in the totals (unlike the
    official v2.0 script, which drops it from "total"); how many were missing is logged as a warning.
  """
  version = _check_version(version)
  if not isinstance(predictions, Mapping):
    raise TypeError(f"predictions must be a dict question id -> answer text, got {type(predictions).__name__}")
  if no_answer_probs is not None and version != "2.0":
    raise ValueError("no_answer_probs only applies to version='2.0' (v1.1 has no unanswerable questions)")
  no_answer_probs = no_answer_probs or {}
  gold = _squad_gold(dataset_or_answers)

  exact, f1, has_answer, missing = {}, {}, {}, []
  for qid, answers in gold.items():
    # As in the official script, a question "has an answer" when its answer list is non-empty, even if every answer
    # normalizes to nothing (e.g. "The") and it is then scored against the gold "".
    has_answer[qid] = bool(answers)
    if version == "2.0":
      answers = [a for a in answers if normalize_answer(a)] or [""]
    elif not answers:
      raise ValueError(f"question {qid!r} has no gold answer, which SQuAD v1.1 does not allow: score with "
                       f"version='2.0' if the data has unanswerable questions")
    if qid not in predictions:
      missing.append(qid)
      exact[qid] = f1[qid] = 0.0
      continue
    prediction = predictions[qid]
    if not isinstance(prediction, str):
      raise TypeError(f"predictions[{qid!r}] must be a string, got {type(prediction).__name__}")
    if no_answer_probs.get(qid, 0.0) > no_answer_threshold:
      exact[qid] = f1[qid] = float(not has_answer[qid])
    else:
      exact[qid] = squad_exact_match(prediction, answers)
      f1[qid] = squad_f1(prediction, answers, version=version)

  if missing:
    logging.warning("SQuAD: %d of %d questions have no prediction and score 0 (first: %s)", len(missing), len(gold),
                    ", ".join(map(repr, missing[:5])))
  unknown = len(set(predictions) - set(gold))
  if unknown:
    logging.warning("SQuAD: %d predictions are for question ids not in the gold data and are ignored", unknown)

  def mean(values, ids):
    return 100.0 * sum(values[q] for q in ids) / len(ids) if ids else 0.0

  ids = list(gold)
  result = {"exact_match": mean(exact, ids), "f1": mean(f1, ids), "total": len(ids)}
  if version == "2.0":
    groups = {"HasAns": [q for q in ids if has_answer[q]], "NoAns": [q for q in ids if not has_answer[q]]}
    for prefix, group in groups.items():
      if group:
        result.update({f"{prefix}_exact": mean(exact, group), f"{prefix}_f1": mean(f1, group),
                       f"{prefix}_total": len(group)})
  return result


# ------------------------------------------------------------------------------------------------------ files


def read_segments(path: PathLike) -> list[str]:
  """The lines of a UTF-8 text file, one segment per line, without their "\\n" / "\\r\\n" ends.

  Raises:
    ValueError: the file is not valid UTF-8; the message names the file, the line and the byte.
  """
  from attnjax import fs  # pylint: disable=g-import-not-at-top
  data = fs.read_bytes(path)
  # Split on b"\n" only: str.splitlines() also breaks at \x0b, \x1c, U+2028 ..., which occur inside real segments and
  # would silently shift every later hypothesis against its reference.
  raw_lines = data.split(b"\n")
  if raw_lines and raw_lines[-1] == b"":
    raw_lines.pop()
  lines = []
  for number, raw in enumerate(raw_lines, start=1):
    try:
      line = raw.decode("utf-8")
    except UnicodeDecodeError as e:
      raise ValueError(f"{os.fspath(path)}, line {number}: invalid UTF-8 (byte 0x{raw[e.start]:02x} at byte "
                       f"{e.start + 1} of the line: {e.reason})") from None
    if line.endswith("\r"):
      line = line[:-1]
    if number == 1 and line.startswith("\ufeff"):
      line = line[1:]  # a byte-order mark is an editor artefact, not part of the first segment
    lines.append(line)
  return lines


def _read_json(path: PathLike, what: str) -> Any:
  import json  # pylint: disable=g-import-not-at-top
  from attnjax.fs import open_binary  # pylint: disable=g-import-not-at-top  (gzip by magic bytes)
  with open_binary(path) as f:
    raw = f.read()
  try:
    return json.loads(raw.decode("utf-8"))
  except UnicodeDecodeError as e:
    raise ValueError(f"{os.fspath(path)}: {what} is not valid UTF-8 (byte {e.start})") from None
  except json.JSONDecodeError as e:
    raise ValueError(f"{os.fspath(path)}: {what} is not valid JSON (line {e.lineno}, column {e.colno}: "
                     f"{e.msg})") from None


def score_squad_files(predictions_path: PathLike, dataset_path: PathLike, *,
                      version: str | None = None) -> dict[str, float]:
  """SQuAD EM / F1 of a predictions file against a dataset file, as the official scripts take them: predictions
  ``{"question id": "answer text", ...}`` (``""`` = no answer), the dataset in the official JSON format (optionally
  gzipped). ``version`` defaults to "2.0" if the dataset has an ``is_impossible`` question, else "1.1". Every question
  of the dataset counts; one without a prediction scores 0 (see :func:`squad_scores`)."""
  predictions = _read_json(predictions_path, "the predictions file")
  dataset = _read_json(dataset_path, "the dataset file")
  if not isinstance(predictions, dict) or not all(isinstance(v, str) for v in predictions.values()):
    raise ValueError(f"{os.fspath(predictions_path)}: predictions must be a JSON object question id -> answer text")
  if not isinstance(dataset, dict) or not isinstance(dataset.get("data"), list):
    raise ValueError(f"{os.fspath(dataset_path)}: not a SQuAD dataset (no top-level 'data' list)")
  if version is None:
    version = "2.0" if any(qa.get("is_impossible", False) for article in dataset["data"]
                           for paragraph in article.get("paragraphs", []) for qa in paragraph.get("qas", [])) else "1.1"
  return squad_scores(predictions, dataset, version=version)


def score_files(metric: str, hypothesis_path: PathLike, reference_path: PathLike | Sequence[PathLike],
                **options) -> MetricResult | dict[str, float]:
  """Scores a hypothesis file against one reference file (or several, one per reference stream).

  ``metric="squad"`` scores a predictions JSON file against a SQuAD dataset file instead
  (:func:`score_squad_files`; ``options`` may give ``version``).

  Files are plain UTF-8 text with one segment per line, aligned by line number. ``metric`` is one of "bleu", "chrf",
  "ter", "meteor", "rouge"; ``options`` go to that function (e.g. ``tokenize="intl"``). Returns what the metric function
  returns. Since a line cannot hold a newline, ROUGE first puts each segment's sentences on separate lines with
  :func:`split_sentences` (split after ". "), so that ROUGE-Lsum is summary-level.

  Raises:
    ValueError: unknown metric, a file that is not valid UTF-8 (names file and line), or files of different lengths
      (names both files and the first line without a counterpart).
  """
  name = metric.lower()
  if name not in FILE_METRICS:
    raise ValueError(f"unknown metric {metric!r}: use one of {', '.join(FILE_METRICS)}")
  if name == "squad":
    if not isinstance(reference_path, (str, os.PathLike)):
      raise ValueError("squad takes one dataset file as the reference")
    return score_squad_files(hypothesis_path, reference_path, **options)
  ref_paths = [reference_path] if isinstance(reference_path, (str, os.PathLike)) else list(reference_path)
  if not ref_paths:
    raise ValueError("reference_path is empty: give at least one reference file")
  hypotheses = read_segments(hypothesis_path)
  streams = []
  for ref_path in ref_paths:
    refs = read_segments(ref_path)
    if len(refs) != len(hypotheses):
      shorter, longer = ((hypothesis_path, ref_path) if len(hypotheses) < len(refs) else (ref_path, hypothesis_path))
      raise ValueError(f"{os.fspath(hypothesis_path)} has {len(hypotheses)} lines but {os.fspath(ref_path)} has "
                       f"{len(refs)}: line {min(len(hypotheses), len(refs)) + 1} of {os.fspath(longer)} has no "
                       f"counterpart in {os.fspath(shorter)}")
    streams.append(refs)
  if not hypotheses:
    raise ValueError(f"{os.fspath(hypothesis_path)} is empty: nothing to score")
  if name == "rouge":
    hypotheses = [split_sentences(h) for h in hypotheses]
    streams = [[split_sentences(r) for r in stream] for stream in streams]
  function = {"bleu": bleu, "chrf": chrf, "ter": ter, "meteor": meteor, "rouge": rouge}[name]
  return function(hypotheses, streams, **options)


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
  parser.add_argument("--squad_version", choices=("1.1", "2.0"), default=None,
                      help="squad: the metric version (default: 2.0 if the dataset has unanswerable questions)")
  args = parser.parse_args(argv)

  options: dict[str, Any] = {}
  if args.metric == "bleu":
    options = {"tokenize": args.tokenize, "lowercase": args.lowercase}
  elif args.metric == "chrf":
    options = {"lowercase": args.lowercase}
  elif args.metric == "rouge":
    options = {"use_stemmer": not args.no_stemmer}
  elif args.metric == "squad":
    if len(args.ref) != 1:
      parser.error("--metric=squad takes one --ref (the dataset file)")
    options = {"version": args.squad_version}
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
    print(_rouge_signature(not args.no_stemmer, len(args.ref)))
  return 0


if __name__ == "__main__":
  sys.exit(main())
