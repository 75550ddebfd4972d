"""Evaluation or training of a workdir in a process of its own (the parent sets XLA_FLAGS for N simulated devices):
the subject of the sharded-evaluation and multi-host sync tests. Prints one JSON line.

    python -m tests.training.run_eval evaluate --workdir=W [--data_dir=D] [--process_id=0 --num_processes=2 --port=P]
    python -m tests.training.run_eval train --workdir=W --config=JSON [--sigterm_at=STEP] [--process_id=...]
"""

import argparse
import json
import os
import signal
import sys

import jax


def main():
  parser = argparse.ArgumentParser()
  parser.add_argument("mode", choices=("evaluate", "train"))
  parser.add_argument("--workdir", required=True)
  parser.add_argument("--data_dir", default=None)
  parser.add_argument("--config", default=None, help="train: the config as JSON (attnjax.config.save_config's format)")
  parser.add_argument("--sigterm_at", type=int, default=None, help="train: this process SIGTERMs itself after the step")
  parser.add_argument("--process_id", type=int, default=None)
  parser.add_argument("--num_processes", type=int, default=None)
  parser.add_argument("--port", type=int, default=None)
  args = parser.parse_args()
  if args.num_processes:
    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    jax.distributed.initialize(f"127.0.0.1:{args.port}", args.num_processes, args.process_id)
  from attnjax import inference  # pylint: disable=g-import-not-at-top
  if args.mode == "evaluate":
    from attnjax import scoring  # pylint: disable=g-import-not-at-top
    decoders = []
    original = inference.decoder_for

    def recording(*a, **k):
      decoders.append(original(*a, **k))
      return decoders[-1]

    inference.decoder_for = recording
    result = scoring.evaluate_checkpoint(args.workdir, split="test", checkpoint="latest", data_dir=args.data_dir)
    result["traced_shapes"] = [list(shape) for d in decoders for shape in d.traced_shapes]
  else:
    from attnjax.config import base_config  # pylint: disable=g-import-not-at-top
    from attnjax.training.loop import train_and_evaluate  # pylint: disable=g-import-not-at-top
    import ml_collections  # pylint: disable=g-import-not-at-top
    config = base_config()
    raw = json.loads(args.config)
    for section, values in raw.items():
      if section == "model":
        config.model = ml_collections.ConfigDict(values)
      elif isinstance(values, dict):
        with config[section].unlocked():
          config[section].update({k: tuple(v) if isinstance(v, list) else v for k, v in values.items()})
      else:
        config[section] = values

    def on_step(step):
      if step == args.sigterm_at:
        os.kill(os.getpid(), signal.SIGTERM)

    result = train_and_evaluate(config, args.workdir, on_step=on_step)
    steps = sorted(int(name) for name in os.listdir(os.path.join(args.workdir, "checkpoints")) if name.isdigit())
    result = {"step": result["step"], "sync_agreements": result["sync_agreements"], "checkpoints": steps}
  result["processes"], result["devices"] = jax.process_count(), jax.device_count()
  print(json.dumps(result))
  sys.stdout.flush()


if __name__ == "__main__":
  main()
