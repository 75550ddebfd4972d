"""Shared test fixtures. Tests run on CPU; multi-device tests set XLA_FLAGS in their own subprocess."""

import contextlib
import os

# libtpu is installed for the compile tool's TPU topologies: keep every test process (and its subprocesses) on the
# CPU instead of probing for TPU chips at start-up
os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax  # pylint: disable=g-import-not-at-top,wrong-import-position
import numpy as np
import pytest


@contextlib.contextmanager
def _x64():
  previous = jax.config.jax_enable_x64
  jax.config.update("jax_enable_x64", True)
  try:
    yield
  finally:
    jax.config.update("jax_enable_x64", previous)


@pytest.fixture
def x64():
  """Runs a test in float64, for tight numerical-gradient checks."""
  with _x64():
    yield


@pytest.fixture
def rng():
  return np.random.default_rng(0)
