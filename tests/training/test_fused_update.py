"""``train.fused_update``: the optimiser over one flat vector per group of parameters computes what the per-leaf
optimiser computes (optax's own, the independent reference), keeps weight decay on the matrices only, lives in the
train state and its checkpoint, and refuses sharded parameters by name."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import optax
import pytest

from attnjax.training.optim import FusedUpdate, make_optimizer
from tests.devices import cpu_devices_env

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _train_cfg(**overrides):
  cfg = dict(schedule="linear", learning_rate=1e-2, warmup_steps=2, steps=10, grad_clip_norm=0.5,
             optimizer="adam", adam_b1=0.9, adam_b2=0.98, adam_eps=1e-9, weight_decay=0.1, fused_update=False)
  cfg.update(overrides)
  return ml_collections.ConfigDict(cfg)


def _params():
  rng = np.random.default_rng(0)
  return {"dense": {"kernel": jnp.asarray(rng.normal(size=(3, 4)), jnp.float32),
                    "bias": jnp.asarray(rng.normal(size=(4,)), jnp.float32)},
          "embed": jnp.asarray(rng.normal(size=(5, 3)), jnp.float32),
          "scale": jnp.asarray(rng.normal(size=(3,)), jnp.bfloat16)}


def _run(tx, params, grads_seq):
  state = tx.init(params)
  for grads in grads_seq:
    updates, state = tx.update(grads, state, params)
    params = optax.apply_updates(params, updates)
  return params, state


@pytest.mark.parametrize("optimizer,weight_decay,clip", [("adam", 0.1, 0.5), ("adam", 0.0, 0.0), ("sgd", 0.0, 1.0),
                                                         ("adagrad", 0.0, 0.0)])
def test_the_fused_update_equals_the_per_leaf_optimiser_over_steps(optimizer, weight_decay, clip):
  params = _params()
  rng = np.random.default_rng(1)
  grads_seq = [jax.tree_util.tree_map(lambda p: jnp.asarray(rng.normal(size=p.shape), p.dtype), params)
               for _ in range(4)]
  per_leaf, _ = make_optimizer(_train_cfg(optimizer=optimizer, weight_decay=weight_decay, grad_clip_norm=clip))
  fused, _ = make_optimizer(_train_cfg(optimizer=optimizer, weight_decay=weight_decay, grad_clip_norm=clip,
                                       fused_update=True))
  assert isinstance(fused, FusedUpdate) and not isinstance(per_leaf, FusedUpdate)
  want, _ = _run(per_leaf, params, grads_seq)
  got, state = _run(fused, params, grads_seq)
  for path, w in jax.tree_util.tree_leaves_with_path(want):
    g = dict(jax.tree_util.tree_leaves_with_path(got))[path]
    assert g.dtype == w.dtype and g.shape == w.shape
    np.testing.assert_allclose(np.asarray(g, np.float32), np.asarray(w, np.float32),
                               rtol=1e-2 if w.dtype == jnp.bfloat16 else 1e-6, atol=1e-7, err_msg=str(path))
  # the state: one vector per group, together as long as the parameters
  if optimizer == "adam":
    mu = state[-1][0].mu
    assert all(v.ndim == 1 for v in mu.values()) and sum(v.size for v in mu.values()) == 3 * 4 + 4 + 5 * 3 + 3


def test_weight_decay_reaches_the_matrices_only_in_the_flat_layout():
  params = _params()
  zero = jax.tree_util.tree_map(jnp.zeros_like, params)
  tx, schedule = make_optimizer(_train_cfg(fused_update=True, grad_clip_norm=0.0))
  after, state = _run(tx, params, [zero, zero])
  assert sorted(state[0][0].mu) == ["bfloat16_plain", "float32_decayed", "float32_plain"]
  lr = [float(schedule(i)) for i in range(2)]
  shrink = (1 - 0.1 * lr[0]) * (1 - 0.1 * lr[1])  # AdamW: p -= lr * wd * p; Adam's own step is 0 for zero grads
  np.testing.assert_allclose(after["dense"]["kernel"], shrink * params["dense"]["kernel"], rtol=1e-6)
  np.testing.assert_allclose(after["embed"], shrink * params["embed"], rtol=1e-6)
  np.testing.assert_array_equal(after["dense"]["bias"], params["dense"]["bias"])
  np.testing.assert_array_equal(after["scale"], params["scale"])


def test_a_transformer_train_step_and_its_checkpoint_with_the_fused_update(tmp_path):
  import orbax.checkpoint as ocp  # pylint: disable=g-import-not-at-top
  from attnjax.config import base_config  # pylint: disable=g-import-not-at-top
  from attnjax.models.registry import build_model  # pylint: disable=g-import-not-at-top
  from attnjax.runtime import partitioning  # pylint: disable=g-import-not-at-top
  from attnjax.families.seq2seq import seq2seq_loss_stats  # pylint: disable=g-import-not-at-top
  from attnjax.training import steps as steps_lib  # pylint: disable=g-import-not-at-top
  from attnjax.training.state import abstract_with_sharding, create_train_state  # pylint: disable=g-import-not-at-top
  config = base_config()
  config.model.update(num_encoder_layers=1, num_decoder_layers=1, d_model=32, num_heads=2, d_ff=64)
  config.train.weight_decay = 0.01
  # The two layouts are two XLA programs, so a gradient may differ by a few float32 roundings (dg <= ~1e-6 here).
  # Adam's step lr·g/(|g|+eps) moves by at most lr·dg/eps: with the default eps of 1e-9 an entry whose gradient is at
  # rounding level (a bias no loss term reaches in 3 steps) can flip its whole step; with eps 1e-4 the 3 steps' lr
  # (sum ~4e-5, the rsqrt warmup) move an entry by at most ~4e-5·1e-6/1e-4 = 4e-7 < the 2e-6 asserted.
  config.train.adam_eps = 1e-4
  model = build_model(config.model.to_dict(), src_vocab_size=64, tgt_vocab_size=64)
  mesh = partitioning.create_mesh(config.mesh.axes, (1, 1, 1), devices=jax.devices()[:1])
  rng = np.random.default_rng(0)
  batch = {k: rng.integers(4, 64, size=(2, 8)).astype(np.int32) for k in ("src", "tgt_in", "tgt_out")}
  batch["src_mask"] = batch["tgt_mask"] = np.ones((2, 8), bool)
  out = {}
  for fused in (False, True):
    config.train.fused_update = fused
    tx, schedule = make_optimizer(config.train, 32)
    state, sharding, abstract = create_train_state(model, tx, mesh, config.mesh.rules, seed=0)
    step = steps_lib.make_train_step(model, tx, schedule, state_sharding=sharding, mesh=mesh, rules=config.mesh.rules,
                                     loss_fn=seq2seq_loss_stats)
    for _ in range(3):
      state, metrics = step(state, jax.device_put(batch, partitioning.batch_sharding(mesh, config.mesh.rules)))
    out[fused] = (state, metrics)
  for a, b in zip(jax.tree_util.tree_leaves(out[False][0].params), jax.tree_util.tree_leaves(out[True][0].params)):
    np.testing.assert_allclose(np.asarray(b), np.asarray(a), rtol=2e-5, atol=2e-6)
  assert float(out[True][1]["grad_norm"]) == pytest.approx(float(out[False][1]["grad_norm"]), rel=1e-5)
  state = out[True][0]
  with ocp.StandardCheckpointer() as ckpt:
    ckpt.save(tmp_path / "state", state.opt_state)
  with ocp.StandardCheckpointer() as ckpt:
    restored = ckpt.restore(tmp_path / "state", abstract_with_sharding(abstract.opt_state, sharding.opt_state))
  for a, b in zip(jax.tree_util.tree_leaves(state.opt_state), jax.tree_util.tree_leaves(restored)):
    np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def test_sharded_parameters_are_refused_by_name():
  script = textwrap.dedent("""
      import jax, ml_collections
      from attnjax.config import base_config
      from attnjax.models.registry import build_model
      from attnjax.runtime import partitioning
      from attnjax.training.optim import make_optimizer
      from attnjax.training.state import state_shardings
      config = base_config()
      config.model.update(num_encoder_layers=1, num_decoder_layers=1, d_model=32, num_heads=2, d_ff=64)
      config.train.fused_update = True
      model = build_model(config.model.to_dict(), src_vocab_size=64, tgt_vocab_size=64)
      mesh = partitioning.create_mesh(config.mesh.axes, (1, 2, 1), devices=jax.devices()[:2])
      tx, _ = make_optimizer(config.train, 32)
      try:
        state_shardings(model, tx, mesh, config.mesh.rules, jax.random.PRNGKey(0))
      except ValueError as e:
        print("ERROR:", e)
      """)
  env = cpu_devices_env(2)
  proc = subprocess.run([sys.executable, "-c", script], cwd=ROOT, env=env, capture_output=True, text=True,
                        timeout=300)
  assert "ERROR: train.fused_update needs replicated parameters, but the mesh" in proc.stdout, proc.stderr[-2000:]
  assert "--config.train.fused_update=False" in proc.stdout
