"""Accelerator-native attention, and the choice behind ``implementation="auto"``.

* ``"pallas_tpu"``: the Pallas TPU splash attention kernel that JAX ships
  (``jax.experimental.pallas.ops.tpu.splash_attention``), a flash-attention forward and backward over a static
  causal or full mask and per-token segment ids. Mosaic kernels are not partitioned automatically, so under a mesh
  (``jax.set_mesh``) the kernel runs inside ``jax.shard_map``, batch and heads split as the caller's ``spec`` says.
* ``"cudnn"``: ``jax.nn.dot_product_attention(..., implementation="cudnn")``, cuDNN's fused attention on GPU.

Padding and packing reach the fused kernels as **segment ids** (``q_segment_ids [B, T]``, ``kv_segment_ids [B, S]``,
int): query t may attend key s iff ``kv_segment_ids[s] != 0`` and ``q_segment_ids[t] == kv_segment_ids[s]``; a query
whose segment id is 0 attends nothing and gets zeros, as a fully masked row does in the other implementations. Key
padding alone is ``q_segment_ids = 1`` everywhere and ``kv_segment_ids = key mask``; packed rows use the packing
segment ids on both sides. :func:`segment_ids_mask` is the same relation as a boolean mask, for ``"xla"`` and
``"blockwise"``.

What the fused kernels do not take (an arbitrary boolean mask, a bias, attention dropout, the weights, Shaw's
relative terms) makes :func:`choose_implementation` fall back to ``"xla"`` or ``"blockwise"`` and say why.
"""

from __future__ import annotations

import contextlib
import functools
import math
import re
from typing import Optional

import jax
import jax.numpy as jnp
from absl import logging
from jax.experimental.pallas.ops.tpu.splash_attention import splash_attention_kernel as splash
from jax.experimental.pallas.ops.tpu.splash_attention import splash_attention_mask as masks
from jax.sharding import PartitionSpec

# the platform each accelerator-native implementation runs on (jax.default_backend() names)
PLATFORMS = {"pallas_tpu": "tpu", "cudnn": "gpu"}
# on CPU, "auto" takes "blockwise" from this many keys·queries on: measured with benchmarks.kernels (fwd+bwd, float32,
# 2 threads), blockwise is level with "xla" at T = S = 256 (0.97 vs 0.94 of jax.nn) and 0.64 / 0.49 of jax.nn's time
# at 1024 / 4096, where "xla" is 1.09 / 1.07.
CPU_BLOCKWISE_FROM = 512 * 512
# splash attention tiles: T and S must be multiples of the TPU lane width
TPU_LANES = 128


_MESH: list = []  # set by attention_mesh: the concrete mesh a traced step runs on


@contextlib.contextmanager
def attention_mesh(mesh):
  """Within the block (entered while a step is traced, inside ``jax.jit`` too), ``"pallas_tpu"`` runs per shard in
  ``jax.shard_map`` over ``mesh``. Outside one, the mesh of ``jax.set_mesh`` is used, if any."""
  _MESH.append(mesh)
  try:
    yield
  finally:
    _MESH.pop()


_TARGET_PLATFORM: list = []  # set by compiling_for: the platform an ahead-of-time compilation is for


@contextlib.contextmanager
def compiling_for(platform: Optional[str]):
  """Within the block, ``"auto"`` chooses, and ``"pallas_tpu"``/``"cudnn"`` check, for ``platform`` ("tpu", "gpu",
  "cpu") instead of this process's backend: for tracing a step that is compiled ahead of time for another platform
  (``attnjax.compile`` on a TPU topology from a CPU host). None leaves the backend in charge."""
  _TARGET_PLATFORM.append(platform)
  try:
    yield
  finally:
    _TARGET_PLATFORM.pop()


_INTERPRET: list = []  # set by interpret_pallas


@contextlib.contextmanager
def interpret_pallas():
  """Within the block, the Pallas TPU kernels traced (``"pallas_tpu"``, also when ``"auto"`` picks it) run in the
  Pallas interpreter: with :func:`compiling_for` ``("tpu")``, a model's splash-attention path runs on a CPU, for
  tests."""
  _INTERPRET.append(True)
  try:
    yield
  finally:
    _INTERPRET.pop()


def platform() -> str:
  """The platform attention is traced for: the innermost :func:`compiling_for`, else ``jax.default_backend()``."""
  return _TARGET_PLATFORM[-1] if _TARGET_PLATFORM and _TARGET_PLATFORM[-1] else jax.default_backend()


def check_platform(implementation: str) -> None:
  """Raises a ValueError when ``implementation`` needs an accelerator this process does not run on."""
  needed = PLATFORMS[implementation]
  backend = platform()
  if backend != needed:
    raise ValueError(f"implementation={implementation!r} runs on {needed.upper()} only, and this process's JAX "
                     f"backend is {backend!r}; use implementation='auto' to pick the best kernel for the platform, "
                     "or 'xla' / 'blockwise' anywhere")


def segment_ids_mask(q_segment_ids, kv_segment_ids):
  """``[B, 1, T, S]`` bool: query t attends key s iff ``kv[s] != 0`` and ``q[t] == kv[s]`` (see the module)."""
  q, kv = q_segment_ids[:, None, :, None], kv_segment_ids[:, None, None, :]
  return jnp.logical_and(q == kv, kv != 0)


def choose_implementation(*, backend: str, query_length: int, key_length: int, head_dim: int, dtype,
                          has_mask: bool, has_bias: bool, dropout: bool, return_weights: bool,
                          has_segment_ids: bool) -> tuple[str, str]:
  """``(implementation, reason)`` for ``implementation="auto"``; a pure function of static facts, so it is tested on
  any machine. MaxText's and the Flax examples' rule: the fused kernel of the platform wherever its semantics cover
  the call, else XLA."""
  del has_segment_ids  # segment ids suit every implementation
  if return_weights:
    return "xla", "the attention weights are requested, and only 'xla' materialises them"
  unsupported = [what for what, present in (("a boolean mask", has_mask), ("a bias", has_bias),
                                            ("attention dropout", dropout)) if present]
  long = query_length * key_length >= CPU_BLOCKWISE_FROM
  if backend == "tpu":
    if unsupported:
      return "xla", f"splash attention takes no {', '.join(unsupported)} (segment ids and causality only)"
    if query_length % TPU_LANES or key_length % TPU_LANES:
      return "xla", f"splash attention needs T and S multiples of {TPU_LANES}, got T={query_length}, S={key_length}"
    return "pallas_tpu", "TPU: Pallas splash attention"
  if backend == "gpu":
    if unsupported:
      return "xla", f"cuDNN attention is used here without {', '.join(unsupported)}"
    if jnp.dtype(dtype) not in (jnp.dtype(jnp.float16), jnp.dtype(jnp.bfloat16)):
      return "xla", f"cuDNN fused attention needs float16 or bfloat16, got {jnp.dtype(dtype).name}"
    if head_dim % 8 or head_dim > 128:
      return "xla", f"cuDNN fused attention needs a head size, a multiple of 8, of at most 128, got {head_dim}"
    return "cudnn", "GPU: cuDNN fused attention"
  size = f"{backend.upper()}: T·S = {query_length}·{key_length}"
  if long:
    return "blockwise", f"{size} >= {CPU_BLOCKWISE_FROM}, where blockwise is faster"
  return "xla", f"{size} < {CPU_BLOCKWISE_FROM}, where xla is as fast"


_RECORDS: list = []  # open record_fused_calls lists


@contextlib.contextmanager
def record_fused_calls():
  """Collects ``(implementation, q_shape, k_shape, is_causal)`` of every fused-kernel call traced in the block: XLA's
  ``cost_analysis`` does not count FLOPs inside custom calls, so ahead-of-time estimates add
  :func:`attention_flops` of these calls."""
  calls: list = []
  _RECORDS.append(calls)
  try:
    yield calls
  finally:
    _RECORDS.remove(calls)


def note_fused_call(implementation: str, q_shape, k_shape, is_causal: bool) -> None:
  for calls in _RECORDS:
    calls.append((implementation, tuple(q_shape), tuple(k_shape), bool(is_causal)))


def attention_flops(q_shape, k_shape, is_causal: bool) -> float:
  """Forward FLOPs of attention ``[B, T, N, H]`` × ``[B, S, N, H]``: Q Kᵀ and P V, 2·B·N·T·S·H each; half of them
  with a causal mask, whose masked blocks the fused kernels skip. A backward costs twice the forward."""
  b, t, n, h = q_shape
  flops = 4.0 * b * n * t * k_shape[1] * h
  return flops / 2 if is_causal else flops


_CHOICES_SAID: set = set()  # (implementation, reason with its numbers blanked): the choices already logged at INFO


@functools.lru_cache(maxsize=None)
def log_choice(implementation: str, reason: str, shape: tuple) -> None:
  """Logs the auto choice: at INFO once per choice and rule (the reason, its shapes and sizes aside), so a model's
  compiled steps say it once, not once per shape; every (choice, shape) once at ``--verbosity=1``."""
  rule = (implementation, re.sub(r"\d+", "#", reason))
  if rule in _CHOICES_SAID:
    logging.vlog(1, "attention implementation='auto' -> %r for q/k shapes %s: %s", implementation, shape, reason)
    return
  _CHOICES_SAID.add(rule)
  logging.info("attention implementation='auto' -> %r: %s (q/k shapes %s; further shapes with this choice at "
               "--verbosity=1)", implementation, reason, shape)


# ------------------------------------------------------------------------------------------------- splash (TPU)


def _block_sizes(t: int, s: int):
  bq, bkv = math.gcd(t, 512), math.gcd(s, 512)
  return splash.BlockSizes(block_q=bq, block_kv=bkv, block_kv_compute=bkv, block_q_dkv=bq, block_kv_dkv=bkv,
                           block_kv_dkv_compute=bkv, block_q_dq=bq, block_kv_dq=bkv)


def _splash_local(query, key, value, q_segment_ids, kv_segment_ids, *, is_causal, scale, interpret):
  """Splash attention on one shard: ``[b, T, n, H]`` and segment ids ``[b, T]`` / ``[b, S]``."""
  _, t, n, _ = query.shape
  s = key.shape[1]
  head_mask = masks.CausalMask((t, s)) if is_causal else masks.FullMask((t, s))
  kernel = splash.make_splash_mha(masks.MultiHeadMask([head_mask] * n), head_shards=1, q_seq_shards=1,
                                  block_sizes=_block_sizes(t, s), interpret=interpret)

  def one(q, k, v, q_seg, kv_seg):  # [T, n, H] -> the kernel's [n, T, H]
    heads_first = lambda x: jnp.swapaxes(x, 0, 1)
    out = kernel(heads_first(q * jnp.asarray(scale, q.dtype)), heads_first(k), heads_first(v),
                 segment_ids=splash.SegmentIds(q=q_seg, kv=kv_seg))
    return heads_first(out)

  out = jax.vmap(one)(query, key, value, q_segment_ids, kv_segment_ids)
  # queries of segment 0 (packing's padding) attend nothing: zeros, as in "xla" (the kernel gives them some average)
  return jnp.where((q_segment_ids != 0)[:, :, None, None], out, 0).astype(query.dtype)


def splash_attention(query, key, value, *, q_segment_ids=None, kv_segment_ids=None, is_causal=False,
                     scale: Optional[float] = None, spec: Optional[PartitionSpec] = None, interpret: bool = False):
  """Pallas TPU splash attention over ``[B, T, N, H]`` queries and ``[B, S, N, H]`` keys/values.

  Args:
    query, key, value: ``[B, T, N, H]``, ``[B, S, N, H]``, ``[B, S, N, H]``; T and S multiples of the block sizes
      (512 or their gcd with it; multiples of 128 on a TPU).
    q_segment_ids, kv_segment_ids: ``[B, T]`` / ``[B, S]`` int (see the module docstring); default all ones.
    is_causal: the static causal mask ``s <= t``.
    scale: logit scale, default ``1/sqrt(H)``.
    spec: how ``[B, T, N, H]`` is split over the mesh of :func:`attention_mesh` (or of ``jax.set_mesh``); the
      length axis must not be split. The kernel then runs per shard in ``jax.shard_map``. Without a spec or a mesh
      it runs on the global arrays, which is right on one device only.
    interpret: run the kernel in the Pallas interpreter (any backend; for tests on CPU); also within
      :func:`interpret_pallas`.

  Returns:
    ``[B, T, N, H]`` in the query dtype.
  """
  b, t = query.shape[:2]
  s = key.shape[1]
  scale = 1.0 / math.sqrt(query.shape[-1]) if scale is None else float(scale)
  q_seg = jnp.ones((b, t), jnp.int32) if q_segment_ids is None else q_segment_ids.astype(jnp.int32)
  kv_seg = jnp.ones((b, s), jnp.int32) if kv_segment_ids is None else kv_segment_ids.astype(jnp.int32)
  local = functools.partial(_splash_local, is_causal=is_causal, scale=scale, interpret=interpret or bool(_INTERPRET))
  mesh = _MESH[-1] if _MESH else jax.sharding.get_abstract_mesh()
  if spec is None or mesh.empty or all(axis is None for axis in spec):
    return local(query, key, value, q_seg, kv_seg)
  spec = PartitionSpec(*(tuple(spec) + (None,) * (4 - len(spec))))
  if spec[1] is not None:
    raise ValueError(f"splash attention keeps whole sequences on a device: spec {spec} splits the length axis")
  seg_spec = PartitionSpec(spec[0], None)
  return jax.shard_map(local, mesh=mesh, in_specs=(spec, spec, spec, seg_spec, seg_spec), out_specs=spec,
                       check_vma=False)(query, key, value, q_seg, kv_seg)


# -------------------------------------------------------------------------------------------------- cuDNN (GPU)


def cudnn_attention(query, key, value, *, q_segment_ids=None, kv_segment_ids=None, is_causal=False, scale=None):
  """``jax.nn.dot_product_attention(implementation="cudnn")`` with the segment-id relation as its mask."""
  mask = None
  if q_segment_ids is not None or kv_segment_ids is not None:
    b, t, s = query.shape[0], query.shape[1], key.shape[1]
    q = jnp.ones((b, t), jnp.int32) if q_segment_ids is None else q_segment_ids
    kv = jnp.ones((b, s), jnp.int32) if kv_segment_ids is None else kv_segment_ids
    mask = segment_ids_mask(q, kv)
  out = jax.nn.dot_product_attention(query, key, value, mask=mask, scale=scale, is_causal=is_causal,
                                     implementation="cudnn")
  if q_segment_ids is not None:
    out = jnp.where((q_segment_ids != 0)[:, :, None, None], out, 0)
  return out.astype(query.dtype)
