"""Where a compiled program spends its time on CPU: XLA's per-op trace, grouped by what the op does.

    python -m benchmarks.op_profile --what=blockwise --length=1024     # the attention kernel, fwd + bwd
    python -m benchmarks.op_profile --what=step --config=small         # the Transformer train step of train_step
    python -m benchmarks.op_profile --what=experiment --experiment=experiments/squad_v2_cpu/bert_from_minilm.py \
        --dtype=bfloat16                                               # an experiment's own train step, one batch
    python -m benchmarks.op_profile --what=search --workdir=RUN --beam=4 --batch=64 --max_len=32   # a beam search

The program runs under ``jax.profiler.trace`` with ``--xla_cpu_enable_xprof_traceme`` (set here, before JAX starts),
so that every thunk XLA executes is a trace event named after its HLO instruction. Each leaf event (loops and calls
are containers and are not counted) is attributed, through the compiled HLO, to a category:

* ``matmul``: a ``dot`` or a YNNPACK fusion around one; ``reduction (YNNPACK)``: a YNNPACK fusion without a dot;
* ``elementwise: <op>``: a loop fusion, named by the JAX primitive of its root (``exp``, ``add``, ``select_n``, ...);
* ``copy / transpose``, ``dynamic slices``, ``other``.

``--top=N`` also lists the N most expensive instructions with their shapes and the JAX source op.

Times are summed over threads, so the shares are of the total op time of the program, not of its wall time; the
gap between the two (``threads busy`` below 2 on 2 cores) is time with one thread or none working.
"""

from __future__ import annotations

import argparse
import collections
import functools
import glob
import os
import re
import tempfile
import time

os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " --xla_cpu_enable_xprof_traceme=true").strip()

import jax  # pylint: disable=g-import-not-at-top,wrong-import-position
import jax.numpy as jnp  # pylint: disable=g-import-not-at-top,wrong-import-position
import numpy as np  # pylint: disable=g-import-not-at-top,wrong-import-position

_INSTRUCTION = re.compile(r"^\s*(?:ROOT )?%(\S+) = .*? ([a-z][\w-]*)\((.*)$")
_CONTAINERS = {"while", "call", "conditional", "async-start", "async-done"}


def hlo_categories(hlo_text: str) -> dict[str, str]:
  """Instruction name -> category, from the text of a compiled HLO module."""
  computations, current = {}, None
  for line in hlo_text.splitlines():
    header = re.match(r"^(?:ENTRY )?%(\S+) ", line)
    if header and line.rstrip().endswith("{"):
      current = computations.setdefault(header.group(1), [])
    elif current is not None:
      current.append(line)
  categories, described = {}, {}
  for lines in computations.values():
    for line in lines:
      m = _INSTRUCTION.match(line)
      if not m:
        continue
      name, opcode, rest = m.groups()
      source = re.search(r'op_name="([^"]*)"', rest)
      described[name] = f"{line.split(' = ', 1)[1].split('(', 1)[0][:60]}  {source.group(1)[-70:] if source else ''}"
      if opcode in _CONTAINERS:
        categories[name] = "container"
      elif opcode == "dot":
        categories[name] = "matmul"
      elif opcode == "fusion":
        called = re.search(r"calls=%([\w.-]+)", rest)
        body = "\n".join(computations.get(called.group(1), [])) if called else ""
        primitive = re.search(r'op_name="[^"]*/([\w-]+)"', rest)
        if " dot(" in body or " convolution(" in body:
          categories[name] = "matmul"
        elif "__ynn_fusion" in rest:
          categories[name] = "reduction (YNNPACK)"
        elif "dynamic-slice" in name or "dynamic-update-slice" in name:
          categories[name] = "dynamic slices"
        else:
          categories[name] = f"elementwise: {primitive.group(1) if primitive else name.rsplit('.', 1)[0]}"
      elif opcode in ("copy", "transpose"):
        categories[name] = "copy / transpose"
      elif opcode in ("dynamic-slice", "dynamic-update-slice"):
        categories[name] = "dynamic slices"
      else:
        categories[name] = f"other: {opcode}"
  return categories, described


def profile(fn, args, reps: int = 3) -> dict:
  """Runs the jitted ``fn(*args)``; returns its median wall time, op time per category and the busy threads."""
  compiled = jax.jit(fn).lower(*args).compile()
  categories, described = hlo_categories(compiled.as_text())
  jax.block_until_ready(compiled(*args))
  walls = []
  for _ in range(reps):
    start = time.perf_counter()
    jax.block_until_ready(compiled(*args))
    walls.append(time.perf_counter() - start)
  totals, ops = collections.Counter(), collections.Counter()
  with tempfile.TemporaryDirectory() as tmp:
    with jax.profiler.trace(tmp):
      for _ in range(reps):
        jax.block_until_ready(compiled(*args))
    from jax._src.lib import _profile_data  # pylint: disable=g-import-not-at-top
    data = _profile_data.ProfileData.from_file(glob.glob(f"{tmp}/**/*.xplane.pb", recursive=True)[0])
    for plane in data.planes:
      for line in plane.lines:
        for event in line.events:
          category = categories.get(event.name)
          if category is not None and category != "container":
            totals[category] += event.duration_ns / 1e9 / reps
            ops[f"{event.name}: {described[event.name]}"] += event.duration_ns / 1e9 / reps
  wall = float(np.median(walls))
  return {"wall": wall, "categories": totals, "ops": ops, "busy": sum(totals.values()) / wall}


def _blockwise(args):
  from attnjax.kernels import scaled_dot_product_attention  # pylint: disable=g-import-not-at-top
  rng = np.random.default_rng(0)
  q, k, v = (jnp.asarray(rng.standard_normal((1, args.length, 4, 64), np.float32)) for _ in range(3))
  attend = functools.partial(scaled_dot_product_attention, implementation=args.implementation,
                             block_q=args.block, block_kv=args.block)
  fn = jax.value_and_grad(lambda q, k, v: jnp.sum(attend(q, k, v)), argnums=(0, 1, 2))
  return fn, (q, k, v), f"attention fwd+bwd, {args.implementation}, B=1 N=4 H=64 T={args.length}"


def _step(args):
  from benchmarks import train_step  # pylint: disable=g-import-not-at-top
  ns = argparse.Namespace(batch=16, length=64, vocab=8192)
  src, tgt_in, tgt_out = train_step.token_batch(ns)
  fn, params, opt_state = train_step.step_function(train_step.CONFIGS[args.config], ns.vocab, src, tgt_in, tgt_out)
  return fn, (params, opt_state, jax.random.PRNGKey(1)), f"Transformer {args.config} train step (train_step shapes)"


def _experiment(args):
  from attnjax.runtime import partitioning  # pylint: disable=g-import-not-at-top
  from attnjax.training import steps  # pylint: disable=g-import-not-at-top
  from benchmarks.precision import experiment_with  # pylint: disable=g-import-not-at-top
  exp = experiment_with(args.experiment, args.dtype, tempfile.mkdtemp(prefix="op_profile_"))
  local = next(exp.train_batches)
  extra = steps.step_arguments(exp.schedule, 0.5)
  fn = lambda state, batch: exp.train_step(state, batch, *extra)
  shapes = ", ".join(f"{key} {tuple(value.shape)}" for key, value in sorted(local.items()))
  return fn, (exp.state, partitioning.global_batch(local, exp.mesh, exp.rules)), (
      f"{args.experiment} train step, model.dtype={args.dtype}, its first training batch ({shapes})")


def _search(args):
  """One batch of a trained workdir's search: its longest validation sources, ``--beam`` (1: greedy), length
  penalty off, at most ``--max_len`` output tokens."""
  import attnjax  # pylint: disable=g-import-not-at-top
  from attnjax import config as config_lib, decoding, families, inference  # pylint: disable=g-import-not-at-top
  from attnjax.data import tasks  # pylint: disable=g-import-not-at-top
  translator = attnjax.load(args.workdir, checkpoint="best")
  loaded = translator.loaded
  config = config_lib.load_config(args.workdir)
  tasks.resolve_data_dir(config.data, args.workdir)
  ids = sorted((loaded.vocabularies.src.encode(s)[:translator.max_src_len]
                for s, _ in families.load_split(config.data, "validation")), key=len, reverse=True)[:args.batch]
  width = inference._width(len(ids[0]), translator.max_src_len)  # pylint: disable=protected-access
  src = np.zeros((len(ids), width), np.int32)
  for row, x in enumerate(ids):
    src[row, :len(x)] = x
  common = dict(max_len_a=0.0, max_len_b=args.max_len, vocab_size=loaded.vocabularies.tgt.size)
  if args.beam > 1:
    fn = lambda params, src: decoding.beam_search(loaded.model, {"params": params}, src, beam_size=args.beam,
                                                  alpha=0.0, **common).tokens
  else:
    fn = lambda params, src: decoding.greedy_search(loaded.model, {"params": params}, src, **common).tokens
  return fn, (loaded.params, jnp.asarray(src)), (
      f"{'greedy' if args.beam == 1 else f'beam {args.beam}'} search of {args.workdir}, {len(ids)} sources of "
      f"width {width}, at most {args.max_len} output tokens")


def main():
  parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
  parser.add_argument("--what", choices=("blockwise", "step", "experiment", "search"), default="blockwise")
  parser.add_argument("--workdir", help="--what=search: the trained run")
  parser.add_argument("--beam", type=int, default=4, help="--what=search: beam size (1: greedy)")
  parser.add_argument("--batch", type=int, default=64, help="--what=search: sources")
  parser.add_argument("--max_len", type=int, default=32, help="--what=search: output tokens at most")
  parser.add_argument("--experiment", help="--what=experiment: the experiment file")
  parser.add_argument("--dtype", default="float32", help="--what=experiment: its model.dtype")
  parser.add_argument("--length", type=int, default=1024)
  parser.add_argument("--block", type=int, default=512)
  parser.add_argument("--implementation", default="blockwise")
  parser.add_argument("--config", default="small")
  parser.add_argument("--reps", type=int, default=3)
  parser.add_argument("--top", type=int, default=0, help="also list the N most expensive instructions")
  args = parser.parse_args()
  if args.what == "experiment" and not args.experiment:
    parser.error("--what=experiment needs --experiment=FILE")
  if args.what == "search" and not args.workdir:
    parser.error("--what=search needs --workdir=RUN")
  fn, inputs, title = {"blockwise": _blockwise, "step": _step, "experiment": _experiment,
                       "search": _search}[args.what](args)
  result = profile(fn, inputs, args.reps)
  total = sum(result["categories"].values())
  print(f"# {title}\n# wall {1e3 * result['wall']:.1f} ms per run, op time {1e3 * total:.1f} ms summed over threads "
        f"({result['busy']:.2f} threads busy on average)")
  print("| category | ms per run | share of op time |\n|---|---|---|")
  for category, seconds in result["categories"].most_common():
    if seconds / total >= 0.005:
      print(f"| {category} | {1e3 * seconds:.1f} | {100 * seconds / total:.0f}% |")
  for op, seconds in result["ops"].most_common(args.top):
    print(f"{1e3 * seconds:8.1f} ms  {op}")


if __name__ == "__main__":
  main()
