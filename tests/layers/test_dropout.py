"""attnjax.layers.dropout.Dropout: inverted dropout with counter-hash bits, against its definition."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from attnjax.layers.dropout import Dropout


def _apply(rate, x, seed=0, bits="hash", deterministic=False):
  return Dropout(rate, bits).apply({}, x, deterministic=deterministic, rngs={"dropout": jax.random.PRNGKey(seed)})


@pytest.mark.parametrize("bits", ["hash", "threefry"])
@pytest.mark.parametrize("rate", [0.1, 0.5])
def test_keeps_one_minus_rate_and_scales_the_kept(bits, rate):
  x = jnp.asarray(np.random.default_rng(0).uniform(1.0, 2.0, (8, 125, 100)), jnp.float32)  # 100k, all nonzero
  y = np.asarray(_apply(rate, x, bits=bits))
  kept = y != 0
  # binomial standard deviation sqrt(p(1-p)/n) <= 0.0016 for n = 100k: 4 sigma
  assert abs(kept.mean() - (1 - rate)) < 0.0064
  np.testing.assert_allclose(y[kept], np.asarray(x)[kept] / (1 - rate), rtol=1e-6)


def test_bits_are_uncorrelated_across_neighbours_and_calls():
  x = jnp.ones((64, 64, 64), jnp.float32)
  a = (np.asarray(_apply(0.5, x, seed=1)) != 0).astype(np.float64)
  b = (np.asarray(_apply(0.5, x, seed=2)) != 0).astype(np.float64)
  corr = lambda u, v: np.corrcoef(u.ravel(), v.ravel())[0, 1]
  for axis in range(3):  # each element against its neighbour along every axis
    n = a.shape[axis] - 1
    assert abs(corr(np.take(a, np.arange(n), axis), np.take(a, np.arange(1, n + 1), axis))) < 0.02
  assert abs(corr(a, b)) < 0.02  # another key, another mask
  np.testing.assert_array_equal(a, np.asarray(_apply(0.5, x, seed=1)) != 0)  # same key, same mask


def test_deterministic_and_rate_zero_are_the_identity_and_bad_bits_are_named():
  x = jnp.arange(12.0).reshape(3, 4)
  np.testing.assert_array_equal(_apply(0.3, x, deterministic=True), x)
  np.testing.assert_array_equal(_apply(0.0, x), x)
  with pytest.raises(ValueError, match="bits must be one of"):
    _apply(0.1, x, bits="philox")
