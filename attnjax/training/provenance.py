"""What a resumed run changed about its workdir's config, and whether that is allowed.

A workdir's ``config.json`` records the config its checkpoints were trained with. Resuming with a config that changes
the trained function or its data order (another model size, learning rate, vocabulary, seed) silently mixes two
experiments in one set of checkpoints and metrics. :func:`check_resume` compares the saved config with the new one
before training starts: changes that only extend or observe the run (more steps, evaluation settings, another mesh)
pass and are recorded in ``config_history.jsonl``; changes to the run itself stop it unless explicitly allowed.

Which keys change the run is decided by two tuples of dotted key prefixes, :data:`RUN_CHANGING` and
:data:`HARMLESS`: the longest prefix matching a key decides, and a key neither tuple covers changes the run (a new
section or key is assumed to matter until someone says otherwise). A key the saved config lacks and the new one
leaves unset (None) is no difference: an optional setting added to the project since the run started.
"""

from __future__ import annotations

import dataclasses
import datetime
import json
from typing import Any

from absl import logging
import jax

from attnjax import fs

from attnjax.config import CONFIG_FILE  # pylint: disable=unused-import  (written by attnjax.config.save_config)
HISTORY_FILE = "config_history.jsonl"

# Keys (or prefixes of dotted keys) whose change makes a different run: another trained function or data order.
RUN_CHANGING = (
    "model",
    "data",
    "seed",
    "train.learning_rate",
    "train.schedule",
    "train.warmup_steps",
    "train.adam_b1",
    "train.adam_b2",
    "train.adam_eps",
    "train.weight_decay",
    "train.grad_clip_norm",
    "train.label_smoothing",
    "train.grad_accum_steps",
    "train.ema_decay",
    "train.ema_warmup",
)

# Keys that leave the trained function and its data order alone: how long and how observably the run goes, where it
# runs, where its data is read from. More specific than RUN_CHANGING where they overlap (data.dir inside data).
HARMLESS = (
    "train.steps",  # extending (or shortening) a run
    "train.time_limit_minutes",
    "train.patience",  # early stopping: how long, like train.steps
    "train.log_every",
    "train.eval_every",
    "train.checkpoint_every",
    "train.keep_checkpoints",
    "train.async_checkpoints",
    "train.peak_tflops_per_device",
    "train.best_metric",
    "train.best_mode",
    "eval",
    "mesh",  # a checkpoint restores onto another mesh
    "target",  # the deployment (its dtype shows up as model.dtype, which does change the run)
    "distributed",
    "data.dir",  # the same data, moved
    "data.shared_cache_dir",  # where a vocabulary and token rows built from the same data are kept
    "data.tfds_data_dir",
)


class _Absent:
  """The value of a key that one of the two configs does not have."""

  def __repr__(self) -> str:
    return "<absent>"

  def __reduce__(self):  # a copy or an unpickled one stays the singleton, so `is ABSENT` keeps working
    return "ABSENT"


ABSENT = _Absent()


class ConfigChangedError(ValueError):
  """A resumed run's config differs from its workdir's saved config in ways that change the run."""


@dataclasses.dataclass(frozen=True)
class Difference:
  """One key whose value differs between a saved and a new config.

  Attributes:
    key: dotted path, e.g. ``"model.num_heads"``.
    old: the saved value, or :data:`ABSENT`.
    new: the new value, or :data:`ABSENT`.
    changes_run: whether the change makes a different run (see :data:`RUN_CHANGING`, :data:`HARMLESS`).
  """
  key: str
  old: Any
  new: Any
  changes_run: bool

  def __str__(self) -> str:
    return f"{self.key}: {_show(self.old)} -> {_show(self.new)}"

  def to_json(self) -> dict:
    """As a JSON-ready dict; an absent value is written as the string ``"<absent>"``."""
    return {"key": self.key, "old": _jsonable(self.old), "new": _jsonable(self.new), "changes_run": self.changes_run}


def _show(value: Any) -> str:
  # JSON spelling, as in config.json: null rather than None, and strings visibly quoted
  return repr(value) if value is ABSENT else json.dumps(value, ensure_ascii=False)


def _jsonable(value: Any) -> Any:
  return repr(value) if value is ABSENT else value


def _matches(key: str, prefix: str) -> bool:
  # whole path components only: "data.dir" must not cover a future "data.dir_suffix"
  return key == prefix or key.startswith(prefix + ".")


def changes_run(key: str) -> bool:
  """Whether changing the dotted ``key`` makes a different run: the longest matching prefix decides."""
  best, best_is_harmless = -1, False
  for prefixes, harmless in ((RUN_CHANGING, False), (HARMLESS, True)):
    for prefix in prefixes:
      if _matches(key, prefix) and len(prefix) > best:
        best, best_is_harmless = len(prefix), harmless
  return not best_is_harmless  # no match at all: an unknown key, assumed to matter


def _normalized(value: Any) -> Any:
  """Lists for tuples (a saved config has been through JSON), recursively."""
  if isinstance(value, (list, tuple)):
    return [_normalized(v) for v in value]
  if isinstance(value, dict):
    return {k: _normalized(v) for k, v in value.items()}
  return value


def _same(a: Any, b: Any) -> bool:
  # True == 1 and 1 == 1.0 in Python; a flag turned into a number (or back) is still a change, an int vs float isn't
  if isinstance(a, bool) != isinstance(b, bool):
    return False
  if isinstance(a, list) and isinstance(b, list):
    return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
  if isinstance(a, dict) and isinstance(b, dict):
    return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
  return a == b


def _walk(prefix: str, old: Any, new: Any, out: list[Difference]) -> None:
  old_is_dict, new_is_dict = isinstance(old, dict), isinstance(new, dict)
  # descend while both sides are sections (or one is absent), so that every leaf is classified on its own key
  if (old_is_dict or old is ABSENT) and (new_is_dict or new is ABSENT) and (old_is_dict or new_is_dict):
    old_d, new_d = (old if old_is_dict else {}), (new if new_is_dict else {})
    keys = list(old_d) + [k for k in new_d if k not in old_d]
    if keys:
      for k in keys:
        _walk(f"{prefix}.{k}" if prefix else k, old_d.get(k, ABSENT), new_d.get(k, ABSENT), out)
      return
  if (old is ABSENT) == (new is ABSENT) and _same(old, new):
    return
  if old is ABSENT and new is None:
    return  # an optional key the project added since the run started, left unset: the run is the same
  out.append(Difference(prefix, old, new, changes_run(prefix)))


def config_differences(saved: dict, new: dict) -> list[Difference]:
  """Every leaf key whose value differs between two plain nested config dicts, classified.

  Args:
    saved: the config a workdir was trained with, as read from its ``config.json``.
    new: the config about to be run, e.g. ``json.loads(config.to_json_best_effort())``.

  Returns:
    One :class:`Difference` per differing dotted key, in the saved config's key order (keys only the new config has
    at the end of their section); lists and tuples with equal items are equal. A key on one side only is a
    difference with :data:`ABSENT` on the other side.
  """
  out: list[Difference] = []
  _walk("", _normalized(saved), _normalized(new), out)
  return out


def _config_dict(config) -> dict:
  return json.loads(config.to_json_best_effort())


def check_resume(workdir: fs.PathLike, config, *, allow_change: bool) -> list[Difference]:
  """Compares ``config`` with the one saved in ``workdir`` and refuses run-changing differences unless allowed.

  Call it before the new config is saved over ``config.json``. Every process reads the saved config and decides
  alike, so all of them raise together; only process 0 writes the history.

  Args:
    workdir: the training workdir (local path or URL).
    config: the ``ml_collections.ConfigDict`` about to be run.
    allow_change: continue even when differences change the run (``--allow_config_change``).

  Returns:
    The differences (empty for a new workdir or an identical config). When there are any, a line
    ``{"time", "differences", "allowed"}`` has been appended to ``<workdir>/config_history.jsonl``.

  Raises:
    ConfigChangedError: some difference changes the run and ``allow_change`` is False; nothing is written then.
  """
  saved_path = fs.join(workdir, CONFIG_FILE)
  if not fs.exists(saved_path):
    return []
  differences = config_differences(fs.read_json(saved_path), _config_dict(config))
  run_changing = [d for d in differences if d.changes_run]
  if run_changing and not allow_change:
    lines = "\n".join(f"  {d}" for d in run_changing)
    raise ConfigChangedError(
        f"the config differs from the one {workdir} was trained with ({saved_path}) in ways that change the run:\n"
        f"{lines}\n"
        f"Pass --allow_config_change to continue anyway, or use a new workdir.")
  for d in differences:
    if d.changes_run:
      logging.warning("Config change that changes the run (allowed by --allow_config_change): %s", d)
    else:
      logging.info("Config change: %s", d)
  if differences and jax.process_index() == 0:
    _append_history(fs.join(workdir, HISTORY_FILE), {
        "time": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "differences": [d.to_json() for d in differences],
        "allowed": allow_change,
    })
  return differences


def _append_history(path, record: dict) -> None:
  # an object in a bucket cannot be appended to: read the whole history, add the line, write it back
  previous = fs.read_text(path) if fs.exists(path) else ""
  if previous and not previous.endswith("\n"):
    previous += "\n"
  fs.write_text(path, previous + json.dumps(record, ensure_ascii=False, sort_keys=True) + "\n")


def read_history(workdir: fs.PathLike) -> list[dict]:
  """The records :func:`check_resume` appended to ``<workdir>/config_history.jsonl``, oldest first."""
  path = fs.join(workdir, HISTORY_FILE)
  if not fs.exists(path):
    return []
  return [json.loads(line) for line in fs.read_text(path).splitlines() if line.strip()]
