"""Language-model data: documents of plain text, SentencePiece tokens, packed into fixed-length rows.

**Documents** come as for masked-LM pre-training (:func:`attnjax.data.articles.read_articles`, split by a hash of each
article's title). Each becomes ``[BOS] tokens [EOS]``, and the documents of a split are laid end to end into one
stream.

**Rows.** Row r reads the stream from ``r · L`` to ``r · L + L`` (inputs) and predicts it shifted by one (targets),
so every token of the stream after the first is a target exactly once. A row can hold the end of one document and the
start of others: ``segment_ids`` (1, 2, ... per document within the row; 0 on padding) keep attention inside a
document, and ``positions`` restart at each document start and at the row start (a row is the model's context, as in
Kaplan et al.'s contiguous windows). A target in another document than its input (a new document's [BOS]) has weight
0: nothing predicts it.

**Bits per byte.** The targets of a split are all of its documents' tokens and their [EOS]; their summed NLL over
``ln 2 ·`` (the UTF-8 bytes of the documents plus one per document, for its end) is a tokenizer-independent loss.
"""

from __future__ import annotations

import hashlib
import json

import numpy as np
from absl import logging

from attnjax import fs
from attnjax.data.articles import document_splits
from attnjax.data.rows import RowBatcher
from attnjax.tokens import BOS_ID, EOS_ID

DEFAULT_HELDOUT = {"validation": 0.005, "test": 0.005}  # shares of a single file's documents
SPM_MODEL_TYPE = "bpe"  # the language model's SentencePiece model where data.spm_model_type does not say
LM_BATCH_KEYS = ("inputs", "targets", "weights", "segment_ids", "positions")
ROWS_FORMAT = 1  # in the packed rows' cache key: raise it when a change to stream_rows changes the rows


def stream_rows(documents, seq_len: int):
  """``{inputs, targets, weights, segment_ids, positions}`` ``[N, seq_len]`` int32 (weights float32) from token-id
  documents (each without BOS / EOS; see the module docstring)."""
  if seq_len < 2:
    raise ValueError(f"data.seq_len must be at least 2, got {seq_len}")
  pieces = [np.concatenate([[BOS_ID], np.asarray(d, np.int32), [EOS_ID]]).astype(np.int32) for d in documents]
  stream = np.concatenate(pieces) if pieces else np.zeros((0,), np.int32)
  doc = np.concatenate([np.full(len(p), i + 1, np.int32) for i, p in enumerate(pieces)]) if pieces else stream
  n = max(-(-(len(stream) - 1) // seq_len), 0)
  size = n * seq_len + 1
  stream = np.pad(stream, (0, size - len(stream)))
  doc = np.pad(doc, (0, size - len(doc)))  # padding: document 0
  index = np.arange(n)[:, None] * seq_len + np.arange(seq_len)[None]
  inputs, targets = stream[index], stream[index + 1]
  doc_in, doc_out = doc[index], doc[index + 1]
  real = doc_in > 0
  segments = np.where(real, doc_in - doc_in[:, :1] + 1, 0).astype(np.int32)
  # position: distance to the start of the token's document within the row
  starts = np.maximum.accumulate(np.where(np.diff(np.concatenate([np.full((n, 1), -1), doc_in], axis=1), axis=1)
                                          != 0, np.arange(seq_len)[None], 0), axis=1)
  positions = np.where(real, np.arange(seq_len)[None] - starts, 0).astype(np.int32)
  weights = ((doc_in == doc_out) & real).astype(np.float32)
  return {"inputs": inputs.astype(np.int32), "targets": targets.astype(np.int32), "weights": weights,
          "segment_ids": segments, "positions": positions}


class LmTaskData:
  """A language-modelling task (``config.data.source = "lm_jsonl"``): a SentencePiece vocabulary trained on the
  training split and each split's packed rows (cached in the workdir as ``lm.<split>.<fingerprint>.npz``).

  Config (``config.data``): ``path`` (JSON-lines articles, inside ``dir`` if set), ``heldout``, ``split_seed``,
  ``max_articles`` (0: all), ``seq_len`` (256), ``vocab_size`` (8000), ``spm_model_type`` ("bpe"),
  ``spm_train_chars`` (the vocabulary is trained on this many characters of the training split, paragraph by
  paragraph from articles in a random order fixed by ``split_seed``; 20M), ``train_tokens`` (0: all; else about this
  many tokens of training rows, a fixed random sample of them (:meth:`subset`), for the data scaling sweep),
  ``shared_cache_dir`` (None; else a directory the points of a sweep share, for the vocabulary trained on the same
  texts and the packed rows of the same settings, instead of each run building its own).
  """

  kind = "lm"

  def __init__(self, data_cfg, workdir):
    from attnjax.data.config_keys import get, in_dir  # pylint: disable=g-import-not-at-top
    from attnjax.data.tokenizer import load_or_train, spm_options  # pylint: disable=g-import-not-at-top
    self.seq_len = int(get(data_cfg, "seq_len", 256))
    self.data_cfg = data_cfg
    path = get(data_cfg, "path", None)
    # what the rows' cache key names: the file (as before) or the split files
    splits = get(data_cfg, "splits", None)
    self.path = (in_dir(get(data_cfg, "dir", ""), str(path)) if path is not None else
                 json.dumps([get(data_cfg, "tfds_name", None), dict(splits.items()) if splits is not None else None],
                            sort_keys=True))
    self.heldout = dict(get(data_cfg, "heldout", DEFAULT_HELDOUT).items())
    self.text_options = [get(data_cfg, key, None) for key in ("text_format", "text_key", "title_key")]
    self.split_seed = int(get(data_cfg, "split_seed", 0))
    self.max_articles = int(get(data_cfg, "max_articles", 0) or 0)
    self.train_tokens = int(get(data_cfg, "train_tokens", 0) or 0)
    self.workdir = workdir
    self._texts = None
    self._rows: dict[str, dict[str, np.ndarray]] = {}
    self.bytes: dict[str, int] = {}
    train_chars = int(get(data_cfg, "spm_train_chars", 20_000_000))

    def paragraphs():  # from articles in an order fixed by split_seed: the file is sorted by title
      out, total = [], 0
      texts = self.texts("train")
      for i in np.random.default_rng(self.split_seed).permutation(len(texts)):
        text = texts[i]
        for line in text.split("\n"):
          if line.strip():
            out.append(line)
            total += len(line)
        if total >= train_chars:
          break
      return out

    self.shared_dir = get(data_cfg, "shared_cache_dir", None) or None  # "" (a flag that clears it): none
    self.vocab = load_or_train(workdir, "spm", paragraphs, shared_dir=self.shared_dir,
                               **spm_options(data_cfg, SPM_MODEL_TYPE))
    self.src_vocab = self.tgt_vocab = self.vocab

  def texts(self, split: str) -> list[str]:
    if self._texts is None:
      self._texts = document_splits(self.data_cfg, DEFAULT_HELDOUT)
    if split not in self._texts:
      raise ValueError(f"split {split!r}: the LM data has {sorted(self._texts)} (data.heldout names the held-out ones)")
    return self._texts[split]

  def _cache_path(self, split):
    read_as = [self.text_options] if any(option is not None for option in self.text_options) else []
    key = hashlib.sha256(json.dumps([ROWS_FORMAT, str(self.path), self.heldout, self.split_seed, self.max_articles,
                                     self.seq_len, hashlib.sha256(self.vocab.model_proto).hexdigest(),
                                     split, *read_as], sort_keys=True).encode()).hexdigest()[:16]
    return fs.join(self.shared_dir or self.workdir, f"lm.{split}.{key}.npz")

  def rows(self, split: str) -> dict[str, np.ndarray]:
    """The packed rows of ``split`` (all of them; :meth:`batcher` cuts training to ``train_tokens``)."""
    if split not in self._rows:
      cache = self._cache_path(split)
      if fs.exists(cache):
        arrays = fs.load_npz(cache)
      else:
        texts = self.texts(split)
        documents = [self.vocab.encode(text) for text in texts]
        arrays = stream_rows(documents, self.seq_len)
        arrays["bytes"] = np.asarray([sum(len(t.encode("utf-8")) + 1 for t in texts)], np.int64)
        logging.info("lm data: %s: %d documents, %d tokens, %d rows of %d, %d bytes", split, len(documents),
                     sum(len(d) + 2 for d in documents), len(arrays["inputs"]), self.seq_len, int(arrays["bytes"][0]))
        import jax  # pylint: disable=g-import-not-at-top
        if jax.process_index() == 0:
          fs.save_npz(cache, **arrays)
      self.bytes[split] = int(arrays.pop("bytes")[0])
      self._rows[split] = arrays
    return self._rows[split]

  def keep_first(self, split: str, rows: int) -> None:
    """Only the first ``rows`` rows of ``split`` from now on (an evaluation of part of a split)."""
    self._rows[split] = {key: array[:rows] for key, array in self.rows(split).items()}

  def subset(self, num_rows: int, batch_size: int = 1) -> np.ndarray:
    """The training rows kept for ``data.train_tokens`` (their indices, in order): the first of one permutation of
    all rows fixed by ``data.split_seed``, so that the subsets of a data sweep are nested and each is a sample of
    every article, not the first articles of the file (which is sorted by title)."""
    keep = max(-(-self.train_tokens // self.seq_len), batch_size)
    if keep > num_rows:
      raise ValueError(f"data.train_tokens={self.train_tokens} is more than the training split's "
                       f"{num_rows * self.seq_len} tokens")
    return np.sort(np.random.default_rng(self.split_seed).permutation(num_rows)[:keep])

  def batcher(self, split: str, *, shuffle: bool, seed: int, batch_size: int, num_shards: int = 1,
              shard_index: int = 0, batch_multiple: int = 1) -> RowBatcher:
    rows = self.rows(split)
    if split == "train" and self.train_tokens:
      rows = {key: value[self.subset(len(rows["inputs"]), batch_size)] for key, value in rows.items()}
    return RowBatcher(rows, batch_size=batch_size, make=lambda chosen, rng: chosen, seed=seed, shuffle=shuffle,
                      num_shards=num_shards, shard_index=shard_index, batch_multiple=batch_multiple,
                      settings=(self.seq_len, self.train_tokens))
