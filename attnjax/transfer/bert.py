"""Hugging Face BERT-family checkpoints in and out: ``config.json`` + ``model.safetensors`` + ``vocab.txt`` /
``tokenizer.json`` ⇄ :class:`attnjax.models.bert.BertEncoder` parameters and a ``tokenizers`` WordPiece tokenizer.

    module, params, tokenizer = import_bert("path/to/all-MiniLM-L6-v2")
    export_bert(module, params, "path/to/out", tokenizer_from="path/to/all-MiniLM-L6-v2")   # the same files again

Everything is checked before any compute: a missing file, an architecture that is not BERT's (``model_type``,
relative positions, an unknown activation), a missing tensor, or a tensor whose shape disagrees with ``config.json``
stops with one line naming the file and the tensor.

The weights map one to one. A torch ``Linear`` stores ``[out, in]``; Flax's ``Dense`` ``[in, out]``; attention
projections are split into heads (``[D, N, H]`` for query / key / value, ``[N, H, D]`` for the output), as Flax's
``MultiHeadDotProductAttention`` lays them out. Export writes ``BertModel``'s names (no ``bert.`` prefix) and its
``embeddings.position_ids`` buffer, so that a ``BertModel`` checkpoint comes back tensor for tensor, bit for bit.
Heads of other classes (``cls.*`` of ``BertForMaskedLM``, ``qa_outputs.*``) are left out on import, with a log line.

A pre-norm encoder (``BertEncoder(pre_norm=True)``: each sublayer normalises its input, a LayerNorm after the last
layer) is written as ``RobertaPreLayerNormModel`` (``model_type`` ``roberta-prelayernorm``, fairseq's
``--encoder-normalize-before``), the one architecture of the library with the same computation: the embeddings'
LayerNorm, a LayerNorm before the attention (``attention.LayerNorm``) and before the feed-forward block
(``intermediate.LayerNorm``) of every layer, and one after the last (``LayerNorm``). Its positions count from
``pad_token_id + 1`` (RoBERTa's rule: padding keeps position ``pad_token_id``), so the position table is written
with that many rows first, zero, and read back without them; the [PAD] id is the WordPiece vocabulary's, 0.
"""

from __future__ import annotations

import json
import os
from typing import Any

import numpy as np
from absl import logging

from attnjax import fs

CONFIG_FILE, WEIGHTS_FILE = "config.json", "model.safetensors"
BERT, PRE_NORM = "bert", "roberta-prelayernorm"  # the model_type of a post-norm and of a pre-norm encoder
PAD_ID = 0  # BERT's WordPiece [PAD]
TOKENIZER_FILES = ("tokenizer.json", "vocab.txt", "tokenizer_config.json", "special_tokens_map.json")
# config.json's hidden_act -> attnjax.models.transformer.ACTIVATIONS
_ACTIVATIONS = {"gelu": "gelu", "gelu_new": "gelu_tanh", "gelu_pytorch_tanh": "gelu_tanh", "relu": "relu"}


class CheckpointError(ValueError):
  """A checkpoint that cannot be imported: the message names the file (and the tensor)."""


# --------------------------------------------------------------------------------------------- the config


def read_config(model_dir) -> dict:
  """``config.json`` of ``model_dir``, checked to describe a BERT encoder this module can run exactly."""
  path = fs.join(model_dir, CONFIG_FILE)
  if not fs.exists(path):
    raise CheckpointError(f"{path}: no such file (a Hugging Face checkpoint directory has config.json, "
                          f"{WEIGHTS_FILE} and vocab.txt or tokenizer.json)")
  try:
    config = json.loads(fs.read_text(path))
  except ValueError as e:
    raise CheckpointError(f"{path}: not JSON ({e})") from None
  model_type = config.get("model_type")
  if model_type not in (BERT, PRE_NORM):
    raise CheckpointError(f"{path}: model_type {model_type!r} is not a BERT encoder (model_type {BERT!r}, or "
                          f"{PRE_NORM!r} for a pre-norm one; architectures {config.get('architectures')})")
  if model_type == PRE_NORM and not isinstance(config.get("pad_token_id"), int):
    raise CheckpointError(f"{path}: pad_token_id must be an integer for {PRE_NORM!r} (its positions count from it)")
  positions = config.get("position_embedding_type", "absolute")
  if positions != "absolute":
    raise CheckpointError(f"{path}: position_embedding_type {positions!r}: only BERT's learned absolute positions "
                          "are imported")
  if config.get("hidden_act", "gelu") not in _ACTIVATIONS:
    raise CheckpointError(f"{path}: hidden_act {config.get('hidden_act')!r} is not one of {sorted(_ACTIVATIONS)}")
  for key in ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size"):
    if not isinstance(config.get(key), int) or config[key] <= 0:
      raise CheckpointError(f"{path}: {key} must be a positive integer, got {config.get(key)!r}")
  if config["hidden_size"] % config["num_attention_heads"]:
    raise CheckpointError(f"{path}: num_attention_heads ({config['num_attention_heads']}) does not divide "
                          f"hidden_size ({config['hidden_size']})")
  return config


def position_offset(config: dict) -> int:
  """The position id of a sequence's first token: 0 for BERT, ``pad_token_id + 1`` for RoBERTa's rule."""
  return config["pad_token_id"] + 1 if config.get("model_type") == PRE_NORM else 0


def module_from_config(config: dict, **overrides):
  """The :class:`BertEncoder` that ``config`` (a Hugging Face ``BertConfig`` or ``RobertaPreLayerNormConfig`` dict)
  describes."""
  from attnjax.models.bert import BertEncoder  # pylint: disable=g-import-not-at-top
  max_length = config.get("max_position_embeddings", 512) - position_offset(config)
  fields = dict(vocab_size=config["vocab_size"], d_model=config["hidden_size"], num_layers=config["num_hidden_layers"],
                num_heads=config["num_attention_heads"], d_ff=config["intermediate_size"],
                max_length=max_length, type_vocab_size=config.get("type_vocab_size", 2),
                pre_norm=config.get("model_type") == PRE_NORM,
                layer_norm_epsilon=config.get("layer_norm_eps", 1e-12),
                activation=_ACTIVATIONS[config.get("hidden_act", "gelu")],
                dropout_rate=config.get("hidden_dropout_prob", 0.1),
                attention_dropout_rate=config.get("attention_probs_dropout_prob", 0.1),
                initializer_range=config.get("initializer_range", 0.02))
  fields.update(overrides)
  return BertEncoder(**fields)


def config_from_module(module, base: dict | None = None) -> dict:
  """A Hugging Face ``BertConfig`` dict for ``module`` (``base``'s other keys kept); ``RobertaPreLayerNormConfig``'s
  for a pre-norm encoder."""
  config = dict(base or {})
  inverse = {"gelu": "gelu", "gelu_tanh": "gelu_new", "relu": "relu"}
  pre_norm = bool(getattr(module, "pre_norm", False))
  if pre_norm:
    config.update(model_type=PRE_NORM, architectures=["RobertaPreLayerNormModel"],
                  pad_token_id=config.get("pad_token_id", PAD_ID))
  else:
    config.update(model_type=BERT, architectures=["BertModel"])
  config.update(vocab_size=module.vocab_size,
                hidden_size=module.d_model, num_hidden_layers=module.num_layers, num_attention_heads=module.num_heads,
                intermediate_size=module.d_ff, max_position_embeddings=module.max_length + position_offset(config),
                type_vocab_size=module.type_vocab_size, layer_norm_eps=module.layer_norm_epsilon,
                hidden_act=inverse[module.activation], hidden_dropout_prob=module.dropout_rate,
                attention_probs_dropout_prob=module.attention_dropout_rate,
                initializer_range=module.initializer_range, position_embedding_type="absolute")
  return config


# --------------------------------------------------------------------------------------------- the weights


def _layout(config: dict) -> dict[str, tuple[tuple[str, ...], tuple[int, ...], str]]:
  """Hugging Face tensor name -> (attnjax parameter path, the tensor's shape, how it maps): ``same``, ``linear``
  (transposed), ``heads_in`` / ``heads_bias`` (query, key, value split into heads), ``heads_out`` (the output
  projection from heads)."""
  d, f = config["hidden_size"], config["intermediate_size"]
  n = config["num_attention_heads"]
  pre_norm = config.get("model_type") == PRE_NORM
  layout = {
      "embeddings.word_embeddings.weight": (("word_embeddings", "embedding"), (config["vocab_size"], d), "same"),
      "embeddings.position_embeddings.weight": (("position_embeddings", "embedding"),
                                                (config.get("max_position_embeddings", 512), d),
                                                f"positions{position_offset(config)}"),
      "embeddings.token_type_embeddings.weight": (("token_type_embeddings", "embedding"),
                                                  (config.get("type_vocab_size", 2), d), "same"),
      "embeddings.LayerNorm.weight": (("embed_norm", "scale"), (d,), "same"),
      "embeddings.LayerNorm.bias": (("embed_norm", "bias"), (d,), "same"),
  }
  for i in range(config["num_hidden_layers"]):
    hf, ours = f"encoder.layer.{i}.", f"layer_{i}"
    for name in ("query", "key", "value"):
      layout[f"{hf}attention.self.{name}.weight"] = ((ours, "self_attention", name, "kernel"), (d, d), "heads_in")
      layout[f"{hf}attention.self.{name}.bias"] = ((ours, "self_attention", name, "bias"), (d,), "heads_bias")
    layout[f"{hf}attention.output.dense.weight"] = ((ours, "self_attention", "out", "kernel"), (d, d), "heads_out")
    layout[f"{hf}attention.output.dense.bias"] = ((ours, "self_attention", "out", "bias"), (d,), "same")
    # each sublayer's LayerNorm: after the residual sum (BERT), or before the sublayer (pre-norm)
    attention_norm = f"{hf}attention.LayerNorm" if pre_norm else f"{hf}attention.output.LayerNorm"
    ffn_norm = f"{hf}intermediate.LayerNorm" if pre_norm else f"{hf}output.LayerNorm"
    layout[f"{attention_norm}.weight"] = ((ours, "attention_block", "LayerNorm_0", "scale"), (d,), "same")
    layout[f"{attention_norm}.bias"] = ((ours, "attention_block", "LayerNorm_0", "bias"), (d,), "same")
    layout[f"{hf}intermediate.dense.weight"] = ((ours, "ffn", "Dense_0", "kernel"), (f, d), "linear")
    layout[f"{hf}intermediate.dense.bias"] = ((ours, "ffn", "Dense_0", "bias"), (f,), "same")
    layout[f"{hf}output.dense.weight"] = ((ours, "ffn", "Dense_1", "kernel"), (d, f), "linear")
    layout[f"{hf}output.dense.bias"] = ((ours, "ffn", "Dense_1", "bias"), (d,), "same")
    layout[f"{ffn_norm}.weight"] = ((ours, "ffn_block", "LayerNorm_0", "scale"), (d,), "same")
    layout[f"{ffn_norm}.bias"] = ((ours, "ffn_block", "LayerNorm_0", "bias"), (d,), "same")
  if pre_norm:
    layout["LayerNorm.weight"] = (("final_norm", "scale"), (d,), "same")
    layout["LayerNorm.bias"] = (("final_norm", "bias"), (d,), "same")
  layout["pooler.dense.weight"] = (("pooler", "kernel"), (d, d), "linear")
  layout["pooler.dense.bias"] = (("pooler", "bias"), (d,), "same")
  return layout


def _to_ours(value: np.ndarray, how: str, n: int) -> np.ndarray:
  if how == "same":
    return value
  if how.startswith("positions"):  # RoBERTa's first rows (padding's, and below) are no position of ours
    return value[int(how[len("positions"):]):]
  if how == "linear":
    return value.T
  if how == "heads_in":  # [D_out = N*H, D_in] -> [D_in, N, H]
    return value.T.reshape(value.shape[1], n, value.shape[0] // n)
  if how == "heads_bias":
    return value.reshape(n, value.shape[0] // n)
  if how == "heads_out":  # [D_out, D_in = N*H] -> [N, H, D_out]
    return value.T.reshape(n, value.shape[1] // n, value.shape[0])
  raise ValueError(how)


def _to_theirs(value: np.ndarray, how: str) -> np.ndarray:
  if how == "same":
    return value
  if how.startswith("positions"):
    offset = int(how[len("positions"):])
    return np.concatenate([np.zeros((offset,) + value.shape[1:], value.dtype), value])
  if how == "linear":
    return value.T
  if how == "heads_in":  # [D_in, N, H] -> [N*H, D_in]
    return value.reshape(value.shape[0], -1).T
  if how == "heads_bias":
    return value.reshape(-1)
  if how == "heads_out":  # [N, H, D_out] -> [D_out, N*H]
    return value.reshape(-1, value.shape[-1]).T
  raise ValueError(how)


def params_from_tensors(tensors: dict[str, np.ndarray], config: dict, path: str = WEIGHTS_FILE) -> dict:
  """The :class:`BertEncoder` parameter tree from Hugging Face tensors (``bert.`` prefix or none). Every tensor the
  encoder needs must be there with the shape ``config`` implies; errors name ``path`` and the tensor."""
  prefix = next((p for p in ("bert.", "roberta_prelayernorm.") if f"{p}embeddings.word_embeddings.weight" in tensors),
                "")
  layout = _layout(config)
  params: dict[str, Any] = {}
  used = set()
  for name, (target, shape, how) in layout.items():
    key = prefix + name
    if key not in tensors:
      if name.startswith("pooler."):
        continue  # a checkpoint without a pooler (BertForMaskedLM): the module is built without one
      raise CheckpointError(f"{path}: tensor {key} is missing")
    value = np.asarray(tensors[key])
    if tuple(value.shape) != shape:
      raise CheckpointError(f"{path}: tensor {key} has shape {tuple(value.shape)}, but config.json implies {shape}")
    node = params
    for part in target[:-1]:
      node = node.setdefault(part, {})
    node[target[-1]] = _to_ours(value.astype(np.float32), how, config["num_attention_heads"])
    used.add(key)
  ignored = sorted(k for k in tensors if k not in used and not k.endswith("position_ids"))
  if ignored:
    logging.info("bert import: %d tensor(s) outside the encoder left out (%s%s)", len(ignored),
                 ", ".join(ignored[:4]), ", ..." if len(ignored) > 4 else "")
  return params


def tensors_from_params(params: dict, config: dict) -> dict[str, np.ndarray]:
  """Hugging Face ``BertModel`` tensors from a :class:`BertEncoder` parameter tree (the inverse of
  :func:`params_from_tensors`), with the ``embeddings.position_ids`` buffer; ``RobertaPreLayerNormModel``'s for a
  pre-norm ``config``."""
  tensors = {}
  for name, (target, _, how) in _layout(config).items():
    node = params
    try:
      for part in target:
        node = node[part]
    except KeyError:
      if name.startswith("pooler."):
        continue
      raise
    tensors[name] = np.ascontiguousarray(_to_theirs(np.asarray(node, np.float32), how))
  if config.get("model_type") != PRE_NORM:  # BertModel's buffer (RobertaPreLayerNormModel's is not saved)
    tensors["embeddings.position_ids"] = np.arange(config.get("max_position_embeddings", 512), dtype=np.int64)[None]
  return tensors


# --------------------------------------------------------------------------------------------- files


def load_tokenizer(model_dir):
  """The checkpoint's WordPiece tokenizer (``tokenizers``; ``tokenizer.json``, else ``vocab.txt`` with
  ``tokenizer_config.json``'s ``do_lower_case``), with character offsets. No padding or truncation is set."""
  from tokenizers import Tokenizer  # pylint: disable=g-import-not-at-top
  from tokenizers.implementations import BertWordPieceTokenizer  # pylint: disable=g-import-not-at-top
  tokenizer_json, vocab = fs.join(model_dir, "tokenizer.json"), fs.join(model_dir, "vocab.txt")
  if fs.exists(tokenizer_json):
    tokenizer = Tokenizer.from_str(fs.read_text(tokenizer_json))
  elif fs.exists(vocab):
    lowercase = True
    settings = fs.join(model_dir, "tokenizer_config.json")
    if fs.exists(settings):
      lowercase = bool(json.loads(fs.read_text(settings)).get("do_lower_case", True))
    tokenizer = BertWordPieceTokenizer(os.fspath(vocab), lowercase=lowercase)
  else:
    raise CheckpointError(f"{model_dir}: neither tokenizer.json nor vocab.txt (the WordPiece vocabulary)")
  tokenizer.no_padding()
  tokenizer.no_truncation()
  return tokenizer


def read_tensors(model_dir) -> tuple[dict[str, np.ndarray], str]:
  path = fs.join(model_dir, WEIGHTS_FILE)
  if not fs.exists(path):
    other = [name for name in ("pytorch_model.bin", "tf_model.h5", "flax_model.msgpack") if fs.exists(fs.join(model_dir, name))]
    hint = f" ({other[0]} is there: convert it to safetensors)" if other else ""
    raise CheckpointError(f"{path}: no such file{hint}")
  try:
    return load_safetensors(fs.read_bytes(path)), str(path)
  except Exception as e:  # pylint: disable=broad-except
    raise CheckpointError(f"{path}: not a safetensors file ({e})") from None


_SAFETENSORS_DTYPES = {"F64": np.float64, "F32": np.float32, "F16": np.float16, "I64": np.int64, "I32": np.int32,
                       "I16": np.int16, "I8": np.int8, "U8": np.uint8, "BOOL": np.bool_}


def load_safetensors(data: bytes) -> dict[str, np.ndarray]:
  """The tensors of a safetensors file's bytes as NumPy arrays, bfloat16 ones included (``ml_dtypes.bfloat16``,
  which ``safetensors.numpy`` writes but does not read)."""
  import ml_dtypes  # pylint: disable=g-import-not-at-top
  from safetensors import deserialize  # pylint: disable=g-import-not-at-top
  dtypes = {**_SAFETENSORS_DTYPES, "BF16": ml_dtypes.bfloat16}
  out = {}
  for name, tensor in deserialize(data):
    if tensor["dtype"] not in dtypes:
      raise ValueError(f"tensor {name}: dtype {tensor['dtype']} is not read here")
    out[name] = np.frombuffer(bytes(tensor["data"]), dtype=np.dtype(dtypes[tensor["dtype"]]).newbyteorder("<")).reshape(
        tensor["shape"])
  return out


def import_bert(model_dir, **overrides):
  """``(module, params, tokenizer)`` of the Hugging Face BERT checkpoint in ``model_dir``; ``overrides`` are
  :class:`BertEncoder` fields (``dtype``, ``implementation``, dropout rates). Validated before anything runs."""
  config = read_config(model_dir)
  tensors, path = read_tensors(model_dir)
  params = params_from_tensors(tensors, config, path)
  tokenizer = load_tokenizer(model_dir)
  if tokenizer.get_vocab_size() > config["vocab_size"]:
    raise CheckpointError(f"{model_dir}: the tokenizer has {tokenizer.get_vocab_size()} entries, more than "
                          f"config.json's vocab_size {config['vocab_size']}")
  module = module_from_config(config, **{"use_pooler": "pooler" in params, **overrides})
  return module, params, tokenizer


def export_bert(module, params, out_dir, *, tokenizer_from=None, base_config: dict | None = None,
                dtype: str = "float32") -> None:
  """Writes ``config.json`` and ``model.safetensors`` (``BertModel``'s names; ``RobertaPreLayerNormModel``'s for a
  pre-norm encoder) for ``module`` / ``params`` into ``out_dir``, and copies the tokenizer files of
  ``tokenizer_from`` (a checkpoint directory) beside them. ``dtype="bfloat16"`` writes the weights rounded to
  bfloat16 (half the bytes; ``config.json``'s ``dtype`` says so), which ``transformers`` loads as they are."""
  from safetensors.numpy import save  # pylint: disable=g-import-not-at-top
  import flax.linen as nn  # pylint: disable=g-import-not-at-top
  if dtype not in ("float32", "bfloat16"):
    raise ValueError(f"dtype must be 'float32' or 'bfloat16', got {dtype!r}")
  params = nn.meta.unbox(params)
  config = config_from_module(module, base_config)
  tensors = tensors_from_params(params, config)
  if dtype == "bfloat16":
    import ml_dtypes  # pylint: disable=g-import-not-at-top
    tensors = {k: v.astype(ml_dtypes.bfloat16) if v.dtype == np.float32 else v for k, v in tensors.items()}
    config["dtype"] = config["torch_dtype"] = "bfloat16"  # transformers 5 reads the first, 4 the second
  fs.makedirs(out_dir)
  fs.write_text(fs.join(out_dir, CONFIG_FILE), json.dumps(config, indent=2, sort_keys=True) + "\n")
  fs.write_bytes(fs.join(out_dir, WEIGHTS_FILE), save(tensors, metadata={"format": "pt"}))
  if tokenizer_from is not None:
    for name in TOKENIZER_FILES:
      source = fs.join(tokenizer_from, name)
      if fs.exists(source):
        fs.write_bytes(fs.join(out_dir, name), fs.read_bytes(source))


def encode_texts(tokenizer, texts, max_length: int, pair_texts=None):
  """``(input_ids, attention_mask, token_type_ids)`` ``[N, L]`` int32 numpy, L the longest encoding (≤
  ``max_length``, special tokens counted), padded with the tokenizer's pad id (0 for BERT)."""
  tokenizer.enable_truncation(max_length=max_length)
  try:
    encodings = (tokenizer.encode_batch(list(texts)) if pair_texts is None
                 else tokenizer.encode_batch(list(zip(texts, pair_texts))))
  finally:
    tokenizer.no_truncation()
  length = max((len(e.ids) for e in encodings), default=1)
  ids = np.zeros((len(encodings), length), np.int32)
  mask = np.zeros((len(encodings), length), np.int32)
  types = np.zeros((len(encodings), length), np.int32)
  for row, e in enumerate(encodings):
    ids[row, :len(e.ids)] = e.ids
    mask[row, :len(e.ids)] = e.attention_mask
    types[row, :len(e.ids)] = e.type_ids
  return ids, mask, types
