"""Sharded train and eval steps: ``jax.jit`` with in/out shardings and a donated state (the modern pjit).

Dropout keys are ``fold_in(fold_in(state.rng, step), micro_batch)`` of one global key: with JAX's partitionable
threefry the bits drawn for a global array do not depend on how it is sharded, so every device draws its own part of
the mask and 1 device, 8 devices or 2 hosts train identically.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import optax

from attnjax.training import partitioning
from attnjax.training.losses import smoothed_cross_entropy

BATCH_KEYS = ("src", "src_mask", "tgt_in", "tgt_out", "tgt_mask")
PACKED_KEYS = ("src_segment_ids", "tgt_segment_ids", "src_positions", "tgt_positions")


def _loss_stats(model, params, batch, rng, label_smoothing, deterministic):
  rngs = None if deterministic else {"dropout": rng}
  packed = {key: batch[key] for key in PACKED_KEYS if key in batch}  # packed rows (Transformer only)
  logits = model.apply({"params": params}, batch["src"], batch["tgt_in"], batch["src_mask"],
                       deterministic=deterministic, rngs=rngs, **packed)
  return smoothed_cross_entropy(logits, batch["tgt_out"], batch["tgt_mask"], label_smoothing)


def _split_micro(batch, k):
  """[B, ...] -> [k, B/k, ...] taking rows i::k, so each micro-batch keeps the batch's sharding (no data motion)."""
  def split(x):
    if x.shape[0] % k:
      raise ValueError(f"batch size {x.shape[0]} is not divisible by train.grad_accum_steps={k}")
    return jnp.swapaxes(x.reshape((x.shape[0] // k, k) + x.shape[1:]), 0, 1)
  return jax.tree_util.tree_map(split, batch)


def make_train_step(model, tx, schedule, *, state_sharding, mesh, rules, label_smoothing=0.0, grad_accum_steps=1):
  """Returns ``step(state, batch) -> (state, metrics)``, jit-compiled and sharded; ``state`` is donated."""

  def step(state, batch):
    rng = jax.random.fold_in(state.rng, state.step)

    def grads_of(micro, i):
      def f(params):
        stats = _loss_stats(model, params, micro, jax.random.fold_in(rng, i), label_smoothing, False)
        return stats["loss_sum"], stats
      (_, stats), grads = jax.value_and_grad(f, has_aux=True)(state.params)
      return grads, stats

    if grad_accum_steps == 1:
      grads, stats = grads_of(batch, 0)
    else:
      micro = _split_micro(batch, grad_accum_steps)

      def body(carry, xs):
        i, mb = xs
        g, s = grads_of(mb, i)
        return jax.tree_util.tree_map(jnp.add, carry, (g, s)), None

      zeros = jax.tree_util.tree_map(jnp.zeros_like, grads_of(jax.tree_util.tree_map(lambda x: x[0], micro), 0))
      (grads, stats), _ = jax.lax.scan(body, zeros, (jnp.arange(grad_accum_steps), micro))
    # sums over all real tokens of the global batch, normalised once: the mean token loss whatever the sharding
    ntokens = jnp.maximum(stats["ntokens"], 1.0)
    grads = jax.tree_util.tree_map(lambda g: g / ntokens, grads)
    updates, opt_state = tx.update(grads, state.opt_state, state.params)
    params = optax.apply_updates(state.params, updates)
    metrics = {"loss": stats["loss_sum"] / ntokens, "nll": stats["nll_sum"] / ntokens, "ntokens": stats["ntokens"],
               "grad_norm": optax.tree.norm(grads), "learning_rate": schedule(state.step)}
    return state.replace(step=state.step + 1, params=params, opt_state=opt_state), metrics

  data = partitioning.batch_sharding(mesh, rules)
  # one sharding for the whole batch dict (a pytree prefix): whichever keys it has are split along the batch axis
  return jax.jit(step, in_shardings=(state_sharding, data), out_shardings=(state_sharding, partitioning.replicated(mesh)),
                 donate_argnums=(0,))


def make_eval_step(model, *, state_sharding, mesh, rules, label_smoothing=0.0):
  """``eval_step(params, batch) -> {loss_sum, nll_sum, ntokens}`` (sums, so batches add up exactly)."""
  data = partitioning.batch_sharding(mesh, rules)

  def step(params, batch):
    return _loss_stats(model, params, batch, None, label_smoothing, True)

  return jax.jit(step, in_shardings=(state_sharding.params, data), out_shardings=partitioning.replicated(mesh))


def global_batch(local_batch, mesh, rules):
  """Host-local numpy rows → global sharded arrays (each process passes only its own rows)."""
  sharding = partitioning.batch_sharding(mesh, rules)
  out = {}
  for key in BATCH_KEYS + tuple(k for k in PACKED_KEYS if k in local_batch):
    local = local_batch[key]
    global_shape = (local.shape[0] * jax.process_count(),) + local.shape[1:]
    out[key] = jax.make_array_from_process_local_data(sharding, local, global_shape)
  return out
