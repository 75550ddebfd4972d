"""Text from a trained decoder-only language model.

    python -m attnjax.generate --workdir=runs/lm --prompt="The history of" --max_new_tokens=60
    python -m attnjax.generate --workdir=runs/lm --input=prompts.txt --temperature=0.8 --top_p=0.9 --num_samples=3
    echo "Anarchism is" | python -m attnjax.generate --workdir=runs/lm --temperature=0      # greedy
    python -m attnjax.generate --workdir=runs/lm --prompt="Anarchism is" --beam_size=4 --num_samples=2   # 2-best

Prompts come from ``--prompt`` (repeatable), ``--input`` (one a line) or stdin. Each prints as one line per sample:
the prompt and its continuation, up to ``--max_new_tokens`` tokens or the end of a document. Sampling (temperature,
top-k, top-p: :mod:`attnjax.generation`) is reproducible from ``--seed``.
"""

from __future__ import annotations

import sys

import jax
import numpy as np
from absl import app, flags

from attnjax import cli, fs
from attnjax.progress import Progress

_WORKDIR = flags.DEFINE_string("workdir", None, "a decoder_lm training workdir")
_PROMPT = flags.DEFINE_multi_string("prompt", [], "a prompt (repeatable)")
_INPUT = flags.DEFINE_string("input", None, "a file of prompts, one a line (default: --prompt, else stdin)")
_CHECKPOINT = flags.DEFINE_string("checkpoint", "best", "'best', 'latest' or a step number")
_MAX_NEW = flags.DEFINE_integer("max_new_tokens", 100, "tokens to generate after each prompt")
_TEMPERATURE = flags.DEFINE_float("temperature", 1.0, "softmax temperature; 0 = greedy")
_TOP_K = flags.DEFINE_integer("top_k", 0, "sample among the k most probable tokens (0: all)")
_TOP_P = flags.DEFINE_float("top_p", 1.0, "sample among the most probable tokens of total probability p (1: all)")
_NUM_SAMPLES = flags.DEFINE_integer("num_samples", 1, "continuations per prompt")
_SEED = flags.DEFINE_integer("seed", 0, "the sampling seed")
_BEAM_SIZE = flags.DEFINE_integer("beam_size", 0, "beam search with this many beams instead of sampling (0: sample; "
                                  "--num_samples is then the n-best list)")
_ALPHA = flags.DEFINE_float("alpha", 0.6, "beam search: the GNMT length-penalty exponent")


def _prompts() -> list[str]:
  if _INPUT.value:
    return [line for line in fs.read_lines(_INPUT.value) if line.strip()]
  if _PROMPT.value:
    return list(_PROMPT.value)
  return [line for line in sys.stdin.read().split("\n") if line.strip()]


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f"unexpected arguments: {argv[1:]}")
  if _TEMPERATURE.value < 0 or not 0 < _TOP_P.value <= 1 or _TOP_K.value < 0 or _NUM_SAMPLES.value < 1:
    raise ValueError("--temperature must be >= 0, --top_p in (0, 1], --top_k >= 0 and --num_samples >= 1")
  from attnjax import generation, trained  # pylint: disable=g-import-not-at-top
  from attnjax.tokens import BOS_ID  # pylint: disable=g-import-not-at-top
  loaded = trained.load_workdir(_WORKDIR.value, checkpoint=_CHECKPOINT.value)
  if loaded.config.model.name != "decoder_lm":
    raise ValueError(f"--workdir={_WORKDIR.value}: model.name is {loaded.config.model.name!r}; attnjax.generate "
                     "continues text with a decoder_lm (attnjax.translate decodes the encoder-decoder models)")
  vocab = loaded.vocabularies.tgt
  prompts = _prompts()
  progress = Progress("generating", len(prompts), "prompts")
  key = jax.random.PRNGKey(_SEED.value)
  for i, text in enumerate(prompts):
    if _BEAM_SIZE.value:
      prompt = np.asarray([[BOS_ID] + vocab.encode(text)], np.int32)
      out = generation.beam(loaded.model, loaded.params, prompt, max_new_tokens=_MAX_NEW.value,
                            beam_size=_BEAM_SIZE.value, alpha=_ALPHA.value, n_best=_NUM_SAMPLES.value,
                            vocab_size=vocab.size).tokens[0]
      _print(text, out, vocab)
      progress.update(i + 1)
      continue
    ids = np.asarray([[BOS_ID] + vocab.encode(text)] * _NUM_SAMPLES.value, np.int32)
    out = generation.generate(loaded.model, loaded.params, ids, jax.random.fold_in(key, i),
                              max_new_tokens=_MAX_NEW.value, temperature=_TEMPERATURE.value, top_k=_TOP_K.value,
                              top_p=_TOP_P.value, vocab_size=vocab.size)
    _print(text, out, vocab)
    progress.update(i + 1)


def _print(text, out, vocab):
  from attnjax.tokens import EOS_ID, PAD_ID  # pylint: disable=g-import-not-at-top
  for row in np.asarray(out):
    tokens = [int(t) for t in row if t not in (PAD_ID, EOS_ID)]
    print(f"{text}{' ' if tokens else ''}{vocab.decode(tokens)}".replace("\n", " "), flush=True)


def run() -> None:
  """The command line: the ``attnjax-generate`` console script, and ``python -m attnjax.generate``."""
  flags.mark_flag_as_required("workdir")
  cli.run(main)


if __name__ == "__main__":
  run()
