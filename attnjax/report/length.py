"""BLEU by source-sentence length (Bahdanau et al. 2015, Fig. 2, on the runs' own test translations).

Each evaluated translation run's hypotheses file (``hypotheses.<split>.step<N>.txt``, one line per example, written
by ``attnjax.evaluate``) is paired with its split's sources and references, read again through the run's own data
config (``attnjax.data.tasks.load_split``), and the examples are bucketed by the number of whitespace-separated words
of the source. Each bucket gets its own corpus BLEU (sacreBLEU, default settings), so a bucket's score is the BLEU of
those sentences alone, as in the paper's figure; each bucket's sentence count is printed beside it.

A run whose data cannot be found, or whose hypotheses file does not have one line per example, is left out with the
reason logged; the rest of the report does not depend on it.
"""

from __future__ import annotations

import math

from absl import logging

from attnjax import fs

# Upper bounds (inclusive) of the source-length buckets, in words; the last bucket is open. Multi30k's sources have a
# median of 12 words and a 99th percentile near 30 (the paper's WMT buckets ran to 60 words).
EDGES = (8, 11, 14, 18, 24)


def bucket_names(edges=EDGES) -> list[str]:
  names, low = [], 1
  for high in edges:
    names.append(f"{low}-{high}")
    low = high + 1
  return names + [f"≥{low}"]


def bucket_of(words: int, edges=EDGES) -> int:
  for i, high in enumerate(edges):
    if words <= high:
      return i
  return len(edges)


def bleu_by_length(sources: list[str], hypotheses: list[str], references: list[str], edges=EDGES) -> list[dict]:
  """Per bucket: ``{"bucket", "sentences", "bleu"}`` (``bleu`` None for an empty bucket)."""
  import sacrebleu  # pylint: disable=g-import-not-at-top
  if not len(sources) == len(hypotheses) == len(references):
    raise ValueError(f"bleu_by_length: {len(sources)} sources, {len(hypotheses)} hypotheses and {len(references)} "
                     "references; they must pair up line by line")
  groups: list[tuple[list[str], list[str]]] = [([], []) for _ in range(len(edges) + 1)]
  for source, hypothesis, reference in zip(sources, hypotheses, references):
    hyps, refs = groups[bucket_of(len(source.split()), edges)]
    hyps.append(hypothesis)
    refs.append(reference)
  return [{"bucket": name, "sentences": len(hyps),
           "bleu": sacrebleu.corpus_bleu(hyps, [refs]).score if hyps else None}
          for name, (hyps, refs) in zip(bucket_names(edges), groups)]


def _hypotheses_file(record: dict):
  written = (record.get("metrics") or {}).get("hypotheses")
  if not written:
    return None
  return fs.join(record["workdir"], fs.path(written).name)  # where evaluate wrote it, seen from this workdir


def run_buckets(record: dict, edges=EDGES) -> list[dict] | None:
  """:func:`bleu_by_length` of one :func:`attnjax.report.runs.read_run` record, or None (reason logged)."""
  if record.get("kind") != "translation" or record.get("state") != "evaluated" or not record.get("config"):
    return None
  path = _hypotheses_file(record)
  if path is None or not fs.exists(path):
    logging.warning("BLEU by length: %s has no hypotheses file", record["run"])
    return None
  from attnjax import config as config_lib  # pylint: disable=g-import-not-at-top
  from attnjax.data import tasks  # pylint: disable=g-import-not-at-top
  import ml_collections  # pylint: disable=g-import-not-at-top
  data = config_lib.base_config().data
  with data.unlocked():
    data.update(ml_collections.ConfigDict(record["config"]["data"]))
  try:
    tasks.resolve_data_dir(data, record["workdir"])
    examples = tasks.load_split(data, record["split"])
  except Exception as e:  # pylint: disable=broad-except  (an optional section: never the report's failure)
    logging.warning("BLEU by length: %s: cannot read its %s split (%s)", record["run"], record["split"], e)
    return None
  hypotheses = fs.read_text(path).split("\n")[:-1]
  if len(hypotheses) != len(examples):
    logging.warning("BLEU by length: %s: %d hypotheses for %d examples in %s", record["run"], len(hypotheses),
                    len(examples), path)
    return None
  return bleu_by_length([s for s, _ in examples], hypotheses, [t for _, t in examples], edges)


def length_rows(records: list[dict], edges=EDGES) -> list[tuple[dict, list[dict]]]:
  """``[(record, buckets)]`` for every run that :func:`run_buckets` can score."""
  out = []
  for record in records:
    buckets = run_buckets(record, edges)
    if buckets is not None:
      out.append((record, buckets))
  return out


def length_table(rows: list[tuple[dict, list[dict]]]) -> str:
  names = [b["bucket"] for b in rows[0][1]]
  header = ["model", "run", "split"] + [f"{n} words" for n in names]
  lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
  for record, buckets in rows:
    cells = [record["label"] or "—", record["run"], record["split"] or "—"]
    cells += ["—" if b["bleu"] is None else f"{b['bleu']:.2f} ({b['sentences']})" for b in buckets]
    lines.append("| " + " | ".join(cells) + " |")
  return "\n".join(lines)


def plot_length(rows: list[tuple[dict, list[dict]]], path: fs.PathLike) -> None:
  """BLEU against the source-length bucket, a line per run (the paper's Fig. 2)."""
  from attnjax.report.plots import _figure, _write_png  # pylint: disable=g-import-not-at-top
  names = [b["bucket"] for b in rows[0][1]]
  figure = _figure(6.0, 3.6)
  ax = figure.add_subplot()
  for record, buckets in rows:
    values = [math.nan if b["bleu"] is None else b["bleu"] for b in buckets]
    label = record["label"] if sum(r["label"] == record["label"] for r, _ in rows) == 1 else record["run"]
    ax.plot(range(len(names)), values, "o-", markersize=4, label=label)
  ax.set_xticks(range(len(names)), names)
  ax.set_xlabel("source sentence length (words)")
  ax.set_ylabel("BLEU of the bucket")
  ax.grid(alpha=0.3)
  ax.legend(fontsize=7)
  ax.set_title("BLEU by source length", fontsize=9)
  _write_png(figure, path)
