"""Text from a trained decoder-only language model.

    python -m attnjax.generate --workdir=runs/lm --prompt="The history of" --max_new_tokens=60
    python -m attnjax.generate --workdir=runs/lm --input=prompts.txt --temperature=0.8 --top_p=0.9 --num_samples=3
    echo "Anarchism is" | python -m attnjax.generate --workdir=runs/lm --temperature=0      # greedy
    python -m attnjax.generate --workdir=runs/lm --prompt="Anarchism is" --beam_size=4 --num_samples=2   # 2-best

Prompts come from ``--prompt`` (repeatable), ``--input`` (one a line) or stdin. Each prints as one line per sample:
the prompt and its continuation, up to ``--max_new_tokens`` tokens or the end of a document. Sampling (temperature,
top-k, top-p: :mod:`attnjax.generation`) is reproducible from ``--seed``. A command line over
:class:`attnjax.serving.Generator`, which loads the model once for a program's many calls.

``--workdir`` may also be a Hugging Face checkpoint directory that ``transformers`` wrote (GPT-2's:
:mod:`attnjax.transfer.published`): the prompt is tokenized as its tokenizer does (GPT-2 adds no BOS), and what the
flags leave unset comes from its ``generation_config.json`` (greedy or sampled, beams, the length limits), so that
the output is the library's ``generate``; each line is then the tokenizer's decoding of prompt and continuation.
"""

from __future__ import annotations

import sys

from absl import app, flags

from attnjax import cli, fs
from attnjax.progress import Progress

_WORKDIR = flags.DEFINE_string("workdir", None, "a decoder_lm training workdir")
_PROMPT = flags.DEFINE_multi_string("prompt", [], "a prompt (repeatable)")
_INPUT = flags.DEFINE_string("input", None, "a file of prompts, one a line (default: --prompt, else stdin)")
_CHECKPOINT = flags.DEFINE_string("checkpoint", "best", "'best', 'latest' or a step number")
_MAX_NEW = flags.DEFINE_integer("max_new_tokens", None, "tokens to generate after each prompt (default 100, or the "
                                "checkpoint's generation_config.json)")
_TEMPERATURE = flags.DEFINE_float("temperature", None, "softmax temperature; 0 = greedy (default 1)")
_TOP_K = flags.DEFINE_integer("top_k", None, "sample among the k most probable tokens (0: all)")
_TOP_P = flags.DEFINE_float("top_p", None, "sample among the most probable tokens of total probability p (1: all)")
_NUM_SAMPLES = flags.DEFINE_integer("num_samples", 1, "continuations per prompt")
_SEED = flags.DEFINE_integer("seed", 0, "the sampling seed")
_BEAM_SIZE = flags.DEFINE_integer("beam_size", None, "beam search with this many beams instead of sampling (0: "
                                  "sample; --num_samples is then the n-best list)")
_ALPHA = flags.DEFINE_float("alpha", None, "beam search: the GNMT length-penalty exponent (default 0.6)")


def _prompts() -> list[str]:
  if _INPUT.value:
    return [line for line in fs.read_lines(_INPUT.value) if line.strip()]
  if _PROMPT.value:
    return list(_PROMPT.value)
  return [line for line in sys.stdin.read().split("\n") if line.strip()]


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f"unexpected arguments: {argv[1:]}")
  from attnjax import serving  # pylint: disable=g-import-not-at-top
  model = serving.load(_WORKDIR.value, checkpoint=_CHECKPOINT.value)
  if not isinstance(model, serving.Generator):
    raise ValueError(f"--workdir={_WORKDIR.value}: model.name is {model.config.model.name!r}; attnjax.generate "
                     "continues text with a decoder_lm (attnjax.translate decodes the encoder-decoder models)")
  options = dict(max_new_tokens=_MAX_NEW.value, temperature=_TEMPERATURE.value, top_k=_TOP_K.value, top_p=_TOP_P.value,
                 beam_size=_BEAM_SIZE.value, alpha=_ALPHA.value)
  prompts = _prompts()
  progress = Progress("generating", len(prompts), "prompts")
  for i, lines in enumerate(_each(model, prompts, options)):
    for line in lines:
      print(line, flush=True)
    progress.update(i + 1)


def _each(model, prompts, options):
  """Each prompt's lines as soon as they are generated (the i-th prompt samples with fold_in(seed, i), as
  :meth:`attnjax.serving.Generator.generate`)."""
  import jax  # pylint: disable=g-import-not-at-top
  key = jax.random.PRNGKey(_SEED.value)
  for i, text in enumerate(prompts):
    ids = model.prompt_ids(text)
    rows = model.continue_ids(ids, num_samples=_NUM_SAMPLES.value, key=jax.random.fold_in(key, i), **options)
    yield [model.text(text, ids, row) for row in rows]


def run() -> None:
  """The command line: the ``attnjax-generate`` console script, and ``python -m attnjax.generate``."""
  flags.mark_flag_as_required("workdir")
  cli.run(main, cpu_cores=True)


if __name__ == "__main__":
  run()
