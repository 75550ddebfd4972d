"""What the two families of fixed-length rows share (masked-LM pre-training and the decoder-only language model):
rows of ``data.seq_len`` tokens packed from articles, batches of ``data.batch_size`` rows, and a validation that
reads every row of the split (its loss is the evaluation)."""

from __future__ import annotations

from typing import Any

import jax

from attnjax.families.base import TaskFamily, fail, no_heatmap, result_head, write_metrics

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
    """All rows of ``split`` for an evaluation, this process's share."""
    return run.task.batcher(split, shuffle=False, seed=0, batch_size=run.config.data.batch_size,
                            num_shards=jax.process_count(), shard_index=jax.process_index())

  def evaluate(self, run, *, limit: int | None):
    predictions = self.predict(run, run.config.eval.split, limit=limit)  # every row: its loss is the loss
    loss = predictions.scores[self.loss_key]
    return {"loss": loss, "nll": loss, **predictions.scores}, predictions.signatures

  # ------------------------------------------------------------------------------------ a checkpoint of a workdir

  def prepare_rows(self, config) -> Any:
    """What the checkpoint's evaluation changes in ``config`` before the rows are read; returns what
    :meth:`row_statistics` needs of it."""
    return None

  def row_statistics(self, loaded, task, prepared):
    """``(statistics(params, batch) -> sums, what row_result needs)`` for a checkpoint's evaluation."""
    raise NotImplementedError

  def row_result(self, totals: dict, task, split: str, extra) -> tuple[dict, str]:
    """The scores from the summed statistics, and the name ``metrics.<name>.json`` is written under."""
    raise NotImplementedError

  def evaluate_checkpoint(self, workdir: str, config, split: str, load, *, names, limit,
                          heatmap: str | None) -> dict[str, Any]:
    """Every packed row of ``split`` (the first ``limit`` rows), each as at every evaluation."""
    no_heatmap(heatmap, config.model.name)
    prepared = self.prepare_rows(config)
    task = self.load_task(config.data, workdir)
    rows = task.rows(split)
    if limit:  # pylint: disable=protected-access
      task._rows[split] = (tuple(a[:limit] for a in rows) if isinstance(rows, tuple)
                           else {k: a[:limit] for k, a in rows.items()})
    loaded = load()
    statistics, extra = self.row_statistics(loaded, task, prepared)
    statistics = jax.jit(statistics)
    totals: dict[str, float] = {}
    batch_size = int(config.data.batch_size or config.eval.batch_size)
    for batch in task.batcher(split, shuffle=False, seed=0, batch_size=batch_size).iterate_epoch(0):
      for key, value in jax.device_get(statistics(loaded.params, batch)).items():
        totals[key] = totals.get(key, 0.0) + float(value)
    first = task.rows(split)
    result = result_head(loaded, split, len(first[0] if isinstance(first, tuple) else first["inputs"]))
    scores, name = self.row_result(totals, task, split, extra)
    result.update(scores)
    write_metrics(workdir, name, result)
    return result
