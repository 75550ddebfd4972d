"""How every attnjax command line starts and fails: :func:`run` instead of ``absl.app.run``.

A user's mistake ends the command with one line on stderr that names what to fix, and exit status 2::

    attnjax.train: error: --config.model.num_head: config.model has no key 'num_head' (did you mean num_heads?)
    attnjax.train: error: --config=experiments/nope.py: no such experiment file
    attnjax.train: error: config.model: invalid model config (transformer): num_heads must be a positive integer, got -3
    attnjax.train: error: unknown flag --bogus (see --helpshort)

User mistakes are what the code raises for bad input: :class:`ValueError` (a bad value, named), :class:`FileNotFoundError`
(a missing file, named), :class:`WorkdirBusy`, :class:`CheckpointRestoreError` (a workdir whose checkpoints do not fit
the run), a flag the command does not know and a config key that does not
exist. Anything else is an internal error and keeps its traceback, as does every error with ``--verbose``.

A machine without a TPU runs the command on its GPU or CPU without JAX's and libtpu's start-up messages about the TPU
it cannot find (:func:`platforms_without_tpu_noise`).
"""

from __future__ import annotations

import ast
import difflib
import os
import re
import sys
import typing
from typing import Callable

from absl import app, flags

_VERBOSE = flags.DEFINE_bool("verbose", False, "on an error, print the whole traceback, not only its one-line reason")

EXIT_USER_ERROR = 2  # as argparse and absl's usage errors


def _user_errors() -> tuple[type[BaseException], ...]:
  from attnjax.runtime.checkpointing import CheckpointRestoreError  # pylint: disable=g-import-not-at-top
  from attnjax.runtime.workdir_lock import WorkdirBusy  # pylint: disable=g-import-not-at-top
  return (ValueError, FileNotFoundError, NotADirectoryError, WorkdirBusy, CheckpointRestoreError)


def _one_line(text: str) -> str:
  return re.sub(r"\s*\n\s*", " ", str(text)).strip()


def _fail(program: str, message: str) -> None:
  sys.stderr.write(f"{program}: error: {_one_line(message)}\n")
  sys.stderr.flush()
  sys.exit(EXIT_USER_ERROR)


def _verbose(argv: list[str]) -> bool:
  return any(a in ("--verbose", "--verbose=true", "--verbose=True", "--verbose=1") for a in argv)


def check_config_overrides(argv: list[str], flag: str = "config") -> list[str]:
  """Raises ValueError naming the first ``--<flag>.a.b=value`` whose key the experiment's config lacks (with the
  nearest existing key), or the experiment file that does not exist. ml_collections would say the same in a
  30-line traceback.

  A ``config.data`` key the experiment does not set but its data source reads (the family's ``data_keys``, for the
  source the command line names or else the experiment's) is no mistake: one command line points any experiment at
  a user's files (``--config.data.source=tsv --config.data.path=pairs.tsv``). ml_collections knows only the keys
  the experiment set, so these overrides are returned, to be taken out of the flags and set by
  :func:`set_data_overrides` once the rest are parsed.
  """
  from attnjax import config as config_lib  # pylint: disable=g-import-not-at-top
  spec = next((a.split("=", 1)[1] for a in argv if a.startswith(f"--{flag}=")), None)
  overrides = [a for a in argv if a.startswith(f"--{flag}.")]
  if spec is None:
    return []
  path, _, arg = spec.partition(":")
  module = config_lib.experiment_module(path, f"--{flag}")  # FileNotFoundError naming the flag
  if not overrides:
    return []
  config = module.get_config(arg) if arg else module.get_config()
  taken = []
  for override in overrides:
    key = override[len(f"--{flag}."):].split("=", 1)[0]
    parts = key.split(".")
    if parts[0] == "data" and len(parts) > 1 and "=" in override and _lacks(config, parts):
      _data_key_type(_source_data_keys(config, argv, flag), parts, flag)  # ValueError naming a key no source reads
      taken.append(override)
      continue
    node, walked = config, flag
    for part in parts:
      keys = list(node.keys()) if hasattr(node, "keys") else []
      if part not in keys:
        near = difflib.get_close_matches(part, keys, n=1)
        hint = f" (did you mean {near[0]}?)" if near else ""
        raise ValueError(f"--{flag}.{key}: {walked} has no key {part!r}{hint}")
      node, walked = node[part], f"{walked}.{part}"
  return taken


def _lacks(config, parts: list[str]) -> bool:
  node = config
  for part in parts:
    if node is None or not hasattr(node, "keys") or part not in node.keys():
      return True
    node = node[part]
  return False


def _source_data_keys(config, argv: list[str], flag: str) -> dict:
  """The data keys of the source the command line names (``--<flag>.data.source=``), else of the experiment's."""
  from attnjax import families  # pylint: disable=g-import-not-at-top
  named = [a.split("=", 1)[1] for a in argv if a.startswith(f"--{flag}.data.source=")]
  source = named[-1] if named else config.data.get("source")
  return families.for_source(source).source_data_keys(source)


def _data_key_type(data_keys: dict, parts: list[str], flag: str):
  """The type of the value ``--<flag>.data.<key>[.<split>]`` sets; ValueError naming a key the source reads not."""
  key = ".".join(parts[1:])
  if parts[1] not in data_keys:
    near = difflib.get_close_matches(parts[1], list(data_keys), n=1)
    hint = f" (did you mean {near[0]}?)" if near else f" (it reads: {', '.join(sorted(data_keys))})"
    raise ValueError(f"--{flag}.data.{key}: {flag}.data has no key {parts[1]!r}, and its data source reads none by "
                     f"that name{hint}")
  kind = data_keys[parts[1]]
  if len(parts) == 2:
    return kind
  if typing.get_origin(kind) is dict and len(parts) == 3:
    return typing.get_args(kind)[1]
  raise ValueError(f"--{flag}.data.{key}: {flag}.data.{parts[1]} has no key {parts[2]!r}")


def _typed(name: str, kind, raw: str):
  """``raw`` (a flag's text) as a value of ``kind``: str, int, float, bool or ``dict[str, V]`` (a Python literal)."""
  if typing.get_origin(kind) is dict:
    try:
      value = ast.literal_eval(raw)
    except (SyntaxError, ValueError):
      value = None
    if not isinstance(value, dict):
      raise ValueError(f"{name}: expected a dict such as {{'train': 'train.tsv'}} (a Python literal), got {raw!r}")
    return {str(k): _typed(f"{name}.{k}", typing.get_args(kind)[1], str(v)) for k, v in value.items()}
  if kind is bool:
    if raw.lower() not in ("true", "false", "1", "0"):
      raise ValueError(f"{name}: expected true or false, got {raw!r}")
    return raw.lower() in ("true", "1")
  if kind in (int, float):
    try:
      return kind(raw)
    except ValueError:
      raise ValueError(f"{name}: expected {'an integer' if kind is int else 'a number'}, got {raw!r}") from None
  return raw


def set_data_overrides(config, taken: list[str], flag: str = "config") -> None:
  """Sets the data-key overrides :func:`check_config_overrides` took out of the flags, each parsed to the type
  its source gives it (``--config.data.splits.validation=dev.tsv`` adds one split to ``splits``)."""
  from attnjax import families  # pylint: disable=g-import-not-at-top
  data_keys = families.of(config).source_data_keys(config.data.source)
  for override in taken:
    key, _, raw = override[len(f"--{flag}."):].partition("=")
    parts = key.split(".")
    value = _typed(f"--{flag}.{key}", _data_key_type(data_keys, parts, flag), raw)
    with config.data.unlocked():
      if len(parts) == 2:
        config.data[parts[1]] = value
        continue
      if config.data.get(parts[1]) is None:
        config.data[parts[1]] = {}
      with config.data[parts[1]].unlocked():
        config.data[parts[1]][parts[2]] = value


def _parser(program: str, config_flag: str | None):
  def parse(argv: list[str]):
    try:
      taken = check_config_overrides(argv, config_flag) if config_flag else []
      if not taken:
        return flags.FLAGS(argv)
      rest, saved = [a for a in argv if a not in taken], sys.argv
      sys.argv = rest  # ml_collections finds a config's overrides in sys.argv
      try:
        parsed = flags.FLAGS(rest)
      finally:
        sys.argv = saved
      set_data_overrides(flags.FLAGS[config_flag].value, taken, config_flag)
      return parsed
    except flags.UnrecognizedFlagError as e:
      _fail(program, f"unknown flag --{e.flagname} (see --helpshort)")
    except flags.Error as e:
      _fail(program, f"{e} (see --helpshort)")
    except _user_errors() as e:
      if _verbose(argv):
        raise
      _fail(program, str(e))
    return None  # not reached
  return parse


def platforms_without_tpu_noise() -> str | None:
  """``JAX_PLATFORMS`` for a machine without a TPU: the GPU platform if a JAX GPU plugin is installed, and the CPU.
  Otherwise JAX probes for a TPU at every start: with libtpu installed (the ``test`` and ``tpu`` extras) libtpu
  prints errors about the TPU it cannot find, and without it JAX logs that it could not open libtpu. None (JAX's own
  choice) where the user set ``JAX_PLATFORMS`` to a platform, or where libtpu is installed and there may be a TPU.
  An empty ``JAX_PLATFORMS`` names no platform (JAX's automatic choice), so it counts as unset."""
  import glob  # pylint: disable=g-import-not-at-top
  import importlib.util  # pylint: disable=g-import-not-at-top
  if os.environ.get("JAX_PLATFORMS", "").strip():
    return None
  found = lambda *names: any(importlib.util.find_spec(name) is not None for name in names)
  tpu_signs = glob.glob("/dev/accel*") or glob.glob("/dev/vfio/[0-9]*") or os.environ.get("TPU_ACCELERATOR_TYPE")
  if tpu_signs and found("libtpu"):
    return None  # TPU chips (v2-v4: /dev/accel*, v5 and later: VFIO), or a TPU VM's environment, and JAX's TPU runtime
  if found("jax_cuda12_plugin", "jax_cuda13_plugin"):
    return "cuda,cpu"
  if found("jax_rocm6_plugin", "jax_rocm7_plugin"):
    return "rocm,cpu"
  return "cpu"


def use_platforms(platforms: str | None) -> None:
  """Sets ``JAX_PLATFORMS`` to ``platforms`` (None: leaves JAX's choice alone). JAX reads the variable when it is
  imported, and a command's module imports it before :func:`run`, so an imported JAX gets it as ``jax_platforms`` too
  (its backends start later, at the first device use)."""
  if not platforms:
    return
  os.environ["JAX_PLATFORMS"] = platforms
  if "jax" in sys.modules:
    sys.modules["jax"].config.update("jax_platforms", platforms)


def one_device_per_core() -> int | None:
  """On a host whose only JAX platform is the CPU, one JAX device per core this process may use
  (``jax_num_cpu_devices``): a decoding command's data-parallel mesh then decodes a share of each batch on every core,
  where one CPU device keeps about one core busy between its large operations. Returns the device count set; None
  (nothing changed) where another platform may be used, ``XLA_FLAGS`` already sets a count, there is one core, or
  JAX's backends have started (the count is fixed then)."""
  if os.environ.get("JAX_PLATFORMS", "").strip() != "cpu" and platforms_without_tpu_noise() != "cpu":
    return None
  if "xla_force_host_platform_device_count" in os.environ.get("XLA_FLAGS", ""):
    return None
  cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
  if cores < 2:
    return None
  import jax  # pylint: disable=g-import-not-at-top
  try:
    jax.config.update("jax_num_cpu_devices", cores)
  except RuntimeError:  # the backends have started: their device count stays
    return None
  return cores


def run(main: Callable[[list[str]], object], *, config_flag: str | None = None, cpu_cores: bool = False) -> None:
  """``absl.app.run(main)`` with the errors of the module docstring turned into one line and exit status 2.

  Args:
    main: the command's main function.
    config_flag: the name of its ml_collections config-file flag, if any (``config``): its overrides are checked
      against the experiment's config before the flags are parsed.
    cpu_cores: a decoding command: on a CPU-only host, a JAX device per core (:func:`one_device_per_core`).
  """
  use_platforms(platforms_without_tpu_noise())
  if cpu_cores:
    one_device_per_core()
  program = os.path.splitext(os.path.basename(sys.argv[0]))[0]
  if program in ("__main__", "__init__"):
    program = "attnjax"
  module = getattr(sys.modules.get("__main__"), "__spec__", None)
  if module is not None and module.name:
    program = module.name.removesuffix(".__main__")

  def guarded(argv):
    try:
      return main(argv)
    except _user_errors() as e:
      if _VERBOSE.value:
        raise
      _fail(program, str(e))
    return None

  app.run(guarded, flags_parser=_parser(program, config_flag))
