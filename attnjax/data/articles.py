"""Documents of plain text for pre-training (masked LM, causal LM): a JSON-lines file of articles (``{"id", "title",
"text"}``, the Wikipedia extraction's format), split into train / validation / test by a hash of each article's
title, so that a held-out article is held out whole. Empty articles are skipped and counted."""

from __future__ import annotations

import hashlib
import json
from typing import Sequence

from absl import logging

from attnjax import fs


def read_articles(path) -> list[dict]:
  """The articles of a JSON-lines file, in order; a line that is not an article names the file and the line."""
  articles = []
  for number, line in enumerate(fs.read_lines(path), start=1):
    if not line.strip():
      continue
    try:
      record = json.loads(line)
    except ValueError as e:
      raise ValueError(f"{path}:{number}: not JSON ({e})") from None
    if not isinstance(record, dict) or not isinstance(record.get("text"), str):
      raise ValueError(f"{path}:{number}: expected an object with a string 'text'")
    articles.append({"title": str(record.get("title", number)), "text": record["text"]})
  return articles


def article_splits(path, heldout: dict[str, float], seed: int = 0, max_articles: int = 0) -> dict[str, list[str]]:
  """:func:`split_articles` of the (first ``max_articles``, 0: all) articles of ``path``."""
  articles = read_articles(path)
  return split_articles(articles[:max_articles] if max_articles else articles, heldout, seed)


def split_articles(articles: Sequence[dict], heldout: dict[str, float], seed: int = 0) -> dict[str, list[str]]:
  """``{split: [text, ...]}``: each held-out split gets the articles whose title hashes into its share, the rest is
  "train". Empty articles are skipped and counted in the log."""
  if sum(heldout.values()) >= 1.0 or any(share <= 0 for share in heldout.values()):
    raise ValueError(f"data.heldout: shares must be positive and sum to less than 1, got {heldout}")
  bounds, total = [], 0.0
  for name, share in heldout.items():
    total += share
    bounds.append((total, name))
  splits: dict[str, list[str]] = {"train": [], **{name: [] for name in heldout}}
  empty = 0
  for article in articles:
    if not article["text"].strip():
      empty += 1
      continue
    digest = hashlib.sha256(f"{seed}:{article['title']}".encode()).digest()
    u = int.from_bytes(digest[:8], "big") / 2**64
    name = next((n for bound, n in bounds if u < bound), "train")
    splits[name].append(article["text"])
  if empty:
    logging.info("mlm data: %d empty article(s) skipped", empty)
  return splits
