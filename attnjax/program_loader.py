"""Runs a decoding program that ``python -m attnjax.export_program`` wrote, without attnjax: JAX, NumPy and (for a
SentencePiece vocabulary) ``sentencepiece`` are all it imports. The exporter copies this file into the program's
directory as ``run_program.py``.

    python run_program.py PROGRAM_DIR < sources.txt > outputs.txt       # one output a line, in order
    python -c "from run_program import Program; print(Program('PROGRAM_DIR').translate(['a source']))"

The directory holds ``program.json`` (what was exported, the vocabularies' kinds and files, the source widths),
``params.npz`` (the parameters, flattened in the program's argument order) and one serialized StableHLO program
(``jax.export``) a source width, each taking ``(parameters..., source ids [batch, width])`` for any batch and
returning ``(tokens [batch, n_best, length], scores [batch, n_best])``. Sources are sorted by length and decoded in
batches at the smallest width that holds them, as attnjax decodes; an empty source gives an empty output, and a
source longer than the model's ``max_src_len`` tokens is truncated (their count goes to stderr).
"""

from __future__ import annotations

import json
import os
import sys

import jax
import numpy as np

FORMAT, VERSION = "attnjax-program", 1


class _Chars:
  """A character vocabulary: id = index + the reserved ids."""

  def __init__(self, path, reserved, unk_id, unk_text):
    with open(path, encoding="utf-8") as f:
      self.chars = json.load(f)["chars"]
    self.reserved, self.unk_id, self.unk_text = reserved, unk_id, unk_text
    self.ids = {c: i + reserved for i, c in enumerate(self.chars)}

  def encode(self, text):
    return [self.ids.get(c, self.unk_id) for c in text]

  def decode(self, ids):
    return "".join(self.unk_text if i == self.unk_id else self.chars[i - self.reserved] for i in ids
                   if i >= self.reserved or i == self.unk_id)


class _SentencePiece:
  def __init__(self, path):
    import sentencepiece  # pylint: disable=g-import-not-at-top
    self.sp = sentencepiece.SentencePieceProcessor(model_file=path)

  def encode(self, text):
    return self.sp.encode(text, out_type=int)

  def decode(self, ids):
    return self.sp.decode(list(ids))


class Program:
  """An exported decoding program, loaded: :meth:`translate` decodes a list of strings."""

  def __init__(self, directory: str):
    with open(os.path.join(directory, "program.json"), encoding="utf-8") as f:
      meta = json.load(f)
    if meta.get("format") != FORMAT or meta.get("version") != VERSION:
      raise ValueError(f"{directory}/program.json: not an {FORMAT} version {VERSION} program")
    self.meta = meta
    with np.load(os.path.join(directory, meta["params"])) as f:
      self.params = [jax.device_put(f[name]) for name in sorted(f.files)]
    self.programs = {}
    for width, name in meta["programs"].items():
      with open(os.path.join(directory, name), "rb") as f:
        self.programs[int(width)] = jax.export.deserialize(bytearray(f.read()))
    self.widths = sorted(self.programs)
    ids = meta["ids"]
    self.pad_id, self.bos_id, self.eos_id = ids["pad"], ids["bos"], ids["eos"]

    def vocabulary(spec):
      path = os.path.join(directory, spec["file"])
      if spec["kind"] == "sentencepiece":
        return _SentencePiece(path)
      return _Chars(path, ids["reserved"], ids["unk"], spec["unk_text"])

    self.source, self.target = vocabulary(meta["source_vocab"]), vocabulary(meta["target_vocab"])

  def _text(self, tokens):
    kept = []
    for i in tokens.tolist():
      if i == self.eos_id:
        break
      if i not in (self.pad_id, self.bos_id):
        kept.append(i)
    return self.target.decode(kept).replace("\n", " ")

  def translate(self, texts, batch_size: int = 64, n_best: bool = False):
    """The best output of each text, in order (``n_best=True``: each text's list of ``(output, score)``)."""
    max_len = self.meta["max_src_len"]
    encoded = [self.source.encode(t) for t in texts]
    truncated = sum(len(ids) > max_len for ids in encoded)
    if truncated:
      print(f"run_program: {truncated} of {len(texts)} sources are longer than the model's max_src_len={max_len} "
            "tokens and are truncated to it", file=sys.stderr)
    encoded = [ids[:max_len] for ids in encoded]
    results = [[("", 0.0)] * self.meta["n_best"] for _ in texts]
    order = sorted((i for i, ids in enumerate(encoded) if ids), key=lambda i: -len(encoded[i]))
    for begin in range(0, len(order), batch_size):
      chunk = order[begin:begin + batch_size]
      width = next(w for w in self.widths if w >= len(encoded[chunk[0]]))
      src = np.full((len(chunk), width), self.pad_id, np.int32)
      for row, i in enumerate(chunk):
        src[row, :len(encoded[i])] = encoded[i]
      tokens, scores = self.programs[width].call(self.params, src)
      tokens, scores = np.asarray(tokens), np.asarray(scores)
      for row, i in enumerate(chunk):
        results[i] = [(self._text(tokens[row, k]), float(scores[row, k])) for k in range(tokens.shape[1])]
    return results if n_best else [r[0][0] for r in results]


def main(argv) -> None:
  if len(argv) != 2:
    raise SystemExit(f"usage: python {os.path.basename(argv[0])} PROGRAM_DIR < sources > outputs")
  lines = sys.stdin.read().split("\n")
  if lines and lines[-1] == "":
    lines.pop()
  for output in Program(argv[1]).translate(lines):
    sys.stdout.write(output + "\n")


def run() -> None:
  """The command line: ``python run_program.py PROGRAM_DIR`` in the program's directory, or ``attnjax-run-program
  PROGRAM_DIR`` where attnjax is installed."""
  main(sys.argv)


if __name__ == "__main__":
  run()
