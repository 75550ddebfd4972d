"""Ahead-of-time compilation of an experiment for its target: does it compile, does it fit, how long will it take?

    python -m attnjax.compile --config=experiments/wmt14_en_de/transformer_base.py [--target=tpu-v4-8]
    python -m attnjax.compile --all --out=docs/study_cost.md          # every experiment on its default target

Builds the experiment's real sharded train step (forward, backward, optimiser update, gradient accumulation) and its
sharded beam-search decode step with abstract inputs at the experiment's real shapes (the largest bucket of a global
batch), on the target's devices, and compiles both on this machine:

* TPU targets: the slice's topology from ``jax.experimental.topologies`` (needs libtpu: ``pip install -e
  '.[tpu]'``), so the program is exactly the one the TPU VM would run, sharded over its chips.
* GPU targets: with JAX's CUDA plugin installed (``pip install -e '.[cuda]'``), the GPU program itself, compiled
  without a GPU from XLA's description of the chip (:data:`attnjax.targets.GPU_TARGET_CONFIGS`), fusions, cuBLAS
  and cuDNN calls as the GPU would run them (:func:`kernel_census` counts them); without it, the same program
  compiled for as many simulated host devices as the target has, which checks the sharding; memory is XLA's
  estimate for that program.

It prints XLA's numbers: per-device memory (arguments, outputs, temporaries, total) against the chip's HBM, FLOPs and
bytes accessed per step, and from them an **estimate** of the step time (a roofline: the larger of FLOPs / peak and
bytes / HBM bandwidth) and of device-hours for ``train.steps``. XLA does not count FLOPs inside custom calls (Pallas
kernels); none is used here. An experiment that does not fit exits with an error naming the number and what to try.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import re
import sys

from absl import app, flags

from attnjax import cli

# Flags are defined only when this module runs as the CLI, so that importing it (tests, other tools) never
# collides with another module's flags of the same name.
_CONFIG = None
_TARGET = None
_ALL = None
_OUT = None
COST_TITLE = "# Cost of the study on its targets\n\n"  # the --out page's title (a docs page)
_DECODE = None
_RENDER = None
_SET = None


def define_flags() -> None:
  global _CONFIG, _TARGET, _ALL, _OUT, _DECODE, _RENDER, _SET
  _CONFIG = flags.DEFINE_string("config", None, "experiment file (optionally FILE:TARGET)")
  _TARGET = flags.DEFINE_string("target", None, "target to compile for (default: the experiment's own)")
  _ALL = flags.DEFINE_bool("all", False, "compile every experiment of the study (experiments/<task>/<model>.py)")
  _OUT = flags.DEFINE_string("out", None, "with --all: write the cost table (markdown) here")
  _DECODE = flags.DEFINE_bool("decode", True, "also compile the beam-search decode step")
  _SET = flags.DEFINE_multi_string("set", [], "config overrides KEY=VALUE after the target, e.g. "
                                   "--set=model.implementation=xla --set=train.fused_update=true")
  _RENDER = flags.DEFINE_string("render", None, "only re-render --out from the JSON a previous --all run wrote beside "
                                "its table (no compilation), e.g. after a change to the table's columns")


STUDY_DIRS = ("wmt14_en_de", "wmt14_en_fr", "cnn_dailymail", "xsum", "squad_v1", "squad_v2")
GiB = 1024**3


class DoesNotFit(ValueError):
  pass


def _parse_value(text: str, current):
  """``text`` as the type of the key's current value (a bool from true/false, a number), else JSON, else the
  string."""
  if isinstance(current, bool):
    if text.lower() not in ("true", "false"):
      raise app.UsageError(f"expected true or false, got {text!r}")
    return text.lower() == "true"
  if isinstance(current, int):
    return int(text)
  if isinstance(current, float):
    return float(text)
  if current is None:
    try:
      return json.loads(text)
    except json.JSONDecodeError:
      pass
  return text


def load_experiment(spec: str, target: str | None = None):
  """The config of ``FILE`` or ``FILE:TARGET`` (``get_config(target)``), re-targeted to ``target`` if given."""
  from attnjax import config as config_lib, targets  # pylint: disable=g-import-not-at-top
  path, _, arg = spec.partition(":")
  module = config_lib.experiment_module(path, "--config")
  config = module.get_config(arg) if arg else module.get_config()
  if target:
    targets.use_target(config, target)
  return config


@dataclasses.dataclass
class Report:
  experiment: str
  target: str
  params: int
  seed_params: float | None
  step: dict  # memory and cost of the train step (per device)
  decode: dict | None
  step_seconds: float | None
  device_hours: float | None
  fits: bool
  batch: str
  kernels: dict | None = None  # kernel_census of the compiled train step
  # one accelerator: the micro-batches a step takes and attnjax.targets.transformer_step_bytes of one (Transformers)
  single_chip: dict | None = None


def _cuda_plugin() -> bool:
  """Whether JAX's CUDA plugin is installed (``.[cuda]``): then GPU targets compile for the GPU itself."""
  import importlib.util  # pylint: disable=g-import-not-at-top
  try:
    return any(importlib.util.find_spec(f"jax_plugins.xla_cuda{v}") is not None for v in (13, 12))
  except ModuleNotFoundError:  # no jax_plugins package at all
    return False


# Instructions of a scheduled HLO module that launch nothing: they name, reshape without moving, or control.
_NO_KERNEL = {"parameter", "constant", "get-tuple-element", "tuple", "bitcast", "while", "conditional", "call",
              "opt-barrier", "after-all", "partition-id", "replica-id", "add-dependency", "domain"}
_INSTRUCTION = re.compile(r"^\s*(?:ROOT\s+)?%?[\w.\-]+ = .*?\s([a-z][a-z0-9\-]*)\((.*)$")
_CALLED = re.compile(r"(?:body|condition|to_apply|calls|true_computation|false_computation|branch_computations)="
                     r"\{?%?([\w.\-]+(?:, %[\w.\-]+)*)")


def kernel_census(hlo: str) -> dict:
  """What one call of a compiled program launches, from its optimised HLO text (``compiled.as_text()``).

  Every instruction of the entry computation, and of the computations its control flow runs (while bodies and
  conditions, conditional branches), that is not bookkeeping (:data:`_NO_KERNEL`) is one kernel: a fusion, a library
  call (``custom-call``: cuBLAS, cuDNN, a Pallas kernel), or an op left unfused (a copy, a transpose). Fused
  computations are not descended into. Each kernel is attributed by its ``op_name`` metadata (JAX's trace path):
  ``backward`` under a ``transpose(``, ``forward`` under a ``jvp(`` alone, ``random`` where its name holds
  ``random_bits`` / ``threefry`` / ``rng``, the rest (the optimiser's update, the loss's bookkeeping) ``update``.
  A while body counts once: the returned ``loops`` says how many there are.
  """
  blocks, name, entry = {}, None, None
  for line in hlo.splitlines():
    header = re.match(r"^(ENTRY\s+)?%?([\w.\-]+)\s.*\{\s*$", line)
    if header and not line.startswith(" "):
      name = header.group(2)
      blocks[name] = []
      if header.group(1):
        entry = name
      continue
    if name is not None and line.strip() and line.strip() != "}":
      blocks[name].append(line)
  counts = {"kernels": 0, "fusions": 0, "library_calls": 0, "copies": 0, "other": 0, "loops": 0,
            "forward": 0, "backward": 0, "update": 0, "random": 0, "by_opcode": {}}
  seen, todo = set(), [entry]
  while todo:
    block = todo.pop()
    if block in seen or block not in blocks:
      continue
    seen.add(block)
    for line in blocks[block]:
      m = _INSTRUCTION.match(line)
      if not m:
        continue
      opcode = m.group(1)
      if opcode in ("while", "conditional", "call"):
        counts["loops"] += opcode == "while"
        for called in _CALLED.findall(line):
          todo.extend(c.strip().lstrip("%") for c in called.split(","))
      if opcode in _NO_KERNEL:
        continue
      counts["kernels"] += 1
      counts["by_opcode"][opcode] = counts["by_opcode"].get(opcode, 0) + 1
      kind = {"fusion": "fusions", "custom-call": "library_calls", "copy": "copies"}.get(opcode, "other")
      counts[kind] += 1
      op_name = re.search(r'op_name="([^"]*)"', line)
      op_name = op_name.group(1) if op_name else ""
      if re.search(r"random_bits|threefry|rng", op_name + " " + opcode):
        counts["random"] += 1
      elif "transpose(" in op_name:
        counts["backward"] += 1
      elif "jvp(" in op_name:
        counts["forward"] += 1
      else:
        counts["update"] += 1
  return counts


def _devices(target):
  import jax  # pylint: disable=g-import-not-at-top
  from attnjax import targets  # pylint: disable=g-import-not-at-top
  if target.platform == "tpu":
    try:
      from jax.experimental import topologies  # pylint: disable=g-import-not-at-top
      topology = topologies.get_topology_desc(platform="tpu", topology_name=target.topology)
    except Exception as e:  # pylint: disable=broad-except  (RuntimeError, or no TPU plugin at all)
      raise RuntimeError(f"target {target.name} needs libtpu to compile for topology {target.topology!r} on this "
                         f"machine: pip install -e '.[tpu]' ({type(e).__name__}: {str(e).splitlines()[0][:200]})") \
          from None
    return list(topology.devices)
  if target.platform == "gpu" and target.device_kind in targets.GPU_TARGET_CONFIGS and _cuda_plugin():
    # deviceless: the GPU program itself, from XLA's description of the chip (the CUDA plugin's compiler, no GPU)
    from jax.experimental import topologies  # pylint: disable=g-import-not-at-top
    topology = topologies.get_topology_desc(platform="cuda", topology=f"1x{target.num_hosts}x"
                                            f"{target.devices_per_host}",
                                            target_config=targets.GPU_TARGET_CONFIGS[target.device_kind])
    return list(topology.devices)
  if jax.device_count() < target.num_devices:
    raise RuntimeError(f"target {target.name} has {target.num_devices} devices but JAX sees {jax.device_count()}: run "
                       f"with XLA_FLAGS=--xla_force_host_platform_device_count={target.num_devices} (the compile CLI "
                       f"sets it)")
  return jax.devices()[:target.num_devices]


def _memory(compiled) -> dict:
  m = compiled.memory_analysis()
  total = m.argument_size_in_bytes + m.output_size_in_bytes + m.temp_size_in_bytes - m.alias_size_in_bytes
  cost = compiled.cost_analysis()
  cost = (cost[0] if isinstance(cost, (list, tuple)) else cost) or {}
  return {"arguments": m.argument_size_in_bytes, "outputs": m.output_size_in_bytes, "temporaries": m.temp_size_in_bytes,
          "aliased": m.alias_size_in_bytes, "total": total, "flops": float(cost.get("flops", 0.0)),
          "bytes_accessed": float(cost.get("bytes accessed", 0.0))}


def _batch_shape(config, dp: int):
  """Rows and padded lengths of the experiment's largest global batch (what memory must hold)."""
  from attnjax import families  # pylint: disable=g-import-not-at-top
  d, accum = config.data, config.train.grad_accum_steps
  q, c = families.of(config).padded_lengths(d)
  if d.batch_size:
    rows = d.batch_size
  else:
    multiple = dp * accum
    rows = max(d.max_tokens // max(q, c) // multiple, 1) * multiple
  return rows, q, c


def compile_experiment(config, name: str = "", *, decode: bool = True) -> Report:
  """Compiles ``config``'s train step (and decode step) for ``config.target``; see the module docstring."""
  import jax  # pylint: disable=g-import-not-at-top
  import jax.numpy as jnp  # pylint: disable=g-import-not-at-top
  from jax.sharding import NamedSharding  # pylint: disable=g-import-not-at-top
  from attnjax import config as config_lib  # pylint: disable=g-import-not-at-top
  from attnjax import families, inference, targets, tokens  # pylint: disable=g-import-not-at-top
  from attnjax.kernels import fused  # pylint: disable=g-import-not-at-top
  from attnjax.models.registry import model_for, model_width  # pylint: disable=g-import-not-at-top
  from attnjax.runtime import partitioning  # pylint: disable=g-import-not-at-top
  from attnjax.training import steps  # pylint: disable=g-import-not-at-top
  from attnjax.training.optim import make_optimizer  # pylint: disable=g-import-not-at-top
  from attnjax.training.state import state_shardings  # pylint: disable=g-import-not-at-top

  config_lib.validate(config)
  target = targets.get(config.target)
  targets.check_batch(config, target)
  devices = _devices(target)
  # the attention kernel "auto" picks follows the devices compiled for: a GPU target without the CUDA plugin
  # compiles for host devices, where cuDNN's attention does not lower
  platform = "cpu" if devices[0].platform == "cpu" else target.platform
  mesh = partitioning.create_mesh(config.mesh.axes, config.mesh.shape, devices=devices)
  rules = config.mesh.rules
  vocab = tokens.vocab_size(config.data)  # the size the task's vocabulary is trained to
  model = model_for(config, src_vocab_size=vocab, tgt_vocab_size=vocab)
  tx, schedule = make_optimizer(config.train, model_width(model))
  ema_decay = config.train.get("ema_decay")  # a moving average of the parameters: one more copy of them
  abstract, sharding = state_shardings(model, tx, mesh, rules, jax.random.PRNGKey(0), ema_decay is not None)
  state = jax.tree_util.tree_map(lambda a, s: jax.ShapeDtypeStruct(a.shape, a.dtype, sharding=s), abstract, sharding)
  params = sum(math.prod(x.shape) for x in jax.tree_util.tree_leaves(abstract.params))
  dp = partitioning.data_parallel_size(mesh, rules)
  rows, q, c = _batch_shape(config, dp)
  family = families.of(config)
  shapes, bool_keys = family.abstract_batch(config, rows, q, c)
  ndims = family.batch_ndims
  batch_sharding = None if ndims is None else steps.batch_shardings({k: len(shapes[k]) for k in ndims}, mesh, rules)
  batch = {k: jax.ShapeDtypeStruct(v, jnp.bool_ if k in bool_keys else jnp.int32,
                                   sharding=(batch_sharding[k] if batch_sharding else
                                             partitioning.batch_sharding(mesh, rules, len(v))))
           for k, v in shapes.items()}
  train_step = steps.make_train_step(model, tx, schedule, state_sharding=sharding, mesh=mesh, rules=rules,
                                     grad_accum_steps=config.train.grad_accum_steps, batch_sharding=batch_sharding,
                                     ema_decay=ema_decay, loss_fn=family.loss(config, tgt_vocab_size=vocab))
  with fused.compiling_for(platform), fused.record_fused_calls() as calls:
    lowered = train_step.lower(state, batch, *steps.step_arguments(schedule, 0.0))
  compiled = lowered.compile()
  step = _memory(compiled)
  census = kernel_census(compiled.as_text())
  # XLA counts no FLOPs inside custom calls (Pallas splash, cuDNN): add the fused attention's, forward + backward
  # (3x the forward), per device. With gradient accumulation the micro-step is traced twice (the zeros of the
  # accumulator, then the scan body) and runs grad_accum_steps times.
  accum = config.train.grad_accum_steps
  traced = 2 if accum > 1 else 1
  step["attention_flops"] = (3.0 * accum / traced * sum(fused.attention_flops(q_, k_, causal)
                                                         for _, q_, k_, causal in calls) / target.num_devices)
  step["fused_attention_calls"] = len(calls) // traced
  step["flops"] += step["attention_flops"]
  decode_stats = None
  if decode and family.decodes:
    decoder = inference.decoder_for(model, mesh, config.eval, vocab_size=vocab)
    replicated = jax.tree_util.tree_map(
        lambda a: jax.ShapeDtypeStruct(a.shape, a.dtype, sharding=NamedSharding(mesh, jax.sharding.PartitionSpec())),
        abstract.params)
    eval_rows = decoder.rows.rows(config.eval.batch_size)
    src = jax.ShapeDtypeStruct((eval_rows, q), jnp.int32, sharding=decoder.rows.sharding)
    with fused.compiling_for(platform):
      decode_stats = _memory(decoder.lower(replicated, src).compile())
  fits = step["total"] <= target.hbm_bytes and (decode_stats is None or decode_stats["total"] <= target.hbm_bytes)
  seconds = None
  if target.peak_flops:
    seconds = max(step["flops"] / target.peak_flops, step["bytes_accessed"] / target.hbm_bandwidth)
  hours = None if seconds is None else seconds * config.train.steps * target.num_devices / 3600
  single_chip = None
  if target.num_devices == 1 and target.platform != "cpu" and config.model.name == "transformer":
    micro = rows // accum
    single_chip = {"micro_batches": accum, "rows": micro, "formula_bytes": targets.transformer_step_bytes(
        config.model, micro, q, c, vocab, target.dtype)}
  return Report(name, target.name, params, seed_params(config), step, decode_stats, seconds, hours, fits,
                f"{rows} x ({q}, {c})", census, single_chip)


def seed_params(config) -> float | None:
  """The parameter count the seed table reports for this model family; its table is on WMT14 translation only."""
  from attnjax import recipes  # pylint: disable=g-import-not-at-top
  if not str(config.data.get("task", "")).startswith("wmt14"):
    return None
  family = {"rnn_seq2seq": "lstm_attention" if config.model.get("attention") else "lstm_seq2seq",
            "transformer": "transformer"}.get(config.model.name)
  return recipes.SEED_PARAMS.get(family)


def check_fits(report: Report, config) -> None:
  from attnjax import targets  # pylint: disable=g-import-not-at-top
  target = targets.get(report.target)
  for what, stats in (("train step", report.step), ("decode step", report.decode)):
    if stats and stats["total"] > target.hbm_bytes:
      raise DoesNotFit(
          f"{report.experiment}: the {what} needs {stats['total'] / GiB:.1f} GiB per device (arguments "
          f"{stats['arguments'] / GiB:.1f}, temporaries {stats['temporaries'] / GiB:.1f}) but a {target.device_kind} "
          f"has {target.hbm_bytes / GiB:.0f} GiB. Try more FSDP (--config.mesh.shape, e.g. (data, fsdp, 1) with fsdp > "
          f"1), a smaller per-device batch (--config.train.grad_accum_steps={2 * config.train.grad_accum_steps}), or "
          f"a smaller eval.batch_size for decoding.")


def _gib(x) -> str:
  return f"{x / GiB:.2f}"


def print_report(r: Report) -> None:
  print(f"{r.experiment}  on {r.target}: {r.params / 1e6:.1f}M parameters"
        + (f" (seed table: {r.seed_params / 1e6:.0f}M)" if r.seed_params else "") + f", global batch {r.batch}")
  for what, s in (("train step", r.step), ("decode step", r.decode)):
    if s:
      print(f"  {what:11s} per device: arguments {_gib(s['arguments'])} GiB, outputs {_gib(s['outputs'])} GiB, "
            f"temporaries {_gib(s['temporaries'])} GiB, total {_gib(s['total'])} GiB; "
            f"{s['flops'] / 1e12:.3g} TFLOP, {s['bytes_accessed'] / 1e9:.3g} GB accessed")
      if s.get("fused_attention_calls"):
        print(f"  {'':11s} of which {s['attention_flops'] / 1e12:.3g} TFLOP in {s['fused_attention_calls']} fused "
              "attention calls, counted analytically (XLA counts none inside custom calls)")
  if r.step_seconds is not None:
    print(f"  estimated step time {r.step_seconds * 1e3:.0f} ms (roofline from the FLOPs and XLA's bytes), "
          f"{r.device_hours:,.0f} device-hours for the run")
  if r.kernels:
    k = r.kernels
    print(f"  kernels per train step: {k['kernels']} ({k['fusions']} fusions, {k['library_calls']} library calls, "
          f"{k['copies']} copies, {k['other']} other); forward {k['forward']}, backward {k['backward']}, update "
          f"{k['update']}, random bits {k['random']}")
  if r.single_chip:
    one = r.single_chip
    print(f"  one chip: {one['micro_batches']} micro-batch(es) of {one['rows']} rows a step; the formula that chose "
          f"them (attnjax.targets.transformer_step_bytes) says {_gib(one['formula_bytes'])} GiB")
  print(f"  fits: {'yes' if r.fits else 'NO'}")


def table(reports: list[Report]) -> str:
  lines = ["| experiment | target | params | seed params | batch (rows x (S, T)) | train step GiB/device | decode GiB/"
           "device | fits | est. step ms | est. device-hours |", "|---|---|---|---|---|---|---|---|---|---|"]
  for r in reports:
    lines.append(f"| {r.experiment} | {r.target} | {r.params / 1e6:.1f}M | "
                 f"{'' if not r.seed_params else f'{r.seed_params / 1e6:.0f}M'} | {r.batch} | {_gib(r.step['total'])} | "
                 f"{'' if not r.decode else _gib(r.decode['total'])} | {'yes' if r.fits else '**no**'} | "
                 f"{'' if r.step_seconds is None else f'{r.step_seconds * 1e3:.0f}'} | "
                 f"{'' if r.device_hours is None else f'{r.device_hours:,.0f}'} |")
  return "\n".join(lines) + "\n"


def study_experiments(root: str = "experiments") -> list[str]:
  return sorted(os.path.join(root, d, f) for d in STUDY_DIRS if os.path.isdir(os.path.join(root, d))
                for f in os.listdir(os.path.join(root, d)) if f.endswith(".py"))


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f"unexpected arguments: {argv[1:]}")
  if _RENDER.value:
    from attnjax import fs  # pylint: disable=g-import-not-at-top
    reports = [Report(**r) for r in json.loads(fs.read_text(_RENDER.value))]
    for r in reports:
      r.seed_params = seed_params(load_experiment(r.experiment))
    fs.write_text(_OUT.value, COST_TITLE + table(reports))
    return
  specs = study_experiments() if _ALL.value else [_CONFIG.value]
  if not specs or specs == [None]:
    raise app.UsageError("give --config=FILE or --all")
  reports, failures = [], []
  for spec in specs:
    config = load_experiment(spec, _TARGET.value)
    for item in _SET.value:
      key, sep, value = item.partition("=")
      if not sep:
        raise app.UsageError(f"--set takes KEY=VALUE, got {item!r}")
      section, _, name = key.rpartition(".")
      node = config
      for part in section.split(".") if section else []:
        if part not in node:
          raise app.UsageError(f"--set={item}: config has no section {part!r}")
        node = node[part]
      node[name] = _parse_value(value, node.get(name))  # a key the experiment lacks: validated when built
    report = compile_experiment(config, spec.partition(":")[0], decode=_DECODE.value)
    print_report(report)
    reports.append(report)
    try:
      check_fits(report, config)
    except DoesNotFit as e:
      failures.append(str(e))
    sys.stdout.flush()
  if _OUT.value:
    from attnjax import fs  # pylint: disable=g-import-not-at-top
    fs.write_text(_OUT.value, COST_TITLE + table(reports))
    fs.write_text(os.path.splitext(_OUT.value)[0] + ".json",
                  json.dumps([dataclasses.asdict(r) for r in reports], indent=1))
  if failures:
    raise SystemExit("error: " + "\n".join(failures))


def _ensure_host_devices(n: int = 16) -> None:
  """GPU targets compile for N simulated host devices: XLA reads this flag once, before JAX starts."""
  flag = f"--xla_force_host_platform_device_count={n}"
  if "xla_force_host_platform_device_count" not in os.environ.get("XLA_FLAGS", ""):
    os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " " + flag).strip()
  os.environ.setdefault("JAX_PLATFORMS", "cpu")  # the TPU targets come from topologies, not from attached chips
  # compiling for a topology claims no chip: do not wait for libtpu's lock held by another process (a training run)
  os.environ.setdefault("ALLOW_MULTIPLE_LIBTPU_LOAD", "1")


def run() -> None:
  """The command line: the ``attnjax-compile`` console script, and ``python -m attnjax.compile``."""
  _ensure_host_devices()
  define_flags()
  cli.run(main)


if __name__ == "__main__":
  run()
