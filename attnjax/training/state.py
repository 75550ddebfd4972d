"""The train state and its sharded creation from logical axis names."""

from __future__ import annotations

from typing import Any

import flax.linen as nn
import flax.struct
import jax
import jax.numpy as jnp
import optax

from attnjax.runtime import partitioning
from attnjax.runtime.params import init_params
from attnjax.training.optim import FusedUpdate


@flax.struct.dataclass
class TrainState:
  step: Any  # int32 scalar: optimizer updates applied so far
  params: Any
  opt_state: Any
  rng: Any  # uint32[2] base key; the dropout key of step s is fold_in(rng, s), so a resumed run draws the same masks
  # the parameters' exponential moving average (train.ema_decay), what evaluation reads; None without one (no
  # leaves: such a state and its checkpoints are those of a run that never had one)
  ema_params: Any = None

  @property
  def eval_params(self):
    """The parameters evaluation reads: the moving average where the run keeps one."""
    return self.params if self.ema_params is None else self.ema_params


def state_shardings(model, tx, mesh, rules, rng, ema: bool = False):
  """(abstract TrainState, TrainState of NamedShardings) without allocating anything; ``ema``: with the parameters'
  moving average, sharded as they are."""
  boxed = jax.eval_shape(lambda r: init_params(model, r), rng)
  param_sharding = partitioning.logical_sharding(nn.get_partition_spec(boxed), mesh, rules)
  abstract = jax.eval_shape(lambda r: _make_state(model, tx, r, ema), rng)
  replicated = partitioning.replicated(mesh)
  if isinstance(tx, FusedUpdate):  # one flat vector per group: replicated, as the parameters must be
    sharded = [s.spec for s in jax.tree_util.tree_leaves(param_sharding) if not s.is_fully_replicated]
    if sharded:
      raise ValueError(f"train.fused_update needs replicated parameters, but the mesh {dict(mesh.shape)} shards "
                       f"{len(sharded)} of them (first: {sharded[0]}): use a data-parallel mesh or "
                       "--config.train.fused_update=False")
    opt_sharding = jax.tree_util.tree_map(lambda _: replicated, abstract.opt_state)
  else:
    opt_sharding = optax.tree_map_params(tx, lambda _, s: s, abstract.opt_state, param_sharding,
                                         transform_non_params=lambda _: replicated)
  sharding = TrainState(step=replicated, params=param_sharding, opt_state=opt_sharding, rng=replicated,
                        ema_params=param_sharding if ema else None)
  return abstract, sharding


def _make_state(model, tx, rng, ema: bool = False):
  params_rng, dropout_rng = jax.random.split(rng)
  params = nn.meta.unbox(init_params(model, params_rng))
  # the average starts at the initial weights, kept in at least float32 (a bfloat16 average would not move at 0.999)
  average = jax.tree_util.tree_map(lambda p: p.astype(jnp.promote_types(p.dtype, jnp.float32)), params) if ema else None
  return TrainState(step=jnp.zeros((), jnp.int32), params=params, opt_state=tx.init(params), rng=dropout_rng,
                    ema_params=average)


def create_train_state(model, tx, mesh, rules, seed: int, ema: bool = False):
  """Initialises the state directly into its shardings (no host ever holds the whole model); ``ema``: with a moving
  average of the parameters (``train.ema_decay``)."""
  rng = jax.random.PRNGKey(seed)
  abstract, sharding = state_shardings(model, tx, mesh, rules, rng, ema)
  state = jax.jit(lambda r: _make_state(model, tx, r, ema), out_shardings=sharding)(rng)
  return state, sharding, abstract


def abstract_with_sharding(abstract, sharding):
  """ShapeDtypeStructs that carry their target sharding: what Orbax restores into (resharding if it differs)."""
  return jax.tree_util.tree_map(lambda a, s: jax.ShapeDtypeStruct(a.shape, a.dtype, sharding=s), abstract, sharding)
