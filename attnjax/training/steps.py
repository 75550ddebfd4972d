"""Sharded train and eval steps: ``jax.jit`` with in/out shardings and a donated state (the modern pjit).

Dropout keys are ``fold_in(fold_in(state.rng, step), micro_batch)`` of one global key: with JAX's partitionable
threefry the bits drawn for a global array do not depend on how it is sharded, so every device draws its own part of
the mask and 1 device, 8 devices or 2 hosts train identically.

A loss function ``loss_fn(model, params, batch, rng, deterministic) -> {"loss_sum", "nll_sum", "ntokens"}`` returns
sums over the batch, so that micro-batches, devices and hosts add up exactly before the one normalisation by
``ntokens``: :func:`seq2seq_loss_stats` (label-smoothed cross-entropy over target tokens) and
:func:`span_loss_stats` (start/end pointer NLL, ``ntokens`` counting questions) and :func:`mlm_loss_stats` (masked
tokens only, with ``correct_sum``).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import optax

import functools

from attnjax.data.pipeline import HOST_ONLY_KEYS
from attnjax.models.bert import mlm_statistics
from attnjax.models.lm import lm_statistics
from attnjax.models.span_qa import span_nll
from attnjax.runtime import partitioning
from attnjax.training.losses import smoothed_cross_entropy

BATCH_KEYS = ("src", "src_mask", "tgt_in", "tgt_out", "tgt_mask")
PACKED_KEYS = ("src_segment_ids", "tgt_segment_ids", "src_positions", "tgt_positions")
SPAN_BATCH_KEYS = ("question", "question_mask", "context", "context_mask", "start_positions", "end_positions",
                   "is_impossible", "weights")
SPAN_BATCH_NDIMS = {**{key: 2 for key in SPAN_BATCH_KEYS[:4]}, **{key: 1 for key in SPAN_BATCH_KEYS[4:]}}


def seq2seq_loss_stats(model, params, batch, rng, deterministic, *, label_smoothing=0.0, vocab_size=None):
  """Label-smoothed cross-entropy, plus any per-token auxiliary loss ``[B, T]`` the model sows into its ``"losses"``
  collection (See et al.'s coverage loss), summed under the target mask into ``loss_sum`` (``nll_sum`` stays the
  NLL)."""
  rngs = None if deterministic else {"dropout": rng}
  packed = {key: batch[key] for key in PACKED_KEYS if key in batch}  # packed rows (Transformer only)
  logits, sown = model.apply({"params": params}, batch["src"], batch["tgt_in"], batch["src_mask"],
                             deterministic=deterministic, rngs=rngs, mutable=["losses"], **packed)
  stats = smoothed_cross_entropy(logits, batch["tgt_out"], batch["tgt_mask"], label_smoothing, vocab_size)
  weights = batch["tgt_mask"].astype(jnp.float32)
  for aux in jax.tree_util.tree_leaves(sown.get("losses", {})):
    stats["loss_sum"] = stats["loss_sum"] + jnp.sum(aux * weights)
  return stats


def span_loss_stats(model, params, batch, rng, deterministic):
  """Sums of :func:`attnjax.models.span_qa.span_nll` over the batch's questions (``weights`` 0 drops filler rows);
  ``ntokens`` is the number of questions, so the step's loss is the mean per question."""
  rngs = None if deterministic else {"dropout": rng}
  outputs = model.apply({"params": params}, batch["question"], batch["context"], batch["question_mask"],
                        batch["context_mask"], deterministic=deterministic, rngs=rngs)
  impossible = batch["is_impossible"] if "no_answer_logit" in outputs else None
  nll = span_nll(outputs, batch["start_positions"], batch["end_positions"], impossible)
  weights = batch["weights"].astype(jnp.float32)
  total = jnp.sum(nll * weights)
  return {"loss_sum": total, "nll_sum": total, "ntokens": jnp.sum(weights)}


def mlm_loss_stats(model, params, batch, rng, deterministic):
  """BERT's masked-LM loss: cross-entropy at the masked positions only (``mlm_weights`` 0 pads), summed;
  ``ntokens`` is the number of predictions and ``correct_sum`` how many the argmax gets right."""
  rngs = None if deterministic else {"dropout": rng}
  logits = model.apply({"params": params}, batch["input_ids"], batch["segment_ids"], batch["positions"],
                       batch["mlm_positions"], deterministic=deterministic, rngs=rngs)  # [B, P, V]
  return mlm_statistics(logits, batch["mlm_ids"], batch["mlm_weights"])


def lm_loss_stats(model, params, batch, rng, deterministic):
  """The language model's next-token cross-entropy over the weighted targets of packed rows."""
  rngs = None if deterministic else {"dropout": rng}
  logits = model.apply({"params": params}, batch["inputs"], batch["segment_ids"], batch["positions"],
                       deterministic=deterministic, rngs=rngs)
  return lm_statistics(logits, batch["targets"], batch["weights"])


def batch_shardings(keys_and_ndims, mesh, rules):
  """``{key: NamedSharding}`` splitting every array of a batch along its first (batch) axis, from ``{key: ndim}``."""
  return {key: partitioning.batch_sharding(mesh, rules, ndim) for key, ndim in keys_and_ndims.items()}


def _default_loss(loss_fn, label_smoothing):
  if loss_fn is None:
    return functools.partial(seq2seq_loss_stats, label_smoothing=label_smoothing)
  if label_smoothing:
    raise ValueError("label_smoothing applies to the default (seq2seq) loss; bind it into loss_fn instead")
  return loss_fn


def _split_micro(batch, k):
  """[B, ...] -> [k, B/k, ...] taking rows i::k, so each micro-batch keeps the batch's sharding (no data motion)."""
  def split(x):
    if x.shape[0] % k:
      raise ValueError(f"batch size {x.shape[0]} is not divisible by train.grad_accum_steps={k}")
    return jnp.swapaxes(x.reshape((x.shape[0] // k, k) + x.shape[1:]), 0, 1)
  return jax.tree_util.tree_map(split, batch)


def make_train_step(model, tx, schedule, *, state_sharding, mesh, rules, label_smoothing=0.0, grad_accum_steps=1,
                    loss_fn=None, batch_sharding=None):
  """Returns ``step(state, batch) -> (state, metrics)``, jit-compiled and sharded; ``state`` is donated.

  ``loss_fn``: see the module docstring (default: :func:`seq2seq_loss_stats` with ``label_smoothing``).
  ``batch_sharding``: a sharding for every batch array, or a dict of them by key (:func:`batch_shardings`);
  default: every array is ``[batch, length]`` split along the batch.
  """
  loss_fn = _default_loss(loss_fn, label_smoothing)

  @partitioning.traced_in(mesh, rules)
  def step(state, batch):
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
    params = optax.apply_updates(state.params, updates)
    metrics = {"loss": stats["loss_sum"] / ntokens, "nll": stats["nll_sum"] / ntokens, "ntokens": stats["ntokens"],
               **({"accuracy": stats["correct_sum"] / ntokens} if "correct_sum" in stats else {}),
               "grad_norm": optax.tree.norm(grads), "learning_rate": schedule(state.step)}
    return state.replace(step=state.step + 1, params=params, opt_state=opt_state), metrics

  # one sharding for the whole batch dict (a pytree prefix), or one per key
  data = partitioning.batch_sharding(mesh, rules) if batch_sharding is None else batch_sharding
  return jax.jit(step, in_shardings=(state_sharding, data),
                 out_shardings=(state_sharding, partitioning.replicated(mesh)), donate_argnums=(0,))


def make_eval_step(model, *, state_sharding, mesh, rules, label_smoothing=0.0, loss_fn=None, batch_sharding=None):
  """``eval_step(params, batch) -> {loss_sum, nll_sum, ntokens}`` (sums, so batches add up exactly)."""
  loss_fn = _default_loss(loss_fn, label_smoothing)
  data = partitioning.batch_sharding(mesh, rules) if batch_sharding is None else batch_sharding

  @partitioning.traced_in(mesh, rules)
  def step(params, batch):
    return loss_fn(model, params, batch, None, True)

  return jax.jit(step, in_shardings=(state_sharding.params, data), out_shardings=partitioning.replicated(mesh))


def global_batch(local_batch, mesh, rules):
  """Host-local numpy rows → global arrays split along the batch axis (each process passes only its own rows).

  Every array of the batch goes, except the host-side bookkeeping in ``HOST_ONLY_KEYS``.
  """
  out = {}
  for key in sorted(local_batch):
    if key in HOST_ONLY_KEYS:
      continue
    local = local_batch[key]
    sharding = partitioning.batch_sharding(mesh, rules, local.ndim)
    global_shape = (local.shape[0] * jax.process_count(),) + local.shape[1:]
    out[key] = jax.make_array_from_process_local_data(sharding, local, global_shape)
  return out
