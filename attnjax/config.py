"""The base experiment config and its validation.

Every experiment file in ``experiments/`` starts from :func:`base_config` and changes only what differs; any value can
be overridden on the command line (``--config.model.num_heads=4``). :func:`validate` runs before anything is built or
compiled and names the offending key.
"""

from __future__ import annotations

import importlib.util
import json
import os

import ml_collections
from ml_collections import config_dict

from attnjax import fs
from attnjax.data.squad import QA_SOURCES  # extractive QA: model.name must be "span_qa"

MLM_SOURCES = ("mlm_jsonl",)  # masked-LM pre-training: model.name must be "bert_mlm"
LM_SOURCES = ("lm_jsonl",)  # language modelling: model.name must be "decoder_lm"
DATA_SOURCES = ("synthetic", "parallel_text", "tsv", "jsonl", "tfds_translation", "tfds_summarization") + QA_SOURCES \
    + MLM_SOURCES + LM_SOURCES
# Keys an experiment file may add to config.data for the text sources (see attnjax.data.sources / tokenizer).
TEXT_SOURCE_KEYS = ("dir", "src_lang", "tgt_lang", "splits", "max_chars", "path", "heldout", "split_seed",
                    "src_column", "tgt_column", "document_key", "summary_key", "tfds_name", "tfds_data_dir",
                    "tfds_download", "tfds_backend", "vocab_size", "joint_vocab", "spm_model_type",
                    "max_question_len", "max_context_len", "doc_stride",
                    # masked-LM pre-training (attnjax.data.mlm)
                    "vocab_file", "lowercase", "seq_len", "max_predictions", "mask_rate", "max_articles",
                    # language modelling (attnjax.data.lm)
                    "spm_train_chars", "train_tokens", "shared_cache_dir")
DECODERS = ("greedy", "beam")
# What eval.metrics may ask for, by task kind (empty eval.metrics = the task's own list, see attnjax.data.tasks).
DECODING_METRICS = ("exact_match", "bleu", "chrf", "ter", "meteor", "rouge")
SPAN_METRICS = ("exact_match", "f1")
MLM_METRICS = ("mlm_accuracy",)
LM_METRICS = ("bits_per_byte",)
# What train.best_metric may name: a metric value of the evaluation.
METRICS = ("exact_match", "bleu", "chrf", "ter", "meteor", "rouge1", "rouge2", "rougeL", "rougeLsum", "f1", "loss",
           "nll", "mlm_accuracy", "bits_per_byte")

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
      label_smoothing=0.1,
      grad_accum_steps=1,
      log_every=100,
      # multi-host: processes agree on stopping (preemption, time limit) every this many steps and at log / eval /
      # checkpoint steps, never in between (no host-device sync per step); one process checks every step
      sync_every=50,
      eval_every=1000,
      checkpoint_every=1000,
      keep_checkpoints=3,
      best_metric="exact_match",
      best_mode="max",
      # early stopping: stop after this many evaluations in a row without a better best_metric (a checkpoint and the
      # evaluation kept; a restart of a stopped run trains no further); None = run all steps
      patience=config_dict.placeholder(int),
      async_checkpoints=True,
      # start from another run's checkpoint (its workdir; relative: against this run's), see training/warm_start.py:
      # its vocabulary, parameters (this model's extra ones initialised), step, data position and training clock
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
  key when neither gives one METEOR knows (a French corpus must not be scored with English stems and synonyms)."""
  from attnjax.metrics.translation import check_meteor_language  # pylint: disable=g-import-not-at-top
  language = config.eval.get("meteor_language")
  if language is not None:
    return check_meteor_language(language, "config.eval.meteor_language")
  language = config.data.get("tgt_lang")
  if language is None:
    _fail("eval.meteor_language", "METEOR needs the target language (its stemmer, and WordNet synonyms for English) "
          "and config.data.tgt_lang does not give it: set it, e.g. --eval meteor_language=fr")
  return check_meteor_language(language, "config.data.tgt_lang (METEOR's language; set config.eval.meteor_language "
                               "to override)")


def validate(config) -> None:
  """Checks a config before anything is built: unknown keys, impossible values, inconsistent choices."""
  known = set(base_config().keys())
  for key in config.keys():
    if key not in known:
      _fail(key, f"unknown section (known: {sorted(known)})")
  base = base_config()
  for section in ("data", "train", "eval", "mesh", "distributed"):
    for key in config[section].keys():
      if key not in base[section] and not (section == "data" and key in TEXT_SOURCE_KEYS):
        _fail(f"{section}.{key}", f"unknown key (known: {sorted(base[section].keys())})")
  d, t, e, m = config.data, config.train, config.eval, config.mesh
  from attnjax import targets  # pylint: disable=g-import-not-at-top
  if config.target not in targets.TARGETS:
    _fail("target", f"unknown target {config.target!r}; known: {sorted(targets.TARGETS)}")
  from attnjax.training.optim import OPTIMIZERS, SCHEDULES  # pylint: disable=g-import-not-at-top
  if t.optimizer not in OPTIMIZERS:
    _fail("train.optimizer", f"must be one of {OPTIMIZERS}, got {t.optimizer!r}")
  if t.schedule not in SCHEDULES:
    _fail("train.schedule", f"must be one of {SCHEDULES}, got {t.schedule!r}")
  if d.source not in DATA_SOURCES:
    _fail("data.source", f"must be one of {DATA_SOURCES}, got {d.source!r}")
  if config.model.get("copy") and not d.get("joint_vocab", True):
    _fail("model.copy", "copying puts source ids into the output: it needs one vocabulary for both sides "
          "(data.joint_vocab=True)")
  if d.pack and config.model.name != "transformer":
    _fail("data.pack", f"packing needs segment masks, which only model.name='transformer' takes "
          f"(got {config.model.name!r})")
  if (d.batch_size is None) == (d.max_tokens is None):
    _fail("data.batch_size", "set exactly one of data.batch_size and data.max_tokens")
  for key in ("steps", "warmup_steps", "log_every", "sync_every", "eval_every", "checkpoint_every",
              "keep_checkpoints", "grad_accum_steps"):
    if t[key] < (0 if key == "warmup_steps" else 1):
      _fail(f"train.{key}", f"must be positive, got {t[key]}")
  if not 0.0 <= t.label_smoothing < 1.0:
    _fail("train.label_smoothing", f"must be in [0, 1), got {t.label_smoothing}")
  if t.best_metric not in METRICS:
    _fail("train.best_metric", f"must be one of {METRICS}, got {t.best_metric!r}")
  if t.best_mode not in ("max", "min"):
    _fail("train.best_mode", f"must be 'max' or 'min', got {t.best_mode!r}")
  if t.get("patience") is not None and (not isinstance(t.patience, int) or t.patience < 1):
    _fail("train.patience", f"must be a positive number of evaluations or None, got {t.patience!r}")
  if e.decode not in DECODERS:
    _fail("eval.decode", f"must be one of {DECODERS}, got {e.decode!r}")
  qa_source, span_model = d.source in QA_SOURCES, config.model.get("name") == "span_qa"
  if qa_source != span_model:
    _fail("model.name" if qa_source else "data.source",
          f"extractive QA sources {QA_SOURCES} go with model.name='span_qa' and only with it (got data.source="
          f"{d.source!r}, model.name={config.model.get('name')!r})")
  if qa_source:
    for key in ("max_question_len", "max_context_len"):
      value = d.get(key, 1)
      if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        _fail(f"data.{key}", f"must be a positive int, got {value!r}")
    if t.label_smoothing:
      _fail("train.label_smoothing", f"applies to the seq2seq loss; set it to 0 for model.name='span_qa' (got "
            f"{t.label_smoothing})")
  for what, sources, model_name in (("masked-LM", MLM_SOURCES, "bert_mlm"), ("language-model", LM_SOURCES,
                                                                          "decoder_lm")):
    if (d.source in sources) != (config.model.get("name") == model_name):
      _fail("model.name" if d.source in sources else "data.source",
            f"{what} sources {sources} go with model.name={model_name!r} and only with it (got data.source="
            f"{d.source!r}, model.name={config.model.get('name')!r})")
    if d.source in sources and d.batch_size is None:
      _fail("data.batch_size", f"{what} rows have a fixed length: set data.batch_size (rows), not data.max_tokens")
  mlm_source, lm_source = d.source in MLM_SOURCES, d.source in LM_SOURCES
  allowed = (LM_METRICS if lm_source else MLM_METRICS if mlm_source else SPAN_METRICS if qa_source
             else DECODING_METRICS)
  unknown = [name for name in e.metrics if name not in allowed]
  if unknown:
    _fail("eval.metrics", f"{unknown} not available for this task (choose from {allowed})")
  if e.get("meteor_language") is not None or "meteor" in e.metrics:
    meteor_language(config)  # a language METEOR knows, given or from data.tgt_lang
  splits = ("train", "validation", "test") + tuple(s for s in (d.get("splits") or {}) if s not in
                                                   ("train", "validation", "test"))
  if e.split not in splits:
    _fail("eval.split", f"must be train, validation, test or another of config.data.splits ({', '.join(splits)}); "
          f"got {e.split!r}")
  if len(m.axes) != len(m.shape):
    _fail("mesh.shape", f"has {len(m.shape)} entries for {len(m.axes)} mesh.axes")
  if list(m.shape).count(-1) > 1:
    _fail("mesh.shape", f"may contain at most one -1, got {tuple(m.shape)}")
  used_axes = {a for _, target in m.rules if target for a in ((target,) if isinstance(target, str) else target)}
  if used_axes - set(m.axes):
    _fail("mesh.rules", f"name mesh axes {sorted(used_axes - set(m.axes))} that are not in mesh.axes {m.axes}")
  # the model: unknown fields and the model's own checks (heads dividing d_model, tying without a shared vocab...)
  from attnjax.models.registry import build_model  # pylint: disable=g-import-not-at-top
  try:
    build_model(config.model.to_dict(), src_vocab_size=64, tgt_vocab_size=64)
  except ValueError as err:
    raise ValueError(f"config.model: {err}") from err
