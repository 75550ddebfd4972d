"""Named hardware targets: where an experiment is meant to run, and what that machine can do.

A target fixes the device count and kind, the mesh over ``(data, fsdp, tensor)``, the compute dtype (bfloat16 on
accelerators, as the Flax examples and MaxText train), and the per-chip HBM, peak FLOP/s and HBM bandwidth that the
compile tool (``python -m attnjax.compile``) checks memory against and estimates step times from. An experiment file
names its default target with :func:`use_target`; ``--config=FILE:NAME`` (the argument ml_collections passes to
``get_config``) or the compile tool's ``--target`` picks another. The global batch stays the paper's: the target only
decides how it is split over devices (and ``train.grad_accum_steps`` how many micro-batches each step takes).

Peak numbers are the vendors' published dense bfloat16 figures per chip (TPU v4: 275 TFLOP/s, 32 GiB HBM2 at
1.2 TB/s; v5e: 197 TFLOP/s, 16 GiB at 819 GB/s; v5p: 459 TFLOP/s, 95 GiB at 2.76 TB/s; H100 SXM: 989 TFLOP/s dense,
80 GB HBM3 at 3.35 TB/s). ``tpu-v4-8`` is Cloud TPU's name for 4 chips (8 TensorCores); ``tpu-v5p-64`` likewise 32
chips; v5e names count chips.
"""

from __future__ import annotations

import dataclasses
import math

from attnjax import tokens

GiB = 1024**3


@dataclasses.dataclass(frozen=True)
class Target:
  """One deployment. ``topology`` is the name ``jax.experimental.topologies`` compiles for (TPU only)."""
  name: str
  platform: str  # "tpu", "gpu" or "cpu"
  device_kind: str
  num_devices: int
  num_hosts: int
  mesh_shape: tuple[int, int, int]  # (data, fsdp, tensor); -1 = the devices left over
  dtype: str  # compute dtype of the model
  hbm_bytes: float  # per device
  peak_flops: float  # per device, dense, in the compute dtype
  hbm_bandwidth: float  # bytes/s per device
  topology: str | None = None

  @property
  def devices_per_host(self) -> int:
    return self.num_devices // self.num_hosts

  def resolved_mesh(self) -> tuple[int, int, int]:
    known = math.prod(s for s in self.mesh_shape if s != -1)
    return tuple(self.num_devices // known if s == -1 else s for s in self.mesh_shape)


TARGETS: dict[str, Target] = {t.name: t for t in (
    Target("tpu-v4-8", "tpu", "TPU v4", 4, 1, (-1, 1, 1), "bfloat16", 32 * GiB, 275e12, 1.2e12, "v4:2x2x1"),
    Target("tpu-v4-32", "tpu", "TPU v4", 16, 4, (-1, 1, 1), "bfloat16", 32 * GiB, 275e12, 1.2e12, "v4:2x2x4"),
    Target("tpu-v5e-16", "tpu", "TPU v5 lite", 16, 4, (-1, 1, 1), "bfloat16", 16 * GiB, 197e12, 819e9, "v5e:4x4"),
    Target("tpu-v5e-16-fsdp", "tpu", "TPU v5 lite", 16, 4, (4, 4, 1), "bfloat16", 16 * GiB, 197e12, 819e9,
           "v5e:4x4"),
    Target("tpu-v5p-64", "tpu", "TPU v5p", 32, 8, (-1, 1, 1), "bfloat16", 95 * GiB, 459e12, 2.76e12, "v5p:4x4x2"),
    Target("gpu-8xh100", "gpu", "NVIDIA H100 80GB", 8, 1, (-1, 1, 1), "bfloat16", 80e9, 989e12, 3.35e12),
    Target("gpu-2x8xh100", "gpu", "NVIDIA H100 80GB", 16, 2, (-1, 1, 1), "bfloat16", 80e9, 989e12, 3.35e12),
    # one GPU, as tools.accelerator_check measures (H100 SXM and H200: the same dense bfloat16 peak)
    Target("gpu-1xh100", "gpu", "NVIDIA H100 80GB", 1, 1, (-1, 1, 1), "bfloat16", 80e9, 989e12, 3.35e12),
    Target("gpu-1xh200", "gpu", "NVIDIA H200", 1, 1, (-1, 1, 1), "bfloat16", 141e9, 989e12, 4.8e12),
    # this machine: float32, a data-parallel mesh over whatever devices there are; no published peak
    Target("cpu", "cpu", "cpu", 1, 1, (-1, 1, 1), "float32", 24 * GiB, 0.0, 0.0),
)}


def get(name: str) -> Target:
  if name not in TARGETS:
    raise ValueError(f"unknown target {name!r}; known targets: {sorted(TARGETS)} (attnjax/targets.py)")
  return TARGETS[name]


def use_target(config, name: str) -> None:
  """Sets ``config.target``, the mesh shape and the model's compute dtype for target ``name``, and on a single
  accelerator the gradient accumulation its memory needs (:func:`single_device_accumulation`)."""
  target = get(name)
  config.target = name
  config.mesh.shape = target.mesh_shape
  if "dtype" in config.model:
    config.model.dtype = target.dtype
  # one chip holds the whole global batch when it fits, else takes it in micro-batches: the optimiser still sees
  # the paper's batch, so the learning-rate schedule is unchanged
  config.train.grad_accum_steps = single_device_accumulation(config, target)


# The fraction of a single chip's HBM that the train step's estimate may fill: the formula below tracks XLA's own
# estimate within -25% / +50% (tests/test_single_chip_batch.py), and the allocator's fragmentation needs the rest.
HBM_HEADROOM = 0.7


def transformer_step_bytes(model, rows: int, q: int, c: int, vocab: int, dtype: str = "bfloat16") -> float:
  """An upper estimate of one device's memory for a Transformer train step of ``rows`` rows of ``q`` source and
  ``c`` target tokens: the saved activations by Korthikanti et al. 2022 (§4.1: per layer and row,
  ``s·h·(34 + 5·a·s/h)`` bytes in 16-bit with dropout masks), generalised to a feed-forward width ``f`` (its part
  ``3 + 4·f/h`` in place of 19), to the decoder's cross-attention over ``q`` keys, and without the ``a·s²`` terms
  when the attention is fused (``implementation`` other than ``"xla"``: cuDNN or splash keep no score matrix); the
  output layer's logits at 10 bytes each (bfloat16 logits, float32 log-softmax and its gradient); and the train
  state at 28 bytes a parameter (float32 parameters and Adam's two moments, in and out of the step as XLA's estimate
  counts them, and the float32 gradients). Float32
  activations count twice. The compile tool gives XLA's own number for a given batch; this is what choosing the
  batch needs without compiling (for Transformer-base and -big at 97 rows of 256 tokens it says 18.9 and 32.6 GiB
  with unfused attention, where XLA's GPU program needs 13.3 and 24.7 GiB).
  """
  h, f, a = model.d_model, model.d_ff, model.num_heads
  fused = model.get("implementation", "auto") != "xla"
  scores = lambda s, k: 0.0 if fused else 5.0 * a * s * k  # softmax output, dropout mask and output
  encoder = q * h * (18 + 4 * f / h) + scores(q, q)
  decoder = c * h * (18 + 4 * f / h) + scores(c, c) + (7 * c + 4 * q) * h + scores(c, q)
  scale = 1.0 if dtype in ("bfloat16", "float16") else 2.0
  per_row = scale * (model.num_encoder_layers * encoder + model.num_decoder_layers * decoder) + 10.0 * c * vocab
  layers = 4 * h * h + 2 * h * f
  params = model.num_encoder_layers * layers + model.num_decoder_layers * (layers + 4 * h * h) + vocab * h
  if not model.get("shared_vocab", True):
    params += vocab * h * (1 if model.get("tie_decoder_embeddings", True) else 2)
  return rows * per_row + 28.0 * params


def single_device_accumulation(config, target: Target) -> int:
  """The gradient-accumulation steps a Transformer's global batch needs on a single-device accelerator ``target``:
  the fewest micro-batches whose :func:`transformer_step_bytes` (rows of the longest padded lengths, the batch's
  largest bucket) stay within :data:`HBM_HEADROOM` of the chip's HBM. A ``data.batch_size`` batch is split into
  equal micro-batches (a divisor of it); a token batch (``data.max_tokens``) into ``accum`` micro-batches of
  ``max_tokens // length // accum`` rows, as the input pipeline cuts it. Other models and targets keep their
  configured steps. A batch too large even one row at a time is an error naming the estimate."""
  accum = int(config.train.grad_accum_steps)
  if target.num_devices != 1 or target.platform == "cpu" or config.model.get("name") != "transformer":
    return accum
  d = config.data
  q, c = int(d.max_src_len), int(d.max_tgt_len)
  rows = int(d.batch_size) if d.batch_size else max(int(d.max_tokens) // max(q, c), 1)
  vocab = tokens.vocab_size(d)
  budget = HBM_HEADROOM * target.hbm_bytes
  for steps in range(max(accum, 1), rows + 1):
    if d.batch_size and rows % steps:
      continue
    if transformer_step_bytes(config.model, -(-rows // steps), q, c, vocab, target.dtype) <= budget:
      return steps
  need = transformer_step_bytes(config.model, 1, q, c, vocab, target.dtype)
  raise ValueError(f"target {target.name}: one row of ({q}, {c}) tokens needs about {need / GiB:.1f} GiB, more than "
                   f"{HBM_HEADROOM:.0%} of the {target.hbm_bytes / GiB:.0f} GiB of a {target.device_kind}")


def check_batch(config, target: Target) -> None:
  """A global batch must split evenly over the data-parallel devices (and micro-batches): named errors otherwise."""
  data, fsdp, tensor = target.resolved_mesh()
  if data * fsdp * tensor != target.num_devices:
    raise ValueError(f"config.mesh.shape={target.mesh_shape} does not divide target {target.name}'s "
                     f"{target.num_devices} devices: use a (data, fsdp, tensor) product of {target.num_devices}")
  batch = config.data.batch_size
  rows = data * fsdp * config.train.grad_accum_steps
  if batch is not None and batch % rows:
    raise ValueError(f"config.data.batch_size={batch} does not divide over {data * fsdp} data-parallel devices x "
                     f"train.grad_accum_steps={config.train.grad_accum_steps}: make it a multiple of {rows}")


# XLA's description of a GPU (stream_executor's GpuTargetConfigProto, text format): what compiling for one without
# the chip needs in its place (``jax.experimental.topologies.get_topology_desc(platform="cuda", target_config=...)``,
# with the CUDA plugin installed: ``pip install -e '.[cuda]'``). SM count, shared memory, registers and caches are
# NVIDIA's published H100 / H200 SXM figures (Hopper, compute capability 9.0: 132 SMs, 228 KiB shared memory per SM
# of which 227 KiB to one block, 50 MiB L2); memory sizes and bandwidths as the targets above.
_HOPPER = """gpu_device_info {{
  threads_per_block_limit: 1024
  threads_per_warp: 32
  shared_memory_per_block: 49152
  shared_memory_per_core: 233472
  threads_per_core_limit: 2048
  core_count: 132
  fpus_per_core: 128
  block_dim_limit_x: 2147483647
  block_dim_limit_y: 65535
  block_dim_limit_z: 65535
  memory_bandwidth: {bandwidth}
  l2_cache_size: 52428800
  clock_rate_ghz: 1.98
  device_memory_size: {memory}
  shared_memory_per_block_optin: 232448
  cuda_compute_capability {{ major: 9 }}
  registers_per_core_limit: 65536
  registers_per_block_limit: 65536
}}
platform_name: "CUDA"
dnn_version_info {{ major: 9 minor: 10 }}
runtime_version {{ major: 13 minor: 0 }}
device_description_str: "{name}"
"""
GPU_TARGET_CONFIGS = {
    "NVIDIA H100 80GB": _HOPPER.format(bandwidth=3_352_320_000_000, memory=84_929_347_584,
                                       name="NVIDIA H100 80GB HBM3"),
    "NVIDIA H200": _HOPPER.format(bandwidth=4_800_000_000_000, memory=150_754_820_096, name="NVIDIA H200"),
}
