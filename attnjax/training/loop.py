"""The training loop: data → sharded steps → logging, evaluation, checkpoints; resumable and preemption-safe."""

from __future__ import annotations

import json
import logging as py_logging
import os
import signal
import time

from absl import logging
import jax
import jax.numpy as jnp
import numpy as np

from attnjax import config as config_lib
from attnjax import metrics as metrics_lib
from attnjax.data.pipeline import Seq2SeqBatcher
from attnjax.data.spans import SpanBatcher
from attnjax.data.tasks import load_task
from attnjax.models.registry import build_model
from attnjax.training import evaluation, partitioning, steps
from attnjax.training.checkpointing import Checkpointer
from attnjax.training.optim import make_optimizer
from attnjax.training.state import abstract_with_sharding, create_train_state

CONFIG_FILE = "config.json"


def maybe_initialize_distributed(cfg) -> None:
  """``jax.distributed.initialize`` when the config (i.e. the launcher) asks for it; before any device is touched."""
  if not cfg.initialize:
    return
  if cfg.cpu_collectives:
    jax.config.update("jax_cpu_collectives_implementation", cfg.cpu_collectives)
  kwargs = {k: cfg[k] for k in ("coordinator_address", "num_processes", "process_id") if cfg[k] is not None}
  jax.distributed.initialize(**kwargs)  # on TPU VMs / SLURM every argument is discovered from the environment
  logging.info("distributed: process %d of %d, %d local / %d global devices", jax.process_index(),
               jax.process_count(), jax.local_device_count(), jax.device_count())


def save_config(config, workdir: str) -> None:
  if jax.process_index() == 0:
    os.makedirs(workdir, exist_ok=True)
    with open(os.path.join(workdir, CONFIG_FILE), "w") as f:
      f.write(config.to_json_best_effort(indent=2, sort_keys=True))


def _tuples(x):
  """JSON turns tuples into lists; the config's tuple fields (mesh shape, rules, buckets) want them back."""
  if isinstance(x, list):
    return tuple(_tuples(v) for v in x)
  if isinstance(x, dict):
    return {k: _tuples(v) for k, v in x.items()}
  return x


def load_config(workdir: str):
  """The config a workdir was trained with (saved there by :func:`save_config`)."""
  import ml_collections  # pylint: disable=g-import-not-at-top
  path = os.path.join(workdir, CONFIG_FILE)
  if not os.path.exists(path):
    raise FileNotFoundError(f"{path} not found: is {workdir} a training workdir?")
  with open(path) as f:
    raw = _tuples(json.load(f))
  config = config_lib.base_config()
  for section, values in raw.items():
    if section == "model":  # fields differ from model to model: take the saved section whole
      config.model = ml_collections.ConfigDict(values)
    elif isinstance(values, dict):
      config[section].update(values)
    else:
      config[section] = values
  return config


class _QuietOrbax(py_logging.Filter):
  def filter(self, record):  # Orbax narrates every save at INFO; keep its warnings
    return record.levelno >= py_logging.WARNING or "orbax" not in record.pathname


def quiet_orbax_logging() -> None:
  """Drops Orbax's INFO chatter from the absl log handler (CLIs call this; libraries leave logging alone)."""
  logging.get_absl_handler().addFilter(_QuietOrbax())


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
  """Catches SIGTERM (TPU VM preemption, SLURM time limit) so the loop can save before exiting."""

  def __init__(self):
    self.requested = False
    self._previous = None

  def __enter__(self):
    try:
      self._previous = signal.signal(signal.SIGTERM, self._handle)
    except ValueError:  # not the main thread
      self._previous = None
    return self

  def _handle(self, signum, frame):  # pylint: disable=unused-argument
    logging.warning("SIGTERM received: saving a checkpoint before exiting")
    self.requested = True

  def agreed(self, out_of_time: bool = False) -> tuple[bool, bool]:
    """(preempted, out of time), agreed by all processes (any one's request stops all at the same step)."""
    flags = np.array([self.requested, out_of_time])
    if jax.process_count() > 1:
      from jax.experimental import multihost_utils  # pylint: disable=g-import-not-at-top
      flags = np.asarray(multihost_utils.process_allgather(flags)).reshape(-1, 2).any(axis=0)
    return bool(flags[0]), bool(flags[1])

  def __exit__(self, *exc):
    if self._previous is not None:
      signal.signal(signal.SIGTERM, self._previous)


def _writer(workdir: str):
  if jax.process_index() != 0:
    return None
  try:
    from tensorboardX import SummaryWriter  # pylint: disable=g-import-not-at-top
  except ImportError:
    logging.warning("tensorboardX is not installed: no TensorBoard scalars")
    return None
  return SummaryWriter(os.path.join(workdir, "tensorboard"))


def _check_best_metric(best_metric: str, metrics) -> None:
  """The checkpoint kept as "best" is ranked by a value the evaluation computes: checked before training starts."""
  computed = {"loss", "nll"}
  for name in metrics:
    computed.update(("rouge1", "rouge2", "rougeL", "rougeLsum") if name == "rouge" else (name,))
  if best_metric not in computed:
    raise ValueError(f"config.train.best_metric={best_metric!r} is not computed by this run's evaluation, which "
                     f"reports {sorted(computed)} (config.eval.metrics, or the task's own metrics when empty)")


class Experiment:
  """Everything a config builds: task, model, mesh, optimiser, state shardings, batchers, jitted steps."""

  def __init__(self, config, workdir: str):
    config_lib.validate(config)
    self.config, self.workdir = config, workdir
    if "meteor" in config.eval.metrics:
      metrics_lib.check_meteor_available()  # now, not at the first evaluation hours later
    self.task = load_task(config.data, workdir)
    self.metrics = tuple(config.eval.metrics) or self.task.metrics
    pad = lambda n: -(-n // config.data.vocab_multiple) * config.data.vocab_multiple
    self.model = build_model(config.model.to_dict(), src_vocab_size=pad(self.task.src_vocab.size),
                             tgt_vocab_size=pad(self.task.tgt_vocab.size))
    if self.task.kind == "span":
      self._check_span_model()
    self.mesh = partitioning.create_mesh(config.mesh.axes, config.mesh.shape)
    self.rules = config.mesh.rules
    d_model = getattr(self.model, "d_model", None) or getattr(self.model, "hidden_dim", None)
    self.tx, self.schedule = make_optimizer(config.train, d_model)
    self.state, self.state_sharding, self.abstract = create_train_state(self.model, self.tx, self.mesh, self.rules,
                                                                        config.seed)
    losses, ndims = self._make_batchers()
    batch_sharding = None if ndims is None else steps.batch_shardings(ndims, self.mesh, self.rules)
    self.train_step = steps.make_train_step(
        self.model, self.tx, self.schedule, state_sharding=self.state_sharding, mesh=self.mesh, rules=self.rules,
        grad_accum_steps=config.train.grad_accum_steps, batch_sharding=batch_sharding, **losses)
    self.eval_step = steps.make_eval_step(self.model, state_sharding=self.state_sharding, mesh=self.mesh,
                                          rules=self.rules, batch_sharding=batch_sharding, **losses)
    t = config.train
    self.checkpointer = Checkpointer(os.path.join(workdir, "checkpoints"), keep=t.keep_checkpoints,
                                     best_metric=t.best_metric, best_mode=t.best_mode, async_save=t.async_checkpoints)

  def _check_span_model(self) -> None:
    """What only the data can tell about a SpanQA config: no-answer support and the learned-position table."""
    task, model = self.task, self.model
    if task.version == "2.0" and not model.allow_no_answer:
      raise ValueError("config.model.allow_no_answer is False but the data has unanswerable (SQuAD 2.0) questions")
    # rows are padded to multiples of 8, the context side with room for the batcher's EOS (see SpanBatcher)
    packed = -(-task.max_question_len // 8) * 8 + -(-(task.max_context_len + 1) // 8) * 8 + 2
    if model.encoder == "transformer" and model.positional == "learned" and model.max_length < packed:
      raise ValueError(f"config.model.max_length={model.max_length} is too short for learned positions over [CLS] "
                       f"question [SEP] context padded to data.max_question_len={task.max_question_len} and "
                       f"data.max_context_len={task.max_context_len}: it must be at least {packed}")

  def _make_batchers(self):
    """Training and validation-loss batchers; returns the step's loss options and the batch arrays' ranks (None: all
    ``[batch, length]``)."""
    config, d = self.config, self.config.data
    dp = partitioning.data_parallel_size(self.mesh, self.rules)
    common = dict(batch_size=d.batch_size, max_tokens=d.max_tokens, num_shards=jax.process_count(),
                  shard_index=jax.process_index(),
                  batch_multiple=int(np.lcm(dp, jax.process_count()) * config.train.grad_accum_steps))
    if self.task.kind == "span":
      common.update(max_question_len=self.task.max_question_len, max_context_len=self.task.max_context_len)
      self.train_batches = SpanBatcher(self.task.examples("train", train=True), bucket_boundaries=d.bucket_boundaries,
                                       shuffle=True, seed=config.seed, **common)
      self.eval_batches = SpanBatcher(self.task.examples(config.eval.split, train=True), shuffle=False, seed=0,
                                      **common)
      # train.label_smoothing is for the seq2seq loss
      return dict(loss_fn=steps.span_loss_stats), steps.SPAN_BATCH_NDIMS
    common.update(max_src_len=d.max_src_len, max_tgt_len=d.max_tgt_len)
    self.train_batches = Seq2SeqBatcher(self.task.encoded("train"), bucket_boundaries=d.bucket_boundaries,
                                        shuffle=True, seed=config.seed, pack=d.pack, **common)
    self.eval_batches = Seq2SeqBatcher(self.task.encoded(config.eval.split), shuffle=False, seed=0, **common)
    # every seq2seq array is [batch, length], packed (training) or not (validation): one sharding for all keys
    return dict(label_smoothing=config.train.label_smoothing), None

  def restore(self, step: int | None = None) -> int:
    """Restores the newest readable (or the given) checkpoint into the configured shardings; returns its step."""
    restored = self.checkpointer.restore(abstract_with_sharding(self.abstract, self.state_sharding), step)
    if restored is None:
      return 0
    self.state, data_state, step = restored
    self.train_batches.restore(data_state)
    return int(step)

  def evaluate(self, *, limit: int | None) -> tuple[dict[str, float], dict[str, str]]:
    """Validation loss, then decoding (or span prediction) of ``eval.split`` and its metrics."""
    cfg = self.config
    batches = [b for _, b in zip(range(cfg.eval.loss_batches), self.eval_batches.iterate_epoch(0))]
    values = evaluation.loss(self.eval_step, self.state.params, batches, self.mesh, self.rules)
    scores, signatures, _ = self.predict_and_score(cfg.eval.split, limit=limit)
    values.update(scores)
    return values, signatures

  def predict_and_score(self, split: str, *, limit: int | None, return_attention: bool = False):
    """``(scores, signatures, outputs)`` on ``split``: ``outputs`` has the predictions to write (``hypotheses``,
    ``references``, ``sources`` and ``attention`` for seq2seq; ``predictions`` (question id -> answer) for spans)."""
    cfg = self.config
    if self.task.kind == "span":
      predictions, examples = evaluation.predict_spans(self.model, self.state.params, self.task, split, cfg.eval,
                                                       limit=limit)
      scores = evaluation.score_spans(predictions, examples, self.metrics, self.task.version)
      return scores, {}, {"predictions": predictions}
    hyps, refs, sources, attention = evaluation.decode(self.model, self.state.params, self.task, split, cfg.eval,
                                                       cfg.data.max_src_len, limit=limit,
                                                       return_attention=return_attention)
    scores, signatures = evaluation.score(hyps, refs, self.metrics)
    return scores, signatures, {"hypotheses": hyps, "references": refs, "sources": sources, "attention": attention}


def _tokens(batch) -> float:
  """The tokens a batch trains on: target tokens (seq2seq), question + context tokens (extractive QA)."""
  if "tgt_mask" in batch:
    return float(batch["tgt_mask"].sum())
  return float(batch["question_mask"].sum() + batch["context_mask"].sum())


def _log(writer, step: int, values: dict, prefix: str) -> None:
  if writer is not None:
    for key, value in values.items():
      writer.add_scalar(f"{prefix}/{key}", value, step)
    writer.flush()


def train_and_evaluate(config, workdir: str, on_step=None) -> dict:
  """Trains ``config`` in ``workdir`` (resuming from its newest checkpoint) and returns the last evaluation.

  ``on_step(step)``, if given, is called after every optimizer step (profilers, tests that interrupt the run).
  """
  maybe_initialize_distributed(config.distributed)
  exp = Experiment(config, workdir)
  _check_best_metric(config.train.best_metric, exp.metrics)  # an evaluation of a checkpoint ranks nothing
  save_config(config, workdir)
  t = config.train
  start = exp.restore()
  if start:
    logging.info("resuming from step %d", start)
  writer = _writer(workdir)
  peak = (t.peak_tflops_per_device * 1e12) if t.peak_tflops_per_device else measured_peak_flops()
  peak_total = peak * jax.device_count()
  logging.info("MFU is stated against %.1f GFLOP/s per device (%s), %d devices", peak / 1e9,
               "config" if t.peak_tflops_per_device else "measured float32 matmul", jax.device_count())
  last_eval: dict = {}
  window_tokens, window_flops, window_start, run_start = 0.0, 0.0, time.perf_counter(), time.perf_counter()
  flops_by_shape: dict = {}
  compiled: dict = {}
  step = start
  with _Preemption() as preemption:
    while step < t.steps:
      local = next(exp.train_batches)
      batch = steps.global_batch(local, exp.mesh, exp.rules)
      shape_key = tuple((key, local[key].shape) for key in sorted(local))
      if shape_key not in compiled:  # one compilation per bucket shape, and its FLOP count from XLA
        t0 = time.perf_counter()
        compiled[shape_key] = exp.train_step.lower(exp.state, batch).compile()
        window_start += time.perf_counter() - t0  # compilation is not training throughput
        cost = compiled[shape_key].cost_analysis()
        cost = cost[0] if isinstance(cost, (list, tuple)) else cost
        flops_by_shape[shape_key] = float((cost or {}).get("flops", 0.0))
      exp.state, metrics = compiled[shape_key](exp.state, batch)
      step += 1
      window_flops += flops_by_shape[shape_key]
      window_tokens += _tokens(local) * jax.process_count()  # host-side: no device sync per step
      if on_step is not None:
        on_step(step)
      if step % t.log_every == 0 or step == t.steps:
        m = jax.device_get(metrics)
        elapsed = time.perf_counter() - window_start
        flops_per_s = window_flops / elapsed
        eta = (time.perf_counter() - run_start) / max(step - start, 1) * (t.steps - step)
        values = {"loss": float(m["loss"]), "nll": float(m["nll"]), "learning_rate": float(m["learning_rate"]),
                  "grad_norm": float(m["grad_norm"]), "tokens_per_s": window_tokens / elapsed,
                  "model_flops_per_s": flops_per_s, "mfu": flops_per_s / peak_total}
        logging.info("step %d/%d  loss %.4f  nll %.4f  lr %.2e  %.0f tok/s  %.2f GFLOP/s  MFU %.1f%%  ETA %.0fs",
                     step, t.steps, values["loss"], values["nll"], values["learning_rate"],
                     values["tokens_per_s"], flops_per_s / 1e9, 100 * values["mfu"], eta)
        _log(writer, step, values, "train")
        window_tokens, window_flops, window_start = 0.0, 0.0, time.perf_counter()
      stop, out_of_time = preemption.agreed(
          bool(t.time_limit_minutes) and time.perf_counter() - run_start > 60 * t.time_limit_minutes)
      evaluate_now = step % t.eval_every == 0 or step == t.steps or out_of_time
      if evaluate_now and not stop:
        last_eval, signatures = exp.evaluate(limit=config.eval.num_decode_examples)
        logging.info("eval at step %d on %s: %s%s", step, config.eval.split,
                     "  ".join(f"{k} {v:.4f}" for k, v in last_eval.items()),
                     "".join(f"\n  {k} signature: {s}" for k, s in signatures.items()))
        _log(writer, step, last_eval, "eval")
        exp.checkpointer.save(step, exp.state, exp.train_batches.state(), metrics=last_eval, force=True)
        window_start = time.perf_counter()  # evaluation time is not training throughput
      elif step % t.checkpoint_every == 0 or stop:
        exp.checkpointer.save(step, exp.state, exp.train_batches.state(), force=True)
      if stop:
        logging.warning("preempted: checkpoint of step %d written, exiting", step)
        break
      if out_of_time:
        logging.warning("train.time_limit_minutes=%s reached at step %d: evaluated, checkpointed, stopping",
                        t.time_limit_minutes, step)
        break
  exp.checkpointer.wait()
  exp.checkpointer.close()
  if writer is not None:
    writer.close()
  return {"step": step, **last_eval}
