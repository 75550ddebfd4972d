"""A TPU VM's workflow with everything in a bucket, end to end: data and workdir at ``gs://`` URLs, the real CLIs.

The data is copied into a (local, emulated: see tests/fake_gcs.py) bucket, then ``attnjax.train``, ``attnjax.evaluate``
and ``attnjax.translate`` run as subprocesses, as a user would run them, with only URLs on their command lines. What
they leave in the bucket is checked through epath, and the subprocesses' current directory is checked to be empty of
any ``gs:`` directory: a URL that went through ``os.path`` (``abspath("gs://b/x")`` is ``<cwd>/gs:/b/x``) writes
there silently instead of failing. A second training run with more steps must resume from the bucket's checkpoint.
"""

import gzip
import json
import os
import random
import struct
import subprocess
import sys
import time

from etils import epath
import pytest

# Word-for-word "translations" with a fixed order: enough structure for a tiny model to start learning, and enough
# distinct words for a 64-piece sentencepiece vocabulary.
_EN_DE = {
    "a": "ein", "the": "der", "man": "mann", "woman": "frau", "dog": "hund", "cat": "katze", "child": "kind",
    "girl": "mädchen", "boy": "junge", "is": "ist", "riding": "reitet", "eating": "isst", "walking": "geht",
    "playing": "spielt", "running": "rennt", "with": "mit", "on": "auf", "in": "in", "near": "neben", "red": "rot",
    "blue": "blau", "big": "groß", "small": "klein", "old": "alt", "young": "jung", "ball": "ball",
    "bike": "fahrrad", "street": "straße", "park": "park", "house": "haus", "apple": "apfel", "garden": "garten",
    ".": ".",
}
_SUBJECTS = ["man", "woman", "dog", "cat", "child", "girl", "boy"]
_ADJECTIVES = ["red", "blue", "big", "small", "old", "young"]
_VERBS = ["riding", "eating", "walking", "playing", "running"]
_PREPOSITIONS = ["with", "on", "in", "near"]
_OBJECTS = ["ball", "bike", "street", "park", "house", "apple", "garden"]

SPLITS = {"train": 300, "val": 40, "test": 30}
STEPS, MORE_STEPS = 30, 40

CONFIG = '''"""A Multi30k-style transformer shrunk to seconds on a CPU (tests/cloud/test_gcs_workdir.py)."""

from attnjax.config import base_config
from attnjax.data.catalogue import use_task


def get_config():
  config = base_config()
  use_task(config, "multi30k_en_de")
  d = config.data
  d.dir = "gs://bucket/data"
  d.splits = {"train": "train", "validation": "val", "test": "test"}
  d.vocab_size = 64
  d.joint_vocab = True
  d.max_src_len, d.max_tgt_len = 48, 48
  d.max_tokens = 768
  d.bucket_boundaries = (24,)
  m = config.model
  m.num_encoder_layers = m.num_decoder_layers = 1
  m.d_model, m.num_heads, m.d_ff = 32, 2, 64
  m.max_length = 64
  t = config.train
  t.learning_rate = 2.0
  t.warmup_steps = 10
  t.steps = %(steps)d
  t.log_every = 10
  t.eval_every = 20
  t.checkpoint_every = 10
  t.keep_checkpoints = 3
  t.peak_tflops_per_device = 1.0  # skips the start-up matmul benchmark
  e = config.eval
  e.split = "validation"
  e.beam_size = 2
  e.num_decode_examples = 8
  e.batch_size = 16
  e.loss_batches = 2
  return config
'''


def _sentence(rng: random.Random) -> tuple[str, str]:
  words = ["a", rng.choice(_ADJECTIVES), rng.choice(_SUBJECTS), "is", rng.choice(_VERBS)]
  if rng.random() < 0.7:
    words += [rng.choice(_PREPOSITIONS), "the", rng.choice(_OBJECTS)]
  words.append(".")
  return " ".join(words), " ".join(_EN_DE[w] for w in words)


def _upload_data(root: epath.Path) -> dict[str, list[str]]:
  """Writes train/val/test ``.en`` / ``.de`` files into the bucket, train and test gzipped as Multi30k's raw files
  are, val plain (both are read); returns each split's source lines."""
  rng = random.Random(0)
  sources = {}
  for split, n in SPLITS.items():
    pairs = [_sentence(rng) for _ in range(n)]
    sources[split] = [en for en, _ in pairs]
    for lang, lines in (("en", [en for en, _ in pairs]), ("de", [de for _, de in pairs])):
      data = "".join(line + "\n" for line in lines).encode("utf-8")
      if split != "val":
        (root / f"{split}.{lang}.gz").write_bytes(gzip.compress(data))
      else:
        (root / f"{split}.{lang}").write_bytes(data)
  return sources


def _run(module: str, *args: str, cwd, env) -> subprocess.CompletedProcess:
  proc = subprocess.run([sys.executable, "-m", module, *args], cwd=cwd, env=env, capture_output=True, text=True,
                        timeout=300)
  assert proc.returncode == 0, f"{module} failed:\n{proc.stderr[-4000:]}"
  return proc


def _event_tags(data: bytes) -> set[str]:
  """The scalar tags of a TensorBoard event file (TFRecord framing: length, its CRC, the Event proto, its CRC)."""
  from tensorboardX.proto import event_pb2  # pylint: disable=g-import-not-at-top
  tags, offset = set(), 0
  while offset < len(data):
    (length,) = struct.unpack("<Q", data[offset:offset + 8])
    event = event_pb2.Event.FromString(data[offset + 12:offset + 12 + length])
    tags.update(value.tag for value in event.summary.value)
    offset += 12 + length + 4
  return tags


@pytest.mark.slow  # end to end, by `make test-slow`
def test_train_evaluate_translate_and_resume_with_everything_in_a_bucket(tmp_path, fake_gcs_server):
  start = time.perf_counter()
  bucket = epath.Path(fake_gcs_server.root)
  data_dir, workdir = bucket / "data", bucket / "runs" / "t"
  sources = _upload_data(data_dir)
  config_file = tmp_path / "tiny_config.py"
  config_file.write_text(CONFIG % {"steps": STEPS})
  # The emulator's variables, and one CPU device; the subprocesses run in tmp_path, where a URL mangled into a local
  # path would land.
  env = dict(os.environ, JAX_PLATFORMS="cpu", **fake_gcs_server.env)
  env.pop("XLA_FLAGS", None)

  def run(module, *args):
    proc = _run(module, *args, cwd=tmp_path, env=env)
    fake_gcs_server.refresh()  # this process's cached listings predate what the subprocess wrote
    return proc

  run("attnjax.train", f"--config={config_file}", f"--workdir={workdir}", f"--config.data.dir={data_dir}")

  assert json.loads((workdir / "config.json").read_text())["data"]["dir"] == str(data_dir)
  assert (workdir / "spm.model").stat().length > 1000 and (workdir / "spm.vocab").exists()
  assert list(workdir.glob("tokens.train.*.npz")), "the token cache goes next to the vocabulary"
  steps = sorted(int(p.name) for p in (workdir / "checkpoints").iterdir() if p.name.isdigit())
  assert steps == [10, 20, STEPS]
  assert {p.name for p in (workdir / "checkpoints" / str(STEPS)).iterdir()} >= {"state", "data", "meta"}
  assert list((workdir / "checkpoints" / str(STEPS) / "state").iterdir())
  events = [p for p in (workdir / "tensorboard").iterdir() if p.name.startswith("events.out.tfevents")]
  assert len(events) == 1
  assert {"train/loss", "train/learning_rate", "eval/loss", "eval/bleu"} <= _event_tags(events[0].read_bytes())

  heatmap = workdir / "attention.png"
  proc = run("attnjax.evaluate", f"--workdir={workdir}", "--split=test", "--checkpoint=latest", f"--heatmap={heatmap}")
  result = json.loads(proc.stdout[proc.stdout.index("{"):])
  hypotheses = workdir / f"hypotheses.test.step{STEPS}.txt"
  assert result["step"] == STEPS and result["examples"] == SPLITS["test"] and result["hypotheses"] == str(hypotheses)
  assert "bleu" in result and result["heatmap"] == str(heatmap)
  assert heatmap.read_bytes().startswith(b"\x89PNG")
  assert len(hypotheses.read_text(encoding="utf-8").split("\n")) == SPLITS["test"] + 1  # one line per example + ""

  out = bucket / "out.txt"
  run("attnjax.translate", f"--workdir={workdir}", f"--input={data_dir / 'test.en.gz'}", f"--output={out}",
      "--checkpoint=latest")
  assert len(out.read_text(encoding="utf-8").split("\n")) == len(sources["test"]) + 1

  proc = run("attnjax.train", f"--config={config_file}", f"--workdir={workdir}", f"--config.data.dir={data_dir}",
             f"--config.train.steps={MORE_STEPS}")
  assert f"resuming from step {STEPS}" in proc.stderr
  assert f"Reusing the sentencepiece model {workdir / 'spm.model'}" in proc.stderr
  assert MORE_STEPS in [int(p.name) for p in (workdir / "checkpoints").iterdir() if p.name.isdigit()]
  history = (workdir / "config_history.jsonl").read_text().splitlines()
  assert len(history) == 1 and "train.steps" in history[0]  # the harmless change is recorded in the bucket

  mangled = [str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*") if "gs:" in str(p.relative_to(tmp_path))]
  assert not mangled, f"a gs:// URL was used as a local path: {mangled}"
  # and nothing else either (a workdir file written relative to the current directory)
  assert sorted(p.name for p in tmp_path.iterdir() if p.name != "__pycache__") == ["tiny_config.py"]
  print(f"round trip in {time.perf_counter() - start:.0f}s")
