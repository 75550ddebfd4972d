"""Translate (or summarize) sentences with a trained workdir, as fairseq-interactive and OpenNMT's translate do.

    python -m attnjax.translate --workdir=DIR [--input=FILE] [--output=FILE] [--checkpoint=best|latest|STEP]
                                [--average_last=N] [--beam_size=4] [--alpha=0.6] [--n_best=1] [--batch_size=64]
    echo "A man is riding a bike ." | python -m attnjax.translate --workdir=runs/multi30k

``--workdir`` may also be a Hugging Face checkpoint directory that ``transformers`` wrote (a Marian or Pegasus
model: opus-mt's, say; :mod:`attnjax.transfer.published`): its tokenizer, and its ``generation_config.json`` for what
the flags leave unset, so that the output is the library's ``generate``.

Reads one sentence per line (stdin, or ``--input``: a local path or a bucket URL, gzipped or not) and writes one
translation per line in the same order (stdout, or ``--output``). With ``--n_best=K > 1`` every input gives K lines
``<input line number>\\t<score>\\t<hypothesis>``, best first (the score is the length-normalised log-probability).
Loads only the vocabulary and the parameters of the workdir (see :func:`attnjax.trained.load_workdir`); decoding is
sharded over every device. Empty lines give empty translations; lines longer than ``data.max_src_len`` tokens are
truncated (and counted on stderr).
"""

from __future__ import annotations

import sys

from absl import app, flags

from attnjax import cli
from attnjax import fs, inference, trained
from attnjax.data import squad
from attnjax.runtime.processes import quiet_orbax_logging

_WORKDIR = flags.DEFINE_string("workdir", None, "training workdir (config.json, vocabulary, checkpoints/)")
_INPUT = flags.DEFINE_string("input", None, "file with one source sentence per line, may be gzipped (default: stdin)")
_OUTPUT = flags.DEFINE_string("output", None, "where the translations go (default: stdout)")
_CHECKPOINT = flags.DEFINE_string("checkpoint", "best", "'best', 'latest' or a step number")
_AVERAGE_LAST = flags.DEFINE_integer("average_last", None, "average the parameters of the last N checkpoints")
_BEAM_SIZE = flags.DEFINE_integer("beam_size", None, "beam size (default: the workdir's eval.beam_size)")
_ALPHA = flags.DEFINE_float("alpha", None, "length-penalty exponent (default: the workdir's eval.alpha)")
_N_BEST = flags.DEFINE_integer("n_best", 1, "hypotheses per sentence (<= beam size)")
_DECODE = flags.DEFINE_enum("decode", None, ["beam", "greedy"], "search (default: the workdir's eval.decode)")
_BATCH_SIZE = flags.DEFINE_integer("batch_size", None, "sentences per decoding step (default: eval.batch_size)")


def translate_lines(workdir: str, lines: list[str], *, checkpoint: str = "best", average_last: int | None = None,
                    n_best: int = 1, eval_overrides: dict | None = None) -> inference.Translations:
  """Translations of ``lines`` by the workdir's model (see the module docstring); ``workdir`` may be a Hugging Face
  checkpoint directory (:func:`attnjax.trained.load_config`)."""
  config = trained.load_config(workdir)
  if config.data.source in squad.QA_SOURCES:
    raise ValueError(f"{workdir} holds an extractive QA model (model.name={config.model.name!r}): it answers "
                     "questions about a context, use python -m attnjax.evaluate")
  for key, value in (eval_overrides or {}).items():
    if value is not None:
      config.eval[key] = value
  loaded = trained.load_workdir(workdir, checkpoint=checkpoint, average_last=average_last, config=config)
  decoder = inference.decoder_for(loaded.model, loaded.mesh, config.eval, vocab_size=loaded.vocabularies.tgt.size,
                                n_best=n_best)
  return inference.translate_texts(decoder, loaded.params, loaded.vocabularies.src, loaded.vocabularies.tgt, lines,
                                   max_src_len=config.data.max_src_len, batch_size=config.eval.batch_size)


def format_output(out: inference.Translations, n_best: int) -> str:
  if n_best == 1:
    return "".join(h + "\n" for h in out.hypotheses)
  return "".join(f"{i}\t{score:.4f}\t{hypothesis}\n" for i, hypotheses in enumerate(out.nbest)
                 for hypothesis, score in hypotheses)


def _read_input(path: str) -> str:
  """The text of ``path``, gunzipped if it is gzip (as the data readers do): a split's own ``test.en.gz`` in a
  bucket can be translated as it is."""
  with fs.open_binary(path) as f:
    return f.read().decode("utf-8")


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f"unexpected arguments: {argv[1:]}")
  quiet_orbax_logging()
  text = _read_input(_INPUT.value) if _INPUT.value else sys.stdin.read()
  lines = text.split("\n")
  if lines and lines[-1] == "":
    lines.pop()  # the newline that ends the last line does not start another
  lines = [line[:-1] if line.endswith("\r") else line for line in lines]
  overrides = {"beam_size": _BEAM_SIZE.value, "alpha": _ALPHA.value, "decode": _DECODE.value,
               "batch_size": _BATCH_SIZE.value}
  out = translate_lines(_WORKDIR.value, lines, checkpoint=_CHECKPOINT.value, average_last=_AVERAGE_LAST.value,
                        n_best=_N_BEST.value, eval_overrides=overrides)
  if out.truncated_sources:
    print(f"attnjax.translate: {out.truncated_sources} of {len(lines)} lines were longer than the model's "
          "data.max_src_len and were truncated", file=sys.stderr)
  result = format_output(out, _N_BEST.value)
  if _OUTPUT.value:
    fs.write_text(_OUTPUT.value, result)
  else:
    sys.stdout.write(result)


def run() -> None:
  """The command line: the ``attnjax-translate`` console script, and ``python -m attnjax.translate``."""
  flags.mark_flag_as_required("workdir")
  cli.run(main)


if __name__ == "__main__":
  run()
