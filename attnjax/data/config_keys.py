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


DEFAULT_VALIDATION_SHARE = 0.05  # of a training file's distinct keys, when no validation file is given


def file_splits(data_cfg, read, *, key, default_heldout: Mapping[str, float], only: Sequence[str] | None = None,
                what: str = "example") -> dict[str, list]:
  """The splits a user's files give, read the same way by every file source.

  * ``config.data.path``: one file, split by a hash of each item's ``key`` into ``config.data.heldout`` (split ->
    share; ``default_heldout``) and "train", what the rest leaves;
  * ``config.data.splits``: split -> file, each read whole. When these name a "train" file but no "validation" one,
    validation is carved out of train by the same hash (``config.data.heldout`` names the splits to carve and their
    shares; by default validation, :data:`DEFAULT_VALIDATION_SHARE`): a run always has a split to choose checkpoints
    on that it never trained on;
  * both: ``path`` gives train and the held-out splits, ``splits`` only other splits (a test file, say).

  ``read(name, split)`` reads one file (its name as configured) into a list of items. With ``only``, just those
  splits are returned (train is still read when a requested split is carved out of it). A split that comes out
  empty is an error naming it and where it came from, never a run that trains or scores on nothing.
  """
  from attnjax.data.files import split_by_source  # pylint: disable=g-import-not-at-top
  path, splits = get(data_cfg, "path", None), get(data_cfg, "splits", None)
  source = get(data_cfg, "source", None)
  if path is None and splits is None:
    raise ValueError(f"config.data.source={source!r} needs config.data.path (one file, split by hash into train and "
                     f"config.data.heldout) or config.data.splits (split -> file), or both")
  files = dict(configured_splits(data_cfg).items()) if splits is not None else {}
  explicit = get(data_cfg, "heldout", None)
  seed = get(data_cfg, "split_seed", 0)
  if path is not None:
    heldout = dict((explicit if explicit is not None else default_heldout).items())
    given = sorted(set(files) & ({"train"} | set(heldout)))
    if given:
      raise ValueError(f"config.data.splits names {given}, which config.data.path={path!r} already gives (train and "
                       f"config.data.heldout's {sorted(heldout)}): with a path, splits names only the splits of other "
                       "files")
    carved, origin = heldout, f"config.data.path={path!r}"
  else:
    if explicit is not None:
      carved = {name: share for name, share in dict(explicit.items()).items() if name not in files}
    else:
      carved = {} if "validation" in files else {"validation": DEFAULT_VALIDATION_SHARE}
    if carved and "train" not in files:
      carved = {}
    origin = f"config.data.splits['train']={files.get('train')!r}"
  wanted = None if only is None else set(only)
  out: dict[str, list] = {}
  if path is not None or carved:
    if wanted is None or wanted & ({"train"} | set(carved)):
      whole = read(path, "train") if path is not None else read(files["train"], "train")
      out.update(split_by_source(whole, carved, seed=seed, key=key))
  for split, name in files.items():
    if split not in out and (wanted is None or split in wanted):
      out[split] = read(name, split)
  out = only_splits(out, only)
  for split, items in out.items():
    if not items:
      if split in carved:
        raise ValueError(f"config.data.heldout: split {split!r} would be empty ({carved[split]:.3g} of the distinct "
                         f"{what}s of {origin}): give it a file (config.data.splits.{split}) or a larger share")
      name = path if split == "train" and path is not None else files.get(split)
      raise ValueError(f"split {split!r} ({name!r}) has no usable {what}: the file is empty, or every {what} in it "
                       "was skipped (see the log)")
  return out
