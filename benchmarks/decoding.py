"""Beam-4 decoding with the incremental cache vs recomputing the whole prefix at every step.

    python -m benchmarks.decoding                         # Transformer and LSTM+Bahdanau, 16/32/64 output tokens
    python -m benchmarks.decoding --lengths=16 --reps=2
    python -m benchmarks.decoding --models=transformer_3x3 --src_len=400 --lengths=100   # summarization's shape

The recomputing baseline is the same beam search (attnjax.decoding) over a wrapper model whose "cache" is only the
token prefix: every step re-runs the decoder over the whole prefix buffer and reads the logits of the newest position.
A third column, for models whose cache holds per-source entries (the Transformer's projected encoder-decoder keys and
values, under ``PER_SOURCE``), times the same cached search with those entries renamed, so that beam search copies
them at every step like the rest of the cache: what leaving them in place saves.

Models are randomly initialised (decoding speed does not depend on training), and EOS is suppressed so that every
hypothesis runs exactly to the requested length.
"""

from __future__ import annotations

import argparse
import functools

import flax.linen as nn
import jax
import jax.numpy as jnp

from attnjax.decoding import beam_search
from attnjax.models.interface import PER_SOURCE, DecoderOutput
from attnjax.models.rnn_seq2seq import RNNSeq2Seq
from attnjax.models.transformer import Transformer
from benchmarks.common import interleaved_medians, machine_description, markdown_table


class RecomputePrefix(nn.Module):
  """The interface without a real cache: each step decodes the full prefix again (O(L²) work for L tokens)."""
  inner: nn.Module
  eos_id: int = 2

  def encode(self, src, src_mask=None, *, deterministic=True):
    return self.inner.encode(src, src_mask, deterministic=deterministic)

  def init_cache(self, memory, max_length):
    batch = memory["src_mask"].shape[0]
    return {"index": jnp.zeros((batch,), jnp.int32), "tokens": jnp.zeros((batch, max_length), jnp.int32)}

  def decode(self, tgt_in, memory, cache=None, *, deterministic=True, return_attention=False):
    i = cache["index"][0]
    tokens = jax.lax.dynamic_update_slice_in_dim(cache["tokens"], tgt_in, i, axis=1)
    out = self.inner.decode(tokens, memory, deterministic=deterministic)
    logits = jax.lax.dynamic_slice_in_dim(out.logits, i, 1, axis=1)
    return DecoderOutput(logits, {"index": cache["index"] + 1, "tokens": tokens}, None)

  def __call__(self, src, tgt_in, src_mask=None, *, deterministic=True):
    return self.inner(src, tgt_in, src_mask, deterministic=deterministic)


def _rename(tree, old: str, new: str):
  if isinstance(tree, dict):
    return {(new if k == old else k): _rename(v, old, new) for k, v in tree.items()}
  if isinstance(tree, (tuple, list)):
    return type(tree)(_rename(v, old, new) for v in tree)
  return tree


def _has_key(tree, key: str) -> bool:
  paths = jax.tree_util.tree_flatten_with_path(tree)[0]
  return any(getattr(k, "key", None) == key for path, _ in paths for k in path)


class CopyPerSource(nn.Module):
  """The cache with its per-source entries under another name: beam search reorders (copies) them at every step."""
  inner: nn.Module
  eos_id: int = 2
  renamed: str = "per_source_reordered"

  def encode(self, *args, **kwargs):
    return self.inner.encode(*args, **kwargs)

  def init_cache(self, *args, **kwargs):
    return _rename(self.inner.init_cache(*args, **kwargs), PER_SOURCE, self.renamed)

  def decode(self, tgt_in, memory, cache=None, **kwargs):
    out = self.inner.decode(tgt_in, memory, _rename(cache, self.renamed, PER_SOURCE), **kwargs)
    return out._replace(cache=_rename(out.cache, PER_SOURCE, self.renamed))

  def __call__(self, *args, **kwargs):
    return self.inner(*args, **kwargs)


class NoEOS(nn.Module):
  """Wraps a model so that EOS is never chosen: every hypothesis decodes to the length limit."""
  inner: nn.Module
  eos_id: int = 2

  def encode(self, *args, **kwargs):
    return self.inner.encode(*args, **kwargs)

  def init_cache(self, *args, **kwargs):
    return self.inner.init_cache(*args, **kwargs)

  def decode(self, *args, **kwargs):
    out = self.inner.decode(*args, **kwargs)
    return out._replace(logits=out.logits.at[..., self.eos_id].set(-1e9))

  def __call__(self, *args, **kwargs):
    return self.inner(*args, **kwargs)


MODELS = {
    "transformer": lambda v: Transformer(src_vocab_size=v, tgt_vocab_size=v, num_encoder_layers=6,
                                         num_decoder_layers=6, d_model=256, num_heads=4, d_ff=1024, dropout_rate=0.0),
    # the summarization study's Transformer arm (experiments/cnn_dailymail_cpu/transformer.py)
    "transformer_3x3": lambda v: Transformer(src_vocab_size=v, tgt_vocab_size=v, num_encoder_layers=3,
                                             num_decoder_layers=3, d_model=256, num_heads=4, d_ff=1024,
                                             dropout_rate=0.0, pre_norm=True, max_length=512),
    "lstm_bahdanau": lambda v: RNNSeq2Seq(src_vocab_size=v, tgt_vocab_size=v, embed_dim=256, hidden_dim=256,
                                          num_layers=2, attention="bahdanau", dropout_rate=0.0),
}


def main():
  parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
  parser.add_argument("--models", default="transformer,lstm_bahdanau")
  parser.add_argument("--lengths", default="16,32,64")
  parser.add_argument("--batch", type=int, default=8)
  parser.add_argument("--src_len", type=int, default=24)
  parser.add_argument("--vocab", type=int, default=8000)
  parser.add_argument("--beam", type=int, default=4)
  parser.add_argument("--reps", type=int, default=3)
  args = parser.parse_args()
  print(f"# beam-{args.beam} decoding, batch {args.batch}, source length {args.src_len}, vocab {args.vocab}\n"
        f"# {machine_description()}")
  src = jax.random.randint(jax.random.PRNGKey(0), (args.batch, args.src_len), 3, args.vocab)
  rows = []
  for name in args.models.split(","):
    inner = MODELS[name](args.vocab)
    params = inner.init(jax.random.PRNGKey(1), src, src[:, :4])["params"]
    cached = NoEOS(inner)
    recompute = NoEOS(RecomputePrefix(inner))
    memory = inner.apply({"params": params}, src, method=inner.encode)
    per_source = _has_key(inner.apply({"params": params}, memory, 4, method=inner.init_cache), PER_SOURCE)
    for length in (int(x) for x in args.lengths.split(",")):
      run = lambda model, p: jax.block_until_ready(beam_search(
          model, {"params": p}, src, beam_size=args.beam, max_len_a=0.0, max_len_b=length).tokens)
      fns = {"cached": functools.partial(run, cached, {"inner": params}),
             "recompute": functools.partial(run, recompute, {"inner": {"inner": params}})}
      if per_source:
        fns["copied"] = functools.partial(run, NoEOS(CopyPerSource(inner)), {"inner": {"inner": params}})
      times = interleaved_medians(fns, args.reps)
      sps = {k: args.batch / v for k, v in times.items()}
      copied = (f"{sps['copied']:.1f} ({times['copied'] / times['cached']:.2f}×)" if per_source else "—")
      rows.append([name, args.src_len, length, f"{sps['cached']:.1f}", f"{sps['recompute']:.1f}",
                   f"{times['recompute'] / times['cached']:.1f}×", copied])
      print(rows[-1], flush=True)
  print()
  print(markdown_table(["model", "source tokens", "output tokens", "cached sent/s", "recompute sent/s", "speed-up",
                        "cached, per-source entries copied: sent/s (time ratio)"], rows))


if __name__ == "__main__":
  main()
