"""Masked-LM train step (fwd + bwd + AdamW), float32, CPU: attnjax's ``BertMaskedLM`` against Hugging Face's
``BertForMaskedLM`` in torch, the same size and batch.

    python -m benchmarks.mlm                        # MiniLM-L6-H384 (6 x 384, 12 heads, d_ff 1536), 16 x 128 tokens
    python -m benchmarks.mlm --batch=32 --reps=3
    python -m benchmarks.mlm --shape=budget --batch=64 --predictions=19   # experiments/wikipedia/bert_mlm_budget.py

Both sides: BERT's uncased vocabulary (30,522), rows of ``--length`` tokens, 15% of them predicted (at most
``--predictions`` a row), dropout 0.1, AdamW with weight decay 0.01; the same number of threads, each framework in a
process of its own, alternating ``--rounds`` times. attnjax computes the vocabulary projection at the predicted
positions only (as BERT's own implementation does); ``BertForMaskedLM`` computes it at every position and ignores
the others in its loss (``labels = -100``): that is part of what is compared. tokens/s counts every token of the rows.
The attnjax process also times the same step with the projection at every position (``dense``), the logits of the
predicted positions then gathered for the loss: what sparse prediction buys.

``--shape=budget`` is the budget recipe's encoder (4 pre-norm layers of 256, 4 heads, d_ff 1,024, no dropout;
``experiments/wikipedia/bert_mlm_budget.py``); the torch side is the same size post-norm (Hugging Face's BERT has no
pre-norm option; the two cost the same arithmetic) without dropout.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics

import jax
import numpy as np
import optax

from benchmarks.common import (compiled_step_runner, interleaved_medians, machine_description, markdown_table,
                               run_side)

MINILM = dict(d_model=384, num_layers=6, num_heads=12, d_ff=1536)
VOCAB = 30522


def shape(name: str) -> tuple[dict, float, bool]:
  """(sizes, dropout, pre-norm) of ``--shape``."""
  if name == "minilm":
    return MINILM, 0.1, False
  from experiments.wikipedia import bert_mlm_budget as budget  # pylint: disable=g-import-not-at-top
  return dict(d_model=budget.D_MODEL, num_layers=budget.LAYERS, num_heads=budget.HEADS, d_ff=budget.D_FF), 0.0, True


def batch_arrays(args):
  """Rows of random ids, one segment each, with ``--predictions`` masked positions a row (the same on both sides)."""
  rng = np.random.default_rng(0)
  ids = rng.integers(5, VOCAB, (args.batch, args.length)).astype(np.int32)
  positions = np.sort(np.stack([rng.choice(np.arange(1, args.length - 1), args.predictions, replace=False)
                                for _ in range(args.batch)]), axis=1).astype(np.int32)
  targets = np.take_along_axis(ids, positions, axis=1)
  inputs = ids.copy()
  np.put_along_axis(inputs, positions, 4, axis=1)  # [MASK]
  return inputs, positions, targets


def attnjax_step(args):
  from attnjax.models.bert import BertMaskedLM  # pylint: disable=g-import-not-at-top
  from attnjax.families import masked_lm  # pylint: disable=g-import-not-at-top
  inputs, positions, targets = batch_arrays(args)
  sizes, dropout, pre_norm = shape(args.shape)
  model = BertMaskedLM(vocab_size=VOCAB, max_length=512, dropout_rate=dropout, attention_dropout_rate=dropout,
                       pre_norm=pre_norm, **sizes)
  batch = {"input_ids": inputs, "segment_ids": np.ones_like(inputs), "positions": np.broadcast_to(
      np.arange(args.length, dtype=np.int32), inputs.shape).copy(), "mlm_positions": positions, "mlm_ids": targets,
           "mlm_weights": np.ones(positions.shape, np.float32)}
  params = __import__("flax").linen.meta.unbox(
      model.init(jax.random.PRNGKey(0), batch["input_ids"], batch["segment_ids"], batch["positions"],
                 batch["mlm_positions"])["params"])
  tx = optax.adamw(1e-4, b1=0.9, b2=0.999, eps=1e-6, weight_decay=0.01)

  def sparse_loss(p, rng):
    stats = masked_lm.mlm_loss_stats(model, p, batch, rng, False)
    return stats["loss_sum"] / stats["ntokens"]

  def dense_loss(p, rng):  # the projection at every position, then the predicted positions' logits
    logits = model.apply({"params": p}, batch["input_ids"], batch["segment_ids"], batch["positions"],
                         deterministic=False, rngs={"dropout": rng})
    picked = jax.numpy.take_along_axis(logits, batch["mlm_positions"][..., None], axis=1)
    stats = masked_lm.mlm_statistics(picked, batch["mlm_ids"], batch["mlm_weights"])
    return stats["loss_sum"] / stats["ntokens"]

  def make_step(loss):
    def step(params, opt_state, rng):
      value, grads = jax.value_and_grad(loss)(params, rng)
      updates, opt_state = tx.update(grads, opt_state, params)
      return optax.apply_updates(params, updates), opt_state, value
    return step

  fresh = lambda tree: jax.tree_util.tree_map(jax.numpy.copy, tree)  # noqa: E731  (each runner donates its own)
  return {name: compiled_step_runner(make_step(loss), fresh(params), tx.init(fresh(params)))
          for name, loss in (("sparse", sparse_loss), ("dense", dense_loss))}


def torch_step(args):
  try:
    import torch  # pylint: disable=g-import-not-at-top
    import transformers  # pylint: disable=g-import-not-at-top
  except ImportError:
    return None
  torch.set_num_threads(args.threads)
  torch.manual_seed(0)
  sizes, dropout, _ = shape(args.shape)
  config = transformers.BertConfig(vocab_size=VOCAB, hidden_size=sizes["d_model"],
                                   num_hidden_layers=sizes["num_layers"], num_attention_heads=sizes["num_heads"],
                                   intermediate_size=sizes["d_ff"], hidden_act="gelu", hidden_dropout_prob=dropout,
                                   attention_probs_dropout_prob=dropout, layer_norm_eps=1e-12)
  model = transformers.BertForMaskedLM(config).train()
  inputs, positions, targets = batch_arrays(args)
  labels = np.full(inputs.shape, -100, np.int64)
  np.put_along_axis(labels, positions, targets, axis=1)
  ids, labels = torch.tensor(inputs, dtype=torch.long), torch.tensor(labels)
  mask = torch.ones_like(ids)
  no_decay = [p for n, p in model.named_parameters() if p.ndim < 2]
  decay = [p for n, p in model.named_parameters() if p.ndim >= 2]
  opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.01}, {"params": no_decay, "weight_decay": 0.0}],
                          lr=1e-4, betas=(0.9, 0.999), eps=1e-6)

  def run():
    opt.zero_grad(set_to_none=True)
    loss = model(input_ids=ids, attention_mask=mask, labels=labels).loss
    loss.backward()
    opt.step()
  return run


def _side(args) -> dict:
  if args.side == "attnjax":
    runners = attnjax_step(args)
    seconds = interleaved_medians({name: run for name, (run, _) in runners.items()}, args.reps)
    return {"seconds": seconds["sparse"], "dense_seconds": seconds["dense"], "flops": runners["sparse"][1],
            "dense_flops": runners["dense"][1]}
  else:
    run, flops = torch_step(args), None
    if run is None:
      return {}
  return {"seconds": interleaved_medians({"step": run}, args.reps)["step"], "flops": flops}


def main():
  parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
  parser.add_argument("--batch", type=int, default=16)
  parser.add_argument("--length", type=int, default=128)
  parser.add_argument("--predictions", type=int, default=20)
  parser.add_argument("--reps", type=int, default=5)
  parser.add_argument("--rounds", type=int, default=2)
  parser.add_argument("--threads", type=int, default=os.cpu_count() or 1)
  parser.add_argument("--shape", choices=("minilm", "budget"), default="minilm")
  parser.add_argument("--side", choices=("attnjax", "torch"), default=None, help=argparse.SUPPRESS)
  args = parser.parse_args()
  if args.side:
    print(json.dumps(_side(args)))
    return
  argv = [f"--batch={args.batch}", f"--length={args.length}", f"--predictions={args.predictions}",
          f"--reps={args.reps}", f"--shape={args.shape}"]
  results = {"attnjax": [], "torch": []}
  for _ in range(args.rounds):
    for side in results:
      results[side].append(run_side("benchmarks.mlm", side, argv, args.threads))
  seconds = {side: statistics.median(r["seconds"] for r in rs) for side, rs in results.items() if rs and rs[0]}
  tokens = args.batch * args.length
  flops = results["attnjax"][0]["flops"]
  dense = statistics.median(r["dense_seconds"] for r in results["attnjax"])
  sizes, dropout, pre_norm = shape(args.shape)
  print(f"# masked-LM train step, float32, {args.shape}: {sizes['num_layers']} x {sizes['d_model']}"
        f"{' pre-norm' if pre_norm else ''}, dropout {dropout:g}, batch {args.batch} x {args.length} tokens, "
        f"{args.predictions} predictions a row, {args.threads} threads, each framework in its own process\n"
        f"# {machine_description()}")
  row = [f"{tokens / seconds['attnjax']:.0f}", f"{tokens / dense:.0f}", f"{dense / seconds['attnjax']:.2f}×",
         f"{tokens / seconds['torch']:.0f}" if "torch" in seconds else "—",
         f"{seconds['torch'] / seconds['attnjax']:.2f}×" if "torch" in seconds else "—",
         f"{flops / seconds['attnjax'] / 1e9:.1f}"]
  print(markdown_table(["attnjax tok/s", "attnjax dense tok/s", "sparse / dense speed", "BertForMaskedLM (torch) "
                        "tok/s", "attnjax / torch", "attnjax GFLOP/s"], [row]))


if __name__ == "__main__":
  main()
