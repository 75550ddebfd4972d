"""Fixtures of the tests that use cloud storage (a local emulator: see tests/fake_gcs.py)."""

from tests.fake_gcs import fake_gcs_server  # noqa: F401  pylint: disable=unused-import  (a fixture)
