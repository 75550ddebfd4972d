"""Sequence to sequence: translation, summarization (with copying and coverage) and the synthetic tasks.

Text pairs ``(source, target)`` per split; a character vocabulary (synthetic tasks, ``vocab.json``) or SentencePiece
(``spm.model``, or ``spm_src`` / ``spm_tgt`` with ``data.joint_vocab=False``) kept in the workdir; bucketed (or packed)
batches of token ids; label-smoothed cross-entropy plus what a model sows as auxiliary loss (coverage); beam or greedy
decoding of every example, scored with the literature's metrics (BLEU, chrF, TER, METEOR; ROUGE for summaries).
"""

from __future__ import annotations

import dataclasses
import functools
import time
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from attnjax import fs, inference
from attnjax import metrics as metrics_lib
from attnjax.data import tasks
from attnjax.data.pipeline import Seq2SeqBatcher
from attnjax.data.sources import TEXT_SOURCES, load_text_task
from attnjax.data.tokenizer import load_or_train_pair, spm_options
from attnjax.data.vocab import CharVocab
from attnjax.families.base import Predictions, TaskFamily, fail, step_tag
from attnjax.models.losses import smoothed_cross_entropy
from attnjax.tokens import round_up
from attnjax.transfer import published

BATCH_KEYS = ("src", "src_mask", "tgt_in", "tgt_out", "tgt_mask")
PACKED_KEYS = ("src_segment_ids", "tgt_segment_ids", "src_positions", "tgt_positions")
DECODING_METRICS = ("exact_match", "bleu", "chrf", "ter", "meteor", "rouge")
SUMMARIZATION_SOURCES = ("jsonl", "tfds_summarization")
ROUGE_VALUES = ("rouge1", "rouge2", "rougeL", "rougeLsum")  # what the metric "rouge" reports (F1 of each)

# What a synthetic task is scored with by default. A reversed string is one unspaced word, which sacreBLEU's 13a
# tokenizer leaves whole: no bigrams, so BLEU is 0 for every output, right or wrong, and only misleads a table. Dates
# keep BLEU ("2018-05-09" splits at the hyphens into five tokens).
_SYNTHETIC_METRICS = {"reverse": ("exact_match", "chrf")}
_SYNTHETIC_DEFAULT_METRICS = ("exact_match", "bleu", "chrf")


@dataclasses.dataclass
class TextPredictions(Predictions):
  """A split decoded: one hypothesis per example, beside its reference and source, in the split's order."""
  hypotheses: list[str] = dataclasses.field(default_factory=list)
  references: list[str] = dataclasses.field(default_factory=list)
  sources: list[str] = dataclasses.field(default_factory=list)
  attention: list[np.ndarray] | None = None  # cross-attention per example, where the decoder returned it


def seq2seq_loss_stats(model, params, batch, rng, deterministic, *, label_smoothing=0.0, vocab_size=None):
  """Label-smoothed cross-entropy, plus any per-token auxiliary loss ``[B, T]`` the model sows into its ``"losses"``
  collection (See et al.'s coverage loss), summed under the target mask into ``loss_sum`` (``nll_sum`` stays the
  NLL)."""
  rngs = None if deterministic else {"dropout": rng}
  packed = {key: batch[key] for key in PACKED_KEYS if key in batch}  # packed rows (Transformer only)
  logits, sown = model.apply({"params": params}, batch["src"], batch["tgt_in"], batch["src_mask"],
                             deterministic=deterministic, rngs=rngs, mutable=["losses"], **packed)
  stats = smoothed_cross_entropy(logits, batch["tgt_out"], batch["tgt_mask"], label_smoothing, vocab_size)
  weights = batch["tgt_mask"].astype(jnp.float32)
  for aux in jax.tree_util.tree_leaves(sown.get("losses", {})):
    stats["loss_sum"] = stats["loss_sum"] + jnp.sum(aux * weights)
  return stats


def meteor_language(config) -> str:
  """METEOR's target language: ``config.eval.meteor_language``, else ``config.data.tgt_lang``; ValueError naming the
  key when neither gives one METEOR knows (a French corpus must not be scored with English stems and synonyms)."""
  from attnjax.metrics.translation import check_meteor_language  # pylint: disable=g-import-not-at-top
  language = config.eval.get("meteor_language")
  if language is not None:
    return check_meteor_language(language, "config.eval.meteor_language")
  language = config.data.get("tgt_lang")
  if language is None:
    fail("eval.meteor_language", "METEOR needs the target language (its stemmer, and WordNet synonyms for English) "
         "and config.data.tgt_lang does not give it: set it, e.g. --eval meteor_language=fr")
  return check_meteor_language(language, "config.data.tgt_lang (METEOR's language; set config.eval.meteor_language "
                               "to override)")


def score(hypotheses, references, names, *,
          meteor_language: str | None = None) -> tuple[dict[str, float], dict[str, str]]:  # pylint: disable=redefined-outer-name
  """Metric values (percentages) and sacreBLEU / METEOR signatures for the names in ``names``; METEOR stems (and for
  English matches synonyms) in ``meteor_language`` (:func:`meteor_language`), required with it."""
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


def decode_and_score(decoder: inference.Decoder, params, vocabularies, pairs, names, *, max_src_len: int,
                     batch_size: int, meteor_language: str | None = None) -> TextPredictions:  # pylint: disable=redefined-outer-name
  """Decodes the source of every ``(source, reference)`` pair and scores the hypotheses against the references.

  ``params`` replicated (:func:`attnjax.inference.replicate`). The scores include ``truncated_sources`` and
  ``empty_sources``: how many sources were cut to ``max_src_len`` tokens for decoding, and how many decoded to "";
  ``decode_seconds``, the search's wall time (process 0's); for ROUGE, See et al.'s repetition and novel n-grams.
  Process 0 alone scores; the other processes receive its numbers, so every host takes the same decisions.
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
  return TextPredictions(scores, signatures, out.hypotheses, references, sources, out.attention)


def pieces(vocab, text: str) -> list[str]:
  """The token strings of ``text`` (characters for a character vocabulary, pieces for sentencepiece)."""
  if hasattr(vocab, "id_to_piece"):
    return [vocab.id_to_piece(i) for i in vocab.encode(text)]
  return list(text)


class Seq2Seq(TaskFamily):
  """Text in, text out, scored by decoding every example."""
  name = "seq2seq"
  title = "sequence-to-sequence"
  sources = ("synthetic",) + tuple(TEXT_SOURCES)
  data_keys = {"dir": str, "src_lang": str, "tgt_lang": str, "splits": dict[str, str], "max_chars": int, "path": str,
               "heldout": dict[str, float], "split_seed": int, "src_column": int, "tgt_column": int,
               "document_key": str, "summary_key": str, "tfds_name": str, "tfds_data_dir": str, "tfds_download": bool,
               "tfds_backend": str, "vocab_size": int, "joint_vocab": bool, "spm_model_type": str,
               "spm_model": str}
  metrics = DECODING_METRICS
  decodes = True

  def default_metrics(self, data_cfg) -> tuple[str, ...]:
    if data_cfg.source == "synthetic":
      return _SYNTHETIC_METRICS.get(data_cfg.task, _SYNTHETIC_DEFAULT_METRICS)
    return ("rouge",) if data_cfg.source in SUMMARIZATION_SOURCES else ("bleu", "chrf", "ter")

  def source_data_keys(self, source: str) -> dict:
    return {} if source == "synthetic" else self.data_keys  # a synthetic task is generated from config.data.task

  def metric_values(self, name: str) -> tuple[str, ...]:
    return ROUGE_VALUES if name == "rouge" else (name,)

  def default_best(self, data_cfg) -> tuple[str, str]:
    first = self.default_metrics(data_cfg)[0]
    return ("rougeL" if first == "rouge" else first), "max"  # ROUGE-L: the summarization papers' headline

  def check_config(self, config) -> None:
    d = config.data
    if config.model.get("copy") and not d.get("joint_vocab", True):
      fail("model.copy", "copying puts source ids into the output: it needs one vocabulary for both sides "
           "(data.joint_vocab=True)")
    if d.pack and config.model.name != "transformer":
      fail("data.pack", f"packing needs segment masks, which only model.name='transformer' takes "
           f"(got {config.model.name!r})")
    if config.eval.get("meteor_language") is not None or "meteor" in config.eval.metrics:
      meteor_language(config)  # a language METEOR knows, given or from data.tgt_lang

  def check_evaluation(self, config, names) -> None:
    """METEOR's language and its data, checked before hours of training or decoding."""
    if "meteor" in names:
      metrics_lib.check_meteor_available(meteor_language(config))

  # ------------------------------------------------------------------------------------------- data in a workdir

  def load_task(self, data_cfg, workdir: str) -> tasks.TaskData:
    checkpoint = published.workdir_vocabularies(workdir)  # fine-tuning a Hugging Face checkpoint: its tokenizer
    if checkpoint is not None:
      splits = tasks.synthetic_splits(data_cfg) if data_cfg.source == "synthetic" else load_text_task(data_cfg)
      tasks.require_train(splits)
      return tasks.TaskData(data_cfg.source, *checkpoint, splits, token_cache_dir=workdir,
                            source_key=tasks.source_key(data_cfg))
    if data_cfg.source == "synthetic":
      splits = tasks.synthetic_splits(data_cfg)
      path = fs.join(workdir, tasks.VOCAB_FILE)
      if path.exists():
        vocab = CharVocab.load(path)
      else:
        vocab = CharVocab.build(text for pair in splits["train"] for text in pair)
        vocab.save(path)
      return tasks.TaskData(data_cfg.task, vocab, vocab, splits)
    # real text (files or tfds): SentencePiece trained once on the training split, kept in the workdir
    splits = load_text_task(data_cfg)
    tasks.require_train(splits)
    src_vocab, tgt_vocab = load_or_train_pair(workdir, lambda: splits["train"],
                                              joint=bool(data_cfg.get("joint_vocab", True)), **spm_options(data_cfg))
    return tasks.TaskData(data_cfg.source, src_vocab, tgt_vocab, splits, token_cache_dir=workdir,
                          source_key=tasks.source_key(data_cfg))

  def load_vocabularies(self, data_cfg, workdir: str) -> tasks.Vocabularies:
    checkpoint = published.workdir_vocabularies(workdir)
    if checkpoint is not None:
      return tasks.Vocabularies(*checkpoint)
    if data_cfg.source == "synthetic":
      path = fs.join(workdir, tasks.VOCAB_FILE)
      if not path.exists():
        tasks.missing_vocabulary(workdir)
      vocab = CharVocab.load(path)
      return tasks.Vocabularies(vocab, vocab)
    src, tgt = load_or_train_pair(workdir, lambda: tasks.missing_vocabulary(workdir),
                                  joint=bool(data_cfg.get("joint_vocab", True)), **spm_options(data_cfg))
    return tasks.Vocabularies(src, tgt)

  def load_split(self, data_cfg, split: str) -> list[tuple[str, str]]:
    """Only ``split``, every ``(source, target)`` pair of it in order."""
    if data_cfg.source == "synthetic":
      return tasks.synthetic_splits(data_cfg, only=(split,))[split]
    return load_text_task(data_cfg, splits=(split,))[split]

  # ------------------------------------------------------------------------------------------------- training

  def batchers(self, task, config, split: str, *, shards: dict):
    d = config.data
    common = dict(shards, max_src_len=d.max_src_len, max_tgt_len=d.max_tgt_len, truncate=bool(d.get("truncate",
                                                                                                      False)))
    train = Seq2SeqBatcher(task.encoded("train"), bucket_boundaries=d.bucket_boundaries, shuffle=True,
                           seed=config.seed, pack=d.pack, **common)
    return train, Seq2SeqBatcher(task.encoded(split), shuffle=False, seed=0, **common)

  def loss(self, config, *, tgt_vocab_size: int):
    # smoothing mass only on the real target vocabulary (not PAD, BOS or the padded ids)
    return functools.partial(seq2seq_loss_stats, label_smoothing=config.train.label_smoothing,
                             vocab_size=tgt_vocab_size)

  def tokens(self, batch) -> float:
    return float(batch["tgt_mask"].sum())  # target tokens

  def padded_lengths(self, data_cfg) -> tuple[int, int]:
    return round_up(data_cfg.max_src_len), round_up(data_cfg.max_tgt_len)

  def abstract_batch(self, config, rows: int, first_len: int, second_len: int):
    shapes = {"src": (rows, first_len), "src_mask": (rows, first_len), "tgt_in": (rows, second_len),
              "tgt_out": (rows, second_len), "tgt_mask": (rows, second_len)}
    return shapes, ("src_mask", "tgt_mask")

  # ------------------------------------------------------------------------------------ evaluating a run's state

  def _decoder(self, model, mesh, eval_cfg, vocab_size):
    return inference.decoder_for(model, mesh, eval_cfg, vocab_size=vocab_size)

  def predict(self, run, split: str, *, limit: int | None) -> TextPredictions:
    cfg = run.config
    if "decoder" not in run.cache:
      run.cache["decoder"] = self._decoder(run.model, run.mesh, cfg.eval, run.task.tgt_vocab.size)
    pairs = run.task.splits[split]
    pairs = pairs[:limit] if limit else pairs
    language = meteor_language(cfg) if "meteor" in run.metrics else None
    return decode_and_score(run.cache["decoder"], inference.replicate(run.params, run.mesh),
                            tasks.Vocabularies(run.task.src_vocab, run.task.tgt_vocab), pairs, run.metrics,
                            max_src_len=cfg.data.max_src_len, batch_size=cfg.eval.batch_size,
                            meteor_language=language)

  # ------------------------------------------------------------------------------------ a checkpoint of a workdir

  def checkpoint_task(self, config, split: str, examples, vocabularies) -> tasks.TaskData:
    return tasks.TaskData(config.data.get("task") or config.data.source, vocabularies.src, vocabularies.tgt,
                          {split: examples})

  def write_files(self, workdir: str, split: str, loaded, run, predictions, *, heatmap: str | None) -> dict[str, Any]:
    """``hypotheses.<split>.<tag>.txt``, one detokenized output per example in order (and the attention heatmap of
    the first example where asked)."""
    out_path = fs.join(workdir, f"hypotheses.{split}.{step_tag(loaded)}.txt")
    if jax.process_index() == 0:
      fs.write_text(out_path, "".join(h + "\n" for h in predictions.hypotheses))
    files: dict[str, Any] = {"signatures": predictions.signatures, "hypotheses": str(out_path)}
    if heatmap and predictions.sources and jax.process_index() == 0:
      files["heatmap"] = draw_heatmap(loaded, run.config, predictions.sources[0], heatmap)
    return files


def draw_heatmap(loaded, config, source: str, path: str) -> str | None:
  """The cross-attention of the best hypothesis of ``source``, drawn as a PNG (decoded alone, with attention)."""
  from attnjax.visualize import attention_heatmap  # pylint: disable=g-import-not-at-top
  decoder = inference.decoder_for(loaded.model, loaded.mesh, config.eval, vocab_size=loaded.vocabularies.tgt.size,
                                  return_attention=True)
  out = inference.translate_texts(decoder, loaded.params, loaded.vocabularies.src, loaded.vocabularies.tgt, [source],
                                  max_src_len=config.data.max_src_len, batch_size=1)
  if out.attention is None or not out.attention[0].size:
    return None
  hypothesis = out.hypotheses[0]
  src_tokens = pieces(loaded.vocabularies.src, source)[:out.attention[0].shape[1]]
  out_tokens = (pieces(loaded.vocabularies.tgt, hypothesis) + ["</s>"])[:out.attention[0].shape[0]]
  weights = out.attention[0][:len(out_tokens), :len(src_tokens)]
  return attention_heatmap(weights, src_tokens, out_tokens, path, title=f"{source} → {hypothesis}")


FAMILY = Seq2Seq()
