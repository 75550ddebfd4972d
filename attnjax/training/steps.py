"""Sharded train and eval steps: ``jax.jit`` with in/out shardings and a donated state (the modern pjit).

Dropout keys are ``fold_in(fold_in(state.rng, step), micro_batch)`` of one global key: with JAX's partitionable
threefry the bits drawn for a global array do not depend on how it is sharded, so every device draws its own part of
the mask and 1 device, 8 devices or 2 hosts train identically.

A loss function ``loss_fn(model, params, batch, rng, deterministic) -> {"loss_sum", "nll_sum", "ntokens"}`` returns
sums over the batch, so that micro-batches, devices and hosts add up exactly before the one normalisation by
``ntokens``. Each task family has its own (:meth:`attnjax.families.base.TaskFamily.loss`): label-smoothed
cross-entropy over target tokens, the start/end pointer NLL with ``ntokens`` counting questions, the masked-LM loss
over masked tokens only with ``correct_sum``, the next-token loss of a language model. The default here is the
sequence-to-sequence one.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import optax

from attnjax.runtime import partitioning
from attnjax.training import optim

def batch_shardings(keys_and_ndims, mesh, rules):
  """``{key: NamedSharding}`` splitting every array of a batch along its first (batch) axis, from ``{key: ndim}``."""
  return {key: partitioning.batch_sharding(mesh, rules, ndim) for key, ndim in keys_and_ndims.items()}


def _split_micro(batch, k):
  """[B, ...] -> [k, B/k, ...] taking rows i::k, so each micro-batch keeps the batch's sharding (no data motion)."""
  def split(x):
    if x.shape[0] % k:
      raise ValueError(f"batch size {x.shape[0]} is not divisible by train.grad_accum_steps={k}")
    return jnp.swapaxes(x.reshape((x.shape[0] // k, k) + x.shape[1:]), 0, 1)
  return jax.tree_util.tree_map(split, batch)


def make_train_step(model, tx, schedule, *, loss_fn, state_sharding, mesh, rules, grad_accum_steps=1,
                    batch_sharding=None, ema_decay=None, ema_warmup=False):
  """Returns ``step(state, batch) -> (state, metrics)``, jit-compiled and sharded; ``state`` is donated. With a
  schedule tied to the time budget (:class:`attnjax.training.optim.BudgetSchedule`) it is ``step(state, batch,
  progress)``: ``progress`` the share of the budget used, a float32 scalar, and the update is scaled by the
  schedule's rate there (:func:`step_arguments` gives the trailing arguments either way).

  ``loss_fn``: see the module docstring (the task family's, :meth:`attnjax.families.base.TaskFamily.loss`).
  ``batch_sharding``: a sharding for every batch array, or a dict of them by key (:func:`batch_shardings`);
  default: every array is ``[batch, length]`` split along the batch. ``ema_decay``: the state's moving average of
  the parameters (it must have one) moves after the update, ``ema ← d · ema + (1 − d) · params``; with
  ``ema_warmup`` the decay of the update made after ``t`` others is ``min(d, (1 + t) / (10 + t))`` (TensorFlow's
  ``ExponentialMovingAverage(num_updates=...)``), so that a short run's average forgets its initial weights.
  """
  if ema_decay is not None and state_sharding.ema_params is None:
    raise ValueError("train.ema_decay: the train state has no moving average (create_train_state(..., ema=True))")

  budget = optim.needs_progress(schedule)

  def body(state, batch, progress):
    rng = jax.random.fold_in(state.rng, state.step)

    def grads_of(micro, i):
      def f(params):
        stats = loss_fn(model, params, micro, jax.random.fold_in(rng, i), False)
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
    if budget:  # the optimiser ran at rate 1: this step's rate from the share of the budget used
      rate = schedule(state.step, progress)
      updates = jax.tree_util.tree_map(lambda u: (u * rate).astype(u.dtype), updates)
    else:
      rate = schedule(state.step)
    params = optax.apply_updates(state.params, updates)
    average = state.ema_params
    if ema_decay is not None:
      d = ema_decay
      if ema_warmup:
        t = state.step.astype(jnp.float32)
        d = jnp.minimum(jnp.float32(ema_decay), (1.0 + t) / (10.0 + t))
      average = jax.tree_util.tree_map(lambda a, p: (d * a + (1.0 - d) * p).astype(a.dtype), average, params)
    metrics = {"loss": stats["loss_sum"] / ntokens, "nll": stats["nll_sum"] / ntokens, "ntokens": stats["ntokens"],
               **({"accuracy": stats["correct_sum"] / ntokens} if "correct_sum" in stats else {}),
               "grad_norm": optax.tree.norm(grads), "learning_rate": rate}
    return state.replace(step=state.step + 1, params=params, opt_state=opt_state, ema_params=average), metrics

  # one sharding for the whole batch dict (a pytree prefix), or one per key
  data = partitioning.batch_sharding(mesh, rules) if batch_sharding is None else batch_sharding
  replicated = partitioning.replicated(mesh)
  if budget:
    @partitioning.traced_in(mesh, rules)
    def step(state, batch, progress):
      return body(state, batch, progress)

    return jax.jit(step, in_shardings=(state_sharding, data, replicated), out_shardings=(state_sharding, replicated),
                   donate_argnums=(0,))

  @partitioning.traced_in(mesh, rules)
  def step(state, batch):  # pylint: disable=function-redefined
    return body(state, batch, None)

  return jax.jit(step, in_shardings=(state_sharding, data), out_shardings=(state_sharding, replicated),
                 donate_argnums=(0,))


def step_arguments(schedule, progress: float) -> tuple:
  """The train step's arguments after ``(state, batch)``: ``(progress,)`` as a float32 scalar for a schedule tied to
  the time budget, else none."""
  return (np.float32(progress),) if optim.needs_progress(schedule) else ()


def make_eval_step(model, *, loss_fn, state_sharding, mesh, rules, batch_sharding=None):
  """``eval_step(params, batch) -> {loss_sum, nll_sum, ntokens}`` (sums, so batches add up exactly)."""
  data = partitioning.batch_sharding(mesh, rules) if batch_sharding is None else batch_sharding

  @partitioning.traced_in(mesh, rules)
  def step(params, batch):
    return loss_fn(model, params, batch, None, True)

  return jax.jit(step, in_shardings=(state_sharding.params, data), out_shardings=partitioning.replicated(mesh))
