"""Task families: one module per kind of task, and the one registry the core asks (:data:`FAMILIES`).

========================  =============================================  ===========================================
family                    ``config.data.source``                         ``config.model.name``
========================  =============================================  ===========================================
``seq2seq``               synthetic, parallel_text, tsv, jsonl, tfds_*   transformer, lstm_*, convs2s, ... (the rest)
``span_qa``               squad_json, tfds_squad                         span_qa
``masked_lm``             mlm_jsonl, mlm_text                            bert_mlm
``language_model``        lm_jsonl, lm_text, tfds_lm                     decoder_lm
========================  =============================================  ===========================================

A config's family is the one whose ``sources`` hold its ``data.source`` (:func:`of`). What a family is and does:
:mod:`attnjax.families.base`. Adding one is a module with a :class:`~attnjax.families.base.TaskFamily` subclass and
its line in the registry below (or :func:`register` from outside the package); the training loop, evaluation and
the config check need no edit.
"""

from __future__ import annotations

from attnjax.families import language_model, masked_lm, seq2seq, span_qa
# the interface, by its short names
from attnjax.families.base import CheckpointRun, Predictions, Run, TaskFamily  # noqa: F401

FAMILIES: dict[str, TaskFamily] = {}  # name -> family
_BY_SOURCE: dict[str, TaskFamily] = {}  # config.data.source -> its family
_CLAIMED_MODELS: dict[str, TaskFamily] = {}  # config.model.name -> the family that alone trains it


def register(family: TaskFamily) -> TaskFamily:
  """Adds ``family`` to the registry (its name, sources and claimed models each its own); ValueError naming a
  clash."""
  taken = ([f"name {family.name!r}"] if family.name in FAMILIES else []) + [
      f"source {s!r} ({_BY_SOURCE[s].name})" for s in family.sources if s in _BY_SOURCE] + [
      f"model {m!r} ({_CLAIMED_MODELS[m].name})" for m in family.model_names if m in _CLAIMED_MODELS]
  if not family.name or not family.sources:
    raise ValueError(f"{type(family).__name__}: a family needs a name and at least one source")
  if taken:
    raise ValueError(f"family {family.name!r}: already registered: {', '.join(taken)}")
  FAMILIES[family.name] = family
  _BY_SOURCE.update({source: family for source in family.sources})
  _CLAIMED_MODELS.update({name: family for name in family.model_names})
  return family


def unregister(name: str) -> None:
  """Removes the family ``name`` (a test's own family, after the test)."""
  family = FAMILIES.pop(name)
  for table in (_BY_SOURCE, _CLAIMED_MODELS):
    for key in [k for k, v in table.items() if v is family]:
      del table[key]


for _family in (seq2seq.FAMILY, span_qa.FAMILY, masked_lm.FAMILY, language_model.FAMILY):  # the registry
  register(_family)


def sources() -> tuple[str, ...]:
  """Every ``config.data.source`` a registered family reads."""
  return tuple(_BY_SOURCE)


def resolve_best(config) -> None:
  """Sets ``config.train.best_metric`` and ``best_mode`` to the family's own for the config's data where the metric
  is unset (:meth:`TaskFamily.default_best`), so that the config a run saves names what it ranked by."""
  if config.train.get("best_metric") is None:
    config.train.best_metric, config.train.best_mode = of(config).default_best(config.data)


def check_best(config, task=None) -> None:
  """Training ranks its "best" checkpoint by a value its evaluation computes (:meth:`TaskFamily.values`; ``task``:
  the data once read, None: checked before it is). An evaluation of a checkpoint ranks nothing, so it is not
  asked."""
  family = of(config)
  values = family.values(config.data, family.metric_names(config), task)
  if config.train.best_metric not in values:
    raise ValueError(f"config.train.best_metric={config.train.best_metric!r} is not computed by this run's "
                     f"evaluation, which reports {sorted(values)} (config.eval.metrics, or the task's own metrics "
                     "when empty)")


def for_source(source: str) -> TaskFamily:
  """The family that reads ``config.data.source``; ValueError naming the key and the known sources."""
  if source not in _BY_SOURCE:
    raise ValueError(f"config.data.source: must be one of {sources()}, got {source!r}")
  return _BY_SOURCE[source]


def of(config) -> TaskFamily:
  """The family of a config (or of its ``config.data`` section)."""
  data = config.data if hasattr(config, "data") and not isinstance(config, dict) else config
  return for_source(data["source"] if isinstance(data, dict) else data.source)


def check_model_name(config) -> None:
  """A model a family claims trains on its sources, and its sources only on its models."""
  family, name = of(config), config.model.get("name")
  source = config.data.source
  if family.model_names and name not in family.model_names:
    models = family.model_names[0] if len(family.model_names) == 1 else family.model_names
    raise ValueError(f"config.model.name: {family.title} sources {family.sources} go with model.name={models!r} and "
                     f"only with it (got data.source={source!r}, model.name={name!r})")
  claimed = _CLAIMED_MODELS.get(name)
  if claimed is not None and claimed is not family:
    raise ValueError(f"config.data.source: {claimed.title} sources {claimed.sources} go with model.name={name!r} "
                     f"and only with it (got data.source={source!r}, model.name={name!r})")


# What a config's data is, asked of its family: the training loop, evaluation and the report call these.

def load_task(data_cfg, workdir: str):
  """The task's splits and vocabulary for training (the vocabulary trained once, kept in the workdir)."""
  return for_source(data_cfg.source).load_task(data_cfg, workdir)


def load_vocabularies(data_cfg, workdir: str):
  """The vocabularies a training run left in ``workdir`` (never trains one, never reads training data)."""
  return for_source(data_cfg.source).load_vocabularies(data_cfg, workdir)


def load_split(data_cfg, split: str) -> list:
  """Only ``split`` of a task, every example of it in order: ``(source, target)`` pairs, or SQuAD questions."""
  return for_source(data_cfg.source).load_split(data_cfg, split)
