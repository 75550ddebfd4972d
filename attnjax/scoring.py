"""Scoring a split: sharded decoding (:mod:`attnjax.inference`) or span prediction of every example, then the task's
metrics; shared by the training loop's validation and ``python -m attnjax.evaluate`` (:func:`evaluate_checkpoint`).

Process 0 alone scores; the other processes receive its numbers, so every host takes the same decisions (best
checkpoint, early stop).
"""

from __future__ import annotations

import dataclasses
import math
import time
from typing import Any

import numpy as np

import jax

from attnjax import config as config_lib
from attnjax import fs, inference
from attnjax import metrics as metrics_lib
from attnjax.data import squad, tasks


@dataclasses.dataclass
class Predictions:
  """What a split's evaluation produced, in the split's order (one entry per example)."""
  scores: dict[str, float]
  signatures: dict[str, str]
  hypotheses: list[str] | None = None  # seq2seq
  references: list[str] | None = None
  sources: list[str] | None = None
  attention: list[np.ndarray] | None = None
  answers: dict[str, str] | None = None  # extractive QA: question id -> answer text


def decode_and_score(decoder: inference.Decoder, params, vocabularies, pairs, names, *, max_src_len: int,
                     batch_size: int, meteor_language: str | None = None) -> Predictions:
  """Decodes the source of every ``(source, reference)`` pair and scores the hypotheses against the references.

  ``params`` replicated (:func:`attnjax.inference.replicate`). The scores include ``truncated_sources`` and
  ``empty_sources``: how many sources were cut to ``max_src_len`` tokens for decoding, and how many decoded to "";
  ``decode_seconds``, the search's wall time (process 0's); for ROUGE, See et al.'s repetition and novel n-grams.
  """
  sources, references = [s for s, _ in pairs], [t for _, t in pairs]
  start = time.perf_counter()
  out = inference.translate_texts(decoder, params, vocabularies.src, vocabularies.tgt, sources,
                                  max_src_len=max_src_len, batch_size=batch_size)
  decode_seconds = time.perf_counter() - start  # wall time of the search over the split, compilation included
  scores, signatures = {}, {}
  if jax.process_index() == 0:
    scores, signatures = score(out.hypotheses, references, names, meteor_language=meteor_language)
    scores["decode_seconds"] = decode_seconds
    if "rouge" in names:  # a summarizer's repetition and abstraction (See et al. 2017), cheap beside decoding
      scores.update(metrics_lib.summary_statistics(out.hypotheses, sources))
  scores, signatures = inference.broadcast_json([scores, signatures])
  scores.update(truncated_sources=out.truncated_sources, empty_sources=out.empty_sources)
  return Predictions(scores, signatures, out.hypotheses, references, sources, out.attention)


def predict_and_score_spans(predictor: inference.SpanPredictor, params, examples, names, version: str, *,
                            max_question_len: int, max_context_len: int, batch_size: int) -> Predictions:
  """Answers every question (``examples`` from ``squad.encode_examples(..., drop_unreachable=False)``) and scores
  EM / F1 as the official script does (every question counts)."""
  chosen = inference.predict_spans(predictor, params, examples, max_question_len=max_question_len,
                                   max_context_len=max_context_len, batch_size=batch_size)
  answers = squad.predictions_from_spans([example for example, _ in chosen], [span for _, span in chosen])
  scores = score_spans(answers, examples, names, version) if jax.process_index() == 0 else {}
  return Predictions(inference.broadcast_json(scores), {}, answers=answers)


def question_scores(predictions, examples, version: str) -> dict[str, list]:
  """Question id -> ``[exact match, F1, paragraph]`` (scores in [0, 1]; paragraph: the index of the question's
  context among the split's distinct contexts, in order), for paired comparisons of two readers that resample
  paragraphs, whose questions are not independent."""
  paragraphs: dict[str, int] = {}
  where = {example.qid: paragraphs.setdefault(example.context, len(paragraphs)) for example in examples}
  scores = metrics_lib.squad_question_scores(predictions, squad.gold_answers(examples), version=version)
  return {qid: [em, f1, where[qid]] for qid, (em, f1) in scores.items()}


def score_spans(predictions, examples, names, version: str) -> dict[str, float]:
  """SQuAD EM / F1 (official normalisation, max over gold answers; v2.0 adds the HasAns / NoAns breakdown)."""
  scores = metrics_lib.squad_scores(predictions, squad.gold_answers(examples), version=version)
  unknown = [name for name in names if name not in scores]
  if unknown:
    raise ValueError(f"unknown span metric(s) {unknown} (available: exact_match, f1)")
  extra = [k for k in scores if k.startswith(("HasAns", "NoAns")) and not k.endswith("total")]
  return {name: float(scores[name]) for name in list(names) + extra}


def score(hypotheses, references, names, *,
          meteor_language: str | None = None) -> tuple[dict[str, float], dict[str, str]]:
  """Metric values (percentages) and sacreBLEU / METEOR signatures for the names in ``names``; METEOR stems (and for
  English matches synonyms) in ``meteor_language`` (:func:`attnjax.config.meteor_language`), required with it."""
  if "meteor" in names and meteor_language is None:
    raise ValueError("meteor_language: METEOR needs the target language (attnjax.config.meteor_language(config))")
  values, signatures = {}, {}
  for name in names:
    if name == "exact_match":
      values[name] = 100.0 * float(np.mean([h == r for h, r in zip(hypotheses, references)]))
    elif name in ("bleu", "chrf", "ter", "meteor"):
      options = {"language": meteor_language} if name == "meteor" else {}
      result = getattr(metrics_lib, name)(hypotheses, references, **options)
      values[name], signatures[name] = float(result.score), result.signature
    elif name == "rouge":  # ROUGE-1/2/L/Lsum F1 with stemming, as the summarization papers report
      # ROUGE-Lsum is summary-level: both sides one sentence a line (metrics.split_sentences documents the rule)
      values.update(metrics_lib.rouge([metrics_lib.split_sentences(h) for h in hypotheses],
                                      [metrics_lib.split_sentences(r) for r in references]))
    else:
      raise ValueError(f"unknown decoding metric {name!r}")
  return values, signatures


# ------------------------------------------------------------------------------ a checkpoint of a workdir


def _apply_overrides(config, eval_overrides: dict | None, metrics: tuple[str, ...] | None) -> None:
  overrides = dict(eval_overrides or {})
  if metrics is not None:
    overrides["metrics"] = tuple(metrics)
  for key, value in overrides.items():
    if key not in config.eval:
      raise ValueError(f"--eval {key}=...: unknown eval key (known: {sorted(config.eval.keys())})")
    config.eval[key] = tuple(value) if isinstance(value, list) else value


def _meteor_language(config, names) -> str | None:
  return config_lib.meteor_language(config) if "meteor" in names else None


def _task_metrics(config) -> tuple[str, ...]:
  if config.eval.metrics:
    return tuple(config.eval.metrics)
  return tasks.default_metrics(config.data)


def evaluate_checkpoint(workdir: str, *, split: str = "test", checkpoint: str = "best",
                        average_last: int | None = None, data_dir: str | None = None, limit: int | None = None,
                        heatmap: str | None = None, eval_overrides: dict | None = None,
                        metrics: tuple[str, ...] | None = None) -> dict[str, Any]:
  """Scores ``split`` with the parameters of ``checkpoint`` (or the average of the last ``average_last``).

  Writes into the workdir (process 0): ``hypotheses.<split>.step<N>.txt`` (one detokenized output per example, in
  order) for seq2seq tasks, ``predictions.<split>.step<N>.json`` (question id -> answer, the official SQuAD format)
  for extractive QA (``.avg<K>`` is added to the name for averaged parameters), and the returned result as
  ``metrics.<split>.json`` (what ``python -m attnjax.report`` reads). Returns the scores, the number of examples,
  the step(s), signatures and paths.
  """
  config = config_lib.load_config(workdir)
  _apply_overrides(config, eval_overrides, metrics)
  config.eval.split = split
  config_lib.validate(config)  # the overrides too, naming the key
  names = _task_metrics(config)
  if "meteor" in names:
    metrics_lib.check_meteor_available(_meteor_language(config, names))
  if config.data.source in ("mlm_jsonl", "lm_jsonl"):
    if heatmap:
      raise ValueError("heatmap: attention heatmaps are drawn for sequence-to-sequence models, not for "
                       f"model.name={config.model.name!r}")
    tasks.resolve_data_dir(config.data, workdir, data_dir)
    return _evaluate_rows(workdir, config, split, checkpoint, average_last, limit)
  qa = config.data.source in squad.QA_SOURCES
  if heatmap and qa:
    raise ValueError("heatmap: attention heatmaps are drawn for sequence-to-sequence models, not for "
                     f"model.name={config.model.name!r}")
  tasks.resolve_data_dir(config.data, workdir, data_dir)
  examples = tasks.load_split(config.data, split)  # before the model: a missing file fails fast
  if limit:
    examples = examples[:limit]
  loaded = inference.load_workdir(workdir, checkpoint=checkpoint, average_last=average_last, config=config)
  tag = f"step{loaded.step}" + (f".avg{len(loaded.steps)}" if len(loaded.steps) > 1 else "")
  result: dict[str, Any] = {"step": loaded.step, "steps": list(loaded.steps), "split": split,
                            "examples": len(examples)}
  e = config.eval
  if qa:
    vocab = loaded.vocabularies.src
    q_len, c_len = int(config.data.get("max_question_len", 64)), int(config.data.get("max_context_len", 384))
    encoded = tasks.encode_questions(examples, vocab, max_context_len=c_len, max_question_len=q_len,
                                     doc_stride=config.data.get("doc_stride"), train=False)
    version = "2.0" if squad.squad_version(examples) == "2.0" else "1.1"
    predictions = predict_and_score_spans(
        inference.SpanPredictor(loaded.model, loaded.mesh), loaded.params, encoded, names, version,
        max_question_len=q_len, max_context_len=c_len, batch_size=e.batch_size)
    out_path = fs.join(workdir, f"predictions.{split}.{tag}.json")
    per_question = fs.join(workdir, f"question_scores.{split}.{tag}.json")
    if jax.process_index() == 0:
      fs.write_json(out_path, predictions.answers, indent=1)
      fs.write_json(per_question, question_scores(predictions.answers, encoded, version))
    result.update(predictions.scores, predictions=str(out_path), question_scores=str(per_question))
    _write_metrics(workdir, split, result)
    return result
  decoder = inference.decoder_for(loaded.model, loaded.mesh, e, vocab_size=loaded.vocabularies.tgt.size)
  predictions = decode_and_score(decoder, loaded.params, loaded.vocabularies, examples, names,
                                            max_src_len=config.data.max_src_len, batch_size=e.batch_size,
                                            meteor_language=_meteor_language(config, names))
  out_path = fs.join(workdir, f"hypotheses.{split}.{tag}.txt")
  if jax.process_index() == 0:
    fs.write_text(out_path, "".join(h + "\n" for h in predictions.hypotheses))
  result.update(predictions.scores, signatures=predictions.signatures, hypotheses=str(out_path))
  if heatmap and examples and jax.process_index() == 0:
    result["heatmap"] = _heatmap(loaded, config, examples[0][0], heatmap)
  _write_metrics(workdir, split, result)
  return result


def _write_metrics(workdir: str, split: str, result: dict) -> None:
  if jax.process_index() == 0:
    fs.write_json(fs.join(workdir, f"metrics.{split}.json"), result, indent=1, sort_keys=True)


def _heatmap(loaded, config, source: str, path: str) -> str | None:
  """The cross-attention of the first example's best hypothesis, drawn as a PNG (decoded alone, with attention)."""
  from attnjax.visualize import attention_heatmap  # pylint: disable=g-import-not-at-top
  decoder = inference.decoder_for(loaded.model, loaded.mesh, config.eval, vocab_size=loaded.vocabularies.tgt.size,
                                return_attention=True)
  out = inference.translate_texts(decoder, loaded.params, loaded.vocabularies.src, loaded.vocabularies.tgt, [source],
                                  max_src_len=config.data.max_src_len, batch_size=1)
  if out.attention is None or not out.attention[0].size:
    return None
  hypothesis = out.hypotheses[0]
  src_vocab, tgt_vocab = loaded.vocabularies.src, loaded.vocabularies.tgt
  src_tokens = _pieces(src_vocab, source)[:out.attention[0].shape[1]]
  out_tokens = (_pieces(tgt_vocab, hypothesis) + ["</s>"])[:out.attention[0].shape[0]]
  weights = out.attention[0][:len(out_tokens), :len(src_tokens)]
  return attention_heatmap(weights, src_tokens, out_tokens, path, title=f"{source} → {hypothesis}")


def _pieces(vocab, text: str) -> list[str]:
  """The token strings of ``text`` (characters for a character vocabulary, pieces for sentencepiece)."""
  if hasattr(vocab, "id_to_piece"):
    return [vocab.id_to_piece(i) for i in vocab.encode(text)]
  return list(text)


def _evaluate_rows(workdir, config, split, checkpoint, average_last, limit) -> dict[str, Any]:
  """A (masked) language model on every packed row of ``split`` (the first ``limit`` rows): masked-LM loss and
  accuracy, each row masked as at every evaluation; or loss per token and bits per byte."""
  from attnjax.data import tasks as task_lib  # pylint: disable=g-import-not-at-top
  trained = int(config.data.get("seq_len", 0) or 0)
  if config.data.source == "lm_jsonl" and config.eval.get("seq_len"):
    with config.data.unlocked():
      config.data.seq_len = int(config.eval.seq_len)
  task = task_lib.load_task(config.data, workdir)
  rows = task.rows(split)
  if limit:  # pylint: disable=protected-access
    task._rows[split] = (tuple(a[:limit] for a in rows) if isinstance(rows, tuple)
                         else {k: a[:limit] for k, a in rows.items()})
  loaded = inference.load_workdir(workdir, checkpoint=checkpoint, average_last=average_last, config=config)
  model = loaded.model
  if task.kind == "mlm":
    from attnjax.models.bert import mlm_statistics  # pylint: disable=g-import-not-at-top
    apply = lambda p, b: mlm_statistics(model.apply({"params": p}, b["input_ids"], b["segment_ids"], b["positions"],
                                                    b["mlm_positions"]), b["mlm_ids"], b["mlm_weights"])  # noqa: E731
  else:
    edges = _position_edges(trained, task.seq_len)

    def apply(p, b):
      logits = model.apply({"params": p}, b["inputs"], b["segment_ids"], b["positions"])
      return _lm_statistics_by_position(logits, b, edges)
  statistics = jax.jit(apply)
  totals: dict[str, float] = {}
  batch_size = int(config.data.batch_size or config.eval.batch_size)
  for batch in task.batcher(split, shuffle=False, seed=0, batch_size=batch_size).iterate_epoch(0):
    for key, value in jax.device_get(statistics(loaded.params, batch)).items():
      totals[key] = totals.get(key, 0.0) + float(value)
  n = max(totals.get("ntokens", 0.0), 1.0)
  first = task.rows(split)
  result = {"step": loaded.step, "steps": list(loaded.steps), "split": split,
            "examples": int(len(first[0] if isinstance(first, tuple) else first["inputs"]))}
  if task.kind == "mlm":
    result.update(mlm_loss=totals.get("loss_sum", 0.0) / n, mlm_accuracy=totals.get("correct_sum", 0.0) / n,
                  mlm_predictions=totals.get("ntokens", 0.0))
    # beside the scores, what token frequencies alone reach on the same rows (no model): the report's baseline
    result.update({f"context_free_{key}": value for key, value in task.context_free(split).items()})
  else:
    result.update(lm_scores(totals, task.bytes[split]), seq_len=task.seq_len, trained_seq_len=trained)
    result["loss_by_position"] = {
        f"{lo}-{hi}": totals[f"nll_{lo}"] / totals[f"n_{lo}"] for lo, hi in zip(edges[:-1], edges[1:])
        if totals.get(f"n_{lo}")}
    if task.seq_len != trained:  # beside the split's own scores, not over them: metrics.<split>.len<N>.json
      split = f"{split}.len{task.seq_len}"
  _write_metrics(workdir, split, result)
  return result


def lm_scores(totals: dict[str, float], num_bytes: int) -> dict[str, float]:
  """A language model's scores from summed NLL (nats) and predicted tokens over a split of ``num_bytes`` bytes:
  ``lm_loss`` (nats per token), ``bits_per_byte`` (the tokenizer-independent rate) and ``lm_tokens``."""
  n = max(totals.get("ntokens", 0.0), 1.0)
  return {"lm_loss": totals.get("nll_sum", 0.0) / n,
          "bits_per_byte": totals.get("nll_sum", 0.0) / math.log(2) / max(num_bytes, 1),
          "lm_tokens": totals.get("ntokens", 0.0)}


def _position_edges(trained: int, length: int) -> list[int]:
  """Ranges of positions for the loss of a language model evaluated on rows of ``length`` after training on rows of
  ``trained``: [0, trained), then doubling (trained, 2·trained), (2·trained, 4·trained)... up to ``length``."""
  edges = [0, max(trained, 1)] if trained else [0]
  while edges[-1] < length:
    edges.append(min(2 * edges[-1] if edges[-1] else length, length))
  return edges


def _lm_statistics_by_position(logits, batch, edges):
  """:func:`attnjax.models.lm.lm_statistics` of a batch, plus the NLL sum and count of the targets whose input lies
  in each range of positions of ``edges`` (``nll_<lo>``, ``n_<lo>``)."""
  import jax.numpy as jnp  # pylint: disable=g-import-not-at-top
  from attnjax.models.lm import lm_statistics  # pylint: disable=g-import-not-at-top
  stats = lm_statistics(logits, batch["targets"], batch["weights"])
  log_probs = jax.nn.log_softmax(logits.astype(jnp.float32), axis=-1)
  nll = -jnp.take_along_axis(log_probs, batch["targets"][..., None], axis=-1)[..., 0]
  weights = batch["weights"].astype(jnp.float32)
  for lo, hi in zip(edges[:-1], edges[1:]):
    inside = weights * ((batch["positions"] >= lo) & (batch["positions"] < hi))
    stats[f"nll_{lo}"] = jnp.sum(nll * inside)
    stats[f"n_{lo}"] = jnp.sum(inside)
  return stats
