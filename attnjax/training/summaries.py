"""TensorBoard scalars, written by process 0 into ``<workdir>/tensorboard`` (a local path or a bucket).

tensorboardX writes local files itself; for a URL (``gs://``, ``s3://``) it asks a registered writer factory, and its
own one for ``gs://`` needs google-cloud-storage. :class:`_EpathRecordWriter` replaces that with the project's path
layer (:mod:`attnjax.fs`): events are buffered and the whole file is rewritten at every flush, as objects in a bucket
cannot be appended to (the loop flushes once per logging step, so that is a few KB every few hundred steps).
"""

from __future__ import annotations

import io

from absl import logging
import jax

from attnjax import fs


class _EpathRecordWriter:

  def __init__(self, path: str):
    self.path = path
    self.buffer = io.BytesIO()

  def write(self, data: bytes) -> None:
    self.buffer.write(data)

  def flush(self) -> None:
    fs.write_bytes(self.path, self.buffer.getvalue())

  def close(self) -> None:
    self.flush()


class _EpathRecordWriterFactory:

  def open(self, path: str):
    return _EpathRecordWriter(path)

  def directory_check(self, path: str) -> None:
    del path  # object stores have no directories to create


def writer(workdir: str):
  """A ``SummaryWriter`` on process 0 (None on the others, or without tensorboardX)."""
  if jax.process_index() != 0:
    return None
  try:
    from tensorboardX import SummaryWriter  # pylint: disable=g-import-not-at-top
    from tensorboardX import record_writer  # pylint: disable=g-import-not-at-top
  except ImportError:
    logging.warning("tensorboardX is not installed: no TensorBoard scalars")
    return None
  logdir = str(fs.join(workdir, "tensorboard"))
  if fs.is_url(logdir):
    record_writer.register_writer_factory(logdir.split(":", 1)[0], _EpathRecordWriterFactory())
  return SummaryWriter(logdir)


def log(summary_writer, step: int, values: dict, prefix: str) -> None:
  if summary_writer is not None:
    for key, value in values.items():
      summary_writer.add_scalar(f"{prefix}/{key}", value, step)
    summary_writer.flush()
