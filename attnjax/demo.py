"""A tour of the kernels on the embedded default (no data, no network): ``python -m attnjax.demo``.

Prints, for a small random problem, how far each implementation of scaled dot-product attention is from
``jax.nn.dot_product_attention`` (values and gradients), and how much compiled temporary memory the exact blockwise
kernel needs against the materialised one as the length grows.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from attnjax import kernels


def _max_diff(a, b) -> float:
  return float(jnp.max(jnp.abs(a - b)))


def main() -> None:
  b, t, n, h = 2, 256, 4, 32
  q, k, v = (jax.random.normal(key, (b, t, n, h)) for key in jax.random.split(jax.random.PRNGKey(0), 3))
  valid = jnp.arange(t)[None] < jnp.array([[t], [t - 57]])
  mask = kernels.padding_mask(valid, valid)
  reference = jax.nn.dot_product_attention(q, k, v, mask=mask, is_causal=True)
  keep = valid[:, :, None, None]  # jax.nn has no rule for padded query rows; compare real rows only
  print(f"scaled dot-product attention, B={b} T={t} N={n} H={h}, padding + causal mask")
  for impl in ("xla", "blockwise"):
    out = kernels.scaled_dot_product_attention(q, k, v, mask=mask, is_causal=True, implementation=impl, block_q=64,
                                               block_kv=64)
    print(f"  {impl:9s} max |out - jax.nn| = {_max_diff(out * keep, reference * keep):.2e}")
  grad = lambda impl: jax.grad(lambda q: jnp.sum(kernels.scaled_dot_product_attention(
      q, k, v, mask=mask, is_causal=True, implementation=impl, block_q=64, block_kv=64) ** 2))(q)
  print(f"  blockwise max |dq - dq_xla|  = {_max_diff(grad('blockwise'), grad('xla')):.2e}")

  print("compiled temp memory of fwd+bwd (B=1, N=4, H=64, float32):")
  for length in (1024, 4096, 16384):
    spec = jax.ShapeDtypeStruct((1, length, 4, 64), jnp.float32)
    mib = {}
    for impl in ("xla", "blockwise"):
      f = jax.jit(jax.grad(lambda q, k, v, impl=impl: jnp.sum(kernels.scaled_dot_product_attention(
          q, k, v, implementation=impl)), (0, 1, 2)))
      stats = f.lower(spec, spec, spec).compile().memory_analysis()
      mib[impl] = float("nan") if stats is None else stats.temp_size_in_bytes / 2**20
    print(f"  T={length:6d}: xla {mib['xla']:9.1f} MiB   blockwise {mib['blockwise']:7.1f} MiB")


if __name__ == "__main__":
  main()
