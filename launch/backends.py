"""Where a launched run executes: this machine, a Cloud TPU VM slice, or a SLURM allocation of GPU nodes.

Each backend turns a :class:`Point` (one run of an experiment: its workdir and the ``--config.*`` overrides) into the
exact commands that run it, so a dry run prints what a real one executes, and the manifest records them.

* :class:`Local`: ``attnjax.train`` then ``attnjax.evaluate`` as subprocesses here, one point after another; with
  ``processes > 1`` every point runs as that many processes joined by gloo over 127.0.0.1 (a multi-host rehearsal).
* :class:`TpuVm`: create the slice (``gcloud compute tpus tpu-vm create``, or the queued-resources form for spot
  capacity) unless one of that name exists, install the project at the launching commit on every worker, train on
  ``--worker=all`` with ``distributed.initialize=True`` (JAX discovers the slice), then evaluate the best checkpoint on
  worker 0. Re-running the launch resumes every unfinished point from its checkpoint.
* :class:`Slurm`: one sbatch file per point (nodes, GPUs per node, ``--signal`` so the job's SIGTERM checkpoints
  before the time limit), submitted or only written.
"""

from __future__ import annotations

import dataclasses
import shlex
import shutil
import socket
import subprocess
import sys
import time

from attnjax import fs

# Cloud TPU accelerator types and VM runtimes by target (attnjax/targets.py).
TPU_ACCELERATORS = {"tpu-v4-8": ("v4-8", "tpu-ubuntu2204-base"), "tpu-v4-32": ("v4-32", "tpu-ubuntu2204-base"),
                    "tpu-v5e-16": ("v5litepod-16", "v2-alpha-tpuv5-lite"),
                    "tpu-v5e-16-fsdp": ("v5litepod-16", "v2-alpha-tpuv5-lite"),
                    "tpu-v5p-64": ("v5p-64", "v2-alpha-tpuv5")}


@dataclasses.dataclass
class Point:
  """One run of a launch: ``name`` within the sweep, its workdir, and ``--config.*`` flags (sweep's and user's)."""
  name: str
  workdir: str
  config_flags: list[str]
  experiment: str  # FILE:TARGET as attnjax.train takes it

  def train_args(self) -> list[str]:
    return ["-m", "attnjax.train", f"--config={self.experiment}", f"--workdir={self.workdir}", *self.config_flags]

  def evaluate_args(self, split: str) -> list[str]:
    return ["-m", "attnjax.evaluate", f"--workdir={self.workdir}", f"--split={split}", "--checkpoint=best"]


def _join(args) -> str:
  return " ".join(shlex.quote(a) for a in args)


def require_tool(name: str, why: str) -> None:
  if shutil.which(name) is None:
    raise RuntimeError(f"{name} is not installed or not on PATH ({why}); install it, or use --dry_run to only print "
                       f"the commands")


class Local:
  """Runs the points here, one after another (see the module docstring)."""

  def __init__(self, python: str = sys.executable, processes: int = 1, env: dict | None = None):
    self.python, self.processes, self.env = python, processes, env

  def commands(self, point: Point, split: str) -> dict[str, str]:
    train = [self.python, *point.train_args()]
    if self.processes > 1:
      train = train + ["--config.distributed.initialize=True", "--config.distributed.cpu_collectives=gloo",
                       "--config.distributed.coordinator_address=127.0.0.1:PORT",
                       f"--config.distributed.num_processes={self.processes}",
                       "--config.distributed.process_id=I"]
    return {"train": _join(train), "evaluate": _join([self.python, *point.evaluate_args(split)])}

  def run(self, point: Point, split: str, log) -> int:
    """Trains then evaluates ``point``; returns the first non-zero exit code (0 on success)."""
    train = [self.python, *point.train_args()]
    if self.processes == 1:
      code = subprocess.call(train, stdout=log, stderr=subprocess.STDOUT, env=self.env)
    else:
      port = _free_port()
      procs = [subprocess.Popen(train + ["--config.distributed.initialize=True",
                                         "--config.distributed.cpu_collectives=gloo",
                                         f"--config.distributed.coordinator_address=127.0.0.1:{port}",
                                         f"--config.distributed.num_processes={self.processes}",
                                         f"--config.distributed.process_id={i}"],
                                stdout=log, stderr=subprocess.STDOUT, env=self.env) for i in range(self.processes)]
      code = max(abs(p.wait()) for p in procs)
    if code:
      return code
    return subprocess.call([self.python, *point.evaluate_args(split)], stdout=log, stderr=subprocess.STDOUT,
                           env=self.env)


def _free_port() -> int:
  with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    return s.getsockname()[1]


@dataclasses.dataclass
class TpuVm:
  """Commands for a Cloud TPU VM slice per point (see the module docstring)."""
  target: str
  zone: str
  project: str | None = None
  name_prefix: str = "attnjax"
  spot: bool = False
  repo_url: str = ""  # where the workers clone the project (--repo_url)
  commit: str = "HEAD"

  def tpu_name(self, point: Point, launch_name: str) -> str:
    name = f"{self.name_prefix}-{launch_name}-{point.name}".lower().replace("_", "-").replace(".", "-")
    return name[:62].rstrip("-")

  def _gcloud(self, *args: str) -> list[str]:
    project = [f"--project={self.project}"] if self.project else []
    return ["gcloud", "compute", "tpus", *args, f"--zone={self.zone}", *project]

  def commands(self, point: Point, split: str, launch_name: str) -> dict[str, str]:
    if self.target not in TPU_ACCELERATORS:
      raise ValueError(f"target {self.target!r} is not a TPU target (TPU targets: {sorted(TPU_ACCELERATORS)})")
    if not self.repo_url:
      raise ValueError("--repo_url is required for a TPU VM target: every worker clones the project from it and checks "
                       "out the launching commit")
    accelerator, runtime = TPU_ACCELERATORS[self.target]
    name = self.tpu_name(point, launch_name)
    if self.spot:  # spot / preemptible capacity comes through a queued resource
      create = self._gcloud("queued-resources", "create", f"{name}-qr", f"--node-id={name}",
                            f"--accelerator-type={accelerator}", f"--runtime-version={runtime}", "--spot")
    else:
      create = self._gcloud("tpu-vm", "create", name, f"--accelerator-type={accelerator}", f"--version={runtime}")
    install = (f"(test -d attnjax || git clone {shlex.quote(self.repo_url)} attnjax) && cd attnjax && git fetch -q "
               f"origin && git checkout -q {self.commit} && pip install -q -e '.[tpu]'")
    train = f"cd attnjax && python3 {_join(point.train_args())} --config.distributed.initialize=True"
    # every worker joins the evaluation (each decodes its share of the split; worker 0 writes and scores)
    evaluate = f"cd attnjax && python3 {_join(point.evaluate_args(split))} --distributed"
    return {
        "describe": _join(self._gcloud("tpu-vm", "describe", name)),
        "create": _join(create),
        "install": _join(self._gcloud("tpu-vm", "ssh", name, "--worker=all", f"--command={install}")),
        "train": _join(self._gcloud("tpu-vm", "ssh", name, "--worker=all", f"--command={train}")),
        "evaluate": _join(self._gcloud("tpu-vm", "ssh", name, "--worker=all", f"--command={evaluate}")),
    }

  def run(self, point: Point, split: str, launch_name: str, log) -> int:
    require_tool("gcloud", "the TPU VM target creates and drives slices with the Google Cloud CLI")
    cmds = self.commands(point, split, launch_name)
    exists = subprocess.call(shlex.split(cmds["describe"]), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) == 0
    steps = ["install", "train", "evaluate"] if exists else ["create", "install", "train", "evaluate"]
    for step in steps:
      if step == "install" and not exists and self.spot:
        _wait_until_ready(cmds["describe"])
      code = subprocess.call(shlex.split(cmds[step]), stdout=log, stderr=subprocess.STDOUT)
      if code:
        return code
    return 0


def _wait_until_ready(describe: str, timeout_s: float = 3600) -> None:
  deadline = time.time() + timeout_s
  while time.time() < deadline:
    if subprocess.call(shlex.split(describe), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) == 0:
      return
    time.sleep(30)
  raise RuntimeError(f"the queued TPU resource did not become ready within {timeout_s / 60:.0f} minutes")


@dataclasses.dataclass
class Slurm:
  """One sbatch script per point for GPU nodes (see the module docstring)."""
  nodes: int
  gpus_per_node: int
  time_limit: str = "24:00:00"
  partition: str | None = None
  python: str = "python"

  def script(self, point: Point, split: str, launch_name: str) -> str:
    partition = f"#SBATCH --partition={self.partition}\n" if self.partition else ""
    train = _join([self.python, *point.train_args(), "--config.distributed.initialize=True"])
    evaluate = _join([self.python, *point.evaluate_args(split)])
    return (f"#!/usr/bin/env bash\n#SBATCH --job-name={launch_name}-{point.name}\n#SBATCH --nodes={self.nodes}\n"
            f"#SBATCH --ntasks-per-node=1\n#SBATCH --gpus-per-node={self.gpus_per_node}\n"
            f"#SBATCH --time={self.time_limit}\n{partition}"
            "# SIGTERM 5 minutes before the limit: every task saves a checkpoint; resubmitting resumes from it\n"
            "#SBATCH --signal=TERM@300\nset -euo pipefail\n"
            "# one task per node; jax.distributed.initialize() reads SLURM's environment\n"
            f"srun {train}\n{evaluate}\n")

  def commands(self, point: Point, split: str, launch_name: str, script_path: str) -> dict[str, str]:
    return {"sbatch": _join(["sbatch", script_path]),
            "train": _join([self.python, *point.train_args(), "--config.distributed.initialize=True"]),
            "evaluate": _join([self.python, *point.evaluate_args(split)])}

  def write(self, point: Point, split: str, launch_name: str, script_path: str) -> None:
    fs.write_text(script_path, self.script(point, split, launch_name))
