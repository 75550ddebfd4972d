"""Runs N train steps of a tiny config and prints the losses as JSON: the subject of the sharding tests.

    python -m tests.training.run_steps --mesh=4,1,2 --steps=20 [--process_id=0 --num_processes=2 --port=12345]
    python -m tests.training.run_steps --run=8,1,1:transformer --run=4,1,2:span_qa [--reshard_check] --steps=20

Run in its own process: the parent sets XLA_FLAGS=--xla_force_host_platform_device_count=N before JAX starts. Each
``--run=MESH:MODEL`` is one run of its own (its own Experiment and workdir) in this process, one after the other: one
start-up of JAX for several runs. Every run has one batch shape (one bucket), so its train step compiles once.
"""

import argparse
import json
import sys
import tempfile

import jax


def tiny_config(mesh_shape, model="transformer", data_dir=None):
  """A tiny config on the synthetic dates task, or (``model="span_qa"``, which needs ``data_dir``) on a SQuAD-format
  fixture written into ``data_dir``."""
  import ml_collections  # pylint: disable=g-import-not-at-top
  from attnjax.config import base_config  # pylint: disable=g-import-not-at-top
  config = base_config()
  config.data.train_examples = 512
  config.data.validation_examples = 64
  config.data.test_examples = 64
  config.data.max_tokens = None
  config.data.batch_size = 32
  config.data.bucket_boundaries = (24,)
  if model in ("transformer", "transformer_copy"):
    config.model = ml_collections.ConfigDict(dict(
        name="transformer", num_encoder_layers=1, num_decoder_layers=1, d_model=32, num_heads=4, d_ff=64,
        dropout_rate=0.1, attention_dropout_rate=0.1, shared_vocab=True, share_source_embeddings=True,
        copy=model == "transformer_copy"))
  elif model == "rnn_bahdanau":  # with See et al.'s copy and coverage: attention, the mixture and the coverage loss
    config.model = ml_collections.ConfigDict(dict(name="rnn_seq2seq", attention="bahdanau", embed_dim=16,
                                                  hidden_dim=32, dropout_rate=0.1, copy=True, coverage=True))
  elif model == "convs2s":
    config.model = ml_collections.ConfigDict(dict(name="convs2s", embed_dim=16, hidden_dim=32, encoder_layers=2,
                                                  decoder_layers=2, dropout_rate=0.1, max_length=64))
  elif model == "span_qa":  # the BERT-style encoder: its layers shard over the tensor axis like the Transformer's
    import os  # pylint: disable=g-import-not-at-top
    from tests.squad_fixture import synthetic_squad, write_squad  # pylint: disable=g-import-not-at-top
    write_squad(os.path.join(data_dir, "train.json"), synthetic_squad(300, seed=0, unanswerable=0.2))
    write_squad(os.path.join(data_dir, "dev.json"), synthetic_squad(20, seed=1, unanswerable=0.2))
    with config.data.unlocked():
      config.data.update(dict(source="squad_json", dir=data_dir, vocab_size=56, max_question_len=16,
                              max_context_len=64, splits={"train": "train.json", "validation": "dev.json"}))
    config.data.bucket_boundaries = (48,)
    config.model = ml_collections.ConfigDict(dict(name="span_qa", encoder="transformer", d_model=32, num_heads=4,
                                                  num_layers=1, d_ff=64, dropout_rate=0.1, max_length=96))
    config.train.label_smoothing = 0.0  # the span loss has none
  config.train.schedule = "constant"
  config.train.learning_rate = 1e-3
  config.train.warmup_steps = 5
  config.mesh.shape = tuple(mesh_shape)
  return config


def run(config, steps, workdir):
  """``(losses, mesh_devices)``: the loss of each step, and how many devices the trained parameters are on."""
  from attnjax.runtime import partitioning  # pylint: disable=g-import-not-at-top
  from attnjax.training.loop import Experiment  # pylint: disable=g-import-not-at-top
  exp = Experiment(config, workdir)
  losses = []
  for _ in range(steps):
    batch = partitioning.global_batch(next(exp.train_batches), exp.mesh, exp.rules)
    exp.state, metrics = exp.train_step(exp.state, batch)
    losses.append(float(metrics["loss"]))
  exp.checkpointer.close()
  devices = set().union(*(x.sharding.device_set for x in jax.tree_util.tree_leaves(exp.state.params)))
  return losses, len(devices)


def one_run(mesh, model, steps):
  """One run in a fresh workdir: ``{"mesh", "model", "losses", "mesh_devices"}``."""
  with tempfile.TemporaryDirectory() as workdir:
    config = tiny_config([int(x) for x in mesh.split(",")], model, data_dir=workdir)
    config.data.bucket_boundaries = None  # one batch shape: the train step compiles once
    losses, devices = run(config, steps, workdir)
  return {"mesh": mesh, "model": model, "losses": losses, "mesh_devices": devices}


def reshard_check(workdir):
  """Trains 5 steps on a data-parallel mesh, checkpoints, restores onto a data×tensor mesh: max |difference|."""
  import numpy as np  # pylint: disable=g-import-not-at-top
  from attnjax.training.loop import Experiment  # pylint: disable=g-import-not-at-top
  config = tiny_config((8, 1, 1))
  config.data.bucket_boundaries = None  # one batch shape: the train step compiles once
  config.train.steps = 5
  config.train.checkpoint_every = 5
  config.train.eval_every = 1000
  config.train.peak_tflops_per_device = 1.0  # skips the start-up matmul benchmark
  config.eval.decode, config.eval.num_decode_examples, config.eval.loss_batches = "greedy", 8, 1  # the final one
  from attnjax.training.loop import train_and_evaluate  # pylint: disable=g-import-not-at-top
  train_and_evaluate(config, workdir)
  saved = Experiment(config, workdir)
  saved.restore()
  reference = jax.device_get(saved.state.params)
  saved.checkpointer.close()
  config.mesh.shape = (2, 1, 4)
  other = Experiment(config, workdir)
  step = other.restore()
  diffs = [float(np.max(np.abs(np.asarray(a) - np.asarray(b))))
           for a, b in zip(jax.tree_util.tree_leaves(reference), jax.tree_util.tree_leaves(other.state.params))]
  specs = {str(x.sharding.spec) for x in jax.tree_util.tree_leaves(other.state.params)}
  other.checkpointer.close()
  return {"step": step, "max_diff": max(diffs), "mesh": dict(other.mesh.shape), "specs": sorted(specs)}


def main():
  parser = argparse.ArgumentParser()
  parser.add_argument("--mesh", default="1,1,1")
  parser.add_argument("--steps", type=int, default=20)
  parser.add_argument("--model", default="transformer")
  parser.add_argument("--process_id", type=int, default=None)
  parser.add_argument("--num_processes", type=int, default=None)
  parser.add_argument("--port", type=int, default=None)
  parser.add_argument("--run", action="append", default=[], help="MESH:MODEL, e.g. 4,1,2:span_qa; repeatable")
  parser.add_argument("--reshard_check", action="store_true")
  args = parser.parse_args()
  if args.run or args.reshard_check:
    out = {"runs": [one_run(*spec.split(":"), args.steps) for spec in args.run]}
    if args.reshard_check:
      with tempfile.TemporaryDirectory() as workdir:
        out["reshard_check"] = reshard_check(workdir)
    print(json.dumps({**out, "devices": jax.device_count(), "processes": jax.process_count()}))
    return
  if args.num_processes:
    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    jax.distributed.initialize(f"127.0.0.1:{args.port}", args.num_processes, args.process_id)
  result = one_run(args.mesh, args.model, args.steps)
  print(json.dumps({**result, "devices": jax.device_count(), "processes": jax.process_count()}))
  sys.stdout.flush()


if __name__ == "__main__":
  main()
