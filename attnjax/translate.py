"""Translate (or summarize) sentences with a trained workdir, as fairseq-interactive and OpenNMT's translate do.

    python -m attnjax.translate --workdir=DIR [--input=FILE] [--output=FILE] [--checkpoint=best|latest|STEP]
                                [--average_last=N] [--decode=beam|greedy|sample] [--beam_size=4] [--alpha=0.6]
                                [--n_best=1] [--min_len=N] [--no_repeat_ngram_size=N] [--max_len_a=A]
                                [--max_len_b=B] [--temperature=T] [--top_k=K] [--top_p=P] [--seed=S]
                                [--batch_size=64]
    echo "A man is riding a bike ." | python -m attnjax.translate --workdir=runs/multi30k
    python -m attnjax.translate --workdir=runs/multi30k              # interactive: a line in, its translation out
    python -m attnjax.translate --workdir=runs/multi30k --temperature=0.8 --n_best=4 < mono.en   # back-translation

``--workdir`` may also be a Hugging Face checkpoint directory that ``transformers`` wrote (a Marian or Pegasus
model: opus-mt's, say; :mod:`attnjax.transfer.published`): its tokenizer, and its ``generation_config.json`` for what
the flags leave unset, so that the output is the library's ``generate``.

Reads one sentence per line and writes one translation per line in the same order (stdout, or ``--output``). From
stdin it streams: each line is answered as soon as it has been decoded, with the lines already waiting decoded
together (up to ``--batch_size``), so it works interactively and between two processes of a pipe. ``--input`` (a
local path or a bucket URL, gzipped or not) is read whole and decoded longest first. With ``--n_best=K > 1`` every
input gives K lines ``<input line number>\\t<score>\\t<hypothesis>`` (beam search: best first, the score the
length-normalised log-probability; sampling: K samples, each with its log-probability). The options a flag leaves
unset are the workdir's (``config.eval``); ``--temperature``, ``--top_k`` or ``--top_p`` alone sample
(:class:`attnjax.serving.Translator`).

Nothing is dropped and nothing hangs: an empty line gives an empty translation; a line longer than the model's
``data.max_src_len`` tokens is truncated and named on stderr; invalid UTF-8 is named on stderr (its line number) and
decoded with U+FFFD in place of the bad bytes; a closed output ends the program with one line on stderr.
"""

from __future__ import annotations

import os
import queue
import sys
import threading
from typing import Iterator

from absl import app, flags

from attnjax import cli
from attnjax import fs, inference, serving
from attnjax.runtime.processes import quiet_orbax_logging

_WORKDIR = flags.DEFINE_string("workdir", None, "training workdir (config.json, vocabulary, checkpoints/)")
_INPUT = flags.DEFINE_string("input", None, "file with one source sentence per line, may be gzipped (default: stdin, "
                             "streamed)")
_OUTPUT = flags.DEFINE_string("output", None, "where the translations go (default: stdout)")
_CHECKPOINT = flags.DEFINE_string("checkpoint", "best", "'best', 'latest' or a step number")
_AVERAGE_LAST = flags.DEFINE_integer("average_last", None, "average the parameters of the last N checkpoints")
_WEIGHTS = flags.DEFINE_enum("weights", "auto", ["auto", "average", "params"], "a run's moving average of its "
                             "parameters or the parameters (attnjax.trained.load_workdir)")
_DECODE = flags.DEFINE_enum("decode", None, list(inference.DECODES), "search (default: the workdir's eval.decode; "
                            "sample when a sampling flag is given)")
_BEAM_SIZE = flags.DEFINE_integer("beam_size", None, "beam size (default: the workdir's eval.beam_size)")
_ALPHA = flags.DEFINE_float("alpha", None, "length-penalty exponent (default: the workdir's eval.alpha)")
_N_BEST = flags.DEFINE_integer("n_best", 1, "hypotheses per sentence (beam: <= beam size; sampling: samples)")
_MIN_LEN = flags.DEFINE_integer("min_len", None, "EOS banned before this many tokens (default: eval.min_len)")
_NO_REPEAT = flags.DEFINE_integer("no_repeat_ngram_size", None, "no n-gram of this size twice in an output (0: off; "
                                  "default: eval.no_repeat_ngram_size)")
_MAX_LEN_A = flags.DEFINE_float("max_len_a", None, "an output has at most a * source length + b tokens")
_MAX_LEN_B = flags.DEFINE_integer("max_len_b", None, "see --max_len_a")
_TEMPERATURE = flags.DEFINE_float("temperature", None, "sampling temperature (> 0)")
_TOP_K = flags.DEFINE_integer("top_k", None, "sample among the k most probable tokens (0: all)")
_TOP_P = flags.DEFINE_float("top_p", None, "sample among the most probable tokens of total probability p (1: all)")
_SEED = flags.DEFINE_integer("seed", 0, "sampling seed: a sentence's k-th sample depends only on it and the sentence")
_BATCH_SIZE = flags.DEFINE_integer("batch_size", None, "sentences per decoding step (default: eval.batch_size)")


def translate_lines(workdir: str, lines: list[str], *, checkpoint: str = "best", average_last: int | None = None,
                    n_best: int = 1, eval_overrides: dict | None = None) -> inference.Translations:
  """Translations of ``lines`` by the workdir's model, loaded for this one call (a :class:`attnjax.serving.Translator`
  loads once for many); ``eval_overrides``: decoding options by name (``decode``, ``beam_size``, ``alpha``, ...)."""
  options = {k: v for k, v in (eval_overrides or {}).items() if v is not None}
  return serving.load(workdir, checkpoint=checkpoint, average_last=average_last).translate(lines, n_best=n_best,
                                                                                           **options)


def format_output(out: inference.Translations, n_best: int, first_line: int = 0) -> str:
  """Text of the translations: a line each, or with ``n_best > 1`` ``<line number>\\t<score>\\t<hypothesis>`` lines
  numbered from ``first_line``."""
  if n_best == 1:
    return "".join(h + "\n" for h in out.hypotheses)
  return "".join(f"{first_line + i}\t{score:.4f}\t{hypothesis}\n" for i, hypotheses in enumerate(out.nbest)
                 for hypothesis, score in hypotheses)


def read_lines(path: str, warn) -> list[str]:
  """The lines of ``path``, gunzipped if it is gzip (as the data readers do: a split's own ``test.en.gz`` in a
  bucket can be translated as it is), each as :func:`decode_line` reads it."""
  with fs.open_binary(path) as f:
    data = f.read()
  raw = data.split(b"\n")
  if raw and raw[-1] == b"":
    raw.pop()  # the newline that ends the last line does not start another
  return [decode_line(line, number, warn) for number, line in enumerate(raw)]


def decode_line(raw: bytes, number: int, warn) -> str:
  """One input line's text without its line ending; invalid UTF-8 is named through ``warn`` and replaced."""
  raw = raw.rstrip(b"\n")
  raw = raw[:-1] if raw.endswith(b"\r") else raw
  try:
    return raw.decode("utf-8")
  except UnicodeDecodeError as e:
    warn(f"line {number + 1} is not valid UTF-8 (byte {raw[e.start]:#04x} at {e.start}): its invalid bytes are "
         "read as U+FFFD")
    return raw.decode("utf-8", errors="replace")


def _raw_lines(fd: int) -> Iterator[bytes]:
  """The lines of file descriptor ``fd`` as they arrive (``os.read`` returns what is there; no buffered reader whose
  lock a blocked thread would hold at exit); the last one without its newline if the input ends without one."""
  pending = b""
  while True:
    chunk = os.read(fd, 1 << 16)
    if not chunk:
      break
    pending += chunk
    *complete, pending = pending.split(b"\n")
    yield from complete
  if pending:
    yield pending


def batches(fd: int, batch_size: int, warn) -> Iterator[list[str]]:
  """The lines of file descriptor ``fd`` as they arrive, in batches of what is waiting (at most ``batch_size``): a
  reader thread queues each line as soon as it is read, and a batch is taken as soon as one line is there."""
  lines: queue.Queue = queue.Queue()
  end = object()

  def read():
    try:
      for number, raw in enumerate(_raw_lines(fd)):
        lines.put(decode_line(raw, number, warn))
    except BaseException as e:  # pylint: disable=broad-except
      lines.put(e)
    lines.put(end)

  threading.Thread(target=read, daemon=True, name="stdin").start()
  while True:
    item = lines.get()
    batch = []
    while True:
      if item is end:
        if batch:
          yield batch
        return
      if isinstance(item, BaseException):
        raise item
      batch.append(item)
      if len(batch) >= batch_size:
        break
      try:
        item = lines.get_nowait()
      except queue.Empty:
        break
    yield batch


class OutputClosed(Exception):
  """The reader of the output went away (a closed pipe)."""


def _write(text: str) -> None:
  try:
    sys.stdout.write(text)
    sys.stdout.flush()
  except BrokenPipeError:
    # nothing more can be written; stdout goes to /dev/null so that Python's exit does not fail flushing it again
    os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    raise OutputClosed() from None


def _warn(message: str) -> None:
  print(f"attnjax.translate: {message}", file=sys.stderr, flush=True)


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f"unexpected arguments: {argv[1:]}")
  quiet_orbax_logging()
  model = serving.load(_WORKDIR.value, checkpoint=_CHECKPOINT.value, average_last=_AVERAGE_LAST.value,
                       weights=_WEIGHTS.value)
  if not isinstance(model, serving.Translator):
    raise app.UsageError(f"--workdir={_WORKDIR.value} holds a decoder_lm: continue text with python -m "
                         "attnjax.generate")
  options = dict(decode=_DECODE.value, beam_size=_BEAM_SIZE.value, alpha=_ALPHA.value, n_best=_N_BEST.value,
                 min_len=_MIN_LEN.value, no_repeat_ngram_size=_NO_REPEAT.value, max_len_a=_MAX_LEN_A.value,
                 max_len_b=_MAX_LEN_B.value, temperature=_TEMPERATURE.value, top_k=_TOP_K.value, top_p=_TOP_P.value,
                 seed=_SEED.value)
  model.search(**{k: v for k, v in options.items() if k != "seed"})  # a bad option fails before any input is read
  batch_size = int(_BATCH_SIZE.value or model.config.eval.batch_size)
  if _INPUT.value:
    source = iter([read_lines(_INPUT.value, _warn)])
  else:
    source = batches(sys.stdin.fileno(), batch_size, _warn)
  done, truncated, written = 0, 0, []
  try:
    for lines in source:
      out = model.translate(lines, batch_size=batch_size, log_progress=bool(_INPUT.value), **options)
      if out.truncated_sources:
        truncated += out.truncated_sources
        _warn(f"{out.truncated_sources} of lines {done + 1}-{done + len(lines)} were longer than the model's "
              f"data.max_src_len={model.max_src_len} tokens and were truncated")
      text = format_output(out, _N_BEST.value, first_line=done)
      if _OUTPUT.value:
        written.append(text)
      else:
        _write(text)
      done += len(lines)
  except OutputClosed:
    _warn(f"the output was closed after {done} translated lines; stopping")
    sys.exit(1)
  if _OUTPUT.value:
    fs.write_text(_OUTPUT.value, "".join(written))
  if truncated:
    _warn(f"{truncated} of {done} lines were longer than the model's data.max_src_len and were truncated")


def run() -> None:
  """The command line: the ``attnjax-translate`` console script, and ``python -m attnjax.translate``."""
  flags.mark_flag_as_required("workdir")
  cli.run(main, cpu_cores=True)


if __name__ == "__main__":
  run()
