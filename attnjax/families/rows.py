"""What the two families of fixed-length rows share (masked-LM pre-training and the decoder-only language model):
rows of ``data.seq_len`` tokens packed from articles, batches of ``data.batch_size`` rows, and a validation that
reads every row of the split (its loss is the evaluation)."""

from __future__ import annotations

import jax

from attnjax.families.base import TaskFamily, fail

# the documents (a file split by title hash, or a file per split), how they are read, and the rows cut from them
ROW_KEYS = {"dir": str, "path": str, "splits": dict[str, str], "heldout": dict[str, float], "split_seed": int,
            "max_articles": int, "text_format": str, "text_key": str, "title_key": str, "seq_len": int,
            "shared_cache_dir": str}


class RowFamily(TaskFamily):
  """A family whose examples are packed rows (``task.rows(split)``, ``task.batcher(split, ...)``)."""

  loss_key = ""  # the predict() score that is the evaluation's loss

  def check_config(self, config) -> None:
    if config.data.batch_size is None:
      fail("data.batch_size", f"{self.title} rows have a fixed length: set data.batch_size (rows), not "
           "data.max_tokens")

  def extra_values(self, data_cfg, names, task=None) -> tuple[str, ...]:
    return (self.loss_key,)  # the evaluation's loss under the family's own name too

  def batchers(self, task, config, split: str, *, shards: dict):
    options = dict(batch_size=config.data.batch_size, num_shards=shards["num_shards"],
                   shard_index=shards["shard_index"], batch_multiple=shards["batch_multiple"])
    return (task.batcher("train", shuffle=True, seed=config.seed, **options),
            task.batcher(split, shuffle=False, seed=0, **options))

  def split_batcher(self, run, split: str):
    """All rows of ``split`` for an evaluation (those the task keeps), this process's share."""
    return run.task.batcher(split, shuffle=False, seed=0, batch_size=run.config.data.batch_size,
                            num_shards=jax.process_count(), shard_index=jax.process_index())

  def evaluate(self, run, *, limit: int | None):
    predictions = self.predict(run, run.config.eval.split, limit=limit)  # every row: its loss is the loss
    loss = predictions.scores[self.loss_key]
    return {"loss": loss, "nll": loss, **predictions.scores}, predictions.signatures

  # ------------------------------------------------------------------------------------ a checkpoint of a workdir

  def read_split(self, config, workdir: str, split: str, *, limit: int | None):
    """The task data with the workdir's vocabulary (rows are cut with it): ``split``'s first ``limit`` rows."""
    task = self.load_task(self.checkpoint_data(config), workdir)
    if limit:
      task.keep_first(split, limit)
    return task

  def checkpoint_data(self, config):
    """The ``config.data`` a checkpoint's rows are cut by (the training run's, unless the family says otherwise)."""
    return config.data

  def checkpoint_task(self, config, split: str, examples, vocabularies):
    return examples  # read_split's task data

  def num_examples(self, task, split: str) -> int:
    rows = task.rows(split)
    return len(rows[0] if isinstance(rows, tuple) else rows["inputs"])
