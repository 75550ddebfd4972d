"""Transformer train step (fwd + bwd + Adam), float32, CPU: attnjax vs torch.nn.Transformer with the same dims.

    python -m benchmarks.train_step                    # small (d 256, 3+3) and base (d 512, 6+6)
    python -m benchmarks.train_step --configs=small --reps=3
    python -m benchmarks.train_step --configs=tiny --batch=2 --length=8 --vocab=64 --reps=200   # the fixed cost
    python -m benchmarks.train_step --configs=tiny --batch=2 --length=8 --vocab=64 --reps=200 --fused_update

Both sides: batch B × L source and target tokens, vocabulary V, dropout 0.1, label smoothing 0.1, Adam; the same
number of threads, each framework in a process of its own (``--side``), alternating ``--rounds`` times: in one
process the two thread pools slow each other down. Model FLOPs per step are XLA's count for the attnjax
step (``cost_analysis``), credited to both; "of peak" is model FLOP/s over a float32 matmul (M = N = K = 2048)
measured in the same run — the best this machine's BLAS does, not a datasheet number.

``tiny`` (one layer each side, d_model 32) on a few tokens is the step with negligible arithmetic: its time is the
fixed cost of a step (dispatch, the per-parameter kernels of the update). ``--fused_update`` runs the attnjax side's
Adam over flat vectors (``attnjax.training.optim.fused_update``, ``train.fused_update``) instead of per parameter.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics

import jax
import jax.numpy as jnp
import numpy as np
import optax

from attnjax.models.transformer import Transformer
from attnjax.models.losses import smoothed_cross_entropy
from benchmarks.common import (compiled_step_runner, interleaved_medians, machine_description, markdown_table,
                               run_side)

CONFIGS = {
    "tiny": dict(d_model=32, num_heads=2, d_ff=64, layers=1),
    "small": dict(d_model=256, num_heads=4, d_ff=1024, layers=3),
    "base": dict(d_model=512, num_heads=8, d_ff=2048, layers=6),
}


def matmul_peak(n: int = 2048) -> float:
  a = jnp.ones((n, n), jnp.float32)
  f = jax.jit(lambda x: x @ x)
  run = lambda: jax.block_until_ready(f(a))
  return 2 * n**3 / interleaved_medians({"mm": run}, 5)["mm"]


def step_function(cfg, vocab, src, tgt_in, tgt_out, fused_update: bool = False):
  """``(step, params, opt_state)``: the attnjax Transformer's forward, backward and Adam update, not yet jitted
  (with ``fused_update``, Adam over one flat vector: :func:`attnjax.training.optim.fused_update`)."""
  model = Transformer(src_vocab_size=vocab, tgt_vocab_size=vocab, num_encoder_layers=cfg["layers"],
                      num_decoder_layers=cfg["layers"], d_model=cfg["d_model"], num_heads=cfg["num_heads"],
                      d_ff=cfg["d_ff"], dropout_rate=0.1, shared_vocab=True, share_source_embeddings=True)
  params = __import__("flax").linen.meta.unbox(model.init(jax.random.PRNGKey(0), src, tgt_in)["params"])
  tx = optax.adam(1e-4, b2=0.98, eps=1e-9)
  if fused_update:
    from attnjax.training.optim import fused_update as fuse  # pylint: disable=g-import-not-at-top
    tx = fuse(tx)

  def step(params, opt_state, rng):
    def loss(p):
      logits = model.apply({"params": p}, src, tgt_in, deterministic=False, rngs={"dropout": rng})
      stats = smoothed_cross_entropy(logits, tgt_out, jnp.ones_like(tgt_out, jnp.float32), 0.1)
      return stats["loss_sum"] / stats["ntokens"]
    value, grads = jax.value_and_grad(loss)(params)
    updates, opt_state = tx.update(grads, opt_state, params)
    return optax.apply_updates(params, updates), opt_state, value
  return step, params, tx.init(params)


def attnjax_step(cfg, vocab, src, tgt_in, tgt_out, fused_update: bool = False):
  return compiled_step_runner(*step_function(cfg, vocab, src, tgt_in, tgt_out, fused_update))


def torch_step(cfg, vocab, src, tgt_in, tgt_out, threads):
  try:
    import torch  # pylint: disable=g-import-not-at-top
  except ImportError:
    return None
  torch.set_num_threads(threads)
  torch.manual_seed(0)
  d = cfg["d_model"]

  class Model(torch.nn.Module):
    def __init__(self):
      super().__init__()
      self.embed = torch.nn.Embedding(vocab, d)
      self.core = torch.nn.Transformer(d, cfg["num_heads"], cfg["layers"], cfg["layers"], cfg["d_ff"], dropout=0.1,
                                       batch_first=True)
      # the position table and the causal mask once, as attnjax's compiled step holds them as constants
      length = max(src.shape[1], tgt_in.shape[1])
      self.register_buffer("pos", torch.tensor(np.asarray(
          __import__("attnjax").kernels.sinusoidal_positions(length, d))))
      self.register_buffer("mask", self.core.generate_square_subsequent_mask(tgt_in.shape[1]))

    def forward(self, s, t):
      h = self.core(self.embed(s) * d**0.5 + self.pos[:s.shape[1]], self.embed(t) * d**0.5 + self.pos[:t.shape[1]],
                    tgt_mask=self.mask, tgt_is_causal=True)
      return h @ self.embed.weight.T  # tied output, as on the attnjax side

  model = Model()
  opt = torch.optim.Adam(model.parameters(), lr=1e-4, betas=(0.9, 0.98), eps=1e-9)
  ts, ti, to = (torch.tensor(np.asarray(x), dtype=torch.long) for x in (src, tgt_in, tgt_out))
  loss_fn = torch.nn.CrossEntropyLoss(label_smoothing=0.1)

  def run():
    opt.zero_grad(set_to_none=True)
    logits = model(ts, ti)
    loss = loss_fn(logits.reshape(-1, vocab), to.reshape(-1))
    loss.backward()
    opt.step()
  return run


def _side(args) -> dict:
  src, tgt_in, tgt_out = token_batch(args)
  out = {"peak": matmul_peak()} if args.side == "attnjax" else {}
  for name in args.configs.split(","):
    cfg = CONFIGS[name]
    if args.side == "attnjax":
      run, flops = attnjax_step(cfg, args.vocab, src, tgt_in, tgt_out, args.fused_update)
    else:
      run, flops = torch_step(cfg, args.vocab, src, tgt_in, tgt_out, args.threads), None
      if run is None:
        return {}
    out[name] = {"seconds": interleaved_medians({"step": run}, args.reps)["step"], "flops": flops}
  return out


def add_step_arguments(parser: argparse.ArgumentParser) -> None:
  """The step's shapes and repetitions (shared with ``benchmarks.step_profile``)."""
  parser.add_argument("--configs", default="small,base")
  parser.add_argument("--batch", type=int, default=16)
  parser.add_argument("--length", type=int, default=64)
  parser.add_argument("--vocab", type=int, default=8192)
  parser.add_argument("--reps", type=int, default=5)
  parser.add_argument("--fused_update", action="store_true", help="attnjax's Adam over flat vectors")


def token_batch(args):
  """``(src, tgt_in, tgt_out)`` of random ids, ``[batch, length]`` each."""
  rng = np.random.default_rng(0)
  src = jnp.asarray(rng.integers(3, args.vocab, (args.batch, args.length)), jnp.int32)
  tgt = jnp.asarray(rng.integers(3, args.vocab, (args.batch, args.length + 1)), jnp.int32)
  return src, tgt[:, :-1], tgt[:, 1:]


def main():
  parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
  add_step_arguments(parser)
  parser.add_argument("--rounds", type=int, default=2)
  parser.add_argument("--threads", type=int, default=os.cpu_count() or 1)
  parser.add_argument("--side", choices=("attnjax", "torch"), default=None, help=argparse.SUPPRESS)
  args = parser.parse_args()
  if args.side:
    print(json.dumps(_side(args)))
    return
  argv = [f"--configs={args.configs}", f"--batch={args.batch}", f"--length={args.length}", f"--vocab={args.vocab}",
          f"--reps={args.reps}"] + (["--fused_update"] if args.fused_update else [])
  results = {"attnjax": [], "torch": []}
  for _ in range(args.rounds):
    for side in results:
      results[side].append(run_side("benchmarks.train_step", side, argv, args.threads))
  peak = statistics.median(r["peak"] for r in results["attnjax"])
  print(f"# train step, float32, batch {args.batch} × {args.length} tokens per side, vocab {args.vocab}, "
        f"{args.threads} threads, each framework in its own process"
        f"{', attnjax with the fused update' if args.fused_update else ''}\n# {machine_description()}\n"
        f"# measured float32 matmul peak: {peak / 1e9:.1f} GFLOP/s")
  tokens = args.batch * args.length
  rows = []
  for name in args.configs.split(","):
    seconds = {side: statistics.median(r[name]["seconds"] for r in rs) for side, rs in results.items()
               if rs and all(name in r for r in rs)}
    flops = results["attnjax"][0][name]["flops"]
    tps = {k: tokens / v for k, v in seconds.items()}
    row = [name, f"{1e3 * seconds['attnjax']:.2f}", f"{1e3 * seconds['torch']:.2f}" if "torch" in seconds else "—",
           f"{tps['attnjax']:.0f}", f"{tps['torch']:.0f}" if "torch" in tps else "—",
           f"{tps['attnjax'] / tps['torch']:.2f}×" if "torch" in tps else "—",
           f"{flops / seconds['attnjax'] / 1e9:.1f}", f"{100 * flops / seconds['attnjax'] / peak:.0f}%",
           f"{100 * flops / seconds['torch'] / peak:.0f}%" if "torch" in seconds else "—"]
    rows.append(row)
  print(markdown_table(["config", "attnjax step (ms)", "torch step (ms)", "attnjax tgt tok/s", "torch tgt tok/s", "attnjax / torch", "attnjax GFLOP/s",
                        "attnjax of matmul peak", "torch of matmul peak"], rows))


if __name__ == "__main__":
  main()
