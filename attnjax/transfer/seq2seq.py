"""The encoder-decoder Transformer in and out of Hugging Face: :class:`attnjax.models.transformer.Transformer`
parameters ⇄ a ``MarianMTModel`` (post-norm) or ``PegasusForConditionalGeneration`` (pre-norm) checkpoint.

    config, tensors = export_tensors(module, params)                 # the two files' contents
    module, params = import_tensors(config, tensors)                 # and back, bit for bit

Why these two architectures. Both are ``transformers``' BART-family encoder-decoders without BART's embedding
LayerNorm, with embeddings scaled by √d_model (``scale_embedding``), static sinusoidal positions counted from 0, biases
on every projection, a configurable activation (ReLU here, eq. 2), and a tied or untied output layer with a bias
(``final_logits_bias``). Marian wraps each sublayer as the paper does, ``LayerNorm(x + Sublayer(x))``; Pegasus as
pre-norm, ``x + Sublayer(LayerNorm(x))``, with a final LayerNorm after each stack: the two kinds of
:class:`Transformer`. Marian also keeps separate source and target vocabularies (``share_encoder_decoder_embeddings``
false, ``decoder_vocab_size``); Pegasus has one embedding for both sides.

Three things differ, and are handled here:

* **The sinusoid's layout.** attnjax interleaves, PE[pos, 2i] = sin(pos·ω_i) and PE[pos, 2i+1] = cos(pos·ω_i)
  (Vaswani et al. §3.5); Marian and Pegasus put every sine first, then every cosine: their dimension ``i`` is our
  ``2i`` and their ``d/2 + i`` our ``2i + 1``. A network computes the same function in any ordering of its residual
  basis (LayerNorm, residual sums and the attention and FFN projections commute with a permutation of it), so export
  writes every tensor that touches the d_model axis permuted by :func:`hidden_order`, and import undoes it. The table
  then is the library's own (it is not saved: ``save_pretrained`` drops it and loading recomputes it), and a
  re-saved checkpoint keeps working. The values agree to float32 rounding of the angles (theirs from float64).
* **LayerNorm's ε.** The BART family's LayerNorms have torch's ε = 1e-5, fixed; attnjax's default is 1e-6. A model
  trained with ``layer_norm_epsilon=1e-5`` exports exactly; one with 1e-6 exports with a warning, and its logits
  move by what :func:`attnjax.export` measures and states (about 1e-5 relative).
* **What no BART-family model has** is refused in one line naming the option: learned positions (BART's come with
  an embedding LayerNorm and a position offset of 2), relative and T5 positions, local and linear attention, copy
  attention, and (for pre-norm) separate source and target embeddings.

The decoder starts from BOS (``decoder_start_token_id`` 1); ``generation_config.json`` suppresses PAD, BOS and the
padding ids past the real vocabulary, which attnjax's searches never emit either. A model imported from a checkpoint
the library wrote (:mod:`attnjax.transfer.published`) keeps that checkpoint's table and ids (its ``vocab_map``):
its export writes them back, over the checkpoint's own ``config.json`` (``base``), with its activation, embedding
scale and ``final_logits_bias``.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import numpy as np

from attnjax.tokens import BOS_ID, EOS_ID, PAD_ID, VocabularyMap
from attnjax.transfer.bert import CheckpointError

HF_LAYER_NORM_EPSILON = 1e-5  # torch.nn.LayerNorm's default, which the BART family does not let a config change
GENERATION_FILE = "generation_config.json"
RECORD = "attnjax_model"  # config.json's record of the model's fields, for an exact return
_KEY = RECORD
_ARCHITECTURES = {False: ("marian", "MarianMTModel"), True: ("pegasus", "PegasusForConditionalGeneration")}
# attnjax.models.transformer.ACTIVATIONS -> config.json's activation_function
HF_ACTIVATIONS = {"relu": "relu", "gelu": "gelu", "gelu_tanh": "gelu_new", "silu": "swish"}


class ExportError(ValueError):
  """A model that no Hugging Face architecture represents exactly: the message names the option."""


def hidden_order(d: int) -> np.ndarray:
  """Our d_model index of each Hugging Face index: the even dimensions (sines), then the odd ones (cosines)."""
  return np.concatenate([np.arange(0, d, 2), np.arange(1, d, 2)])


def check_exportable(module) -> None:
  """Raises :class:`ExportError` naming the first option of ``module`` that Marian / Pegasus cannot represent."""
  refusals = [
      (module.positional != "sinusoidal",
       f"positional={module.positional!r}: Marian and Pegasus have only static sinusoidal positions (BART's learned "
       "ones come with an embedding LayerNorm and an offset of 2 that this Transformer does not have)"),
      (module.attention_type != "full", f"attention_type={module.attention_type!r}: no BART-family model has it"),
      (module.copy, "copy=True: no Hugging Face encoder-decoder has copy attention"),
      (module.pre_norm and not module.share_source_embeddings,
       "pre_norm=True with separate source and target embeddings (share_source_embeddings=False): Pegasus, the "
       "pre-norm architecture, has one embedding for both sides"),
      (module.num_encoder_layers < 1 or module.num_decoder_layers < 1, "a stack without layers"),
      (module.activation not in HF_ACTIVATIONS, f"activation={module.activation!r}"),
  ]
  for refused, why in refusals:
    if refused:
      raise ExportError(f"this Transformer cannot be exported to Hugging Face: {why}")


# --------------------------------------------------------------------------------------------- the config


def table_rows(module, side: str = "tgt") -> int:
  """Rows of ``module``'s ``side`` (``"src"`` / ``"tgt"``) embedding table: the vocabulary's, or its ``vocab_map``'s."""
  mapped = VocabularyMap.of(module.vocab_map)
  return mapped.rows if mapped is not None else getattr(module, f"{side}_vocab_size")


def config_from_module(module, *, vocab_size: int | None = None, base: dict | None = None) -> dict:
  """The ``config.json`` of ``module`` as a Marian (post-norm) or Pegasus (pre-norm) model. ``vocab_size``: the real
  target vocabulary when the embedding tables are padded past it (those ids are suppressed in generation); ``base``:
  a checkpoint's own ``config.json`` whose other keys are kept (an imported model's)."""
  check_exportable(module)
  model_type, architecture = _ARCHITECTURES[bool(module.pre_norm)]
  fields = {f.name: getattr(module, f.name) for f in dataclasses.fields(module)
            if f.name not in ("parent", "name", "dtype", "param_dtype", "implementation")}
  fields = {k: list(v) if isinstance(v, tuple) else v for k, v in fields.items()}  # as JSON reads them back
  mapped = VocabularyMap.of(module.vocab_map)
  ids = dict(pad_token_id=PAD_ID, bos_token_id=BOS_ID, eos_token_id=EOS_ID, decoder_start_token_id=BOS_ID,
             forced_eos_token_id=None)
  if mapped is not None:  # the checkpoint's own ids (and its bos_token_id and forced EOS, from base)
    ids = dict(pad_token_id=mapped.pad, eos_token_id=mapped.eos, decoder_start_token_id=mapped.bos)
  config = dict(base or {})
  config.update(
      model_type=model_type, architectures=[architecture], is_encoder_decoder=True,
      vocab_size=table_rows(module, "src"), d_model=module.d_model,
      encoder_layers=module.num_encoder_layers, decoder_layers=module.num_decoder_layers,
      encoder_attention_heads=module.num_heads, decoder_attention_heads=module.num_heads,
      encoder_ffn_dim=module.d_ff, decoder_ffn_dim=module.d_ff, activation_function=HF_ACTIVATIONS[module.activation],
      max_position_embeddings=module.max_length, scale_embedding=bool(module.scale_embeddings),
      dropout=module.dropout_rate, attention_dropout=module.attention_dropout_rate,
      activation_dropout=module.relu_dropout_rate, tie_word_embeddings=bool(module.tie_decoder_embeddings),
      **ids, **{_KEY: dict(fields, real_tgt_vocab_size=vocab_size or module.tgt_vocab_size)})
  if model_type == "marian":
    config.update(decoder_vocab_size=table_rows(module, "tgt"),
                  share_encoder_decoder_embeddings=bool(module.share_source_embeddings))
  return config


def generation_config(config: dict, *, beam_size: int | None = None, max_new_tokens: int = 256) -> dict:
  """``generation_config.json``: BOS starts, EOS ends, PAD / BOS / padding ids never generated; ``beam_size`` beams
  (greedy when None or 1) scored by raw log-probability (``length_penalty`` 0: see :mod:`attnjax.export` for why
  attnjax's length penalty does not travel)."""
  fields = config[_KEY]
  suppress = [PAD_ID, BOS_ID] + list(range(fields["real_tgt_vocab_size"], fields["tgt_vocab_size"]))
  out = dict(decoder_start_token_id=BOS_ID, bos_token_id=BOS_ID, eos_token_id=EOS_ID, pad_token_id=PAD_ID,
             forced_eos_token_id=None, suppress_tokens=suppress, max_new_tokens=max_new_tokens)
  if beam_size and beam_size > 1:
    out.update(num_beams=beam_size, length_penalty=0.0, early_stopping=True)
  else:
    out.update(num_beams=1, do_sample=False)
  return out


def module_from_config(config: dict, path: str = "config.json", **overrides):
  """The :class:`Transformer` that a ``config.json`` written by :func:`config_from_module` describes."""
  from attnjax.models.transformer import Transformer  # pylint: disable=g-import-not-at-top
  if config.get("model_type") not in ("marian", "pegasus") or _KEY not in config:
    raise CheckpointError(f"{path}: not an attnjax Transformer exported as Marian or Pegasus (model_type "
                          f"{config.get('model_type')!r}, no {_KEY!r} record)")
  fields = {k: tuple(v) if isinstance(v, list) else v for k, v in config[_KEY].items() if k != "real_tgt_vocab_size"}
  want_pre_norm = config["model_type"] == "pegasus"
  if bool(fields.get("pre_norm")) != want_pre_norm:
    raise CheckpointError(f"{path}: model_type {config['model_type']!r} but {_KEY}.pre_norm={fields.get('pre_norm')}")
  try:
    return Transformer(**fields, **overrides)
  except (TypeError, ValueError) as e:
    raise CheckpointError(f"{path}: {_KEY} does not build a Transformer ({e})") from None


# --------------------------------------------------------------------------------------------- the weights


@dataclasses.dataclass(frozen=True)
class _Map:
  """One Hugging Face tensor: our parameter's path, how the array maps, and the shape the config implies."""
  path: tuple[str, ...]
  how: str  # see _to_theirs
  shape: tuple[int, ...]


def _layout(module) -> dict[str, _Map]:
  """Hugging Face tensor name -> :class:`_Map`, for ``module``'s options."""
  d, f, n = module.d_model, module.d_ff, module.num_heads
  rows = table_rows(module)
  marian = not module.pre_norm
  layout: dict[str, _Map] = {}

  def attention(hf, ours):
    for name, proj in (("q", "query"), ("k", "key"), ("v", "value")):
      layout[f"{hf}.{name}_proj.weight"] = _Map((*ours, proj, "kernel"), "heads_in", (d, d))
      layout[f"{hf}.{name}_proj.bias"] = _Map((*ours, proj, "bias"), "heads_bias", (d,))
    layout[f"{hf}.out_proj.weight"] = _Map((*ours, "out", "kernel"), "heads_out", (d, d))
    layout[f"{hf}.out_proj.bias"] = _Map((*ours, "out", "bias"), "hidden", (d,))

  def norm(hf, ours):
    layout[f"{hf}.weight"] = _Map((*ours, "scale"), "hidden", (d,))
    layout[f"{hf}.bias"] = _Map((*ours, "bias"), "hidden", (d,))

  def ffn(hf, ours):
    layout[f"{hf}.fc1.weight"] = _Map((ours, "ffn", "Dense_0", "kernel"), "linear_in", (f, d))
    layout[f"{hf}.fc1.bias"] = _Map((ours, "ffn", "Dense_0", "bias"), "same", (f,))
    layout[f"{hf}.fc2.weight"] = _Map((ours, "ffn", "Dense_1", "kernel"), "linear_out", (d, f))
    layout[f"{hf}.fc2.bias"] = _Map((ours, "ffn", "Dense_1", "bias"), "hidden", (d,))

  if module.share_source_embeddings:
    # the shared table under all three names: the library ties the two sides' copies to it only when the output
    # layer is tied too (tie_word_embeddings), so an untied model needs them in the file
    for name in SHARED_EMBEDDING:
      layout[name] = _Map(("tgt_embed", "embedding"), "embedding", (rows, d))
  else:  # Marian with two vocabularies (checked: Pegasus shares)
    layout["model.encoder.embed_tokens.weight"] = _Map(("src_embed", "embedding"), "embedding",
                                                       (module.src_vocab_size, d))
    layout["model.decoder.embed_tokens.weight"] = _Map(("tgt_embed", "embedding"), "embedding",
                                                       (module.tgt_vocab_size, d))
  for i in range(module.num_encoder_layers):
    hf, ours = f"model.encoder.layers.{i}", f"encoder_{i}"
    attention(f"{hf}.self_attn", (ours, "self_attention"))
    norm(f"{hf}.self_attn_layer_norm", (ours, "attention_block", "LayerNorm_0"))
    ffn(hf, ours)
    norm(f"{hf}.final_layer_norm", (ours, "ffn_block", "LayerNorm_0"))
  for i in range(module.num_decoder_layers):
    hf, ours = f"model.decoder.layers.{i}", f"decoder_{i}"
    attention(f"{hf}.self_attn", (ours, "self_attention"))
    norm(f"{hf}.self_attn_layer_norm", (ours, "self_attention_block", "LayerNorm_0"))
    attention(f"{hf}.encoder_attn", (ours, "cross_attention"))
    norm(f"{hf}.encoder_attn_layer_norm", (ours, "cross_attention_block", "LayerNorm_0"))
    ffn(hf, ours)
    norm(f"{hf}.final_layer_norm", (ours, "ffn_block", "LayerNorm_0"))
  if not marian:
    norm("model.encoder.layer_norm", ("encoder_norm",))
    norm("model.decoder.layer_norm", ("decoder_norm",))
  if not module.tie_decoder_embeddings:
    layout["lm_head.weight"] = _Map(("logits_dense", "kernel"), "linear_in", (rows, d))
    layout["final_logits_bias"] = _Map(("logits_dense", "bias"), "row", (1, rows))
  elif module.final_logits_bias:
    layout["final_logits_bias"] = _Map(("final_logits_bias",), "row", (1, rows))
  return layout


# the one table of a model that shares its embeddings, under the names the library may save it by: transformers 5
# saves the first alone when the three are tied, older versions (and an untied output layer) all three
SHARED_EMBEDDING = ("model.shared.weight", "model.encoder.embed_tokens.weight", "model.decoder.embed_tokens.weight")


def _to_theirs(value: np.ndarray, how: str, order: np.ndarray) -> np.ndarray:
  """Our array -> theirs; ``order`` permutes the d_model axis (see the module docstring)."""
  if how == "same":
    return value
  if how == "hidden":  # [D]
    return value[order]
  if how == "embedding":  # [V, D]
    return value[:, order]
  if how == "heads_in":  # [D_in, N, H] -> torch Linear [N*H, D_in]
    return value.reshape(value.shape[0], -1)[order].T
  if how == "heads_bias":  # [N, H] -> [N*H]
    return value.reshape(-1)
  if how == "heads_out":  # [N, H, D_out] -> [D_out, N*H]
    return value.reshape(-1, value.shape[-1])[:, order].T
  if how == "linear_in":  # Dense [D, out] -> [out, D]
    return value[order].T
  if how == "linear_out":  # Dense [F, D] -> [D, F]
    return value[:, order].T
  if how == "row":  # [V] -> [1, V]
    return value[None]
  raise ValueError(how)


def _to_ours(value: np.ndarray, how: str, inverse: np.ndarray, n: int) -> np.ndarray:
  """The inverse of :func:`_to_theirs` (``inverse`` undoes the permutation; ``n`` heads)."""
  if how == "same":
    return value
  if how == "hidden":
    return value[inverse]
  if how == "embedding":
    return value[:, inverse]
  if how == "heads_in":
    return value.T[inverse].reshape(value.shape[1], n, value.shape[0] // n)
  if how == "heads_bias":
    return value.reshape(n, value.shape[0] // n)
  if how == "heads_out":
    return value.T[:, inverse].reshape(n, value.shape[1] // n, value.shape[0])
  if how == "linear_in":
    return value.T[inverse]
  if how == "linear_out":
    return value.T[:, inverse]
  if how == "row":
    return value[0]
  raise ValueError(how)


def tensors_from_params(module, params) -> dict[str, np.ndarray]:
  """Hugging Face tensors (float32, the names ``save_pretrained`` writes) from ``module``'s parameter tree; a tied
  output layer without bias writes ``final_logits_bias`` as zeros."""
  import flax.linen as nn  # pylint: disable=g-import-not-at-top
  check_exportable(module)
  params = nn.meta.unbox(params)
  params = params.get("params", params)
  order = hidden_order(module.d_model)
  tensors = {}
  for name, entry in _layout(module).items():
    node = params
    for part in entry.path:
      node = node[part]
    tensors[name] = np.ascontiguousarray(_to_theirs(np.asarray(node, np.float32), entry.how, order))
  if module.tie_decoder_embeddings and not module.final_logits_bias:
    tensors["final_logits_bias"] = np.zeros((1, table_rows(module)), np.float32)
  return tensors


def params_from_tensors(module, tensors: dict[str, np.ndarray], path: str = "model.safetensors") -> dict:
  """``module``'s parameter tree from Hugging Face tensors: every tensor its options need, with the shape they imply;
  errors name ``path`` and the tensor. A tied model's ``final_logits_bias`` must be zero (attnjax's tied output layer
  has no bias)."""
  order = hidden_order(module.d_model)
  inverse = np.argsort(order)
  params: dict[str, Any] = {}
  if module.share_source_embeddings:  # the shared table under whichever of its names the file has
    present = [tensors[name] for name in SHARED_EMBEDDING if name in tensors]
    tensors = {**{name: present[0] for name in SHARED_EMBEDDING}, **tensors} if present else tensors
  for name, entry in _layout(module).items():
    if name not in tensors:
      raise CheckpointError(f"{path}: tensor {name} is missing")
    value = np.asarray(tensors[name])
    if tuple(value.shape) != entry.shape:
      raise CheckpointError(f"{path}: tensor {name} has shape {tuple(value.shape)}, but config.json implies "
                            f"{entry.shape}")
    if value.dtype != np.float32:
      raise CheckpointError(f"{path}: tensor {name} is {value.dtype}, expected float32")
    node = params
    for part in entry.path[:-1]:
      node = node.setdefault(part, {})
    ours = np.ascontiguousarray(_to_ours(value, entry.how, inverse, module.num_heads))
    if entry.path[-1] in node and not np.array_equal(node[entry.path[-1]], ours):  # a shared table's copies
      raise CheckpointError(f"{path}: tensor {name} differs from model.shared.weight, but the model shares one "
                            "embedding between the encoder, the decoder (and the output layer)")
    node[entry.path[-1]] = ours
  if (module.tie_decoder_embeddings and not module.final_logits_bias and "final_logits_bias" in tensors
      and np.any(tensors["final_logits_bias"])):
    raise CheckpointError(f"{path}: tensor final_logits_bias is not zero, but the output layer is tied to the "
                          "embedding (no bias in attnjax's Transformer)")
  return params


def layer_norm_mismatch(module) -> str | None:
  """A warning when ``module``'s LayerNorm ε is not the BART family's fixed 1e-5, else None."""
  if module.layer_norm_epsilon != HF_LAYER_NORM_EPSILON:
    return (f"layer_norm_epsilon={module.layer_norm_epsilon:g} but Marian / Pegasus LayerNorms use "
            f"{HF_LAYER_NORM_EPSILON:g}: the exported model's outputs differ from attnjax's by that much")
  return None


# --------------------------------------------------------------------------------------------- files


def export_transformer(module, params, out_dir, *, vocab_size: int | None = None, beam_size: int | None = None,
                       max_new_tokens: int = 256) -> dict:
  """Writes ``config.json``, ``model.safetensors`` and ``generation_config.json`` for ``module`` / ``params`` into
  ``out_dir``; returns the config. The tokenizer is :mod:`attnjax.transfer.tokenizers`' to write."""
  from safetensors.numpy import save  # pylint: disable=g-import-not-at-top
  from attnjax import fs  # pylint: disable=g-import-not-at-top
  from attnjax.transfer.bert import CONFIG_FILE, WEIGHTS_FILE  # pylint: disable=g-import-not-at-top
  config = config_from_module(module, vocab_size=vocab_size)
  tensors = tensors_from_params(module, params)
  fs.makedirs(out_dir)
  fs.write_text(fs.join(out_dir, CONFIG_FILE), json.dumps(config, indent=2, sort_keys=True) + "\n")
  fs.write_bytes(fs.join(out_dir, WEIGHTS_FILE), save(tensors, metadata={"format": "pt"}))
  fs.write_text(fs.join(out_dir, GENERATION_FILE),
                json.dumps(generation_config(config, beam_size=beam_size, max_new_tokens=max_new_tokens), indent=2,
                           sort_keys=True) + "\n")
  return config


def import_transformer(model_dir, **overrides):
  """``(module, params)`` of a directory :func:`export_transformer` wrote (``overrides``: Transformer fields such
  as ``implementation``); every file and tensor checked before anything runs."""
  return import_directory(model_dir, module_from_config, params_from_tensors, overrides)


def import_directory(model_dir, build, load, overrides: dict):
  """``(module, params)`` of an exported directory: ``config.json`` read (a missing or non-JSON file named),
  ``build(config, path, **overrides)`` gives the module, ``load(module, tensors, path)`` its parameters."""
  from attnjax import fs  # pylint: disable=g-import-not-at-top
  from attnjax.transfer.bert import CONFIG_FILE, read_tensors  # pylint: disable=g-import-not-at-top
  path = fs.join(model_dir, CONFIG_FILE)
  if not fs.exists(path):
    raise CheckpointError(f"{path}: no such file")
  try:
    config = json.loads(fs.read_text(path))
  except ValueError as e:
    raise CheckpointError(f"{path}: not JSON ({e})") from None
  module = build(config, str(path), **overrides)
  tensors, weights_path = read_tensors(model_dir)
  return module, load(module, tensors, weights_path)
