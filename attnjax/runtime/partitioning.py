"""Device meshes and logical axis rules: sharding by name (as in MaxText / the Flax lm1b example).

Parameters carry logical axis names (``embed``, ``heads``, ``kv``, ``mlp``, ``vocab``) from
``nn.with_logical_partitioning`` in the layers; batches carry ``batch`` and ``length``. The config maps each logical
name to mesh axes, e.g. ``("batch", ("data", "fsdp"))``, ``("mlp", "tensor")``, ``("embed", "fsdp")``: data
parallelism, FSDP and tensor parallelism are then choices in the config, never edits to the model.
"""

from __future__ import annotations

import contextlib
import functools
import math
from typing import Sequence

import flax.linen as nn
import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from attnjax.data.pipeline import HOST_ONLY_KEYS
from attnjax.kernels import fused


def mesh_shape(axis_sizes: Sequence[int], num_devices: int) -> tuple[int, ...]:
  """Resolves one ``-1`` in ``axis_sizes`` to the devices left over; checks the product."""
  sizes = list(axis_sizes)
  if sizes.count(-1) > 1:
    raise ValueError(f"mesh.shape may contain at most one -1, got {tuple(axis_sizes)}")
  known = math.prod(s for s in sizes if s != -1)
  if any(s == 0 or s < -1 for s in sizes) or num_devices % known:
    raise ValueError(f"mesh.shape {tuple(axis_sizes)} does not divide the {num_devices} devices")
  if -1 in sizes:
    sizes[sizes.index(-1)] = num_devices // known
  return tuple(sizes)


def create_mesh(axis_names: Sequence[str], axis_sizes: Sequence[int], devices=None) -> Mesh:
  """A mesh over all (or the given) devices; ``-1`` in ``axis_sizes`` takes the rest; without a ``-1`` the product
  of ``axis_sizes`` may be smaller than the number of devices (the first ones are used).

  Uses ``jax.experimental.mesh_utils`` so that on TPU the axes follow the physical torus (fast collectives on the
  innermost axes); on CPU/GPU that reduces to a reshape.
  """
  devices = jax.devices() if devices is None else list(devices)
  if len(axis_names) != len(axis_sizes):
    raise ValueError(f"mesh.axes {tuple(axis_names)} and mesh.shape {tuple(axis_sizes)} differ in length")
  shape = mesh_shape(axis_sizes, len(devices))
  # A mesh smaller than the machine (e.g. 1 of 8 devices, for a comparison run) takes the first devices.
  devices = devices[:math.prod(shape)]
  try:
    from jax.experimental import mesh_utils  # pylint: disable=g-import-not-at-top
    grid = mesh_utils.create_device_mesh(shape, devices=devices)
  except (ValueError, NotImplementedError, AssertionError):
    grid = np.asarray(devices).reshape(shape)
  return Mesh(grid, tuple(axis_names))


def logical_sharding(logical_specs, mesh: Mesh, rules):
  """Tree of ``PartitionSpec`` over logical names → tree of ``NamedSharding`` on ``mesh``."""
  return nn.logical_to_mesh_sharding(logical_specs, mesh, [tuple(r) for r in rules])


def batch_sharding(mesh: Mesh, rules, ndim: int = 2) -> NamedSharding:
  """Sharding of a ``[batch]``, ``[batch, length]`` or ``[batch, length, ...]`` input array."""
  names = (("batch", "length") + (None,) * max(ndim - 2, 0))[:ndim]
  spec = nn.logical_to_mesh_axes(names, [tuple(r) for r in rules])
  return NamedSharding(mesh, spec)


def replicated(mesh: Mesh) -> NamedSharding:
  return NamedSharding(mesh, PartitionSpec())


def data_parallel_size(mesh: Mesh, rules) -> int:
  """How many ways the batch axis is split (the global batch must be a multiple)."""
  spec = batch_sharding(mesh, rules).spec[0]
  axes = () if spec is None else (spec if isinstance(spec, tuple) else (spec,))
  return math.prod(mesh.shape[a] for a in axes)


@contextlib.contextmanager
def tracing(mesh: Mesh, rules):
  """Context for tracing a step: the logical axis rules for Flax (``nn.logical_to_mesh_axes`` in the layers) and
  the mesh for kernels that are not partitioned automatically (Pallas splash attention runs in ``shard_map``).
  Python state only, so it is entered inside the jitted function."""
  with nn.logical_axis_rules([tuple(r) for r in rules]), fused.attention_mesh(mesh):
    yield


def traced_in(mesh: Mesh, rules):
  """Decorator: the function runs (is traced) inside :func:`tracing`."""
  def wrap(fn):
    @functools.wraps(fn)
    def wrapped(*args, **kwargs):
      with tracing(mesh, rules):
        return fn(*args, **kwargs)
    return wrapped
  return wrap


def global_batch(local_batch, mesh, rules):
  """Host-local numpy rows → global arrays split along the batch axis (each process passes only its own rows).

  Every array of the batch goes, except the host-side bookkeeping in ``HOST_ONLY_KEYS``.
  """
  out = {}
  for key in sorted(local_batch):
    if key in HOST_ONLY_KEYS:
      continue
    local = local_batch[key]
    sharding = batch_sharding(mesh, rules, local.ndim)
    global_shape = (local.shape[0] * jax.process_count(),) + local.shape[1:]
    out[key] = jax.make_array_from_process_local_data(sharding, local, global_shape)
  return out
