"""The decoder-only LM in and out of Hugging Face: :class:`attnjax.models.lm.DecoderLM` parameters ⇄ a
``GPT2LMHeadModel`` checkpoint.

GPT-2 (Radford et al. 2019) is the architecture :class:`DecoderLM` was written after: learned absolute positions,
pre-norm blocks with a final LayerNorm, biases on every projection, and the output layer tied to the token
embedding. Its config sets what differs between runs: the FFN width (``n_inner``), the activation (``gelu_new`` is
the tanh GELU), LayerNorm's ε (``layer_norm_epsilon``: exact here, unlike the encoder-decoder's). Its ``Conv1D``
layers store ``[in, out]`` as Flax does; the query, key and value projections are one ``c_attn`` of ``[D, 3D]``.

Refused, naming the option: sinusoidal positions (this LM scales its embeddings by √D against them, and a tied
output layer then cannot be written as GPT-2's unscaled one; GPT-2 has no sinusoid either), relative and T5
positions. A model imported from a checkpoint the library wrote (:mod:`attnjax.transfer.published`) keeps that
checkpoint's table and ids (its ``vocab_map``), which its export writes back over the checkpoint's own
``config.json`` (``base``); its tensors are read with or without the ``transformer.`` prefix (the original GPT-2 files
were saved without it).
"""

from __future__ import annotations

import dataclasses
import json

import numpy as np

from attnjax.tokens import BOS_ID, EOS_ID, PAD_ID, VocabularyMap
from attnjax.transfer.bert import CheckpointError
from attnjax.transfer.seq2seq import GENERATION_FILE, HF_ACTIVATIONS as _ACTIVATIONS, ExportError, import_directory

_KEY = "attnjax_model"


def table_rows(module) -> int:
  """Rows of ``module``'s embedding table: its vocabulary's, or its ``vocab_map``'s."""
  mapped = VocabularyMap.of(module.vocab_map)
  return module.vocab_size if mapped is None else mapped.rows


def check_exportable(module) -> None:
  if module.positional == "sinusoidal":
    raise ExportError("this LM cannot be exported to Hugging Face: positional='sinusoidal' scales the tied "
                      "embedding by √d_model, which GPT-2's tied output layer cannot represent (and GPT-2 has no "
                      "sinusoidal positions)")
  if module.positional != "learned":
    raise ExportError(f"this LM cannot be exported to Hugging Face: positional={module.positional!r}; GPT-2 has "
                      "learned absolute positions only")
  if module.activation not in _ACTIVATIONS:
    raise ExportError(f"this LM cannot be exported to Hugging Face: activation={module.activation!r}")


def config_from_module(module, *, vocab_size: int | None = None, base: dict | None = None) -> dict:
  """GPT-2's ``config.json`` for ``module``; ``vocab_size`` the real vocabulary when the table is padded past it;
  ``base``: a checkpoint's own ``config.json`` whose other keys are kept (an imported model's)."""
  check_exportable(module)
  fields = {f.name: getattr(module, f.name) for f in dataclasses.fields(module)
            if f.name not in ("parent", "name", "dtype", "param_dtype", "implementation")}
  fields = {k: list(v) if isinstance(v, tuple) else v for k, v in fields.items()}  # as JSON reads them back
  mapped = VocabularyMap.of(module.vocab_map)
  ids = dict(bos_token_id=BOS_ID, eos_token_id=EOS_ID, pad_token_id=PAD_ID)
  if mapped is not None:
    ids = dict(bos_token_id=mapped.bos, eos_token_id=mapped.eos, pad_token_id=None if mapped.pad < 0 else mapped.pad)
  config = dict(base or {})
  config.update(model_type="gpt2", architectures=["GPT2LMHeadModel"], vocab_size=table_rows(module),
                n_positions=module.max_length, n_embd=module.d_model, n_layer=module.num_layers,
                n_head=module.num_heads, n_inner=module.d_ff, activation_function=_ACTIVATIONS[module.activation],
                layer_norm_epsilon=module.layer_norm_epsilon, resid_pdrop=module.dropout_rate,
                embd_pdrop=module.dropout_rate, attn_pdrop=module.attention_dropout_rate, scale_attn_weights=True,
                tie_word_embeddings=True, **ids, **{_KEY: dict(fields, real_vocab_size=vocab_size or module.vocab_size)})
  return config


def module_from_config(config: dict, path: str = "config.json", **overrides):
  from attnjax.models.lm import DecoderLM  # pylint: disable=g-import-not-at-top
  if config.get("model_type") != "gpt2" or _KEY not in config:
    raise CheckpointError(f"{path}: not an attnjax DecoderLM exported as GPT-2 (model_type "
                          f"{config.get('model_type')!r}, no {_KEY!r} record)")
  fields = {k: tuple(v) if isinstance(v, list) else v for k, v in config[_KEY].items() if k != "real_vocab_size"}
  try:
    return DecoderLM(**fields, **overrides)
  except (TypeError, ValueError) as e:
    raise CheckpointError(f"{path}: {_KEY} does not build a DecoderLM ({e})") from None


def _shapes(module) -> dict[str, tuple[int, ...]]:
  d, f = module.d_model, module.d_ff
  shapes = {"transformer.wte.weight": (table_rows(module), d), "transformer.wpe.weight": (module.max_length, d),
            "transformer.ln_f.weight": (d,), "transformer.ln_f.bias": (d,)}
  for i in range(module.num_layers):
    h = f"transformer.h.{i}."
    shapes.update({h + "ln_1.weight": (d,), h + "ln_1.bias": (d,), h + "attn.c_attn.weight": (d, 3 * d),
                   h + "attn.c_attn.bias": (3 * d,), h + "attn.c_proj.weight": (d, d), h + "attn.c_proj.bias": (d,),
                   h + "ln_2.weight": (d,), h + "ln_2.bias": (d,), h + "mlp.c_fc.weight": (d, f),
                   h + "mlp.c_fc.bias": (f,), h + "mlp.c_proj.weight": (f, d), h + "mlp.c_proj.bias": (d,)})
  return shapes


def tensors_from_params(module, params) -> dict[str, np.ndarray]:
  """GPT-2's tensors (float32) from ``module``'s parameter tree."""
  import flax.linen as nn  # pylint: disable=g-import-not-at-top
  check_exportable(module)
  p = nn.meta.unbox(params)
  p = p.get("params", p)
  a = lambda x: np.asarray(x, np.float32)
  t = {"transformer.wte.weight": a(p["embed"]["embedding"]),
       "transformer.wpe.weight": a(p["positions"]["position_embedding"]),
       "transformer.ln_f.weight": a(p["final_norm"]["scale"]), "transformer.ln_f.bias": a(p["final_norm"]["bias"])}
  d = module.d_model
  for i in range(module.num_layers):
    h, layer = f"transformer.h.{i}.", p[f"layer_{i}"]
    attention = layer["self_attention"]
    t[h + "attn.c_attn.weight"] = np.concatenate([a(attention[n]["kernel"]).reshape(d, -1)
                                                  for n in ("query", "key", "value")], axis=1)
    t[h + "attn.c_attn.bias"] = np.concatenate([a(attention[n]["bias"]).reshape(-1) for n in ("query", "key", "value")])
    t[h + "attn.c_proj.weight"] = a(attention["out"]["kernel"]).reshape(-1, d)
    t[h + "attn.c_proj.bias"] = a(attention["out"]["bias"])
    for ours, theirs in (("attention_block", "ln_1"), ("ffn_block", "ln_2")):
      t[h + theirs + ".weight"] = a(layer[ours]["LayerNorm_0"]["scale"])
      t[h + theirs + ".bias"] = a(layer[ours]["LayerNorm_0"]["bias"])
    for ours, theirs in (("Dense_0", "c_fc"), ("Dense_1", "c_proj")):
      t[h + f"mlp.{theirs}.weight"] = a(layer["ffn"][ours]["kernel"])
      t[h + f"mlp.{theirs}.bias"] = a(layer["ffn"][ours]["bias"])
  return {k: np.ascontiguousarray(v) for k, v in t.items()}


def params_from_tensors(module, tensors, path: str = "model.safetensors") -> dict:
  """``module``'s parameter tree from GPT-2's tensors, each checked for presence, shape and dtype."""
  if "transformer.wte.weight" not in tensors and "wte.weight" in tensors:  # saved from GPT2Model: no prefix
    tensors = {**tensors, **{f"transformer.{k}": v for k, v in tensors.items()}}
  for name, shape in _shapes(module).items():
    if name not in tensors:
      raise CheckpointError(f"{path}: tensor {name} is missing")
    if tuple(tensors[name].shape) != shape:
      raise CheckpointError(f"{path}: tensor {name} has shape {tuple(tensors[name].shape)}, but config.json implies "
                            f"{shape}")
    if tensors[name].dtype != np.float32:
      raise CheckpointError(f"{path}: tensor {name} is {tensors[name].dtype}, expected float32")
  if "lm_head.weight" in tensors and not np.array_equal(tensors["lm_head.weight"], tensors["transformer.wte.weight"]):
    raise CheckpointError(f"{path}: tensor lm_head.weight differs from transformer.wte.weight, but this LM's output "
                          "layer is tied to its embedding")
  d, n = module.d_model, module.num_heads
  t = lambda name: np.ascontiguousarray(tensors[name])
  params = {"embed": {"embedding": t("transformer.wte.weight")},
            "positions": {"position_embedding": t("transformer.wpe.weight")},
            "final_norm": {"scale": t("transformer.ln_f.weight"), "bias": t("transformer.ln_f.bias")}}
  for i in range(module.num_layers):
    h = f"transformer.h.{i}."
    qkv, qkv_bias = tensors[h + "attn.c_attn.weight"], tensors[h + "attn.c_attn.bias"]
    attention = {name: {"kernel": np.ascontiguousarray(qkv[:, j * d:(j + 1) * d].reshape(d, n, d // n)),
                        "bias": np.ascontiguousarray(qkv_bias[j * d:(j + 1) * d].reshape(n, d // n))}
                 for j, name in enumerate(("query", "key", "value"))}
    attention["out"] = {"kernel": t(h + "attn.c_proj.weight").reshape(n, d // n, d), "bias": t(h + "attn.c_proj.bias")}
    params[f"layer_{i}"] = {
        "self_attention": attention,
        "attention_block": {"LayerNorm_0": {"scale": t(h + "ln_1.weight"), "bias": t(h + "ln_1.bias")}},
        "ffn_block": {"LayerNorm_0": {"scale": t(h + "ln_2.weight"), "bias": t(h + "ln_2.bias")}},
        "ffn": {"Dense_0": {"kernel": t(h + "mlp.c_fc.weight"), "bias": t(h + "mlp.c_fc.bias")},
                "Dense_1": {"kernel": t(h + "mlp.c_proj.weight"), "bias": t(h + "mlp.c_proj.bias")}}}
  return params


def export_lm(module, params, out_dir, *, vocab_size: int | None = None, max_new_tokens: int = 256) -> dict:
  """Writes ``config.json``, ``model.safetensors`` and ``generation_config.json`` (greedy, PAD / BOS / padding ids
  suppressed) for ``module`` / ``params``; returns the config."""
  from safetensors.numpy import save  # pylint: disable=g-import-not-at-top
  from attnjax import fs  # pylint: disable=g-import-not-at-top
  from attnjax.transfer.bert import CONFIG_FILE, WEIGHTS_FILE  # pylint: disable=g-import-not-at-top
  config = config_from_module(module, vocab_size=vocab_size)
  fs.makedirs(out_dir)
  fs.write_text(fs.join(out_dir, CONFIG_FILE), json.dumps(config, indent=2, sort_keys=True) + "\n")
  fs.write_bytes(fs.join(out_dir, WEIGHTS_FILE), save(tensors_from_params(module, params), metadata={"format": "pt"}))
  real = config[_KEY]["real_vocab_size"]
  generation = dict(bos_token_id=BOS_ID, eos_token_id=EOS_ID, pad_token_id=PAD_ID, do_sample=False, num_beams=1,
                    max_new_tokens=max_new_tokens,
                    suppress_tokens=[PAD_ID, BOS_ID] + list(range(real, module.vocab_size)))
  fs.write_text(fs.join(out_dir, GENERATION_FILE), json.dumps(generation, indent=2, sort_keys=True) + "\n")
  return config


def import_lm(model_dir, **overrides):
  """``(module, params)`` of a directory :func:`export_lm` wrote."""
  return import_directory(model_dir, module_from_config, params_from_tensors, overrides)
