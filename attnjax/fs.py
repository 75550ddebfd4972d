"""One path abstraction for every file attnjax reads or writes: local paths and cloud URLs (``gs://bucket/...``) alike.

Everything goes through :mod:`etils.epath`, the path library Orbax itself uses, so a workdir, a vocabulary, a config,
a hypotheses file or a data source can live in a bucket on a TPU VM exactly as on a local disk. ``gs://`` is served by
fsspec's GCS filesystem (``pip install 'attnjax[gcs]'`` installs gcsfs) unless TensorFlow is installed, in which case
epath uses ``tf.io.gfile``. Checkpoint arrays go through TensorStore's own GCS driver (see
:mod:`attnjax.runtime.checkpointing`).

Local paths are made absolute (Orbax requires it, and a relative path would otherwise depend on the current
directory of whichever process reads it); URLs are kept as they are: ``os.path.abspath("gs://b/x")`` would turn them
into a local ``.../gs:/b/x``.
"""

from __future__ import annotations

import gzip
import io
import json
import os
import uuid
from typing import Any, BinaryIO

from etils import epath

PathLike = str | os.PathLike
GZIP_MAGIC = b"\x1f\x8b"


def is_url(path: PathLike) -> bool:
  """True for ``scheme://...`` paths (``gs://``, ``s3://``, a test filesystem), False for local ones."""
  return "://" in os.fspath(path)


def path(p: PathLike) -> epath.Path:
  """``p`` as an :class:`epath.Path`; a local path made absolute, a URL unchanged."""
  if isinstance(p, epath.Path) and is_url(p):
    return p
  text = os.fspath(p)
  return epath.Path(text if is_url(text) else os.path.abspath(text))


def join(base: PathLike, *parts: str) -> epath.Path:
  return path(base).joinpath(*parts)


def exists(p: PathLike) -> bool:
  return path(p).exists()


def makedirs(p: PathLike) -> epath.Path:
  out = path(p)
  out.mkdir(parents=True, exist_ok=True)
  return out


def read_bytes(p: PathLike) -> bytes:
  return path(p).read_bytes()


def read_text(p: PathLike) -> str:
  return path(p).read_text(encoding="utf-8")


def write_bytes(p: PathLike, data: bytes) -> None:
  """Writes ``data`` so that a reader never sees a partial file: on a local disk through a temporary file and an
  atomic rename; an object store (GCS, S3) makes an object visible only once it is complete anyway."""
  target = path(p)
  target.parent.mkdir(parents=True, exist_ok=True)
  if is_url(target):
    target.write_bytes(data)
    return
  tmp = target.parent / f".{target.name}.{uuid.uuid4().hex}.tmp"
  try:
    tmp.write_bytes(data)
    os.replace(tmp, target)
  finally:
    if tmp.exists():
      tmp.unlink()


def write_text(p: PathLike, text: str) -> None:
  write_bytes(p, text.encode("utf-8"))


def write_json(p: PathLike, value: Any, **dump_options) -> None:
  write_text(p, json.dumps(value, ensure_ascii=False, **dump_options) + "\n")


def read_json(p: PathLike) -> Any:
  return json.loads(read_text(p))


def open_binary(p: PathLike) -> BinaryIO:
  """Opens ``p`` for reading bytes, decompressing gzip when the name ends in ``.gz`` or the content starts with gzip's
  magic bytes (a compressed file renamed without its suffix is still read correctly)."""
  target = path(p)
  with target.open("rb") as f:
    magic = f.read(2)
  raw = target.open("rb")
  if os.fspath(target).endswith(".gz") or magic == GZIP_MAGIC:
    return gzip.GzipFile(fileobj=raw, mode="rb")
  return raw


def save_npz(p: PathLike, **arrays) -> None:
  """``numpy.savez`` through :func:`write_bytes` (so to a bucket too, and never half-written)."""
  import numpy as np  # pylint: disable=g-import-not-at-top
  buffer = io.BytesIO()
  np.savez(buffer, **arrays)
  write_bytes(p, buffer.getvalue())


def load_npz(p: PathLike) -> dict:
  import numpy as np  # pylint: disable=g-import-not-at-top
  with np.load(io.BytesIO(read_bytes(p))) as data:
    return {key: data[key] for key in data.files}


def read_lines(path: PathLike) -> list[str]:
  """The lines of a UTF-8 (optionally gzipped) text file without their ``\\n`` / ``\\r\\n`` ends.

  Lines break at ``\\n`` only: ``str.splitlines`` would also break at ``\\x0b``, ``\\x1c``, U+2028 ..., which occur
  inside real segments and would silently misalign two parallel files.

  Raises:
    ValueError: invalid UTF-8, naming the file, the line and the byte.
  """
  lines = []
  with open_binary(path) as f:
    try:
      for number, raw in enumerate(f, start=1):
        lines.append(_decode_line(raw, path, number))
    except (OSError, EOFError) as e:  # gzip.BadGzipFile is an OSError; a truncated gzip stream raises EOFError
      raise ValueError(f"{os.fspath(path)}: cannot be read as gzip after line {len(lines)}: {e}") from None
  return lines


def _decode_line(raw: bytes, path: PathLike, number: int) -> str:
  try:
    line = raw.decode("utf-8")
  except UnicodeDecodeError as e:
    raise ValueError(f"file {os.fspath(path)}, line {number}: invalid UTF-8 (byte 0x{raw[e.start]:02x} at byte "
                     f"{e.start + 1} of the line: {e.reason})") from None
  if line.endswith("\n"):
    line = line[:-1]
  if line.endswith("\r"):
    line = line[:-1]
  if number == 1 and line.startswith("\ufeff"):
    line = line[1:]  # a byte-order mark is an editor artefact, not part of the first segment
  return line
