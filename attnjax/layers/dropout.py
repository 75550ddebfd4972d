"""Dropout whose random bits come from a counter hash instead of threefry.

``Dropout(rate)(x, deterministic)`` is inverted dropout as ``flax.linen.Dropout`` does it (kept entries scaled by
1/(1-rate)), drawing one pair of uint32 seeds from the ``"dropout"`` stream per call and a keep bit per element from
a stateless hash of the element's index (the hash the attention dropout of :mod:`attnjax.kernels` uses): two integer
mixing rounds per element instead of threefry's twenty, measured with ``python -m benchmarks.step_profile``. The index
is the element's position in the global array, so the mask does not depend on how the array is sharded.
``bits="threefry"`` is Flax's own dropout.
"""

from __future__ import annotations

import flax.linen as nn
import jax
import jax.numpy as jnp

from attnjax.kernels.common import dropout_seeds, hash_keep

DROPOUT_BITS = ("hash", "threefry")


class Dropout(nn.Module):
  """Inverted dropout, keep bits from a counter hash (``bits="hash"``) or Flax's threefry (``"threefry"``)."""
  rate: float
  bits: str = "hash"

  @nn.compact
  def __call__(self, x, deterministic: bool):
    if self.bits not in DROPOUT_BITS:
      raise ValueError(f"bits must be one of {DROPOUT_BITS}, got {self.bits!r}")
    if deterministic or self.rate == 0.0:
      return x
    if self.rate >= 1.0:
      return jnp.zeros_like(x)
    if self.bits == "threefry":
      return nn.Dropout(self.rate, name="threefry")(x, deterministic=False)
    seeds = dropout_seeds(self.make_rng("dropout"))
    # row-major index (major, minor) = (all leading axes, last axis): no overflow below 2^32 rows and 2^32 columns
    rows = jax.lax.broadcasted_iota(jnp.uint32, x.shape, 0)
    for axis in range(1, x.ndim - 1):
      rows = rows * jnp.uint32(x.shape[axis]) + jax.lax.broadcasted_iota(jnp.uint32, x.shape, axis)
    columns = jax.lax.broadcasted_iota(jnp.uint32, x.shape, x.ndim - 1)
    keep = hash_keep(seeds, self.rate, rows, columns)
    return jnp.where(keep, x / jnp.asarray(1.0 - self.rate, x.dtype), jnp.zeros((), x.dtype))
