"""Every command of ``docs/import_checkpoint.md``, run as written on the checkpoints that ``transformers`` wrote
(``hf_import_reference/``): translating and generating with them give the library's outputs; fine-tuning from one
trains, translates and exports back, and the export reads back bit for bit; a refused option ends the command with
one line and status 2.

The guide's placeholders are replaced by files here (``path/to/opus-mt-en-de`` by the Marian reference, ``runs/``
by a temporary directory, ``pairs.tsv`` by pairs of the reference's task); the training command alone gets a few
overrides more, so that it trains 8 steps instead of 1,000.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys

import jax
import numpy as np
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
GUIDE = os.path.join(ROOT, "docs", "import_checkpoint.md")
REF = os.path.join(ROOT, "tests", "transfer", "hf_import_reference")
QUICK_TRAINING = ["--config.train.steps=8", "--config.train.eval_every=8", "--config.train.checkpoint_every=8",
                  "--config.train.log_every=4", "--config.train.learning_rate=3e-3", "--config.eval.beam_size=2",
                  "--config.data.max_tokens=512", "--config.model.implementation=xla"]


def guide_commands() -> list[str]:
  """The command lines of the guide's ``bash`` blocks, in order."""
  with open(GUIDE, encoding="utf-8") as f:
    blocks = re.findall(r"```bash\n(.*?)```", f.read(), flags=re.S)
  return [line.strip() for block in blocks for line in block.splitlines() if "python -m attnjax." in line]


def _reference(name):
  with open(os.path.join(REF, name, "reference.json"), encoding="utf-8") as f:
    return json.load(f)


def _run(command: str, tmp_path, stdin: str = "") -> subprocess.CompletedProcess:
  """``command`` with the guide's placeholders replaced, run from the repository's root."""
  for placeholder, path in (("path/to/opus-mt-en-de", os.path.join(REF, "marian")),
                            ("path/to/gpt2", os.path.join(REF, "gpt2")), ("runs/", f"{tmp_path}/runs/"),
                            ("pairs.tsv", str(tmp_path / "pairs.tsv")),
                            ("sentences.txt", str(tmp_path / "sentences.txt"))):
    command = command.replace(placeholder, path)
  if command.startswith("echo "):
    echoed, command = command.split(" | ", 1)
    stdin = shlex.split(echoed)[1] + "\n"
  args = shlex.split(command)
  assert args[:2] == ["python", "-m"], command
  if args[2] == "attnjax.train":
    args += QUICK_TRAINING
  env = dict(os.environ, JAX_PLATFORMS="cpu")
  return subprocess.run([sys.executable] + args[1:], cwd=ROOT, input=stdin, capture_output=True, text=True, env=env,
                        timeout=900, check=False)


def test_the_guide_has_the_commands_this_test_runs():
  commands = guide_commands()
  assert [shlex.split(c.split(" | ")[-1])[2] for c in commands] == [
      "attnjax.translate", "attnjax.translate", "attnjax.generate", "attnjax.generate", "attnjax.train",
      "attnjax.translate", "attnjax.export"]


def test_translating_and_generating_with_a_checkpoint_give_the_librarys_outputs(tmp_path):
  """opus-mt-like Marian: 4 beams as its generation_config.json says (the echoed sentence), greedy on a file of
  sentences; GPT-2: greedy and 4 beams, 12 new tokens, as the library continued the prompt."""
  commands = guide_commands()
  marian, gpt2 = _reference("marian"), _reference("gpt2")
  (tmp_path / "sentences.txt").write_text("\n".join(marian["texts"]) + "\n")
  echoed = _run(commands[0], tmp_path)
  assert echoed.returncode == 0, echoed.stderr[-2000:]
  assert echoed.stdout == marian["decoded"]["beam"][0] + "\n"  # "the cat sat on the mat": TEXTS[0]
  greedy = _run(commands[1], tmp_path)
  assert greedy.returncode == 0, greedy.stderr[-2000:]
  assert greedy.stdout.splitlines() == marian["decoded"]["greedy"]
  assert gpt2["prompts"][0] == "the cat" and gpt2["max_new_tokens"] == 12
  for command, key in zip(commands[2:4], ("greedy", "beam")):
    out = _run(command, tmp_path)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout == gpt2["decoded"][key][0] + "\n", key


def test_a_refused_option_ends_the_command_with_one_line_and_status_2(tmp_path):
  directory = tmp_path / "bart"
  shutil.copytree(os.path.join(REF, "marian"), directory)
  config = json.loads((directory / "config.json").read_text())
  (directory / "config.json").write_text(json.dumps({**config, "model_type": "bart"}))
  out = _run(f"python -m attnjax.translate --workdir={directory}", tmp_path, stdin="the cat\n")
  assert out.returncode == 2 and out.stdout == ""
  lines = [line for line in out.stderr.splitlines() if "model_type 'bart'" in line]
  assert len(lines) == 1 and "embedding LayerNorm" in lines[0]


def _pairs() -> list[str]:
  """Sentence pairs of the reference's task (words in reverse order) from its words, for the fine-tuning's TSV."""
  words = sorted({w for t in _reference("marian")["texts"][:6] for w in t.split()})
  rng = np.random.default_rng(0)
  texts = sorted({" ".join(rng.choice(words, size=int(rng.integers(1, 5)))) for _ in range(80)})
  return [f"{t}\t{' '.join(t.split()[::-1])}" for t in texts]


@pytest.mark.slow  # end to end, by `make test-slow`
def test_fine_tuning_a_checkpoint_trains_translates_and_exports_back_bit_for_bit(tmp_path):
  """8 steps from the Marian checkpoint: the model is the checkpoint's and its parameters moved; the run translates
  with the checkpoint's tokenizer; the export is the checkpoint's format, whose weights read back are the run's, bit
  for bit."""
  from attnjax import trained  # pylint: disable=g-import-not-at-top
  from attnjax.transfer import published  # pylint: disable=g-import-not-at-top
  commands = guide_commands()
  (tmp_path / "pairs.tsv").write_text("\n".join(_pairs()) + "\n")
  (tmp_path / "sentences.txt").write_text("the cat\na dog runs\n")
  for command in commands[4:]:
    out = _run(command, tmp_path)
    assert out.returncode == 0, (command, out.stderr[-3000:])
    if "attnjax.translate" in command:
      assert len(out.stdout.splitlines()) == 2
  run, exported = tmp_path / "runs" / "ft", tmp_path / "runs" / "ft_hf"
  original = published.import_checkpoint(os.path.join(REF, "marian"))
  loaded = trained.load_workdir(str(run), checkpoint="latest")
  assert loaded.step == 8 and loaded.config.model.activation == "silu"
  assert tuple(loaded.config.model.vocab_map) == original.vocab_map.as_tuple()
  assert sorted(os.listdir(run / "checkpoint_vocabulary")) == ["config.json", "generation_config.json", "source.spm",
                                                               "target.spm", "tokenizer_config.json", "vocab.json"]
  again = published.import_checkpoint(exported)
  tuned = dict(jax.tree_util.tree_flatten_with_path(jax.tree_util.tree_map(np.asarray, loaded.params))[0])
  back = jax.tree_util.tree_flatten_with_path(again.params)[0]
  before = dict(jax.tree_util.tree_flatten_with_path(original.params)[0])
  assert len(back) == len(tuned)
  for path, value in back:
    assert value.dtype == tuned[path].dtype and np.array_equal(value, tuned[path]), jax.tree_util.keystr(path)
  # the run started from the checkpoint's weights: Adam moves a parameter by at most α (1 - β1) / √(1 - β2) a step
  # (Kingma & Ba 2015, §2.1; 3.16 α at experiments/finetune_checkpoint.py's β2 = 0.999), α rising 3e-3 · k / 50 over
  # the warm-up; and it moved them
  reach = 0.1 / np.sqrt(1 - 0.999) * sum(3e-3 * k / 50 for k in range(8))
  moved = max(float(np.abs(tuned[path] - before[path]).max()) for path in tuned)
  assert 0 < moved <= reach
  config = json.loads((exported / "config.json").read_text())
  library = json.loads(open(os.path.join(REF, "marian", "config.json"), encoding="utf-8").read())
  kept = {k: v for k, v in library.items() if k != "dropout"}  # the run's own dropout rate (base config: 0.1)
  assert {k: config[k] for k in kept} == kept and config["dropout"] == loaded.config.model.dropout_rate
  for name in ("generation_config.json", "source.spm", "vocab.json"):
    assert (exported / name).read_bytes() == open(os.path.join(REF, "marian", name), "rb").read()
