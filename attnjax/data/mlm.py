"""Masked-language-model data (Devlin et al. 2019, §3.1 and App. A.1): documents of plain text, WordPiece tokens,
packed into fixed-length rows, and BERT's masking.

**Documents**: :mod:`attnjax.data.articles` (a JSON-lines file of articles, split by a hash of each title).

**Packing.** Each article's tokens are cut into chunks of at most ``seq_len - 2``; a chunk becomes
``[CLS] tokens [SEP]``. Chunks are laid into rows of ``seq_len`` one after another, a new row when the next does not
fit. Each chunk of a row has its own segment id (1, 2, ...; 0 is padding) and its own positions from 0, so that
attention stays inside a chunk (the encoder attends within equal segment ids) and position embeddings mean what they
mean in an unpacked row.

**Masking**, as BERT's ``create_pretraining_data``: of each row's real tokens other than [CLS] and [SEP], 15% (rounded,
at least one, at most ``max_predictions`` per row) are chosen at random; a chosen token becomes [MASK] with
probability 0.8, a random token of the vocabulary with 0.1, and stays with 0.1. The loss is taken at the chosen
positions only, given as ``mlm_positions`` / ``mlm_ids`` / ``mlm_weights`` ``[B, P]`` (P = ``max_predictions``;
weight 0 pads). The random draws come from (seed, epoch, batch), so a resumed run masks as an uninterrupted one, and a
validation batch is masked the same way at every evaluation.
"""

from __future__ import annotations

import hashlib
import json
import math
from typing import Sequence

import numpy as np
from absl import logging

from attnjax import fs
from attnjax.data.articles import document_splits, split_articles
from attnjax.data.rows import RowBatcher
from attnjax.data.wordpiece import wordpiece_in_workdir

DEFAULT_HELDOUT = {"validation": 0.005, "test": 0.005}  # shares of a single file's documents
MLM_BATCH_KEYS = ("input_ids", "segment_ids", "positions", "mlm_positions", "mlm_ids", "mlm_weights")


# --------------------------------------------------------------------------------------------- packing


def pack_documents(documents: Sequence[np.ndarray], seq_len: int, cls_id: int, sep_id: int):
  """``(ids, segment_ids, positions)``, each ``[N, seq_len]`` int32 (see the module docstring)."""
  if seq_len < 3:
    raise ValueError(f"data.seq_len must be at least 3 ([CLS] token [SEP]), got {seq_len}")
  width = seq_len - 2
  chunks = [doc[i:i + width] for doc in documents for i in range(0, len(doc), width)]
  rows: list[list[np.ndarray]] = []
  used = seq_len  # forces a first row
  for chunk in chunks:
    if used + len(chunk) + 2 > seq_len:
      rows.append([])
      used = 0
    rows[-1].append(chunk)
    used += len(chunk) + 2
  ids = np.zeros((len(rows), seq_len), np.int32)
  segments = np.zeros((len(rows), seq_len), np.int32)
  positions = np.zeros((len(rows), seq_len), np.int32)
  for r, row in enumerate(rows):
    at = 0
    for s, chunk in enumerate(row, start=1):
      n = len(chunk) + 2
      ids[r, at:at + n] = np.concatenate([[cls_id], chunk, [sep_id]])
      segments[r, at:at + n] = s
      positions[r, at:at + n] = np.arange(n)
      at += n
  return ids, segments, positions


# --------------------------------------------------------------------------------------------- masking


def mask_rows(ids, segments, rng: np.random.Generator, *, vocab_size: int, mask_id: int, special_ids: Sequence[int],
              max_predictions: int, rate: float = 0.15) -> dict[str, np.ndarray]:
  """BERT's masking of packed rows (see the module docstring): the batch's model inputs and prediction targets."""
  inputs = ids.copy()
  b = ids.shape[0]
  mlm_positions = np.zeros((b, max_predictions), np.int32)
  mlm_ids = np.zeros((b, max_predictions), np.int32)
  mlm_weights = np.zeros((b, max_predictions), np.float32)
  candidate = (segments > 0) & ~np.isin(ids, np.asarray(special_ids))
  for r in range(b):
    where = np.flatnonzero(candidate[r])
    if not len(where):
      continue
    n = min(max_predictions, max(1, int(round(len(where) * rate))))
    chosen = np.sort(rng.choice(where, size=n, replace=False))
    mlm_positions[r, :n], mlm_ids[r, :n], mlm_weights[r, :n] = chosen, ids[r, chosen], 1.0
    action = rng.random(n)
    replace = chosen[action < 0.8]
    inputs[r, replace] = mask_id
    randomise = chosen[(action >= 0.8) & (action < 0.9)]
    inputs[r, randomise] = rng.integers(0, vocab_size, size=len(randomise))
  return {"input_ids": inputs, "mlm_positions": mlm_positions, "mlm_ids": mlm_ids, "mlm_weights": mlm_weights}


def context_free_scores(ids, segments, special_ids: Sequence[int]) -> dict[str, float]:
  """The best MLM loss and accuracy that a predictor ignoring its input can expect on these rows: masked positions
  are drawn uniformly from the maskable tokens (real, not ``special_ids``), so the best context-free guess is their
  frequency distribution p, whose cross-entropy is its entropy H(p) = -sum p log p (nats; any other distribution q
  scores H(p) + KL(p||q)) and whose accuracy is max p. A model above this loss has not yet learnt to use context."""
  candidate = (np.asarray(segments) > 0) & ~np.isin(ids, np.asarray(special_ids))
  counts = np.bincount(np.asarray(ids)[candidate])
  if not counts.sum():
    raise ValueError("context_free_scores: the rows hold no maskable token")
  p = counts[counts > 0] / counts.sum()
  return {"mlm_loss": float(-(p * np.log(p)).sum()), "mlm_accuracy": float(p.max())}


def default_max_predictions(seq_len: int, rate: float = 0.15) -> int:
  """BERT's max_predictions_per_seq for a row length (20 for 128 tokens, 80 for 512)."""
  return int(math.ceil(seq_len * rate)) + 1


# --------------------------------------------------------------------------------------------- batches


def MlmBatcher(ids, segments, positions, *, batch_size: int, vocab_size: int, mask_id: int,  # pylint: disable=invalid-name
               special_ids: Sequence[int], max_predictions: int, seed: int = 0, shuffle: bool = True,
               num_shards: int = 1, shard_index: int = 0, batch_multiple: int = 1, rate: float = 0.15) -> RowBatcher:
  """Batches of masked packed rows (:class:`attnjax.data.rows.RowBatcher`): each batch masked by :func:`mask_rows`
  with the batch's own random draws."""
  masking = dict(vocab_size=vocab_size, mask_id=mask_id, special_ids=tuple(special_ids),
                 max_predictions=max_predictions, rate=rate)

  def make(rows, rng):
    return {"segment_ids": rows["segment_ids"], "positions": rows["positions"],
            **mask_rows(rows["ids"], rows["segment_ids"], rng, **masking)}

  return RowBatcher({"ids": ids, "segment_ids": segments, "positions": positions}, batch_size=batch_size, make=make,
                    seed=seed, shuffle=shuffle, num_shards=num_shards, shard_index=shard_index,
                    batch_multiple=batch_multiple, settings=sorted(masking.items()))


# --------------------------------------------------------------------------------------------- the task


def squad_train_articles(task: str, directory: str) -> list[dict]:
  """The train split of the registered SQuAD task ``task`` (its files under ``directory``) as articles: per title,
  its paragraphs in order, each once, joined by blank lines. Pre-training on the downstream task's own text (Krishna
  et al. 2023) then never reads a paragraph of the task's validation or test splits."""
  from attnjax.data import catalogue, squad  # pylint: disable=g-import-not-at-top
  if task not in catalogue.TASKS or catalogue.TASKS[task].kind != "extractive_qa":
    squads = sorted(name for name, spec in catalogue.TASKS.items() if spec.kind == "extractive_qa")
    raise ValueError(f"config.data.squad_task={task!r}: not a registered SQuAD task ({squads})")
  spec = catalogue.TASKS[task]
  data_cfg = {"source": spec.source, "dir": directory, **spec.fields}
  if spec.splits:
    data_cfg["splits"] = dict(spec.splits)
  by_title: dict[str, list[str]] = {}
  for q in squad.load_qa_task(data_cfg, splits=("train",))["train"]:
    paragraphs = by_title.setdefault(q.title or q.context, [])
    if q.context not in paragraphs:
      paragraphs.append(q.context)
  return [{"title": title, "text": "\n\n".join(paragraphs)} for title, paragraphs in by_title.items()]


class MlmTaskData:
  """A masked-LM task (``config.data.source = "mlm_jsonl"``): the WordPiece vocabulary and each split's packed rows.

  Config (``config.data``): ``path`` (the JSON-lines articles, inside ``dir`` if set) or ``squad_task`` (a
  registered SQuAD task whose train split's paragraphs are the articles, read from ``dir``:
  :func:`squad_train_articles`), ``heldout`` (split -> share of articles), ``split_seed``, ``vocab_file`` (a BERT
  ``vocab.txt``, copied into the workdir as ``wordpiece.vocab.txt`` on the first start),
  ``lowercase`` (True), ``seq_len`` (128), ``max_predictions`` (BERT's for ``seq_len``), ``mask_rate`` (0.15) and
  ``max_articles`` (0: all; a quick run's cap). The tokenized, packed rows are cached in the workdir
  (``mlm.<split>.<fingerprint>.npz``): a restart or a second host reads them instead of tokenizing again.
  """

  kind = "mlm"

  def __init__(self, data_cfg, workdir):
    from attnjax.data.config_keys import get, in_dir  # pylint: disable=g-import-not-at-top
    self.seq_len = int(get(data_cfg, "seq_len", 128))
    self.max_predictions = int(get(data_cfg, "max_predictions", 0) or default_max_predictions(self.seq_len))
    self.mask_rate = float(get(data_cfg, "mask_rate", 0.15))
    if not 0.0 < self.mask_rate < 1.0:
      raise ValueError(f"data.mask_rate must be in (0, 1), got {self.mask_rate}")
    get(data_cfg, "vocab_file")  # required
    self.vocab = wordpiece_in_workdir(data_cfg, workdir)
    self.src_vocab = self.tgt_vocab = self.vocab
    self.squad_task = get(data_cfg, "squad_task", None)
    self.directory = get(data_cfg, "dir", "") or ""
    given = [key for key in ("path", "splits", "squad_task") if get(data_cfg, key, None) is not None]
    if len(given) != 1:
      raise ValueError(f"config.data: set exactly one of path (a file of documents), splits (split -> file) and "
                       f"squad_task (a SQuAD task's train paragraphs) for masked-LM pre-training, got {given or 'none'}")
    self.data_cfg = data_cfg
    if self.squad_task is not None:  # what the rows' cache key names
      self.path = f"squad_task:{self.squad_task}:{self.directory}"
    elif given == ["path"]:
      self.path = in_dir(self.directory, str(get(data_cfg, "path")))
    else:
      self.path = json.dumps(dict(get(data_cfg, "splits").items()), sort_keys=True)
    self.heldout = dict(get(data_cfg, "heldout", DEFAULT_HELDOUT).items())
    self.text_options = [get(data_cfg, key, None) for key in ("text_format", "text_key", "title_key")]
    self.split_seed = int(get(data_cfg, "split_seed", 0))
    self.max_articles = int(get(data_cfg, "max_articles", 0) or 0)
    self.workdir = workdir
    self._rows: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
    self._texts = None

  def _cache_path(self, split):
    read_as = [self.text_options] if any(option is not None for option in self.text_options) else []
    key = hashlib.sha256(json.dumps([str(self.path), self.heldout, self.split_seed, self.max_articles, self.seq_len,
                                     self.vocab.fingerprint, split, *read_as], sort_keys=True).encode()).hexdigest()[:16]
    return fs.join(self.workdir, f"mlm.{split}.{key}.npz")

  def rows(self, split: str):
    """``(ids, segment_ids, positions)`` of ``split``'s packed rows."""
    if split in self._rows:
      return self._rows[split]
    cache = self._cache_path(split)
    if fs.exists(cache):
      arrays = fs.load_npz(cache)
    else:
      if self._texts is None and self.squad_task is not None:
        articles = squad_train_articles(self.squad_task, self.directory)
        self._texts = split_articles(articles[:self.max_articles] if self.max_articles else articles, self.heldout,
                                     self.split_seed)
      elif self._texts is None:
        self._texts = document_splits(self.data_cfg, DEFAULT_HELDOUT)
      if split not in self._texts:
        raise ValueError(f"split {split!r}: the MLM data has {sorted(self._texts)} (data.heldout names the held-out "
                         "ones)")
      documents = self.vocab.encode_documents(self._texts[split])
      ids, segments, positions = pack_documents(documents, self.seq_len, self.vocab.cls_id, self.vocab.sep_id)
      arrays = {"ids": ids, "segment_ids": segments, "positions": positions}
      logging.info("mlm data: %s: %d articles, %d tokens, %d packed rows of %d", split, len(documents),
                   sum(len(d) for d in documents), len(ids), self.seq_len)
      import jax  # pylint: disable=g-import-not-at-top
      if jax.process_index() == 0:
        fs.save_npz(cache, **arrays)
    self._rows[split] = (arrays["ids"], arrays["segment_ids"], arrays["positions"])
    return self._rows[split]

  @property
  def special_ids(self) -> tuple[int, ...]:
    """The tokens never masked (as BERT: [PAD], [CLS] and [SEP])."""
    return (self.vocab.pad_id, self.vocab.cls_id, self.vocab.sep_id)

  def keep_first(self, split: str, rows: int) -> None:
    """Only the first ``rows`` rows of ``split`` from now on (an evaluation of part of a split)."""
    self._rows[split] = tuple(array[:rows] for array in self.rows(split))

  def context_free(self, split: str) -> dict[str, float] | None:
    """:func:`context_free_scores` of ``split``'s rows when they are cached in the workdir (a run that trained or
    evaluated on it left them there), else None: it never tokenizes the articles."""
    if split not in self._rows and not fs.exists(self._cache_path(split)):
      return None
    ids, segments, _ = self.rows(split)
    return context_free_scores(ids, segments, self.special_ids)

  def batcher(self, split: str, *, shuffle: bool, seed: int, batch_size: int, num_shards: int = 1,
              shard_index: int = 0, batch_multiple: int = 1) -> MlmBatcher:
    ids, segments, positions = self.rows(split)
    v = self.vocab
    return MlmBatcher(ids, segments, positions, batch_size=batch_size, vocab_size=v.size, mask_id=v.mask_id,
                      special_ids=self.special_ids, max_predictions=self.max_predictions, seed=seed,
                      shuffle=shuffle, num_shards=num_shards, shard_index=shard_index, batch_multiple=batch_multiple,
                      rate=self.mask_rate)
