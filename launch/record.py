"""Copy the finished runs of a workdir root, without their checkpoints, to another root: the record of a study.

    python -m launch.record --src=runs/transfer --dst=results/transfer     # keep what the report reads
    python -m launch.record --src=results/transfer --dst=runs/transfer     # and put it back on a fresh machine

A run is finished when its ``launch.json`` (written by :mod:`launch.launch`) says ``"status": "done"``. Its directory is
copied to the same relative path under ``--dst`` with everything the report reads (``config.json``, ``launch.json``, the
metrics and per-question scores of every evaluation, the TensorBoard events, the log, the SentencePiece vocabulary, and
each checkpoint's ``meta`` item: its step and training time), and without the checkpoints' arrays (hundreds of MB), the
copy of a WordPiece vocabulary (``data.vocab_file`` names the original), the packed rows of a (masked) language model
(``mlm.*.npz``, ``lm.*.npz``: rebuilt from the dataset), a sequence-to-sequence run's token cache (``tokens.*.npz``,
rebuilt likewise) and the run's lock. A run already finished under
``--dst`` is left as it is. Copied back under a launcher's workdir root, the records make a re-run of the launch skip
those points, and ``python -m attnjax.report`` reads them like any run; only a run that needs another run's weights (a
reader from a pre-training) needs the checkpoints too.
"""

from __future__ import annotations

import json
import pathlib
import shutil

from absl import app, flags, logging

from attnjax.data.wordpiece import WORDPIECE_FILE

# what a record leaves out: the lock of a live run, the copy of a WordPiece vocabulary file (the config names the
# file it copied), a (masked) language model's packed rows (hundreds of MB, rebuilt from the dataset), and of each
# checkpoint all but its small JSON bookkeeping (the arrays are hundreds of MB), and a sequence-to-sequence run's token
# cache (tokens.<split>.<fingerprint>.npz: tens of MB, rebuilt from the data and the run's vocabulary)
LEFT_OUT = ("run.lock*", WORDPIECE_FILE, "mlm.*.npz", "lm.*.npz", "tokens.*.npz")
CHECKPOINT_KEPT = "meta"


def _left_out(directory: str, names: list[str]) -> set[str]:
  here = pathlib.Path(directory)
  if here.parent.name == "checkpoints" and here.name.isdigit():
    return {name for name in names if name != CHECKPOINT_KEPT}
  return set(shutil.ignore_patterns(*LEFT_OUT)(directory, names))


def finished_runs(root: str | pathlib.Path) -> list[pathlib.Path]:
  """The run directories under ``root`` whose ``launch.json`` says done, in sorted order."""
  runs = []
  for manifest in sorted(pathlib.Path(root).rglob("launch.json")):
    try:
      status = json.loads(manifest.read_text()).get("status")
    except json.JSONDecodeError as e:
      raise ValueError(f"{manifest}: not JSON ({e})") from None
    if status == "done":
      runs.append(manifest.parent)
  return runs


def record(src: str | pathlib.Path, dst: str | pathlib.Path) -> list[str]:
  """Copies every finished run under ``src`` that is not finished under ``dst``, leaving out :data:`LEFT_OUT` and
  all of each checkpoint but its ``meta``. Returns the relative paths copied."""
  src, dst = pathlib.Path(src), pathlib.Path(dst)
  if not src.is_dir():
    raise FileNotFoundError(f"--src: no directory {src}")
  done_there = {run.relative_to(dst) for run in finished_runs(dst)} if dst.is_dir() else set()
  copied = []
  for run in finished_runs(src):
    rel = run.relative_to(src)
    if rel in done_there:
      continue
    shutil.copytree(run, dst / rel, ignore=_left_out, dirs_exist_ok=True)
    copied.append(str(rel))
  return copied


def main(argv):
  del argv
  copied = record(flags.FLAGS.src, flags.FLAGS.dst)
  logging.info("%d finished run(s) copied from %s to %s%s", len(copied), flags.FLAGS.src, flags.FLAGS.dst,
               "".join(f"\n  {c}" for c in copied))


if __name__ == "__main__":
  flags.DEFINE_string("src", None, "workdir root to copy the finished runs from", required=True)
  flags.DEFINE_string("dst", None, "workdir root to copy them to", required=True)
  app.run(main)
