"""Models by name, built from a config section: ``model.name`` picks the class, the other keys are its fields.

The vocabulary sizes come from the data: the seq2seq models get ``src_vocab_size`` / ``tgt_vocab_size``, and
``span_qa`` (one vocabulary for questions and contexts) gets ``vocab_size = src_vocab_size``.
"""

from __future__ import annotations

import dataclasses

import jax.numpy as jnp

from attnjax.models.bert import BertMaskedLM
from attnjax.models.convs2s import ConvS2S
from attnjax.models.lm import DecoderLM
from attnjax.models.rnn_seq2seq import RNNSeq2Seq
from attnjax.models.span_qa import SpanQA
from attnjax.models.transformer import PRESETS, Transformer
from attnjax.tokens import round_up

MODELS = {"transformer": Transformer, "rnn_seq2seq": RNNSeq2Seq, "convs2s": ConvS2S, "span_qa": SpanQA,
          "bert_mlm": BertMaskedLM, "decoder_lm": DecoderLM}
SPAN_MODELS = ("span_qa",)  # extractive: they score spans of the input rather than generate
ONE_VOCABULARY_MODELS = SPAN_MODELS + ("bert_mlm", "decoder_lm")  # built with vocab_size (one vocabulary), not src/tgt
_DTYPES = {"float32": jnp.float32, "bfloat16": jnp.bfloat16, "float16": jnp.float16}
_FILLED_IN = ("src_vocab_size", "tgt_vocab_size", "vocab_size")  # from the data, never from the config


def model_fields(name: str) -> set[str]:
  if name not in MODELS:
    raise ValueError(f"model.name must be one of {sorted(MODELS)}, got {name!r}")
  return {f.name for f in dataclasses.fields(MODELS[name]) if f.name not in ("parent", "name")}


def build_model(model_cfg, *, src_vocab_size: int, tgt_vocab_size: int):
  """``model_cfg``: a mapping with ``name`` (and for the Transformer optionally ``preset``) plus model fields.

  Raises a ValueError naming ``model.<key>`` for a key the model does not have, and passes the model's own
  validation (e.g. heads dividing d_model) through with the config key in the message.
  """
  cfg = dict(model_cfg)
  name = cfg.pop("name", None)
  fields = model_fields(name)
  preset = cfg.pop("preset", None)
  kwargs = {}
  if preset:
    if name != "transformer":
      raise ValueError(f"model.preset is only defined for the transformer, not {name!r}")
    if preset not in PRESETS:
      raise ValueError(f"model.preset must be one of {sorted(PRESETS)}, got {preset!r}")
    kwargs.update(PRESETS[preset])
  for key, value in cfg.items():
    if key in _FILLED_IN:
      raise ValueError(f"model.{key} is set from the data (the vocabulary's size), not from the config")
    if key not in fields:
      settable = sorted(fields - set(_FILLED_IN))
      raise ValueError(f"model.{key} is not a field of {MODELS[name].__name__} (fields: {settable})")
    if isinstance(value, list):  # a tuple field read back from a config's JSON (a module's fields are hashed)
      value = tuple(value)
    if key in ("dtype", "param_dtype") and isinstance(value, str):
      if value not in _DTYPES:
        raise ValueError(f"model.{key} must be one of {sorted(_DTYPES)}, got {value!r}")
      value = _DTYPES[value]
    kwargs[key] = value
  try:
    if name in ONE_VOCABULARY_MODELS:
      return MODELS[name](vocab_size=src_vocab_size, **kwargs)
    return MODELS[name](src_vocab_size=src_vocab_size, tgt_vocab_size=tgt_vocab_size, **kwargs)
  except ValueError as e:
    raise ValueError(f"invalid model config ({name}): {e}") from e


def model_for(config, *, src_vocab_size: int, tgt_vocab_size: int):
  """``config.model`` built for vocabularies of these (real) sizes, its embedding tables padded to a multiple of
  ``config.data.vocab_multiple`` so that the vocabulary axis shards evenly: what training, evaluation and
  ahead-of-time planning all build."""
  multiple = int(config.data.get("vocab_multiple", 1) or 1)
  return build_model(config.model.to_dict(), src_vocab_size=round_up(src_vocab_size, multiple),
                     tgt_vocab_size=round_up(tgt_vocab_size, multiple))


def model_width(model) -> int | None:
  """The model's width (``d_model``, or an RNN's ``hidden_dim``), which a Noam schedule scales its rate by."""
  return getattr(model, "d_model", None) or getattr(model, "hidden_dim", None)


def count_params(model_cfg: dict, vocab_size: int, *, embeddings: bool = True) -> int:
  """Parameters of the model ``model_cfg`` builds with a vocabulary of ``vocab_size`` (both sides), counted from the
  shapes alone (nothing is initialised); without ``embeddings``, the ones outside its embedding tables (a leaf whose
  path names "embed")."""
  import math  # pylint: disable=g-import-not-at-top
  import jax  # pylint: disable=g-import-not-at-top
  model = build_model(model_cfg, src_vocab_size=vocab_size, tgt_vocab_size=vocab_size)
  tokens = jnp.ones((1, 4), jnp.int32)
  shapes = jax.eval_shape(lambda: model.init(jax.random.PRNGKey(0), tokens, tokens))
  total = 0
  for path, leaf in jax.tree_util.tree_flatten_with_path(shapes)[0]:
    if embeddings or "embed" not in jax.tree_util.keystr(path).lower():
      total += math.prod(leaf.shape)
  return total
