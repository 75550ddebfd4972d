"""Attention kernels, forward + backward, float32 on the local backend: time ratios and compiled temp memory.

    python -m benchmarks.kernels                   # T = 256 ... 16384, B·N = 4, H = 64
    python -m benchmarks.kernels --lengths=256,1024 --reps=3

Each framework is timed in a process of its own (``--side=jax`` / ``--side=torch``, same thread count), alternating
``--rounds`` times; the JAX kernels are interleaved within their process, so their ratios survive a noisy machine:
  jax.nn   jax.nn.dot_product_attention(implementation="xla"), the reference (ratio 1.00)
  xla      attnjax scaled_dot_product_attention(implementation="xla")
  blockwise  attnjax implementation="blockwise" (online softmax, custom VJP)
  torch    torch.nn.functional.scaled_dot_product_attention, when torch is installed (benchmark-only extra)
Temp memory is ``memory_analysis().temp_size_in_bytes`` of the compiled fwd+bwd program (not measured for torch).
Naive attention is only run where its logits fit under ``--max_naive_gib``; above that only its memory is reported.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import statistics

import jax
import jax.numpy as jnp
import numpy as np

from attnjax.kernels import scaled_dot_product_attention
from benchmarks.common import interleaved_medians, machine_description, markdown_table, run_side


def _jax_fn(kind: str, block: int, causal: bool):
  if kind == "jax.nn":
    attend = functools.partial(jax.nn.dot_product_attention, implementation="xla", is_causal=causal)
  else:
    attend = functools.partial(scaled_dot_product_attention, implementation=kind, is_causal=causal, block_q=block,
                               block_kv=block)
  loss = lambda q, k, v: jnp.sum(attend(q, k, v))
  return jax.jit(jax.value_and_grad(loss, argnums=(0, 1, 2)))


def _torch_fn(q, k, v, causal: bool, threads: int):
  try:
    import torch  # pylint: disable=g-import-not-at-top
  except ImportError:
    return None
  torch.set_num_threads(threads)
  tq, tk, tv = (torch.tensor(np.asarray(x).transpose(0, 2, 1, 3).copy(), requires_grad=True) for x in (q, k, v))

  def run():
    for x in (tq, tk, tv):
      x.grad = None
    out = torch.nn.functional.scaled_dot_product_attention(tq, tk, tv, is_causal=causal)
    out.sum().backward()
  return run


def _jax_side(args, lengths) -> dict:
  out = {}
  for t in lengths:
    shape = (args.batch, t, args.heads, args.head_dim)
    keys = jax.random.split(jax.random.PRNGKey(t), 3)
    q, k, v = (jax.random.normal(kk, shape, jnp.float32) for kk in keys)
    naive_gib = args.batch * args.heads * t * t * 4 / 2**30
    fns, mem = {}, {}
    for kind in ("jax.nn", "xla", "blockwise"):
      compiled = _jax_fn(kind, args.block, args.causal).lower(q, k, v).compile()
      stats = compiled.memory_analysis()
      mem[kind] = None if stats is None else stats.temp_size_in_bytes
      if kind == "blockwise" or naive_gib <= args.max_naive_gib:
        fns[kind] = functools.partial(lambda c: jax.block_until_ready(c(q, k, v)), compiled)
    reps = args.reps if t <= 4096 else max(1, args.reps // 2)
    out[str(t)] = {"times": interleaved_medians(fns, reps), "mem": mem}
  return out


def _torch_side(args, lengths) -> dict:
  out = {}
  for t in lengths:
    if args.batch * args.heads * t * t * 4 / 2**30 > args.max_naive_gib:
      continue
    rng = np.random.default_rng(t)
    q, k, v = (rng.normal(size=(args.batch, t, args.heads, args.head_dim)).astype(np.float32) for _ in range(3))
    run = _torch_fn(q, k, v, args.causal, args.threads)
    if run is None:
      return {}
    reps = args.reps if t <= 4096 else max(1, args.reps // 2)
    out[str(t)] = {"times": interleaved_medians({"torch": run}, reps)}
  return out


def main():
  parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
  parser.add_argument("--lengths", default="256,1024,4096,16384")
  parser.add_argument("--batch", type=int, default=1)
  parser.add_argument("--heads", type=int, default=4)
  parser.add_argument("--head_dim", type=int, default=64)
  parser.add_argument("--block", type=int, default=512)
  parser.add_argument("--causal", action="store_true")
  parser.add_argument("--reps", type=int, default=5)
  parser.add_argument("--rounds", type=int, default=2, help="alternate the two processes this many times")
  parser.add_argument("--threads", type=int, default=os.cpu_count() or 1)
  parser.add_argument("--max_naive_gib", type=float, default=2.0, help="skip running naive attention above this")
  parser.add_argument("--no_torch", action="store_true")
  parser.add_argument("--side", choices=("jax", "torch"), default=None, help=argparse.SUPPRESS)
  args = parser.parse_args()
  lengths = [int(x) for x in args.lengths.split(",")]
  if args.side:
    print(json.dumps((_jax_side if args.side == "jax" else _torch_side)(args, lengths)))
    return
  print(f"# attention fwd+bwd, float32, B={args.batch} N={args.heads} H={args.head_dim}, causal={args.causal}, "
        f"block={args.block}, {args.threads} threads, each framework in its own process\n# {machine_description()}")
  argv = [f"--lengths={args.lengths}", f"--batch={args.batch}", f"--heads={args.heads}",
          f"--head_dim={args.head_dim}", f"--block={args.block}", f"--reps={args.reps}",
          f"--max_naive_gib={args.max_naive_gib}"] + (["--causal"] if args.causal else [])
  sides = ["jax"] + ([] if args.no_torch else ["torch"])
  results = {side: [] for side in sides}
  for _ in range(args.rounds):
    for side in sides:
      results[side].append(run_side("benchmarks.kernels", side, argv, args.threads))
  rows = []
  for t in lengths:
    times, mem = {}, results["jax"][0][str(t)]["mem"]
    for side in sides:
      for name in {n for r in results[side] for n in r.get(str(t), {}).get("times", {})}:
        times[name] = statistics.median(r[str(t)]["times"][name] for r in results[side] if str(t) in r)
    fmt_t = lambda kind: f"{times[kind] * 1e3:.1f}" if kind in times else "—"
    fmt_r = lambda kind, base: f"{times[kind] / times[base]:.2f}" if kind in times and base in times else "—"
    fmt_m = lambda kind: f"{mem[kind] / 2**20:.1f}" if mem.get(kind) is not None else "—"
    rows.append([t, fmt_t("jax.nn"), fmt_t("xla"), fmt_r("xla", "jax.nn"), fmt_t("blockwise"),
                 fmt_r("blockwise", "jax.nn"), fmt_t("torch"), fmt_r("blockwise", "torch"), fmt_m("jax.nn"),
                 fmt_m("blockwise"), f"{mem['blockwise'] / mem['jax.nn']:.3f}" if mem.get("jax.nn") else "—"])
    print(f"T={t}: " + ", ".join(f"{name} {sec * 1e3:.1f} ms" for name, sec in times.items()), flush=True)
  print()
  print(markdown_table(
      ["T", "jax.nn ms", "xla ms", "xla / jax.nn", "blockwise ms", "blockwise / jax.nn", "torch ms (own process)",
       "blockwise / torch", "jax.nn temp MiB", "blockwise temp MiB", "blockwise / naive mem"], rows))


if __name__ == "__main__":
  main()
