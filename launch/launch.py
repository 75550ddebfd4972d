"""Launch an experiment, or every point of one of its sweeps, on this machine, a TPU VM slice or SLURM GPU nodes.

    python -m launch.launch --experiment=experiments/wmt14_en_de/transformer_base.py --sweep=heads \\
        --target=tpu-v5e-16 --workdir_root=gs://BUCKET/study --zone=us-central2-b --repo_url=URL [--dry_run] \\
        [--config.train.steps=50000 ...]
    python -m launch.launch --experiment=experiments/dates_transformer.py --target=cpu --workdir_root=runs/study

Run from the repository root. Points come from the experiment's ``SWEEPS[--sweep]`` (a list of ``{"name",
"overrides"}``), or one point ("default") without ``--sweep``; ``--config.*`` flags are passed to every point after
the sweep's own. Each point trains in ``<workdir_root>/<experiment>/<sweep or "single">/<point>`` and is then
evaluated on its best checkpoint (``--split``). The backend follows the target's platform (``cpu``: this machine,
``tpu``: Cloud TPU VMs, ``gpu``: SLURM); see :mod:`launch.backends`.

Manifests: ``<workdir_root>/launches/<time>.json`` records the launch (experiment, sweep, target, git commit, the
exact commands of every point, start and end times, statuses); each run's ``launch.json`` records its own, which
``python -m attnjax.report`` reads. Re-running the same launch skips points already done and resumes the others from
their checkpoints. ``--dry_run`` prints every command (gcloud and sbatch included) and executes none.

Seeds: ``--seeds=0,1`` trains every point once per seed (``--config.seed=N``), each in ``<point>/seed<N>``; the report
gives each point's mean and spread over its seeds.
"""

from __future__ import annotations

import datetime
import inspect
import json
import os
import subprocess
import sys
import time

from absl import app, flags, logging

from attnjax import config as config_lib, fs, targets
from attnjax.runtime.processes import PREEMPTED_EXIT
from launch import backends

# Flags are defined only when this module runs as the CLI, so that importing it (tests, other tools) never
# collides with another module's flags of the same name.
_EXPERIMENT = None
_SWEEP = None
_TARGET = None
_WORKDIR_ROOT = None
_DRY_RUN = None
_SPLIT = None
_POINTS = None
_SEEDS = None
_ZONE = None
_PROJECT = None
_SPOT = None
_REPO_URL = None
_TPU_PREFIX = None
_SUBMIT = None
_PARTITION = None
_TIME_LIMIT = None
_PROCESSES = None


def define_flags() -> None:
  global _EXPERIMENT, _SWEEP, _TARGET, _WORKDIR_ROOT, _DRY_RUN, _SPLIT, _POINTS, _SEEDS, _ZONE, _PROJECT, _SPOT
  global _REPO_URL, _TPU_PREFIX, _SUBMIT, _PARTITION, _TIME_LIMIT, _PROCESSES
  _EXPERIMENT = flags.DEFINE_string("experiment", None, "experiment file (experiments/<task>/<model>.py)")
  _SWEEP = flags.DEFINE_string("sweep", None, "a named sweep of the experiment (its SWEEPS); none: one run")
  _TARGET = flags.DEFINE_string("target", None, "target (attnjax/targets.py); default: the experiment's own")
  _WORKDIR_ROOT = flags.DEFINE_string("workdir_root", None, "where runs and manifests go (a gs:// bucket or a path)")
  _DRY_RUN = flags.DEFINE_bool("dry_run", False, "print every command, execute none")
  _SPLIT = flags.DEFINE_string("split", "test", "the split(s) evaluated after training, comma-separated "
                               "(attnjax.evaluate's --split), e.g. test,test2017")
  _POINTS = flags.DEFINE_list("points", None, "only these points of the sweep")
  _SEEDS = flags.DEFINE_list("seeds", None, "train every point once per seed (config.seed), in <point>/seed<N>")
  # TPU VM
  _ZONE = flags.DEFINE_string("zone", None, "TPU VM zone (e.g. us-central2-b)")
  _PROJECT = flags.DEFINE_string("project", None, "Google Cloud project (default: gcloud's)")
  _SPOT = flags.DEFINE_bool("spot", False, "spot capacity through a queued resource")
  _REPO_URL = flags.DEFINE_string("repo_url", None, "git URL the TPU workers clone the project from")
  _TPU_PREFIX = flags.DEFINE_string("tpu_prefix", "attnjax", "TPU VM names: <prefix>-<experiment>-<point>")
  # SLURM
  _SUBMIT = flags.DEFINE_bool("submit", True, "SLURM: submit the sbatch scripts (else only write them)")
  _PARTITION = flags.DEFINE_string("partition", None, "SLURM partition")
  _TIME_LIMIT = flags.DEFINE_string("time_limit", "24:00:00", "SLURM time limit per job")
  # local
  _PROCESSES = flags.DEFINE_integer("local_processes", 1, "local target: processes per point (gloo on 127.0.0.1)")

  flags.mark_flags_as_required(["experiment", "workdir_root"])


def sweep_points(module, sweep: str | None, only=None) -> list[dict]:
  """``[{"name", "overrides"}]`` of ``sweep`` (one "default" point without), checked for a clear error."""
  if sweep is None:
    return [{"name": "default", "overrides": {}}]
  sweeps = getattr(module, "SWEEPS", {})
  if sweep not in sweeps:
    raise ValueError(f"--sweep={sweep}: the experiment has no such sweep (its sweeps: {sorted(sweeps) or 'none'})")
  points = list(sweeps[sweep])
  if only:
    unknown = sorted(set(only) - {p["name"] for p in points})
    if unknown:
      raise ValueError(f"--points: {unknown} are not points of sweep {sweep!r} ({[p['name'] for p in points]})")
    points = [p for p in points if p["name"] in only]
  return points


def parse_seeds(seeds, config_overrides=()) -> list[int] | None:
  """``--seeds`` as distinct integers (None: one run per point, with the experiment's own seed)."""
  if seeds is None:
    return None
  try:
    parsed = [int(s) for s in seeds]
  except ValueError:
    raise ValueError(f"--seeds={','.join(map(str, seeds))}: seeds are integers, e.g. --seeds=0,1") from None
  if not parsed or len(set(parsed)) != len(parsed):
    raise ValueError(f"--seeds={','.join(map(str, seeds))}: give distinct seeds, e.g. --seeds=0,1")
  if any(o.startswith("--config.seed=") for o in config_overrides):
    raise ValueError("--seeds and --config.seed both set the seed: give one of them")
  return parsed


def git_commit() -> str:
  try:
    commit = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
    dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], capture_output=True, text=True,
                           check=True).stdout.strip()
  except (OSError, subprocess.CalledProcessError):
    return "unknown"
  return commit + ("-dirty" if dirty else "")


def _value_flag(key: str, value) -> str:
  if isinstance(value, (list, tuple)):
    value = "(" + ",".join(str(v) for v in value) + ("," if len(value) == 1 else "") + ")"
  return f"--config.{key}={value}"


def _now() -> str:
  return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


def launch(experiment: str, *, workdir_root: str, sweep: str | None = None, target: str | None = None,
           config_overrides: list[str] | None = None, dry_run: bool = False, split: str = "test", points=None,
           seeds=None, zone: str | None = None, project: str | None = None, spot: bool = False,
           repo_url: str | None = None, tpu_prefix: str = "attnjax", submit: bool = True,
           partition: str | None = None, time_limit: str = "24:00:00", local_processes: int = 1,
           python: str = sys.executable) -> dict:
  """Launches every point (see the module docstring); returns the launch manifest."""
  module = config_lib.experiment_module(experiment)
  default_target = module.get_config().target
  target_name = target or default_target
  tgt = targets.get(target_name)  # unknown target: a named error before anything runs
  takes_target = bool(inspect.signature(module.get_config).parameters)
  if not takes_target and target_name != default_target:
    raise ValueError(f"--target={target_name}: {experiment}'s get_config() takes no target argument (it runs on "
                     f"{default_target!r}); give it a `target` parameter and call attnjax.targets.use_target")
  config_spec = f"{experiment}:{target_name}" if takes_target else experiment
  chosen = sweep_points(module, sweep, points)
  seeds = parse_seeds(seeds, config_overrides or ())
  relative = os.path.relpath(os.path.abspath(experiment), os.path.abspath("experiments"))
  stem = os.path.splitext(os.path.basename(experiment) if relative.startswith("..") else relative)[0]
  stem = stem.replace(os.sep, "/")
  launch_name = stem.replace("/", "-")
  root = fs.path(workdir_root)
  commit = git_commit()
  manifest = {"experiment": experiment, "experiment_name": stem, "sweep": sweep, "target": target_name,
              "platform": tgt.platform, "commit": commit, "start": _now(), "end": None, "dry_run": dry_run,
              "config_overrides": list(config_overrides or []), "points": []}
  manifest_path = root / "launches" / f"{time.strftime('%Y%m%d-%H%M%S')}-{launch_name}.json"
  if not dry_run:
    try:
      fs.write_json(manifest_path, manifest, indent=1)
    except OSError as e:
      raise RuntimeError(f"--workdir_root={workdir_root} cannot be written ({type(e).__name__}: {e})") from None
  backend = _backend(tgt, target_name, commit, zone=zone, project=project, spot=spot, repo_url=repo_url,
                     tpu_prefix=tpu_prefix, partition=partition, time_limit=time_limit, python=python,
                     local_processes=local_processes, dry_run=dry_run, submit=submit)
  failures = 0
  for point, seed in [(point, seed) for point in chosen for seed in (seeds or [None])]:
    workdir = root / stem / (sweep or "single") / point["name"]
    workdir = str(workdir if seed is None else workdir / f"seed{seed}")
    flags_ = [_value_flag(k, v) for k, v in point["overrides"].items()]
    flags_ += ([] if seed is None else [_value_flag("seed", seed)]) + list(config_overrides or [])
    run_name = point["name"] if seed is None else f"{point['name']}-seed{seed}"  # TPU VM and sbatch names
    p = backends.Point(run_name, workdir, flags_, config_spec)
    record = {"experiment": experiment, "experiment_name": stem, "sweep": sweep, "point": point["name"],
              "seed": seed, "overrides": point["overrides"], "extra_overrides": list(config_overrides or []),
              "target": target_name, "commit": commit, "workdir": workdir, "start": None, "end": None,
              "status": "pending", "returncode": None, "wall_seconds": None}
    if isinstance(backend, backends.TpuVm):
      record["commands"] = backend.commands(p, split, launch_name)
    elif isinstance(backend, backends.Slurm):
      script = str(root / "slurm" / f"{launch_name}-{run_name}.sbatch")
      record["commands"] = backend.commands(p, split, launch_name, script)
      record["sbatch_script"] = script
    else:
      record["commands"] = backend.commands(p, split)
    manifest["points"].append(record)
    if dry_run:
      if isinstance(backend, backends.Slurm):
        print(f"# {record['sbatch_script']}\n{backend.script(p, split, launch_name)}{record['commands']['sbatch']}")
      else:
        for command in record["commands"].values():
          print(command)
      continue
    if _run_point(backend, p, record, split, launch_name, submit):
      failures += 1
    fs.write_json(manifest_path, manifest, indent=1)
  manifest["end"] = _now()
  if not dry_run:
    fs.write_json(manifest_path, manifest, indent=1)
  manifest["failures"] = failures
  return manifest


def _backend(tgt, target_name: str, commit: str, *, zone, project, spot, repo_url, tpu_prefix, partition, time_limit,
             python, local_processes, dry_run: bool, submit: bool):
  """Where the points run: a TPU VM slice, SLURM (GPU targets) or this machine; the tools a real launch needs are
  checked before any point starts, not halfway through."""
  if tgt.platform == "tpu":
    if not zone:
      raise ValueError("--zone is required for a TPU VM target")
    backend = backends.TpuVm(target_name, zone=zone, project=project, name_prefix=tpu_prefix, spot=spot,
                             repo_url=repo_url or "", commit=commit.replace("-dirty", ""))
  elif tgt.platform == "gpu":
    backend = backends.Slurm(nodes=tgt.num_hosts, gpus_per_node=tgt.devices_per_host, time_limit=time_limit,
                             partition=partition, python="python")
  else:
    backend = backends.Local(python=python, processes=local_processes)
  if not dry_run and isinstance(backend, backends.TpuVm):
    backends.require_tool("gcloud", "the TPU VM target creates and drives slices with the Google Cloud CLI")
  if not dry_run and isinstance(backend, backends.Slurm) and submit:
    backends.require_tool("sbatch", "the GPU target submits SLURM jobs")
  return backend


def _run_point(backend, p, record: dict, split: str, launch_name: str, submit: bool) -> bool:
  """Runs (or submits) one point unless its workdir's ``launch.json`` says it is done, keeping that file current;
  returns whether it failed."""
  run_manifest = fs.join(p.workdir, "launch.json")
  previous = fs.read_json(run_manifest) if run_manifest.exists() else None
  if previous and previous.get("status") == "done":
    logging.info("%s: already done (%s), skipped", p.name, p.workdir)
    record.update(status="done", start=previous.get("start"), end=previous.get("end"),
                  returncode=previous.get("returncode"), wall_seconds=previous.get("wall_seconds"))
    return False
  record.update(status="running", start=_now())
  fs.write_json(run_manifest, record, indent=1)
  t0 = time.time()
  if isinstance(backend, backends.Slurm):
    backend.write(p, split, launch_name, record["sbatch_script"])
    if submit:
      backends.require_tool("sbatch", "the GPU target submits SLURM jobs")
      code = subprocess.call(["sbatch", record["sbatch_script"]])
      record.update(status="submitted" if code == 0 else "failed", returncode=code)
    else:
      record.update(status="written")
  else:
    log_path = fs.join(p.workdir, "launch.log")
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "ab") if not fs.is_url(log_path) else _null() as log:
      if isinstance(backend, backends.TpuVm):
        code = backend.run(p, split, launch_name, log)
      else:
        code = backend.run(p, split, log)
    # attnjax.train's exit status after SIGTERM (a checkpoint written, training not finished): relaunch to resume
    status = "done" if code == 0 else "preempted" if code == PREEMPTED_EXIT else "failed"
    record.update(status=status, returncode=code)
  record.update(end=_now(), wall_seconds=round(time.time() - t0, 1))
  fs.write_json(run_manifest, record, indent=1)
  if record["status"] == "failed":
    logging.error("%s failed (exit %s): see %s", p.name, record["returncode"], p.workdir)
    return True
  if record["status"] == "preempted":
    logging.warning("%s was stopped (SIGTERM) before its end, its checkpoint written: launch it again to resume (%s)",
                    p.name, p.workdir)
    return True
  return False


class _null:  # remote workdirs: the subprocess output goes to this process's stdout
  def __enter__(self):
    return None

  def __exit__(self, *exc):
    return False


def _split_config_flags(argv):
  """``--config.KEY=VALUE`` flags go through to every point; absl parses the rest."""
  overrides = [a for a in argv[1:] if a.startswith("--config.")]
  return overrides, [argv[0]] + [a for a in argv[1:] if not a.startswith("--config.")]


_OVERRIDES: list[str] = []


def _parse(argv):
  overrides, rest = _split_config_flags(argv)
  _OVERRIDES[:] = overrides
  return flags.FLAGS(rest)


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f"unexpected arguments: {argv[1:]}")
  try:
    manifest = launch(_EXPERIMENT.value, workdir_root=_WORKDIR_ROOT.value, sweep=_SWEEP.value, target=_TARGET.value,
                      config_overrides=_OVERRIDES, dry_run=_DRY_RUN.value, split=_SPLIT.value, points=_POINTS.value,
                      seeds=_SEEDS.value, zone=_ZONE.value, project=_PROJECT.value, spot=_SPOT.value,
                      repo_url=_REPO_URL.value, tpu_prefix=_TPU_PREFIX.value, submit=_SUBMIT.value,
                      partition=_PARTITION.value, time_limit=_TIME_LIMIT.value, local_processes=_PROCESSES.value)
  except (ValueError, FileNotFoundError, RuntimeError) as e:
    raise SystemExit(f"error: {e}") from None
  if not _DRY_RUN.value:
    print(json.dumps({p["point"] + ("" if p["seed"] is None else f"-seed{p['seed']}"): p["status"]
                      for p in manifest["points"]}, indent=1))
  if manifest["failures"]:
    raise SystemExit(f"{manifest['failures']} point(s) failed")


if __name__ == "__main__":
  define_flags()
  app.run(main, flags_parser=_parse)
