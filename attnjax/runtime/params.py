"""A model's parameters by shape and sharding, allocating nothing: what training creates its state from and what an
evaluation restores the parameters alone into."""

from __future__ import annotations

import flax.linen as nn
import jax
import jax.numpy as jnp

from attnjax.runtime import partitioning


def init_batch(batch_size: int = 1, length: int = 8):
  """A tiny dummy batch for shape inference (parameters do not depend on batch or length)."""
  ids = jnp.full((batch_size, length), 3, jnp.int32)
  return ids, ids


def init_params(model, rng):
  """The model's (boxed, logically annotated) parameters from ``rng``."""
  src, tgt = init_batch()
  return model.init({"params": rng, "dropout": rng}, src, tgt)["params"]


def param_shardings(model, mesh, rules, seed: int = 0):
  """(abstract parameters, their NamedShardings) of ``model`` by its logical axis names, allocating nothing: what an
  evaluation restores the parameters alone into."""
  boxed = jax.eval_shape(lambda r: init_params(model, r), jax.random.PRNGKey(seed))
  sharding = partitioning.logical_sharding(nn.get_partition_spec(boxed), mesh, rules)
  return nn.meta.unbox(boxed), sharding
