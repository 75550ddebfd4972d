"""The base experiment config and its validation.

Every experiment file in ``experiments/`` starts from :func:`base_config` and changes only what differs; any value can
be overridden on the command line (``--config.model.num_heads=4``). :func:`validate` runs before anything is built or
compiled and names the offending key; what belongs to the kind of task it asks of the config's task family
(:mod:`attnjax.families`).

Importing this module loads no JAX: experiment files, the launcher and the report read configs without it.
"""

from __future__ import annotations

import importlib.util
import json
import os

import ml_collections
from ml_collections import config_dict

from attnjax import fs

# What train.optimizer and train.schedule may name (attnjax.training.optim builds them).
OPTIMIZERS = ("adam", "sgd", "adadelta", "adagrad")
SCHEDULES = ("rsqrt", "constant", "linear_warmup_cosine", "linear", "halving", "budget_linear")
DECODERS = ("greedy", "beam")
# The logical-axis rules of the mesh (attnjax.runtime.partitioning applies them): batch over data and fsdp,
# parameters' embed axis over fsdp, the vocabulary, feed-forward and heads over tensor.
DEFAULT_RULES = (
    ("batch", ("data", "fsdp")),
    ("length", None),
    ("vocab", "tensor"),
    ("embed", "fsdp"),
    ("mlp", "tensor"),
    ("heads", "tensor"),
    ("kv", None),
)



def base_config() -> ml_collections.ConfigDict:
  c = ml_collections.ConfigDict()
  c.seed = 0
  # where the experiment is meant to run (attnjax/targets.py): its mesh and dtype are set by targets.use_target
  c.target = "cpu"

  c.data = ml_collections.ConfigDict(dict(
      source="synthetic",  # see attnjax.data.tasks
      task="dates",
      train_examples=50_000,
      validation_examples=1_000,
      test_examples=1_000,
      max_src_len=48,
      max_tgt_len=24,
      batch_size=config_dict.placeholder(int),  # global rows per batch, or:
      max_tokens=4096,  # token-based batching: rows · max(S, T) per global batch
      bucket_boundaries=(16, 24, 32),
      pack=False,
      # cut over-long training examples to max_src_len / max_tgt_len instead of skipping them (summarization)
      truncate=False,
      # model vocabularies are padded up to a multiple of this, so that a vocab axis shards evenly over the mesh
      vocab_multiple=128,
  ))

  c.model = ml_collections.ConfigDict(dict(
      name="transformer", num_encoder_layers=3, num_decoder_layers=3, d_model=128, num_heads=4, d_ff=512,
      dropout_rate=0.1, attention_dropout_rate=0.0, relu_dropout_rate=0.0, pre_norm=False, positional="sinusoidal",
      max_length=256, shared_vocab=True, share_source_embeddings=True, tie_decoder_embeddings=True,
      implementation="auto", dtype="float32"))

  c.train = ml_collections.ConfigDict(dict(
      steps=3000,
      optimizer="adam",  # adam | sgd | adadelta | adagrad (attnjax/training/optim.py)
      momentum=0.0,  # sgd
      nesterov=False,  # sgd
      schedule="rsqrt",  # lr = learning_rate · d_model^-0.5 · min(step^-0.5, step · warmup^-1.5)
      decay_start=0,  # schedule "halving": halve at decay_start, then every decay_every steps
      decay_every=1,
      learning_rate=0.3,  # peak 1.3e-3 at d_model 128: post-norm diverges much above that
      warmup_steps=400,
      adam_b1=0.9,
      adam_b2=0.98,
      adam_eps=1e-9,
      weight_decay=0.0,
      grad_clip_norm=1.0,
      # the optimiser over one flat vector per dtype (and weight-decay group) instead of per parameter: a few
      # kernels a step instead of one per leaf; needs replicated parameters (attnjax.training.optim.fused_update)
      fused_update=False,
      label_smoothing=0.1,
      # an exponential moving average of the parameters, ema ← d · ema + (1 − d) · params after every update
      # (BiDAF's 0.999), kept in the checkpoint and evaluated instead of the parameters; None = off
      ema_decay=config_dict.placeholder(float),
      # the decay of the update made after t others is min(ema_decay, (1 + t) / (10 + t)): the average of a run of a
      # few thousand updates then holds next to nothing of its initial weights (0.999^2400 still leaves 9%); None = off
      ema_warmup=config_dict.placeholder(bool),
      grad_accum_steps=1,
      log_every=100,
      # multi-host: processes agree on stopping (preemption, time limit) every this many steps and at log / eval /
      # checkpoint steps, never in between (no host-device sync per step); one process checks every step
      sync_every=50,
      eval_every=1000,
      checkpoint_every=1000,
      keep_checkpoints=3,
      # what ranks the "best" checkpoint (kept, evaluated at the end, early stopping's measure); None = the data's
      # own (attnjax.families: exact match on synthetic tasks, BLEU for translation, ROUGE-L for summarization, F1 for
      # SQuAD, bits per byte for a language model, ...), and then its mode too
      best_metric=config_dict.placeholder(str),
      best_mode="max",
      # early stopping: stop after this many evaluations in a row without a better best_metric (a checkpoint and the
      # evaluation kept; a restart of a stopped run trains no further); None = run all steps
      patience=config_dict.placeholder(int),
      async_checkpoints=True,
      # start from another run's checkpoint (its workdir; relative: against this run's), see training/warm_start.py:
      # its vocabulary, parameters (this model's extra ones initialised), step, data position and training clock.
      # Or fine-tune a Hugging Face checkpoint directory that transformers wrote (a Marian or Pegasus model: see
      # docs/import_checkpoint.md): config.model becomes its architecture (this config's dropout rates, dtype and
      # implementation kept), the vocabulary its tokenizer, the parameters its weights; step 0, a fresh optimiser
      init_from=config_dict.placeholder(str),
      init_at_minutes=config_dict.placeholder(float),
      init_at_step=config_dict.placeholder(int),  # instead: the checkpoint of exactly this step
      # fine-tuning: a pre-trained BERT encoder (a Hugging Face checkpoint directory, or an attnjax workdir of a
      # masked-LM run) loaded into model.encoder='bert' at the first start; the head and the optimiser start fresh
      init_encoder_from=config_dict.placeholder(str),  # its newest checkpoint trained at most this long; None: latest
      # stop (with a checkpoint and a final evaluation) after this much wall time; None = run all steps
      time_limit_minutes=config_dict.placeholder(float),
      # the peak that MFU is stated against; None = a float32 matmul measured at start-up on this device
      peak_tflops_per_device=config_dict.placeholder(float),
  ))

  c.eval = ml_collections.ConfigDict(dict(
      split="validation",
      decode="beam",
      beam_size=4,
      alpha=0.6,
      max_len_a=1.0,
      max_len_b=10,
      min_len=0,  # EOS banned before this many generated tokens (summarization: See et al. 2017 decode >= 35)
      no_repeat_ngram_size=0,  # no n-gram of this size twice in an output (3: trigram blocking); 0 = off
      num_decode_examples=500,
      # language models: evaluate on rows of this many tokens (0: the training rows' data.seq_len); longer rows
      # measure position extrapolation, with the loss reported per range of positions
      seq_len=0,  # decoded during training (all of the split in attnjax.evaluate)
      # metrics to compute; () = the task's own (translation: bleu, chrf, ter; summarization: rouge; QA: exact_match,
      # f1). "meteor" is opt-in (pip install 'attnjax[meteor]').
      metrics=(),
      # METEOR's target language (ISO 639-1; picks its stemmer, and WordNet synonyms for "en"); None = data.tgt_lang
      meteor_language=config_dict.placeholder(str),
      batch_size=128,
      loss_batches=20,
  ))

  c.mesh = ml_collections.ConfigDict(dict(axes=("data", "fsdp", "tensor"), shape=(-1, 1, 1), rules=DEFAULT_RULES))

  # Multi-host: jax.distributed.initialize() before anything touches a device (set by the launchers).
  c.distributed = ml_collections.ConfigDict(dict(
      initialize=False,
      coordinator_address=config_dict.placeholder(str),
      num_processes=config_dict.placeholder(int),
      process_id=config_dict.placeholder(int),
      cpu_collectives=config_dict.placeholder(str),  # "gloo" for CPU-only multi-process
      # seconds of silence after which a peer process counts as hung (training.watchdog.PeerWatchdog); JAX's
      # heartbeat timeout is set to twice this, so that the watchdog's message, naming the process, comes first
      peer_timeout_seconds=50,
  ))
  return c


def experiment_module(path: str, what: str = "--experiment"):
  """The module of the experiment file ``path`` (its ``get_config`` and ``SWEEPS``), loaded without a package.

  Raises FileNotFoundError naming ``what`` (the flag or field the path came from) when there is no such file."""
  if not os.path.exists(path):
    raise FileNotFoundError(f"{what}={path}: no such experiment file")
  spec = importlib.util.spec_from_file_location(f"experiment_{abs(hash(os.path.abspath(path)))}", path)
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module


CONFIG_FILE = "config.json"  # in the workdir: a checkpoint directory is self-describing


def save_config(config, workdir: fs.PathLike) -> None:
  """Writes ``<workdir>/config.json`` (process 0 only; a local path or a bucket)."""
  import jax  # pylint: disable=g-import-not-at-top
  if jax.process_index() == 0:
    fs.write_text(fs.join(workdir, CONFIG_FILE), config.to_json_best_effort(indent=2, sort_keys=True) + "\n")


def _tuples(x):
  """JSON turns tuples into lists; the config's tuple fields (mesh shape, rules, buckets) want them back."""
  if isinstance(x, list):
    return tuple(_tuples(v) for v in x)
  if isinstance(x, dict):
    return {k: _tuples(v) for k, v in x.items()}
  return x


def load_config(workdir: fs.PathLike) -> ml_collections.ConfigDict:
  """The config a workdir was trained with (saved there by :func:`save_config`), over today's :func:`base_config`
  (so keys added since keep their defaults)."""
  path = fs.join(workdir, CONFIG_FILE)
  if not path.exists():
    raise FileNotFoundError(f"{path} not found: is {workdir} a training workdir?")
  try:
    raw = _tuples(json.loads(path.read_text()))
  except json.JSONDecodeError as e:
    raise ValueError(f"{path}: not valid JSON (line {e.lineno}: {e.msg})") from None
  config = base_config()
  for section, values in raw.items():
    if section == "model":  # fields differ from model to model: take the saved section whole
      config.model = ml_collections.ConfigDict(values)
    elif isinstance(values, dict) and section in config:
      with config[section].unlocked():
        config[section].update(values)
    else:
      config[section] = values
  return config


def _fail(key: str, message: str):
  raise ValueError(f"config.{key}: {message}")


def meteor_language(config) -> str:
  """METEOR's target language: ``config.eval.meteor_language``, else ``config.data.tgt_lang``; ValueError naming the
  key when neither gives one METEOR knows (see :func:`attnjax.families.seq2seq.meteor_language`)."""
  from attnjax.families.seq2seq import meteor_language as language  # pylint: disable=g-import-not-at-top
  return language(config)


def validate(config) -> None:
  """Checks a config before anything is built: unknown keys, impossible values, inconsistent choices.

  What belongs to the kind of task (its data keys, models, metrics and their values) is checked by the config's task
  family (:meth:`attnjax.families.base.TaskFamily.check_config`); the model by building it.
  """
  from attnjax import families  # pylint: disable=g-import-not-at-top
  base = base_config()
  for key in config.keys():
    if key not in base:
      _fail(key, f"unknown section (known: {sorted(base.keys())})")
  family = families.of(config)  # an unknown data.source, named
  for section in ("data", "train", "eval", "mesh", "distributed"):
    for key in config[section].keys():
      if key not in base[section] and not (section == "data" and key in family.data_keys):
        known = sorted(base[section].keys()) + (sorted(family.data_keys) if section == "data" else [])
        _fail(f"{section}.{key}", f"unknown key (known: {known})")
  _check_target(config)
  _check_train(config.train, config.data)
  _check_eval(config, family)
  _check_mesh(config.mesh)
  families.check_model_name(config)
  family.check_config(config)
  _check_model(config)


def _check_target(config) -> None:
  from attnjax import targets  # pylint: disable=g-import-not-at-top
  if config.target not in targets.TARGETS:
    _fail("target", f"unknown target {config.target!r}; known: {sorted(targets.TARGETS)}")


def _check_train(t, d) -> None:
  if t.optimizer not in OPTIMIZERS:
    _fail("train.optimizer", f"must be one of {OPTIMIZERS}, got {t.optimizer!r}")
  if t.schedule not in SCHEDULES:
    _fail("train.schedule", f"must be one of {SCHEDULES}, got {t.schedule!r}")
  if t.schedule == "budget_linear" and not t.get("time_limit_minutes"):
    _fail("train.schedule", "'budget_linear' decays to 0 at the end of the time budget: set "
          "train.time_limit_minutes")
  if not isinstance(t.get("fused_update", False), bool):
    _fail("train.fused_update", f"must be a bool, got {t.fused_update!r}")
  if (d.batch_size is None) == (d.max_tokens is None):
    _fail("data.batch_size", "set exactly one of data.batch_size and data.max_tokens")
  for key in ("steps", "warmup_steps", "log_every", "sync_every", "eval_every", "checkpoint_every",
              "keep_checkpoints", "grad_accum_steps"):
    if t[key] < (0 if key == "warmup_steps" else 1):
      _fail(f"train.{key}", f"must be positive, got {t[key]}")
  if not 0.0 <= t.label_smoothing < 1.0:
    _fail("train.label_smoothing", f"must be in [0, 1), got {t.label_smoothing}")
  if t.best_mode not in ("max", "min"):
    _fail("train.best_mode", f"must be 'max' or 'min', got {t.best_mode!r}")
  if t.get("patience") is not None and (not isinstance(t.patience, int) or t.patience < 1):
    _fail("train.patience", f"must be a positive number of evaluations or None, got {t.patience!r}")
  if t.get("ema_decay") is not None and not 0.0 < t.ema_decay < 1.0:
    _fail("train.ema_decay", f"must be in (0, 1) (0.999: the average of about the last 1,000 updates) or None, got "
          f"{t.ema_decay!r}")
  if t.get("ema_warmup") and t.get("ema_decay") is None:
    _fail("train.ema_warmup", "warms up the moving average's decay, but train.ema_decay is None (no average)")


def _check_eval(config, family) -> None:
  e, d = config.eval, config.data
  if e.decode not in DECODERS:
    _fail("eval.decode", f"must be one of {DECODERS}, got {e.decode!r}")
  unknown = [name for name in e.metrics if name not in family.metrics]
  if unknown:
    _fail("eval.metrics", f"{unknown} not available for this task (choose from {family.metrics})")
  # a value some evaluation of the task reports (training checks it against its own: families.check_best)
  possible = family.values(d, family.metrics)
  if config.train.best_metric is not None and config.train.best_metric not in possible:
    _fail("train.best_metric", f"must be one of {possible}, got {config.train.best_metric!r}")
  splits = ("train", "validation", "test") + tuple(s for s in (d.get("splits") or {}) if s not in
                                                   ("train", "validation", "test"))
  if e.split not in splits:
    _fail("eval.split", f"must be train, validation, test or another of config.data.splits ({', '.join(splits)}); "
          f"got {e.split!r}")


def _check_mesh(m) -> None:
  if len(m.axes) != len(m.shape):
    _fail("mesh.shape", f"has {len(m.shape)} entries for {len(m.axes)} mesh.axes")
  if list(m.shape).count(-1) > 1:
    _fail("mesh.shape", f"may contain at most one -1, got {tuple(m.shape)}")
  used_axes = {a for _, target in m.rules if target for a in ((target,) if isinstance(target, str) else target)}
  if used_axes - set(m.axes):
    _fail("mesh.rules", f"name mesh axes {sorted(used_axes - set(m.axes))} that are not in mesh.axes {m.axes}")


def _check_model(config) -> None:
  """Unknown model fields and the model's own checks (heads dividing d_model, tying without a shared vocab...)."""
  from attnjax.models.registry import build_model  # pylint: disable=g-import-not-at-top
  try:
    build_model(config.model.to_dict(), src_vocab_size=64, tgt_vocab_size=64)
  except ValueError as err:
    raise ValueError(f"config.model: {err}") from err
