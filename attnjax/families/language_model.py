"""The decoder-only language model: SentencePiece rows of articles, next-token cross-entropy; scored by loss per
token and bits per byte (the tokenizer-independent rate) on every row of a split, and on longer rows than it
trained on (``eval.seq_len``) with the loss per range of positions."""

from __future__ import annotations

import copy
import dataclasses
import functools
import math

import jax
import jax.numpy as jnp

from attnjax.data import tasks
from attnjax.data.lm import SPM_MODEL_TYPE, LmTaskData
from attnjax.data.tokenizer import load_or_train, spm_options
from attnjax.families.base import Predictions
from attnjax.families.rows import ROW_KEYS, RowFamily
from attnjax.models.lm import lm_statistics

LM_METRICS = ("bits_per_byte",)


def lm_loss_stats(model, params, batch, rng, deterministic):
  """The language model's next-token cross-entropy over the weighted targets of packed rows."""
  rngs = None if deterministic else {"dropout": rng}
  logits = model.apply({"params": params}, batch["inputs"], batch["segment_ids"], batch["positions"],
                       deterministic=deterministic, rngs=rngs)
  return lm_statistics(logits, batch["targets"], batch["weights"])


def lm_scores(totals: dict[str, float], num_bytes: int) -> dict[str, float]:
  """A language model's scores from summed NLL (nats) and predicted tokens over a split of ``num_bytes`` bytes:
  ``lm_loss`` (nats per token), ``bits_per_byte`` (the tokenizer-independent rate) and ``lm_tokens``."""
  n = max(totals.get("ntokens", 0.0), 1.0)
  return {"lm_loss": totals.get("nll_sum", 0.0) / n,
          "bits_per_byte": totals.get("nll_sum", 0.0) / math.log(2) / max(num_bytes, 1),
          "lm_tokens": totals.get("ntokens", 0.0)}


def position_edges(trained: int, length: int) -> list[int]:
  """Ranges of positions for the loss of a language model evaluated on rows of ``length`` after training on rows of
  ``trained``: [0, trained), then doubling (trained, 2·trained), (2·trained, 4·trained)... up to ``length``."""
  edges = [0, max(trained, 1)] if trained else [0]
  while edges[-1] < length:
    edges.append(min(2 * edges[-1] if edges[-1] else length, length))
  return edges


def _trained_len(config) -> int:
  return int(config.data.get("seq_len", 0) or 0)  # the training rows' length


@dataclasses.dataclass
class LmPredictions(Predictions):
  """A split's rows read: the loss per range of positions (``"lo-hi"`` -> nats per token) beside the scores."""
  loss_by_position: dict[str, float] = dataclasses.field(default_factory=dict)


def lm_loss_by_position(model, params, batch, rng, deterministic, *, edges):
  """:func:`lm_loss_stats` with the NLL sum and count of the targets in each range of positions of ``edges``
  (:func:`lm_statistics_by_position`)."""
  rngs = None if deterministic else {"dropout": rng}
  logits = model.apply({"params": params}, batch["inputs"], batch["segment_ids"], batch["positions"],
                       deterministic=deterministic, rngs=rngs)
  return lm_statistics_by_position(logits, batch, edges)


def lm_statistics_by_position(logits, batch, edges):
  """:func:`attnjax.models.lm.lm_statistics` of a batch, plus the NLL sum and count of the targets whose input lies
  in each range of positions of ``edges`` (``nll_<lo>``, ``n_<lo>``)."""
  stats = lm_statistics(logits, batch["targets"], batch["weights"])
  log_probs = jax.nn.log_softmax(logits.astype(jnp.float32), axis=-1)
  nll = -jnp.take_along_axis(log_probs, batch["targets"][..., None], axis=-1)[..., 0]
  weights = batch["weights"].astype(jnp.float32)
  for lo, hi in zip(edges[:-1], edges[1:]):
    inside = weights * ((batch["positions"] >= lo) & (batch["positions"] < hi))
    stats[f"nll_{lo}"] = jnp.sum(nll * inside)
    stats[f"n_{lo}"] = jnp.sum(inside)
  return stats


class LanguageModel(RowFamily):
  """Next-token prediction on packed SentencePiece rows."""
  name = "language_model"
  title = "language-model"
  # lm_jsonl and lm_text: one reader (JSON lines or plain text: data.text_format); tfds_lm: a tfds text feature
  sources = ("lm_jsonl", "lm_text", "tfds_lm")
  model_names = ("decoder_lm",)
  data_keys = {**ROW_KEYS, "vocab_size": int, "spm_model_type": str, "spm_train_chars": int, "train_tokens": int,
               "tfds_name": str, "tfds_data_dir": str, "tfds_download": bool, "tfds_backend": str, "spm_model": str}
  metrics = LM_METRICS

  loss_key = "lm_loss"

  def default_best(self, data_cfg) -> tuple[str, str]:
    return "bits_per_byte", "min"

  def load_task(self, data_cfg, workdir: str) -> LmTaskData:
    return LmTaskData(data_cfg, workdir)

  def load_vocabularies(self, data_cfg, workdir: str) -> tasks.Vocabularies:
    vocab = load_or_train(workdir, "spm", lambda: tasks.missing_vocabulary(workdir),
                          **spm_options(data_cfg, SPM_MODEL_TYPE))
    return tasks.Vocabularies(vocab, vocab)

  def loss(self, config, *, tgt_vocab_size: int):
    return lm_loss_stats

  def tokens(self, batch) -> float:
    return float(batch["weights"].sum())  # the predicted tokens

  def predict(self, run, split: str, *, limit: int | None) -> LmPredictions:
    """Every row of the split: loss per token, bits per byte, and the loss per range of positions
    (:func:`position_edges`: the training rows' length, then doubling up to the rows read)."""
    trained = _trained_len(run.config)
    edges = tuple(position_edges(trained, run.task.seq_len))
    key = ("loss_by_position", edges)
    if key not in run.cache:  # one function per set of ranges, so that the run compiles it once
      run.cache[key] = functools.partial(lm_loss_by_position, edges=edges)
    totals = run.loss_totals(self.split_batcher(run, split).iterate_epoch(0), run.cache[key])
    by_position = {f"{lo}-{hi}": totals[f"nll_{lo}"] / totals[f"n_{lo}"] for lo, hi in zip(edges[:-1], edges[1:])
                   if totals.get(f"n_{lo}")}
    return LmPredictions(lm_scores(totals, run.task.bytes[split]), {}, loss_by_position=by_position)

  # ------------------------------------------------------------------------------------ a checkpoint of a workdir

  def checkpoint_data(self, config):
    """Rows of ``eval.seq_len`` tokens where it is set (longer or shorter than the training rows)."""
    data = copy.deepcopy(config.data)
    if config.eval.get("seq_len"):
      with data.unlocked():
        data.seq_len = int(config.eval.seq_len)
    return data

  def write_files(self, workdir: str, split: str, loaded, run, predictions, *, heatmap) -> dict:
    return {"seq_len": run.task.seq_len, "trained_seq_len": _trained_len(run.config),
            "loss_by_position": predictions.loss_by_position}

  def metrics_name(self, run, split: str) -> str:
    # rows of another length than training's: beside the split's own scores, not over them (metrics.<split>.len<N>)
    return split if run.task.seq_len == _trained_len(run.config) else f"{split}.len{run.task.seq_len}"


FAMILY = LanguageModel()
