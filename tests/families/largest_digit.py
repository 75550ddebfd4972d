"""A tiny task family, written as ``docs/architecture.md``'s "Adding a family" says: this module and one registry
line, nothing edited elsewhere. The task: name the largest digit of a string of digits (one output token), scored
by accuracy; an unclaimed model (the Transformer) reads it as a one-token target."""

from __future__ import annotations

import dataclasses
import zlib

import jax
import jax.numpy as jnp
import numpy as np

from attnjax import fs
from attnjax.data import tasks
from attnjax.data.pipeline import Seq2SeqBatcher
from attnjax.data.vocab import CharVocab
from attnjax.families.base import Predictions, TaskFamily, step_tag
from attnjax.families.seq2seq import seq2seq_loss_stats
from attnjax.tokens import BOS_ID, PAD_ID

SPLIT_SIZES = {"train": 512, "validation": 40, "test": 56}


def make_split(split: str, size: int) -> list[tuple[str, str]]:
  """``size`` strings of 3 to 8 digits and their largest digit, the same for a split every time."""
  rng = np.random.default_rng(zlib.crc32(split.encode()))
  strings = ["".join(map(str, rng.integers(0, 10, size=int(rng.integers(3, 9))))) for _ in range(size)]
  return [(s, max(s)) for s in strings]


@dataclasses.dataclass
class LabelPredictions(Predictions):
  labels: list[str] = dataclasses.field(default_factory=list)


class LargestDigit(TaskFamily):
  name, title = "largest_digit", "largest-digit classification"
  sources = ("largest_digit",)
  data_keys = {"train_size": int}
  metrics = ("accuracy",)

  def _sizes(self, data_cfg) -> dict[str, int]:
    return dict(SPLIT_SIZES, train=int(data_cfg.get("train_size", SPLIT_SIZES["train"])))

  def load_task(self, data_cfg, workdir: str) -> tasks.TaskData:
    splits = {split: make_split(split, n) for split, n in self._sizes(data_cfg).items()}
    path = fs.join(workdir, tasks.VOCAB_FILE)
    if not path.exists():
      CharVocab.build(text for pair in splits["train"] for text in pair).save(path)
    vocab = CharVocab.load(path)
    return tasks.TaskData(self.name, vocab, vocab, splits)

  def load_vocabularies(self, data_cfg, workdir: str) -> tasks.Vocabularies:
    vocab = CharVocab.load(fs.join(workdir, tasks.VOCAB_FILE))
    return tasks.Vocabularies(vocab, vocab)

  def load_split(self, data_cfg, split: str) -> list[tuple[str, str]]:
    return make_split(split, self._sizes(data_cfg)[split])

  def batchers(self, task, config, split: str, *, shards: dict):
    lengths = dict(shards, max_src_len=config.data.max_src_len, max_tgt_len=config.data.max_tgt_len)
    return (Seq2SeqBatcher(task.encoded("train"), shuffle=True, seed=config.seed, **lengths),
            Seq2SeqBatcher(task.encoded(split), shuffle=False, seed=0, **lengths))

  def loss(self, config, *, tgt_vocab_size: int):
    return seq2seq_loss_stats

  def tokens(self, batch) -> float:
    return float(batch["tgt_mask"].sum())

  def predict(self, run, split: str, *, limit: int | None) -> LabelPredictions:
    """The most likely first output token of every example: its label."""
    if "first_token" not in run.cache:
      run.cache["first_token"] = jax.jit(lambda params, src, mask: jnp.argmax(run.model.apply(
          {"params": params}, src, jnp.full((src.shape[0], 1), BOS_ID, jnp.int32), mask)[:, 0], axis=-1))
    pairs = run.task.splits[split][:limit] if limit else run.task.splits[split]
    vocab = run.task.src_vocab
    width = run.config.data.max_src_len
    src = np.full((len(pairs), width), PAD_ID, np.int32)
    for row, (text, _) in enumerate(pairs):
      ids = vocab.encode(text)[:width]
      src[row, :len(ids)] = ids
    ids = np.asarray(run.cache["first_token"](run.params, src, src != PAD_ID))
    labels = [run.task.tgt_vocab.decode([int(i)]) for i in ids]
    accuracy = 100.0 * float(np.mean([label == gold for label, (_, gold) in zip(labels, pairs)]))
    return LabelPredictions({"accuracy": accuracy}, {}, labels=labels)

  def checkpoint_task(self, config, split: str, examples, vocabularies) -> tasks.TaskData:
    return tasks.TaskData(self.name, vocabularies.src, vocabularies.tgt, {split: examples})

  def write_files(self, workdir: str, split: str, loaded, run, predictions, *, heatmap) -> dict:
    path = fs.join(workdir, f"labels.{split}.{step_tag(loaded)}.txt")
    if jax.process_index() == 0:
      fs.write_text(path, "".join(label + "\n" for label in predictions.labels))
    return {"labels": str(path)}


FAMILY = LargestDigit()
