"""The environment of a test's subprocess with N simulated CPU devices."""

import os


def cpu_devices_env(devices: int, **extra: str) -> dict[str, str]:
  """``os.environ`` for a subprocess on ``devices`` CPU devices: XLA_FLAGS keeps the flags the test session set
  (tests/conftest.py) and gains the device count."""
  flags = [f for f in os.environ.get("XLA_FLAGS", "").split() if "xla_force_host_platform_device_count" not in f]
  flags.append(f"--xla_force_host_platform_device_count={devices}")
  return dict(os.environ, JAX_PLATFORMS="cpu", XLA_FLAGS=" ".join(flags), **extra)
