"""Masked-LM pre-training (BERT): WordPiece rows of articles, 15% of their tokens masked, predicted at the masked
positions only; scored by masked-LM loss and accuracy on every row of a split, beside what token frequencies alone
reach on the same rows."""

from __future__ import annotations

from attnjax import fs
from attnjax.data import tasks
from attnjax.data.mlm import MlmTaskData
from attnjax.data.wordpiece import WORDPIECE_FILE, wordpiece_in_workdir
from attnjax.families.base import Predictions, mean_loss
from attnjax.families.rows import ROW_KEYS, RowFamily
from attnjax.models.bert import mlm_statistics

MLM_METRICS = ("mlm_accuracy",)


def mlm_loss_stats(model, params, batch, rng, deterministic):
  """BERT's masked-LM loss: cross-entropy at the masked positions only (``mlm_weights`` 0 pads), summed;
  ``ntokens`` is the number of predictions and ``correct_sum`` how many the argmax gets right."""
  rngs = None if deterministic else {"dropout": rng}
  logits = model.apply({"params": params}, batch["input_ids"], batch["segment_ids"], batch["positions"],
                       batch["mlm_positions"], deterministic=deterministic, rngs=rngs)  # [B, P, V]
  return mlm_statistics(logits, batch["mlm_ids"], batch["mlm_weights"])


class MaskedLM(RowFamily):
  """BERT's masked-LM objective on packed WordPiece rows."""
  name = "masked_lm"
  title = "masked-LM"
  sources = ("mlm_jsonl", "mlm_text")  # two names for one reader (JSON lines or plain text: data.text_format)
  model_names = ("bert_mlm",)
  data_keys = {**ROW_KEYS, "vocab_file": str, "lowercase": bool, "max_predictions": int, "mask_rate": float,
               "squad_task": str}
  metrics = MLM_METRICS
  loss_key = "mlm_loss"

  def load_task(self, data_cfg, workdir: str) -> MlmTaskData:
    return MlmTaskData(data_cfg, workdir)

  def load_vocabularies(self, data_cfg, workdir: str) -> tasks.Vocabularies:
    if not fs.exists(fs.join(workdir, WORDPIECE_FILE)):
      tasks.missing_vocabulary(workdir)
    vocab = wordpiece_in_workdir(data_cfg, workdir)
    return tasks.Vocabularies(vocab, vocab)

  def loss(self, config, *, tgt_vocab_size: int):
    return mlm_loss_stats

  def tokens(self, batch) -> float:
    return float((batch["segment_ids"] > 0).sum())  # every real token of the packed rows is read

  def predict(self, run, split: str, *, limit: int | None) -> Predictions:
    """Every row of the split, masked as at every evaluation: masked-LM loss and accuracy."""
    same = split == run.config.eval.split and run.eval_batches is not None
    batches = run.eval_batches if same else self.split_batcher(run, split)
    values = mean_loss(run.loss_totals(batches.iterate_epoch(0)))
    return Predictions(scores={"mlm_loss": values["loss"], "mlm_accuracy": values["accuracy"],
                               "mlm_predictions": values["ntokens"]}, signatures={})

  def write_files(self, workdir: str, split: str, loaded, run, predictions, *, heatmap) -> dict:
    # beside the scores, what token frequencies alone reach on the same rows (no model): the report's baseline
    return {f"context_free_{key}": value for key, value in (run.task.context_free(split) or {}).items()}


FAMILY = MaskedLM()
