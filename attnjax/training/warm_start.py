"""Starting a run from another run's checkpoint (``train.init_from``): a final training phase with more parameters,
or fine-tuning.

See et al. (2017) train the pointer-generator first and add coverage only for a final phase: coverage from the first
step "interfered with the main objective". A run with ``train.init_from=<workdir>`` does the same in general:

* its vocabulary (and token caches) are the other run's, copied into its workdir before anything is tokenized;
* its parameters are the other run's at the chosen checkpoint wherever the two models share a parameter (same path,
  same shape; a shared path of another shape is an error naming it), and its own initialisation for the parameters
  only it has (coverage's ``w_coverage``), logged by name;
* its optimiser state is the other run's for the shared parameters (moments, and the update count that the
  learning-rate schedule reads, so no second warm-up) and a fresh one for its own, as See et al.'s code restored
  every variable the coverage model shares with the pointer-generator;
* its step count, data position and training clock continue from that checkpoint, so ``train.time_limit_minutes``
  bounds the two phases together: one budget for the whole lineage.

The other run's checkpoints are opened read-only: nothing there is created, cleaned up or deleted.

The checkpoint is the newest one whose training clock is at most ``train.init_at_minutes`` (the latest without it), or
the one of step ``train.init_at_step`` where that is set.
A relative ``init_from`` is resolved against the run's own workdir, so that an experiment file can name a sibling
in the launcher's layout (``../../../lstm_pointer_generator/single/default``).

``train.init_from`` may instead name a Hugging Face checkpoint directory that ``transformers`` wrote (a Marian or
Pegasus model: :mod:`attnjax.transfer.published`): fine-tuning it. The run's ``config.model`` becomes the
checkpoint's architecture (:func:`adopt_checkpoint_model`; the run keeps its own dropout rates, dtype and attention
implementation), its tokenizer is the run's vocabulary (copied into ``<workdir>/checkpoint_vocabulary/``), and its
weights are the parameters of step 0, with a fresh optimiser and data position. ``python -m attnjax.export`` writes
the fine-tuned model back in the checkpoint's format.
"""

from __future__ import annotations

import os

from absl import logging
import flax
import jax
import numpy as np
import jax.numpy as jnp

from attnjax import config as config_lib
from attnjax import fs
from attnjax.runtime.checkpointing import Checkpointer

VOCABULARY_PATTERNS = ("spm*.model", "spm*.vocab", "vocab.json", "tokens.*.npz")


def resolve(init_from: str, workdir: str) -> str:
  """``init_from`` as a path: absolute or a URL as given, relative against ``workdir``."""
  if fs.is_url(init_from) or os.path.isabs(init_from):
    return init_from
  return os.path.normpath(os.path.join(os.fspath(workdir), init_from))


# the fields of config.model that a run fine-tuning a Hugging Face checkpoint keeps its own values of
RUN_FIELDS = ("dtype", "param_dtype", "implementation", "dropout_bits", "dropout_rate", "attention_dropout_rate",
              "relu_dropout_rate")


def adopt_checkpoint_model(config, workdir: str) -> bool:
  """Where ``train.init_from`` names a Hugging Face checkpoint directory: ``config.model`` set to its architecture
  (the run's :data:`RUN_FIELDS` kept), before the config is checked or compared with a resumed run's; returns
  whether it did. Reads ``config.json`` and the tokenizer only."""
  from attnjax.transfer import published  # pylint: disable=g-import-not-at-top
  init_from = config.train.get("init_from")
  if not init_from or not published.is_checkpoint_dir(resolve(init_from, workdir)):
    return False
  import ml_collections  # pylint: disable=g-import-not-at-top
  model = published.model_config(resolve(init_from, workdir))
  if model["name"] != "transformer":
    raise ValueError(f"train.init_from={init_from}: a {model['name']} checkpoint; fine-tuning takes an encoder-decoder "
                     "(Marian, Pegasus): the language-model data reader tokenizes with a SentencePiece model of its own")
  model.update({key: config.model[key] for key in RUN_FIELDS if key in config.model})
  config.model = ml_collections.ConfigDict(model)
  return True


def copy_vocabulary(source: str, workdir: str) -> list[str]:
  """Copies the vocabulary files (and token caches) of ``source`` that ``workdir`` lacks; returns their names. A
  Hugging Face checkpoint's tokenizer goes into ``checkpoint_vocabulary/``."""
  from attnjax.transfer import published  # pylint: disable=g-import-not-at-top
  if published.is_checkpoint_dir(source):
    return published.copy_vocabulary(source, workdir)
  if not fs.exists(fs.join(source, config_lib.CONFIG_FILE)):
    raise FileNotFoundError(f"train.init_from={source}: no {config_lib.CONFIG_FILE} there; it must be the workdir of "
                            f"a training run")
  copied = []
  fs.makedirs(workdir)
  for pattern in VOCABULARY_PATTERNS:
    for path in fs.path(source).glob(pattern):
      target = fs.join(workdir, path.name)
      if not target.exists():
        target.write_bytes(path.read_bytes())
        copied.append(path.name)
  return copied


def choose_step(checkpointer: Checkpointer, at_minutes: float | None, at_step: int | None = None) -> tuple[int, dict]:
  """(step, meta) of the newest checkpoint whose training clock is at most ``at_minutes`` (the latest if None), or,
  with ``at_step``, the checkpoint of exactly that step (a replay of a budgeted lineage names the step its budget
  chose, whatever this machine's clock says)."""
  steps = checkpointer.steps()
  if not steps:
    raise FileNotFoundError(f"train.init_from: no checkpoint in {checkpointer.directory}")
  if at_step is not None:
    if at_step not in steps:
      raise ValueError(f"train.init_at_step={at_step}: no checkpoint of that step in {checkpointer.directory} (it "
                       f"has {', '.join(map(str, steps))})")
    return at_step, checkpointer.restore_bookkeeping(at_step)[1]
  clocks = []
  for step in reversed(steps):
    _, meta = checkpointer.restore_bookkeeping(step)
    minutes = float(meta.get("train_seconds", 0.0)) / 60
    clocks.append(f"{step} ({minutes:.1f} min)")
    if at_minutes is None or minutes <= at_minutes:
      return step, meta
  raise ValueError(f"train.init_at_minutes={at_minutes}: every checkpoint in {checkpointer.directory} was trained "
                   f"longer ({', '.join(clocks)})")


def merge_params(own, source, key: str = "train.init_from") -> tuple[dict, list[str]]:
  """``own`` with every leaf that ``source`` also has replaced by the source's; returns (params, the paths only
  ``own`` has). Raises ValueError (naming the config ``key``) for a shared path whose shapes differ, or a source path
  ``own`` lacks."""
  own_flat = flax.traverse_util.flatten_dict(flax.core.unfreeze(own), sep="/")
  source_flat = flax.traverse_util.flatten_dict(flax.core.unfreeze(source), sep="/")
  missing = sorted(set(source_flat) - set(own_flat))
  if missing:
    raise ValueError(f"{key}: the model has no parameter {missing[0]} of the checkpoint (and "
                     f"{len(missing) - 1} more): the two models differ by more than added parameters")
  for path, value in source_flat.items():
    if tuple(value.shape) != tuple(own_flat[path].shape):
      raise ValueError(f"{key}: parameter {path} has shape {tuple(value.shape)} in the checkpoint and "
                       f"{tuple(own_flat[path].shape)} in this model")
  merged = {path: source_flat.get(path, value) for path, value in own_flat.items()}
  return flax.traverse_util.unflatten_dict(merged, sep="/"), sorted(set(own_flat) - set(source_flat))


def merge_state_tree(own, source):
  """``own`` (an optimiser state) with each leaf that ``source`` has at the same tree path and shape replaced by the
  source's: the moments of shared parameters and the update counts; the rest (a new parameter's moments) stays."""
  source_leaves = {jax.tree_util.keystr(path): leaf
                   for path, leaf in jax.tree_util.tree_flatten_with_path(source)[0]}

  def pick(path, leaf):
    other = source_leaves.get(jax.tree_util.keystr(path))
    return other if other is not None and tuple(other.shape) == tuple(leaf.shape) else leaf

  return jax.tree_util.tree_map_with_path(pick, own)


def warm_start(exp, source: str, at_minutes: float | None, at_step: int | None = None) -> tuple[int, dict]:
  """Puts the parameters, step and data position of ``source``'s chosen checkpoint into ``exp`` (an
  :class:`attnjax.training.loop.Experiment` without a checkpoint of its own); returns (step, meta). A Hugging Face
  checkpoint directory gives its weights alone (:func:`init_from_checkpoint`): (0, {})."""
  from attnjax.transfer import published  # pylint: disable=g-import-not-at-top
  if published.is_checkpoint_dir(source):
    init_from_checkpoint(exp, source)
    return 0, {}
  from attnjax.models.registry import build_model  # pylint: disable=g-import-not-at-top
  from attnjax.training.state import abstract_with_sharding, state_shardings  # pylint: disable=g-import-not-at-top
  source_config = config_lib.load_config(source)
  model = exp.model
  source_model = build_model(source_config.model.to_dict(), src_vocab_size=model.src_vocab_size,
                             tgt_vocab_size=model.tgt_vocab_size)
  t = source_config.train
  checkpointer = Checkpointer(fs.join(source, "checkpoints"), keep=t.keep_checkpoints, best_metric=t.best_metric,
                              best_mode=t.best_mode, async_save=False, read_only=True)
  try:
    step, meta = choose_step(checkpointer, at_minutes, at_step)
    # the other run's whole train state (its optimiser is this run's: the same train section's optimiser keys)
    source_ema = t.get("ema_decay") is not None
    abstract, sharding = state_shardings(source_model, exp.tx, exp.mesh, exp.rules,
                                         jax.random.PRNGKey(source_config.seed), source_ema)
    restored, data_state, _, _ = checkpointer.restore(abstract_with_sharding(abstract, sharding), step)
  finally:
    checkpointer.close()
  params, new = merge_params(exp.state.params, restored.params)
  place = lambda tree, like: jax.tree_util.tree_map(lambda x, y: jax.device_put(x, y.sharding), tree, like)
  average = exp.state.ema_params
  if average is not None:  # the other run's moving average where it kept one, else its parameters
    average = place(merge_params(average, restored.ema_params if source_ema else restored.params)[0], average)
  exp.state = exp.state.replace(
      step=jax.device_put(jnp.asarray(step, exp.state.step.dtype), exp.state.step.sharding),
      params=place(params, exp.state.params),
      opt_state=place(merge_state_tree(exp.state.opt_state, restored.opt_state), exp.state.opt_state),
      ema_params=average)
  exp.train_batches.restore(data_state)
  gap = (at_minutes - float(meta.get("train_seconds", 0.0)) / 60) if at_minutes is not None else 0.0
  if gap > 5:
    logging.warning("warm start: the newest checkpoint of %s within train.init_at_minutes=%s was trained %.1f "
                    "minutes less: checkpoint it more often (train.checkpoint_every) for a closer start", source,
                    at_minutes, gap)
  logging.info("warm start from %s, step %d (%.1f training minutes): its parameters, step and data position; "
               "initialised here: %s", source, step, float(meta.get("train_seconds", 0.0)) / 60, new or "none")
  return step, meta


def encoder_params(source: str) -> dict:
  """A pre-trained BERT encoder's parameters (host arrays): from a Hugging Face checkpoint directory (``config.json``
  and ``model.safetensors``, validated by :mod:`attnjax.transfer.bert`), or from an attnjax workdir whose model has
  a ``bert`` encoder (a masked-LM pre-training run, a fine-tuned reader): its best checkpoint's ``bert``. From a
  masked-LM run, which trains token type 0 only, every token type starts as type 0."""
  if fs.exists(fs.join(source, "config.json")) and fs.exists(fs.join(source, "model.safetensors")):
    from attnjax.transfer import bert  # pylint: disable=g-import-not-at-top
    config = bert.read_config(source)
    tensors, path = bert.read_tensors(source)
    params = bert.params_from_tensors(tensors, config, path)
    params.pop("pooler", None)  # the readers have no pooler
    return params
  if not fs.exists(fs.join(source, "checkpoints")):
    raise FileNotFoundError(f"train.init_encoder_from={source}: neither a Hugging Face checkpoint (config.json, "
                            "model.safetensors) nor an attnjax workdir (checkpoints/)")
  from attnjax import trained  # pylint: disable=g-import-not-at-top
  loaded = trained.load_workdir(source, checkpoint="best")
  if "bert" not in loaded.params:
    raise ValueError(f"train.init_encoder_from={source}: its model ({loaded.config.model.name}) has no BERT encoder")
  params = jax.tree_util.tree_map(np.asarray, jax.device_get(loaded.params["bert"]))
  params.pop("pooler", None)
  if loaded.config.model.name == "bert_mlm":
    # masked-LM pre-training feeds token type 0 only (no sentence pairs): the other types' rows never left their
    # random init. A reader gives its context type 1, so those rows start as the trained one.
    types = params["token_type_embeddings"]["embedding"]
    params["token_type_embeddings"]["embedding"] = np.broadcast_to(types[:1], types.shape).copy()
    logging.info("%s: token types 1-%d start as type 0 (masked-LM pre-training trains type 0 only)", source,
                 types.shape[0] - 1)
  return params


def encoder_is_pre_norm(source: str) -> bool:
  """Whether a pre-trained encoder's layers are pre-norm: an attnjax workdir's ``model.pre_norm``; a Hugging Face
  checkpoint's ``model_type`` (``roberta-prelayernorm``, the export of a pre-norm encoder; BERT is post-norm)."""
  if fs.exists(fs.join(source, "checkpoints")) and fs.exists(fs.join(source, "config.json")):
    from attnjax import config as config_lib  # pylint: disable=g-import-not-at-top
    return bool(config_lib.load_config(source).model.get("pre_norm", False))
  if fs.exists(fs.join(source, "config.json")):
    from attnjax.transfer import bert  # pylint: disable=g-import-not-at-top
    return bert.read_config(source).get("model_type") == bert.PRE_NORM
  return False


def init_encoder(exp, source: str) -> None:
  """Puts a pre-trained encoder (:func:`encoder_params`) into ``exp``'s fresh state, in its shardings: fine-tuning
  starts from its weights, with the task's head, the optimiser and the step fresh."""
  if "bert" not in exp.state.params:
    raise ValueError("train.init_encoder_from needs a model with a BERT encoder (model.encoder='bert')")
  ours, theirs = bool(exp.config.model.get("pre_norm", False)), encoder_is_pre_norm(source)
  if ours != theirs:
    raise ValueError(f"train.init_encoder_from={source}: its encoder is {'pre' if theirs else 'post'}-norm, this "
                     f"model's {'pre' if ours else 'post'}-norm: set model.pre_norm={theirs}")
  merged, new = merge_params(exp.state.params["bert"], encoder_params(source), key="train.init_encoder_from")
  place = lambda tree, like: jax.tree_util.tree_map(lambda x, y: jax.device_put(jnp.asarray(x, y.dtype), y.sharding),
                                                    tree, like)
  params = dict(exp.state.params)
  params["bert"] = place(merged, exp.state.params["bert"])
  average = None if exp.state.ema_params is None else jax.tree_util.tree_map(jnp.copy, params)  # starts here too
  exp.state = exp.state.replace(params=params, ema_params=average)
  logging.info("encoder initialised from %s; trained from scratch here: %s", source, new or "nothing else of it")


def init_from_checkpoint(exp, source: str) -> None:
  """The weights of a Hugging Face checkpoint directory as ``exp``'s parameters (its model is the checkpoint's:
  :func:`adopt_checkpoint_model`), in their shardings; the optimiser, step and data start fresh."""
  from attnjax.transfer import published  # pylint: disable=g-import-not-at-top
  imported = published.import_checkpoint(source)
  merged, new = merge_params(exp.state.params, imported.params)
  if new:
    raise ValueError(f"train.init_from={source}: the model has parameters the checkpoint lacks ({new[0]}, ...)")
  place = lambda tree, like: jax.tree_util.tree_map(lambda x, y: jax.device_put(jnp.asarray(x, y.dtype), y.sharding),
                                                    tree, like)
  params = place(merged, exp.state.params)
  average = None if exp.state.ema_params is None else jax.tree_util.tree_map(jnp.copy, params)
  exp.state = exp.state.replace(params=params, ema_params=average)
  logging.info("fine-tuning %s (%s): its weights at step 0", source, imported.config.get("architectures"))
