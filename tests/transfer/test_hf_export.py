"""Export to Hugging Face, checked against the ``transformers`` library's own numbers.

``hf_export_reference/`` (written by ``tools/hf_export_reference.py``) holds four tiny attnjax models exported to
Marian (post-norm, LayerNorm ε 1e-5; once with one vocabulary, once with a source and a target vocabulary), Pegasus
(pre-norm, ε 1e-6) and GPT-2, with the token ids, logits, greedy and beam outputs that ``transformers`` computed from
those files. Here the files are imported back into attnjax and run:
the same ids from the tokenizer, the same logits, the same generated tokens; and exported again, the same bytes.
"""

from __future__ import annotations

import json
import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from safetensors.numpy import load_file, save_file

from attnjax import decoding, generation
from attnjax.data.tokenizer import SentencePieceVocab
from attnjax.data.vocab import CharVocab
from attnjax.models.lm import DecoderLM
from attnjax.models.transformer import Transformer
from attnjax.tokens import EOS_ID
from attnjax.transfer import hf_tokenizer, lm, seq2seq
from attnjax.transfer.bert import CheckpointError
from attnjax.transfer.seq2seq import ExportError

REF = os.path.join(os.path.dirname(__file__), "hf_export_reference")
SEQ2SEQ = ("marian", "pegasus", "marian_separate")


def _reference(name):
  with open(os.path.join(REF, name, "reference.json"), encoding="utf-8") as f:
    info = json.load(f)
  return info, dict(np.load(os.path.join(REF, name, "reference.npz")))


def _import(name):
  return (lm.import_lm if name == "gpt2" else seq2seq.import_transformer)(os.path.join(REF, name),
                                                                          implementation="xla")


def _vocab(name, info):
  if name == "gpt2":
    return SentencePieceVocab.load(os.path.join(REF, name, "vocab.spm.model"))
  return CharVocab.build(info["texts"])


def _target_vocab(name, info):
  """The target side's vocabulary: its own where the model has two (``target_tokenizer/``)."""
  return CharVocab.build(info["target_texts"]) if "target_texts" in info else _vocab(name, info)


@pytest.mark.parametrize("name", SEQ2SEQ + ("gpt2",))
def test_the_tokenizer_gives_the_vocabularys_ids_and_is_written_again_byte_for_byte(name):
  info, ref = _reference(name)
  vocab = _vocab(name, info)
  for row, text in enumerate(info["texts"]):
    ids = vocab.encode(text)
    np.testing.assert_array_equal(ref["input_ids"][row, :len(ids)], ids, err_msg=text)
    assert not ref["attention_mask"][row, len(ids):].any()
  with open(os.path.join(REF, name, hf_tokenizer.TOKENIZER_FILE), encoding="utf-8") as f:
    assert hf_tokenizer.hf_tokenizer(vocab).to_str(pretty=True) + "\n" == f.read()
  target = _target_vocab(name, info)
  decoded = info["decoded"]["greedy"]
  for row, text in enumerate(decoded):  # transformers' decoding of its ids is the target vocabulary's
    assert target.decode(ref["greedy"][row]) == text


def test_a_separate_target_vocabulary_travels_in_target_tokenizer():
  """Two vocabularies: the library's ``target_tokenizer/`` gives the target vocabulary's ids (not the source's: the
  same letters have other ids there), and is the file attnjax writes for it."""
  info, ref = _reference("marian_separate")
  source, target = _vocab("marian_separate", info), _target_vocab("marian_separate", info)
  assert source.size != target.size
  for row, text in enumerate(info["target_texts"]):
    ids = target.encode(text)
    np.testing.assert_array_equal(ref["target_ids"][row, :len(ids)], ids, err_msg=text)
    assert not ref["target_mask"][row, len(ids):].any()
  with open(os.path.join(REF, "marian_separate", "target_tokenizer", hf_tokenizer.TOKENIZER_FILE),
            encoding="utf-8") as f:
    assert hf_tokenizer.hf_tokenizer(target).to_str(pretty=True) + "\n" == f.read()
  with open(os.path.join(REF, "marian_separate", "config.json"), encoding="utf-8") as f:
    config = json.load(f)
  assert (config["vocab_size"], config["decoder_vocab_size"]) == (source.size, target.size)
  assert config["share_encoder_decoder_embeddings"] is False


# float64's rounding unit is 2^-29 of float32's: the library's own float32 run sits ``float32_noise`` from its float64
# logits, so a float64 run of the same arithmetic in another order is expected within about float32_noise · 2^-29 of
# them, and 2^10 of that is left for other summation orders and lengths; a wrong weight, offset, epsilon or position
# moves the logits by far more (``test_a_hand_made_break_is_seen_by_the_logits_comparison``).
FLOAT64_AGREEMENT = 2.0**-19
# attnjax's float32 logits against its own float64 ones, in units of the library's float32 error on the same
# model: two float32 evaluations of one function, of errors of one order whatever the CPU; the check is there to catch
# a lower precision on the way (bfloat16's rounding unit is 2^16 float32's, float16's 2^13), far past 8.
FLOAT32_ERROR_MULTIPLE = 8.0


def _float64(module, params):
  """The model and its parameters in float64 (the files' float32 values widened, as torch's ``.double()`` does)."""
  return (module.clone(dtype=jnp.float64, param_dtype=jnp.float64),
          jax.tree_util.tree_map(lambda x: jnp.asarray(x, jnp.float64), params))


def _library_position_table(monkeypatch):
  """The sinusoid as the library holds it: computed in float64 and stored as float32, so its ``.double()`` model
  adds positions rounded to float32; attnjax computes them in the model's dtype."""
  from attnjax.layers import embedding  # pylint: disable=g-import-not-at-top
  exact = embedding.kernels.sinusoidal_positions

  def rounded(*args, **kwargs):
    return exact(*args, **{**kwargs, "dtype": jnp.float64}).astype(jnp.float32).astype(kwargs.get("dtype"))

  monkeypatch.setattr(embedding.kernels, "sinusoidal_positions", rounded)


@pytest.mark.parametrize("name", SEQ2SEQ)
def test_an_exported_encoder_decoder_computes_the_librarys_logits(name, x64, monkeypatch):
  """Against the library's float64 logits of the same files, in float64: with the library's LayerNorm epsilon
  (1e-5, which Marian's model was trained with; Pegasus's was trained with attnjax's 1e-6) and its float32 position
  table, the same logits to float64's rounding; with the model's own epsilon, Pegasus's move by the epsilon, within a
  few times the library's float32 error. In float32, attnjax's logits are as far from its float64 ones as float32
  allows (``FLOAT32_ERROR_MULTIPLE``)."""
  _, ref = _reference(name)
  module, params = _import(name)
  src, tgt = jnp.asarray(ref["input_ids"]), jnp.asarray(ref["decoder_input_ids"])
  float32_noise = np.abs(ref["logits"] - ref["logits64"]).max()
  assert 0 < float32_noise < 1e-3
  module64, params64 = _float64(module, params)
  logits64 = np.asarray(module64.apply({"params": params64}, src, tgt, src != 0))
  logits32 = np.asarray(module.apply({"params": params}, src, tgt, src != 0))
  assert logits64.dtype == np.float64 and logits32.dtype == np.float32
  assert np.abs(logits32 - logits64).max() <= FLOAT32_ERROR_MULTIPLE * float32_noise
  if module.layer_norm_epsilon != seq2seq.HF_LAYER_NORM_EPSILON:  # the epsilon's own effect (float64 both sides)
    assert np.abs(logits64 - ref["logits64"]).max() <= 4.0 * float32_noise
  _library_position_table(monkeypatch)
  as_library = module64.clone(layer_norm_epsilon=seq2seq.HF_LAYER_NORM_EPSILON)
  logits = np.asarray(as_library.apply({"params": params64}, src, tgt, src != 0))
  assert np.abs(logits - ref["logits64"]).max() <= FLOAT64_AGREEMENT * float32_noise


def _until_eos(tokens, length):
  """``[B, length]``: each row up to and with its first EOS, PAD after (the library pads beams with EOS)."""
  tokens = np.asarray(tokens)[:, :length]
  out = np.zeros((tokens.shape[0], length), np.int64)
  for row, t in enumerate(tokens):
    end = list(t).index(EOS_ID) + 1 if EOS_ID in t else len(t)
    out[row, :end] = t[:end]
  return out


@pytest.mark.parametrize("name", SEQ2SEQ)
def test_greedy_and_beam_search_give_the_librarys_tokens(name):
  """Greedy: every row, those the length limit stops included (attnjax ends a row at its limit with EOS, the library
  without: one more step here, and the comparison stops at the library's limit). Beam search by raw log-probability
  (α = 0, length_penalty 0): the rows whose best hypothesis ended with EOS, where the two searches' rules coincide."""
  info, ref = _reference(name)
  module, params = _import(name)
  src = jnp.asarray(ref["input_ids"])
  new = info["max_new_tokens"]
  kwargs = dict(max_len_a=0.0, max_len_b=new + 1, vocab_size=module.tgt_vocab_size)
  greedy = decoding.greedy_search(module, {"params": params}, src, **kwargs).tokens
  np.testing.assert_array_equal(_until_eos(greedy, new), _until_eos(ref["greedy"], new))
  beam = decoding.beam_search(module, {"params": params}, src, beam_size=4, alpha=0.0, **kwargs).tokens[:, 0]
  theirs = _until_eos(ref["beam"], new)
  finished = [row for row, t in enumerate(theirs) if EOS_ID in t]
  assert len(finished) >= 4
  np.testing.assert_array_equal(_until_eos(beam, new)[finished], theirs[finished])
  assert not np.array_equal(_until_eos(ref["greedy"], new), theirs)  # the beams found what greedy did not


def test_an_exported_lm_computes_the_librarys_logits_and_greedy_continuations(x64):
  """Logits against the library's float64 ones in float64 (GPT-2's epsilon is configurable: exact), float32 against
  attnjax's own float64 (the bounds of the encoder-decoder test); greedy continuations token for token."""
  info, ref = _reference("gpt2")
  module, params = _import("gpt2")
  mask = ref["attention_mask"].astype(bool)
  ids = jnp.asarray(ref["input_ids"])
  float32_noise = np.abs(ref["logits"] - ref["logits64"])[mask].max()
  assert 0 < float32_noise < 1e-3
  module64, params64 = _float64(module, params)
  logits64 = np.asarray(module64.apply({"params": params64}, ids))
  logits32 = np.asarray(module.apply({"params": params}, ids))
  assert logits64.dtype == np.float64 and logits32.dtype == np.float32
  assert np.abs(logits64 - ref["logits64"])[mask].max() <= FLOAT64_AGREEMENT * float32_noise
  assert np.abs(logits32 - logits64)[mask].max() <= FLOAT32_ERROR_MULTIPLE * float32_noise
  tokens = generation.generate(module, params, jnp.asarray(ref["prompt"]), jax.random.PRNGKey(0),
                               max_new_tokens=info["max_new_tokens"], temperature=0.0)
  np.testing.assert_array_equal(np.asarray(tokens), ref["greedy"])


@pytest.mark.parametrize("name", SEQ2SEQ + ("gpt2",))
def test_files_to_attnjax_to_files_is_bit_exact(name):
  module, params = _import(name)
  exporter = lm if name == "gpt2" else seq2seq
  tensors = exporter.tensors_from_params(module, params)
  committed = load_file(os.path.join(REF, name, "model.safetensors"))
  assert sorted(tensors) == sorted(committed)
  for key, value in committed.items():
    assert tensors[key].dtype == value.dtype and np.array_equal(tensors[key], value), key
  with open(os.path.join(REF, name, "config.json"), encoding="utf-8") as f:
    assert exporter.config_from_module(module) == json.load(f)
  again = exporter.params_from_tensors(module, tensors)
  for a, b in zip(jax.tree_util.tree_leaves(params), jax.tree_util.tree_leaves(again)):
    assert np.array_equal(a, b)


def test_a_hand_made_break_is_seen_by_the_logits_comparison():
  """A transposed query projection, and target positions off by one (an architecture's offset), each move the
  logits far past the tolerance: the comparison above can fail."""
  _, ref = _reference("marian")
  module, params = _import("marian")
  src, tgt = jnp.asarray(ref["input_ids"]), jnp.asarray(ref["decoder_input_ids"])
  broken = jax.tree_util.tree_map(lambda x: x, params)
  kernel = broken["encoder_0"]["self_attention"]["query"]["kernel"]
  broken["encoder_0"]["self_attention"]["query"]["kernel"] = kernel.reshape(kernel.shape[0], -1).T.reshape(kernel.shape)
  logits = module.apply({"params": broken}, src, tgt, src != 0)
  assert np.abs(np.asarray(logits) - ref["logits"]).max() > 1e-2
  shifted = module.apply({"params": params}, src, tgt, src != 0, tgt_positions=jnp.arange(1, tgt.shape[1] + 1))
  assert np.abs(np.asarray(shifted) - ref["logits"]).max() > 1e-2


def _tiny(**fields):
  return Transformer(**{**dict(src_vocab_size=12, tgt_vocab_size=12, num_encoder_layers=1, num_decoder_layers=1,
                               d_model=8, num_heads=2, d_ff=16, shared_vocab=True), **fields})


@pytest.mark.parametrize("fields, option", [
    (dict(positional="learned"), "positional='learned'"),
    (dict(positional="relative"), "positional='relative'"),
    (dict(attention_type="local"), "attention_type='local'"),
    (dict(copy=True), "copy=True"),
    (dict(pre_norm=True, share_source_embeddings=False), "share_source_embeddings=False"),
])
def test_what_no_architecture_represents_is_refused_naming_the_option(fields, option):
  with pytest.raises(ExportError, match=option.replace("(", r"\(")):
    seq2seq.config_from_module(_tiny(**fields))


@pytest.mark.parametrize("positional", ["sinusoidal", "relative", "t5"])
def test_an_lm_without_learned_positions_is_refused(positional):
  with pytest.raises(ExportError, match=f"positional={positional!r}"):
    lm.config_from_module(DecoderLM(vocab_size=10, num_layers=1, d_model=8, num_heads=2, d_ff=16,
                                    positional=positional))


def _copy(tmp_path, name):
  out = tmp_path / name
  out.mkdir()
  for file in ("config.json", "model.safetensors"):
    (out / file).write_bytes(open(os.path.join(REF, name, file), "rb").read())
  return out


@pytest.mark.parametrize("name", ("marian", "gpt2"))
def test_each_kind_of_bad_checkpoint_fails_naming_the_file_and_the_tensor(tmp_path, name):
  load = lm.import_lm if name == "gpt2" else seq2seq.import_transformer
  tensor = "model.encoder.layers.1.fc2.weight" if name == "marian" else "transformer.h.1.mlp.c_fc.weight"
  out = _copy(tmp_path, name)
  weights = out / "model.safetensors"
  good = load_file(weights)

  def write(tensors):
    save_file(tensors, weights)

  write({k: v for k, v in good.items() if k != tensor})
  with pytest.raises(CheckpointError, match=f"model.safetensors: tensor {tensor} is missing"):
    load(out)
  write({**good, tensor: good[tensor][:, :-1].copy()})
  with pytest.raises(CheckpointError, match=f"tensor {tensor} has shape"):
    load(out)
  write({**good, tensor: good[tensor].astype(np.float16)})
  with pytest.raises(CheckpointError, match=f"tensor {tensor} is float16"):
    load(out)
  weights.write_bytes(b"not safetensors")
  with pytest.raises(CheckpointError, match="model.safetensors: not a safetensors file"):
    load(out)
  (out / "config.json").write_text("{")
  with pytest.raises(CheckpointError, match="config.json: not JSON"):
    load(out)
  (out / "config.json").write_text(json.dumps({"model_type": "bart"}))
  with pytest.raises(CheckpointError, match="config.json: not an attnjax"):
    load(out)


def test_a_shared_embeddings_copies_must_agree(tmp_path):
  out = _copy(tmp_path, "pegasus")
  tensors = load_file(out / "model.safetensors")
  tensors["model.decoder.embed_tokens.weight"] = tensors["model.decoder.embed_tokens.weight"] + 1
  save_file(tensors, out / "model.safetensors")
  with pytest.raises(CheckpointError, match="model.decoder.embed_tokens.weight differs from model.shared.weight"):
    seq2seq.import_transformer(out)


def test_the_hidden_order_puts_the_sines_first_as_the_librarys_sinusoid_does():
  """Our interleaved sinusoid, permuted by hidden_order, is Marian's table (sines, then cosines), as its formula
  gives it: a NumPy transcription of MarianSinusoidalPositionalEmbedding."""
  from attnjax.kernels import sinusoidal_positions
  for d in (8, 9, 16):
    pos = np.arange(20)[:, None]
    angle = pos / np.power(10000, 2 * (np.arange(d) // 2) / d)
    half = d // 2 + d % 2
    theirs = np.concatenate([np.sin(angle[:, 0::2]), np.cos(angle[:, 1::2])], axis=1)[:, :d]
    assert theirs.shape[1] == d and half == len(range(0, d, 2))
    ours = np.asarray(sinusoidal_positions(20, d))
    np.testing.assert_allclose(ours[:, seq2seq.hidden_order(d)], theirs, atol=2e-5)


# --------------------------------------------------------------------------------------------- trained workdirs


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
  """A tiny Transformer on the dates task and a tiny LM on its fixture text, each trained a few steps."""
  from attnjax.training.loop import train_and_evaluate
  from tests import lm_fixture
  from tests.training.run_steps import tiny_config
  root = tmp_path_factory.mktemp("runs")
  config = tiny_config((1, 1, 1))
  config.data.bucket_boundaries = None
  config.train.steps = config.train.eval_every = config.train.checkpoint_every = config.train.log_every = 5
  config.eval.decode, config.eval.num_decode_examples = "greedy", 8
  train_and_evaluate(config, str(root / "transformer"))
  config = lm_fixture.tiny_lm_config(root / "data")
  config.train.steps = config.train.eval_every = config.train.checkpoint_every = config.train.log_every = 5
  train_and_evaluate(config, str(root / "lm"))
  train_and_evaluate(_two_vocabularies_config(root / "text"), str(root / "two_vocabularies"))
  return root


TEXT_WORDS = "the a man woman dog cat sees runs with on red blue big small house street ball child".split()


def _target_sentence(source):
  return " ".join(w.upper() for w in reversed(source.split())) + " !"


def _two_vocabularies_config(data):
  """A text task whose target is its source's words reversed and upper-cased, with a SentencePiece vocabulary for
  each side (``data.joint_vocab=False``) and untied source and target embeddings: a Marian export with
  ``decoder_vocab_size``."""
  from attnjax import config as config_lib
  from attnjax.data.catalogue import use_task
  data.mkdir()
  rng = np.random.default_rng(0)
  for split, n in (("train", 200), ("val", 8), ("test", 8)):
    src = [" ".join(rng.choice(TEXT_WORDS, size=rng.integers(2, 7))) for _ in range(n)]
    (data / f"{split}.en").write_text("".join(s + "\n" for s in src), encoding="utf-8")
    (data / f"{split}.de").write_text("".join(_target_sentence(s) + "\n" for s in src), encoding="utf-8")
  config = config_lib.base_config()
  use_task(config, "multi30k_en_de")
  with config.data.unlocked():
    config.data.update(dict(dir=str(data), splits={"train": "train", "validation": "val", "test": "test"},
                            vocab_size=30, joint_vocab=False, max_src_len=16, max_tgt_len=20, max_tokens=256,
                            bucket_boundaries=None))
  config.model.update(dict(num_encoder_layers=1, num_decoder_layers=1, d_model=16, num_heads=2, d_ff=32,
                           shared_vocab=False, share_source_embeddings=False, pre_norm=False))
  config.train.steps = config.train.eval_every = config.train.checkpoint_every = config.train.log_every = 5
  config.eval.update(dict(decode="greedy", num_decode_examples=4))
  return config


@pytest.mark.parametrize("run", ["transformer", "lm"])
def test_a_trained_workdir_exports_with_its_vocabulary_and_comes_back_bit_for_bit(trained, tmp_path, run):
  from tokenizers import Tokenizer
  from attnjax.export import export_workdir
  from attnjax.trained import load_workdir
  summary = export_workdir(str(trained / run), str(tmp_path))
  assert summary["architecture"] == {"transformer": "MarianMTModel", "lm": "GPT2LMHeadModel"}[run]
  assert {"config.json", "model.safetensors", "generation_config.json", "tokenizer.json",
          "tokenizer_config.json"} <= set(summary["files"])
  loaded = load_workdir(str(trained / run))
  module, params = (seq2seq.import_transformer if run == "transformer" else lm.import_lm)(tmp_path)
  ours = jax.tree_util.tree_flatten_with_path(jax.tree_util.tree_map(np.asarray, loaded.params))[0]
  back = dict(jax.tree_util.tree_flatten_with_path(params)[0])
  assert len(ours) == len(back)
  for path, value in ours:
    assert np.array_equal(back[path], value), jax.tree_util.keystr(path)
  tokenizer = Tokenizer.from_file(str(tmp_path / "tokenizer.json"))
  tokenizer.encode_special_tokens = True
  vocab = loaded.vocabularies.src
  for text in ("2019-03-07", "March 7, 2019", "the cat sat", " Männer, <s> ⁇"):
    assert tokenizer.encode(text).ids == vocab.encode(text), text
  generation = json.loads((tmp_path / "generation_config.json").read_text())
  assert generation["suppress_tokens"][:2] == [0, 1] and generation.get("num_beams") == 1


def test_two_vocabularies_export_the_targets_as_target_tokenizer(trained, tmp_path):
  """``data.joint_vocab=False``: ``tokenizer.json`` gives the source vocabulary's ids and
  ``target_tokenizer/tokenizer.json`` the target's (which differ on the same text), the config has both sizes, and
  the parameters come back bit for bit."""
  from tokenizers import Tokenizer
  from attnjax.export import export_workdir
  from attnjax.trained import load_workdir
  summary = export_workdir(str(trained / "two_vocabularies"), str(tmp_path))
  assert summary["architecture"] == "MarianMTModel" and "target_tokenizer" in summary["files"]
  loaded = load_workdir(str(trained / "two_vocabularies"))
  src, tgt = loaded.vocabularies.src, loaded.vocabularies.tgt
  config = json.loads((tmp_path / "config.json").read_text())
  assert (config["vocab_size"], config["decoder_vocab_size"]) == (loaded.model.src_vocab_size,
                                                                  loaded.model.tgt_vocab_size)
  assert config["share_encoder_decoder_embeddings"] is False
  source = Tokenizer.from_file(str(tmp_path / "tokenizer.json"))
  target = Tokenizer.from_file(str(tmp_path / "target_tokenizer" / "tokenizer.json"))
  differ = 0
  for words in (["the", "dog", "sees", "a", "ball"], ["red", "house"], ["small", "child", "runs"]):
    text, out = " ".join(words), _target_sentence(" ".join(words))
    assert source.encode(text).ids == src.encode(text), text
    assert target.encode(out).ids == tgt.encode(out), out
    assert target.decode(tgt.encode(out), skip_special_tokens=True) == tgt.decode(tgt.encode(out))
    differ += src.encode(out) != tgt.encode(out)
  assert differ  # the two vocabularies give the same text other ids: a swapped file would be seen
  _, params = seq2seq.import_transformer(tmp_path)
  back = dict(jax.tree_util.tree_flatten_with_path(params)[0])
  ours = jax.tree_util.tree_flatten_with_path(jax.tree_util.tree_map(np.asarray, loaded.params))[0]
  assert len(ours) == len(back) and all(np.array_equal(back[p], v) for p, v in ours)


def test_export_refuses_a_model_it_cannot_represent_in_one_line(trained, tmp_path):
  from attnjax import config as config_lib
  from attnjax.export import export_workdir
  import shutil
  run = tmp_path / "run"
  shutil.copytree(trained / "transformer", run)
  config = config_lib.load_config(str(run))
  config.model.positional = "learned"
  (run / "config.json").write_text(config.to_json(indent=1))
  with pytest.raises(ExportError, match="positional='learned'"):
    export_workdir(str(run), str(tmp_path / "out"))


def test_pre_norm_applies_to_the_bert_encoder_only():
  """(A pre-norm BERT encoder exports as RobertaPreLayerNormModel: tests/transfer/test_bert_prenorm.py.)"""
  from attnjax.models.span_qa import SpanQA  # pylint: disable=g-import-not-at-top
  with pytest.raises(ValueError, match="pre_norm applies to the BERT encoder"):
    SpanQA(vocab_size=32, encoder="bilstm", d_model=8, pre_norm=True)
