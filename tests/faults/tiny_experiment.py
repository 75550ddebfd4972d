"""The experiment the fault-injection harness trains: tests/training's tiny Transformer on the synthetic dates task,
cut to a few seconds of steps, with checkpoints and cross-host sync points every few steps so that faults land
between, on and inside them."""

from tests.training.run_steps import tiny_config


def get_config():
  config = tiny_config((-1, 1, 1))  # one data-parallel axis over the devices of every process
  config.data.train_examples = 256
  config.data.validation_examples = 16
  config.data.test_examples = 16
  config.data.batch_size = 16
  config.data.bucket_boundaries = None  # one batch shape: one compilation of the train step
  t = config.train
  t.steps = 24
  t.log_every = 4
  t.sync_every = 2
  t.checkpoint_every = 4
  t.eval_every = 1000  # the only evaluation is the final one
  t.keep_checkpoints = 2
  t.best_metric = "loss"
  t.best_mode = "min"
  t.peak_tflops_per_device = 1.0  # skips the start-up matmul benchmark
  e = config.eval
  e.decode = "greedy"
  e.num_decode_examples = 4
  e.loss_batches = 1
  e.batch_size = 4
  return config
