"""Figures for the report's pages: a matplotlib figure on the Agg canvas (no pyplot, no display) and its PNG written
through :mod:`attnjax.fs` (a local path or a bucket). Every plot of the report draws through these two."""

from __future__ import annotations

import io

from attnjax import fs


def figure(width: float, height: float):
  """A figure on the Agg canvas: no pyplot (no global state, no display)."""
  from matplotlib.backends.backend_agg import FigureCanvasAgg  # pylint: disable=g-import-not-at-top
  from matplotlib.figure import Figure  # pylint: disable=g-import-not-at-top
  figure = Figure(figsize=(width, height), dpi=110)
  FigureCanvasAgg(figure)
  return figure


def write_png(figure, path: fs.PathLike) -> None:
  buffer = io.BytesIO()
  # tight_layout ignores a figure title: leave it a strip at the top
  figure.tight_layout(rect=(0, 0, 1, 1 - 0.3 / figure.get_figheight()) if figure.get_suptitle() else None)
  figure.savefig(buffer, format="png")  # into memory, then through attnjax.fs: matplotlib cannot open gs:// paths
  fs.write_bytes(path, buffer.getvalue())
