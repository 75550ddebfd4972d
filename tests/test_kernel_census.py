"""The kernel census of a compiled program: what one call launches, read from its optimised HLO."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import optax

from attnjax.compile import kernel_census

# A scheduled module as XLA's GPU compiler prints one (shortened): two fusions and a cuBLAS call in the entry, a
# while loop whose body holds one more fusion and a copy, bookkeeping around them.
HLO = """HloModule jit_step, is_scheduled=true

%fused_computation (p0: f32[8,64]) -> f32[8,64] {
  %p0 = f32[8,64]{1,0} parameter(0)
  ROOT %tanh.1 = f32[8,64]{1,0} tanh(%p0), metadata={op_name="jit(step)/jvp(tanh)"}
}

%body (arg: (s32[], f32[64])) -> (s32[], f32[64]) {
  %arg = (s32[], f32[64]{0}) parameter(0)
  %i = s32[] get-tuple-element(%arg), index=0
  %v = f32[64]{0} get-tuple-element(%arg), index=1
  %fusion.9 = f32[64]{0} fusion(%v), kind=kLoop, calls=%fused_computation, metadata={op_name="jit(step)/adam/mul"}
  %copy.2 = f32[64]{0} copy(%fusion.9), metadata={op_name="jit(step)/adam/copy"}
  ROOT %t = (s32[], f32[64]{0}) tuple(%i, %copy.2)
}

%cond (arg: (s32[], f32[64])) -> pred[] {
  %arg = (s32[], f32[64]{0}) parameter(0)
  %i = s32[] get-tuple-element(%arg), index=0
  %c = s32[] constant(3)
  ROOT %lt = pred[] compare(%i, %c), direction=LT, metadata={op_name="jit(step)/while/lt"}
}

ENTRY %main (x: f32[8,64], w: f32[64,64]) -> f32[8,64] {
  %x = f32[8,64]{1,0} parameter(0)
  %w = f32[64,64]{1,0} parameter(1)
  %gemm = (f32[8,64]{1,0}, s8[0]{0}) custom-call(%x, %w), custom_call_target="__cublas$gemm", metadata={op_name="jit(step)/jvp(dot_general)"}
  %gte = f32[8,64]{1,0} get-tuple-element(%gemm), index=0
  %fusion = f32[8,64]{1,0} fusion(%gte), kind=kLoop, calls=%fused_computation, metadata={op_name="jit(step)/transpose(jvp(tanh))/mul"}
  %bits = u32[8,64]{1,0} fusion(%x), kind=kLoop, calls=%fused_computation, metadata={op_name="jit(step)/jvp(random_bits)"}
  %init = (s32[], f32[64]{0}) tuple(%bits, %bits)
  %loop = (s32[], f32[64]{0}) while(%init), condition=%cond, body=%body
  ROOT %out = f32[8,64]{1,0} bitcast(%fusion)
}
"""


def test_the_census_counts_launches_and_attributes_them_by_trace_path():
  c = kernel_census(HLO)
  # entry: gemm, fusion, bits; loop body: fusion.9, copy.2; condition: compare (a kernel: it is not fused here)
  assert c["kernels"] == 6
  assert (c["fusions"], c["library_calls"], c["copies"], c["other"], c["loops"]) == (3, 1, 1, 1, 1)
  assert (c["forward"], c["backward"], c["random"], c["update"]) == (1, 1, 1, 3)
  assert c["by_opcode"] == {"custom-call": 1, "fusion": 3, "copy": 1, "compare": 1}


def test_a_compiled_train_step_has_forward_backward_and_update_kernels():
  def loss(p, x):
    return jnp.mean(jnp.tanh(x @ p["w"] + p["b"]) ** 2)

  tx = optax.adam(1e-3)

  def step(p, s, x):
    g = jax.grad(loss)(p, x)
    u, s = tx.update(g, s, p)
    return optax.apply_updates(p, u), s

  p = {"w": jnp.zeros((64, 64)), "b": jnp.zeros(64)}
  c = kernel_census(jax.jit(step).lower(p, tx.init(p), jnp.zeros((8, 64))).compile().as_text())
  assert c["forward"] >= 1 and c["backward"] >= 1 and c["update"] >= 1
  assert c["kernels"] == c["forward"] + c["backward"] + c["update"] + c["random"] == sum(c["by_opcode"].values())
  # the census of the same step without its optimiser has fewer update kernels: the update is where it is counted
  bare = kernel_census(jax.jit(lambda p, x: jax.grad(loss)(p, x)).lower(p, jnp.zeros((8, 64))).compile().as_text())
  assert bare["update"] < c["update"]
