"""Attention maps of trained models on one real test sentence (issue 14): the alignment of an attentional LSTM
(Bahdanau et al. 2015, Fig. 3) and, head by head, the last cross-attention layer of a Transformer, side by side.

    python -m attnjax.report.attention_maps \\
        --workdirs=runs/study/multi30k/lstm_bahdanau/single/default,runs/study/multi30k/transformer/single/default \\
        --split=test --index=17 --out=docs/attention

Each run translates the sentence with its own decoding settings (beam and length penalty of ``config.eval``, best
checkpoint), then the model is run once more with the source and that translation as the decoder's input (teacher
forcing), and the cross-attention it used for each output token is drawn: rows are output pieces (the last is
``</s>``), columns source pieces: the translation is re-tokenised from its text, so a piece the vocabulary cannot
spell back (rare) is drawn as the tokeniser reads it. One PNG per run, ``<out>/attention_<model>.png``
(``_2``, ``_3``, ... for a second run of the same model), with the source, translation and reference in its title.
"""

from __future__ import annotations

import math
import re

import numpy as np
from absl import app, flags

from attnjax import fs
from attnjax.tokens import BOS_ID

_WORKDIRS = flags.DEFINE_list("workdirs", None, "run workdirs (sequence-to-sequence models with attention)")
_SPLIT = flags.DEFINE_string("split", "test", "the split the sentence comes from")
_INDEX = flags.DEFINE_integer("index", 0, "the sentence's line number in the split (0-based)")
_OUT = flags.DEFINE_string("out", None, "directory for the PNGs")


def attention_of(workdir: str, split: str, index: int) -> dict:
  """The run's translation of line ``index`` of ``split`` and the cross-attention behind it:
  ``{"label", "source", "reference", "hypothesis", "source_pieces", "output_pieces", "weights" [heads, T, S]}``
  (one "head" for a model whose attention has none, or that averages them)."""
  import jax.numpy as jnp  # pylint: disable=g-import-not-at-top
  from attnjax import config as config_lib, inference  # pylint: disable=g-import-not-at-top
  from attnjax.data import tasks  # pylint: disable=g-import-not-at-top
  from attnjax.report.runs import model_label  # pylint: disable=g-import-not-at-top
  from attnjax.scoring import _pieces  # pylint: disable=g-import-not-at-top  (the heatmap's own piece names)
  config = config_lib.load_config(workdir)
  tasks.resolve_data_dir(config.data, workdir)
  examples = tasks.load_split(config.data, split)
  if not 0 <= index < len(examples):
    raise ValueError(f"--index={index}: the {split} split has {len(examples)} examples")
  source, reference = examples[index]
  loaded = inference.load_workdir(workdir, checkpoint="best", config=config)
  src_vocab, tgt_vocab = loaded.vocabularies.src, loaded.vocabularies.tgt
  decoder = inference.decoder_for(loaded.model, loaded.mesh, config.eval, vocab_size=tgt_vocab.size)
  hypothesis = inference.translate_texts(decoder, loaded.params, src_vocab, tgt_vocab, [source],
                                         max_src_len=config.data.max_src_len, batch_size=1).hypotheses[0]
  src_ids = src_vocab.encode(source)[:config.data.max_src_len]
  out_ids = tgt_vocab.encode(hypothesis)
  model, variables = loaded.model, {"params": loaded.params}
  heads = "heads" if config.model.name == "transformer" else True
  memory = model.apply(variables, jnp.asarray([src_ids], jnp.int32), method=model.encode)
  out = model.apply(variables, jnp.asarray([[BOS_ID] + out_ids], jnp.int32), memory, return_attention=heads,
                    method=model.decode)
  if out.attention is None:
    raise ValueError(f"{workdir}: its model ({config.model.name}) returns no cross-attention")
  weights = np.asarray(out.attention[0], np.float32)
  weights = weights if weights.ndim == 3 else weights[None]
  return {"label": model_label(config.model.to_dict()), "source": source, "reference": reference,
          "hypothesis": hypothesis, "source_pieces": _pieces(src_vocab, source)[:len(src_ids)],
          "output_pieces": _pieces(tgt_vocab, hypothesis) + ["</s>"], "weights": weights}


def plot_attention(entry: dict, path: fs.PathLike) -> None:
  """One heatmap per head (a grid of up to 4 columns); rows output pieces, columns source pieces."""
  from attnjax.report.plots import _figure, _write_png  # pylint: disable=g-import-not-at-top
  weights, src, out = entry["weights"], entry["source_pieces"], entry["output_pieces"]
  heads = weights.shape[0]
  columns = min(heads, 4)
  rows = math.ceil(heads / columns)
  cell_w, cell_h = max(3.0, 0.28 * len(src) + 1.2), max(2.5, 0.26 * len(out) + 1.0)
  figure = _figure(cell_w * columns, cell_h * rows + 0.9)
  for h in range(heads):
    ax = figure.add_subplot(rows, columns, h + 1)
    ax.imshow(weights[h], cmap="viridis", vmin=0.0, vmax=1.0, aspect="auto")
    ax.set_xticks(range(len(src)), src, fontsize=6, rotation=90)
    ax.set_yticks(range(len(out)), out if h % columns == 0 else [""] * len(out), fontsize=6)
    if heads > 1:
      ax.set_title(f"head {h + 1}", fontsize=8)
  figure.suptitle(f"{entry['label']}\n{entry['source']}\n→ {entry['hypothesis']}\n(reference: {entry['reference']})",
                  fontsize=7)
  _write_png(figure, path)


def _slug(label: str) -> str:
  return re.sub(r"[^a-z0-9]+", "_", label.lower()).strip("_")  # "LSTM + Bahdanau" -> "lstm_bahdanau"


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f"unexpected arguments: {argv[1:]}")
  fs.makedirs(_OUT.value)
  used = []
  for workdir in _WORKDIRS.value:
    entry = attention_of(workdir, _SPLIT.value, _INDEX.value)
    slug = _slug(entry["label"])
    used.append(slug)
    path = fs.join(_OUT.value, f"attention_{slug}{'' if used.count(slug) == 1 else f'_{used.count(slug)}'}.png")
    plot_attention(entry, path)
    print(f"{path}: {entry['label']}, {entry['weights'].shape[0]} head(s), {entry['hypothesis']}")


if __name__ == "__main__":
  flags.mark_flags_as_required(["workdirs", "out"])
  app.run(main)
