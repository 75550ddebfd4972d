"""Evaluate a checkpoint: restore its parameters, predict every example of a split, score, write the predictions.

    python -m attnjax.evaluate --workdir=DIR [--split=test[,test2017,...]] [--checkpoint=best|latest|STEP]
                               [--average_last=N] [--weights=auto|average|params] [--data_dir=DIR]
                               [--metrics=bleu,chrf,ter,meteor]
                               [--eval beam_size=8 ...] [--heatmap=PATH] [--limit=N]

Light by design: workdir → config → vocabulary → model → parameters (no optimiser state) → sharded decoding of the
split → scores. It never reads the training split nor trains a vocabulary, so it runs where only the workdir and
the evaluated split are. ``--data_dir`` points file sources at the data; without it, the saved ``data.dir`` is used
as it is if absolute (or a bucket URL), and if relative inside the workdir first, then from the current directory.

Every example is scored, in order: over-long sources are truncated for decoding (``truncated_sources`` in the
output), empty sources decode to an empty line. The hypotheses file has one line per line of the split's reference,
so ``sacrebleu REFERENCE < hypotheses.<split>.step<N>.txt`` reproduces the BLEU printed here. Process 0 writes.
Several splits (``--split=test,test2017``) are evaluated one after the other and printed keyed by split. A task that
decodes text is evaluated with a JAX device per core on a CPU-only host (each sentence's search is its own, so
the hypotheses do not depend on the device count; every device holds a copy of the parameters).
"""

from __future__ import annotations

import json

from absl import app, flags
import jax

from attnjax import cli
from attnjax.metrics import MetricUnavailableError
from attnjax.scoring import evaluate_checkpoint
from attnjax.runtime.processes import maybe_initialize_distributed, quiet_orbax_logging

_WORKDIR = flags.DEFINE_string("workdir", None, "training workdir (holds config.json, vocabulary and checkpoints/)")
_SPLIT = flags.DEFINE_list("split", ["test"], "the split(s) to evaluate, comma-separated, each in turn from the same "
                           "checkpoint: train, validation, test or another of the task's data.splits "
                           "(multi30k_en_de: test2017, test_mscoco)")
_CHECKPOINT = flags.DEFINE_string("checkpoint", "best", "'best', 'latest' or a step number")
_AVERAGE_LAST = flags.DEFINE_integer("average_last", None, "average the parameters of the last N kept checkpoints "
                                     "(Vaswani et al. averaged the last 5 / 20) instead of --checkpoint")
_WEIGHTS = flags.DEFINE_enum("weights", "auto", ["auto", "average", "params"],
                              "'auto': the moving average of the parameters where the run kept one "
                              "(train.ema_decay), else the parameters; 'params': the parameters themselves (files "
                              "and metrics.<split>.params.json take .params); 'average': the average or an error")
_DATA_DIR = flags.DEFINE_string("data_dir", None, "where the data files are (overrides the saved data.dir)")
_LIMIT = flags.DEFINE_integer("limit", None, "score only the first N examples")
_HEATMAP = flags.DEFINE_string("heatmap", None, "write the attention heatmap of the first example to this PNG")
_EVAL = flags.DEFINE_multi_string("eval", [], "eval overrides KEY=VALUE (e.g. beam_size=8, decode=greedy)")
_METRICS = flags.DEFINE_list("metrics", None, "metrics to compute instead of the task's own, e.g. bleu,chrf,ter,meteor")
# Several hosts (each decodes its share; process 0 writes): as for training, but never taken from the saved config,
# whose addresses belong to the training job.
_DISTRIBUTED = flags.DEFINE_bool("distributed", False, "call jax.distributed.initialize() (TPU VM / SLURM: the "
                                 "arguments are discovered; elsewhere give the three below)")
_COORDINATOR = flags.DEFINE_string("coordinator_address", None, "host:port of process 0")
_NUM_PROCESSES = flags.DEFINE_integer("num_processes", None, "number of processes")
_PROCESS_ID = flags.DEFINE_integer("process_id", None, "this process's index")
_CPU_COLLECTIVES = flags.DEFINE_string("cpu_collectives", None, "'gloo' for CPU-only multi-process runs")


def distributed_from_flags():
  """The ``config.distributed`` section that :func:`maybe_initialize_distributed` takes, from the flags above."""
  import ml_collections  # pylint: disable=g-import-not-at-top
  return ml_collections.ConfigDict(dict(initialize=_DISTRIBUTED.value, coordinator_address=_COORDINATOR.value,
                                        num_processes=_NUM_PROCESSES.value, process_id=_PROCESS_ID.value,
                                        cpu_collectives=_CPU_COLLECTIVES.value))


def _decodes(workdir: str) -> bool:
  """Whether the workdir's task family generates text: its search keeps about one core busy per CPU device, so the
  evaluation then decodes with a device per core (:func:`attnjax.cli.one_device_per_core`)."""
  from attnjax import config as config_lib, families  # pylint: disable=g-import-not-at-top
  try:
    return families.of(config_lib.load_config(workdir)).decodes
  except Exception:  # pylint: disable=broad-except  (a bad workdir is named by the evaluation itself)
    return False


def _parse(value: str):
  try:
    return json.loads(value)
  except json.JSONDecodeError:
    return value


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f"unexpected arguments: {argv[1:]}")
  quiet_orbax_logging()
  overrides = {}
  for item in _EVAL.value:
    key, sep, value = item.partition("=")
    if not sep:
      raise app.UsageError(f"--eval takes KEY=VALUE, got {item!r}")
    overrides[key] = _parse(value)
  if not _DISTRIBUTED.value and _decodes(_WORKDIR.value):
    cli.one_device_per_core()
  maybe_initialize_distributed(distributed_from_flags())
  if not _SPLIT.value:
    raise app.UsageError("--split is empty: name at least one split (e.g. --split=test,test2017)")
  results = {}
  for i, split in enumerate(_SPLIT.value):
    try:
      results[split] = evaluate_checkpoint(_WORKDIR.value, split=split, checkpoint=_CHECKPOINT.value,
                                           average_last=_AVERAGE_LAST.value, data_dir=_DATA_DIR.value,
                                           limit=_LIMIT.value, heatmap=_HEATMAP.value if i == 0 else None,
                                           eval_overrides=overrides, weights=_WEIGHTS.value,
                                           metrics=None if _METRICS.value is None else tuple(_METRICS.value))
    except MetricUnavailableError as e:
      raise SystemExit(f"error: {e}") from None
  if jax.process_index() == 0:  # one split: its result, as before; several: the results keyed by split
    print(json.dumps(results[_SPLIT.value[0]] if len(results) == 1 else results, indent=2))


def run() -> None:
  """The command line: the ``attnjax-evaluate`` console script, and ``python -m attnjax.evaluate``."""
  flags.mark_flag_as_required("workdir")
  cli.run(main)


if __name__ == "__main__":
  run()
