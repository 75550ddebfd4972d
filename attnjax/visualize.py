"""Attention heatmaps (matplotlib, PNG): what a decoder looked at while producing each output token."""

from __future__ import annotations

import io
import os

import matplotlib

matplotlib.use("Agg")  # files only: no display on servers and CI
import matplotlib.pyplot as plt  # pylint: disable=g-import-not-at-top,wrong-import-position
import numpy as np  # pylint: disable=g-import-not-at-top,wrong-import-position

from attnjax import fs  # pylint: disable=g-import-not-at-top,wrong-import-position


def attention_heatmap(weights, source_tokens, output_tokens, path: str, *, title: str = "") -> str:
  """Writes ``weights [len(output_tokens), len(source_tokens)]`` as a heatmap PNG at ``path`` (a local path or a
  bucket URL; the format follows the suffix); returns ``path``.

  Rows are output tokens (top to bottom), columns source tokens; each row is one decoder step's attention.
  """
  weights = np.asarray(weights, np.float32)
  if weights.shape != (len(output_tokens), len(source_tokens)):
    raise ValueError(f"weights shape {weights.shape} != (len(output_tokens), len(source_tokens)) = "
                     f"({len(output_tokens)}, {len(source_tokens)})")
  height = max(2.5, 0.3 * len(output_tokens) + 1.2)
  width = max(3.0, 0.3 * len(source_tokens) + 1.5)
  fig, ax = plt.subplots(figsize=(width, height), dpi=120)
  image = ax.imshow(weights, cmap="viridis", vmin=0.0, vmax=1.0, aspect="auto")
  ax.set_xticks(range(len(source_tokens)), [repr(t)[1:-1] or "␣" for t in source_tokens], fontsize=8)
  ax.set_yticks(range(len(output_tokens)), [repr(t)[1:-1] or "␣" for t in output_tokens], fontsize=8)
  ax.set_xlabel("source")
  ax.set_ylabel("output")
  if title:
    ax.set_title(title, fontsize=9)
  fig.colorbar(image, ax=ax, fraction=0.04)
  fig.tight_layout()
  return save_figure(fig, path)


def save_figure(fig, path: str) -> str:
  """Writes ``fig`` to ``path`` (the format from the suffix, PNG without one) and closes it; returns ``path``.

  Rendered in memory and written through :mod:`attnjax.fs`: matplotlib opens a path with the builtin open(), which
  cannot write to gs://.
  """
  buffer = io.BytesIO()
  fig.savefig(buffer, format=os.path.splitext(os.fspath(path))[1][1:].lower() or "png")
  plt.close(fig)
  fs.write_bytes(path, buffer.getvalue())
  return path
