"""Attention maps of trained models on one real test sentence: the alignment of an attentional LSTM
(Bahdanau et al. 2015, Fig. 3) and, head by head, the last cross-attention layer of a Transformer, side by side.

    python -m attnjax.analysis.attention_maps \\
        --workdirs=runs/study/multi30k/lstm_bahdanau/single/default,runs/study/multi30k/transformer/single/default \\
        --split=test --index=17 --out=docs/attention

Each run translates the sentence with its own decoding settings (beam and length penalty of ``config.eval``, best
checkpoint), then the model is run once more with the source and that translation as the decoder's input (teacher
forcing), and the cross-attention it used for each output token is drawn: rows are output pieces (the last is
``</s>``), columns source pieces: the translation is re-tokenised from its text, so a piece the vocabulary cannot
spell back (rare) is drawn as the tokeniser reads it. One PNG per run, ``<out>/attention_<model>.png``
(``_2``, ``_3``, ... for a second run of the same model), with the source, translation and reference in its title.

With ``--alignment_examples=N`` it also measures, teacher-forced on the first N references of
``--alignment_split`` (validation by default: no test sentence is looked at), whether each model's attention is an
alignment and whether the model relies on it (:func:`alignment_diagnostics`), and writes the table to
``<out>/alignment.md``:

    python -m attnjax.analysis.attention_maps --workdirs=... --split=test --index=9 --alignment_examples=256 --out=docs
"""

from __future__ import annotations

import math
import re

import numpy as np
from absl import app, flags, logging

from attnjax import cli, fs
from attnjax.tokens import BOS_ID, EOS_ID, PAD_ID

_WORKDIRS = flags.DEFINE_list("workdirs", None, "run workdirs (sequence-to-sequence models with attention)")
_SPLIT = flags.DEFINE_string("split", "test", "the split the sentence comes from")
_INDEX = flags.DEFINE_integer("index", 0, "the sentence's line number in the split (0-based)")
_OUT = flags.DEFINE_string("out", None, "directory for the PNGs")
_ALIGNMENT_EXAMPLES = flags.DEFINE_integer(
    "alignment_examples", 0, "teacher-force this many references of --alignment_split through each run and write "
    "alignment.md (0: do not)")
_ALIGNMENT_SPLIT = flags.DEFINE_string("alignment_split", "validation", "the split --alignment_examples reads")


def attention_of(workdir: str, split: str, index: int) -> dict:
  """The run's translation of line ``index`` of ``split`` and the cross-attention behind it:
  ``{"label", "source", "reference", "hypothesis", "source_pieces", "output_pieces", "weights" [heads, T, S]}``
  (one "head" for a model whose attention has none, or that averages them)."""
  import jax.numpy as jnp  # pylint: disable=g-import-not-at-top
  from attnjax import config as config_lib, inference, trained  # pylint: disable=g-import-not-at-top
  from attnjax import families  # pylint: disable=g-import-not-at-top
  from attnjax.data import tasks  # pylint: disable=g-import-not-at-top
  from attnjax.report.runs import model_label  # pylint: disable=g-import-not-at-top
  from attnjax.families.seq2seq import pieces  # pylint: disable=g-import-not-at-top  (the heatmap's own piece names)
  config = config_lib.load_config(workdir)
  tasks.resolve_data_dir(config.data, workdir)
  examples = families.load_split(config.data, split)
  if not 0 <= index < len(examples):
    raise ValueError(f"--index={index}: the {split} split has {len(examples)} examples")
  source, reference = examples[index]
  loaded = trained.load_workdir(workdir, checkpoint="best", config=config)
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
          "hypothesis": hypothesis, "source_pieces": pieces(src_vocab, source)[:len(src_ids)],
          "output_pieces": pieces(tgt_vocab, hypothesis) + ["</s>"], "weights": weights}


def alignment_diagnostics(workdir: str, split: str = "validation", examples: int = 256, *,
                          batch_size: int = 64) -> dict:
  """Is the run's cross-attention an alignment, and does the model use it? Teacher-forced on the first ``examples``
  (source, reference) pairs of ``split``, with the best checkpoint:

  * ``"correlation"``: the Pearson correlation, pooled over every target position of every sentence (the position
    that predicts ``</s>`` included), between the output position and the source position given the most attention
    (heads averaged). A monotonic alignment is near +1, a reversed one negative.
  * ``"loss"``: the references' negative log-likelihood, nats per target token (``</s>`` included).
  * ``"loss_other_source"``: the same, each sentence decoded from the next one's source (the last from the first's):
    how much the model's predictions depend on the source it attends to.

  Sources are cut to ``data.max_src_len`` pieces and references to ``data.max_tgt_len`` (with ``</s>``), as in
  training. Returns those three with ``"sentences"`` and ``"tokens"`` (target tokens scored).
  """
  import jax  # pylint: disable=g-import-not-at-top
  import jax.numpy as jnp  # pylint: disable=g-import-not-at-top
  from attnjax import config as config_lib, inference, trained  # pylint: disable=g-import-not-at-top
  from attnjax import families  # pylint: disable=g-import-not-at-top
  from attnjax.data import tasks  # pylint: disable=g-import-not-at-top
  config = config_lib.load_config(workdir)
  tasks.resolve_data_dir(config.data, workdir)
  pairs = families.load_split(config.data, split)[:examples]
  if examples < 2 or len(pairs) < 2:
    raise ValueError(f"alignment_diagnostics: examples={examples} with {len(pairs)} in the {split} split; it needs at "
                     "least 2 (each sentence is also decoded from another's source)")
  loaded = trained.load_workdir(workdir, checkpoint="best", config=config)
  src_vocab, tgt_vocab = loaded.vocabularies.src, loaded.vocabularies.tgt
  sources = [src_vocab.encode(s)[:config.data.max_src_len] for s, _ in pairs]
  targets = [tgt_vocab.encode(t)[:config.data.max_tgt_len - 1] + [EOS_ID] for _, t in pairs]
  if not all(sources):
    logging.warning("alignment_diagnostics: %d of the %d sentences have an empty source; left out",
                    sum(not s for s in sources), len(pairs))
    sources, targets = zip(*[(s, t) for s, t in zip(sources, targets) if s])
    sources, targets = list(sources), list(targets)
  src_len, tgt_len = max(map(len, sources)), max(map(len, targets))

  def padded(rows, length):
    return np.asarray([row + [PAD_ID] * (length - len(row)) for row in rows], np.int32)

  model, variables = loaded.model, {"params": loaded.params}

  @jax.jit
  def forward(src, tgt_in, tgt_out):
    out = model.apply(variables, tgt_in, model.apply(variables, src, method=model.encode), return_attention=True,
                      method=model.decode)
    nll = -jnp.take_along_axis(jax.nn.log_softmax(out.logits.astype(jnp.float32)), tgt_out[..., None], -1)[..., 0]
    attention = jnp.where((src != PAD_ID)[:, None, :], out.attention, -1.0)  # [B, T, S], padding never the argmax
    return nll, jnp.argmax(attention, axis=-1)

  other = sources[1:] + sources[:1]
  positions, nll, nll_other = [], [], []
  for start in range(0, len(sources), batch_size):
    stop = min(start + batch_size, len(sources))
    # every batch padded to one shape (the last one with repeated rows, dropped below): one compilation
    rows = list(range(start, stop)) + [start] * (batch_size - (stop - start))
    tgt_out = padded([targets[i] for i in rows], tgt_len)
    tgt_in = padded([[BOS_ID] + targets[i][:-1] for i in rows], tgt_len)
    for src_rows, sink in (([sources[i] for i in rows], nll), ([other[i] for i in rows], nll_other)):
      token_nll, argmax = (np.asarray(x) for x in forward(padded(src_rows, src_len), tgt_in, tgt_out))
      for b, i in enumerate(rows[:stop - start]):
        sink.extend(token_nll[b, :len(targets[i])])
        if sink is nll:
          positions.extend((t, argmax[b, t]) for t in range(len(targets[i])))
  positions = np.asarray(positions, np.float64)
  return {"sentences": len(sources), "tokens": len(nll), "correlation": float(np.corrcoef(positions.T)[0, 1]),
          "loss": float(np.mean(nll)), "loss_other_source": float(np.mean(nll_other))}


def alignment_table(rows: list[tuple[str, str, dict]], split: str) -> str:
  """Markdown: a row per ``(label, workdir, alignment_diagnostics(...))``."""
  lines = [f"| model | run | {split} sentences (target tokens) | argmax source position vs output position "
           "(correlation) | NLL per token | NLL, decoded from another sentence's source |", "|---|---|---|---|---|---|"]
  for label, workdir, d in rows:
    lines.append(f"| {label} | `{workdir}` | {d['sentences']} ({d['tokens']}) | {d['correlation']:.2f} | "
                 f"{d['loss']:.2f} | {d['loss_other_source']:.2f} |")
  return "\n".join(lines)


def plot_attention(entry: dict, path: fs.PathLike) -> None:
  """One heatmap per head (a grid of up to 4 columns); rows output pieces, columns source pieces."""
  from attnjax.report import figures  # pylint: disable=g-import-not-at-top
  weights, src, out = entry["weights"], entry["source_pieces"], entry["output_pieces"]
  heads = weights.shape[0]
  columns = min(heads, 4)
  rows = math.ceil(heads / columns)
  cell_w, cell_h = max(3.0, 0.28 * len(src) + 1.2), max(2.5, 0.26 * len(out) + 1.0)
  figure = figures.figure(cell_w * columns, cell_h * rows + 0.9)
  for h in range(heads):
    ax = figure.add_subplot(rows, columns, h + 1)
    ax.imshow(weights[h], cmap="viridis", vmin=0.0, vmax=1.0, aspect="auto")
    ax.set_xticks(range(len(src)), src, fontsize=6, rotation=90)
    ax.set_yticks(range(len(out)), out if h % columns == 0 else [""] * len(out), fontsize=6)
    if heads > 1:
      ax.set_title(f"head {h + 1}", fontsize=8)
  figure.suptitle(f"{entry['label']}\n{entry['source']}\n→ {entry['hypothesis']}\n(reference: {entry['reference']})",
                  fontsize=7)
  figures.write_png(figure, path)


def _slug(label: str) -> str:
  return re.sub(r"[^a-z0-9]+", "_", label.lower()).strip("_")  # "LSTM + Bahdanau" -> "lstm_bahdanau"


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f"unexpected arguments: {argv[1:]}")
  fs.makedirs(_OUT.value)
  used, labels = [], []
  for workdir in _WORKDIRS.value:
    entry = attention_of(workdir, _SPLIT.value, _INDEX.value)
    labels.append(entry["label"])
    slug = _slug(entry["label"])
    used.append(slug)
    path = fs.join(_OUT.value, f"attention_{slug}{'' if used.count(slug) == 1 else f'_{used.count(slug)}'}.png")
    plot_attention(entry, path)
    print(f"{path}: {entry['label']}, {entry['weights'].shape[0]} head(s), {entry['hypothesis']}")
  if _ALIGNMENT_EXAMPLES.value:
    rows = [(label, workdir, alignment_diagnostics(workdir, _ALIGNMENT_SPLIT.value, _ALIGNMENT_EXAMPLES.value))
            for label, workdir in zip(labels, _WORKDIRS.value)]
    table = alignment_table(rows, _ALIGNMENT_SPLIT.value)
    fs.write_text(fs.join(_OUT.value, "alignment.md"), "# Alignment diagnostics\n\n" + table + "\n")
    print(table)


def run() -> None:
  """The command line: the ``attnjax-attention-maps`` console script, and ``python -m attnjax.analysis.attention_maps``."""
  flags.mark_flags_as_required(["workdirs", "out"])
  cli.run(main)


if __name__ == "__main__":
  run()
