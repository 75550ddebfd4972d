"""Semantic textual similarity with a pre-trained encoder: cosine Spearman (and Pearson) on an STS-format file.

    python -m attnjax.sts --model_dir=DIR --data=../shared/data/stsbenchmark/sts-test.csv

``--model_dir`` is a Hugging Face BERT checkpoint (``config.json``, ``model.safetensors``, ``tokenizer.json`` or
``vocab.txt``; :mod:`attnjax.transfer.bert` validates it before anything runs). Each sentence is embedded by mean
pooling over its real tokens, L2-normalised, at most ``--max_length`` WordPiece tokens; every pair of the file is
scored. ``--output`` also writes the scores as JSON: the record of a run (``results/sts/``), with the checkpoint's and
the data file's sha256 so that a reader can tell which bytes were scored::

    {"cosine_spearman", "cosine_pearson", "pairs", "model_dir", "model_sha256" (of model.safetensors),
     "data", "data_sha256", "max_length", "command"}
"""

from __future__ import annotations

import hashlib
import json
import sys

from absl import app, flags

from attnjax import cli, fs
from attnjax.progress import Progress

_MODEL_DIR = flags.DEFINE_string("model_dir", None, "a Hugging Face BERT checkpoint directory")
_DATA = flags.DEFINE_string("data", None, "an STS Benchmark file (tab-separated; score in field 5, sentences in 6-7)")
_MAX_LENGTH = flags.DEFINE_integer("max_length", 256, "WordPiece tokens per sentence, [CLS] and [SEP] counted")
_BATCH_SIZE = flags.DEFINE_integer("batch_size", 64, "sentences per forward pass")
_OUTPUT = flags.DEFINE_string("output", None, "also write the scores here (JSON)")


def sha256(path) -> str:
  """The hex sha256 of a file's bytes (local or a URL)."""
  digest = hashlib.sha256()
  with fs.open_binary(path) as f:
    for block in iter(lambda: f.read(1 << 20), b""):
      digest.update(block)
  return digest.hexdigest()


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f"unexpected arguments: {argv[1:]}")
  from attnjax.transfer import bert, sentence  # pylint: disable=g-import-not-at-top
  module, params, tokenizer = bert.import_bert(_MODEL_DIR.value, dropout_rate=0.0, attention_dropout_rate=0.0)
  pairs = sentence.read_sts(_DATA.value)
  texts = [p.sentence1 for p in pairs] + [p.sentence2 for p in pairs]
  vectors = sentence.embed_sentences(module, params, tokenizer, texts, max_length=_MAX_LENGTH.value,
                                     batch_size=_BATCH_SIZE.value, progress=Progress("embedding", len(texts),
                                                                                    "sentences"))
  scores = sentence.sts_scores(vectors[:len(pairs)], vectors[len(pairs):], [p.score for p in pairs])
  scores.update(model_dir=str(_MODEL_DIR.value),
                model_sha256=sha256(fs.join(_MODEL_DIR.value, "model.safetensors")), data=str(_DATA.value),
                data_sha256=sha256(_DATA.value), max_length=_MAX_LENGTH.value,
                command=" ".join(["python -m attnjax.sts", *sys.argv[1:]]))
  print(f"{_DATA.value}: {scores['pairs']} pairs, cosine Spearman {scores['cosine_spearman']:.5f}, "
        f"cosine Pearson {scores['cosine_pearson']:.5f}")
  if _OUTPUT.value:
    fs.write_text(_OUTPUT.value, json.dumps(scores, indent=1) + "\n")


def run() -> None:
  """The command line: the ``attnjax-sts`` console script, and ``python -m attnjax.sts``."""
  flags.mark_flags_as_required(["model_dir", "data"])
  cli.run(main)


if __name__ == "__main__":
  run()
