"""Every cell of the seed study is an experiment file that validates and builds its model at the experiment's real
shapes; its sweeps override keys that exist; the compile tool refuses bad targets, meshes and batches by name, and
compiles one experiment per model family for its TPU / GPU target on this CPU (XLA's numbers, in a subprocess)."""

import os
import re
import subprocess
import sys

import jax
import jax.numpy as jnp
import pytest

from attnjax import compile as compile_lib
from attnjax.families import span_qa
from attnjax import config as config_lib
from attnjax import targets
from attnjax.models.registry import build_model

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXPERIMENTS = compile_lib.study_experiments(os.path.join(ROOT, "experiments"))


def test_the_study_has_every_cell():
  names = {os.path.relpath(p, os.path.join(ROOT, "experiments")) for p in EXPERIMENTS}
  for pair in ("wmt14_en_de", "wmt14_en_fr"):
    for model in ("lstm_seq2seq", "lstm_bahdanau", "lstm_luong", "convs2s", "transformer_base", "transformer_big"):
      assert f"{pair}/{model}.py" in names
  for task in ("cnn_dailymail", "xsum"):
    for model in ("lstm_seq2seq", "lstm_attention", "transformer"):
      assert f"{task}/{model}.py" in names
  for task in ("squad_v1", "squad_v2"):
    for model in ("bilstm_reader", "transformer_reader"):
      assert f"{task}/{model}.py" in names


@pytest.mark.parametrize("path", EXPERIMENTS, ids=lambda p: os.path.relpath(p, os.path.join(ROOT, "experiments")))
def test_experiment_validates_and_builds_at_its_real_shapes(path):
  config = compile_lib.load_experiment(path)
  config_lib.validate(config)
  target = targets.get(config.target)
  assert target.platform in ("tpu", "gpu") and config.model.dtype == "bfloat16"
  targets.check_batch(config, target)
  vocab = -(-config.data.vocab_size // config.data.vocab_multiple) * config.data.vocab_multiple
  model = build_model(config.model.to_dict(), src_vocab_size=vocab, tgt_vocab_size=vocab)
  rows, q, c = compile_lib._batch_shape(config, target.resolved_mesh()[0])  # pylint: disable=protected-access
  first = jnp.zeros((rows, q), jnp.int32)
  second = jnp.zeros((rows, c), jnp.int32)
  out = jax.eval_shape(lambda a, b: model.init_with_output(jax.random.PRNGKey(0), a, b)[0], first, second)
  if config.model.name == "span_qa":
    assert out["start_logits"].shape == (rows, c)
  else:
    assert out.shape == (rows, c, vocab)


def test_the_wmt_transformer_has_the_papers_ablation_sweeps():
  path = os.path.join(ROOT, "experiments", "wmt14_en_de", "transformer_base.py")
  module = {}
  exec(compile(open(path).read(), path, "exec"), module)  # pylint: disable=exec-used
  sweeps = module["SWEEPS"]
  assert [p["name"] for p in sweeps["heads"]] == ["heads1", "heads4", "heads8", "heads16"]
  assert [p["name"] for p in sweeps["layers"]] == ["layers3", "layers6", "layers12", "layers24"]
  assert [p["name"] for p in sweeps["positional"]] == ["sinusoidal", "learned", "relative", "t5"]


def test_bad_target_mesh_and_batch_are_named():
  config = compile_lib.load_experiment(os.path.join(ROOT, "experiments", "squad_v1", "bilstm_reader.py"))
  with pytest.raises(ValueError, match="unknown target 'tpu-v9'"):
    targets.use_target(config, "tpu-v9")
  config.target = "tpu-v9"
  with pytest.raises(ValueError, match="config.target: unknown target"):
    config_lib.validate(config)
  bad_mesh = targets.Target("x", "tpu", "TPU v5 lite", 16, 4, (3, 1, 1), "bfloat16", 1, 1, 1, "v5e:4x4")
  with pytest.raises(ValueError, match=r"config.mesh.shape=\(3, 1, 1\) does not divide target x's 16 devices"):
    targets.check_batch(config, bad_mesh)
  config.data.max_tokens, config.data.batch_size = None, 60
  with pytest.raises(ValueError, match="config.data.batch_size=60 does not divide over 16 data-parallel devices"):
    targets.check_batch(config, targets.get("tpu-v5e-16"))


def test_missing_libtpu_is_named_with_the_install_command(monkeypatch):
  from jax.experimental import topologies  # pylint: disable=g-import-not-at-top

  def missing(**kwargs):
    raise RuntimeError("Unable to initialize backend 'tpu'")

  monkeypatch.setattr(topologies, "get_topology_desc", missing)
  with pytest.raises(RuntimeError, match=r"needs libtpu .* pip install -e '\.\[tpu\]'"):
    compile_lib._devices(targets.get("tpu-v4-8"))  # pylint: disable=protected-access


def _compile(config, *extra):
  env = dict(os.environ, JAX_PLATFORMS="cpu")
  env.pop("XLA_FLAGS", None)
  proc = subprocess.run([sys.executable, "-m", "attnjax.compile", f"--config={config}", *extra], cwd=ROOT, env=env,
                        capture_output=True, text=True, timeout=900)
  assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
  return proc.stdout


# The Multi30k Transformer (3 + 3 layers of 256) made splash-eligible: lengths a multiple of TPU's 128 lanes and no
# attention dropout (splash takes none; with it, "auto" chooses XLA on the TPU too)
SMALL_SPLASH = """import importlib.util
spec = importlib.util.spec_from_file_location("arm", {path!r})
arm = importlib.util.module_from_spec(spec)
spec.loader.exec_module(arm)


def get_config():
  config = arm.get_config()
  config.data.max_src_len = config.data.max_tgt_len = 128
  config.model.attention_dropout_rate = 0.0
  return config
"""


@pytest.mark.parametrize("experiment,extra,layers", [
    # train and decode steps, TPU v5e 4x4: minutes of compiling, so `make aot` runs it
    pytest.param("wmt14_en_de/transformer_base.py", (), 6, marks=pytest.mark.aot),
    # the same splash path (SMALL_SPLASH, 3 + 3 layers) and the WMT LSTM: minutes each too, so `make test-slow`
    pytest.param("small_splash", ("--target=tpu-v4-8",), 3, marks=pytest.mark.slow),
    pytest.param("wmt14_en_de/lstm_bahdanau.py", ("--nodecode",), None, marks=pytest.mark.slow),  # TPU v4
    ("wmt14_en_de/convs2s.py", ("--nodecode", "--target=gpu-8xh100"), None),  # 8 simulated host devices
    pytest.param("squad_v1/bilstm_reader.py", (), None, marks=pytest.mark.slow),  # a minute and more on 2 cores
])
def test_compile_tool_compiles_one_experiment_per_family_for_its_target(experiment, extra, layers, tmp_path):
  path = f"experiments/{experiment}"
  if experiment == "small_splash":
    path = tmp_path / "small_splash.py"
    path.write_text(SMALL_SPLASH.format(path=os.path.join(ROOT, "experiments", "multi30k", "transformer.py")))
  out = _compile(str(path), *extra)
  assert "fits: yes" in out
  memory = re.search(r"train step\s+per device: arguments ([\d.]+) GiB.*total ([\d.]+) GiB; ([\d.e+-]+) TFLOP", out)
  assert memory and float(memory.group(2)) > 0 and float(memory.group(3)) > 0, out
  if layers:  # "auto" attention is Pallas splash on the TPU, its FLOPs counted by hand
    fused = re.search(r"of which ([\d.e+-]+) TFLOP in (\d+) fused attention calls", out)
    assert fused and int(fused.group(2)) == 3 * layers, out  # encoder self, decoder self and cross, per layer
    assert 0 < float(fused.group(1)) < float(memory.group(3)), out


def _every_experiment_file():
  root = os.path.join(ROOT, "experiments")
  return sorted(os.path.join(d, f) for d, _, files in os.walk(root) for f in files
                if f.endswith(".py") and not f.startswith("_"))


def _point_config(path, overrides):
  """The config that ``attnjax.train`` builds for one launcher point: the experiment file through ml_collections'
  config flag and the point's overrides as the launcher writes them (``--config.<key>=<value>``)."""
  from absl import flags  # pylint: disable=g-import-not-at-top
  from ml_collections import config_flags  # pylint: disable=g-import-not-at-top
  from launch import launch  # pylint: disable=g-import-not-at-top
  flags_ = [launch._value_flag(k, v) for k, v in overrides.items()]  # pylint: disable=protected-access
  argv = ["train", f"--config={path}", *flags_]
  flag_values = flags.FlagValues()
  config_flags.DEFINE_config_file("config", None, "", flag_values=flag_values, lock_config=True, sys_argv=argv)
  flag_values(argv)
  return flag_values.config


@pytest.mark.parametrize("path", _every_experiment_file(),
                         ids=lambda p: os.path.relpath(p, os.path.join(ROOT, "experiments")))
def test_every_experiment_file_and_sweep_point_parses_validates_and_builds(path):
  """Every file under experiments/ (a new one is covered without editing this test), with each point of each sweep
  applied as the launcher applies it: every override names an existing key and arrives with its value, the config
  validates, and its model builds."""
  from launch import launch  # pylint: disable=g-import-not-at-top
  module = config_lib.experiment_module(path)
  points = [{"name": "default", "overrides": {}}]
  points += [p for sweep in getattr(module, "SWEEPS", {}) for p in launch.sweep_points(module, sweep)]
  for point in points:
    config = _point_config(path, point["overrides"])
    for key, value in point["overrides"].items():
      got = config
      for part in key.split("."):
        got = got[part]
      assert (tuple(got) if isinstance(value, (list, tuple)) else got) == (
          tuple(value) if isinstance(value, (list, tuple)) else value), (point["name"], key)
    config_lib.validate(config)
    model = build_model(config.model.to_dict(), src_vocab_size=512, tgt_vocab_size=512)
    first, second = jnp.ones((2, 7), jnp.int32), jnp.ones((2, 5), jnp.int32)
    if config.model.name == "decoder_lm":
      out = jax.eval_shape(lambda a, m=model: m.init_with_output(jax.random.PRNGKey(0), a)[0], first)
      assert out.shape == (2, 7, 512), point["name"]
      continue
    if config.model.name == "bert_mlm":  # packed rows [2, 7] (segment 1, positions 0..6), 5 predictions a row
      rows = (first, first, jnp.broadcast_to(jnp.arange(7), (2, 7)), jnp.zeros((2, 5), jnp.int32))
      out = jax.eval_shape(lambda *a, m=model: m.init_with_output(jax.random.PRNGKey(0), *a)[0], *rows)
      assert out.shape == (2, 5, 512), point["name"]
      continue
    out = jax.eval_shape(lambda a, b, m=model: m.init_with_output(jax.random.PRNGKey(0), a, b)[0], first, second)
    if config.model.name == "span_qa":
      assert out["start_logits"].shape == (2, 5), point["name"]
      # what the family checks once the data is read, hours into a queue of runs: the padded rows fit the positions
      d, m = config.data, config.model
      if m.get("encoder") == "bert":
        need = span_qa.packed_length(d.max_question_len, d.max_context_len) + 1
        assert m.max_length >= need, (point["name"], m.max_length, need)
    else:
      assert out.shape == (2, 5, 512), point["name"]


def test_an_override_of_a_missing_key_is_refused_by_the_launchers_path(tmp_path):
  path = tmp_path / "typo.py"
  path.write_text("from attnjax.config import base_config\n\n\ndef get_config():\n  return base_config()\n")
  with pytest.raises(Exception, match="num_head"):
    _point_config(str(path), {"model.num_head": 4})


MULTI30K = sorted(os.path.join(ROOT, "experiments", "multi30k", f)
                  for f in os.listdir(os.path.join(ROOT, "experiments", "multi30k")) if f.endswith(".py"))


@pytest.mark.parametrize("path", MULTI30K, ids=os.path.basename)
def test_multi30k_arms_share_data_batches_budget_and_evaluation(path):
  """The baselines table compares arms at the recipe's 4,096-token batches and 30 minutes (the earlier Transformer
  run, transformer_small, had 55), with the same data, label smoothing and evaluation."""
  config = _point_config(path, {})
  assert config.target == "cpu" and config.data.dir == "../shared/data/multi30k"
  assert config.data.max_tokens == 4096 and config.train.label_smoothing == 0.1
  assert config.eval.beam_size == 4 and config.train.best_metric == "bleu"
  assert config.train.time_limit_minutes == (55.0 if path.endswith("transformer_small.py") else 30.0)


def test_the_multi30k_batch_sweep_halves_the_batch_for_an_hour():
  from launch import launch  # pylint: disable=g-import-not-at-top
  path = os.path.join(ROOT, "experiments", "multi30k", "transformer.py")
  points = launch.sweep_points(config_lib.experiment_module(path), "batch60")
  small, full = (_point_config(path, p["overrides"]) for p in points)
  assert (small.data.max_tokens, small.train.time_limit_minutes) == (2048, 60.0)
  assert (full.data.max_tokens, full.train.time_limit_minutes) == (4096, 60.0)
  assert (small.train.warmup_steps, full.train.warmup_steps) == (800, 400)  # the same tokens of warm-up


SUMMARIZATION_CPU = sorted(os.path.join(ROOT, "experiments", "cnn_dailymail_cpu", f)
                           for f in os.listdir(os.path.join(ROOT, "experiments", "cnn_dailymail_cpu"))
                           if f.endswith(".py"))


def test_summarization_arms_share_data_budget_and_decoding_and_differ_in_the_model_only():
  from attnjax import recipes  # pylint: disable=g-import-not-at-top
  names = [os.path.basename(p)[:-3] for p in SUMMARIZATION_CPU]
  assert sorted(names) == sorted(recipes.CNNDM_ARMS)
  shared = None
  for path in SUMMARIZATION_CPU:
    config = compile_lib.load_experiment(path)
    config_lib.validate(config)
    d, e = config.data, config.eval
    # See et al.'s setting: 400 source tokens, 100 summary tokens (+ EOS), cut rather than skipped
    assert (d.max_src_len, d.max_tgt_len, d.truncate, d.dir) == (400, 101, True, "../shared/data/cnn_dailymail")
    assert (e.min_len, e.max_len_a, e.max_len_b, e.beam_size, e.alpha) == (35, 0.0, 100, 4, 1.0)
    assert config.train.time_limit_minutes == 90.0 and config.train.best_metric == "rougeLsum"
    everything_but_the_model = {k: v for k, v in config.to_dict().items() if k not in ("model",)}
    everything_but_the_model["train"] = {k: v for k, v in everything_but_the_model["train"].items()
                                         if k not in ("optimizer", "schedule", "learning_rate", "warmup_steps",
                                                      "grad_clip_norm", "adam_b1", "adam_b2", "adam_eps",
                                                      "init_from", "init_at_minutes")}
    shared = shared or everything_but_the_model
    assert everything_but_the_model == shared, path
    name = os.path.basename(path)[:-3]
    m = config.model
    assert bool(m.get("copy")) == (name in ("lstm_pointer_generator", "lstm_coverage", "transformer_copy"))
    assert bool(m.get("coverage")) == (name == "lstm_coverage")
    # coverage is a final phase of the pointer-generator run, inside the same 90 minutes (See et al. 2017)
    assert (config.train.init_from, config.train.init_at_minutes) == (
        ("../../../lstm_pointer_generator/single/default", 85.0) if name == "lstm_coverage" else (None, None))
    model = build_model(m.to_dict(), src_vocab_size=16000, tgt_vocab_size=16000)
    src, tgt = jnp.ones((2, 7), jnp.int32), jnp.ones((2, 5), jnp.int32)
    out = jax.eval_shape(lambda a, b: model.init_with_output(jax.random.PRNGKey(0), a, b)[0], src, tgt)
    assert out.shape == (2, 5, 16000)


def test_the_lm_data_sweep_trains_each_point_to_16m_tokens_or_16_epochs_whichever_is_more():
  """L(D) needs every point stopped by its data (early stopping), not by its step cap: the cap is at least 16 epochs of
  the point's rows. The points up to 1M tokens keep the 16M-token cap (3,906 steps of 4,096 tokens) they trained with,
  since the learning rate decays to zero at the cap and a changed cap would be another run."""
  from launch import launch  # pylint: disable=g-import-not-at-top
  path = os.path.join(ROOT, "experiments", "wikipedia", "lm.py")
  points = launch.sweep_points(config_lib.experiment_module(path), "data")
  steps = {}
  for point in points:
    config = _point_config(path, point["overrides"])
    assert config.data.batch_size * config.data.seq_len == 4096
    steps[config.data.train_tokens] = config.train.steps
  assert steps == {125_000: 3906, 250_000: 3906, 500_000: 3906, 1_000_000: 3906, 2_000_000: 7812, 4_000_000: 15625}


def test_the_compile_tool_s_overrides_take_the_type_of_the_value_they_replace():
  from absl import app  # pylint: disable=g-import-not-at-top
  parse = compile_lib._parse_value  # pylint: disable=protected-access
  assert parse("true", False) is True and parse("False", True) is False
  assert parse("3", 1) == 3 and isinstance(parse("3", 1.0), float) and parse("xla", "auto") == "xla"
  assert parse("[1, 2]", None) == [1, 2] and parse("cudnn", None) == "cudnn"
  with pytest.raises(app.UsageError, match="expected true or false, got 'yes'"):
    parse("yes", False)


def test_the_budget_readers_take_the_budget_masked_lms_encoder_whole_and_read_what_it_saw():
  """The pre-norm encoder of experiments/wikipedia/bert_mlm_budget.py goes into the readers of its shape parameter for
  parameter (the reader adds its span head only), and a reader's packed row, [CLS] question [SEP] window [SEP] with
  each side padded to a multiple of 8, fits the positions pre-training saw with less than one padding step to spare."""
  import flax  # pylint: disable=g-import-not-at-top
  import jax  # pylint: disable=g-import-not-at-top
  from attnjax.models.registry import build_model  # pylint: disable=g-import-not-at-top
  from attnjax.training.warm_start import merge_params  # pylint: disable=g-import-not-at-top
  from experiments.squad_transfer import bert_from_mlm_budget, bert_scratch_budget  # pylint: disable=g-import-not-at-top
  from experiments.wikipedia import bert_mlm_budget  # pylint: disable=g-import-not-at-top
  mlm_config = bert_mlm_budget.get_config()
  mlm = build_model(mlm_config.model.to_dict(), src_vocab_size=30522, tgt_vocab_size=30522)
  row = jax.numpy.zeros((1, mlm_config.data.seq_len), jax.numpy.int32)
  unboxed = lambda tree: flax.core.meta.unbox(tree)["params"]  # noqa: E731  (logical partitioning boxes)
  mlm_params = unboxed(jax.eval_shape(lambda: mlm.init(jax.random.PRNGKey(0), row)))
  for module in (bert_scratch_budget, bert_from_mlm_budget):
    config = module.get_config()
    assert config.model.pre_norm and config.model.max_length == mlm_config.data.seq_len
    need = span_qa.packed_length(config.data.max_question_len, config.data.max_context_len) + 1
    assert need <= mlm_config.data.seq_len < span_qa.packed_length(config.data.max_question_len,
                                                                  config.data.max_context_len + 8) + 1
    reader = build_model(config.model.to_dict(), src_vocab_size=30522, tgt_vocab_size=30522)
    q = jax.numpy.ones((1, config.data.max_question_len), jax.numpy.int32)
    c = jax.numpy.ones((1, config.data.max_context_len), jax.numpy.int32)
    reader_params = unboxed(jax.eval_shape(lambda: reader.init(jax.random.PRNGKey(0), q, c)))  # noqa: B023
    encoder = dict(mlm_params["bert"])
    _, fresh = merge_params(reader_params["bert"], encoder, key="train.init_encoder_from")
    assert fresh == []  # every encoder parameter comes from the masked LM
  assert bert_from_mlm_budget.get_config().train.init_encoder_from == bert_from_mlm_budget.MLM_WORKDIR
