"""TensorBoard scalars read without TensorFlow: TFRecord framing (length, masked CRC32C, data, masked CRC32C)
and the Event proto of tensorboardX."""

from __future__ import annotations

import struct
from typing import Iterable, Iterator

from absl import logging

from attnjax import fs


# ---------------------------------------------------------------------------------------------------------------------
# TensorBoard events without TensorFlow


def _crc32c(data: bytes) -> int:
  try:
    import google_crc32c  # pylint: disable=g-import-not-at-top  (C implementation, installed with gcsfs)
    return google_crc32c.value(data)
  except ImportError:
    from tensorboardX.crc32c import crc32c  # pylint: disable=g-import-not-at-top
    return crc32c(data)


def _masked_crc(data: bytes) -> int:
  """TFRecord's masked CRC-32C: rotated right by 15 bits plus a constant."""
  crc = _crc32c(data)
  return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def read_records(data: bytes, source: str = "") -> Iterator[bytes]:
  """The payloads of a TFRecord stream: each record is ``uint64 length, uint32 masked_crc(length), data[length],
  uint32 masked_crc(data)``, little-endian.

  An incomplete last record (a writer still flushing, or a copy cut short) ends the stream quietly.

  Raises:
    ValueError: a checksum does not match (names ``source`` and the byte offset); records before it were yielded.
  """
  offset, size = 0, len(data)
  while size - offset >= 12:
    header = data[offset:offset + 8]
    (length,) = struct.unpack("<Q", header)
    (length_crc,) = struct.unpack("<I", data[offset + 8:offset + 12])
    if _masked_crc(header) != length_crc:
      raise ValueError(f"{source}: corrupt record length at byte {offset}")
    end = offset + 12 + length + 4
    if end > size:
      return
    payload = data[offset + 12:end - 4]
    (data_crc,) = struct.unpack("<I", data[end - 4:end])
    if _masked_crc(payload) != data_crc:
      raise ValueError(f"{source}: corrupt record data at byte {offset}")
    yield payload
    offset = end


def _scalar(value) -> float | None:
  """A summary value's number: ``simple_value`` (tensorboardX's default) or a one-element float tensor."""
  kind = value.WhichOneof("value")
  if kind == "simple_value":
    return float(value.simple_value)
  if kind == "tensor":
    numbers = list(value.tensor.float_val) or list(value.tensor.double_val)
    return float(numbers[0]) if len(numbers) == 1 else None
  return None


def read_scalars(logdir: fs.PathLike, tags: Iterable[str] | None = None) -> dict[str, list[tuple[int, float]]]:
  """The scalars of every ``events.out.tfevents.*`` file in ``logdir`` (not recursive; a local path or a URL).

  Args:
    logdir: a TensorBoard log directory, e.g. ``<workdir>/tensorboard``.
    tags: keep only these tags (e.g. ``("eval/bleu", "eval/loss")``); None keeps every scalar.

  Returns:
    tag -> ``[(step, value), ...]`` sorted by step, one value per step. A resumed run logs some steps again, in a
    newer file: files are read in name order (tensorboardX names them by creation time) and the last value wins. An
    empty dict when ``logdir`` does not exist. A corrupt file is reported as a warning and read up to the damage.
  """
  from tensorboardX.proto import event_pb2  # pylint: disable=g-import-not-at-top
  directory = fs.path(logdir)
  wanted = None if tags is None else set(tags)
  by_tag: dict[str, dict[int, float]] = {}
  if not directory.is_dir():
    return {}
  for events_file in sorted(directory.glob("events.out.tfevents.*"), key=lambda p: p.name):
    try:
      for payload in read_records(fs.read_bytes(events_file), source=str(events_file)):
        event = event_pb2.Event.FromString(payload)
        if not event.HasField("summary"):
          continue
        for value in event.summary.value:
          if wanted is not None and value.tag not in wanted:
            continue
          number = _scalar(value)
          if number is not None:
            by_tag.setdefault(value.tag, {})[int(event.step)] = number
    except ValueError as e:  # a corrupt record (or an undecodable event): keep what came before it
      logging.warning("TensorBoard events: %s", e)
  return {tag: sorted(steps.items()) for tag, steps in sorted(by_tag.items())}
