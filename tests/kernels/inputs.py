"""Random inputs shared by the local and linear attention tests (tests/kernels/test_local.py, test_linear.py)."""

import contextlib

import jax
import jax.numpy as jnp
import numpy as np


def rand(seed, *shapes, dtype=jnp.float32):
  rng = np.random.default_rng(seed)
  return [jnp.asarray(rng.normal(size=s), dtype) for s in shapes]


def kv_valid_with_padding(b, t, seed):
  """Right padding of random lengths, plus one sequence that is all padding."""
  rng = np.random.default_rng(seed)
  lengths = rng.integers(1, t + 1, size=b)
  lengths[-1] = 0
  return np.arange(t)[None, :] < lengths[:, None]


@contextlib.contextmanager
def enable_x64():
  if hasattr(jax, "enable_x64"):
    with jax.enable_x64(True):
      yield
  else:  # older JAX
    from jax.experimental import enable_x64 as experimental_enable_x64

    with experimental_enable_x64():
      yield
