"""Text from a trained decoder-only language model.

    python -m attnjax.generate --workdir=runs/lm --prompt="The history of" --max_new_tokens=60
    python -m attnjax.generate --workdir=runs/lm --input=prompts.txt --temperature=0.8 --top_p=0.9 --num_samples=3
    echo "Anarchism is" | python -m attnjax.generate --workdir=runs/lm --temperature=0      # greedy
    python -m attnjax.generate --workdir=runs/lm --prompt="Anarchism is" --beam_size=4 --num_samples=2   # 2-best

Prompts come from ``--prompt`` (repeatable), ``--input`` (one a line) or stdin. Each prints as one line per sample:
the prompt and its continuation, up to ``--max_new_tokens`` tokens or the end of a document. Sampling (temperature,
top-k, top-p: :mod:`attnjax.generation`) is reproducible from ``--seed``.

``--workdir`` may also be a Hugging Face checkpoint directory that ``transformers`` wrote (GPT-2's:
:mod:`attnjax.transfer.published`): the prompt is tokenized as its tokenizer does (GPT-2 adds no BOS), and what the
flags leave unset comes from its ``generation_config.json`` (greedy or sampled, beams, the length limits), so that
the output is the library's ``generate``; each line is then the tokenizer's decoding of prompt and continuation.
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
  loaded = trained.load_workdir(_WORKDIR.value, checkpoint=_CHECKPOINT.value)
  if loaded.config.model.name != "decoder_lm":
    raise ValueError(f"--workdir={_WORKDIR.value}: model.name is {loaded.config.model.name!r}; attnjax.generate "
                     "continues text with a decoder_lm (attnjax.translate decodes the encoder-decoder models)")
  vocab = loaded.vocabularies.tgt
  prompts = _prompts()
  progress = Progress("generating", len(prompts), "prompts")
  key = jax.random.PRNGKey(_SEED.value)
  for i, text in enumerate(prompts):
    ids = _prompt_ids(vocab, text)
    s = _search(loaded, len(ids))
    if s["beam_size"]:
      out = generation.beam(loaded.model, loaded.params, np.asarray([ids], np.int32), max_new_tokens=s["max_new"],
                            beam_size=s["beam_size"], alpha=s["alpha"], n_best=_NUM_SAMPLES.value,
                            vocab_size=vocab.size, min_len=s["min_len"], rules=s["rules"]).tokens[0]
    else:
      out = generation.generate(loaded.model, loaded.params, np.asarray([ids] * _NUM_SAMPLES.value, np.int32),
                                jax.random.fold_in(key, i), max_new_tokens=s["max_new"],
                                temperature=s["temperature"], top_k=s["top_k"], top_p=s["top_p"],
                                vocab_size=vocab.size, banned=s["rules"].banned, min_len=s["min_len"])
    _print(text, ids, out, vocab)
    progress.update(i + 1)


def _prompt_ids(vocab, text: str) -> list[int]:
  """The prompt's ids: BOS and the text's for attnjax's vocabularies, a checkpoint tokenizer's own (GPT-2: no BOS)."""
  if hasattr(vocab, "prompt_ids"):
    ids = vocab.prompt_ids(text)
    if not ids:
      raise ValueError(f"the prompt {text!r} gives no token: the checkpoint's tokenizer adds no BOS to start from")
    return ids
  from attnjax.tokens import BOS_ID  # pylint: disable=g-import-not-at-top
  return [BOS_ID] + vocab.encode(text)


def _search(loaded, prompt_length: int) -> dict:
  """How to continue a prompt: the flags, and for what they leave unset, a Hugging Face checkpoint's
  ``generation_config.json`` (with its :class:`attnjax.decoding.SearchRules`)."""
  from attnjax import decoding  # pylint: disable=g-import-not-at-top
  g = None if loaded.checkpoint is None else loaded.checkpoint.generation
  given = lambda flag: g is None or flags.FLAGS[flag].present
  sampled = g is not None and g.do_sample
  s = dict(beam_size=_BEAM_SIZE.value if given("beam_size") else (g.num_beams if g.num_beams > 1 else 0),
           temperature=_TEMPERATURE.value if given("temperature") else (g.temperature if sampled else 0.0),
           top_k=_TOP_K.value if given("top_k") else (g.top_k if sampled else 0),
           top_p=_TOP_P.value if given("top_p") else (g.top_p if sampled else 1.0),
           max_new=_MAX_NEW.value if given("max_new_tokens") else g.new_tokens(prompt_length),
           alpha=_ALPHA.value if given("alpha") else g.length_penalty,
           min_len=0 if g is None else g.min_new(prompt_length), rules=decoding.ATTNJAX)
  if g is not None:
    s["rules"] = decoding.SearchRules(**g.rules(loaded.checkpoint.vocab_map, prompt_length))
    if not s["beam_size"] and (s["rules"].first_token is not None or s["rules"].at_limit == "forced_eos"):
      raise ValueError(f"{loaded.workdir}: generation_config.json forces a first or last token, which attnjax "
                       "applies in beam search only (--beam_size)")
  return s


def _print(text, prompt, out, vocab):
  from attnjax.tokens import EOS_ID, PAD_ID  # pylint: disable=g-import-not-at-top
  for row in np.asarray(out):
    if hasattr(vocab, "prompt_ids"):  # the tokenizer's text of prompt and continuation, as the library decodes
      print(vocab.decode(list(prompt) + row.tolist()).replace("\n", " "), flush=True)
      continue
    tokens = [int(t) for t in row if t not in (PAD_ID, EOS_ID)]
    print(f"{text}{' ' if tokens else ''}{vocab.decode(tokens)}".replace("\n", " "), flush=True)


def run() -> None:
  """The command line: the ``attnjax-generate`` console script, and ``python -m attnjax.generate``."""
  flags.mark_flag_as_required("workdir")
  cli.run(main)


if __name__ == "__main__":
  run()
