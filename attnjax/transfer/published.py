"""Checkpoints that ``transformers`` wrote (``save_pretrained``: published ones such as opus-mt's Marian models and
GPT-2, not only attnjax's exports) into attnjax's Transformer and decoder-only LM, with their tokenizer and their
generation settings; and such a model written back.

    imported = import_checkpoint("path/to/opus-mt-en-de")     # every file checked before anything runs
    imported.module, imported.params        # attnjax.models.transformer.Transformer (or DecoderLM) and its weights
    imported.source, imported.target        # CheckpointVocab: text <-> attnjax's ids, as the library tokenizes
    imported.generation                     # GenerationSettings of generation_config.json

By ``model_type``: ``marian`` (post-norm) and ``pegasus`` (pre-norm) are the Transformer of
:mod:`attnjax.transfer.seq2seq` (the sinusoid's layout, the weights' names and LayerNorm's ε 1e-5 as there),
``gpt2`` the LM of :mod:`attnjax.transfer.lm`. What such checkpoints use is represented: the feed-forward activation
(opus-mt's ``swish`` is SiLU, GPT-2's ``gelu_new`` the tanh GELU), embeddings scaled or not (``scale_embedding``), a
tied or untied output layer (``tie_word_embeddings``) and Marian's ``final_logits_bias``, GPT-2's LayerNorm ε.

The ids stay the checkpoint's: the tables keep its rows in its order, and :class:`attnjax.tokens.VocabularyMap` lays
attnjax's PAD, BOS, EOS and UNK over its special tokens (``pad_token_id``, ``decoder_start_token_id`` (GPT-2:
``bos_token_id``), ``eos_token_id``, and the tokenizer's unknown token), so that the logits over attnjax's ids are the
checkpoint's re-ordered and a decoded text is the library's.

Refused with one line naming the option (:class:`ImportRefused`): other architectures (BART's learned positions
with an offset of 2 and its embedding LayerNorm), ``normalize_embedding``, ``normalize_before`` or
``add_final_layer_norm`` on a Marian model, an activation the Transformer lacks, different encoder and decoder
widths, separate source and target vocabularies (``share_encoder_decoder_embeddings`` false), LayerDrop, GPT-2's
cross-attention, unscaled or layer-scaled attention and an untied output layer. Weights are read from
``model.safetensors`` only: a directory with a pickled ``pytorch_model.bin`` alone is refused, never unpickled.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import numpy as np

from attnjax import fs
from attnjax.tokens import BOS_ID, EOS_ID, NO_ROW, PAD_ID, UNK_ID, VocabularyMap
from attnjax.transfer import lm, seq2seq
from attnjax.transfer.bert import CONFIG_FILE, WEIGHTS_FILE, CheckpointError, read_tensors
from attnjax.transfer.checkpoint_tokenizer import CheckpointVocab, read_tokenizer
from attnjax.transfer.generation_config import GENERATION_FILE, GenerationSettings, read_generation

ENCODER_DECODERS, DECODERS = ("marian", "pegasus"), ("gpt2",)
# config.json's activation_function -> attnjax.models.transformer.ACTIVATIONS
ACTIVATIONS = {"relu": "relu", "gelu": "gelu", "gelu_new": "gelu_tanh", "gelu_pytorch_tanh": "gelu_tanh",
               "swish": "silu", "silu": "silu"}
_BART_LIKE = ("bart", "mbart", "plbart", "mvp", "blenderbot", "blenderbot-small", "m2m_100", "nllb-moe", "fsmt")
# the defaults of transformers' MarianConfig / PegasusConfig / GPT2Config for the keys read (a file may omit them)
_DEFAULTS = {
    "marian": dict(activation_function="gelu", scale_embedding=False, share_encoder_decoder_embeddings=True,
                   tie_word_embeddings=True, max_position_embeddings=1024, dropout=0.1, attention_dropout=0.0,
                   activation_dropout=0.0, decoder_start_token_id=58100, pad_token_id=58100, eos_token_id=0),
    "pegasus": dict(activation_function="gelu", scale_embedding=False, tie_word_embeddings=True,
                    max_position_embeddings=1024, dropout=0.1, attention_dropout=0.0, activation_dropout=0.0,
                    decoder_start_token_id=0, pad_token_id=0, eos_token_id=1),
    "gpt2": dict(n_positions=1024, n_inner=None, activation_function="gelu_new", resid_pdrop=0.1, attn_pdrop=0.1,
                 layer_norm_epsilon=1e-5, scale_attn_weights=True, scale_attn_by_inverse_layer_idx=False,
                 add_cross_attention=False, tie_word_embeddings=True, bos_token_id=50256, eos_token_id=50256,
                 pad_token_id=None),
}


class ImportRefused(CheckpointError):
  """A checkpoint option that attnjax's models do not represent: the message names it."""


@dataclasses.dataclass
class Imported:
  """A checkpoint read for attnjax (see the module docstring); ``config`` is its ``config.json``."""
  model_dir: str
  config: dict
  kind: str  # "transformer" | "decoder_lm": attnjax's model.name
  module: Any
  params: dict
  vocab_map: VocabularyMap
  source: CheckpointVocab
  target: CheckpointVocab
  generation: GenerationSettings


def is_checkpoint_dir(path) -> bool:
  """Whether ``path`` holds a Hugging Face checkpoint (a ``config.json`` with a ``model_type``), not a workdir."""
  config = fs.join(path, CONFIG_FILE)
  if not fs.exists(config):
    return False
  try:
    return "model_type" in json.loads(fs.read_text(config))
  except ValueError:
    return False


def read_config(model_dir) -> dict:
  path = fs.join(model_dir, CONFIG_FILE)
  if not fs.exists(path):
    raise CheckpointError(f"{path}: no such file")
  try:
    return json.loads(fs.read_text(path))
  except ValueError as e:
    raise CheckpointError(f"{path}: not JSON ({e})") from None


def _get(config: dict, key: str):
  return config.get(key, _DEFAULTS[config["model_type"]].get(key))


def _one_id(config: dict, key: str, path: str) -> int:
  value = _get(config, key)
  if isinstance(value, list):
    if len(value) != 1:
      raise ImportRefused(f"{path}: {key}={value}: one id is searched for, not several")
    value = value[0]
  return NO_ROW if value is None else int(value)


def _refuse(path: str, checks) -> None:
  for refused, option in checks:
    if refused:
      raise ImportRefused(f"{path}: {option}: attnjax's models do not represent it")


def _activation(config: dict, path: str) -> str:
  name = _get(config, "activation_function")
  if name not in ACTIVATIONS:
    raise ImportRefused(f"{path}: activation_function={name!r}: attnjax's models have {sorted(ACTIVATIONS)}")
  return ACTIVATIONS[name]


def transformer_fields(config: dict, path: str) -> dict:
  """The :class:`attnjax.models.transformer.Transformer` fields of a Marian or Pegasus ``config.json`` (the vocabulary
  sizes and map aside), after the refusals of the module docstring."""
  marian = config["model_type"] == "marian"
  vocab = config["vocab_size"]
  _refuse(path, [
      (config.get("normalize_embedding"), "normalize_embedding=true (an embedding LayerNorm)"),
      (marian and config.get("normalize_before"), "normalize_before=true on a Marian model (pre-norm layers)"),
      (marian and config.get("add_final_layer_norm"), "add_final_layer_norm=true on a Marian model"),
      (config.get("add_bias_logits"), "add_bias_logits=true"),
      (config.get("encoder_layerdrop") or config.get("decoder_layerdrop"), "encoder_layerdrop / decoder_layerdrop "
       "(LayerDrop)"),
      (config.get("encoder_attention_heads") != config.get("decoder_attention_heads"),
       "encoder_attention_heads != decoder_attention_heads"),
      (config.get("encoder_ffn_dim") != config.get("decoder_ffn_dim"), "encoder_ffn_dim != decoder_ffn_dim"),
      (marian and not _get(config, "share_encoder_decoder_embeddings"),
       "share_encoder_decoder_embeddings=false (separate source and target vocabularies)"),
      (marian and config.get("decoder_vocab_size", vocab) not in (None, vocab),
       f"decoder_vocab_size={config.get('decoder_vocab_size')} != vocab_size={vocab}"),
  ])
  return dict(num_encoder_layers=config["encoder_layers"], num_decoder_layers=config["decoder_layers"],
              d_model=config["d_model"], num_heads=config["encoder_attention_heads"], d_ff=config["encoder_ffn_dim"],
              dropout_rate=float(_get(config, "dropout")),
              attention_dropout_rate=float(_get(config, "attention_dropout")),
              relu_dropout_rate=float(_get(config, "activation_dropout")), pre_norm=not marian,
              positional="sinusoidal", max_length=int(_get(config, "max_position_embeddings")), shared_vocab=True,
              share_source_embeddings=True, tie_decoder_embeddings=bool(_get(config, "tie_word_embeddings")),
              final_logits_bias=bool(_get(config, "tie_word_embeddings")), activation=_activation(config, path),
              scale_embeddings=bool(_get(config, "scale_embedding")),
              layer_norm_epsilon=seq2seq.HF_LAYER_NORM_EPSILON)


def lm_fields(config: dict, path: str) -> dict:
  """The :class:`attnjax.models.lm.DecoderLM` fields of a GPT-2 ``config.json`` (vocabulary aside)."""
  _refuse(path, [
      (_get(config, "add_cross_attention"), "add_cross_attention=true"),
      (not _get(config, "scale_attn_weights"), "scale_attn_weights=false (unscaled attention)"),
      (_get(config, "scale_attn_by_inverse_layer_idx"), "scale_attn_by_inverse_layer_idx=true"),
      (not _get(config, "tie_word_embeddings"), "tie_word_embeddings=false (an untied output layer)"),
  ])
  d = config["n_embd"]
  return dict(num_layers=config["n_layer"], d_model=d, num_heads=config["n_head"],
              d_ff=_get(config, "n_inner") or 4 * d, dropout_rate=float(_get(config, "resid_pdrop")),
              attention_dropout_rate=float(_get(config, "attn_pdrop")), positional="learned",
              max_length=int(_get(config, "n_positions")), activation=_activation(config, path),
              layer_norm_epsilon=float(_get(config, "layer_norm_epsilon")))


def kind_of(config: dict, path: str) -> str:
  """attnjax's ``model.name`` for a ``config.json``, or :class:`ImportRefused` naming its ``model_type``."""
  model_type = config.get("model_type")
  if model_type in ENCODER_DECODERS:
    return "transformer"
  if model_type in DECODERS:
    return "decoder_lm"
  if model_type in _BART_LIKE:
    raise ImportRefused(f"{path}: model_type {model_type!r}: learned positions with an offset of 2 and an embedding "
                        "LayerNorm (layernorm_embedding), which attnjax's Transformer does not have")
  raise ImportRefused(f"{path}: model_type {model_type!r} is not imported (marian and pegasus are, as the "
                      "Transformer, and gpt2, as the decoder-only LM)")


def vocabulary_map(config: dict, tokenizer, settings: dict, path: str) -> VocabularyMap:
  """Where attnjax's PAD, BOS, EOS and UNK sit in the checkpoint's table: ``config.json``'s ids, the tokenizer's
  unknown (and, without one in the config, padding) token."""
  pad = _one_id(config, "pad_token_id", path)
  if pad == NO_ROW:
    pad = tokenizer.token_id(settings.get("pad_token"))
    pad = NO_ROW if pad is None else pad
  start = "bos_token_id" if config["model_type"] in DECODERS else "decoder_start_token_id"
  unk = tokenizer.token_id(settings.get("unk_token"))
  try:
    return VocabularyMap(int(config["vocab_size"]), pad=pad, bos=_one_id(config, start, path),
                         eos=_one_id(config, "eos_token_id", path), unk=NO_ROW if unk is None else unk)
  except ValueError as e:
    raise CheckpointError(f"{path}: the special token ids: {e}") from None


def _float32(tensors: dict, path: str) -> dict:
  """Weights stored in half precision widened to float32 (exactly); other dtypes are left to the layout's check."""
  import ml_dtypes  # pylint: disable=g-import-not-at-top
  half = (np.float16, ml_dtypes.bfloat16)
  out = {k: v.astype(np.float32) if v.dtype in half else v for k, v in tensors.items()}
  if any(v.dtype == np.float64 for v in out.values()):
    raise CheckpointError(f"{path}: float64 weights: attnjax reads float32 (or half-precision) checkpoints")
  return out


@dataclasses.dataclass
class _Described:
  """What a directory's ``config.json`` and tokenizer say, before any weight is read."""
  config: dict
  path: str
  kind: str
  tokenizer: Any
  vocab_map: VocabularyMap
  model: dict  # attnjax's config.model section: name, fields, vocab_map


_SIZES = ("src_vocab_size", "tgt_vocab_size", "vocab_size", "real_tgt_vocab_size", "real_vocab_size")


def _describe(model_dir) -> _Described:
  config = read_config(model_dir)
  path = str(fs.join(model_dir, CONFIG_FILE))
  kind = kind_of(config, path)
  tokenizer, settings = read_tokenizer(model_dir)
  vocab_map = vocabulary_map(config, tokenizer, settings, path)
  record = config.get(seq2seq.RECORD)
  if record is None:
    fields = transformer_fields(config, path) if kind == "transformer" else lm_fields(config, path)
    return _Described(config, path, kind, tokenizer, vocab_map,
                      dict(name=kind, **fields, vocab_map=vocab_map.as_tuple()))
  # an attnjax export: its record of the model's fields, and of its ids (its own, or the checkpoint's it was
  # imported from)
  if kind == "transformer" and not record.get("shared_vocab", True):
    raise ImportRefused(f"{path}: shared_vocab=false: one tokenizer serves the source and the target here")
  fields = {k: tuple(v) if isinstance(v, list) else v for k, v in record.items() if k not in _SIZES}
  vocab_map = VocabularyMap.of(fields.get("vocab_map")) or VocabularyMap(vocab_map.rows, PAD_ID, BOS_ID, EOS_ID,
                                                                         UNK_ID)
  return _Described(config, path, kind, tokenizer, vocab_map, dict(name=kind, **fields))


def import_checkpoint(model_dir, **overrides) -> Imported:
  """``model_dir`` read for attnjax (see the module docstring); ``overrides``: model fields (``implementation``,
  ``dtype``, dropout rates). A directory attnjax exported is read by its record of the model's fields."""
  model_dir = str(model_dir)
  described = _describe(model_dir)
  generation = read_generation(model_dir, described.config)
  tensors, weights = read_tensors(model_dir)
  module = build_module(described.model, described.vocab_map, described.path, **overrides)
  exporter = seq2seq if described.kind == "transformer" else lm
  params = exporter.params_from_tensors(module, _float32(tensors, weights), weights)
  tokenizer, vocab_map = described.tokenizer, described.vocab_map
  return Imported(model_dir, described.config, described.kind, module, params, vocab_map,
                  CheckpointVocab(tokenizer, vocab_map, "source"), CheckpointVocab(tokenizer, vocab_map, "target"),
                  generation)


def model_config(model_dir) -> dict:
  """attnjax's ``config.model`` section for a checkpoint directory (``name``, the architecture's fields and
  ``vocab_map``), from its ``config.json`` and tokenizer: no weight is read."""
  return dict(_describe(model_dir).model)


def settings(model_dir) -> tuple[dict, VocabularyMap, GenerationSettings]:
  """``(model_config(model_dir), its vocabulary map, its generation settings)``: what a run needs to know of a
  checkpoint directory before its weights."""
  described = _describe(model_dir)
  return dict(described.model), described.vocab_map, read_generation(model_dir, described.config)


def build_module(model: dict, vocab_map: VocabularyMap, path: str = CONFIG_FILE, **overrides):
  """The module of a :func:`model_config` section, with vocabulary sizes of the map's attnjax ids."""
  from attnjax.models.registry import build_model  # pylint: disable=g-import-not-at-top
  try:
    return build_model({**model, **overrides}, src_vocab_size=vocab_map.size, tgt_vocab_size=vocab_map.size)
  except ValueError as e:
    raise CheckpointError(f"{path}: {e}") from None


# --------------------------------------------------------------------------------------------- in a workdir

TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "source.spm", "target.spm",
                   "vocab.json", "merges.txt")

VOCABULARY_DIR = "checkpoint_vocabulary"  # a workdir fine-tuned from a checkpoint keeps its tokenizer files here


def copy_vocabulary(model_dir, workdir) -> list[str]:
  """Copies the checkpoint's ``config.json``, ``generation_config.json`` and tokenizer files into
  ``<workdir>/checkpoint_vocabulary/`` (once); returns the names copied."""
  target = fs.join(workdir, VOCABULARY_DIR)
  copied = []
  fs.makedirs(target)
  for name in (CONFIG_FILE, GENERATION_FILE) + TOKENIZER_FILES:
    if fs.exists(fs.join(model_dir, name)) and not fs.exists(fs.join(target, name)):
      fs.write_bytes(fs.join(target, name), fs.read_bytes(fs.join(model_dir, name)))
      copied.append(name)
  return copied


def workdir_vocabularies(workdir) -> tuple[CheckpointVocab, CheckpointVocab] | None:
  """``(source, target)`` of a workdir fine-tuned from a checkpoint (its ``checkpoint_vocabulary/``), else None."""
  directory = fs.join(workdir, VOCABULARY_DIR)
  if not fs.exists(fs.join(directory, CONFIG_FILE)):
    return None
  described = _describe(directory)
  return (CheckpointVocab(described.tokenizer, described.vocab_map, "source"),
          CheckpointVocab(described.tokenizer, described.vocab_map, "target"))


# --------------------------------------------------------------------------------------------- back out

def export_checkpoint(module, params, out_dir, checkpoint_dir) -> dict:
  """Writes ``module`` / ``params`` (imported from ``checkpoint_dir`` and, say, fine-tuned) into ``out_dir`` as the
  checkpoint was: its ``config.json`` with the model's fields (and attnjax's record of them), the weights under the
  library's names, and the checkpoint's tokenizer files and ``generation_config.json`` copied; returns the config."""
  from safetensors.numpy import save  # pylint: disable=g-import-not-at-top
  import flax.linen as nn  # pylint: disable=g-import-not-at-top
  base = read_config(checkpoint_dir)
  exporter = seq2seq if hasattr(module, "tgt_vocab_size") else lm
  config = exporter.config_from_module(module, base=base)
  tensors = exporter.tensors_from_params(module, nn.meta.unbox(params))
  fs.makedirs(out_dir)
  fs.write_text(fs.join(out_dir, CONFIG_FILE), json.dumps(config, indent=2, sort_keys=True) + "\n")
  fs.write_bytes(fs.join(out_dir, WEIGHTS_FILE), save(tensors, metadata={"format": "pt"}))
  for name in TOKENIZER_FILES + (GENERATION_FILE,):
    if fs.exists(fs.join(checkpoint_dir, name)):
      fs.write_bytes(fs.join(out_dir, name), fs.read_bytes(fs.join(checkpoint_dir, name)))
  return config
