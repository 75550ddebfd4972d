"""Relative-position attention, forward + backward, float32 on the local backend: time ratios and compiled temp memory.

    python -m benchmarks.relative                       # T = 256, 512; B = 16, N = 2, H = 64, K = 64
    python -m benchmarks.relative --lengths=256 --reps=3

Interleaved in one process, so that the ratios survive a noisy machine; every variant is causal, with positions per
row (as packed documents have them):
  plain      attnjax scaled_dot_product_attention(implementation="xla"), no positions: the reference (ratio 1.00)
  t5         the same with T5's bucketed bias [B, N, T, S] (``t5_relative_bias``)
  gathered   Shaw et al.'s relative attention from the gathered [B, T, S, H] vectors (``shaw_relative_embeddings``)
  factored   the same function from the factored ``RelativeTable`` (``shaw_relative_table``), what the layers use
Temp memory is ``memory_analysis().temp_size_in_bytes`` of the compiled fwd+bwd program.
"""

from __future__ import annotations

import argparse

import jax
import jax.numpy as jnp

from attnjax.kernels import (relative_attention, scaled_dot_product_attention, shaw_relative_embeddings,
                             shaw_relative_table, t5_relative_bias)
from benchmarks.common import interleaved_medians, machine_description, markdown_table

VARIANTS = ("plain", "t5", "gathered", "factored")


def _loss(kind: str, k_max: int):
  def attend(q, k, v, tables, pos):
    wk, wv, buckets = tables
    if kind == "plain":
      return scaled_dot_product_attention(q, k, v, is_causal=True, implementation="xla")
    if kind == "t5":
      bias = t5_relative_bias(buckets, pos, pos, bidirectional=False)
      return scaled_dot_product_attention(q, k, v, bias=bias, is_causal=True, implementation="xla")
    form = shaw_relative_embeddings if kind == "gathered" else shaw_relative_table
    return relative_attention(q, k, v, rel_key=form(wk, pos, pos, k_max), rel_value=form(wv, pos, pos, k_max),
                              is_causal=True)
  return lambda q, k, v, tables, pos: jnp.sum(jnp.sin(attend(q, k, v, tables, pos)))


def main():
  parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
  parser.add_argument("--lengths", default="256,512")
  parser.add_argument("--batch", type=int, default=16)
  parser.add_argument("--heads", type=int, default=2)
  parser.add_argument("--head_dim", type=int, default=64)
  parser.add_argument("--max_distance", type=int, default=64, help="Shaw's clipping distance K")
  parser.add_argument("--reps", type=int, default=5)
  args = parser.parse_args()
  print(f"# relative attention fwd+bwd, float32, causal, B={args.batch} N={args.heads} H={args.head_dim} "
        f"K={args.max_distance}\n# {machine_description()}")
  rows = []
  for t in (int(x) for x in args.lengths.split(",")):
    keys = jax.random.split(jax.random.PRNGKey(t), 6)
    q, k, v = (jax.random.normal(kk, (args.batch, t, args.heads, args.head_dim)) for kk in keys[:3])
    tables = (jax.random.normal(keys[3], (2 * args.max_distance + 1, args.head_dim)),
              jax.random.normal(keys[4], (2 * args.max_distance + 1, args.head_dim)),
              jax.random.normal(keys[5], (32, args.heads)))
    pos = jnp.tile(jnp.arange(t), (args.batch, 1))
    fns, mem = {}, {}
    for kind in VARIANTS:
      grad = jax.jit(jax.value_and_grad(_loss(kind, args.max_distance), argnums=(0, 1, 2, 3)))
      compiled = grad.lower(q, k, v, tables, pos).compile()
      stats = compiled.memory_analysis()
      mem[kind] = None if stats is None else stats.temp_size_in_bytes
      fns[kind] = lambda c=compiled: jax.block_until_ready(c(q, k, v, tables, pos))
    times = interleaved_medians(fns, args.reps)
    print(f"T={t}: " + ", ".join(f"{name} {sec * 1e3:.1f} ms" for name, sec in times.items()), flush=True)
    rows.append([t] + [f"{times[kind] * 1e3:.1f}" for kind in VARIANTS]
                + [f"{times[kind] / times['plain']:.2f}" for kind in VARIANTS[1:]]
                + [f"{times['gathered'] / times['factored']:.1f}"]
                + ["—" if mem[kind] is None else f"{mem[kind] / 2**20:.0f}" for kind in ("gathered", "factored")])
  print()
  print(markdown_table(["T"] + [f"{kind} ms" for kind in VARIANTS] + [f"{kind} / plain" for kind in VARIANTS[1:]]
                       + ["gathered / factored", "gathered temp MiB", "factored temp MiB"], rows))


if __name__ == "__main__":
  main()
