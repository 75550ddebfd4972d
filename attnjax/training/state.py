"""The train state and its sharded creation from logical axis names."""

from __future__ import annotations

from typing import Any

import flax.linen as nn
import flax.struct
import jax
import jax.numpy as jnp
import optax

from attnjax.training import partitioning


@flax.struct.dataclass
class TrainState:
  step: Any  # int32 scalar: optimizer updates applied so far
  params: Any
  opt_state: Any
  rng: Any  # uint32[2] base key; the dropout key of step s is fold_in(rng, s), so a resumed run draws the same masks


def init_batch(batch_size: int = 1, length: int = 8):
  """A tiny dummy batch for shape inference (parameters do not depend on batch or length)."""
  ids = jnp.full((batch_size, length), 3, jnp.int32)
  return ids, ids


def _init_params(model, rng):
  src, tgt = init_batch()
  return model.init({"params": rng, "dropout": rng}, src, tgt)["params"]


def state_shardings(model, tx, mesh, rules, rng):
  """(abstract TrainState, TrainState of NamedShardings) without allocating anything."""
  boxed = jax.eval_shape(lambda r: _init_params(model, r), rng)
  param_sharding = partitioning.logical_sharding(nn.get_partition_spec(boxed), mesh, rules)
  abstract = jax.eval_shape(lambda r: _make_state(model, tx, r), rng)
  replicated = partitioning.replicated(mesh)
  opt_sharding = optax.tree_map_params(tx, lambda _, s: s, abstract.opt_state, param_sharding,
                                       transform_non_params=lambda _: replicated)
  sharding = TrainState(step=replicated, params=param_sharding, opt_state=opt_sharding, rng=replicated)
  return abstract, sharding


def param_shardings(model, mesh, rules, seed: int = 0):
  """(abstract parameters, their NamedShardings) of ``model`` by its logical axis names, allocating nothing: what an
  evaluation restores the parameters alone into."""
  boxed = jax.eval_shape(lambda r: _init_params(model, r), jax.random.PRNGKey(seed))
  sharding = partitioning.logical_sharding(nn.get_partition_spec(boxed), mesh, rules)
  return nn.meta.unbox(boxed), sharding


def _make_state(model, tx, rng):
  params_rng, dropout_rng = jax.random.split(rng)
  params = nn.meta.unbox(_init_params(model, params_rng))
  return TrainState(step=jnp.zeros((), jnp.int32), params=params, opt_state=tx.init(params), rng=dropout_rng)


def create_train_state(model, tx, mesh, rules, seed: int):
  """Initialises the state directly into its shardings (no host ever holds the whole model)."""
  rng = jax.random.PRNGKey(seed)
  abstract, sharding = state_shardings(model, tx, mesh, rules, rng)
  state = jax.jit(lambda r: _make_state(model, tx, r), out_shardings=sharding)(rng)
  return state, sharding, abstract


def abstract_with_sharding(abstract, sharding):
  """ShapeDtypeStructs that carry their target sharding: what Orbax restores into (resharding if it differs)."""
  return jax.tree_util.tree_map(lambda a, s: jax.ShapeDtypeStruct(a.shape, a.dtype, sharding=s), abstract, sharding)
