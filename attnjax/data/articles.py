"""Documents of plain text for pre-training (masked LM, causal LM): a JSON-lines file of articles (``{"id", "title",
"text"}``, the Wikipedia extraction's format) or a plain-text file (one document per line, or documents separated by
blank lines), split into train / validation / test by a hash of each article's title, so that a held-out article is
held out whole. Empty articles are skipped and counted."""

from __future__ import annotations

import hashlib
import json
from typing import Sequence

from absl import logging

from attnjax import fs


TEXT_FORMATS = ("auto", "jsonl", "lines", "paragraphs")
DEFAULT_TFDS_SPLITS = {"train": "train", "validation": "validation"}  # tfds' names; validation carved if missing


def read_articles(path, *, text_format: str = "auto", text_key: str = "text", title_key: str = "title") -> list[dict]:
  """The documents of ``path``, in order, as ``{"title", "text"}``; a line that is not a document names the file and
  the line.

  ``text_format``: "jsonl" (one JSON object per line, its ``text_key`` the text and its ``title_key`` the title,
  the line number where it has none), "lines" (plain text, one document per line), "paragraphs" (plain text,
  documents separated by blank lines, their lines kept), or "auto": "jsonl" for a ``.jsonl`` / ``.json`` name
  (optionally ``.gz``), else plain text, "paragraphs" if the file has a blank line between two texts and "lines" if
  not (the choice is logged). A plain-text document's title is its text, so that the held-out split of a document
  depends on the document alone.
  """
  if text_format not in TEXT_FORMATS:
    raise ValueError(f"config.data.text_format must be one of {TEXT_FORMATS}, got {text_format!r}")
  lines = fs.read_lines(path)
  if text_format == "auto":
    name = str(path).lower().removesuffix(".gz")
    if name.endswith((".jsonl", ".json")):
      text_format = "jsonl"
    else:
      stripped = [bool(line.strip()) for line in lines]
      first = stripped.index(True) if any(stripped) else 0
      last = len(stripped) - stripped[::-1].index(True) if any(stripped) else 0
      text_format = "paragraphs" if not all(stripped[first:last]) else "lines"
      logging.info("%s: plain text, read as %s (config.data.text_format)", path,
                   "blank-line separated documents" if text_format == "paragraphs" else "one document per line")
  if text_format == "jsonl":
    return _json_articles(lines, path, text_key, title_key)
  if text_format == "lines":
    return [{"title": line, "text": line} for line in lines]
  documents, block = [], []
  for line in lines + [""]:
    if line.strip():
      block.append(line)
    elif block:
      documents.append("\n".join(block))
      block = []
  return [{"title": text, "text": text} for text in documents]


def _json_articles(lines, path, text_key: str, title_key: str) -> list[dict]:
  articles = []
  for number, line in enumerate(lines, start=1):
    if not line.strip():
      continue
    try:
      record = json.loads(line)
    except ValueError as e:
      raise ValueError(f"file {path}, line {number}: invalid JSON ({e})") from None
    if not isinstance(record, dict):
      raise ValueError(f"file {path}, line {number}: expected a JSON object with a string {text_key!r}, got "
                       f"{type(record).__name__}")
    if text_key not in record:
      raise ValueError(f"file {path}, line {number}: missing key {text_key!r} (keys: {sorted(record)}; "
                       "config.data.text_key names the text's key)")
    if not isinstance(record[text_key], str):
      raise ValueError(f"file {path}, line {number}: {text_key!r} must be a string, got "
                       f"{type(record[text_key]).__name__}")
    articles.append({"title": str(record.get(title_key, number)), "text": record[text_key]})
  return articles


def article_splits(path, heldout: dict[str, float], seed: int = 0, max_articles: int = 0,
                   **text_options) -> dict[str, list[str]]:
  """:func:`split_articles` of the (first ``max_articles``, 0: all) articles of ``path`` (read by
  :func:`read_articles` with ``text_options``)."""
  articles = read_articles(path, **text_options)
  return split_articles(articles[:max_articles] if max_articles else articles, heldout, seed)


def document_splits(data_cfg, default_heldout: dict[str, float]) -> dict[str, list[str]]:
  """The documents of every split ``config.data`` names, as texts: ``path`` (one file, split by title hash into
  train and ``heldout``) or ``splits`` (split -> file; a validation split the files lack is carved out of train as
  :func:`attnjax.data.config_keys.file_splits` does, by the same title hash as ``path``). The documents are read by
  :func:`read_articles` with ``text_format``, ``text_key`` and ``title_key``; ``max_articles`` cuts each file. With
  ``tfds_name``, ``splits`` names tensorflow-datasets splits (default train and validation) and the documents are
  their ``text_key`` feature."""
  from attnjax.data.config_keys import DEFAULT_VALIDATION_SHARE, get, in_dir  # pylint: disable=g-import-not-at-top
  directory = get(data_cfg, "dir", "") or ""
  options = {"text_format": get(data_cfg, "text_format", "auto"), "text_key": get(data_cfg, "text_key", "text"),
             "title_key": get(data_cfg, "title_key", "title")}
  seed, cap = int(get(data_cfg, "split_seed", 0)), int(get(data_cfg, "max_articles", 0) or 0)
  path, splits, explicit = get(data_cfg, "path", None), get(data_cfg, "splits", None), get(data_cfg, "heldout", None)
  tfds_name = get(data_cfg, "tfds_name", None)
  if tfds_name is not None:  # a text feature of a tensorflow-datasets dataset, its splits by name
    from attnjax.data.tfds_sources import tfds_texts  # pylint: disable=g-import-not-at-top
    if path is not None:
      raise ValueError("config.data: set one of tfds_name (a tensorflow-datasets dataset) and path (a file)")
    splits = splits if splits is not None else DEFAULT_TFDS_SPLITS
    tfds_options = {"data_dir": get(data_cfg, "tfds_data_dir", None), "backend": get(data_cfg, "tfds_backend", "auto"),
                    "download": bool(get(data_cfg, "tfds_download", False))}
    read_file = lambda name: [{"title": text, "text": text}
                              for text in tfds_texts(tfds_name, name, options["text_key"], **tfds_options)]
  else:
    read_file = lambda name: read_articles(in_dir(directory, str(name)), **options)
  if (path is None) == (splits is None):
    raise ValueError(f"config.data: set exactly one of path (one file, held-out documents by title hash) and splits "
                     f"(split -> file) for source {get(data_cfg, 'source', None)!r}")
  if path is not None:
    heldout = dict((default_heldout if explicit is None else explicit).items())
    out = article_splits(in_dir(directory, str(path)), heldout, seed, cap, **options)
    where = {name: f"config.data.path={path!r}" for name in out}
  else:
    files = dict(splits.items())
    if "train" not in files:
      raise ValueError(f"config.data.splits must name a 'train' file, got {sorted(files)}")
    read = lambda name: read_file(name)[:cap or None]
    carve = ({k: v for k, v in dict(explicit.items()).items() if k not in files} if explicit is not None else
             ({} if "validation" in files else {"validation": DEFAULT_VALIDATION_SHARE}))
    out = split_articles(read(files["train"]), carve, seed)
    for split, name in files.items():
      if split != "train":
        out[split] = split_articles(read(name), {}, seed)["train"]
    where = {name: f"config.data.splits[{name!r}]={files.get(name, files['train'])!r}" for name in out}
  for split, texts in out.items():
    if not texts:
      raise ValueError(f"split {split!r} has no document ({where[split]}): the file is empty, or the held-out share "
                       "of its documents is too small for this many (config.data.heldout)")
  return out


def split_articles(articles: Sequence[dict], heldout: dict[str, float], seed: int = 0) -> dict[str, list[str]]:
  """``{split: [text, ...]}``: each held-out split gets the articles whose title hashes into its share, the rest is
  "train". Empty articles are skipped and counted in the log."""
  if sum(heldout.values()) >= 1.0 or any(share <= 0 for share in heldout.values()):
    raise ValueError(f"data.heldout: shares must be positive and sum to less than 1, got {heldout}")
  bounds, total = [], 0.0
  for name, share in sorted(heldout.items()):  # by name, as a ConfigDict gives them: any mapping splits alike
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
    logging.info("documents: %d empty one(s) skipped", empty)
  return splits
