"""Evaluation as a TPU VM user needs it: every line of a split scored (over-long sources truncated, empty ones
decoded to ""), the hypotheses file rescorable with sacrebleu against the original reference file, the same
hypotheses on 1 device, 8 devices and 2 processes with each device decoding only its share, an evaluator that
needs neither the training files nor the optimiser state, and multi-host training that agrees on stopping only at
its sync points."""

import gzip
import json
import os
import shutil
import socket
import subprocess
import sys

import numpy as np
import pytest

from attnjax import config as config_lib
from attnjax import scoring
from attnjax.runtime import checkpointing
from attnjax.training.loop import train_and_evaluate
from tests.devices import cpu_devices_env

# one worker runs this module's tests (make test: --dist=loadgroup), so its module fixture is built once
pytestmark = pytest.mark.xdist_group("tests/training/test_sharded_evaluation.py")

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
WORDS = "the a man woman dog cat sees runs with on red blue big small house street ball child".split()
N_TEST, TOO_LONG, EMPTY = 40, (3, 11, 29), (5, 17)
MAX_SRC_LEN = 16  # tokens; the over-long test sources have ~40 words


def _sentence(rng, low, high):
  return " ".join(rng.choice(WORDS, size=rng.integers(low, high)))


def _write(path, lines, gz=False):
  data = "".join(line + "\n" for line in lines).encode("utf-8")
  with (gzip.open if gz else open)(path, "wb") as f:
    f.write(data)


@pytest.fixture(scope="module")
def run(tmp_path_factory):
  """A tiny Transformer trained on a "translation" (reversed word order) whose test split has over-long and empty
  sources. Returns (workdir, data_dir)."""
  base = tmp_path_factory.mktemp("sharded_eval")
  data, workdir = base / "data", str(base / "run")
  data.mkdir()
  rng = np.random.default_rng(0)
  for split, n in (("train", 400), ("val", 20), ("test", N_TEST)):
    src = [_sentence(rng, 2, 8) for _ in range(n)]
    if split == "test":
      for i in TOO_LONG:
        src[i] = _sentence(rng, 40, 41)
      for i in EMPTY:
        src[i] = ""
    tgt = [" ".join(reversed(s.split())) or "nothing" for s in src]
    _write(data / f"{split}.en", src, gz=split == "train")
    _write(data / f"{split}.de", tgt)
  config = config_lib.base_config()
  from attnjax.data.catalogue import use_task  # pylint: disable=g-import-not-at-top
  use_task(config, "multi30k_en_de")
  with config.data.unlocked():
    config.data.update(dict(dir=str(data), splits={"train": "train", "validation": "val", "test": "test"},
                            vocab_size=40, joint_vocab=True, max_src_len=MAX_SRC_LEN,
                            max_tgt_len=MAX_SRC_LEN, max_tokens=512, bucket_boundaries=(8,)))
  config.model.update(dict(num_encoder_layers=1, num_decoder_layers=1, d_model=32, num_heads=4, d_ff=64))
  config.train.update(dict(steps=30, eval_every=30, checkpoint_every=15, log_every=10, learning_rate=1.0,
                           warmup_steps=10))
  config.eval.update(dict(num_decode_examples=8, batch_size=12, max_len_a=1.0, max_len_b=4))
  train_and_evaluate(config, workdir)
  return workdir, str(data)


def test_every_test_line_is_scored_and_sacrebleu_reproduces_the_bleu(run, tmp_path):
  workdir, data = run
  result = scoring.evaluate_checkpoint(workdir, split="test", checkpoint="latest")
  assert result["examples"] == N_TEST
  assert result["truncated_sources"] == len(TOO_LONG) and result["empty_sources"] == len(EMPTY)
  with open(result["hypotheses"], encoding="utf-8") as f:
    hypotheses = f.read().split("\n")[:-1]
  assert len(hypotheses) == N_TEST  # one line per reference line
  assert all(hypotheses[i] == "" for i in EMPTY)
  reference = os.path.join(data, "test.de")
  proc = subprocess.run([sys.executable, "-m", "sacrebleu", reference, "-i", result["hypotheses"], "-m", "bleu", "-b",
                         "-w", "6"], capture_output=True, text=True, check=True)
  assert float(proc.stdout.strip()) == pytest.approx(result["bleu"], abs=1e-4)


def test_evaluation_logs_its_progress_to_the_last_example(run, monkeypatch, caplog):
  from attnjax import progress  # pylint: disable=g-import-not-at-top
  workdir, _ = run
  monkeypatch.setattr(progress, "EVERY_SECONDS", 0.0)  # a line per batch
  with caplog.at_level("INFO"):
    scoring.evaluate_checkpoint(workdir, split="test", checkpoint="latest")
  lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith("decoding (longest first): ")]
  decoded = N_TEST - len(EMPTY)  # the empty sources are not decoded
  assert len(lines) >= 2 and lines[0].startswith(f"decoding (longest first): 0 / {decoded} examples (0.0%)")
  assert lines[-1].startswith(f"decoding (longest first): {decoded} / {decoded} examples (100.0%), ")
  assert lines[-1].endswith("0:00:00 left")


def _free_port():
  with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    return s.getsockname()[1]


def _spawn(mode, devices, *args):
  env = cpu_devices_env(devices)
  return subprocess.Popen([sys.executable, "-m", "tests.training.run_eval", mode, *args], cwd=ROOT, env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _result(proc):
  out, err = proc.communicate(timeout=600)
  assert proc.returncode == 0, err[-3000:]
  return json.loads(out.strip().splitlines()[-1])


def _take_hypotheses(result):
  """Reads a run's hypotheses file and removes it, so that the next run must write its own."""
  with open(result["hypotheses"], encoding="utf-8") as f:
    text = f.read()
  os.remove(result["hypotheses"])
  return text


def test_eight_devices_and_two_processes_give_the_one_device_hypotheses_each_decoding_its_share(run):
  import jax  # pylint: disable=g-import-not-at-top
  workdir, _ = run
  assert jax.device_count() == 1  # this process: the one-device reference is evaluated here
  one = scoring.evaluate_checkpoint(workdir, split="test", checkpoint="latest")
  reference = _take_hypotheses(one)
  assert len(reference.split("\n")) == N_TEST + 1  # one line per example
  eight = _result(_spawn("evaluate", 8, f"--workdir={workdir}"))
  assert eight["devices"] == 8 and _take_hypotheses(eight) == reference
  assert eight["bleu"] == one["bleu"]
  # eval.batch_size 12 rounds up to 16 rows on 8 devices: every device's program decodes 2 of them; the 38 sources
  # that are not empty leave 6 for the last batch, fewer than the devices: its 8 rows (the next power of two) decode
  # on one device
  assert {shape[0] for shape in eight["traced_shapes"]} == {2, 8}
  port = _free_port()
  procs = [_spawn("evaluate", 2, f"--workdir={workdir}", f"--process_id={i}", "--num_processes=2", f"--port={port}")
           for i in range(2)]
  results = [_result(p) for p in procs]
  assert all(r["processes"] == 2 and r["devices"] == 4 for r in results)
  assert _take_hypotheses(results[0]) == reference
  assert all(r["bleu"] == one["bleu"] for r in results)  # process 0 scored, process 1 received its numbers
  # 12 rows over 4 devices, and the last 2 sources in 4 rows
  assert {shape[0] for r in results for shape in r["traced_shapes"]} == {3, 1}


def test_evaluate_needs_neither_the_training_files_nor_the_optimizer_state(run, tmp_path, monkeypatch):
  workdir, data = run
  only_test = tmp_path / "only_test"
  only_test.mkdir()
  for name in ("test.en", "test.de"):
    shutil.copy(os.path.join(data, name), only_test / name)
  restored_items = []
  original = checkpointing.ocp.CheckpointManager.restore

  def spy(self, step, args=None, **kwargs):
    restored_items.append(args)
    return original(self, step, args=args, **kwargs)

  monkeypatch.setattr(checkpointing.ocp.CheckpointManager, "restore", spy)
  monkeypatch.setattr(checkpointing.Checkpointer, "restore",
                      lambda *a, **k: pytest.fail("the full train state was restored"))
  result = scoring.evaluate_checkpoint(workdir, split="test", checkpoint="latest", data_dir=str(only_test))
  assert result["examples"] == N_TEST
  (args,) = restored_items
  assert set(args.keys()) == {"state"} and set(args["state"].item) == {"params"}  # no opt_state, step, rng, data


def test_two_process_training_agrees_on_stopping_only_at_sync_points(tmp_path):
  config = json.loads(_tiny_config().to_json_best_effort())
  port = _free_port()
  # process 1 alone is SIGTERMed after step 7; the next sync point (sync_every=5) is step 10: both save step 10
  procs = [_spawn("train", 2, f"--workdir={tmp_path}", f"--config={json.dumps(config)}", f"--process_id={i}",
                  "--num_processes=2", f"--port={port}", *(["--sigterm_at=7"] if i == 1 else [])) for i in range(2)]
  results = [_result(p) for p in procs]
  for r in results:
    assert r["step"] == 10 and r["checkpoints"] == [10]
    assert r["sync_agreements"] == 2  # steps 5 and 10: no host-device agreement at the 8 other steps


def _tiny_config():
  from tests.training.run_steps import tiny_config  # pylint: disable=g-import-not-at-top
  config = tiny_config((4, 1, 1))
  config.data.bucket_boundaries = None  # one batch shape: one compilation of the train step
  config.train.update(dict(steps=20, sync_every=5, log_every=100, eval_every=100, checkpoint_every=100,
                           peak_tflops_per_device=1.0))  # (a known peak: no start-up matmul benchmark)
  return config


def test_average_last_two_checkpoints_decodes_with_the_mean_parameters(run):
  import jax  # pylint: disable=g-import-not-at-top
  from attnjax import trained  # pylint: disable=g-import-not-at-top
  workdir, _ = run
  averaged = trained.load_workdir(workdir, average_last=2)
  assert averaged.steps == (15, 30)
  one, two = (trained.load_workdir(workdir, checkpoint=str(step)).params for step in (15, 30))
  for got, a, b in zip(*(jax.tree_util.tree_leaves(t) for t in (averaged.params, one, two))):
    np.testing.assert_allclose(np.asarray(got), (np.asarray(a) + np.asarray(b)) / 2, rtol=1e-6, atol=1e-7)
  with pytest.raises(ValueError, match="--average_last=5 needs 5 checkpoints"):
    trained.load_workdir(workdir, average_last=5)
  result = scoring.evaluate_checkpoint(workdir, split="test", average_last=2)
  assert result["steps"] == [15, 30] and result["hypotheses"].endswith("hypotheses.test.step30.avg2.txt")


def test_translate_writes_one_line_per_input_line_and_n_best_lists(run, tmp_path):
  workdir, data = run
  sources = open(os.path.join(data, "test.en"), encoding="utf-8").read().split("\n")[:-1]
  output = tmp_path / "out.txt"
  env = dict(os.environ, JAX_PLATFORMS="cpu")
  subprocess.run([sys.executable, "-m", "attnjax.translate", f"--workdir={workdir}", "--checkpoint=latest",
                  f"--input={os.path.join(data, 'test.en')}", f"--output={output}"], cwd=ROOT, env=env, check=True,
                 capture_output=True, text=True)
  translations = output.read_text(encoding="utf-8").split("\n")[:-1]
  evaluated = scoring.evaluate_checkpoint(workdir, split="test", checkpoint="latest")
  evaluated = _take_hypotheses(evaluated).split("\n")[:-1]
  assert translations == evaluated and len(translations) == len(sources)  # same search, same order
  proc = subprocess.run([sys.executable, "-m", "attnjax.translate", f"--workdir={workdir}", "--checkpoint=latest",
                         "--n_best=3", "--beam_size=4"], cwd=ROOT, env=env, check=True, capture_output=True, text=True,
                        input="the man sees a dog\n\nthe red ball\n")
  rows = [line.split("\t") for line in proc.stdout.split("\n")[:-1]]
  assert [int(r[0]) for r in rows] == [0, 0, 0, 1, 1, 1, 2, 2, 2]
  for i in (0, 2):
    scores = [float(r[1]) for r in rows if int(r[0]) == i]
    assert scores == sorted(scores, reverse=True)  # best first
  assert [r[2] for r in rows if int(r[0]) == 1] == ["", "", ""]  # the empty line


def test_attention_maps_per_head_average_to_the_alignment_and_are_drawn(run, tmp_path):
  """attnjax.analysis.attention_maps on the trained run: one map per head, each row a distribution over the source
  pieces, and their mean the head-averaged cross-attention the decoder's own heatmap path returns."""
  import jax.numpy as jnp  # pylint: disable=g-import-not-at-top
  from attnjax import trained  # pylint: disable=g-import-not-at-top
  from attnjax.analysis import attention_maps  # pylint: disable=g-import-not-at-top
  workdir, _ = run
  entry = attention_maps.attention_of(workdir, "test", 0)
  heads = entry["weights"]
  assert heads.shape == (4, len(entry["output_pieces"]), len(entry["source_pieces"]))
  np.testing.assert_allclose(heads.sum(axis=-1), 1.0, atol=1e-5)
  loaded = trained.load_workdir(workdir, checkpoint="best")
  src = loaded.vocabularies.src.encode(entry["source"])[:MAX_SRC_LEN]
  tgt_in = [1] + loaded.vocabularies.tgt.encode(entry["hypothesis"])  # BOS_ID, then the translation
  model, variables = loaded.model, {"params": loaded.params}
  memory = model.apply(variables, jnp.asarray([src]), method=model.encode)
  mean = model.apply(variables, jnp.asarray([tgt_in]), memory, return_attention=True, method=model.decode).attention
  np.testing.assert_allclose(heads.mean(axis=0), np.asarray(mean[0]), atol=1e-6)
  with pytest.raises(ValueError, match="--index=40: the test split has 40 examples"):
    attention_maps.attention_of(workdir, "test", 40)
  attention_maps.plot_attention(entry, tmp_path / "map.png")
  assert (tmp_path / "map.png").read_bytes().startswith(b"\x89PNG")


def test_alignment_diagnostics_agree_with_the_model_run_one_sentence_at_a_time(run):
  """attnjax.analysis.attention_maps.alignment_diagnostics (batched, padded, jitted) against each validation sentence
  run alone through the model's full forward pass (logits) and its decoder (head-averaged attention), unpadded."""
  import jax  # pylint: disable=g-import-not-at-top
  import jax.numpy as jnp  # pylint: disable=g-import-not-at-top
  from attnjax import trained  # pylint: disable=g-import-not-at-top
  from attnjax import families  # pylint: disable=g-import-not-at-top
  from attnjax.analysis import attention_maps  # pylint: disable=g-import-not-at-top
  workdir, _ = run
  got = attention_maps.alignment_diagnostics(workdir, "validation", 12, batch_size=5)  # the last batch part-filled
  loaded = trained.load_workdir(workdir, checkpoint="best")
  model, variables = loaded.model, {"params": loaded.params}
  pairs = families.load_split(loaded.config.data, "validation")[:12]
  sources = [loaded.vocabularies.src.encode(s) for s, _ in pairs]
  targets = [loaded.vocabularies.tgt.encode(t) + [2] for _, t in pairs]  # EOS_ID
  # each call compiled for its sentence's own (unpadded) shape: faster than op by op over these 12 shapes
  forward = jax.jit(model.apply)
  encode = jax.jit(lambda v, src: model.apply(v, src, method=model.encode))
  attention = jax.jit(lambda v, tgt_in, memory: model.apply(v, tgt_in, memory, return_attention=True,
                                                            method=model.decode).attention)
  positions, nll, nll_other = [], [], []
  for i, (src, tgt) in enumerate(zip(sources, targets)):
    tgt_in = jnp.asarray([[1] + tgt[:-1]])  # BOS_ID
    for source, sink in ((src, nll), (sources[(i + 1) % len(sources)], nll_other)):
      log_probs = jax.nn.log_softmax(forward(variables, jnp.asarray([source]), tgt_in)[0])
      sink.extend(-float(log_probs[t, token]) for t, token in enumerate(tgt))
    weights = attention(variables, tgt_in, encode(variables, jnp.asarray([src])))[0]
    positions.extend(enumerate(np.argmax(np.asarray(weights), axis=-1)))
  assert got["sentences"] == 12 and got["tokens"] == len(nll)
  np.testing.assert_allclose(got["loss"], np.mean(nll), rtol=1e-5)
  np.testing.assert_allclose(got["loss_other_source"], np.mean(nll_other), rtol=1e-5)
  np.testing.assert_allclose(got["correlation"], np.corrcoef(np.asarray(positions, float).T)[0, 1], atol=1e-6)
  assert got["loss_other_source"] > got["loss"]  # the model translates its own source, not any (3.12 vs 2.74 here)
  table = attention_maps.alignment_table([("Transformer", workdir, got)], "validation")
  assert f"| Transformer | `{workdir}` | 12 ({len(nll)}) | {got['correlation']:.2f} | {got['loss']:.2f} |" in table
  with pytest.raises(ValueError, match="examples=1 with 1 in the validation split"):
    attention_maps.alignment_diagnostics(workdir, "validation", 1)
