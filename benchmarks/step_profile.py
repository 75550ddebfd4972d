"""Where the attnjax Transformer train step spends its time on CPU, and what the candidate speed-ups buy.

    python -m benchmarks.step_profile                  # small and base, 5 interleaved repetitions
    python -m benchmarks.step_profile --configs=small --reps=3

Variants of the step of ``benchmarks.train_step`` (same shapes, float32), all compiled in this one process and timed
interleaved, so that the machine's noise hits them alike; each is reported as a ratio to the full step:

* ``forward``: the loss alone; ``forward+backward``: its gradients, no optimizer; the rest of the full step is Adam;
* ``no dropout``: dropout rate 0 (the cost of drawing and applying the dropout masks);
* the full step draws its dropout bits from a counter hash (``Transformer(dropout_bits="hash")``, the default);
  ``threefry dropout (Flax)`` is ``flax.linen.Dropout``'s threefry bits, and the ``rbg`` / ``unsafe_rbg`` rows the
  same with XLA's RngBitGenerator keys (``jax.random.key(..., impl=)``), whose output depends on how the program is
  sharded.
"""

from __future__ import annotations

import argparse

import jax
import jax.numpy as jnp
import optax

from attnjax.models.transformer import Transformer
from attnjax.models.losses import smoothed_cross_entropy
from benchmarks.common import interleaved_medians, machine_description, markdown_table
from benchmarks.train_step import CONFIGS, add_step_arguments, token_batch


def variants(cfg, vocab, src, tgt_in, tgt_out):
  """name -> a no-argument function running one compiled step of that variant."""
  def model_with(dropout, bits="hash"):
    return Transformer(src_vocab_size=vocab, tgt_vocab_size=vocab, num_encoder_layers=cfg["layers"],
                       num_decoder_layers=cfg["layers"], d_model=cfg["d_model"], num_heads=cfg["num_heads"],
                       d_ff=cfg["d_ff"], dropout_rate=dropout, shared_vocab=True, share_source_embeddings=True,
                       dropout_bits=bits)
  import flax  # pylint: disable=g-import-not-at-top
  params = flax.linen.meta.unbox(model_with(0.1).init(jax.random.PRNGKey(0), src, tgt_in)["params"])
  tx = optax.adam(1e-4, b2=0.98, eps=1e-9)
  opt_state = tx.init(params)
  ones = jnp.ones_like(tgt_out, jnp.float32)

  def loss_of(model):
    def loss(p, rng):
      logits = model.apply({"params": p}, src, tgt_in, deterministic=False, rngs={"dropout": rng})
      stats = smoothed_cross_entropy(logits, tgt_out, ones, 0.1)
      return stats["loss_sum"] / stats["ntokens"]
    return loss

  def full(model):
    loss = loss_of(model)

    def step(p, o, rng):
      value, grads = jax.value_and_grad(loss)(p, rng)
      updates, o = tx.update(grads, o, p)
      return optax.apply_updates(p, updates), o, value
    return step

  dropout, no_dropout, threefry = model_with(0.1), model_with(0.0), model_with(0.1, "threefry")
  programs = {
      "full step": (full(dropout), "threefry2x32"),
      "forward+backward": (lambda p, o, rng: (jax.grad(loss_of(dropout))(p, rng), o, 0.0), "threefry2x32"),
      "forward": (lambda p, o, rng: (p, o, loss_of(dropout)(p, rng)), "threefry2x32"),
      "no dropout": (full(no_dropout), "threefry2x32"),
      "threefry dropout (Flax)": (full(threefry), "threefry2x32"),
      "threefry dropout, rbg keys": (full(threefry), "rbg"),
      "threefry dropout, unsafe_rbg keys": (full(threefry), "unsafe_rbg"),
  }
  runs = {}
  for name, (fn, impl) in programs.items():
    compiled = jax.jit(fn).lower(params, opt_state, jax.random.key(1, impl=impl)).compile()
    counter = iter(range(2, 10**9))

    def run(compiled=compiled, impl=impl, counter=counter):
      jax.block_until_ready(compiled(params, opt_state, jax.random.key(next(counter), impl=impl)))
    runs[name] = run
  return runs


def main():
  parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
  add_step_arguments(parser)
  args = parser.parse_args()
  batch = token_batch(args)
  rows = []
  for name in args.configs.split(","):
    times = interleaved_medians(variants(CONFIGS[name], args.vocab, *batch), args.reps)
    base = times["full step"]
    rows += [[name, variant, f"{seconds * 1e3:.1f}", f"{seconds / base:.2f}"] for variant, seconds in times.items()]
  print(machine_description())
  print(markdown_table(["config", "variant", "ms", "/ full step"], rows))


if __name__ == "__main__":
  main()
