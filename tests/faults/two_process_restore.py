"""One of two processes (gloo over 127.0.0.1) saving or restoring a checkpoint of one array split between them.

    python -m tests.faults.two_process_restore --process_id=0 --port=12345 --directory=DIR --phase=save
    python -m tests.faults.two_process_restore --process_id=0 --port=12345 --directory=DIR --phase=restore [--size=8192]

``save`` writes steps 4 and 8 of ``w`` (``arange(size) + step``, half of it on each process); ``restore`` restores the
newest usable step into ``w`` of ``--size`` and prints one JSON line: ``{"step", "w", "error"}`` (step 0: started
from scratch; ``error``: the :class:`CheckpointRestoreError`'s message, if one was raised).
"""

import argparse
import json

import jax
import numpy as np


def main() -> None:
  parser = argparse.ArgumentParser()
  parser.add_argument("--process_id", type=int, required=True)
  parser.add_argument("--port", type=int, required=True)
  parser.add_argument("--directory", required=True)
  parser.add_argument("--phase", choices=("save", "restore"), required=True)
  parser.add_argument("--size", type=int, default=4096)  # large enough for data files of its own (not inlined)
  args = parser.parse_args()
  jax.config.update("jax_cpu_collectives_implementation", "gloo")
  jax.distributed.initialize(f"127.0.0.1:{args.port}", 2, args.process_id)
  from jax.experimental import multihost_utils  # pylint: disable=g-import-not-at-top
  from jax.sharding import Mesh, NamedSharding, PartitionSpec  # pylint: disable=g-import-not-at-top
  from attnjax.runtime.checkpointing import Checkpointer, CheckpointRestoreError  # pylint: disable=g-import-not-at-top
  sharding = NamedSharding(Mesh(np.array(jax.devices()), ("data",)), PartitionSpec("data"))
  ckpt = Checkpointer(args.directory, keep=3, async_save=False)
  if args.phase == "save":
    for step in (4, 8):
      w = jax.make_array_from_callback((args.size,), sharding,
                                       lambda index, s=step: np.arange(args.size, dtype=np.float32)[index] + s)
      ckpt.save(step, {"w": w}, {"position": step}, force=True)
    ckpt.close()
    print(json.dumps({"saved": ckpt.steps()}))
    return
  out = {"step": 0, "w": None, "error": None}
  try:
    restored = ckpt.restore({"w": jax.ShapeDtypeStruct((args.size,), np.float32, sharding=sharding)})
    if restored is not None:
      state, _, out["step"], _ = restored
      gathered = multihost_utils.process_allgather(state["w"], tiled=True)
      out["w"] = np.asarray(gathered).tolist()
  except CheckpointRestoreError as e:
    out["error"] = str(e)
  ckpt.close()
  print(json.dumps(out))


if __name__ == "__main__":
  main()
