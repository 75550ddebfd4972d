"""What a copy model did on one article: its attention over the source and p_gen for every output token.

    python -m attnjax.analysis.copy_maps --workdir=runs/summarization/.../lstm_coverage/... --split=test --index=0 \
        --out=docs/summarization/copy_map.png

The article is decoded with the workdir's own search settings (``config.eval``); the summary is then teacher-forced
through the model once more, which gives each output token's cross-attention (See et al. 2017, Fig. 1 and 5) and
the generation probability p_gen (low: the token is copied). Only the source positions that any output token
attends to with weight at least ``--min_weight`` are drawn, in source order, so that a 400-token article fits.
"""

from __future__ import annotations

import os

from absl import app, flags
import jax
import jax.numpy as jnp
import numpy as np

from attnjax import cli, inference, trained
from attnjax import families
from attnjax.data import tasks
from attnjax.families.seq2seq import pieces
from attnjax.decoding import beam_search
from attnjax.models.interface import BOS_ID, PAD_ID

def define_flags() -> None:
  """The command line, defined only when run as a program (other CLIs import this module)."""
  flags.DEFINE_string("workdir", None, "a training workdir of a copy model (model.copy=True)")
  flags.DEFINE_string("split", "test", "the split the article comes from")
  flags.DEFINE_integer("index", 0, "which article of the split")
  flags.DEFINE_string("out", None, "PNG to write")
  flags.DEFINE_string("checkpoint", "best", "best, latest or a step")
  flags.DEFINE_float("min_weight", 0.05, "draw the source positions attended at least this much")


def copy_map(model, params, src_ids: list[int], eval_cfg, vocab_size: int | None = None
             ) -> tuple[list[int], np.ndarray, np.ndarray]:
  """(output ids with EOS, attention ``[T, S]``, p_gen ``[T]``) of the model's summary of ``src_ids``, decoded with
  ``eval_cfg``'s beam settings; ``vocab_size`` the real target vocabulary (ids past it are never emitted)."""
  if not getattr(model, "copy", False):
    raise ValueError(f"{type(model).__name__} has copy=False: there is no p_gen to draw")
  src = jnp.asarray([src_ids], jnp.int32)
  out = beam_search(model, {"params": params}, src, beam_size=eval_cfg.beam_size, alpha=eval_cfg.alpha,
                    max_len_a=eval_cfg.max_len_a, max_len_b=eval_cfg.max_len_b, min_len=eval_cfg.get("min_len", 0),
                    no_repeat_ngram_size=eval_cfg.get("no_repeat_ngram_size", 0), vocab_size=vocab_size)
  tokens = [int(t) for t in np.asarray(out.tokens[0, 0]) if t != PAD_ID]
  tgt_in = jnp.asarray([[BOS_ID] + tokens[:-1]], jnp.int32)
  memory = model.apply({"params": params}, src, method=model.encode)
  decoded, state = model.apply({"params": params}, tgt_in, memory, return_attention=True, method=model.decode,
                               mutable=["intermediates"])
  p_gen = np.asarray(jax.tree_util.tree_leaves(state["intermediates"])[0])[0]
  return tokens, np.asarray(decoded.attention[0]), p_gen


def figure(attention, p_gen, source_pieces, output_pieces, *, min_weight: float, title: str = ""):
  """The attention of the source columns attended at least ``min_weight``, with p_gen beside each output row: the
  summary reads top to bottom, the article left to right (a matplotlib figure)."""
  from attnjax.visualize import plt  # pylint: disable=g-import-not-at-top  (Agg set there)
  columns = np.flatnonzero(attention.max(axis=0) >= min_weight)
  if not columns.size:
    columns = np.arange(min(attention.shape[1], 40))
  weights = attention[:, columns]
  height = max(3.0, 0.22 * len(output_pieces) + 1.5)
  width = max(5.0, 0.22 * len(columns) + 3.0)
  fig, (ax, bar) = plt.subplots(1, 2, figsize=(width, height), dpi=120, sharey=True,
                                gridspec_kw={"width_ratios": [max(len(columns), 4), 4]})
  ax.imshow(weights, cmap="viridis", vmin=0.0, vmax=1.0, aspect="auto")
  ax.set_xticks(range(len(columns)), [f"{source_pieces[c]} ({c})" for c in columns], rotation=90, fontsize=7)
  ax.set_yticks(range(len(output_pieces)), output_pieces, fontsize=7)
  ax.set_xlabel(f"source tokens attended >= {min_weight:g} (position)")
  ax.set_ylabel("output")
  bar.barh(range(len(p_gen)), p_gen, color="tab:orange")
  bar.set_xlim(0, 1)
  bar.set_xlabel("p_gen")  # the y axis is shared: imshow has put row 0 at the top for both
  if title:
    fig.suptitle(title, fontsize=9)
  fig.tight_layout()
  return fig


def draw(attention, p_gen, source_pieces, output_pieces, path: str, *, min_weight: float, title: str = "") -> str:
  """:func:`figure`, saved as a PNG at ``path`` (returned)."""
  from attnjax.visualize import save_figure  # pylint: disable=g-import-not-at-top
  return save_figure(figure(attention, p_gen, source_pieces, output_pieces, min_weight=min_weight, title=title), path)


def main(argv):
  FLAGS = flags.FLAGS  # pylint: disable=invalid-name
  if len(argv) > 1:
    raise app.UsageError(f"unexpected arguments: {argv[1:]}")
  if not FLAGS.workdir or not FLAGS.out:
    raise app.UsageError("give --workdir=DIR and --out=FILE.png")
  loaded = trained.load_workdir(FLAGS.workdir, checkpoint=FLAGS.checkpoint)
  config = loaded.config
  tasks.resolve_data_dir(config.data, FLAGS.workdir)
  pairs = families.load_split(config.data, FLAGS.split)
  if not 0 <= FLAGS.index < len(pairs):
    raise app.UsageError(f"--index={FLAGS.index} is outside the {len(pairs)} examples of {FLAGS.split}")
  article = pairs[FLAGS.index][0]
  vocab = loaded.vocabularies
  src_ids = vocab.src.encode(article)[:config.data.max_src_len]
  params = jax.device_get(loaded.params)
  tokens, attention, p_gen = copy_map(loaded.model, params, src_ids, config.eval, vocab_size=vocab.tgt.size)
  source_pieces = pieces(vocab.src, article)[:len(src_ids)]
  output_pieces = [vocab.tgt.id_to_piece(t) for t in tokens]
  draw(attention[:, :len(src_ids)], p_gen, source_pieces, output_pieces, FLAGS.out, min_weight=FLAGS.min_weight,
       title=f"{os.path.basename(os.path.normpath(FLAGS.workdir))}: {FLAGS.split} article {FLAGS.index}, "
             f"mean p_gen {p_gen.mean():.2f}")
  print(FLAGS.out)


def run() -> None:
  """The command line: the ``attnjax-copy-maps`` console script, and ``python -m attnjax.analysis.copy_maps``."""
  define_flags()
  cli.run(main)


if __name__ == "__main__":
  run()
