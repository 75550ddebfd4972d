"""A pre-norm BERT encoder in and out of Hugging Face as ``RobertaPreLayerNormModel``, checked against the
``transformers`` library's own numbers (``bert_prenorm_reference/``, written by ``tools/bert_prenorm_reference.py``):
the same hidden states in float64, float32 as close to them as float32 allows, the same files written again, and a
pre-norm encoder exported by attnjax read back bit for bit and taken for a pre-norm encoder by fine-tuning."""

import json
import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from safetensors.numpy import load_file

from attnjax.transfer import bert

REFERENCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "bert_prenorm_reference")
# the bounds of test_hf_export.py: float64 runs of one computation agree to float64's rounding, 2^-29 of float32's
# (2^10 of that left for summation order); float32 against its own float64 within a few times float32's error
FLOAT64_AGREEMENT, FLOAT32_ERROR_MULTIPLE = 2.0**-19, 8.0


def _reference():
  with np.load(os.path.join(REFERENCE, "reference.npz")) as arrays:
    return {k: arrays[k] for k in arrays.files}


def _run(module, params, ref, dtype):
  module = module.clone(dtype=dtype)
  params = jax.tree_util.tree_map(lambda x: jnp.asarray(x, dtype), params)
  out = module.apply({"params": params}, jnp.asarray(ref["input_ids"]), jnp.asarray(ref["attention_mask"]),
                     jnp.asarray(ref["token_type_ids"]), return_hidden_states=True)
  return np.asarray(jnp.stack(out["hidden_states"])), np.asarray(out["last_hidden_state"])


def test_the_librarys_pre_norm_encoder_imports_and_computes_its_hidden_states(x64):
  """Compared at the real tokens: RoBERTa gives a padding token padding's position, attnjax the next one (neither
  is attended to)."""
  ref = _reference()
  module, params, tokenizer = bert.import_bert(REFERENCE, implementation="xla")
  assert module.pre_norm and module.max_length == 32 and "final_norm" in params and "pooler" not in params
  assert tokenizer.encode("the man is playing").ids[:1] == [2]  # [CLS]
  real = ref["attention_mask"].astype(bool)
  float32_noise = np.abs(ref["last_hidden_state"] - ref["last_hidden_state64"])[real].max()
  assert 0 < float32_noise < 1e-4
  hidden64, last64 = _run(module, params, ref, jnp.float64)
  assert hidden64.dtype == np.float64
  # the library's hidden states: the embeddings' output and each layer's but the last, whose entry is after the
  # final LayerNorm (last_hidden_state); attnjax's last entry is before it
  assert np.abs(hidden64[:-1] - ref["hidden_states64"][:-1])[:, real].max() <= FLOAT64_AGREEMENT * float32_noise
  assert np.abs(last64 - ref["last_hidden_state64"])[real].max() <= FLOAT64_AGREEMENT * float32_noise
  hidden32, last32 = _run(module, params, ref, jnp.float32)
  assert np.abs(last32 - last64)[real].max() <= FLOAT32_ERROR_MULTIPLE * float32_noise
  # the position offset is what makes them agree: positions counted from 0 in the library's table move them
  table = params["position_embeddings"]["embedding"]
  shifted = dict(params, position_embeddings={"embedding": np.concatenate([np.zeros_like(table[:1]), table[:-1]])})
  moved, _ = _run(module, shifted, ref, jnp.float64)
  assert np.abs(moved[:-1] - ref["hidden_states64"][:-1])[:, real].max() > 1e-2


def test_the_files_are_written_again_tensor_for_tensor_and_an_export_comes_back_bit_for_bit(tmp_path):
  module, params, _ = bert.import_bert(REFERENCE)
  committed = load_file(os.path.join(REFERENCE, "model.safetensors"))
  with open(os.path.join(REFERENCE, "config.json"), encoding="utf-8") as f:
    library_config = json.load(f)
  config = bert.config_from_module(module)
  assert {k: library_config[k] for k in config if k in library_config} == {
      k: v for k, v in config.items() if k in library_config}
  assert config["model_type"] == "roberta-prelayernorm" and config["max_position_embeddings"] == 33
  tensors = bert.tensors_from_params(params, config)
  assert sorted(tensors) == sorted(committed)
  for key, value in committed.items():
    assert tensors[key].dtype == value.dtype and np.array_equal(tensors[key], value), key
  bert.export_bert(module, params, str(tmp_path), tokenizer_from=REFERENCE)
  again, params_again, _ = bert.import_bert(str(tmp_path))
  assert again.pre_norm and sorted(os.listdir(tmp_path)) == ["config.json", "model.safetensors", "vocab.txt"]
  for a, b in zip(jax.tree_util.tree_leaves(params), jax.tree_util.tree_leaves(params_again)):
    assert np.array_equal(a, b)


def test_fine_tuning_takes_the_export_for_a_pre_norm_encoder():
  from attnjax.training import warm_start  # pylint: disable=g-import-not-at-top
  assert warm_start.encoder_is_pre_norm(REFERENCE)
  encoder = warm_start.encoder_params(REFERENCE)
  assert "final_norm" in encoder and "pooler" not in encoder


def test_a_post_norm_file_with_the_pre_norm_type_or_no_pad_id_is_refused(tmp_path):
  for name in ("config.json", "model.safetensors", "vocab.txt"):
    with open(os.path.join(REFERENCE, name), "rb") as f, open(tmp_path / name, "wb") as g:
      g.write(f.read())
  config = json.loads((tmp_path / "config.json").read_text())
  del config["pad_token_id"]
  (tmp_path / "config.json").write_text(json.dumps(config))
  with pytest.raises(bert.CheckpointError, match="pad_token_id must be an integer for 'roberta-prelayernorm'"):
    bert.import_bert(str(tmp_path))
  config.update(pad_token_id=0, model_type="roberta")
  (tmp_path / "config.json").write_text(json.dumps(config))
  with pytest.raises(bert.CheckpointError, match="model_type 'roberta' is not a BERT encoder"):
    bert.import_bert(str(tmp_path))


def test_a_pre_norm_masked_lm_run_exports_its_encoder_and_it_comes_back_bit_for_bit(tmp_path):
  from attnjax.export import export_workdir  # pylint: disable=g-import-not-at-top
  from attnjax.trained import load_workdir  # pylint: disable=g-import-not-at-top
  from attnjax.training.loop import train_and_evaluate  # pylint: disable=g-import-not-at-top
  from tests import mlm_fixture  # pylint: disable=g-import-not-at-top
  config = mlm_fixture.tiny_mlm_config(tmp_path / "data")
  config.train.steps = config.train.eval_every = config.train.checkpoint_every = config.train.log_every = 3
  with config.model.unlocked():
    config.model.pre_norm = True
  train_and_evaluate(config, str(tmp_path / "run"))
  summary = export_workdir(str(tmp_path / "run"), str(tmp_path / "hf"))
  small = export_workdir(str(tmp_path / "run"), str(tmp_path / "bf16"), dtype="bfloat16")
  assert small["architecture"] == "RobertaPreLayerNormModel"
  # which run and checkpoint the files came from (a report credits a reader's pre-training by it)
  from attnjax.transfer import PROVENANCE_FILE  # pylint: disable=g-import-not-at-top
  assert json.loads((tmp_path / "bf16" / PROVENANCE_FILE).read_text()) == {
      "workdir": str(tmp_path / "run"), "checkpoint": "best", "step": 3, "dtype": "bfloat16"}
  # AutoTokenizer would take RoBERTa's byte-level BPE for this config: the WordPiece class and the run's casing are named
  settings = json.loads((tmp_path / "bf16" / "tokenizer_config.json").read_text())
  assert settings == {"tokenizer_class": "BertTokenizer", "do_lower_case": True,
                      "model_max_length": config.model.max_length}
  saved = json.loads((tmp_path / "run" / "config.json").read_text())
  saved["data"]["lowercase"] = False  # a cased vocabulary's run
  (tmp_path / "run" / "config.json").write_text(json.dumps(saved))
  export_workdir(str(tmp_path / "run"), str(tmp_path / "cased"))
  assert not json.loads((tmp_path / "cased" / "tokenizer_config.json").read_text())["do_lower_case"]
  # the fixture's vocabulary is lower case: "Cat" is a word of it only where the tokenizer lower-cases
  assert bert.load_tokenizer(str(tmp_path / "hf")).encode("Cat").tokens == ["[CLS]", "cat", "[SEP]"]
  assert bert.load_tokenizer(str(tmp_path / "cased")).encode("Cat").tokens == ["[CLS]", "[UNK]", "[SEP]"]
  assert summary["architecture"] == "RobertaPreLayerNormModel" and "vocab.txt" in summary["files"]
  module, params, _ = bert.import_bert(str(tmp_path / "hf"))
  assert module.pre_norm and module.max_length == config.model.max_length
  ours = jax.tree_util.tree_map(np.asarray, load_workdir(str(tmp_path / "run")).params["bert"])
  ours.pop("pooler", None)
  # pre-training fed token type 0 only: the export writes every type as it (as fine-tuning from the workdir takes it)
  types = ours["token_type_embeddings"]["embedding"]
  assert not np.array_equal(types[1], types[0])
  ours["token_type_embeddings"]["embedding"] = np.broadcast_to(types[:1], types.shape)
  flat, back = jax.tree_util.tree_flatten_with_path(ours)[0], dict(jax.tree_util.tree_flatten_with_path(params)[0])
  assert len(flat) == len(back)
  for path, value in flat:
    assert np.array_equal(back[path], value), jax.tree_util.keystr(path)
  # in bfloat16: every weight rounded to bfloat16 once, in half the bytes
  import ml_dtypes  # pylint: disable=g-import-not-at-top
  _, rounded, _ = bert.import_bert(str(tmp_path / "bf16"))
  rounded = dict(jax.tree_util.tree_flatten_with_path(rounded)[0])
  for path, value in flat:
    assert np.array_equal(rounded[path], value.astype(ml_dtypes.bfloat16).astype(np.float32)), path
  sizes = [os.path.getsize(tmp_path / d / "model.safetensors") for d in ("hf", "bf16")]
  assert 0.45 < sizes[1] / sizes[0] < 0.55
  written = json.loads((tmp_path / "bf16" / "config.json").read_text())
  assert written["dtype"] == written["torch_dtype"] == "bfloat16" and written["pad_token_id"] == 0
  from attnjax import config as config_lib  # pylint: disable=g-import-not-at-top
  from tests import lm_fixture  # pylint: disable=g-import-not-at-top
  config_lib.save_config(lm_fixture.tiny_lm_config(tmp_path / "lm_data"), str(tmp_path / "lm"))
  with pytest.raises(ValueError, match="--dtype=bfloat16: only a BERT encoder's export"):
    export_workdir(str(tmp_path / "lm"), str(tmp_path / "lm_hf"), dtype="bfloat16")  # before anything is read
