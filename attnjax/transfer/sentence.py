"""Sentence embeddings from a BERT encoder, and semantic textual similarity (STS) scored with them.

The embedding is sentence-transformers' recipe: WordPiece tokens (at most ``max_length``, [CLS] and [SEP] counted),
the encoder's last hidden states, their mean over the real tokens, L2-normalised. The STS score of a model is the
Spearman correlation, over all pairs of a split, between the cosine similarity of the two sentences' embeddings and
the gold similarity (Cer et al. 2017; MTEB reports it as ``cosine_spearman``).
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from attnjax import fs


@dataclasses.dataclass(frozen=True)
class StsPair:
  score: float
  sentence1: str
  sentence2: str


def read_sts(path) -> list[StsPair]:
  """The pairs of an STS Benchmark file: tab-separated genre, file, year, id, score, sentence 1, sentence 2 (and on
  some lines source columns after them). Every line is a pair; a line that is not names the file and line."""
  pairs = []
  for number, line in enumerate(fs.read_lines(path), start=1):
    if not line.strip():
      raise ValueError(f"{path}:{number}: empty line (every line of an STS file is a pair)")
    fields = line.split("\t")
    if len(fields) < 7:
      raise ValueError(f"{path}:{number}: {len(fields)} tab-separated fields, expected at least 7 (genre, file, "
                       "year, id, score, sentence 1, sentence 2)")
    try:
      score = float(fields[4])
    except ValueError:
      raise ValueError(f"{path}:{number}: score {fields[4]!r} is not a number") from None
    if not math.isfinite(score):
      raise ValueError(f"{path}:{number}: score {fields[4]!r} is not finite")
    pairs.append(StsPair(score, fields[5], fields[6]))
  if not pairs:
    raise ValueError(f"{path}: no pairs")
  return pairs


def _bucket(length: int, max_length: int) -> int:
  """Batch lengths rounded up to a multiple of 32 (at most ``max_length``): few shapes, few compilations."""
  return min(max_length, -(-length // 32) * 32)


def embed_sentences(module, params, tokenizer, texts, *, max_length: int = 256, batch_size: int = 64,
                    progress=None) -> np.ndarray:
  """``[N, D]`` float32 unit vectors for ``texts`` (see the module docstring), each from at most ``max_length``
  tokens and the model's positions; ``module`` a
  :class:`attnjax.models.bert.BertEncoder`, ``params`` its parameters, ``tokenizer`` from
  :func:`attnjax.transfer.bert.load_tokenizer`."""
  import jax  # pylint: disable=g-import-not-at-top
  from attnjax.models.bert import mean_pool  # pylint: disable=g-import-not-at-top
  from attnjax.transfer.bert import encode_texts  # pylint: disable=g-import-not-at-top
  max_length = min(max_length, module.max_length)  # no more tokens than the model has positions

  @jax.jit
  def embed(p, ids, mask, types):
    hidden = module.apply({"params": p}, ids, mask, types)["last_hidden_state"]
    return mean_pool(hidden.astype(jax.numpy.float32), mask)

  texts = list(texts)
  out = np.zeros((len(texts), module.d_model), np.float32)
  for start in range(0, len(texts), batch_size):
    chunk = texts[start:start + batch_size]
    ids, mask, types = encode_texts(tokenizer, chunk, max_length)
    rows, length = batch_size, _bucket(ids.shape[1], max_length)
    pad = lambda a: np.pad(a, ((0, rows - a.shape[0]), (0, length - a.shape[1])))  # noqa: E731
    vectors = embed(params, pad(ids), pad(mask), pad(types))
    out[start:start + len(chunk)] = np.asarray(vectors)[:len(chunk)]
    if progress is not None:
      progress.update(start + len(chunk))
  return out


def sts_scores(embeddings1: np.ndarray, embeddings2: np.ndarray, gold) -> dict[str, float]:
  """``cosine_spearman`` and ``cosine_pearson`` (scipy) of the pairs' cosine similarities against ``gold``."""
  from scipy import stats  # pylint: disable=g-import-not-at-top
  cosine = np.sum(embeddings1.astype(np.float64) * embeddings2.astype(np.float64), axis=1)
  cosine /= np.maximum(np.linalg.norm(embeddings1, axis=1) * np.linalg.norm(embeddings2, axis=1), 1e-12)
  gold = np.asarray(gold, np.float64)
  return {"cosine_spearman": float(stats.spearmanr(cosine, gold).statistic),
          "cosine_pearson": float(stats.pearsonr(cosine, gold).statistic), "pairs": int(len(gold))}
