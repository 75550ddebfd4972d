"""Reading ``config.data`` the same way in every config-driven source (the text sources of
:mod:`attnjax.data.sources` and the QA sources of :mod:`attnjax.data.squad`).

``data_cfg`` may be an ``ml_collections.ConfigDict``, a plain dict or any object with attributes, so that tests and
scripts can pass a dict.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

from attnjax import fs

REQUIRED = object()  # the default of get() for a key without a default: missing -> ValueError naming it


def get(data_cfg, key: str, default: Any = REQUIRED) -> Any:
  """``data_cfg[key]`` from a ConfigDict, a dict or any object with attributes; missing required key -> ValueError."""
  if isinstance(data_cfg, Mapping):
    value = data_cfg.get(key, default)
  elif hasattr(data_cfg, "get") and callable(data_cfg.get):  # ml_collections.ConfigDict
    value = data_cfg.get(key, default)
  else:
    value = getattr(data_cfg, key, default)
  if value is REQUIRED:
    source = get(data_cfg, "source", None)
    raise ValueError(f"config.data.{key} is required for config.data.source={source!r} (see attnjax.data.sources)")
  return value


def configured_splits(data_cfg, default: Any = REQUIRED, only: Sequence[str] | None = None) -> dict[str, Any]:
  """split -> file / tfds split from ``config.data.splits``; with ``only``, just those splits (an unknown one is an
  error naming the configured ones)."""
  configured = get(data_cfg, "splits", default)
  if not isinstance(configured, Mapping) and not hasattr(configured, "items"):
    raise ValueError(f"config.data.splits must map split names to files / tfds splits, got {configured!r}")
  configured = dict(configured.items())
  if only is None:
    return configured
  missing = [name for name in only if name not in configured]
  if missing:
    raise ValueError(f"split(s) {missing} are not in config.data.splits (configured: {sorted(configured)})")
  return {name: configured[name] for name in only}


def only_splits(split_dict: dict, names: Sequence[str] | None) -> dict:
  """``split_dict`` restricted to the splits ``names`` (all of them for None); an unknown one is an error."""
  if names is None:
    return split_dict
  missing = [name for name in names if name not in split_dict]
  if missing:
    raise ValueError(f"split(s) {missing} are not among this source's splits {sorted(split_dict)}")
  return {name: split_dict[name] for name in names}


def in_dir(directory: str, name: str) -> str:
  """``name`` inside ``directory`` (a local path or a URL such as ``gs://bucket/data``), or ``name`` itself."""
  return os.fspath(fs.join(directory, name)) if directory else name
