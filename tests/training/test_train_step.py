"""The sharded train step on one device: gradient accumulation is exact, bfloat16 compute trains, donation works."""

import jax
import jax.numpy as jnp
import numpy as np

from attnjax.training import steps
from attnjax.training.loop import Experiment
from tests.training.run_steps import tiny_config


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
    batch = steps.global_batch(next(exp.train_batches), exp.mesh, exp.rules)
    exp.state, metrics = exp.train_step(exp.state, batch)
    losses.append(float(metrics["loss"]))
  params = jax.device_get(exp.state.params)
  exp.checkpointer.close()
  return losses, params


def test_gradient_accumulation_equals_one_large_batch(tmp_path):
  one_losses, one = _run(_experiment(tmp_path / "a"), 3)
  acc_losses, acc = _run(_experiment(tmp_path / "b", **{"train.grad_accum_steps": 4}), 3)
  np.testing.assert_allclose(acc_losses, one_losses, rtol=1e-5)
  for (path, x), y in zip(jax.tree_util.tree_leaves_with_path(acc), jax.tree_util.tree_leaves(one)):
    name = jax.tree_util.keystr(path)
    if "['key']['bias']" in name:
      # q·(k_s + b) shifts every logit of a row by q·b: softmax ignores it, the exact gradient is 0, and Adam
      # (eps 1e-9) turns the float rounding left in its place into full-size steps. Nothing to compare.
      continue
    np.testing.assert_allclose(x, y, atol=2e-6, rtol=1e-4, err_msg=name)


def test_bfloat16_compute_trains_close_to_float32(tmp_path):
  f32_losses, _ = _run(_experiment(tmp_path / "a"), 8)
  exp = _experiment(tmp_path / "b", **{"model.dtype": "bfloat16"})
  leaves = jax.tree_util.tree_leaves(exp.state.params)
  assert all(x.dtype == jnp.float32 for x in leaves)  # parameters stay float32; only the compute is bfloat16
  bf16_losses, _ = _run(exp, 8)
  assert np.isfinite(bf16_losses).all()
  np.testing.assert_allclose(bf16_losses, f32_losses, rtol=0.03)
  assert bf16_losses[-1] < bf16_losses[0]
