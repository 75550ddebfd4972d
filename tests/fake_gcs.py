"""A local Cloud Storage emulator, so that tests can use ``gs://`` workdirs and data without a network or credentials.

On a TPU VM the workdir and the data usually live in a bucket. Two clients reach it: :mod:`etils.epath` through
fsspec's GCS filesystem (gcsfs) for configs, vocabularies, text and TensorBoard events, and TensorStore's own GCS
driver for Orbax's checkpoint arrays. Both honour an emulator endpoint given in the environment, so pointing them at
``gcp-storage-emulator`` (pip, in the ``test`` extra) exercises the very code paths a bucket does, with no real
Cloud Storage involved.

    with fake_gcs() as gcs:              # or the ``fake_gcs_server`` fixture
      subprocess.run([...], env={**os.environ, **gcs.env})   # a CLI writing to gs://bucket/...
      with gcs.environ():                # this process's epath sees the same bucket
        epath.Path(gcs.root, "runs").iterdir()
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import socket
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
    """Sets :attr:`env` in this process (restored on exit) and drops gcsfs's cached filesystems, which keep the
    endpoint they were created with: an instance left from another emulator would talk to a closed port."""
    previous = {key: os.environ.get(key) for key in self.env}
    os.environ.update(self.env)
    _clear_gcsfs_cache()
    try:
      yield
    finally:
      for key, value in previous.items():
        if value is None:
          os.environ.pop(key, None)
        else:
          os.environ[key] = value
      _clear_gcsfs_cache()


def _clear_gcsfs_cache() -> None:
  import gcsfs  # pylint: disable=g-import-not-at-top
  gcsfs.GCSFileSystem.clear_instance_cache()


def _free_port() -> int:
  with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    return s.getsockname()[1]


def _quiet_disconnects(httpd) -> None:
  """The emulator's HTTP server prints a traceback whenever a client hangs up before reading the whole response
  (TensorStore and gcsfs do on range reads and retries); those are harmless, other errors are still printed."""
  default = httpd.handle_error

  def handle_error(request, client_address):
    import sys  # pylint: disable=g-import-not-at-top
    if isinstance(sys.exc_info()[1], (BrokenPipeError, ConnectionResetError)):
      return
    default(request, client_address)

  httpd.handle_error = handle_error


@contextlib.contextmanager
def fake_gcs(bucket: str = BUCKET) -> Iterator[FakeGcs]:
  """Runs ``gcp-storage-emulator`` on a free local port, storing objects in a temporary directory, with ``bucket``
  created; yields a :class:`FakeGcs` and stops the server (and removes the directory) on exit."""
  from gcp_storage_emulator.server import create_server  # pylint: disable=g-import-not-at-top
  with tempfile.TemporaryDirectory(prefix="fake_gcs_") as data_dir:
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
