"""Export a trained encoder-decoder's search as a program that runs without attnjax: the encoder and the beam (or
greedy) search lowered to StableHLO with ``jax.export``, its parameters, its vocabularies and a small loader::

    python -m attnjax.export_program --workdir=RUN --out=DIR [--checkpoint=best|latest|STEP]
                                     [--decode=beam|greedy] [--beam_size=4] [--alpha=0.6] [--n_best=1] [--min_len=N]
                                     [--no_repeat_ngram_size=N] [--max_len_a=A] [--max_len_b=B] [--platforms=cpu]
    python DIR/run_program.py DIR < sources.txt > outputs.txt          # JAX, NumPy and sentencepiece only

``DIR`` gets ``program.json``, ``params.npz``, ``source.*`` and ``target.*`` (the vocabularies), ``run_program.py``
(:mod:`attnjax.program_loader`) and one serialized program a source width: the powers of two from 8 up to the
model's ``data.max_src_len`` rounded up to 8, the widths attnjax itself decodes at. Each program takes any batch
size (the batch dimension is symbolic) and returns ``(tokens [batch, n_best, length], scores [batch, n_best])``; its
outputs are attnjax's for the same search. The options a flag leaves unset are the workdir's (``config.eval``).
``--platforms=cpu,cuda`` lowers one program for several platforms (a GPU program can be written on a CPU machine).
Sampling is not exported (its key would be an argument); a Hugging Face checkpoint directory's tokenizer is refused
(export the workdir it came from, or run it with ``transformers``).
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil

from absl import app, flags

from attnjax import cli

_FLAGS = {}


def define_flags() -> None:
  f = flags
  _FLAGS.update(
      workdir=f.DEFINE_string("workdir", None, "the training workdir to export", required=True),
      out=f.DEFINE_string("out", None, "the program directory to write", required=True),
      checkpoint=f.DEFINE_string("checkpoint", "best", "'best', 'latest' or a step number"),
      decode=f.DEFINE_enum("decode", None, ["beam", "greedy"], "search (default: the workdir's eval.decode)"),
      beam_size=f.DEFINE_integer("beam_size", None, "beam size (default: eval.beam_size)"),
      alpha=f.DEFINE_float("alpha", None, "length-penalty exponent (default: eval.alpha)"),
      n_best=f.DEFINE_integer("n_best", 1, "hypotheses a source the program returns (<= beam size)"),
      min_len=f.DEFINE_integer("min_len", None, "EOS banned before this many tokens (default: eval.min_len)"),
      no_repeat_ngram_size=f.DEFINE_integer("no_repeat_ngram_size", None, "n-gram blocking (default: eval's)"),
      max_len_a=f.DEFINE_float("max_len_a", None, "outputs of at most a * source length + b tokens"),
      max_len_b=f.DEFINE_integer("max_len_b", None, "see --max_len_a"),
      platforms=f.DEFINE_list("platforms", ["cpu"], "what the programs are lowered for: cpu, cuda, rocm, tpu"),
  )


def _widths(max_src_len: int) -> list[int]:
  """The source widths attnjax decodes at (:func:`attnjax.inference.translate_texts`)."""
  from attnjax import inference  # pylint: disable=g-import-not-at-top
  widths = {inference._width(n, max_src_len) for n in range(1, max_src_len + 1)}  # pylint: disable=protected-access
  return sorted(widths)


def _save_vocabulary(vocab, out: str, name: str) -> dict:
  from attnjax.data.tokenizer import SentencePieceVocab  # pylint: disable=g-import-not-at-top
  from attnjax.data.vocab import UNK_TEXT, CharVocab  # pylint: disable=g-import-not-at-top
  if isinstance(vocab, SentencePieceVocab):
    vocab.save(os.path.join(out, f"{name}.model"))
    return {"kind": "sentencepiece", "file": f"{name}.model"}
  if isinstance(vocab, CharVocab):
    vocab.save(os.path.join(out, f"{name}.json"))
    return {"kind": "chars", "file": f"{name}.json", "unk_text": UNK_TEXT}
  raise ValueError(f"the {name} vocabulary is a {type(vocab).__name__}: a program carries attnjax's own "
                   "vocabularies (SentencePiece or characters); a Hugging Face directory runs with transformers")


def export_program(workdir: str, out: str, *, checkpoint: str = "best", n_best: int = 1,
                   platforms: tuple[str, ...] = ("cpu",), **options) -> dict:
  """Writes the program of ``workdir``'s search into ``out`` (see the module docstring); ``options``: the decoding
  options of :meth:`attnjax.serving.Translator.search` (``decode``, ``beam_size``, ``alpha``, ...). Returns
  ``program.json``'s content."""
  import jax  # pylint: disable=g-import-not-at-top
  import jax.numpy as jnp  # pylint: disable=g-import-not-at-top
  import numpy as np  # pylint: disable=g-import-not-at-top
  from attnjax import decoding, serving, tokens  # pylint: disable=g-import-not-at-top
  from attnjax.data.vocab import NUM_RESERVED  # pylint: disable=g-import-not-at-top

  translator = serving.load(workdir, checkpoint=checkpoint)
  if not isinstance(translator, serving.Translator):
    raise ValueError(f"--workdir={workdir}: a decoder_lm; a program exports an encoder-decoder's search")
  if options.get("decode") == "sample":
    raise ValueError("decode='sample': a program exports beam or greedy search")
  search = translator.search(n_best=n_best, **options)
  loaded = translator.loaded
  os.makedirs(out, exist_ok=True)
  vocabularies = {"source_vocab": _save_vocabulary(loaded.vocabularies.src, out, "source"),
                  "target_vocab": _save_vocabulary(loaded.vocabularies.tgt, out, "target")}
  flat, treedef = jax.tree_util.tree_flatten(jax.device_get(loaded.params))
  model, rules, vocab_size = loaded.model, translator._rules, loaded.vocabularies.tgt.size  # pylint: disable=protected-access
  common = dict(max_len_a=search.max_len_a, max_len_b=search.max_len_b, vocab_size=vocab_size,
                min_len=search.min_len, no_repeat_ngram_size=search.no_repeat_ngram_size, rules=rules)

  def decode(flat_params, src):
    variables = {"params": jax.tree_util.tree_unflatten(treedef, flat_params)}
    if search.decode == "beam":
      r = decoding.beam_search(model, variables, src, beam_size=search.beam_size, alpha=search.alpha,
                               n_best=search.n_best, **common)
      return r.tokens, r.scores
    r = decoding.greedy_search(model, variables, src, **common)
    return r.tokens[:, None], r.scores[:, None]

  (batch,) = jax.export.symbolic_shape("batch")
  arguments = [jax.ShapeDtypeStruct(x.shape, x.dtype) for x in flat]
  programs = {}
  for width in _widths(translator.max_src_len):
    exported = jax.export.export(jax.jit(decode), platforms=tuple(platforms))(
        arguments, jax.ShapeDtypeStruct((batch, width), jnp.int32))
    name = f"decode.width{width}.stablehlo"
    with open(os.path.join(out, name), "wb") as f:
      f.write(exported.serialize())
    programs[str(width)] = name
  np.savez(os.path.join(out, "params.npz"), **{f"{i:06d}": np.asarray(x) for i, x in enumerate(flat)})
  from attnjax import program_loader  # pylint: disable=g-import-not-at-top
  shutil.copyfile(program_loader.__file__, os.path.join(out, "run_program.py"))
  meta = {"format": program_loader.FORMAT, "version": program_loader.VERSION, "params": "params.npz",
          "programs": programs, "max_src_len": translator.max_src_len, "n_best": search.n_best,
          "search": dataclasses.asdict(search), "platforms": list(platforms), "step": loaded.step,
          "workdir": str(workdir), "model": loaded.config.model.name,
          "ids": {"pad": tokens.PAD_ID, "bos": tokens.BOS_ID, "eos": tokens.EOS_ID, "unk": tokens.UNK_ID,
                  "reserved": NUM_RESERVED}, **vocabularies}
  with open(os.path.join(out, "program.json"), "w", encoding="utf-8") as f:
    json.dump(meta, f, indent=1)
  return meta


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f"unexpected arguments: {argv[1:]}")
  v = {k: flag.value for k, flag in _FLAGS.items()}
  meta = export_program(v.pop("workdir"), v.pop("out"), checkpoint=v.pop("checkpoint"), n_best=v.pop("n_best"),
                        platforms=tuple(v.pop("platforms")), **v)
  print(json.dumps({k: meta[k] for k in ("programs", "search", "platforms", "step")}, indent=1))


def run() -> None:
  """The command line: ``python -m attnjax.export_program``."""
  define_flags()
  cli.run(main)


if __name__ == "__main__":
  run()
