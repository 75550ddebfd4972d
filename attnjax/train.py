"""Train a model from an experiment file.

    python -m attnjax.train --config=experiments/dates_transformer.py --workdir=/tmp/run [--config.train.steps=100]

Resumes from the newest checkpoint in ``--workdir`` (after comparing the config with the one saved there: a change to
the model, data or optimiser needs ``--allow_config_change``); SIGTERM saves a checkpoint and exits. One run per
workdir: a second run on a workdir in use stops at once, naming the holder. A run stopped by SIGTERM exits with
:data:`attnjax.runtime.processes.PREEMPTED_EXIT` (75, EX_TEMPFAIL: "try again"), so that a launcher neither evaluates nor records it as finished.
"""

from absl import app, flags, logging
from ml_collections import config_flags

from attnjax import cli
from attnjax.runtime.processes import PREEMPTED_EXIT, quiet_orbax_logging
from attnjax.training.loop import train_and_evaluate

_CONFIG = config_flags.DEFINE_config_file("config", None, "experiment file (ml_collections)", lock_config=True)
_WORKDIR = flags.DEFINE_string("workdir", None, "directory for checkpoints, config, vocabulary and TensorBoard (a local "
                                "path or a bucket URL such as gs://bucket/runs/x)")
_ALLOW_CONFIG_CHANGE = flags.DEFINE_bool("allow_config_change", False, "resume even if the config changes the model, "
                                         "data or optimiser of the workdir's run (the change is recorded in "
                                         "config_history.jsonl)")
flags.mark_flags_as_required(["config", "workdir"])


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f"unexpected arguments: {argv[1:]}")
  quiet_orbax_logging()
  result = train_and_evaluate(_CONFIG.value, _WORKDIR.value, allow_config_change=_ALLOW_CONFIG_CHANGE.value)
  logging.info("done: %s", result)
  if result.get("preempted"):
    raise SystemExit(PREEMPTED_EXIT)


def run() -> None:
  """The command line: the ``attnjax-train`` console script, and ``python -m attnjax.train``."""
  cli.run(main, config_flag="config")


if __name__ == "__main__":
  run()
