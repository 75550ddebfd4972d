"""Checkpoints that ``transformers`` itself wrote, imported: checked against the library's own numbers.

``hf_import_reference/`` (written by ``tools/hf_import_reference.py``) holds a tiny opus-mt-like ``MarianMTModel``
(SiLU, scaled and tied embeddings, ``final_logits_bias``, ``</s>`` 0, ``<pad>`` last and the decoder's start, a
``MarianTokenizer``) and a tiny ``GPT2LMHeadModel`` (``gelu_new``, a byte-level BPE tokenizer, ``<|endoftext|>``
its last id and both BOS and EOS), each with the token ids, float64 logits and greedy and 4-beam outputs of the
library under its ``generation_config.json``. Here they are imported and run: the tokenizer's ids, the logits (over
attnjax's ids: the library's, re-ordered by the vocabulary map), the generated tokens and texts, the files written
back, and what is refused.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from safetensors.numpy import load_file

from attnjax import decoding, generation
from attnjax.models.transformer import BLOCKED_LOGIT
from attnjax.tokens import BOS_ID, EOS_ID, PAD_ID, UNK_ID, VocabularyMap
from attnjax.transfer import published
from attnjax.transfer.bert import CheckpointError
from attnjax.transfer.generation_config import GenerationError
from tests.transfer.test_hf_export import FLOAT32_ERROR_MULTIPLE, FLOAT64_AGREEMENT, _library_position_table

REF = os.path.join(os.path.dirname(os.path.abspath(__file__)), "hf_import_reference")
NAMES = ("marian", "gpt2")


def _reference(name):
  with open(os.path.join(REF, name, "reference.json"), encoding="utf-8") as f:
    info = json.load(f)
  with np.load(os.path.join(REF, name, "reference.npz")) as arrays:
    return info, {k: arrays[k] for k in arrays.files}


def _import(name, **overrides):
  return published.import_checkpoint(os.path.join(REF, name), implementation="xla", **overrides)


def test_the_special_tokens_of_published_checkpoints_keep_their_ids():
  """opus-mt's layout (EOS 0, UNK 1, PAD last = decoder start) and GPT-2's (one <|endoftext|> last, BOS = EOS = UNK):
  each table id is read for each reserved id it is, and its logit appears exactly once."""
  marian, gpt2 = _import("marian").vocab_map, _import("gpt2").vocab_map
  assert marian == VocabularyMap(34, pad=33, bos=33, eos=0, unk=1)
  assert gpt2 == VocabularyMap(301, pad=-1, bos=300, eos=300, unk=300)
  for vocab_map in (marian, gpt2):
    inputs, outputs = vocab_map.input_rows(), vocab_map.output_rows()
    assert [inputs[i] for i in (BOS_ID, EOS_ID)] == [vocab_map.bos, vocab_map.eos]
    assert sorted(outputs[outputs >= 0]) == list(range(vocab_map.rows))  # every logit, once
    assert outputs[PAD_ID] == -1 and outputs[EOS_ID] == vocab_map.eos  # PAD's logit is BOS's (Marian) or none
  assert marian.output_rows()[BOS_ID] == 33 and gpt2.output_rows()[BOS_ID] == -1  # GPT-2's is EOS's already
  assert marian.to_attnjax([0, 1, 33, 2]) == [EOS_ID, UNK_ID, BOS_ID, 4]


@pytest.mark.parametrize("name", NAMES)
def test_the_tokenizer_gives_the_librarys_ids_and_texts(name):
  """Source ids as the library gives a model input (Marian's </s> appended; <unk> for unseen letters), GPT-2's
  prompts without BOS, and the library's decoded outputs from the generated ids."""
  info, ref = _reference(name)
  imported = _import(name)
  vocab_map = imported.vocab_map
  if name == "marian":
    for text, row, mask in zip(info["texts"], ref["input_ids"], ref["attention_mask"]):
      assert imported.source.encode(text) == vocab_map.to_attnjax(row[mask > 0]), text
      assert imported.target.encode(text) == vocab_map.to_attnjax(row[mask > 0][:-1]), text  # no </s>
    assert UNK_ID in imported.source.encode(info["texts"][-2])  # "the zebra quizzed"
    for key in ("greedy", "beam"):
      for row, text in zip(ref[key], info["decoded"][key]):
        assert imported.target.decode(vocab_map.to_attnjax(row[1:])) == text
  else:
    for text, ids in info["token_ids"].items():
      assert imported.target.prompt_ids(text) == vocab_map.to_attnjax(ids), text
    for key in ("greedy", "beam"):
      for prompt, row, text in zip(info["prompts"], ref[key], info["decoded"][key]):
        ids = imported.target.prompt_ids(prompt) + vocab_map.to_attnjax(row[row >= 0])
        assert imported.target.decode(ids) == text


def _logits(imported, ref, dtype):
  """The model's logits over attnjax's ids for the reference batch, in ``dtype``."""
  vocab_map = imported.vocab_map
  module = imported.module.clone(dtype=dtype, param_dtype=dtype)
  params = jax.tree_util.tree_map(lambda x: jnp.asarray(x, dtype), imported.params)
  ours = lambda ids: jnp.asarray([vocab_map.to_attnjax(row) for row in ids])
  if imported.kind == "transformer":
    return np.asarray(module.apply({"params": params}, ours(ref["input_ids"]), ours(ref["decoder_input_ids"]),
                                   jnp.asarray(ref["attention_mask"] > 0)))
  return np.asarray(module.apply({"params": params}, ours(ref["input_ids"])))


def _in_table_order(logits, vocab_map):
  """attnjax's logits ``[..., size]`` as the table's ``[..., rows]`` (each table id's one logit)."""
  rows = vocab_map.output_rows(logits.shape[-1])
  out = np.zeros(logits.shape[:-1] + (vocab_map.rows,), logits.dtype)
  out[..., rows[rows >= 0]] = logits[..., rows >= 0]
  return out


@pytest.mark.parametrize("name", NAMES)
def test_an_imported_checkpoint_computes_the_librarys_logits(name, x64, monkeypatch):
  """In float64 against the library's float64 logits, at the real positions: within float64's rounding of the
  library's own float32 error (test_hf_export.py's bound); float32 within a few times that error of attnjax's own
  float64. The ids without a logit of their own are blocked, so that the softmax is the library's."""
  info, ref = _reference(name)
  imported = _import(name)
  noise = info["float32_noise"]
  assert 0 < noise < 1e-4
  real = ref["decoder_input_ids"] != imported.vocab_map.pad if name == "marian" else ref["attention_mask"] > 0
  if name == "marian":
    _library_position_table(monkeypatch)  # the library's sinusoid, float32 (see test_hf_export.py)
  logits64 = _logits(imported, ref, jnp.float64)
  assert logits64.dtype == np.float64
  error = np.abs(_in_table_order(logits64, imported.vocab_map) - ref["logits64"])[real].max()
  print(f"{name}: float64 logits within {error:.2e} of the library's (bound {FLOAT64_AGREEMENT * noise:.2e})")
  assert error <= FLOAT64_AGREEMENT * noise
  blocked = imported.vocab_map.output_rows(logits64.shape[-1]) < 0
  assert np.all(logits64[..., blocked] == BLOCKED_LOGIT)
  logits32 = _logits(imported, ref, jnp.float32)
  assert np.abs(logits32 - logits64)[real].max() <= FLOAT32_ERROR_MULTIPLE * noise


def test_what_opus_mt_uses_is_what_makes_the_logits_agree(x64, monkeypatch):
  """Each of SiLU, the √d embedding scale and final_logits_bias moves the logits far past the bound: the
  comparison above sees them."""
  info, ref = _reference("marian")
  imported = _import("marian")
  real = ref["decoder_input_ids"] != imported.vocab_map.pad
  _library_position_table(monkeypatch)
  bias = dict(imported.params, final_logits_bias=np.zeros_like(imported.params["final_logits_bias"]))
  for module, params in ((imported.module.clone(activation="relu"), imported.params),
                         (imported.module.clone(scale_embeddings=False), imported.params), (imported.module, bias)):
    broken = dataclasses.replace(imported, module=module, params=params)
    logits = _in_table_order(_logits(broken, ref, jnp.float32), imported.vocab_map)
    assert np.abs(logits - ref["logits64"])[real].max() > 1e3 * info["float32_noise"]


def _marian_search(imported, src, rules=None, **overrides):
  g = imported.generation
  rules = decoding.SearchRules(**g.rules(imported.vocab_map, 1)) if rules is None else rules
  kwargs = dict(max_len_a=0.0, max_len_b=g.new_tokens(1), vocab_size=imported.vocab_map.size, min_len=g.min_new(1),
                rules=rules)
  variables = {"params": imported.params}
  greedy = decoding.greedy_search(imported.module, variables, src, **kwargs).tokens
  beam = decoding.beam_search(imported.module, variables, src, beam_size=g.num_beams, alpha=g.length_penalty,
                              **{**kwargs, **overrides}).tokens[:, 0]
  return np.asarray(greedy), np.asarray(beam)


def _padded(rows):
  out = np.full((len(rows), max(map(len, rows))), PAD_ID, np.int32)
  for i, row in enumerate(rows):
    out[i, :len(row)] = row
  return out


def test_marian_greedy_and_beam_search_give_the_librarys_tokens():
  """Under the directory's generation_config.json (4 beams, <pad> a bad word, EOS forced at max_length 16, the
  library's length penalty |Y|^1 and early-stopping heuristic): token for token, every row, those that end with a
  forced EOS included; and the texts. attnjax's own rules (GNMT's penalty, EOS at the limit by its probability)
  give other beams here: the comparison sees the rules."""
  info, ref = _reference("marian")
  imported = _import("marian")
  vocab_map = imported.vocab_map
  src = jnp.asarray(_padded([imported.source.encode(t) for t in info["texts"]]))
  greedy, beam = _marian_search(imported, src)
  for key, ours in (("greedy", greedy), ("beam", beam)):
    theirs = [[t for t in row[1:] if t != vocab_map.pad] for row in ref[key]]  # after the start, without padding
    assert [vocab_map.to_table(row[row != PAD_ID]) for row in ours] == theirs, key
    assert [imported.target.decode(row) for row in ours] == info["decoded"][key]
  assert any(row[-1] != vocab_map.pad for row in ref["beam"])  # rows that the forced EOS ends
  rules = decoding.SearchRules(**imported.generation.rules(vocab_map, 1))
  for changed in (dict(penalty="gnmt"), dict(at_limit="eos")):
    _, other = _marian_search(imported, src, dataclasses.replace(rules, **changed))
    assert [imported.target.decode(row) for row in other] != info["decoded"]["beam"], changed


def test_gpt2_greedy_and_beam_continuations_are_the_librarys():
  """Each prompt as the library's tokenizer gives it (no BOS), MAX_NEW new tokens: greedy token for token and
  4 beams by the library's rules (rows cut at the limit without EOS included)."""
  info, ref = _reference("gpt2")
  imported = _import("gpt2")
  vocab_map, g = imported.vocab_map, imported.generation
  for i, prompt in enumerate(info["prompts"]):
    ids = np.asarray([imported.target.prompt_ids(prompt)], np.int32)
    greedy = generation.generate(imported.module, imported.params, jnp.asarray(ids), jax.random.PRNGKey(0),
                                 max_new_tokens=info["max_new_tokens"], temperature=0.0)
    rules = decoding.SearchRules(**g.rules(vocab_map, ids.shape[1]))
    beam = generation.beam(imported.module, imported.params, ids, max_new_tokens=info["max_new_tokens"],
                           beam_size=4, alpha=g.length_penalty, rules=rules).tokens[0, 0]
    for key, ours in (("greedy", np.asarray(greedy[0])), ("beam", np.asarray(beam))):
      theirs = ref[key][i]
      assert vocab_map.to_table(ours[ours != PAD_ID]) == theirs[theirs >= 0].tolist(), (key, prompt)
  assert any(EOS_ID not in vocab_map.to_attnjax(row[row >= 0]) for row in ref["beam"])  # cut at the limit


@pytest.mark.parametrize("name", NAMES)
def test_export_of_the_imported_params_comes_back_bit_for_bit(name, tmp_path):
  """Written back: every tensor the library saved, equal; re-imported: the same module and bit-identical arrays;
  the tokenizer and generation files the same bytes."""
  imported = _import(name)
  config = published.export_checkpoint(imported.module, imported.params, tmp_path, imported.model_dir)
  assert config["vocab_size"] == imported.vocab_map.rows and config["eos_token_id"] == imported.vocab_map.eos
  written, committed = load_file(tmp_path / "model.safetensors"), load_file(os.path.join(REF, name,
                                                                                         "model.safetensors"))
  for key, value in committed.items():
    assert written[key].dtype == value.dtype and np.array_equal(written[key], value), key
  again = published.import_checkpoint(tmp_path, implementation="xla")
  assert again.module == imported.module and again.vocab_map == imported.vocab_map
  flat, back = jax.tree_util.tree_flatten_with_path(imported.params)[0], dict(
      jax.tree_util.tree_flatten_with_path(again.params)[0])
  assert len(flat) == len(back)
  for path, value in flat:
    assert back[path].dtype == value.dtype and np.array_equal(back[path], value), jax.tree_util.keystr(path)
  for file in os.listdir(os.path.join(REF, name)):
    if file not in ("config.json", "model.safetensors", "reference.json", "reference.npz"):
      assert (tmp_path / file).read_bytes() == open(os.path.join(REF, name, file), "rb").read(), file


def _copy(name, tmp_path, drop=()):
  for file in os.listdir(os.path.join(REF, name)):
    if file not in drop:
      shutil.copy(os.path.join(REF, name, file), tmp_path / file)
  return tmp_path


def _edit(path, **changes):
  values = json.loads(path.read_text())
  values.update(changes)
  path.write_text(json.dumps(values))


def test_a_pickled_checkpoint_alone_is_refused_in_one_line_and_never_unpickled(tmp_path):
  directory = _copy("marian", tmp_path, drop=("model.safetensors",))
  (directory / "pytorch_model.bin").write_bytes(b"not a pickle: reading it as one would fail differently")
  with pytest.raises(CheckpointError, match=r"model.safetensors: no such file \(pytorch_model.bin is there: "
                                            r"convert it to safetensors\)") as raised:
    published.import_checkpoint(directory)
  assert "\n" not in str(raised.value)


@pytest.mark.parametrize("name, file, changes, option", [
    ("marian", "config.json", dict(model_type="bart"), "learned positions with an offset of 2 and an embedding "
                                                       "LayerNorm"),
    ("marian", "config.json", dict(normalize_embedding=True), "normalize_embedding=true"),
    ("marian", "config.json", dict(activation_function="gelu_fast"), "activation_function='gelu_fast'"),
    ("marian", "config.json", dict(share_encoder_decoder_embeddings=False), "share_encoder_decoder_embeddings=false"),
    ("marian", "config.json", dict(decoder_ffn_dim=64), "encoder_ffn_dim != decoder_ffn_dim"),
    ("gpt2", "config.json", dict(scale_attn_by_inverse_layer_idx=True), "scale_attn_by_inverse_layer_idx=true"),
    ("gpt2", "config.json", dict(model_type="t5"), "model_type 't5' is not imported"),
    ("marian", "generation_config.json", dict(repetition_penalty=1.2), "repetition_penalty=1.2"),
    ("marian", "generation_config.json", dict(bad_words_ids=[[33], [4, 5]]), r"bad_words_ids \[4, 5\]"),
])
def test_an_option_attnjax_does_not_represent_is_refused_naming_it(name, file, changes, option, tmp_path):
  directory = _copy(name, tmp_path)
  _edit(directory / file, **changes)
  with pytest.raises(ValueError, match=option) as raised:
    published.import_checkpoint(directory)
  assert isinstance(raised.value, (published.ImportRefused, GenerationError)) and "\n" not in str(raised.value)


def test_a_pegasus_checkpoint_imports_by_its_config_alone(tmp_path, x64, monkeypatch):
  """The pre-norm Transformer of test_hf_export.py's Pegasus files without attnjax's record of its fields: built from
  config.json alone (LayerNorm ε 1e-5 as the library's), its logits are the library's; greedy (the PAD and BOS it
  suppresses) and 4 beams by raw log-probability under the library's early-stopping heuristic give its tokens, every
  row."""
  source = os.path.join(os.path.dirname(REF), "hf_export_reference", "pegasus")
  for file in os.listdir(source):
    shutil.copy(os.path.join(source, file), tmp_path / file)
  config = json.loads((tmp_path / "config.json").read_text())
  del config["attnjax_model"]
  (tmp_path / "config.json").write_text(json.dumps(config))
  with np.load(os.path.join(source, "reference.npz")) as arrays:
    ref = {k: arrays[k] for k in arrays.files}
  imported = published.import_checkpoint(tmp_path, implementation="xla")
  assert imported.module.pre_norm and imported.module.layer_norm_epsilon == 1e-5
  assert imported.vocab_map == VocabularyMap(config["vocab_size"], pad=0, bos=1, eos=2)  # UNK "⁇" is a character
  noise = np.abs(ref["logits"] - ref["logits64"]).max()
  _library_position_table(monkeypatch)
  logits64 = _in_table_order(_logits(imported, ref, jnp.float64), imported.vocab_map)
  assert np.abs(logits64 - ref["logits64"]).max() <= FLOAT64_AGREEMENT * noise
  monkeypatch.undo()
  jax.config.update("jax_enable_x64", False)
  vocab_map = imported.vocab_map
  src = jnp.asarray([vocab_map.to_attnjax(row) for row in ref["input_ids"]])
  mask = jnp.asarray(ref["attention_mask"] > 0)
  g = imported.generation
  rules = decoding.SearchRules(**g.rules(vocab_map, 1))
  kwargs = dict(src_mask=mask, max_len_a=0.0, max_len_b=24, vocab_size=vocab_map.size, rules=rules)
  greedy = decoding.greedy_search(imported.module, {"params": imported.params}, src, **kwargs).tokens
  beam = decoding.beam_search(imported.module, {"params": imported.params}, src, beam_size=4, alpha=0.0,
                              **{**kwargs, "rules": dataclasses.replace(rules, stop="heuristic")}).tokens[:, 0]
  for key, ours in (("greedy", np.asarray(greedy)), ("beam", np.asarray(beam))):
    theirs = [row.tolist() for row in ref[key]]  # saved without the decoder start
    theirs = [row[:row.index(2) + 1] if 2 in row else row for row in theirs]  # up to EOS (then the library's pad)
    assert [vocab_map.to_table(row[row != PAD_ID]) for row in ours] == theirs, key


def test_a_run_fine_tuning_a_checkpoint_takes_its_architecture_and_keeps_its_own_dropout(tmp_path):
  """train.init_from naming a checkpoint directory: config.model becomes the checkpoint's (its vocabulary map
  included), with the run's dropout rate, dtype and attention implementation; a GPT-2 checkpoint is refused in one
  line (the language-model data reader tokenizes with a vocabulary of its own)."""
  from attnjax.config import base_config  # pylint: disable=g-import-not-at-top
  from attnjax.training import warm_start  # pylint: disable=g-import-not-at-top
  config = base_config()
  config.train.init_from = os.path.join(REF, "marian")
  config.model.dropout_rate, config.model.implementation = 0.3, "xla"
  assert warm_start.adopt_checkpoint_model(config, str(tmp_path))
  model = config.model.to_dict()
  assert model == {**published.model_config(os.path.join(REF, "marian")), "dropout_rate": 0.3, "dtype": "float32",
                   "implementation": "xla", "attention_dropout_rate": 0.0, "relu_dropout_rate": 0.0}
  assert model["activation"] == "silu" and model["vocab_map"] == (34, 33, 33, 0, 1) and model["d_model"] == 16
  config.train.init_from = os.path.join(REF, "gpt2")
  with pytest.raises(ValueError, match="a decoder_lm checkpoint; fine-tuning takes an encoder-decoder") as raised:
    warm_start.adopt_checkpoint_model(config, str(tmp_path))
  assert "\n" not in str(raised.value)
  config.train.init_from = None
  assert not warm_start.adopt_checkpoint_model(config, str(tmp_path))
