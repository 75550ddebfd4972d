"""Hugging Face BERT checkpoints: a tiny BERT written by the test runs here as a NumPy transcription of BERT's forward
pass says (and, where ``transformers`` is installed, as ``BertModel`` computes it); a tiny checkpoint that
``transformers`` wrote runs here as the library ran it, for each activation the import accepts (``bert_reference/``,
written by ``tools/bert_reference.py``); export gives back the same files; a bad checkpoint is refused before any
compute, naming the file and the tensor. Nothing is downloaded."""

import hashlib
import json
import math
import os
import shutil
import subprocess
import sys

import jax
import numpy as np
import pytest
from safetensors.numpy import load_file, save_file

from attnjax.models.bert import mean_pool
from attnjax.transfer import bert, sentence

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
REFERENCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "bert_reference")  # tools/bert_reference.py
WORDS = ["the", "a", "man", "woman", "is", "playing", "guitar", "piano", "dog", "runs", "cat", "sleeps", "on", "grass",
         "##s", "##ing", "play", "run", "."]
# layer_norm_eps: BERT uses 1e-12; a large one here makes a LayerNorm that ignores it visible at 1e-5.
CONFIG = {"architectures": ["BertModel"], "model_type": "bert", "vocab_size": 5 + len(WORDS) + 3, "hidden_size": 16,
          "num_hidden_layers": 2, "num_attention_heads": 4, "intermediate_size": 24, "max_position_embeddings": 20,
          "type_vocab_size": 2, "layer_norm_eps": 1e-3, "hidden_act": "gelu", "hidden_dropout_prob": 0.1,
          "attention_probs_dropout_prob": 0.1, "initializer_range": 0.02, "position_embedding_type": "absolute",
          "pad_token_id": 0}


def _random_tensors(config, seed=0):
  """BertModel's tensors, random (LayerNorm scales away from 1 and biases away from 0, so that each one matters)."""
  rng = np.random.default_rng(seed)
  d, f, v = config["hidden_size"], config["intermediate_size"], config["vocab_size"]
  t = {"embeddings.word_embeddings.weight": rng.normal(0, 0.5, (v, d)),
       "embeddings.position_embeddings.weight": rng.normal(0, 0.5, (config["max_position_embeddings"], d)),
       "embeddings.token_type_embeddings.weight": rng.normal(0, 0.5, (2, d)),
       "embeddings.LayerNorm.weight": rng.uniform(0.5, 1.5, d), "embeddings.LayerNorm.bias": rng.normal(0, 0.1, d)}
  for i in range(config["num_hidden_layers"]):
    p = f"encoder.layer.{i}."
    for name in ("query", "key", "value"):
      t[f"{p}attention.self.{name}.weight"] = rng.normal(0, 0.4, (d, d))
      t[f"{p}attention.self.{name}.bias"] = rng.normal(0, 0.1, d)
    t[f"{p}attention.output.dense.weight"] = rng.normal(0, 0.3, (d, d))
    t[f"{p}attention.output.dense.bias"] = rng.normal(0, 0.1, d)
    t[f"{p}intermediate.dense.weight"] = rng.normal(0, 0.3, (f, d))
    t[f"{p}intermediate.dense.bias"] = rng.normal(0, 0.1, f)
    t[f"{p}output.dense.weight"] = rng.normal(0, 0.3, (d, f))
    t[f"{p}output.dense.bias"] = rng.normal(0, 0.1, d)
    for block in ("attention.output.", "output."):
      t[f"{p}{block}LayerNorm.weight"] = rng.uniform(0.5, 1.5, d)
      t[f"{p}{block}LayerNorm.bias"] = rng.normal(0, 0.1, d)
  t["pooler.dense.weight"] = rng.normal(0, 0.3, (d, d))
  t["pooler.dense.bias"] = rng.normal(0, 0.1, d)
  t = {k: np.asarray(x, np.float32) for k, x in t.items()}
  t["embeddings.position_ids"] = np.arange(config["max_position_embeddings"], dtype=np.int64)[None]
  return t


def write_tiny_bert(directory, config=None, tensors=None):
  config = dict(CONFIG if config is None else config)
  os.makedirs(directory, exist_ok=True)
  with open(os.path.join(directory, "config.json"), "w", encoding="utf-8") as f:
    json.dump(config, f)
  save_file(_random_tensors(config) if tensors is None else tensors, os.path.join(directory, "model.safetensors"),
            metadata={"format": "pt"})
  with open(os.path.join(directory, "vocab.txt"), "w", encoding="utf-8") as f:
    f.write("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + WORDS) + "\n")
  return directory


# ------------------------------------------------------------------------------ BERT's forward pass, in NumPy


def _layer_norm(x, w, b, eps):
  mu = x.mean(-1, keepdims=True)
  var = ((x - mu) ** 2).mean(-1, keepdims=True)
  return (x - mu) / np.sqrt(var + eps) * w + b


def _gelu(x):  # x Φ(x), Φ the standard normal CDF
  return x * 0.5 * (1.0 + np.vectorize(math.erf)(x / math.sqrt(2.0)))


def numpy_bert(t, config, ids, mask, types, *, pre_norm=False):
  """Devlin et al.'s encoder as Hugging Face's BertModel computes it, in float64: all hidden states and the pooler.
  With ``pre_norm`` each sublayer reads its input normalised by the LayerNorm that post-norm applies after it,
  x + f(LN(x)), and ``final_norm.weight`` / ``.bias`` normalise the last layer's output (Xiong et al. 2020)."""
  t = {k: v.astype(np.float64) for k, v in t.items()}
  eps, n = config["layer_norm_eps"], config["num_attention_heads"]
  b, length = ids.shape
  x = (t["embeddings.word_embeddings.weight"][ids] + t["embeddings.position_embeddings.weight"][np.arange(length)]
       + t["embeddings.token_type_embeddings.weight"][types])
  x = _layer_norm(x, t["embeddings.LayerNorm.weight"], t["embeddings.LayerNorm.bias"], eps)
  hidden = [x]
  linear = lambda h, name: h @ t[name + ".weight"].T + t[name + ".bias"]  # noqa: E731
  heads = lambda h: h.reshape(b, length, n, -1).transpose(0, 2, 1, 3)  # noqa: E731
  for i in range(config["num_hidden_layers"]):
    p = f"encoder.layer.{i}."
    norm = lambda h, name: _layer_norm(h, t[f"{p}{name}.LayerNorm.weight"], t[f"{p}{name}.LayerNorm.bias"], eps)  # noqa
    y = norm(x, "attention.output") if pre_norm else x
    q, k, v = (heads(linear(y, f"{p}attention.self.{name}")) for name in ("query", "key", "value"))
    scores = q @ k.transpose(0, 1, 3, 2) / math.sqrt(q.shape[-1])
    scores = np.where(mask[:, None, None, :] > 0, scores, -np.inf)
    weights = np.exp(scores - scores.max(-1, keepdims=True))
    weights /= weights.sum(-1, keepdims=True)
    context = (weights @ v).transpose(0, 2, 1, 3).reshape(b, length, -1)
    x = x + linear(context, f"{p}attention.output.dense")
    x = x if pre_norm else norm(x, "attention.output")
    ffn = linear(_gelu(linear(norm(x, "output") if pre_norm else x, f"{p}intermediate.dense")), f"{p}output.dense")
    x = x + ffn if pre_norm else norm(x + ffn, "output")
    hidden.append(x)
  if pre_norm:
    x = _layer_norm(x, t["final_norm.weight"], t["final_norm.bias"], eps)
  pooled = np.tanh(linear(x[:, 0], "pooler.dense"))
  return hidden, pooled


def _batch():
  ids = np.array([[2, 5, 7, 9, 3, 12, 13, 3], [2, 6, 8, 3, 10, 3, 0, 0]], np.int32)
  mask = (ids != 0).astype(np.int32)
  types = np.array([[0, 0, 0, 0, 0, 1, 1, 1], [0, 0, 0, 0, 1, 1, 0, 0]], np.int32)
  return ids, mask, types


def test_an_imported_tiny_bert_equals_a_numpy_transcription_of_berts_forward_pass(tmp_path):
  directory = write_tiny_bert(tmp_path / "tiny")
  module, params, tokenizer = bert.import_bert(directory, implementation="xla")
  assert (module.d_model, module.num_layers, module.num_heads, module.layer_norm_epsilon, module.activation) == (
      16, 2, 4, 1e-3, "gelu")
  ids, mask, types = _batch()
  out = module.apply({"params": params}, ids, mask, types, return_hidden_states=True)
  hidden, pooled = numpy_bert(load_file(directory / "model.safetensors"), CONFIG, ids, mask, types)
  assert len(out["hidden_states"]) == len(hidden) == 3
  for ours, theirs in zip(out["hidden_states"], hidden):
    np.testing.assert_allclose(np.asarray(ours), theirs, atol=1e-5, rtol=1e-5)
  np.testing.assert_allclose(np.asarray(out["pooler_output"]), pooled, atol=1e-5, rtol=1e-5)
  assert tokenizer.encode("the man is playing").ids == [2, 5, 7, 9, 10, 3]


def test_a_pre_norm_encoder_is_the_numpy_transcription_with_each_norm_before_its_sublayer_and_one_at_the_end(
    tmp_path):
  """The tiny checkpoint's weights in a pre-norm encoder (its LayerNorms moved before their sublayers) plus a final
  LayerNorm, against the NumPy transcription of x + f(LN(x)); the post-norm output differs, so the flag matters."""
  from attnjax.models.bert import BertEncoder  # pylint: disable=g-import-not-at-top
  directory = write_tiny_bert(tmp_path / "tiny")
  module, params, _ = bert.import_bert(directory, implementation="xla")
  rng = np.random.default_rng(1)
  final = {"scale": rng.uniform(0.5, 1.5, 16).astype(np.float32), "bias": rng.normal(0, 0.1, 16).astype(np.float32)}
  pre = BertEncoder(**{**{f: getattr(module, f) for f in ("vocab_size", "d_model", "num_layers", "num_heads", "d_ff",
                                                          "max_length", "layer_norm_epsilon", "activation",
                                                          "implementation")}, "pre_norm": True})
  pre_params = {**params, "final_norm": final}
  assert set(pre.init(jax.random.PRNGKey(0), *_batch()[:2])["params"]) == set(pre_params)
  ids, mask, types = _batch()
  out = pre.apply({"params": pre_params}, ids, mask, types, return_hidden_states=True)
  tensors = {**load_file(directory / "model.safetensors"), "final_norm.weight": final["scale"],
             "final_norm.bias": final["bias"]}
  hidden, pooled = numpy_bert(tensors, CONFIG, ids, mask, types, pre_norm=True)
  for ours, theirs in zip(out["hidden_states"], hidden):
    np.testing.assert_allclose(np.asarray(ours), theirs, atol=1e-5, rtol=1e-5)
  final_hidden = _layer_norm(hidden[-1], final["scale"], final["bias"], CONFIG["layer_norm_eps"])
  np.testing.assert_allclose(np.asarray(out["last_hidden_state"]), final_hidden, atol=1e-5, rtol=1e-5)
  np.testing.assert_allclose(np.asarray(out["pooler_output"]), pooled, atol=1e-5, rtol=1e-5)
  post = module.apply({"params": params}, ids, mask, types)["last_hidden_state"]
  assert np.max(np.abs(np.asarray(post) - final_hidden)) > 0.1


def test_export_gives_back_the_checkpoint_tensor_for_tensor_bit_for_bit(tmp_path):
  source = write_tiny_bert(tmp_path / "source")
  module, params, _ = bert.import_bert(source)
  bert.export_bert(module, params, tmp_path / "out", tokenizer_from=source, base_config=CONFIG)
  before, after = load_file(source / "model.safetensors"), load_file(tmp_path / "out" / "model.safetensors")
  assert sorted(before) == sorted(after)
  for name in before:
    assert before[name].dtype == after[name].dtype and np.array_equal(before[name], after[name]), name
  config = json.loads((tmp_path / "out" / "config.json").read_text())
  assert {k: config[k] for k in CONFIG} == CONFIG
  assert (tmp_path / "out" / "vocab.txt").read_text() == (source / "vocab.txt").read_text()
  again, params_again, _ = bert.import_bert(tmp_path / "out")
  assert again == module
  assert jax.tree_util.tree_all(jax.tree_util.tree_map(np.array_equal, params, params_again))


def test_a_checkpoint_with_a_prefix_and_a_head_imports_its_encoder(tmp_path):
  tensors = {("bert." + k): v for k, v in _random_tensors(CONFIG).items() if not k.startswith("pooler.")}
  tensors["cls.predictions.bias"] = np.zeros(CONFIG["vocab_size"], np.float32)
  directory = write_tiny_bert(tmp_path / "mlm", tensors=tensors)
  module, params, _ = bert.import_bert(directory)
  assert not module.use_pooler and "pooler" not in params
  ids, mask, types = _batch()
  hidden, _ = numpy_bert({k[len("bert."):]: v for k, v in tensors.items() if k.startswith("bert.")} | {
      "pooler.dense.weight": np.zeros((16, 16)), "pooler.dense.bias": np.zeros(16)}, CONFIG, ids, mask, types)
  out = module.apply({"params": params}, ids, mask, types)
  np.testing.assert_allclose(np.asarray(out["last_hidden_state"]), hidden[-1], atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("break_it, message", [
    ("no_config", r"config.json: no such file"),
    ("gpt2", r"config.json: model_type 'gpt2' is not a BERT encoder"),
    ("relative", r"config.json: position_embedding_type 'relative_key'"),
    ("no_weights", r"model.safetensors: no such file"),
    ("missing_tensor", r"model.safetensors: tensor encoder.layer.1.output.dense.bias is missing"),
    ("wrong_shape", r"model.safetensors: tensor encoder.layer.0.intermediate.dense.weight has shape \(24, 8\), but "
                    r"config.json implies \(24, 16\)"),
    ("no_vocab", r"neither tokenizer.json nor vocab.txt"),
])
def test_a_bad_checkpoint_is_refused_before_any_compute_naming_the_file_and_the_tensor(tmp_path, break_it, message):
  directory = write_tiny_bert(tmp_path / "bad")
  tensors = load_file(directory / "model.safetensors")
  config = dict(CONFIG)
  if break_it == "no_config":
    os.remove(directory / "config.json")
  elif break_it in ("gpt2", "relative"):
    config.update(model_type="gpt2") if break_it == "gpt2" else config.update(position_embedding_type="relative_key")
    (directory / "config.json").write_text(json.dumps(config))
  elif break_it == "no_weights":
    os.remove(directory / "model.safetensors")
  elif break_it in ("missing_tensor", "wrong_shape"):
    if break_it == "missing_tensor":
      del tensors["encoder.layer.1.output.dense.bias"]
    else:
      tensors["encoder.layer.0.intermediate.dense.weight"] = np.zeros((24, 8), np.float32)
    save_file(tensors, directory / "model.safetensors")
  elif break_it == "no_vocab":
    os.remove(directory / "vocab.txt")
  with pytest.raises(bert.CheckpointError, match=message):
    bert.import_bert(directory)


def test_every_layer_equals_hugging_faces_bert_model(tmp_path):
  transformers = pytest.importorskip("transformers")
  torch = pytest.importorskip("torch")
  directory = write_tiny_bert(tmp_path / "tiny")
  reference = transformers.BertModel.from_pretrained(str(directory), attn_implementation="eager").eval()
  ids, mask, types = _batch()
  with torch.no_grad():
    theirs = reference(input_ids=torch.tensor(ids, dtype=torch.long), attention_mask=torch.tensor(mask),
                       token_type_ids=torch.tensor(types, dtype=torch.long), output_hidden_states=True)
  module, params, _ = bert.import_bert(directory, implementation="xla")
  ours = module.apply({"params": params}, ids, mask, types, return_hidden_states=True)
  assert len(ours["hidden_states"]) == len(theirs.hidden_states)
  for layer, (a, b) in enumerate(zip(ours["hidden_states"], theirs.hidden_states)):
    np.testing.assert_allclose(np.asarray(a), b.numpy(), atol=1e-5, rtol=1e-5, err_msg=f"hidden state {layer}")
  np.testing.assert_allclose(np.asarray(ours["pooler_output"]), theirs.pooler_output.numpy(), atol=1e-5, rtol=1e-5)


# ------------------------------------------------------------------------------ against transformers' own numbers

# config.json's hidden_act -> attnjax's activation: Hugging Face's "gelu" is the exact x Φ(x) (erf); "gelu_new" and
# "gelu_pytorch_tanh" are both GELU's tanh approximation
HF_ACTIVATIONS = [("gelu", "gelu"), ("gelu_new", "gelu_tanh"), ("gelu_pytorch_tanh", "gelu_tanh"), ("relu", "relu")]


def _reference_checkpoint(tmp_path, act):
  """The committed checkpoint with config.json's hidden_act set to ``act``: the checkpoint transformers loaded to
  compute ``reference.npz``'s ``<act>/`` outputs (same weights, that activation)."""
  directory = tmp_path / act
  shutil.copytree(REFERENCE, directory)
  config = json.loads((directory / "config.json").read_text())
  (directory / "config.json").write_text(json.dumps({**config, "hidden_act": act}))
  return directory


def _reference():
  """``reference.npz``'s arrays and ``reference.json`` (the texts of the batch, the library's versions)."""
  with np.load(os.path.join(REFERENCE, "reference.npz")) as arrays, open(os.path.join(REFERENCE, "reference.json"),
                                                                          encoding="utf-8") as f:
    return dict(arrays), json.load(f)


def test_the_reference_covers_every_accepted_activation_and_tells_the_two_gelus_apart():
  arrays, written = _reference()
  assert sorted(written["activations"]) == sorted(act for act, _ in HF_ACTIVATIONS) == sorted(bert._ACTIVATIONS)
  assert (arrays["attention_mask"] == 0).any() and (arrays["token_type_ids"] == 1).any()  # padding, two segments
  last = {act: arrays[f"{act}/hidden_states"][-1] for act, _ in HF_ACTIVATIONS}
  # the tanh approximation moves the outputs ~100x the tolerance the import is held to: a swap cannot pass
  for act in ("gelu_new", "gelu_pytorch_tanh"):
    assert np.abs(last[act] - last["gelu"]).max() > 1e-4
  np.testing.assert_allclose(last["gelu_new"], last["gelu_pytorch_tanh"], atol=1e-5)  # one formula, two names


@pytest.mark.parametrize("act, ours", HF_ACTIVATIONS)
def test_a_checkpoint_transformers_wrote_imports_to_the_hidden_states_and_pooler_it_computed(tmp_path, act, ours):
  """``bert_reference/``: a random ``BertModel`` that transformers saved, and its every hidden state and pooler output
  on a padded batch of sentence pairs that its ``BertTokenizer`` encoded from ``vocab.txt``, with each activation."""
  arrays, written = _reference()
  module, params, tokenizer = bert.import_bert(_reference_checkpoint(tmp_path, act), implementation="xla")
  batch = [arrays[key] for key in ("input_ids", "attention_mask", "token_type_ids")]
  encoded = bert.encode_texts(tokenizer, written["texts"], 32, written["pairs"])
  for name, mine, theirs in zip(("input_ids", "attention_mask", "token_type_ids"), encoded, batch):
    np.testing.assert_array_equal(mine, theirs, err_msg=f"the tokenizer's {name}")
  out = module.apply({"params": params}, *batch, return_hidden_states=True)
  hidden = arrays[f"{act}/hidden_states"]
  assert len(out["hidden_states"]) == len(hidden) == 3
  for layer, (a, b) in enumerate(zip(out["hidden_states"], hidden)):
    np.testing.assert_allclose(np.asarray(a), b, atol=1e-5, rtol=1e-5, err_msg=f"{act}: hidden state {layer}")
  np.testing.assert_allclose(np.asarray(out["last_hidden_state"]), hidden[-1], atol=1e-5, rtol=1e-5)
  np.testing.assert_allclose(np.asarray(out["pooler_output"]), arrays[f"{act}/pooler_output"], atol=1e-5, rtol=1e-5,
                             err_msg=f"{act}: pooler output")
  assert (module.d_model, module.num_layers, module.num_heads, module.d_ff, module.layer_norm_epsilon,
          module.activation) == (32, 2, 4, 64, 1e-3, ours)


@pytest.mark.parametrize("act", ["gelu_fast", "quick_gelu", "silu", "gelu_10"])
def test_an_activation_the_import_does_not_run_exactly_is_refused_in_one_line_naming_hidden_act(tmp_path, act):
  """Names transformers accepts but attnjax has no exact form of: refused, not run as the nearest GELU."""
  directory = _reference_checkpoint(tmp_path, act)
  with pytest.raises(bert.CheckpointError) as error:
    bert.import_bert(directory)
  message = str(error.value)
  assert "\n" not in message
  assert message == (f"{directory / 'config.json'}: hidden_act {act!r} is not one of "
                     "['gelu', 'gelu_new', 'gelu_pytorch_tanh', 'relu']")


@pytest.mark.parametrize("act", [act for act, _ in HF_ACTIVATIONS])
def test_the_committed_reference_is_what_the_installed_transformers_computes(act):
  """Where transformers is installed, it computes ``reference.npz`` again from the committed files (when a new
  version does not, ``tools/bert_reference.py`` writes them anew)."""
  transformers = pytest.importorskip("transformers")
  torch = pytest.importorskip("torch")
  arrays, written = _reference()
  tokenizer = transformers.BertTokenizer.from_pretrained(REFERENCE, do_lower_case=True)
  batch = tokenizer(written["texts"], written["pairs"], padding=True, return_tensors="pt")
  for key in ("input_ids", "attention_mask", "token_type_ids"):
    np.testing.assert_array_equal(batch[key].numpy(), arrays[key], err_msg=key)
  model = transformers.BertModel.from_pretrained(REFERENCE, hidden_act=act, attn_implementation="eager").eval()
  with torch.no_grad():
    theirs = model(**batch, output_hidden_states=True)
  # float32 sums in another order on another CPU (the reference was written on an AMD EPYC; an Intel Xeon's
  # AVX-512 kernels differ by up to 2e-6): the tolerance of the comparison with attnjax's own forward pass
  np.testing.assert_allclose(torch.stack(theirs.hidden_states).numpy(), arrays[f"{act}/hidden_states"], atol=1e-5,
                             rtol=1e-5)
  np.testing.assert_allclose(theirs.pooler_output.numpy(), arrays[f"{act}/pooler_output"], atol=1e-5, rtol=1e-5)


# ------------------------------------------------------------------------------ sentence embeddings and STS


def test_mean_pooling_averages_the_real_tokens_and_normalises():
  hidden = np.random.default_rng(0).normal(size=(3, 4, 5)).astype(np.float32)
  mask = np.array([[1, 1, 0, 0], [1, 1, 1, 1], [0, 0, 0, 0]], np.int32)
  pooled = np.asarray(mean_pool(hidden, mask))
  expected = np.stack([hidden[0, :2].mean(0), hidden[1].mean(0)])
  expected /= np.linalg.norm(expected, axis=1, keepdims=True)
  np.testing.assert_allclose(pooled[:2], expected, rtol=1e-6, atol=1e-6)
  assert np.all(pooled[2] == 0)  # no real token: zeros, not NaN


def test_sentence_embeddings_do_not_depend_on_the_batch_or_its_padding(tmp_path):
  module, params, tokenizer = bert.import_bert(write_tiny_bert(tmp_path / "tiny"), dropout_rate=0.0,
                                               attention_dropout_rate=0.0, implementation="xla")
  texts = ["the man is playing guitar .", "a dog runs", "the cat sleeps on the grass", "a woman plays piano"]
  together = sentence.embed_sentences(module, params, tokenizer, texts, batch_size=4)
  alone = np.concatenate([sentence.embed_sentences(module, params, tokenizer, [t], batch_size=1) for t in texts])
  np.testing.assert_allclose(together, alone, atol=1e-5)
  ids, mask, types = bert.encode_texts(tokenizer, texts[1:2], 256)
  hidden = numpy_bert(load_file(tmp_path / "tiny" / "model.safetensors"), CONFIG, ids, mask, types)[0][-1][0]
  np.testing.assert_allclose(together[1], hidden.mean(0) / np.linalg.norm(hidden.mean(0)), atol=1e-5)
  assert bert.encode_texts(tokenizer, ["the man is playing guitar ."] * 2, 4)[0].shape == (2, 4)  # truncated


def _ranks(x):
  order = np.argsort(x)
  ranks = np.empty(len(x))
  ranks[order] = np.arange(len(x))
  return ranks


def test_the_sts_command_scores_every_pair_with_the_spearman_of_cosines(tmp_path):
  directory = write_tiny_bert(tmp_path / "tiny")
  rng = np.random.default_rng(3)
  sentences = [" ".join(rng.choice(WORDS[:14], size=rng.integers(2, 7))) for _ in range(24)]
  gold = rng.permutation(12) * 0.4  # no ties: Spearman is Pearson of the ranks
  lines = [f"main-captions\tMSRvid\t2012test\t{i:04d}\t{gold[i]:.1f}\t{sentences[2 * i]}\t{sentences[2 * i + 1]}"
           for i in range(12)]
  lines[3] += "\tsource-a\tsource-b"  # some lines of the real files carry two more columns
  (tmp_path / "sts.csv").write_text("\n".join(lines) + "\n")
  proc = subprocess.run([sys.executable, "-m", "attnjax.sts", f"--model_dir={directory}",
                         f"--data={tmp_path / 'sts.csv'}", f"--output={tmp_path / 'scores.json'}"],
                        cwd=ROOT, capture_output=True, text=True, timeout=300, env=dict(os.environ, JAX_PLATFORMS="cpu"))
  assert proc.returncode == 0, proc.stderr[-2000:]
  scores = json.loads((tmp_path / "scores.json").read_text())
  module, params, tokenizer = bert.import_bert(directory, dropout_rate=0.0, attention_dropout_rate=0.0)
  a = sentence.embed_sentences(module, params, tokenizer, sentences[0::2])
  b = sentence.embed_sentences(module, params, tokenizer, sentences[1::2])
  cosine = np.sum(a * b, axis=1)
  spearman = np.corrcoef(_ranks(cosine), _ranks(np.round(gold, 1)))[0, 1]
  assert scores["pairs"] == 12 and scores["cosine_spearman"] == pytest.approx(spearman, abs=1e-6)
  # the record names the bytes it scored
  assert scores["data_sha256"] == hashlib.sha256((tmp_path / "sts.csv").read_bytes()).hexdigest()
  assert scores["model_sha256"] == hashlib.sha256(open(os.path.join(directory, "model.safetensors"), "rb").read()).hexdigest()
  assert f"12 pairs, cosine Spearman {spearman:.5f}" in proc.stdout


@pytest.mark.parametrize("line, message", [
    ("g\tf\t2012\t1\t4.0\tonly one sentence", r"sts.csv:2: 6 tab-separated fields, expected at least 7"),
    ("g\tf\t2012\t1\tfour\ta\tb", r"sts.csv:2: score 'four' is not a number"),
])
def test_a_bad_sts_line_names_the_file_and_line(tmp_path, line, message):
  (tmp_path / "sts.csv").write_text("g\tf\t2012\t0\t1.0\ta man\ta woman\n" + line + "\n")
  with pytest.raises(ValueError, match=message):
    sentence.read_sts(tmp_path / "sts.csv")
