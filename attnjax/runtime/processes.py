"""The processes of a run: joining a multi-host run (``jax.distributed``) and the command lines' logging."""

from __future__ import annotations

import logging as py_logging
import os
import socket

from absl import logging
import jax

# The exit status of a training command stopped by SIGTERM after writing its checkpoint (EX_TEMPFAIL, "try again"):
# the run is not finished, so a launcher neither evaluates it nor records it as done; launching it again resumes it.
PREEMPTED_EXIT = 75


def peer_timeout_seconds(cfg) -> int:
  """``config.distributed.peer_timeout_seconds``, checked: seconds of silence after which a peer process counts as
  hung. :class:`PeerWatchdog` gives up after this long; jax.distributed's heartbeat timeout is set to twice it (JAX's
  own default, 100 s, for the default 50), so that the watchdog's message comes first."""
  seconds = cfg.get("peer_timeout_seconds", 50)
  if isinstance(seconds, bool) or not isinstance(seconds, int) or seconds < 1:
    raise ValueError(f"config.distributed.peer_timeout_seconds={seconds!r}: must be a whole number of seconds >= 1")
  return seconds


def maybe_initialize_distributed(cfg) -> None:
  """``jax.distributed.initialize`` when the config (i.e. the launcher) asks for it; before any device is touched."""
  if not cfg.initialize:
    return
  if cfg.cpu_collectives:
    jax.config.update("jax_cpu_collectives_implementation", cfg.cpu_collectives)
  kwargs = {k: cfg[k] for k in ("coordinator_address", "num_processes", "process_id") if cfg[k] is not None}
  # a frozen peer (SIGSTOP, a paused VM) stops heartbeating: JAX aborts the others after this; the peer watchdog
  # (half of it) explains first which process hung
  kwargs["heartbeat_timeout_seconds"] = 2 * peer_timeout_seconds(cfg)
  jax.distributed.initialize(**kwargs)  # on TPU VMs / SLURM every argument is discovered from the environment
  logging.info("distributed: process %d of %d on host %s (pid %d), %d local / %d global devices", jax.process_index(),
               jax.process_count(), socket.gethostname(), os.getpid(), jax.local_device_count(), jax.device_count())


class _QuietLibraries(py_logging.Filter):
  def filter(self, record):  # Orbax narrates every save and gcsfs every read at INFO; keep their warnings
    return record.levelno >= py_logging.WARNING or not any(name in record.pathname for name in ("orbax", "gcsfs"))


def quiet_orbax_logging() -> None:
  """Drops Orbax's and gcsfs' INFO chatter from the absl log handler (CLIs call this; libraries leave logging
  alone)."""
  logging.get_absl_handler().addFilter(_QuietLibraries())
  py_logging.getLogger("gcsfs").setLevel(py_logging.WARNING)
