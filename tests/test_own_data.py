"""The "Your own data" guide (docs/own_data.md), run as it is written, on small files of the formats it shows.

* Every ``python -m attnjax.*`` command of the guide, grouped by the workdir it names and run in order in a scratch
  directory holding the files. Training commands get a smaller model and a few steps appended (the only change), so
  that the test takes seconds. The trained workdir must record the user's data keys, and an evaluation must score
  every example of its split: the split's size is computed here independently, by the hash rule the guide states.
* Every line of the guide's "When the data is wrong" block, produced by the bad input it describes: the training
  command must end with exactly that line on stderr, exit status 2, and leave no workdir behind.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
GUIDE = ROOT / "docs" / "own_data.md"

SMALL_SEQ2SEQ = ("--config.train.steps=2 --config.train.eval_every=2 --config.train.checkpoint_every=2 "
                 "--config.data.vocab_size=40 --config.eval.num_decode_examples=4 --config.eval.beam_size=2 "
                 "--config.model.d_model=32 --config.model.d_ff=64 --config.model.num_heads=2 "
                 "--config.model.num_encoder_layers=1 --config.model.num_decoder_layers=1")
SMALL = {  # experiment -> what a test run appends to the guide's training command
    "experiments/base.py": SMALL_SEQ2SEQ,
    "experiments/starter/summarization.py": SMALL_SEQ2SEQ + " --config.eval.max_len_b=4 --config.eval.min_len=0",
    "experiments/starter/qa.py": "--config.train.steps=2 --config.train.eval_every=2 --config.train.checkpoint_every=2 "
                                 "--config.data.vocab_size=50 --config.model.d_model=16",
    "experiments/starter/lm.py": "--config.train.steps=2 --config.train.eval_every=2 --config.train.checkpoint_every=2 "
                                 "--config.data.vocab_size=64 --config.data.seq_len=32 --config.model.num_layers=1 "
                                 "--config.model.d_model=32 --config.model.d_ff=64 --config.model.num_heads=2 "
                                 "--config.data.heldout=\"{'validation': 0.1, 'test': 0.1}\"",
    "experiments/starter/mlm.py": "--config.train.steps=2 --config.train.eval_every=2 --config.train.checkpoint_every=2 "
                                  "--config.data.seq_len=32 --config.data.batch_size=4 --config.model.num_layers=1 "
                                  "--config.model.d_model=32 --config.model.d_ff=64 --config.model.num_heads=2 "
                                  "--config.data.heldout=\"{'validation': 0.1, 'test': 0.1}\"",
}

WORDS = "the cat dog sat on mat ran to house big small red blue a of and in it was is".split()
FRENCH = "le chat chien assis sur tapis couru vers maison grand petit rouge bleu un de et dans il était est".split()


def _sentence(rng: random.Random, lo: int, hi: int) -> list[int]:
  return [rng.randrange(len(WORDS)) for _ in range(rng.randint(lo, hi))]


def write_files(where: Path) -> None:
  """Files of each format the guide shows, large enough that every held-out split has examples, beside the
  checkout's experiments (the guide's commands run from a checkout)."""
  (where / "experiments").symlink_to(ROOT / "experiments")
  rng = random.Random(0)
  rows = []
  for _ in range(300):
    words = _sentence(rng, 2, 6)
    rows.append(" ".join(WORDS[i] for i in words) + "\t" + " ".join(FRENCH[i] for i in words))
  (where / "pairs.tsv").write_text("\n".join(rows) + "\n")
  (where / "train.tsv").write_text("\n".join(rows[:250]) + "\n")
  (where / "test.tsv").write_text("\n".join(rows[250:]) + "\n")
  with open(where / "articles.jsonl", "w") as f:
    for _ in range(120):
      body = " ".join(WORDS[i] for i in _sentence(rng, 12, 40))
      f.write(json.dumps({"body": body, "abstract": " ".join(body.split()[:5])}) + "\n")
  names, places = ["Alice", "Bob", "Carol", "Dave", "Erin"], ["Paris", "Rome", "Oslo", "Lima", "Cairo"]
  data = []
  for a in range(30):
    paragraphs = []
    for p in range(2):
      name, place, year = rng.choice(names), rng.choice(places), str(rng.randint(1900, 1999))
      context = f"{name} was born in {place} in {year}."
      qas = [{"id": f"q{a}.{p}.0", "question": f"Where was {name} born?",
              "answers": [{"text": place, "answer_start": context.index(place)}]},
             {"id": f"q{a}.{p}.1", "question": f"When was {name} born?",
              "answers": [{"text": year, "answer_start": context.index(year)}]}]
      paragraphs.append({"context": context, "qas": qas})
    data.append({"title": f"Article {a}", "paragraphs": paragraphs})
  (where / "my_squad.json").write_text(json.dumps({"version": "1.1", "data": data}))
  (where / "corpus.txt").write_text("\n".join(" ".join(WORDS[i] for i in _sentence(rng, 5, 30))
                                              for _ in range(400)) + "\n")
  pieces = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + sorted(set(WORDS))
  pieces += list("abcdefghijklmnopqrstuvwxyz") + ["##" + c for c in "abcdefghijklmnopqrstuvwxyz"]
  (where / "vocab.txt").write_text("\n".join(pieces) + "\n")


def guide_commands() -> dict[str, list[str]]:
  """workdir -> the guide's ``python -m attnjax.*`` commands on it, in order (continued lines joined)."""
  blocks = re.findall(r"```bash\n(.*?)```", GUIDE.read_text(), flags=re.S)
  commands = [line for block in blocks for line in block.replace("\\\n", " ").splitlines() if line.strip()]
  grouped: dict[str, list[str]] = {}
  for command in commands:
    workdir = re.search(r"--workdir=(\S+)", command)
    assert workdir and "python -m attnjax." in command, f"a guide command without an attnjax workdir: {command}"
    grouped.setdefault(workdir.group(1), []).append(" ".join(command.split()))
  return grouped


def _run(command: str, cwd: Path) -> subprocess.CompletedProcess:
  env = {**os.environ, "JAX_PLATFORMS": "cpu", "PYTHONPATH": str(ROOT)}
  command = command.replace("python -m attnjax.", f"{shlex.quote(sys.executable)} -m attnjax.")
  return subprocess.run(["bash", "-c", command], cwd=cwd, env=env, capture_output=True, text=True, timeout=600)


def _held_out_share(key: str, shares: dict[str, float], seed: int = 0) -> str:
  """The guide's split rule, transcribed: the first 8 bytes of sha256(seed NUL key) as a fraction of 2^64, placed
  in the cumulative shares of the held-out splits in the order of their names, else train."""
  u = int.from_bytes(hashlib.sha256(f"{seed}\x00{key}".encode()).digest()[:8], "big") / 2.0**64
  bound = 0.0
  for name, share in sorted(shares.items()):
    bound += share
    if u < bound:
      return name
  return "train"


def _expected_test_size(workdir: str, where: Path) -> int | None:
  """How many examples the guide's split rule puts in test (None where the workdir's data is not split by it)."""
  if workdir == "runs/my_translation":
    pairs = [line.split("\t") for line in (where / "pairs.tsv").read_text().splitlines()]
    return sum(_held_out_share(src, {"validation": 0.05, "test": 0.05}) == "test" for src, _ in pairs)
  if workdir == "runs/my_summaries":
    docs = [json.loads(line)["body"] for line in (where / "articles.jsonl").read_text().splitlines()]
    return sum(_held_out_share(doc, {"validation": 0.05, "test": 0.05}) == "test" for doc in docs)
  if workdir == "runs/my_qa":
    data = json.loads((where / "my_squad.json").read_text())["data"]
    return sum(len(p["qas"]) for article in data for p in article["paragraphs"]
               if _held_out_share(article["title"], {"validation": 0.1, "test": 0.1}) == "test")
  return None


GROUPS = guide_commands()


def test_the_guide_has_a_worked_example_per_kind_of_task():
  configs = {re.search(r"--config=(\S+)", c).group(1) for commands in GROUPS.values() for c in commands
             if "attnjax.train" in c}
  assert configs == set(SMALL), configs
  sources = " ".join(c for commands in GROUPS.values() for c in commands)
  for needed in ("--config.data.source=tsv", "--config.data.path=articles.jsonl", "--config.data.path=my_squad.json",
                 "--config.data.path=corpus.txt", "attnjax.translate", "attnjax.generate"):
    assert needed in sources, needed


@pytest.mark.slow  # end to end, by `make test-slow`
@pytest.mark.parametrize("workdir", sorted(GROUPS))
def test_the_guide_commands_run_as_written(workdir, tmp_path):
  write_files(tmp_path)
  outputs = []
  for command in GROUPS[workdir]:
    if "attnjax.train" in command:
      command += " " + SMALL[re.search(r"--config=(\S+)", command).group(1)]
    result = _run(command, tmp_path)
    assert result.returncode == 0, f"{command}\n{result.stderr[-3000:]}"
    outputs.append((command, result.stdout))
  run = tmp_path / workdir
  config = json.loads((run / "config.json").read_text())
  train = GROUPS[workdir][0]
  for key, value in re.findall(r"--config\.data\.([a-z_]+)=(\S+)", train):  # the user's data keys, recorded
    assert str(config["data"][key]) == value, (key, config["data"][key])
  for split_file in re.findall(r"--config\.data\.splits\.(\w+)=(\S+)", train):
    assert config["data"]["splits"][split_file[0]] == split_file[1]
  assert any((run / "checkpoints").iterdir())
  expected = _expected_test_size(workdir, tmp_path)
  if expected is not None:  # the evaluation scored every example of test
    scored = json.loads((run / "metrics.test.json").read_text())
    assert scored["examples"] == expected, (scored, expected)
    written = list(run.glob("hypotheses.test.step*.txt"))  # the guide's output file: a line per example
    assert len(written) == (workdir in ("runs/my_translation", "runs/my_summaries"))
    for hypotheses in written:
      assert len(hypotheses.read_text().split("\n")) - 1 == expected
  for command, stdout in outputs:
    if "attnjax.translate" in command:
      assert len(stdout.splitlines()) == 1  # one translation for the one input line
    if "attnjax.generate" in command:
      assert stdout.startswith("The first"), stdout


# ------------------------------------------------------------------------------------------------- bad input

_BAD_TSV_ROWS = [f"{WORDS[i]} {WORDS[i + 1]}\t{FRENCH[i]} {FRENCH[i + 1]}" for i in range(8)]


def _bad_input(where: Path, line: str) -> str:
  """Writes the bad input the guide's error ``line`` describes; returns the training command that reads it."""
  tsv = "python -m attnjax.train --config=experiments/base.py --workdir=runs/bad --config.data.source=tsv " \
        "--config.data.path=pairs.tsv"
  summaries = "python -m attnjax.train --config=experiments/starter/summarization.py --workdir=runs/bad " \
              "--config.data.path=articles.jsonl --config.data.document_key=body --config.data.summary_key=abstract"
  if "tab-separated" in line:
    rows = list(_BAD_TSV_ROWS)
    rows[6] = "a line without a tab"
    (where / "pairs.tsv").write_text("\n".join(rows) + "\n")
    return tsv
  if "invalid UTF-8" in line:
    data = "\n".join(_BAD_TSV_ROWS).encode()
    lines = data.split(b"\n")
    lines[3] = b"cat d\xff\tchat"
    (where / "pairs.tsv").write_bytes(b"\n".join(lines) + b"\n")
    return tsv
  if "invalid JSON" in line:
    (where / "articles.jsonl").write_text('{"body": "a", "abstract": "b"}\n{"body": "c", "abstract": "d"}\n'
                                          '{"body": "the cat sat", "abstract" "it sat"}\n')
    return summaries
  if "missing key" in line:
    (where / "articles.jsonl").write_text('{"body": "a", "abstract": "b"}\n{"body": "c", "title": "d"}\n')
    return summaries
  if "not in its context" in line:
    context = "Alice was born in Paris in 1950."
    data = {"version": "1.1", "data": [{"title": "Alice", "paragraphs": [{"context": context, "qas": [
        {"id": "q1", "question": "Where was Alice born?", "answers": [{"text": "Lyon", "answer_start": 18}]}]}]}]}
    (where / "my_squad.json").write_text(json.dumps(data))
    return "python -m attnjax.train --config=experiments/starter/qa.py --workdir=runs/bad " \
           "--config.data.path=my_squad.json"
  if "would be empty" in line:
    (where / "pairs.tsv").write_text("\n".join(_BAD_TSV_ROWS[:3]) + "\n")
    return tsv
  if "has no usable pair" in line:
    (where / "pairs.tsv").write_text("")
    return tsv
  if "has no key 'pth'" in line:
    (where / "pairs.tsv").write_text("\n".join(_BAD_TSV_ROWS) + "\n")
    return tsv.replace("--config.data.path=", "--config.data.pth=")
  raise AssertionError(f"no bad input for the guide's line: {line}")


def _guide_errors() -> list[str]:
  section = GUIDE.read_text().split("## When the data is wrong", 1)[1]
  block = re.search(r"```text\n(.*?)```", section, flags=re.S).group(1)
  return [line for line in block.splitlines() if line.strip()]


def test_the_guide_lists_every_kind_of_bad_input():
  kinds = ("tab-separated", "invalid UTF-8", "invalid JSON", "missing key", "not in its context", "would be empty",
           "has no usable pair", "has no key 'pth'")
  errors = _guide_errors()
  assert all(any(kind in line for line in errors) for kind in kinds), errors


def test_bad_input_ends_with_the_guides_line_exit_2_and_no_workdir(tmp_path):
  """All bad inputs at once (one process each, in parallel): each stops before training, with the guide's line."""
  started = []
  for i, line in enumerate(_guide_errors()):
    where = tmp_path / str(i)
    where.mkdir()
    (where / "experiments").symlink_to(ROOT / "experiments")
    command = _bad_input(where, line).replace("python -m attnjax.", f"{shlex.quote(sys.executable)} -m attnjax.")
    env = {**os.environ, "JAX_PLATFORMS": "cpu", "PYTHONPATH": str(ROOT)}
    started.append((line, where, subprocess.Popen(["bash", "-c", command], cwd=where, env=env, text=True,
                                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE)))
  for line, where, process in started:
    _, stderr = process.communicate(timeout=600)
    assert process.returncode == 2, (line, stderr[-2000:])
    assert stderr.strip().splitlines()[-1] == line
    assert not (where / "runs" / "bad").exists(), sorted(p.name for p in (where / "runs" / "bad").iterdir())
