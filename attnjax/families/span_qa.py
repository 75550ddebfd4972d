"""Extractive question answering (SQuAD 1.1 and 2.0): the answer is a span of the paragraph.

:class:`~attnjax.data.squad.SquadQuestion` records per split; one vocabulary for questions and contexts (SentencePiece
``spm.model`` trained on the training split, or a pre-trained encoder's WordPiece ``vocab.txt`` copied into the
workdir); bucketed batches of question and context ids with the answer's token span; the start / end pointer NLL
(with a no-answer option for 2.0) per question; every question of a split answered and scored with the official
script's exact match and F1.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

from absl import logging
import jax
import jax.numpy as jnp

from attnjax import fs, inference
from attnjax import metrics as metrics_lib
from attnjax.data import squad, tasks
from attnjax.data.spans import SpanBatcher
from attnjax.data.squad_windows import first_questions
from attnjax.data.tokenizer import load_or_train, spm_options
from attnjax.data.wordpiece import WORDPIECE_FILE, wordpiece_in_workdir
from attnjax.families.base import Predictions, TaskFamily, check_positive_int, fail, step_tag
from attnjax.models.span_qa import span_objective
from attnjax.tokens import round_up

SPAN_METRICS = ("exact_match", "f1")
SPAN_BATCH_KEYS = ("question", "question_mask", "context", "context_mask", "start_positions", "end_positions",
                   "is_impossible", "weights")
SPAN_BATCH_NDIMS = {**{key: 2 for key in SPAN_BATCH_KEYS[:4]}, **{key: 1 for key in SPAN_BATCH_KEYS[4:]}}


def packed_length(max_question_len: int, max_context_len: int) -> int:
  """Positions of question [SEP] context [SEP] as the batches hold them: each side padded to a multiple of 8, the
  context side with room for the batcher's EOS (see :class:`attnjax.data.spans.SpanBatcher`); a BERT reader needs one
  more for [CLS], so ``model.max_length`` at least this + 1 (learned positions of the Transformer encoder: this)."""
  return round_up(max_question_len) + round_up(max_context_len + 1) + 2


@dataclasses.dataclass
class SpanPredictions(Predictions):
  """Every question of a split answered: question id -> answer text ("" for no answer), and for SQuAD 2.0 each
  question's probability of having no answer (:func:`no_answer_probability`)."""
  answers: dict[str, str] = dataclasses.field(default_factory=dict)
  no_answer_probs: dict[str, float] | None = None


def span_loss_stats(model, params, batch, rng, deterministic):
  """Sums of :func:`~attnjax.models.span_qa.span_objective`'s loss and of the pointers' NLL over the batch's questions
  (``weights`` 0 drops filler rows; the two agree without a verifier); ``ntokens`` is the number of questions, so the
  step's loss is the mean per question."""
  rngs = None if deterministic else {"dropout": rng}
  outputs = model.apply({"params": params}, batch["question"], batch["context"], batch["question_mask"],
                        batch["context_mask"], deterministic=deterministic, rngs=rngs)
  impossible = batch["is_impossible"] if "no_answer_logit" in outputs else None
  loss, nll = span_objective(outputs, batch["start_positions"], batch["end_positions"], impossible)
  weights = batch["weights"].astype(jnp.float32)
  return {"loss_sum": jnp.sum(loss * weights), "nll_sum": jnp.sum(nll * weights), "ntokens": jnp.sum(weights)}


def score_spans(predictions, examples, names, version: str, *, no_answer_probs=None) -> dict[str, float]:
  """SQuAD EM / F1 (official normalisation, max over gold answers; v2.0 adds the HasAns / NoAns breakdown, and with
  ``no_answer_probs`` the official best-threshold EM / F1 and their thresholds)."""
  scores = metrics_lib.squad_scores(predictions, squad.gold_answers(examples), version=version,
                                    no_answer_probs=no_answer_probs)
  unknown = [name for name in names if name not in scores]
  if unknown:
    raise ValueError(f"unknown span metric(s) {unknown} (available: exact_match, f1)")
  extra = [k for k in scores if k.startswith(("HasAns", "NoAns", "best_")) and not k.endswith("total")]
  return {name: float(scores[name]) for name in list(names) + extra}


CHOOSE = "choose"  # predict_and_score_spans: choose the no-answer threshold on the split itself (a validation split)
THRESHOLD_FILE = "no_answer_threshold.{tag}.json"  # in the workdir: the threshold chosen on validation, per checkpoint


def no_answer_probability(margin: float) -> float:
  """The no-answer probability written for the official v2.0 evaluation: σ(margin), the logistic of how far the null
  score beats the best span (0.5 where they tie: above it the model's own rule says "no answer")."""
  if margin == float("inf"):
    return 1.0
  if margin == float("-inf"):
    return 0.0
  return 1.0 / (1.0 + math.exp(-min(max(margin, -60.0), 60.0)))


def predict_and_score_spans(predictor: inference.SpanPredictor, params, examples, names, version: str, *,
                            max_question_len: int, max_context_len: int, batch_size: int,
                            no_answer_threshold: float | str | None = None) -> SpanPredictions:
  """Answers every question (``examples`` from ``squad.encode_examples(..., drop_unreachable=False)``) and scores
  EM / F1 as the official script does (every question counts); process 0 scores, the others receive its numbers.

  SQuAD 2.0: each question also gets its no-answer probability (:func:`no_answer_probability`), and the answer is ""
  where it exceeds ``no_answer_threshold`` (None: 0.5, the model's own rule "null score above the best span";
  :data:`CHOOSE`: the threshold that maximises F1 on these questions, ``best_f1_thresh_spans``). The scores add the
  official best-threshold EM / F1 of the answers and their thresholds, ``no_answer_threshold``, the one applied, and
  two measures that tell the spans from the no-answer decision: ``HasAns_f1_spans``, the answerable questions' F1
  had every question been answered with its best span, and ``no_answer_auc``
  (:func:`attnjax.metrics.squad.no_answer_auc`), how well the no-answer probabilities rank the unanswerable
  questions above the answerable ones."""
  chosen = inference.predict_spans(predictor, params, examples, max_question_len=max_question_len,
                                   max_context_len=max_context_len, batch_size=batch_size, null_margins=True)
  spans = squad.predictions_from_spans([example for example, _, _ in chosen], [span for _, span, _ in chosen])
  if version != "2.0":
    scores = score_spans(spans, examples, names, version) if jax.process_index() == 0 else {}
    return SpanPredictions(inference.broadcast_json(scores), {}, answers=spans)
  probs = {example.qid: no_answer_probability(margin) for example, _, margin in chosen}
  # the threshold that maximises F1 had every question been answered with its best span: what a validation split
  # chooses (the same on every process: every process has the spans and probabilities)
  spans_only = metrics_lib.squad_scores(spans, squad.gold_answers(examples), version=version, no_answer_probs=probs)
  if no_answer_threshold == CHOOSE:
    threshold = float(spans_only["best_f1_thresh"])
  else:
    threshold = 0.5 if no_answer_threshold is None else float(no_answer_threshold)
  answers = {qid: "" if probs[qid] > threshold else text for qid, text in spans.items()}
  scores = {}
  if jax.process_index() == 0:
    scores = score_spans(answers, examples, names, version, no_answer_probs=probs)
    scores.update(no_answer_threshold=threshold, best_f1_thresh_spans=float(spans_only["best_f1_thresh"]),
                  best_f1_spans=float(spans_only["best_f1"]), HasAns_f1_spans=float(spans_only["HasAns_f1"]))
    auc = metrics_lib.no_answer_auc(probs, squad.gold_answers(examples))
    if auc is not None:
      scores["no_answer_auc"] = auc
  return SpanPredictions(inference.broadcast_json(scores), {}, answers=answers, no_answer_probs=probs)


def question_scores(predictions, examples, version: str) -> dict[str, list]:
  """Question id -> ``[exact match, F1, paragraph]`` (scores in [0, 1]; paragraph: the index of the question's
  context among the split's distinct contexts, in order), for paired comparisons of two readers that resample
  paragraphs, whose questions are not independent."""
  paragraphs: dict[str, int] = {}
  where = {example.qid: paragraphs.setdefault(example.context, len(paragraphs)) for example in examples}
  scores = metrics_lib.squad_question_scores(predictions, squad.gold_answers(examples), version=version)
  return {qid: [em, f1, where[qid]] for qid, (em, f1) in scores.items()}


def _lengths(data_cfg) -> tuple[int, int]:
  return int(data_cfg.get("max_question_len", 64)), int(data_cfg.get("max_context_len", 384))


class ExtractiveQA(TaskFamily):
  """SQuAD-format questions answered by a span of their paragraph."""
  name = "span_qa"
  title = "extractive QA"
  sources = squad.QA_SOURCES
  model_names = ("span_qa",)
  data_keys = {"dir": str, "splits": dict[str, str], "path": str, "heldout": dict[str, float], "split_seed": int,
               "max_chars": int, "tfds_name": str, "tfds_data_dir": str, "tfds_download": bool, "tfds_backend": str,
               "vocab_size": int, "spm_model_type": str, "max_question_len": int, "max_context_len": int,
               "doc_stride": int, "vocab_file": str, "lowercase": bool, "squad_version": str, "train_also": str,
               "paragraph_negatives": float, "question_negatives": float, "unanswerable_repeats": int, "spm_model": str}
  metrics = SPAN_METRICS
  batch_ndims = SPAN_BATCH_NDIMS

  def default_best(self, data_cfg) -> tuple[str, str]:
    # SQuAD 2.0 ranks checkpoints by F1 at the no-answer threshold best for its spans (every question answered with
    # its best span unless its no-answer probability exceeds the threshold): the score the final evaluation gives, its
    # threshold chosen that way on validation. At a fixed 0.5, a reader that answers nothing scores the unanswerable
    # share and can outrank one that ranks its answers well but is calibrated away from 0.5.
    return ("best_f1_spans" if data_cfg.get("squad_version") == "2.0" else "f1"), "max"

  def extra_values(self, data_cfg, names, task=None) -> tuple[str, ...]:
    """SQuAD 2.0 also reports each metric at the official best no-answer threshold (``best_exact``, ``best_f1``), and
    F1 at the threshold best for the spans (``best_f1_spans``, what a validation split chooses; see
    :func:`predict_and_score_spans`): a task read as 2.0, or data that may be (``data.squad_version`` not "1.1")."""
    version = task.version if task is not None else data_cfg.get("squad_version")
    if version == "1.1" or (task is not None and version != "2.0"):
      return ()
    best = tuple(f"best_{'exact' if name == 'exact_match' else name}" for name in names if name in SPAN_METRICS)
    return best + (("best_f1_spans",) if "f1" in names else ())

  def check_config(self, config) -> None:
    for key in ("max_question_len", "max_context_len"):
      check_positive_int(config.data, key, "data")
    if config.train.label_smoothing:
      fail("train.label_smoothing", f"applies to the seq2seq loss; set it to 0 for model.name='span_qa' (got "
           f"{config.train.label_smoothing})")

  # ------------------------------------------------------------------------------------------- data in a workdir

  def load_task(self, data_cfg, workdir: str) -> tasks.SpanTaskData:
    """SQuAD-format data (files or tfds) with a joint SentencePiece vocabulary trained once on the training split's
    questions and (distinct) contexts, or the encoder's WordPiece vocabulary, kept in the workdir."""
    splits = squad.load_qa_task(data_cfg)
    tasks.require_train(splits)

    def texts():  # each context once, although several questions share it
      return [q.question for q in splits["train"]] + list(dict.fromkeys(q.context for q in splits["train"]))

    if data_cfg.get("vocab_file"):  # a pre-trained encoder's WordPiece vocabulary, kept in the workdir
      vocab = wordpiece_in_workdir(data_cfg, workdir)
    else:
      vocab = load_or_train(workdir, "spm", texts, **spm_options(data_cfg))
    version = "2.0" if any(squad.squad_version(qs) == "2.0" for qs in splits.values()) else "1.1"
    self.check_version(data_cfg, version)
    return tasks.SpanTaskData(data_cfg.source, vocab, splits, *_lengths(data_cfg), version,
                              doc_stride=data_cfg.get("doc_stride"))

  def load_vocabularies(self, data_cfg, workdir: str) -> tasks.Vocabularies:
    if data_cfg.get("vocab_file"):
      if not fs.exists(fs.join(workdir, WORDPIECE_FILE)):
        tasks.missing_vocabulary(workdir)
      vocab = wordpiece_in_workdir(data_cfg, workdir)
    else:
      vocab = load_or_train(workdir, "spm", lambda: tasks.missing_vocabulary(workdir), **spm_options(data_cfg))
    return tasks.Vocabularies(vocab, vocab)

  def load_split(self, data_cfg, split: str) -> list[squad.SquadQuestion]:
    """Only ``split``, every question of it in order."""
    return squad.load_qa_task(data_cfg, splits=(split,))[split]

  def check_model(self, task, model) -> None:
    """No-answer support and the learned-position table, which only the data can check."""
    if model.encoder == "bert":
      vocab = task.vocab
      if not hasattr(vocab, "cls_id"):
        raise ValueError("config.model.encoder='bert' reads WordPiece ids: set config.data.vocab_file (the encoder's "
                         "vocab.txt) instead of training a SentencePiece vocabulary")
      if (vocab.cls_id, vocab.sep_id) != (model.cls_id, model.sep_id):
        raise ValueError(f"config.model.cls_id / sep_id = {model.cls_id} / {model.sep_id}, but data.vocab_file has "
                         f"[CLS] {vocab.cls_id} and [SEP] {vocab.sep_id}")
    if task.version == "2.0" and not model.allow_no_answer:
      raise ValueError("config.model.allow_no_answer is False but the data has unanswerable (SQuAD 2.0) questions")
    packed = packed_length(task.max_question_len, task.max_context_len)
    if model.encoder == "bert" and model.max_length < packed + 1:
      raise ValueError(f"config.model.max_length={model.max_length} is too short for [CLS] question [SEP] context "
                       f"[SEP] padded to data.max_question_len={task.max_question_len} and data.max_context_len="
                       f"{task.max_context_len}: it must be at least {packed + 1}")
    if model.encoder == "transformer" and model.positional == "learned" and model.max_length < packed:
      raise ValueError(f"config.model.max_length={model.max_length} is too short for learned positions over [CLS] "
                       f"question [SEP] context padded to data.max_question_len={task.max_question_len} and "
                       f"data.max_context_len={task.max_context_len}: it must be at least {packed}")

  # ------------------------------------------------------------------------------------------------- training

  def batchers(self, task, config, split: str, *, shards: dict):
    common = dict(shards, max_question_len=task.max_question_len, max_context_len=task.max_context_len)
    train = SpanBatcher(task.examples("train", train=True), bucket_boundaries=config.data.bucket_boundaries,
                        shuffle=True, seed=config.seed, **common)
    return train, SpanBatcher(task.examples(split, train=True), shuffle=False, seed=0, **common)

  def loss(self, config, *, tgt_vocab_size: int):
    return span_loss_stats  # train.label_smoothing is for the seq2seq loss (check_config requires 0)

  def tokens(self, batch) -> float:
    return float(batch["question_mask"].sum() + batch["context_mask"].sum())

  def padded_lengths(self, data_cfg) -> tuple[int, int]:
    return round_up(data_cfg.max_question_len), round_up(data_cfg.max_context_len + 1)

  def abstract_batch(self, config, rows: int, first_len: int, second_len: int):
    shapes = {"question": (rows, first_len), "question_mask": (rows, first_len), "context": (rows, second_len),
              "context_mask": (rows, second_len), "start_positions": (rows,), "end_positions": (rows,),
              "is_impossible": (rows,), "weights": (rows,)}
    return shapes, ("question_mask", "context_mask", "is_impossible")

  # ------------------------------------------------------------------------------------ evaluating a run's state

  def predict(self, run, split: str, *, limit: int | None,
              no_answer_threshold: float | str | None = None) -> SpanPredictions:
    """Every question of ``split`` (the first ``limit``); SQuAD 2.0 answers "no answer" above
    ``no_answer_threshold`` (:func:`predict_and_score_spans`)."""
    if "predictor" not in run.cache:
      run.cache["predictor"] = inference.SpanPredictor(run.model, run.mesh)
    task = run.task
    examples = first_questions(task.examples(split, train=False), limit)  # a question is all its windows
    return predict_and_score_spans(run.cache["predictor"], inference.replicate(run.params, run.mesh), examples,
                                   run.metrics, task.version, max_question_len=task.max_question_len,
                                   max_context_len=task.max_context_len, batch_size=run.config.eval.batch_size,
                                   no_answer_threshold=no_answer_threshold)

  # ------------------------------------------------------------------------------------ a checkpoint of a workdir
  # Every question of the split answered: predictions.<split>.<tag>.json (the official format, "" for no answer),
  # question_scores...json and metrics.<split>.json. SQuAD 2.0 adds na_probs.<split>.<tag>.json (the official
  # evaluation's no-answer probabilities) and decides "no answer" with the threshold chosen on the validation split
  # (THRESHOLD_FILE), which evaluating another split first evaluates when it has not been.

  def checkpoint_task(self, config, split: str, examples, vocabularies) -> tasks.SpanTaskData:
    version = "2.0" if squad.squad_version(examples) == "2.0" else "1.1"
    self.check_version(config.data, version)
    return tasks.SpanTaskData(config.data.source, vocabularies.src, {split: examples}, *_lengths(config.data),
                              version, doc_stride=config.data.get("doc_stride"))

  def predict_options(self, workdir: str, run, split: str, loaded, *, names, limit) -> dict[str, Any]:
    if run.task.version != "2.0":
      return {}
    if split == "validation":
      return {"no_answer_threshold": CHOOSE}
    return {"no_answer_threshold": self._validation_threshold(workdir, run.config, loaded, names, limit)}

  def write_files(self, workdir: str, split: str, loaded, run, predictions, *, heatmap: str | None) -> dict[str, Any]:
    tag = step_tag(loaded)
    out_path = fs.join(workdir, f"predictions.{split}.{tag}.json")
    per_question = fs.join(workdir, f"question_scores.{split}.{tag}.json")
    if jax.process_index() == 0:
      fs.write_json(out_path, predictions.answers, indent=1)
      fs.write_json(per_question, question_scores(predictions.answers, run.task.examples(split, train=False),
                                                  run.task.version))
    files: dict[str, Any] = {"predictions": str(out_path), "question_scores": str(per_question)}
    if predictions.no_answer_probs is not None:
      probs_path = fs.join(workdir, f"na_probs.{split}.{tag}.json")
      if jax.process_index() == 0:
        fs.write_json(probs_path, predictions.no_answer_probs, indent=1)
      files.update(no_answer_probs=str(probs_path), no_answer_threshold_from="validation")
      if split == "validation" and jax.process_index() == 0:
        fs.write_json(fs.join(workdir, THRESHOLD_FILE.format(tag=tag)),
                      {"threshold": predictions.scores["no_answer_threshold"], "step": loaded.step,
                       "steps": list(loaded.steps), "split": "validation",
                       "examples": self.num_examples(run.task, split), "limit": run.limit or None,
                       "best_f1_spans": predictions.scores["best_f1_spans"]}, indent=1)
    return files

  def _validation_threshold(self, workdir, config, loaded, names, limit) -> float:
    """The no-answer threshold chosen on the validation split for this checkpoint: read from its file, or chosen
    now (the validation split evaluated, its files written) when there is none, or when the file's was chosen on
    another share of validation (``--limit``) than this evaluation reads."""
    tag = step_tag(loaded)
    path = fs.join(workdir, THRESHOLD_FILE.format(tag=tag))
    chosen_with = fs.read_json(path).get("limit") if fs.exists(path) else "none"
    if chosen_with != (limit or None):
      logging.info("no-answer threshold: %s for %s; evaluating the validation split%s first",
                   "none chosen yet" if chosen_with == "none" else f"the one chosen with limit={chosen_with} does not "
                   f"apply to limit={limit or None}", tag, f" (limit={limit})" if limit else "")
      self.evaluate_checkpoint(workdir, config, "validation", lambda: loaded, names=names, limit=limit, heatmap=None)
    return float(fs.read_json(path)["threshold"])

  def check_version(self, data_cfg, version: str) -> None:
    """A task that declares its SQuAD version (``data.squad_version``) refuses data of the other: 2.0 without an
    unanswerable question, 1.1 with one."""
    declared = data_cfg.get("squad_version")
    where = data_cfg.get("path") or data_cfg.get("tfds_name") or dict(data_cfg.get("splits") or {})
    if declared == "2.0" and version != "2.0":
      raise ValueError(f"config.data.squad_version='2.0' but {where} has no unanswerable question: a SQuAD 1.1 file "
                       "given to a 2.0 task")
    if declared == "1.1" and version == "2.0":
      raise ValueError(f"config.data.squad_version='1.1' but {where} has unanswerable questions: a SQuAD 2.0 file "
                       "given to a 1.1 task")


FAMILY = ExtractiveQA()
