"""An experiment's own train step in float32 and in bfloat16 compute, timed interleaved in one process.

    python -m benchmarks.precision --experiment=experiments/squad_v2_cpu/bert_from_minilm.py
    python -m benchmarks.precision --experiment=experiments/squad_v2_cpu/bilstm.py --batches=3 --reps=2

Each variant is the experiment as its file builds it (task, batches, model, optimiser, the jitted step that
``attnjax.train`` runs), with ``model.dtype`` set: ``float32``, or ``bfloat16`` (parameters, the optimiser and the
logits stay float32; products and activations are bfloat16, softmax and layer norms' statistics float32). Both take
the same first ``--batches`` training batches (the experiment's bucketing, so several shapes), every shape compiled
before timing; a repetition is one step on each batch, and the variants alternate repetition by repetition so that a
noisy machine's slow moments hit both. Reported: the median seconds of a repetition divided by its batches, tokens a
second, and bfloat16's speed-up over float32.

Whether bfloat16 pays on a CPU depends on its bfloat16 units and on how XLA compiles the whole step, not the products
alone: measure it here before choosing it for a CPU run. Accelerators compute in bfloat16 by default
(``attnjax.targets``).
"""

from __future__ import annotations

import argparse
import tempfile

import jax

from benchmarks.common import interleaved_medians, machine_description, markdown_table

DTYPES = ("float32", "bfloat16")


def experiment_with(config_path: str, dtype: str, workdir: str):
  """The experiment of ``config_path`` with ``model.dtype=dtype``, built in ``workdir`` (nothing is trained)."""
  from attnjax.compile import load_experiment  # pylint: disable=g-import-not-at-top
  from attnjax.training.loop import Experiment  # pylint: disable=g-import-not-at-top
  config = load_experiment(config_path)
  config.model.dtype = dtype
  return Experiment(config, workdir)


def step_runner(exp, batches):
  """A no-argument function taking one train step on each of ``batches`` (state donated), waiting for the last."""
  from attnjax.runtime import partitioning  # pylint: disable=g-import-not-at-top
  from attnjax.training import steps  # pylint: disable=g-import-not-at-top
  state = {"s": exp.state}
  extra = steps.step_arguments(exp.schedule, 0.5)
  batches = [partitioning.global_batch(local, exp.mesh, exp.rules) for local in batches]

  def run():
    metrics = None
    for batch in batches:
      state["s"], metrics = exp.train_step(state["s"], batch, *extra)
    jax.block_until_ready(metrics)
  return run


def main():
  parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
  parser.add_argument("--experiment", required=True, help="experiment file (ml_collections)")
  parser.add_argument("--batches", type=int, default=4, help="training batches a repetition steps through")
  parser.add_argument("--reps", type=int, default=3, help="timed repetitions of each variant")
  args = parser.parse_args()
  if args.batches < 1 or args.reps < 1:
    parser.error(f"--batches and --reps must be at least 1, got {args.batches} and {args.reps}")

  runners, tokens = {}, None
  with tempfile.TemporaryDirectory() as root:
    for dtype in DTYPES:
      exp = experiment_with(args.experiment, dtype, f"{root}/{dtype}")
      batches = [next(exp.train_batches) for _ in range(args.batches)]
      tokens = sum(exp.family.tokens(b) for b in batches)
      runners[dtype] = step_runner(exp, batches)
    seconds = interleaved_medians(runners, reps=args.reps)  # its untimed first call compiles every shape

  print(f"{args.experiment}: {args.batches} training batches ({tokens:.0f} tokens) a repetition, median of "
        f"{args.reps} interleaved repetitions; {machine_description()}\n")
  rows = [[dtype, f"{seconds[dtype] / args.batches:.2f}", f"{tokens / seconds[dtype]:.0f}",
           f"{seconds['float32'] / seconds[dtype]:.2f}"] for dtype in DTYPES]
  print(markdown_table(["compute dtype", "s / step", "tokens / s", "speed-up over float32"], rows))


if __name__ == "__main__":
  main()
