"""The sharded train step on one device: gradient accumulation is exact, bfloat16 compute trains, donation works."""

import jax
import jax.numpy as jnp
import numpy as np

from attnjax.runtime import partitioning
from attnjax.training.loop import Experiment
from tests.training.run_steps import tiny_config


# one batch shape: one compilation of each train step, not one per bucket
ONE_SHAPE = {"data.bucket_boundaries": ()}


def _experiment(tmp_path, **changes):
  config = tiny_config((1, 1, 1))
  config.model.dropout_rate = 0.0
  config.model.attention_dropout_rate = 0.0
  for dotted, value in changes.items():
    section, key = dotted.split(".")
    config[section][key] = value
  return Experiment(config, str(tmp_path))


def _run(exp, n):
  losses = []
  for _ in range(n):
    batch = partitioning.global_batch(next(exp.train_batches), exp.mesh, exp.rules)
    exp.state, metrics = exp.train_step(exp.state, batch)
    losses.append(float(metrics["loss"]))
  params = jax.device_get(exp.state.params)
  exp.checkpointer.close()
  return losses, params


def test_gradient_accumulation_equals_one_large_batch(tmp_path):
  one_losses, one = _run(_experiment(tmp_path / "a", **ONE_SHAPE), 3)
  acc_losses, acc = _run(_experiment(tmp_path / "b", **ONE_SHAPE, **{"train.grad_accum_steps": 4}), 3)
  np.testing.assert_allclose(acc_losses, one_losses, rtol=1e-5)
  for (path, x), y in zip(jax.tree_util.tree_leaves_with_path(acc), jax.tree_util.tree_leaves(one)):
    name = jax.tree_util.keystr(path)
    if "['key']['bias']" in name:
      # q·(k_s + b) shifts every logit of a row by q·b: softmax ignores it, the exact gradient is 0, and Adam
      # (eps 1e-9) turns the float rounding left in its place into full-size steps. Nothing to compare.
      continue
    np.testing.assert_allclose(x, y, atol=2e-6, rtol=1e-4, err_msg=name)


def test_bfloat16_compute_trains_close_to_float32(tmp_path):
  f32_losses, _ = _run(_experiment(tmp_path / "a", **ONE_SHAPE), 8)
  exp = _experiment(tmp_path / "b", **ONE_SHAPE, **{"model.dtype": "bfloat16"})
  leaves = jax.tree_util.tree_leaves(exp.state.params)
  assert all(x.dtype == jnp.float32 for x in leaves)  # parameters stay float32; only the compute is bfloat16
  bf16_losses, _ = _run(exp, 8)
  assert np.isfinite(bf16_losses).all()
  np.testing.assert_allclose(bf16_losses, f32_losses, rtol=0.03)
  assert bf16_losses[-1] < bf16_losses[0]


def test_logged_training_loss_is_the_token_weighted_mean_of_the_window_not_its_last_step(tmp_path):
  """The same 6 steps logged every step and every 3 steps: each 3-step value must be the steps' losses weighted by
  their tokens (the batches of one bucket differ in real tokens), the learning rate the window's last, tokens summed."""
  from attnjax.report.tensorboard import read_scalars  # pylint: disable=g-import-not-at-top
  from attnjax.training.loop import train_and_evaluate  # pylint: disable=g-import-not-at-top
  logged = {}
  for every in (1, 3):
    config = tiny_config((1, 1, 1))
    t = config.train
    t.steps, t.log_every, t.eval_every, t.checkpoint_every = 6, every, 1000, 1000
    config.eval.decode, config.eval.num_decode_examples, config.eval.loss_batches, config.eval.batch_size = (
        "greedy", 4, 1, 8)  # the final evaluation, which the check does not read
    train_and_evaluate(config, str(tmp_path / str(every)))
    logged[every] = {tag: dict(values) for tag, values in read_scalars(tmp_path / str(every) / "tensorboard").items()}
  per_step, windows = logged[1], logged[3]
  assert sorted(per_step["train/loss"]) == list(range(1, 7)) and sorted(windows["train/loss"]) == [3, 6]
  tokens = np.array([per_step["train/tokens"][s] for s in range(1, 7)])
  assert np.unique(tokens).size > 1, "the check needs windows whose steps differ in tokens"
  for end in (3, 6):
    steps_in = range(end - 2, end + 1)
    w = np.array([per_step["train/tokens"][s] for s in steps_in])
    for key in ("loss", "nll"):
      values = np.array([per_step[f"train/{key}"][s] for s in steps_in])
      np.testing.assert_allclose(windows[f"train/{key}"][end], np.dot(w, values) / w.sum(), rtol=1e-5)
    assert windows["train/tokens"][end] == w.sum()
    np.testing.assert_allclose(windows["train/learning_rate"][end], per_step["train/learning_rate"][end])
    np.testing.assert_allclose(windows["train/grad_norm"][end],
                               np.mean([per_step["train/grad_norm"][s] for s in steps_in]), rtol=1e-5)


def test_mfu_is_stated_against_the_best_peak_measured_so_far(tmp_path, monkeypatch):
  """On a shared machine one matmul timing can land under load and understate the peak (the size sweep logged
  MFU 118%): the loop remeasures at each log step and states MFU against the best reading so far."""
  from attnjax.report.tensorboard import read_scalars  # pylint: disable=g-import-not-at-top
  from attnjax.training import loop  # pylint: disable=g-import-not-at-top
  readings = iter([4e9, 1e9, 9e9, 2e9, 3e9])  # start-up, then one per log step
  monkeypatch.setattr(loop, "measured_peak_flops", lambda: next(readings))
  config = tiny_config((1, 1, 1))
  t = config.train
  t.steps, t.log_every, t.eval_every, t.checkpoint_every = 4, 1, 1000, 1000
  config.data.bucket_boundaries = ()  # one batch shape: one compilation of the train step
  config.eval.decode, config.eval.num_decode_examples, config.eval.loss_batches, config.eval.batch_size = (
      "greedy", 4, 1, 8)  # the final evaluation, which the check does not read
  loop.train_and_evaluate(config, str(tmp_path))
  logged = {tag: dict(values) for tag, values in read_scalars(tmp_path / "tensorboard").items()}
  stated = {s: logged["train/model_flops_per_s"][s] / logged["train/mfu"][s] / jax.device_count() for s in range(1, 5)}
  np.testing.assert_allclose([stated[s] for s in range(1, 5)], [4e9, 9e9, 9e9, 9e9], rtol=1e-6)
