"""SQuAD reading comprehension (Rajpurkar et al. 2016, 2018): JSON loading, answer spans in tokens, and back to text.

Pipeline:

1. :func:`load_squad_json` reads the official JSON (v1.1 or v2.0, optionally gzipped) into :class:`SquadQuestion`
   records; :func:`attnjax.data.tfds_sources.tfds_squad` gives the same records from tensorflow-datasets.
2. :func:`encode_examples` tokenizes questions and contexts with a vocabulary that has ``encode_with_offsets``
   (:class:`attnjax.data.tokenizer.SentencePieceVocab`) and maps the first gold answer's character span to an
   inclusive token span with :func:`char_span_to_token_span`, giving :class:`SquadExample` records.
3. A model predicts a token span per example; :func:`predictions_from_spans` cuts the corresponding substring out of
   the *original* context (through the token offsets, so normalisation and detokenization never alter it) and
   :func:`gold_answers` gives the references for :func:`attnjax.metrics.squad_scores`.

No answer (v2.0 ``is_impossible``): ``start = end =`` :data:`NO_ANSWER` (-1), and a predicted span of ``(-1, -1)``
means "no answer", i.e. the empty string the v2.0 metric expects.

Token spans are *inclusive* ``(tok_start, tok_end)`` pairs; character spans are Python-style ``[char_start,
char_end)``. An answer that starts or ends inside a token gets the whole token: the span is the smallest run of tokens
covering the answer, so its text can be longer than the answer ("1990" inside the token "1990s").
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
from collections.abc import Mapping, Sequence
from typing import Any

from absl import logging

# The config helpers are shared with the text sources, so both read config.data the same way.
from attnjax.data.config_keys import configured_splits, get, in_dir, only_splits
from attnjax.data.files import split_by_source
from attnjax.data.squad_question import SquadQuestion  # re-exported: the record type was defined here
from attnjax.data.tfds_sources import tfds_squad
from attnjax.fs import open_binary

NO_ANSWER = -1
VERSIONS = ("1.1", "2.0")

Offsets = Sequence[tuple[int, int]]


@dataclasses.dataclass(frozen=True)
class SquadExample:
  """A tokenized question with its gold span.

  Attributes:
    qid: the question id.
    question_ids: token ids of the question (no BOS/EOS).
    context_ids: token ids of the context, truncated to ``max_context_tokens`` if that was given.
    offsets: ``offsets[i] = (char_start, char_end)`` of context token ``i`` in ``context``.
    start, end: inclusive token span of the first gold answer, or :data:`NO_ANSWER` for an unanswerable question
      (and, with ``drop_unreachable=False``, for an answer that cannot be reached in the truncated context).
    answers: every gold answer text (the metric takes the best); empty for an unanswerable question.
    context: the original context, from which predicted spans are cut.
    is_impossible: v2.0's unanswerable questions.
  """
  qid: str
  question_ids: list[int]
  context_ids: list[int]
  offsets: list[tuple[int, int]]
  start: int
  end: int
  answers: tuple[str, ...]
  context: str
  is_impossible: bool = False


# ------------------------------------------------------------------------------------------------------ loading


def _require(mapping: Any, key: str, kind: type | tuple[type, ...], where: str, path: str) -> Any:
  if not isinstance(mapping, dict):
    raise ValueError(f"{path}: {where} must be a JSON object, got {type(mapping).__name__}")
  if key not in mapping:
    raise ValueError(f"{path}: {where} has no {key!r} key (keys: {sorted(mapping)})")
  value = mapping[key]
  # bool is an int in Python, but true is never a valid answer_start.
  if not isinstance(value, kind) or (isinstance(value, bool) and kind is int):
    names = kind.__name__ if isinstance(kind, type) else " or ".join(k.__name__ for k in kind)
    raise ValueError(f"{path}: {where}[{key!r}] must be a {names}, got {type(value).__name__}")
  return value


def parse_squad(dataset: Any, path: str = "<dataset>") -> list[SquadQuestion]:
  """The questions of a SQuAD-format dataset dict (``{"version", "data": [{"title", "paragraphs": [{"context",
  "qas": [{"id", "question", "answers": [{"text", "answer_start"}], "is_impossible"?}]}]}]}``).

  v2.0's ``plausible_answers`` are not gold and are ignored; an ``is_impossible`` question keeps no answer. Answers
  whose text occurs in the context but not at ``answer_start`` are kept (their span is ``answer_start`` + the text's
  length) and counted in a warning; an answer whose text is nowhere in its context is an error.

  Raises:
    ValueError: a missing key, a wrong type, a duplicate question id, an answer_start outside the context or an
      answer that is not in it, naming
      ``path`` and the JSON location (``data[3].paragraphs[0].qas[5]``).
  """
  data = _require(dataset, "data", list, "the top level", path)
  questions, seen = [], set()
  misaligned, first_misaligned = 0, None
  for a, article in enumerate(data):
    where_article = f"data[{a}]"
    paragraphs = _require(article, "paragraphs", list, where_article, path)
    title = article.get("title", "") if isinstance(article.get("title", ""), str) else ""
    for p, paragraph in enumerate(paragraphs):
      where_paragraph = f"{where_article}.paragraphs[{p}]"
      context = _require(paragraph, "context", str, where_paragraph, path)
      for q, qa in enumerate(_require(paragraph, "qas", list, where_paragraph, path)):
        where = f"{where_paragraph}.qas[{q}]"
        qid = _require(qa, "id", str, where, path)
        if qid in seen:
          raise ValueError(f"{path}: {where} repeats question id {qid!r}")
        seen.add(qid)
        question = _require(qa, "question", str, where, path)
        impossible = qa.get("is_impossible", False)
        if not isinstance(impossible, bool):
          raise ValueError(f"{path}: {where}['is_impossible'] must be true or false, got {impossible!r}")
        answers = []
        for k, answer in enumerate(_require(qa, "answers", list, where, path)):
          where_answer = f"{where}.answers[{k}]"
          text = _require(answer, "text", str, where_answer, path)
          start = _require(answer, "answer_start", int, where_answer, path)
          if not 0 <= start <= len(context) - len(text):
            raise ValueError(f"{path}: {where_answer}: answer_start {start} with a {len(text)}-character answer is "
                             f"outside the {len(context)}-character context")
          if text not in context:
            raise ValueError(f"{path}: {where_answer}: the answer {text[:60]!r} is not in its context (question id "
                             f"{qid!r})")
          if context[start:start + len(text)] != text:
            misaligned += 1
            first_misaligned = first_misaligned or qid
          answers.append((text, start))
        if not impossible and not answers:
          raise ValueError(f"{path}: {where} (id {qid!r}) has no answer and is not marked is_impossible")
        questions.append(SquadQuestion(qid=qid, question=question, context=context,
                                       answers=() if impossible else tuple(answers), is_impossible=impossible,
                                       title=title))
  if misaligned:
    logging.warning("%s: %d answers do not match the context at their answer_start (first in question %s); their "
                    "span is taken as answer_start + the text's length", path, misaligned, first_misaligned)
  return questions


def load_squad_json(path: str | os.PathLike) -> list[SquadQuestion]:
  """The questions of an official SQuAD v1.1 / v2.0 JSON file (optionally gzipped), see :func:`parse_squad`.

  Raises:
    ValueError: not UTF-8 JSON (names the file, line and column) or malformed (names the file and JSON location).
  """
  path = os.fspath(path)
  with open_binary(path) as f:
    raw = f.read()
  try:
    dataset = json.loads(raw.decode("utf-8"))
  except UnicodeDecodeError as e:
    raise ValueError(f"{path}: invalid UTF-8 at byte {e.start}: {e.reason}") from None
  except json.JSONDecodeError as e:
    raise ValueError(f"{path}: invalid JSON at line {e.lineno}, column {e.colno}: {e.msg}") from None
  return parse_squad(dataset, path)


def squad_version(questions: Sequence[SquadQuestion]) -> str:
  """The metric version for these questions: "2.0" if any is unanswerable, else "1.1"."""
  return "2.0" if any(q.is_impossible for q in questions) else "1.1"


# -------------------------------------------------------------------------------------------------------- spans


def char_span_to_token_span(offsets: Offsets, char_start: int, char_end: int) -> tuple[int, int]:
  """The inclusive token span ``(tok_start, tok_end)`` of the fewest tokens covering characters
  ``[char_start, char_end)``.

  ``offsets[i] = (begin, end)`` is token i's character span (:meth:`SentencePieceVocab.encode_with_offsets`).
  A token overlaps the answer when it shares a character with it; tokens covering no character (``begin == end``)
  never do. An answer that starts or ends inside a token gets that whole token.

  Raises:
    ValueError: an empty span (``char_end <= char_start``) or one that no token overlaps (e.g. past a truncated
      context, or only whitespace that the tokenizer dropped).
  """
  if char_end <= char_start:
    raise ValueError(f"empty character span [{char_start}, {char_end})")
  overlapping = [i for i, (begin, end) in enumerate(offsets)
                 if begin < end and begin < char_end and end > char_start]
  if not overlapping:
    raise ValueError(f"no token overlaps the character span [{char_start}, {char_end}) (the tokens cover "
                     f"[{offsets[0][0] if offsets else 0}, {offsets[-1][1] if offsets else 0}))")
  return overlapping[0], overlapping[-1]


def token_span_to_text(context: str, offsets: Offsets, start: int, end: int) -> str:
  """The substring of the original ``context`` that the inclusive token span covers, stripped of surrounding
  whitespace (a sentencepiece token carries the space before its word); ``""`` for ``(NO_ANSWER, NO_ANSWER)``."""
  if start == NO_ANSWER and end == NO_ANSWER:
    return ""
  if not 0 <= start <= end < len(offsets):
    raise ValueError(f"token span ({start}, {end}) is not inside the {len(offsets)} context tokens (need 0 <= start "
                     f"<= end < {len(offsets)}, or ({NO_ANSWER}, {NO_ANSWER}) for no answer)")
  return context[offsets[start][0]:offsets[end][1]].strip()


# ------------------------------------------------------------------------------------------------------ examples


def encode_examples(questions: Sequence[SquadQuestion], vocab, *, max_context_tokens: int | None = None,
                    max_question_tokens: int | None = None, drop_unreachable: bool = True) -> list[SquadExample]:
  """Tokenizes questions and contexts and maps each question's first gold answer to a token span.

  Args:
    questions: records from :func:`load_squad_json` or :func:`attnjax.data.tfds_sources.tfds_squad`.
    vocab: a vocabulary with ``encode`` and ``encode_with_offsets``
      (:class:`~attnjax.data.tokenizer.SentencePieceVocab`).
    max_context_tokens / max_question_tokens: truncate contexts / questions to this many tokens (None: no limit).
    drop_unreachable: an answerable question whose answer cannot be a token span (it lies past the truncated context,
      or no token overlaps it) is dropped (for training: there is no target). With False it is kept with ``start =
      end = NO_ANSWER`` (for evaluation: every question must count in EM / F1, as in the official script). Either
      way the count is logged.
  """
  examples, unreachable, first_unreachable = [], 0, None
  for q in questions:
    question_ids = vocab.encode(q.question)[:max_question_tokens]
    context_ids, offsets = vocab.encode_with_offsets(q.context)
    start = end = NO_ANSWER
    if not q.is_impossible:
      text, char_start = q.answers[0]
      try:
        # Mapped in the whole context, then checked against the truncation: mapping in the truncated one would
        # silently clip an answer that straddles the cut to its first tokens.
        start, end = char_span_to_token_span(offsets, char_start, char_start + len(text))
        if max_context_tokens is not None and end >= max_context_tokens:
          raise ValueError("answer past the truncated context")
      except ValueError:
        start = end = NO_ANSWER
        unreachable += 1
        first_unreachable = first_unreachable or q.qid
        if drop_unreachable:
          continue
    context_ids, offsets = context_ids[:max_context_tokens], offsets[:max_context_tokens]
    examples.append(SquadExample(qid=q.qid, question_ids=list(question_ids), context_ids=list(context_ids),
                                 offsets=list(offsets), start=start, end=end, answers=tuple(q.answer_texts),
                                 context=q.context, is_impossible=q.is_impossible))
  if unreachable:
    logging.warning("SQuAD: %d of %d answers are not a token span of the%s context (first: question %s); %s",
                    unreachable, len(questions), " truncated" if max_context_tokens else "", first_unreachable,
                    "those questions are dropped" if drop_unreachable else "they get start = end = NO_ANSWER")
  return examples


def predictions_from_spans(examples: Sequence[SquadExample],
                           spans: Sequence[tuple[int, int]] | Mapping[str, tuple[int, int]]) -> dict[str, str]:
  """Question id -> predicted answer text, from one inclusive token span per example (a sequence aligned with
  ``examples``, or a mapping by question id); ``(NO_ANSWER, NO_ANSWER)`` predicts "no answer" (``""``)."""
  if isinstance(spans, Mapping):
    missing = [e.qid for e in examples if e.qid not in spans]
    if missing:
      raise ValueError(f"spans has no prediction for {len(missing)} questions (first: {missing[0]!r})")
    spans = [spans[e.qid] for e in examples]
  elif len(spans) != len(examples):
    raise ValueError(f"got {len(spans)} spans for {len(examples)} examples")
  out = {}
  for example, (start, end) in zip(examples, spans):
    try:
      out[example.qid] = token_span_to_text(example.context, example.offsets, int(start), int(end))
    except ValueError as e:
      raise ValueError(f"question {example.qid!r}: {e}") from None
  return out


def gold_answers(records: Sequence[SquadExample | SquadQuestion]) -> dict[str, list[str]]:
  """Question id -> gold answer texts (empty for unanswerable questions), the references of
  :func:`attnjax.metrics.squad_scores`."""
  out = {}
  for record in records:
    texts = record.answers if isinstance(record, SquadExample) else record.answer_texts
    out[record.qid] = [] if record.is_impossible else list(texts)
  return out


# ------------------------------------------------------------------------------------------------ config sources

QA_SOURCES = ("squad_json", "tfds_squad")
DEFAULT_SQUAD_HELDOUT = {"validation": 0.1, "test": 0.1}
DEFAULT_TFDS_SQUAD_SPLITS = {"train": "train", "validation": "validation"}  # SQuAD publishes no test set


def _article(question: SquadQuestion) -> str:
  return question.title or question.context


def _load_squad_json(data_cfg, only=None, **_) -> dict[str, list[SquadQuestion]]:
  directory = os.fspath(get(data_cfg, "dir", "") or "")
  path, splits = get(data_cfg, "path", None), get(data_cfg, "splits", None)
  if path is None and splits is None:
    raise ValueError("config.data.source='squad_json' needs config.data.path (one file, split by article into "
                     "config.data.heldout) or config.data.splits (split -> file), or both (the splits of other files)")
  if path is None:
    return {split: load_squad_json(in_dir(directory, name))
            for split, name in configured_splits(data_cfg, only=only).items()}
  heldout = dict(get(data_cfg, "heldout", DEFAULT_SQUAD_HELDOUT).items())
  separate = dict(splits.items()) if splits is not None else {}
  given = sorted(set(separate) & ({"train"} | set(heldout)))
  if given:
    raise ValueError(f"config.data.splits names {given}, which config.data.path={path!r} already gives (train and "
                     f"config.data.heldout's {sorted(heldout)}): with a path, splits names only the splits of other "
                     "files")
  questions = load_squad_json(in_dir(directory, os.fspath(path)))
  out = split_by_source(questions, heldout, seed=get(data_cfg, "split_seed", 0), key=_article)
  train_also = get(data_cfg, "train_also", None)
  if train_also is not None and (only is None or "train" in only or separate):  # separate: checked against train
    out["train"] = out["train"] + _articles_not_in(load_squad_json(in_dir(directory, os.fspath(train_also))),
                                                   questions, f"config.data.train_also={train_also!r}")
  for split, name in separate.items():
    if only is None or split in only:
      out[split] = load_squad_json(in_dir(directory, os.fspath(name)))
      check_apart(out[split], out["train"], f"config.data.splits[{split!r}]={name!r}")
  return only_splits(out, only)


def check_apart(evaluated: Sequence[SquadQuestion], train: Sequence[SquadQuestion], where: str) -> None:
  """Raises a ValueError naming ``where`` if an article (title) or a paragraph (context) of ``evaluated`` is in
  ``train``: a split scored on text the model trained on."""
  titles, contexts = {q.title for q in train if q.title}, {q.context for q in train}
  for q in evaluated:
    if (q.title and q.title in titles) or q.context in contexts:
      shared = f"article {q.title!r}" if q.title in titles else f"a paragraph of article {q.title!r}"
      raise ValueError(f"{where} shares {shared} with the train split: a split scored on what the model trained on")


def _articles_not_in(extra: Sequence[SquadQuestion], questions: Sequence[SquadQuestion],
                     where: str) -> list[SquadQuestion]:
  """The questions of ``extra`` whose article is none of ``questions``' (same title, or any paragraph in common), so
  that more training data never brings in a paragraph the task evaluates on; what is left out is logged."""
  titles, contexts = {_article(q) for q in questions}, {q.context for q in questions}
  shared = {_article(q) for q in extra if _article(q) in titles or q.context in contexts}
  kept = [q for q in extra if _article(q) not in shared]
  logging.info("%s: %d questions of %d articles join the train split; %d questions of %d articles that the task's "
               "file also has are left out", where, len(kept), len({_article(q) for q in kept}),
               len(extra) - len(kept), len(shared))
  return kept


def _load_tfds_squad(data_cfg, process_index=None, process_count=None, only=None) -> dict[str, list[SquadQuestion]]:
  name = get(data_cfg, "tfds_name", "squad/v1.1")
  options = {"data_dir": get(data_cfg, "tfds_data_dir", None),
             "download": bool(get(data_cfg, "tfds_download", False)),
             "backend": get(data_cfg, "tfds_backend", "auto"), "process_index": process_index,
             "process_count": process_count}
  return {split: tfds_squad(name, tfds_split, **options)
          for split, tfds_split in configured_splits(data_cfg, DEFAULT_TFDS_SQUAD_SPLITS, only=only).items()}


_QA_LOADERS = {"squad_json": _load_squad_json, "tfds_squad": _load_tfds_squad}


def _negatives_share(data_cfg, key: str) -> float:
  """``config.data.<key>``, a share of the answerable training questions made into unanswerable ones: in [0, 1], and
  only for a SQuAD 2.0 task; ValueError naming the key otherwise."""
  share = float(get(data_cfg, key, 0.0) or 0.0)
  if share and get(data_cfg, "squad_version", None) != "2.0":
    raise ValueError(f"config.data.{key}={share} makes unanswerable questions: it needs a SQuAD 2.0 task "
                     "(config.data.squad_version='2.0')")
  if not 0.0 <= share <= 1.0:
    raise ValueError(f"config.data.{key} must be a share in [0, 1], got {share}")
  return share


def load_qa_task(data_cfg, *, process_index: int | None = None, process_count: int | None = None,
                 splits: Sequence[str] | None = None) -> dict[str, list[SquadQuestion]]:
  """The :class:`SquadQuestion` records of every configured split, read by ``config.data.source``:

  * ``squad_json``: official-format JSON files (optionally gzipped). Either ``splits`` (split -> file, relative to
    ``dir``), or ``path`` (one file, relative to ``dir``) split by a hash of each article's title into ``heldout``
    (``{"validation": 0.1, "test": 0.1}``; the rest is "train") with ``split_seed`` (0): all questions of an article
    land in one split, so no paragraph is both trained and evaluated on. With ``path``, ``train_also`` (a second
    file, relative to ``dir``) adds to train the questions of its articles that ``path`` does not have (by title or
    by any shared paragraph): SQuAD v1.1 dev's 13 articles that v2.0 dev lacks, for a study split from v2.0 dev;
    and ``splits`` may name further splits, each a file of its own (the official protocol: ``path`` the train file,
    ``heldout`` its validation articles, ``splits={"test": <the official dev file>}``), refused if one shares an
    article or a paragraph with train.
  * ``tfds_squad``: ``tfds_name`` ("squad/v1.1" or "squad/v2.0"), ``splits`` (``{"train": "train", "validation":
    "validation"}``), ``tfds_data_dir``, ``tfds_download``, ``tfds_backend`` as for the other tfds sources.

  A SQuAD 2.0 task's train split may gain unanswerable questions made from its answerable ones (never an evaluated
  split): ``paragraph_negatives`` (a share; :func:`paragraph_negatives`), ``question_negatives`` (a share;
  :func:`question_negatives`), ``unanswerable_repeats`` (:func:`unanswerable_repeats`).

  Raises:
    ValueError: an unknown source (lists the valid ones), a missing key (names it) or a malformed file (names the file
      and the JSON location).
  """
  source = get(data_cfg, "source", None)
  if source not in _QA_LOADERS:
    raise ValueError(f"config.data.source must be one of {sorted(_QA_LOADERS)} for a QA task, got {source!r}")
  share, swaps = _negatives_share(data_cfg, "paragraph_negatives"), _negatives_share(data_cfg, "question_negatives")
  repeats = get(data_cfg, "unanswerable_repeats", 1)
  if not isinstance(repeats, int) or isinstance(repeats, bool) or repeats < 1:
    raise ValueError(f"config.data.unanswerable_repeats must be an int >= 1 (1: each once), got {repeats!r}")
  if repeats > 1 and get(data_cfg, "squad_version", None) != "2.0":
    raise ValueError(f"config.data.unanswerable_repeats={repeats} repeats unanswerable questions: it needs a SQuAD "
                     "2.0 task (config.data.squad_version='2.0')")
  out = _QA_LOADERS[source](data_cfg, process_index=process_index, process_count=process_count, only=splits)
  if "train" in out:
    own = out["train"]
    if repeats > 1:
      out["train"] = own + unanswerable_repeats(own, repeats)
    if share:
      out["train"] = out["train"] + paragraph_negatives(own, share, seed=get(data_cfg, "split_seed", 0))
    if swaps:
      out["train"] = out["train"] + question_negatives(own, swaps, seed=get(data_cfg, "split_seed", 0))
  return out


def unanswerable_repeats(questions: Sequence[SquadQuestion], repeats: int) -> list[SquadQuestion]:
  """The further ``repeats - 1`` copies of each unanswerable question of ``questions`` (ids ``<id>/rep<k>``), so
  that a train split where they are scarce (SQuAD 1.1's train questions joined to a SQuAD 2.0 task: 4.3%) shows each
  of them ``repeats`` times an epoch: oversampling, where :func:`paragraph_negatives` makes new, easier ones."""
  made = [dataclasses.replace(q, qid=f"{q.qid}/rep{k}") for k in range(1, repeats) for q in questions
          if q.is_impossible]
  logging.info("unanswerable repeats: %d unanswerable training questions each %d times (%d copies added to %d)",
               len(made) // max(repeats - 1, 1), repeats, len(made), len(questions))
  return made


# A name: capitalised words, hyphen-joined capitalised parts allowed ("Saxe-Coburg"), joined by "of", "the", "de",
# ... inside it ("Tucson Festival of Books"), or an abbreviation of capitals and dots ("U.S."); never part of a
# lower-case compound ("Sony-affiliated"), its possessive "'s" left outside ("New Haven" of "New Haven's"), nor an
# abbreviation's stem ("St" of "St. Barts"). A number: an integer of up to four digits, not part of a longer token
# nor of an ordinal, a decade or a range ("3rd", "1990s", "21-22").
_WORD = r"(?:(?:[A-Z]\.){2,}|[A-Z][\w]*(?:[-'’][A-Z][\w]*)*(?![\w-]|['’](?!s\b)))"
_JOINERS = r"(?:of|the|de|du|la|von|van)"
_NAME = re.compile(rf"(?<![\w-]){_WORD}(?:\s+(?:{_JOINERS}\s+)*{_WORD})*")
_HEAD = re.compile(rf"\S+\s+(?:{_JOINERS}\s+)*")
_STEMS = r"(?:St|Mt|Mr|Mrs|Ms|Dr|Jr|Sr|Gen|Col|Lt|Sgt|Rev|Gov|[A-Z])"
_ABBREVIATION_END = re.compile(rf"(?:\b[A-Z]\.){{2,}}$|\b{_STEMS}\.$")
_STEM_END = re.compile(rf"(?:^|\s+(?:{_JOINERS}\s+)*){_STEMS}$")
_NUMBER = re.compile(r"(?<![\w.,\-–])\d{1,4}(?![\w.,\-–]?\d|[^\W\d_])")
_CALENDAR = frozenset("January February March April May June July August September October November December Monday "
                      "Tuesday Wednesday Thursday Friday Saturday Sunday".split())
_LATEST_YEAR = 2016  # the year SQuAD's questions were written: a swapped year is never later


def _names(text: str):
  """``(start, end)`` of each name in ``text``. A sentence's (or a quotation's) first word is capitalised whatever it
  is (a full stop after an abbreviation, "U.S." or "St.", ends none), so a name found there loses its first word
  ("Which Franklin" is "Franklin", "The Treaty of Paris" is "Treaty of Paris", a lone "When" is none)."""
  for match in _NAME.finditer(text):
    start, end = match.span()
    before = text[:start].rstrip()
    if not before or (before[-1] in ".!?\"“”:;\n" and not _ABBREVIATION_END.search(before)):
      head = _HEAD.match(text, start, end)
      if head is None or head.end() >= end:
        continue
      start = head.end()
    elif text[start:end].startswith(("The ", "A ", "An ")):  # inside a sentence, a capital article starts a title
      start = _HEAD.match(text, start, end).end()
    if text.startswith(".", end):  # an abbreviation's stem ("St" of "St. Barts") is not part of the name
      stem = _STEM_END.search(text[start:end])
      if stem is not None:
        end = start + stem.start()
    if start < end:
      yield start, end


def _contains(text: str, phrase: str) -> bool:
  """Whether ``phrase`` occurs in ``text`` as whole words."""
  return re.search(rf"(?<!\w){re.escape(phrase)}(?!\w)", text) is not None


def _name_kind(name: str) -> tuple[str, int]:
  """What a name may be swapped for: a month or weekday for one of those, else a name of as many words."""
  return ("calendar", 1) if name in _CALENDAR else ("name", len(name.split()))


def question_negatives(questions: Sequence[SquadQuestion], share: float, seed: int = 0) -> list[SquadQuestion]:
  """Unanswerable questions made from answerable ones on their own paragraph, the way SQuAD 2.0's writers made most
  of theirs (Rajpurkar et al. 2018: entity swaps, number swaps): each answerable question, with probability ``share``
  (drawn with ``seed``), has one name or number that its paragraph contains swapped for one the paragraph does not
  contain (a name of as many words from another article's paragraphs, a month or weekday for another; a year for
  another within 30 of it and not after 2016, another number for one of as many digits), and is asked of the same
  paragraph as unanswerable. What is swapped is never the question's first word, nor inside one of its answers'
  texts. Unlike :func:`paragraph_negatives` the question still overlaps its paragraph word for word but the one thing
  it asks about, so the null score must read the question, not the paragraph's topic. The new question's id is the
  original's with ``/swap`` appended; a question with nothing to swap makes none.

  Swapping a word does not always make a question unanswerable (an alias the paragraph does not spell, a number
  the question only restates): these are noisier than written ones, which is why they join the written ones rather
  than replace them."""
  import numpy as np  # pylint: disable=g-import-not-at-top
  rng = np.random.default_rng([seed, 1])  # a stream of its own: not paragraph_negatives' draws
  # names by kind, each with the articles whose paragraphs hold it
  pool: dict[tuple[str, int], dict[str, set[str]]] = {}
  for context, article in {q.context: _article(q) for q in questions}.items():
    for start, end in _names(context):
      pool.setdefault(_name_kind(context[start:end]), {}).setdefault(context[start:end], set()).add(article)
  names = {kind: sorted(found) for kind, found in pool.items()}

  def absent(context: str, phrase: str) -> bool:
    return phrase not in context or not _contains(context, phrase)

  made, nothing = [], 0
  for q in questions:
    if q.is_impossible or not q.answers or rng.random() >= share:
      continue
    spans = [(a, b, "name") for a, b in _names(q.question)]
    spans += [(m.start(), m.end(), "number") for m in _NUMBER.finditer(q.question) if m.start() > 0]
    spans = [(a, b, kind) for a, b, kind in spans if not absent(q.context, q.question[a:b])
             and not any(q.question[a:b] in text for text in q.answer_texts)]
    new = None
    for i in rng.permutation(len(spans)):
      a, b, kind = spans[int(i)]
      old = q.question[a:b]
      if kind == "number":
        value = int(old)
        if len(old) == 4 and 1000 <= value <= _LATEST_YEAR:
          draws = rng.permutation(np.arange(value - 30, min(value + 30, _LATEST_YEAR) + 1))
        elif len(old) <= 2:  # every other number of as many digits, in a random order
          draws = rng.permutation(np.arange(10 ** (len(old) - 1) if len(old) > 1 else 0, 10 ** len(old)))
        else:
          draws = rng.integers(10 ** (len(old) - 1), 10 ** len(old), size=20)
        draws = [str(v) for v in draws]
      else:
        candidates = names.get(_name_kind(old), [])
        draws = [candidates[int(k)] for k in rng.integers(len(candidates), size=20)] if candidates else []
        draws = [c for c in draws if _article(q) not in pool[_name_kind(old)][c]]
      pick = next((c for c in draws if c != old and absent(q.context, c)), None)
      if pick is not None:
        new = q.question[:a] + pick + q.question[b:]
        break
    if new is None:
      nothing += 1
      continue
    made.append(SquadQuestion(qid=f"{q.qid}/swap", question=new, context=q.context, answers=(), is_impossible=True,
                              title=q.title))
  logging.info("question negatives: %d unanswerable questions made from %d answerable ones by a swapped name or "
               "number (share %.2f); %d drawn had nothing to swap", len(made),
               sum(not q.is_impossible for q in questions), share, nothing)
  return made


def paragraph_negatives(questions: Sequence[SquadQuestion], share: float, seed: int = 0) -> list[SquadQuestion]:
  """Unanswerable questions made from answerable ones: each answerable question, with probability ``share`` (drawn
  with ``seed``), asked again of another paragraph of its article, one that contains none of its answers' texts, as
  Clark & Gardner (2018) train a reader on the paragraphs of a document that lack the answer. The new question's id
  is the original's with ``/neg`` appended; a question whose article has no such paragraph makes none. Where
  unanswerable questions are scarce (SQuAD 1.1's train questions joined to a SQuAD 2.0 task), they give the null
  score examples to learn from; they are easier than SQuAD 2.0's own (written to look answerable)."""
  import numpy as np  # pylint: disable=g-import-not-at-top
  by_article: dict[str, list[str]] = {}
  for q in questions:
    paragraphs = by_article.setdefault(_article(q), [])
    if q.context not in paragraphs:
      paragraphs.append(q.context)
  rng = np.random.default_rng(seed)
  made, without = [], 0
  for q in questions:
    if q.is_impossible or not q.answers or rng.random() >= share:
      continue
    others = [c for c in by_article[_article(q)] if c != q.context and not any(t in c for t in q.answer_texts)]
    if not others:
      without += 1
      continue
    context = others[int(rng.integers(len(others)))]
    made.append(SquadQuestion(qid=f"{q.qid}/neg", question=q.question, context=context, answers=(),
                              is_impossible=True, title=q.title))
  logging.info("paragraph negatives: %d unanswerable questions made from %d answerable ones (share %.2f); %d drawn "
               "had no other paragraph without their answer", len(made), sum(not q.is_impossible for q in questions),
               share, without)
  return made

