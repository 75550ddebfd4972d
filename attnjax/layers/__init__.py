"""Flax linen modules that own parameters and call :mod:`attnjax.kernels`."""
