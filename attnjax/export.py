"""Export a trained workdir as a Hugging Face checkpoint directory that ``transformers`` loads and runs as attnjax
does.

    python -m attnjax.export --workdir=RUN --out=DIR [--checkpoint=best|latest|STEP] [--dtype=float32|bfloat16]

What it writes, by the run's model:

* ``transformer`` (encoder-decoder): ``MarianMTModel`` when post-norm, ``PegasusForConditionalGeneration`` when
  pre-norm (:mod:`attnjax.transfer.seq2seq`), for ``AutoModelForSeq2SeqLM``;
* ``decoder_lm``: ``GPT2LMHeadModel`` (:mod:`attnjax.transfer.lm`), for ``AutoModelForCausalLM``;
* ``span_qa`` / ``bert_mlm`` with a BERT encoder: the encoder as ``BertModel`` (:mod:`attnjax.transfer.bert`), a
  pre-norm one as ``RobertaPreLayerNormModel``; a masked-LM run's token types all as its trained type 0; its
  WordPiece ``vocab.txt`` with a ``tokenizer_config.json`` that names ``BertTokenizer`` and the run's casing.

Beside ``config.json`` and ``model.safetensors``: ``generation_config.json`` (the run's beam size; PAD, BOS and the
padding ids past the vocabulary never generated) and the run's vocabulary as ``tokenizer.json`` +
``tokenizer_config.json`` for ``AutoTokenizer`` (:mod:`attnjax.transfer.hf_tokenizer`; a BERT run's WordPiece
files), and ``attnjax_export.json``: the workdir, checkpoint and step it came from. A run whose source and target
vocabularies differ gets the target's in ``DIR/target_tokenizer``.

attnjax's beam search scores a hypothesis by log P / ((5 + |y|) / 6)^α (Wu et al. 2016); ``transformers`` divides
by |y|^length_penalty. The two agree only at α = 0, so ``generation_config.json`` asks for raw log-probability
(``length_penalty`` 0) and the export says so when the run's α is not 0: compare with
``python -m attnjax.evaluate --eval alpha=0``. A model that no architecture represents exactly is refused with one
line naming the option (for example learned positions or copy attention in the encoder-decoder).

``attnjax.transfer.seq2seq.import_transformer`` and ``attnjax.transfer.lm.import_lm`` read the files back, parameter
for parameter, bit for bit.

A run that fine-tuned a Hugging Face checkpoint (``train.init_from`` naming one: :mod:`attnjax.transfer.published`)
is written back as that checkpoint was: its ``config.json`` with the run's weights' fields, the weights under the
library's names and in its vocabulary's order, and its tokenizer files and ``generation_config.json`` as they came.
"""

from __future__ import annotations

from absl import app, flags, logging

from attnjax import fs
from attnjax.transfer import PROVENANCE_FILE  # which run and checkpoint an export came from

# Flags are defined only when this module runs as the command, so that importing export_workdir (tools, tests) never
# collides with another command's flags of the same name.
_WORKDIR = _OUT = _CHECKPOINT = _DTYPE = None


def define_flags() -> None:
  global _WORKDIR, _OUT, _CHECKPOINT, _DTYPE
  _WORKDIR = flags.DEFINE_string("workdir", None, "the training workdir to export", required=True)
  _OUT = flags.DEFINE_string("out", None, "the Hugging Face checkpoint directory to write", required=True)
  _CHECKPOINT = flags.DEFINE_string("checkpoint", "best", "'best', 'latest' or a step number")
  _DTYPE = flags.DEFINE_enum("dtype", "float32", ["float32", "bfloat16"],
                             "the weights' dtype in the files (bfloat16: half the bytes; BERT encoders)")


def _check_transformer(model):
  from attnjax.transfer import seq2seq  # pylint: disable=g-import-not-at-top
  seq2seq.check_exportable(model)


def _check_lm(model):
  from attnjax.transfer import lm  # pylint: disable=g-import-not-at-top
  lm.check_exportable(model)


_CHECKS = {"transformer": _check_transformer, "decoder_lm": _check_lm}


def export_workdir(workdir: str, out: str, *, checkpoint: str = "best", dtype: str = "float32") -> dict:
  """Exports ``workdir``'s ``checkpoint`` into ``out``; returns a summary (architecture, step, files, warnings).
  ``dtype="bfloat16"`` (a BERT encoder's export only) writes the weights rounded to bfloat16."""
  import json  # pylint: disable=g-import-not-at-top
  import jax  # pylint: disable=g-import-not-at-top
  import numpy as np  # pylint: disable=g-import-not-at-top
  from attnjax.trained import load_workdir  # pylint: disable=g-import-not-at-top
  from attnjax.transfer import hf_tokenizer, lm, seq2seq  # pylint: disable=g-import-not-at-top
  from attnjax.transfer.bert import export_bert  # pylint: disable=g-import-not-at-top
  from attnjax import config as config_lib, families  # pylint: disable=g-import-not-at-top
  from attnjax.models.registry import model_for  # pylint: disable=g-import-not-at-top
  config = config_lib.load_config(workdir)
  if dtype != "float32" and config.model.name not in ("span_qa", "bert_mlm"):
    raise ValueError(f"--dtype={dtype}: only a BERT encoder's export (span_qa, bert_mlm) is written in another dtype "
                     f"than float32, not model {config.model.name!r}")
  if config.model.name in _CHECKS:  # refused before any parameter is read
    vocabularies = families.load_vocabularies(config.data, workdir)
    _CHECKS[config.model.name](model_for(config, src_vocab_size=vocabularies.src.size,
                                         tgt_vocab_size=vocabularies.tgt.size))
  loaded = load_workdir(workdir, checkpoint=checkpoint, config=config)
  params = jax.tree_util.tree_map(np.asarray, loaded.params)
  name, model, vocabularies = loaded.config.model.name, loaded.model, loaded.vocabularies
  warnings = []
  if getattr(model, "vocab_map", ()):  # a model fine-tuned from a Hugging Face checkpoint: back in that format
    from attnjax.transfer import published  # pylint: disable=g-import-not-at-top
    config = published.export_checkpoint(model, params, out, fs.join(workdir, published.VOCABULARY_DIR))
  elif name == "transformer":
    seq2seq.check_exportable(model)
    beam = loaded.config.eval.beam_size if loaded.config.eval.decode == "beam" else None
    config = seq2seq.export_transformer(model, params, out, vocab_size=vocabularies.tgt.size, beam_size=beam)
    mismatch = seq2seq.layer_norm_mismatch(model)
    if mismatch:
      warnings.append(mismatch)
    if beam and loaded.config.eval.alpha:
      warnings.append(f"eval.alpha={loaded.config.eval.alpha:g} (attnjax's length penalty) has no transformers "
                      "equivalent: generation_config.json scores beams by raw log-probability (α = 0)")
    hf_tokenizer.write_tokenizer(vocabularies.src, out, model_max_length=model.max_length)
    if vocabularies.tgt != vocabularies.src:
      hf_tokenizer.write_tokenizer(vocabularies.tgt, fs.join(out, "target_tokenizer"),
                                   model_max_length=model.max_length)
  elif name == "decoder_lm":
    config = lm.export_lm(model, params, out, vocab_size=vocabularies.src.size)
    hf_tokenizer.write_tokenizer(vocabularies.src, out, model_max_length=model.max_length)
  elif name in ("span_qa", "bert_mlm") and "bert" in params:
    from attnjax.data.wordpiece import WORDPIECE_FILE  # pylint: disable=g-import-not-at-top
    from attnjax.models.bert import BertEncoder  # pylint: disable=g-import-not-at-top
    encoder = BertEncoder(model.vocab_size, model.d_model, model.num_layers, model.num_heads, model.d_ff,
                          model.max_length, getattr(model, "type_vocab_size", 2), model.layer_norm_epsilon,
                          getattr(model, "activation", "gelu"), use_pooler="pooler" in params["bert"],
                          pre_norm=bool(getattr(model, "pre_norm", False)))
    encoder_params = dict(params["bert"])
    if name == "bert_mlm":
      # masked-LM pre-training feeds token type 0 only: the other types' rows never left their random init, so they
      # are written as the trained one (what fine-tuning from the workdir itself does, attnjax.training.warm_start)
      types = encoder_params["token_type_embeddings"]["embedding"]
      encoder_params["token_type_embeddings"] = {"embedding": np.broadcast_to(types[:1], types.shape).copy()}
    pad = getattr(vocabularies.src, "pad_id", 0)  # RoBERTa's positions count from it (a pre-norm encoder)
    export_bert(encoder, encoder_params, out, dtype=dtype, base_config={"pad_token_id": int(pad)})
    vocab = fs.join(workdir, WORDPIECE_FILE)
    if fs.exists(vocab):
      fs.write_bytes(fs.join(out, "vocab.txt"), fs.read_bytes(vocab))
      # AutoTokenizer takes its class from here: a pre-norm encoder's config.json says roberta-prelayernorm, whose
      # own tokenizer (byte-level BPE) is not this WordPiece vocabulary's
      fs.write_json(fs.join(out, "tokenizer_config.json"),
                    {"tokenizer_class": "BertTokenizer",
                     "do_lower_case": bool(loaded.config.data.get("lowercase", True)),
                     "model_max_length": int(model.max_length)}, indent=1)
    config = json.loads(fs.read_text(fs.join(out, "config.json")))
  else:
    raise ValueError(f"{workdir}: model {name!r} has no Hugging Face export (transformer, decoder_lm, and the BERT "
                     "encoder of span_qa / bert_mlm do)")
  for warning in warnings:
    logging.warning("export: %s", warning)
  fs.write_json(fs.join(out, PROVENANCE_FILE), {"workdir": str(workdir), "checkpoint": str(checkpoint),
                                                 "step": int(loaded.step), "dtype": dtype}, indent=1)
  return {"architecture": config["architectures"][0], "step": loaded.step, "out": str(out),
          "files": sorted(p.name for p in fs.path(out).iterdir()), "warnings": warnings}


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f"unexpected arguments: {argv[1:]}")
  import json  # pylint: disable=g-import-not-at-top
  try:
    summary = export_workdir(_WORKDIR.value, _OUT.value, checkpoint=_CHECKPOINT.value, dtype=_DTYPE.value)
  except ValueError as e:
    raise SystemExit(f"error: {e}") from None
  print(json.dumps(summary, indent=2))


def run() -> None:
  """The command line: the ``attnjax-export`` console script, and ``python -m attnjax.export``."""
  define_flags()
  app.run(main)


if __name__ == "__main__":
  run()
