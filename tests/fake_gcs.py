"""A local Cloud Storage emulator, so that tests can use ``gs://`` workdirs and data without a network or credentials.

On a TPU VM the workdir and the data usually live in a bucket. Two clients reach it: :mod:`etils.epath` through
fsspec's GCS filesystem (gcsfs) for configs, vocabularies, text and TensorBoard events, and TensorStore's own GCS
driver for Orbax's checkpoint arrays. Both honour an emulator endpoint given in the environment, so pointing them at
``gcp-storage-emulator`` (pip, in the ``test`` extra) exercises the very code paths a bucket does, with no real
Cloud Storage involved.

    with fake_gcs() as gcs:              # or the ``fake_gcs_server`` fixture
      subprocess.run([...], env={**os.environ, **gcs.env})   # a CLI writing to gs://bucket/...
      with gcs.environ():                # this process's epath sees the same bucket
        gcs.refresh()                    # after other processes wrote to it: drop cached listings
        epath.Path(gcs.root, "runs").iterdir()
"""

from __future__ import annotations

import contextlib
import dataclasses
from http import HTTPStatus
import logging
import os
import socket
import sys
import tempfile
from typing import Iterator

import pytest

BUCKET = "bucket"


@dataclasses.dataclass(frozen=True)
class FakeGcs:
  """A running emulator: ``root`` is ``gs://<bucket>``, ``env`` the variables that point the clients at it,
  ``data_dir`` where the emulator keeps the objects on the local disk."""
  root: str
  env: dict[str, str]
  data_dir: str

  @contextlib.contextmanager
  def environ(self) -> Iterator[None]:
    """Sets :attr:`env` in this process (restored on exit) and drops the cached GCS filesystems (see
    :meth:`refresh`): they keep the endpoint they were created with, so one left from another emulator would talk to
    a closed port."""
    previous = {key: os.environ.get(key) for key in self.env}
    os.environ.update(self.env)
    self.refresh()
    try:
      yield
    finally:
      for key, value in previous.items():
        if value is None:
          os.environ.pop(key, None)
        else:
          os.environ[key] = value
      self.refresh()

  def refresh(self) -> None:
    """Forgets this process's cached GCS filesystem and with it its cached listings: gcsfs caches every directory it
    lists, so after a subprocess wrote to the bucket, epath here would not see the new objects."""
    _clear_gcsfs_cache()


def _clear_gcsfs_cache() -> None:
  import gcsfs  # pylint: disable=g-import-not-at-top
  from etils.epath import backend  # pylint: disable=g-import-not-at-top
  gcsfs.GCSFileSystem.clear_instance_cache()
  # epath keeps the first filesystem it made for gs:// (an lru_cache): private API, but the only way to drop it
  getter = getattr(backend.fsspec_backend, "_get_filesystem", None)
  if hasattr(getter, "cache_clear"):
    getter.cache_clear()


def _free_port() -> int:
  with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    return s.getsockname()[1]


def _quiet_disconnects(httpd) -> None:
  """The emulator's HTTP server prints a traceback whenever a client hangs up before reading the whole response
  (TensorStore and gcsfs do on range reads and retries); those are harmless, other errors are still printed."""
  default = httpd.handle_error

  def handle_error(request, client_address):
    if isinstance(sys.exc_info()[1], (BrokenPipeError, ConnectionResetError)):
      return
    default(request, client_address)

  httpd.handle_error = handle_error


def _send_generation_headers() -> None:
  """Makes the emulator's downloads carry ``x-goog-generation`` / ``x-goog-metageneration``, as Cloud Storage's do.

  TensorStore's GCS driver takes an object's generation from those headers and makes its next write of the object
  conditional on it; without them it holds a malformed generation and the write fails ("Malformed StorageGeneration")
  as soon as Orbax's OCDBT store reads its manifest back to update it, which a train state's checkpoint does (a toy
  one of two arrays happens not to). Patched once, in the module (``get`` with ``alt=media`` calls it by name) and in
  the route table (which holds the function itself).

  The emulator ignores the preconditions themselves (``ifGenerationMatch``) on those writes: enough for one writer
  per object, as here (each process has its own ``ocdbt.process_<i>``); see :func:`_honour_generation_preconditions`
  for the writes that need them.
  """
  from gcp_storage_emulator import server  # pylint: disable=g-import-not-at-top
  from gcp_storage_emulator.exceptions import NotFound  # pylint: disable=g-import-not-at-top
  from gcp_storage_emulator.handlers import objects  # pylint: disable=g-import-not-at-top
  original = objects.download
  if getattr(original, "sends_generation", False):
    return

  def download(request, response, storage, *args, **kwargs):
    original(request, response, storage, *args, **kwargs)
    if response.status in (HTTPStatus.OK, HTTPStatus.PARTIAL_CONTENT):
      try:
        obj = storage.get_file_obj(request.params["bucket_name"], request.params["object_id"])
      except NotFound:
        return
      response["x-goog-generation"] = str(obj["generation"])
      response["x-goog-metageneration"] = str(obj.get("metageneration", "1"))

  download.sends_generation = True
  objects.download = download
  for _, handlers in server.HANDLERS:
    for method, handler in handlers.items():
      if handler is original:
        handlers[method] = download


def _honour_generation_preconditions() -> None:
  """Makes the emulator's media uploads and deletes honour ``ifGenerationMatch`` (0: the object must not exist), as
  Cloud Storage does (412 Precondition Failed), atomically: what the workdir lock's compare-and-swap relies on. The
  other request kinds keep ignoring it (TensorStore's single writer per object needs no more)."""
  import threading  # pylint: disable=g-import-not-at-top
  from gcp_storage_emulator import server  # pylint: disable=g-import-not-at-top
  from gcp_storage_emulator.exceptions import NotFound  # pylint: disable=g-import-not-at-top
  from gcp_storage_emulator.handlers import objects  # pylint: disable=g-import-not-at-top
  if getattr(objects.insert, "honours_preconditions", False):
    return
  lock = threading.Lock()

  def generation(storage, bucket, name) -> str:
    try:
      return str(storage.get_file_obj(bucket, name)["generation"])
    except NotFound:
      return "0"

  def guarded(original, name_of):
    def handler(request, response, storage, *args, **kwargs):
      expected = request.query.get("ifGenerationMatch")
      name = name_of(request)
      if not expected or name is None:
        return original(request, response, storage, *args, **kwargs)
      with lock:
        if generation(storage, request.params["bucket_name"], name) != expected[0]:
          response.status = HTTPStatus.PRECONDITION_FAILED
          return None
        return original(request, response, storage, *args, **kwargs)
    handler.honours_preconditions = True
    return handler

  media_name = lambda r: r.query["name"][0] if r.query.get("uploadType") == ["media"] and "name" in r.query else None
  patched = {objects.insert: guarded(objects.insert, media_name),
             objects.delete: guarded(objects.delete, lambda r: r.params["object_id"])}
  for original, handler in patched.items():
    setattr(objects, original.__name__, handler)
  for _, handlers in server.HANDLERS:
    for method, handler in handlers.items():
      if handler in patched:
        handlers[method] = patched[handler]


@contextlib.contextmanager
def fake_gcs(bucket: str = BUCKET) -> Iterator[FakeGcs]:
  """Runs ``gcp-storage-emulator`` on a free local port, storing objects in a temporary directory, with ``bucket``
  created; yields a :class:`FakeGcs` and stops the server (and removes the directory) on exit."""
  from gcp_storage_emulator.server import create_server  # pylint: disable=g-import-not-at-top
  _send_generation_headers()
  _honour_generation_preconditions()
  # The storage layer logs every missing object as an ERROR, but a 404 is how clients learn that a file does not
  # exist yet (every checkpoint probes a few): only noise in a failing test's log.
  storage_logger = logging.getLogger("gcp_storage_emulator.storage")
  previous_level = storage_logger.level
  storage_logger.setLevel(logging.CRITICAL)
  with contextlib.ExitStack() as stack:
    stack.callback(storage_logger.setLevel, previous_level)
    data_dir = stack.enter_context(tempfile.TemporaryDirectory(prefix="fake_gcs_"))
    port = _free_port()
    server = create_server("127.0.0.1", port, in_memory=False, default_bucket=bucket, data_dir=data_dir)
    server.start()
    httpd = getattr(getattr(server, "_api", None), "_httpd", None)  # private: silencing is best effort
    if httpd is not None:
      _quiet_disconnects(httpd)
    url = f"http://127.0.0.1:{port}"
    env = {
        "STORAGE_EMULATOR_HOST": url,  # gcsfs (and google-cloud-storage): this endpoint, anonymous
        "TENSORSTORE_GCS_HTTP_URL": url,  # TensorStore's GCS driver (Orbax arrays)
        "GOOGLE_AUTH_TOKEN_FOR_TESTING": "fake",  # TensorStore: skip the metadata-server / ADC credential lookup
        # gcsfs >= 2025 asks the Storage Control gRPC API whether a bucket is hierarchical, which no emulator serves:
        # every call would warn and fall back. Read when gcsfs is imported, so it takes effect in subprocesses (and
        # in this process if nothing imported gcsfs before).
        "GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT": "false",
    }
    try:
      yield FakeGcs(root=f"gs://{bucket}", env=env, data_dir=data_dir)
    finally:
      server.stop()


@pytest.fixture
def fake_gcs_server() -> Iterator[FakeGcs]:
  """:func:`fake_gcs` as a fixture, with its environment also set in the test process (import it into a test module
  or a conftest.py to use it)."""
  with fake_gcs() as gcs, gcs.environ():
    yield gcs
