"""The training loop: data → sharded steps → logging, evaluation, checkpoints; resumable and preemption-safe."""

from __future__ import annotations

import math
import os
import shutil
import signal
import time

from absl import logging
import jax
import jax.numpy as jnp
import numpy as np

from attnjax import config as config_lib
from attnjax import families, fs
from attnjax.families.base import Predictions, mean_loss
from attnjax.models.registry import model_for, model_width
from attnjax.runtime import partitioning, workdir_lock
from attnjax.runtime.checkpointing import Checkpointer, CheckpointRestoreError
from attnjax.runtime.processes import maybe_initialize_distributed
from attnjax.training import provenance, steps, summaries, warm_start
from attnjax.training.watchdog import PeerWatchdog, exit_now, this_process
from attnjax.training.optim import make_optimizer
from attnjax.training.state import abstract_with_sharding, create_train_state


# the training clock: the time budget, and the throughput of each logging window (tests replace it with their own)
_clock = time.perf_counter


def measured_peak_flops() -> float:
  """FLOP/s of a float32 matmul on one device, measured here: the peak MFU is stated against on CPU."""
  n = 1024
  a = jnp.ones((n, n), jnp.float32)
  f = jax.jit(lambda x: x @ x)
  jax.block_until_ready(f(a))
  best = float("inf")
  for _ in range(5):
    t0 = time.perf_counter()
    jax.block_until_ready(f(a))
    best = min(best, time.perf_counter() - t0)
  return 2 * n**3 / best


class _Preemption:
  """Catches SIGTERM (TPU VM preemption, SLURM time limit) so the loop can save before exiting.

  On several processes the stop decision must be the same everywhere (every host saves the same step, or the
  collectives of the next step hang). Agreeing costs a host-device sync, so it happens only at sync points that all
  hosts know without talking (:func:`is_sync_point`); in between, steps are dispatched asynchronously. A single
  process checks at every step, which costs nothing.
  """

  def __init__(self):
    self.requested = False
    self.agreements = 0  # cross-host agreements so far (tests check there is none between sync points)
    self._previous = None

  def __enter__(self):
    try:
      self._previous = signal.signal(signal.SIGTERM, self._handle)
    except ValueError:  # not the main thread
      self._previous = None
    return self

  def _handle(self, signum, frame):  # pylint: disable=unused-argument
    logging.warning("SIGTERM received: saving a checkpoint at the next sync point before exiting")
    self.requested = True

  def agreed(self, out_of_time: bool = False) -> tuple[bool, bool]:
    """(preempted, out of time), agreed by all processes (any one's request stops all at the same step)."""
    flags = np.array([self.requested, out_of_time])
    if jax.process_count() > 1:
      from jax.experimental import multihost_utils  # pylint: disable=g-import-not-at-top
      self.agreements += 1
      flags = np.asarray(multihost_utils.process_allgather(flags)).reshape(-1, 2).any(axis=0)
    return bool(flags[0]), bool(flags[1])

  def __exit__(self, *exc):
    if self._previous is not None:
      signal.signal(signal.SIGTERM, self._previous)


def is_sync_point(step: int, t) -> bool:
  """Whether all processes agree on stopping after ``step`` (see :class:`_Preemption`): every ``train.sync_every``
  steps, at logging, evaluation and checkpoint steps (which sync the host anyway) and at the last step. One process:
  every step."""
  if jax.process_count() == 1:
    return True
  return step == t.steps or any(step % every == 0 for every in (t.sync_every, t.log_every, t.eval_every,
                                                                 t.checkpoint_every))


class Experiment:
  """Everything a config builds: task, model, mesh, optimiser, state shardings, batchers, jitted steps.

  What depends on the kind of task (its data, batchers, loss, evaluation) is asked of the config's task family
  (:mod:`attnjax.families`); an Experiment is the :class:`~attnjax.families.base.Run` a family evaluates.
  """

  def __init__(self, config, workdir: str, *, validated: bool = False):
    if not validated:  # a training start has checked it already
      config_lib.validate(config)
    self.config, self.workdir = config, workdir
    self.family = families.of(config)
    self.task = self.family.load_task(config.data, workdir)
    self.metrics = self.family.metric_names(config)
    # what scoring needs (METEOR's language and data) checked now, not at the first evaluation hours later
    self.family.check_evaluation(config, self.metrics)
    self.model = model_for(config, src_vocab_size=self.task.src_vocab.size, tgt_vocab_size=self.task.tgt_vocab.size)
    self.family.check_model(self.task, self.model)
    self.mesh = partitioning.create_mesh(config.mesh.axes, config.mesh.shape)
    self.rules = config.mesh.rules
    self.tx, self.schedule = make_optimizer(config.train, model_width(self.model))
    ema_decay = config.train.get("ema_decay")
    self.state, self.state_sharding, self.abstract = create_train_state(self.model, self.tx, self.mesh, self.rules,
                                                                        config.seed, ema=ema_decay is not None)
    self.train_batches, self.eval_batches = self.family.batchers(self.task, config, config.eval.split,
                                                                 shards=self._shards())
    loss_fn = self.family.loss(config, tgt_vocab_size=self.task.tgt_vocab.size)
    ndims = self.family.batch_ndims
    batch_sharding = None if ndims is None else steps.batch_shardings(ndims, self.mesh, self.rules)
    self.train_step = steps.make_train_step(
        self.model, self.tx, self.schedule, state_sharding=self.state_sharding, mesh=self.mesh, rules=self.rules,
        grad_accum_steps=config.train.grad_accum_steps, batch_sharding=batch_sharding, loss_fn=loss_fn,
        ema_decay=ema_decay, ema_warmup=bool(config.train.get("ema_warmup")))
    self.eval_step = steps.make_eval_step(self.model, state_sharding=self.state_sharding, mesh=self.mesh,
                                          rules=self.rules, batch_sharding=batch_sharding, loss_fn=loss_fn)
    self.cache: dict = {}  # the family's objects kept between evaluations (a decoder, a span predictor)
    self._batch_sharding, self._eval_steps = batch_sharding, {}  # evaluation steps of a family's own statistics
    t = config.train
    self.checkpointer = Checkpointer(fs.join(workdir, "checkpoints"), keep=t.keep_checkpoints,
                                     best_metric=t.best_metric, best_mode=t.best_mode, async_save=t.async_checkpoints)

  def _shards(self) -> dict:
    """What the mesh and the processes ask of every batch: this process's share, and rows in a multiple of the
    data-parallel devices times the gradient-accumulation steps."""
    d = self.config.data
    dp = partitioning.data_parallel_size(self.mesh, self.rules)
    return dict(batch_size=d.batch_size, max_tokens=d.max_tokens, num_shards=jax.process_count(),
                shard_index=jax.process_index(),
                batch_multiple=int(np.lcm(dp, jax.process_count()) * self.config.train.grad_accum_steps))

  @property
  def params(self):
    """What evaluation reads: the parameters, or their moving average where the run keeps one."""
    return self.state.eval_params

  def loss_totals(self, batches, loss_fn=None) -> dict[str, float]:
    """Sums of the family's loss (or of ``loss_fn``, a statistic of the family's own, its evaluation step compiled
    once) over host-local ``batches``, all processes together."""
    step = self.eval_step
    if loss_fn is not None:
      if loss_fn not in self._eval_steps:
        self._eval_steps[loss_fn] = steps.make_eval_step(self.model, loss_fn=loss_fn, mesh=self.mesh, rules=self.rules,
                                                         state_sharding=self.state_sharding,
                                                         batch_sharding=self._batch_sharding)
      step = self._eval_steps[loss_fn]
    return validation_loss(step, self.params, batches, self.mesh, self.rules, return_totals=True)

  def restore(self, step: int | None = None) -> int:
    """Restores the newest readable (or the given) checkpoint into the configured shardings; returns its step (0
    without a checkpoint). ``self.meta`` gets the checkpoint's bookkeeping (training seconds so far)."""
    restored = self.checkpointer.restore(abstract_with_sharding(self.abstract, self.state_sharding), step)
    if restored is None:
      self.meta = {}
      return 0
    self.state, data_state, step, self.meta = restored
    self.train_batches.restore(data_state)
    return int(step)

  def evaluate(self, *, limit: int | None) -> tuple[dict[str, float], dict[str, str]]:
    """The family's evaluation of the current state: validation loss, then decoding (or span prediction) of the
    first ``limit`` examples of ``eval.split``."""
    return self.family.evaluate(self, limit=limit)

  def predict(self, split: str, *, limit: int | None) -> Predictions:
    """Predictions and scores on the first ``limit`` examples (all: None) of ``split``, sharded over the devices."""
    return self.family.predict(self, split, limit=limit)


EARLY_STOPPING_KEYS = ("best_step", "best_value", "evals_since_best")
TIME_UP_KEY = "time_limit_reached"  # in a checkpoint's bookkeeping: saved, evaluated, when the run's time was up


def early_stopping(record: dict, step: int, value: float, mode: str) -> dict:
  """The early-stopping record (kept in each checkpoint's bookkeeping) after an evaluation at ``step`` gave
  ``value`` of the best metric: the best step and value so far, and the evaluations since it (0: this one is the
  best; a tie, or NaN, is no improvement)."""
  best = record.get("best_value")
  if not math.isnan(value) and (best is None or (value > best if mode == "max" else value < best)):
    return {"best_step": step, "best_value": float(value), "evals_since_best": 0}
  return {**record, "evals_since_best": record.get("evals_since_best", 0) + 1}


def validation_loss(eval_step, params, batches, mesh, rules, *, return_totals: bool = False) -> dict[str, float]:
  """Loss and NLL over ``batches`` (host-local numpy batches), weighted by the step's ``ntokens`` (what the family's
  loss counts: target tokens, questions, masked tokens; ``return_totals``: the sums themselves)."""
  totals = {"loss_sum": 0.0, "nll_sum": 0.0, "ntokens": 0.0}
  for batch in batches:
    out = jax.device_get(eval_step(params, partitioning.global_batch(batch, mesh, rules)))
    for key in out:
      totals[key] = totals.get(key, 0.0) + float(out[key])
  return totals if return_totals else mean_loss(totals)


def window_means(per_step: list[dict]) -> dict[str, float]:
  """The training scalars logged for a window of steps, from each step's metrics: ``loss`` and ``nll`` per token over
  the whole window (each step's mean weighted by its ``ntokens``, so that the window's loss is the one of its batches
  taken together, not the last batch's), ``grad_norm`` the mean of the steps' norms, ``learning_rate`` the last
  step's, ``tokens`` the window's loss tokens (target tokens; questions for extractive QA)."""
  weights = np.array([float(m["ntokens"]) for m in per_step])
  total = max(float(weights.sum()), 1.0)
  mean = lambda key: float(np.dot(weights, [float(m[key]) for m in per_step]) / total)
  return {"loss": mean("loss"), "nll": mean("nll"), "grad_norm": float(np.mean([m["grad_norm"] for m in per_step])),
          "learning_rate": float(per_step[-1]["learning_rate"]), "tokens": float(weights.sum())}


def train_and_evaluate(config, workdir: str, on_step=None, *, allow_config_change: bool = False) -> dict:
  """Trains ``config`` in ``workdir`` (resuming from its newest checkpoint) and returns the last evaluation.

  On resume the config is compared with the one the workdir was trained with (:mod:`provenance`): a change to the
  model, data or optimiser stops with the list of differences unless ``allow_config_change``. ``on_step(step)``, if
  given, is called after every optimizer step (profilers, tests that interrupt the run). ``train.time_limit_minutes``
  counts the training time of the whole run, across restarts (it is kept in every checkpoint). The run holds the
  workdir's lock throughout (:mod:`workdir_lock`): a second run on the same workdir stops at once, naming the holder.

  On one process, an error (an exception in a step, Ctrl-C) lets the checkpoint write in flight commit before it
  propagates. On several processes, a process that cannot go on ends at once instead of raising: an error here (a
  peer died under a collective, a full disk under a checkpoint write, ...) leaves its peers blocked in collectives and
  barriers, and Python's exit would wait for Orbax's background writer, itself blocked on a barrier with a dead peer,
  until the distributed runtime's heartbeat timeout. The error is logged with this process's index and host (and the
  peer that died, if one did) and the process exits with status 1; a hung or dead peer ends it with
  :data:`PEER_TIMEOUT_EXIT_CODE` (see :class:`PeerWatchdog`). Either way every process is to be restarted, and
  training resumes from the newest complete checkpoint.
  """
  maybe_initialize_distributed(config.distributed)
  fresh = _fresh_local_workdir(workdir)
  opened: list = []  # the run's Experiment, once made
  try:
    with workdir_lock.hold(workdir) as lock:  # one run per workdir: a second one stops here, naming the holder
      return _with_failure_handling(config, workdir, on_step, allow_config_change, lock, opened)
  except (ValueError, FileNotFoundError):  # a mistake in the config or the data, refused before training
    if fresh is not None and not opened and jax.process_count() == 1:
      _undo_first_start(workdir, created=fresh)
    raise


def _fresh_local_workdir(workdir) -> bool | None:
  """For a local workdir that is missing (True) or empty (False): whether this start creates it; None otherwise
  (a workdir with a run in it, or a bucket)."""
  if fs.is_url(workdir):
    return None
  if not os.path.exists(workdir):
    return True
  return False if os.path.isdir(workdir) and not os.listdir(workdir) else None


def _undo_first_start(workdir, *, created: bool) -> None:
  """What a first start refused for bad input wrote (its vocabulary, token caches, config, lock files) is removed,
  so that the workdir is as it was: a fixed command starts clean, and nothing in it looks like a run. Not once a
  checkpoint exists."""
  checkpoints = os.path.join(workdir, "checkpoints")
  if os.path.isdir(checkpoints) and os.listdir(checkpoints):
    return
  if created:
    shutil.rmtree(workdir, ignore_errors=True)
    return
  for name in os.listdir(workdir):
    target = os.path.join(workdir, name)
    if os.path.isdir(target) and not os.path.islink(target):
      shutil.rmtree(target, ignore_errors=True)
    else:
      os.remove(target)


def _with_failure_handling(config, workdir, on_step, allow_config_change, lock, opened: list) -> dict:
  watchdog = PeerWatchdog.start_if_multihost(config.distributed, str(fs.join(workdir, "checkpoints")))
  if watchdog is not None and lock is not None:
    watchdog.before_exit.append(lock.release)  # a process ending at once frees the workdir for the restart
  if lock is not None:  # another run took the workdir over (it found this one's heartbeat stale): stop
    on_step = _checking(lock, on_step)
  try:
    return _train_and_evaluate(config, workdir, on_step, allow_config_change, watchdog, opened)
  except BaseException as e:  # pylint: disable=broad-except
    if watchdog is None:
      for exp in opened:  # one process: the write in flight commits before the error propagates
        exp.checkpointer.finish_after_error()
      raise
    where = watchdog.where
    peer = watchdog.dead_peer(wait=3 * watchdog.interval)  # a peer that died takes this process down with it
    peer = f"The failed peer: {peer}. " if peer else "Every peer is alive: the failure is this process's own. "
    if isinstance(e, CheckpointRestoreError):  # every process refused alike, for a reason it names: no trace
      exit_now(1, f"{this_process()} failed while {where}: {e}")
    exit_now(1, f"{this_process()} failed while {where}: {type(e).__name__}: {e}\n{peer}Exiting without "
              f"waiting for the other processes or for checkpoint writes in flight (a step is a checkpoint only once "
              f"every process has written its part). Restart all processes to resume from the newest complete "
              f"checkpoint in {fs.join(workdir, 'checkpoints')}.", exc=e)
    raise  # not reached
  finally:
    if watchdog is not None:
      watchdog.stop()


def _checking(lock, on_step):
  def checked(step):
    lock.check()
    if on_step is not None:
      on_step(step)
  return checked


def _open_experiment(config, workdir, allow_config_change, opened: list) -> tuple[Experiment, str | None]:
  """The run's Experiment, after the config check, the resume check against the workdir's config and, for a warm
  start, the other run's vocabulary copied in (before one would be trained here). A Hugging Face checkpoint to
  fine-tune gives the config its model first."""
  warm_start.adopt_checkpoint_model(config, workdir)
  config_lib.validate(config)
  families.resolve_best(config)
  families.check_best(config)  # before hours of reading data: the exact check follows once it is read
  provenance.check_resume(workdir, config, allow_change=allow_config_change)  # before config.json is overwritten
  init_from = config.train.get("init_from")
  init_from = warm_start.resolve(init_from, workdir) if init_from else None
  if init_from and jax.process_index() == 0:
    warm_start.copy_vocabulary(init_from, workdir)
  if init_from and jax.process_count() > 1:
    from jax.experimental import multihost_utils  # pylint: disable=g-import-not-at-top
    multihost_utils.sync_global_devices("attnjax warm start vocabulary")
  exp = Experiment(config, workdir, validated=True)
  families.check_best(config, exp.task)
  opened.append(exp)
  return exp, init_from


def _start_step(exp: Experiment, config, workdir, init_from: str | None, where) -> tuple[int, bool]:
  """``(the step training starts after, whether it resumes this run's own checkpoint)``: the newest readable
  checkpoint's step, else a warm start's, else 0 (with a pre-trained encoder loaded where the config asks for one).
  ``exp.meta`` gets the checkpoint's bookkeeping."""
  t = config.train
  where("restoring the newest checkpoint")
  start = exp.restore()
  config_lib.save_config(config, workdir)  # after the restore: a run refused there leaves the workdir as it was
  if start:
    return start, True
  if init_from:  # a first start: from the other run's checkpoint (its step and clock continue)
    where(f"warm-starting from {init_from}")
    start, exp.meta = warm_start.warm_start(exp, init_from, t.get("init_at_minutes"), t.get("init_at_step"))
    clock = float(exp.meta.get("train_seconds", 0.0))
    if t.time_limit_minutes and clock >= 60 * t.time_limit_minutes:
      raise ValueError(f"train.init_from={init_from}: its checkpoint of step {start} was trained {clock / 60:.1f} "
                       f"minutes, already train.time_limit_minutes={t.time_limit_minutes}: set "
                       "train.init_at_minutes below the limit")
  if not start and t.get("init_encoder_from"):  # fine-tuning: a pre-trained encoder, the rest fresh
    where(f"loading the encoder of {t.init_encoder_from}")
    warm_start.init_encoder(exp, t.init_encoder_from)
  return start, False


class _Throughput:
  """The training steps and what each logging window took: its tokens, its FLOPs (XLA's count for each compiled
  batch shape) and its time, compilation and evaluation left out whichever step of the window they fall on."""

  def __init__(self, t, start: int, seconds_before: float):
    self.configured_peak = t.peak_tflops_per_device * 1e12 if t.peak_tflops_per_device else None
    self.peak = self.configured_peak or measured_peak_flops()
    logging.info("MFU is stated against %.1f GFLOP/s per device (%s), %d devices", self.peak / 1e9,
                 "config" if self.configured_peak else
                 "measured float32 matmul; the best of each log step's remeasurement", jax.device_count())
    self.compiled: dict = {}
    self.flops_by_shape: dict = {}
    self.start_step, self.seconds_before = start, seconds_before
    self._new_window()
    self.run_start = _clock()

  def _new_window(self) -> None:
    self.tokens, self.flops, self.window_start = 0.0, 0.0, _clock()
    self.metrics: list = []  # the steps' metrics since the last log, on device until the log reads them

  def train_seconds(self) -> float:
    """Training time of the whole run, across restarts."""
    return self.seconds_before + _clock() - self.run_start

  def step(self, exp: Experiment, local) -> None:
    """One optimizer step on the host-local batch ``local``: one compilation per bucket shape, dispatched
    asynchronously (no device sync)."""
    batch = partitioning.global_batch(local, exp.mesh, exp.rules)
    shape_key = tuple((key, local[key].shape) for key in sorted(local))
    # a schedule tied to the time budget reads the share of it used so far (across restarts)
    limit = exp.config.train.time_limit_minutes
    extra = steps.step_arguments(exp.schedule, self.train_seconds() / (60 * limit) if limit else 0.0)
    if shape_key not in self.compiled:  # its FLOP count from XLA
      t0 = _clock()
      self.compiled[shape_key] = exp.train_step.lower(exp.state, batch, *extra).compile()
      self.window_start += _clock() - t0  # compilation is not training throughput
      cost = self.compiled[shape_key].cost_analysis()
      cost = cost[0] if isinstance(cost, (list, tuple)) else cost
      self.flops_by_shape[shape_key] = float((cost or {}).get("flops", 0.0))
    exp.state, metrics = self.compiled[shape_key](exp.state, batch, *extra)
    self.metrics.append(metrics)
    self.flops += self.flops_by_shape[shape_key]
    self.tokens += exp.family.tokens(local) * jax.process_count()  # host-side: no device sync per step

  def leave_out(self, since: float) -> None:
    """The time since ``since`` (an evaluation) is not training throughput; the window's earlier steps stay in."""
    self.window_start += _clock() - since

  def log(self, step: int, t, writer) -> None:
    # the window's metrics first: steps are dispatched asynchronously, so the clock is read once they are done
    # (before, a step longer than its dispatch left its compute out of the window and overstated tokens/s)
    window_values = window_means(jax.device_get(self.metrics))
    elapsed = _clock() - self.window_start
    flops_per_s = self.flops / elapsed
    if self.configured_peak is None:  # measured on a shared machine, one reading understates it: the best seen
      self.peak = max(self.peak, measured_peak_flops())
    eta = (_clock() - self.run_start) / max(step - self.start_step, 1) * (t.steps - step)
    values = {**window_values, "tokens_per_s": self.tokens / elapsed,
              "model_flops_per_s": flops_per_s, "mfu": flops_per_s / (self.peak * jax.device_count())}
    logging.info("step %d/%d  loss %.4f  nll %.4f (means over %d steps)  lr %.2e  %.0f tok/s  %.2f GFLOP/s  "
                 "MFU %.1f%%  ETA %.0fs", step, t.steps, values["loss"], values["nll"], len(self.metrics),
                 values["learning_rate"], values["tokens_per_s"], flops_per_s / 1e9, 100 * values["mfu"], eta)
    summaries.log(writer, step, values, "train")
    self._new_window()


def _train_and_evaluate(config, workdir, on_step, allow_config_change, watchdog, opened: list) -> dict:
  where = (lambda text: setattr(watchdog, "where", text)) if watchdog is not None else (lambda text: None)
  exp, init_from = _open_experiment(config, workdir, allow_config_change, opened)
  start, resumed = _start_step(exp, config, workdir, init_from, where)
  t = config.train
  # a resumed run's own early-stopping record and time-up mark (not a warm start's: its source's)
  stopping = {key: exp.meta[key] for key in EARLY_STOPPING_KEYS if key in exp.meta} if resumed else {}
  seconds_before = float(exp.meta.get("train_seconds", 0.0))
  if start:
    logging.info("resuming from step %d (%.1f training minutes so far)", start, seconds_before / 60)
  writer = summaries.writer(workdir)
  meter = _Throughput(t, start, seconds_before)
  last_eval: dict = {}
  step = start
  stopped_early = bool(t.get("patience")) and stopping.get("evals_since_best", 0) >= t.patience
  if stopped_early:
    logging.info("stopped early at step %d (no better %s than %.4f at step %d in %d evaluations): training no "
                 "further", start, t.best_metric, stopping["best_value"], stopping["best_step"],
                 stopping["evals_since_best"])
  spent = (resumed and bool(exp.meta.get(TIME_UP_KEY)) and bool(t.time_limit_minutes)
           and seconds_before > 60 * t.time_limit_minutes)
  if spent:  # relaunched after it stopped for time (its evaluation of the splits cut off, say): not one step more
    logging.info("train.time_limit_minutes=%s was reached at step %d (%.1f training minutes): training no further",
                 t.time_limit_minutes, start, seconds_before / 60)
  stop = False  # preempted (SIGTERM): a checkpoint written, the run not finished
  with _Preemption() as preemption:
    while step < t.steps and not stopped_early and not spent:
      where(f"training step {step + 1}")
      meter.step(exp, next(exp.train_batches))
      step += 1
      if on_step is not None:
        on_step(step)
      if step % t.log_every == 0 or step == t.steps:
        meter.log(step, t, writer)
      stop = out_of_time = False
      if is_sync_point(step, t):
        where(f"at the sync point after step {step}")
        stop, out_of_time = preemption.agreed(
            bool(t.time_limit_minutes) and meter.train_seconds() > 60 * t.time_limit_minutes)
      evaluate_now = step % t.eval_every == 0 or step == t.steps or out_of_time
      seconds = meter.train_seconds()
      if evaluate_now and not stop:
        paused = _clock()
        where(f"evaluating step {step}")
        last_eval = _evaluate(exp, step, writer)
        if t.get("patience"):
          stopping = early_stopping(stopping, step, last_eval[t.best_metric], t.best_mode)
          stopped_early = stopping["evals_since_best"] >= t.patience
        where(f"saving step {step}")
        time_up = {TIME_UP_KEY: True} if out_of_time else {}
        exp.checkpointer.save(step, exp.state, exp.train_batches.state(), metrics=last_eval, force=True,
                              meta={"train_seconds": seconds, **stopping, **time_up})
        meter.leave_out(paused)
      elif step % t.checkpoint_every == 0 or stop:
        where(f"saving step {step}")
        exp.checkpointer.save(step, exp.state, exp.train_batches.state(), force=True,
                              meta={"train_seconds": seconds, **stopping})
      if stop:
        logging.warning("preempted: checkpoint of step %d written, exiting", step)
        break
      if stopped_early:
        logging.warning("train.patience=%d: no better %s than %.4f (step %d) in %d evaluations: stopping early at "
                        "step %d", t.patience, t.best_metric, stopping["best_value"], stopping["best_step"],
                        stopping["evals_since_best"], step)
        break
      if out_of_time:
        logging.warning("train.time_limit_minutes=%s reached at step %d (%.1f training minutes over the whole run): "
                        "evaluated, checkpointed, stopping", t.time_limit_minutes, step, meter.train_seconds() / 60)
        break
  where(f"finishing the checkpoint writes after step {step}")
  exp.checkpointer.wait()
  exp.checkpointer.close()
  if writer is not None:
    writer.close()
  return {"step": step, "sync_agreements": preemption.agreements, "preempted": bool(stop), **last_eval}


def _evaluate(exp: Experiment, step: int, writer) -> dict[str, float]:
  """The family's evaluation of the state after ``step``, logged and written to the run's summaries."""
  config = exp.config
  values, signatures = exp.evaluate(limit=config.eval.num_decode_examples)
  logging.info("eval at step %d on %s: %s%s", step, config.eval.split,
               "  ".join(f"{k} {v:.4f}" for k, v in values.items()),
               "".join(f"\n  {k} signature: {s}" for k, s in signatures.items()))
  summaries.log(writer, step, values, "eval")
  return values
