"""What a task family is: everything about one kind of task that the training loop, evaluation and the config check
need, behind one interface (:class:`TaskFamily`).

The core asks the family and never branches on a kind of task:

* the config check (:func:`attnjax.config.validate`) asks :meth:`TaskFamily.check_config` for the family's own keys,
  models and metrics;
* the training loop (:mod:`attnjax.training.loop`) asks for the task's data (:meth:`~TaskFamily.load_task`), its
  batchers (:meth:`~TaskFamily.batchers`), its loss (:meth:`~TaskFamily.loss`, the sum protocol of
  :mod:`attnjax.training.steps`), the tokens a batch trains on, and the evaluation of its state
  (:meth:`~TaskFamily.evaluate`, :meth:`~TaskFamily.predict`);
* ``python -m attnjax.evaluate`` (:func:`attnjax.scoring.evaluate_checkpoint`) asks the family to score a split with a
  checkpoint's parameters (:meth:`~TaskFamily.evaluate_checkpoint`) and write its files: the same
  :meth:`~TaskFamily.predict`, given a :class:`CheckpointRun` instead of a training run.

A family lives below the config, the training loop and evaluation: it imports data, models, metrics and the
prediction machinery of :mod:`attnjax.inference`, never :mod:`attnjax.training` or :mod:`attnjax.report`. What the
loop owns (the jitted evaluation step, the sharded state) reaches a family through a :class:`Run`.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Protocol



@dataclasses.dataclass
class Predictions:
  """What a split's evaluation produced: its scores (the values a training evaluation logs) and the metrics'
  signatures. A family's subclass adds what it predicted, in the split's order."""
  scores: dict[str, float]
  signatures: dict[str, str]


class Run(Protocol):
  """What a family's :meth:`TaskFamily.predict` reads: a training run's current state
  (:class:`attnjax.training.loop.Experiment`) or a checkpoint's parameters (:class:`CheckpointRun`)."""
  config: Any
  task: Any  # the family's task data: load_task's (training), or checkpoint_task's (one split, a checkpoint)
  model: Any
  mesh: Any
  metrics: tuple[str, ...]  # eval.metrics, or the task's own
  eval_batches: Any  # the validation-loss batcher of eval.split (training), or None
  cache: dict  # the family's own objects kept between evaluations (a compiled decoder)

  @property
  def params(self): ...

  def loss_totals(self, batches, loss_fn=None) -> dict[str, float]:
    """Sums of ``loss_fn`` (default: the family's loss; ``{"loss_sum", "nll_sum", "ntokens", ...}``) over host-local
    ``batches``, all processes together. A family that passes its own keeps it (in ``cache``), so that it compiles
    once."""


@dataclasses.dataclass
class CheckpointRun:
  """A checkpoint's parameters as a :class:`Run`: what :meth:`TaskFamily.evaluate_checkpoint` hands the family's
  :meth:`~TaskFamily.predict`, so that a checkpoint is scored by the same code as a training run's state."""
  config: Any
  task: Any
  model: Any
  mesh: Any
  params: Any  # replicated over the mesh
  metrics: tuple[str, ...]
  loss_fn: Any  # the family's loss (TaskFamily.loss)
  limit: int | None = None  # the task holds the split's first `limit` examples (None: all of them)
  eval_batches: Any = None
  cache: dict = dataclasses.field(default_factory=dict)

  def loss_totals(self, batches, loss_fn=None) -> dict[str, float]:
    import jax  # pylint: disable=g-import-not-at-top
    from attnjax.runtime import partitioning  # pylint: disable=g-import-not-at-top
    fn = self.loss_fn if loss_fn is None else loss_fn
    steps = self.cache.setdefault("loss_steps", {})
    if fn not in steps:
      rules = self.config.mesh.rules

      @partitioning.traced_in(self.mesh, rules)
      def step(params, batch):
        return fn(self.model, params, batch, None, True)
      steps[fn] = jax.jit(step, out_shardings=partitioning.replicated(self.mesh))
    totals = {"loss_sum": 0.0, "nll_sum": 0.0, "ntokens": 0.0}
    for batch in batches:
      out = jax.device_get(steps[fn](self.params, partitioning.global_batch(batch, self.mesh, self.config.mesh.rules)))
      for key, value in out.items():
        totals[key] = totals.get(key, 0.0) + float(value)
    return totals


def fail(key: str, message: str):
  """A config error naming its key, as :func:`attnjax.config.validate` reports them."""
  raise ValueError(f"config.{key}: {message}")


def check_positive_int(config_section, key: str, prefix: str, default: int = 1) -> None:
  value = config_section.get(key, default)
  if not isinstance(value, int) or isinstance(value, bool) or value < 1:
    fail(f"{prefix}.{key}", f"must be a positive int, got {value!r}")


class TaskFamily:
  """One kind of task: its sources, its vocabulary in the workdir, batchers, loss, predictions and scores.

  A subclass sets the class attributes and implements the methods below; registering it is one line in
  :data:`attnjax.families.FAMILIES`.

  Attributes:
    name: the registry key.
    title: what error messages call the family's sources ("extractive QA").
    sources: the ``config.data.source`` values it reads; each source belongs to one family.
    model_names: the ``config.model.name`` values it trains, and only it; empty: the models no family claims.
    data_keys: the ``config.data`` keys it adds to :func:`attnjax.config.base_config`'s, each with the type of its
      value (``dict[str, str]``: split -> file): a command line may set them on any experiment whose source is the
      family's (``--config.data.path=pairs.tsv``), and :mod:`attnjax.cli` parses them to that type.
    metrics: what ``config.eval.metrics`` may ask for.
    batch_ndims: ``{key: rank}`` of a training batch's arrays, or None when every array is ``[batch, length]``.
  """
  name: str = ""
  title: str = ""
  sources: tuple[str, ...] = ()
  model_names: tuple[str, ...] = ()
  data_keys: dict[str, Any] = {}
  metrics: tuple[str, ...] = ()
  batch_ndims: dict[str, int] | None = None
  decodes: bool = False  # its models generate text with attnjax.decoding (AOT planning compiles the search too)

  # ------------------------------------------------------------------------------------------------ the config

  def default_metrics(self, data_cfg) -> tuple[str, ...]:
    """What the task is scored with when ``config.eval.metrics`` is empty."""
    return self.metrics

  def metric_names(self, config) -> tuple[str, ...]:
    """What an evaluation of ``config`` scores with: ``config.eval.metrics``, or the task's own when it is empty (the
    one answer that training's evaluations and ``attnjax.evaluate`` share)."""
    return tuple(config.eval.metrics) or self.default_metrics(config.data)

  def metric_values(self, name: str) -> tuple[str, ...]:
    """The values that scoring with the metric ``name`` reports (ROUGE reports four)."""
    return (name,)

  def values(self, data_cfg, names, task=None) -> tuple[str, ...]:
    """Every value an evaluation scoring with ``names`` reports, which ``config.train.best_metric`` may rank by: the
    loss, each metric's values (:meth:`metric_values`) and the family's :meth:`extra_values` (for ``task`` once it
    is read; without it, every value the config's data may give)."""
    out = ["loss", "nll"]
    for name in names:
      out.extend(self.metric_values(name))
    out.extend(self.extra_values(data_cfg, names, task))
    return tuple(dict.fromkeys(out))

  def source_data_keys(self, source: str) -> dict[str, Any]:
    """The ``data_keys`` that ``source`` reads (all of them unless the family says otherwise): what a command line
    may add to an experiment's ``config.data`` for that source."""
    return self.data_keys

  def default_best(self, data_cfg) -> tuple[str, str]:
    """``(best_metric, best_mode)``: what ranks the "best" checkpoint when ``config.train.best_metric`` is unset
    (the first of :meth:`default_metrics`, ranked higher-is-better, unless the family says otherwise)."""
    return self.default_metrics(data_cfg)[0], "max"

  def check_config(self, config) -> None:
    """The family's own checks of a config (its keys' values, what its loss allows); ValueError naming the key."""

  def check_evaluation(self, config, names) -> None:
    """What scoring with ``names`` needs that is not there (a metric's data), checked before hours of work."""

  def extra_values(self, data_cfg, names, task=None) -> tuple[str, ...]:
    """Values an evaluation scoring with ``names`` reports beyond the metrics' own (which
    ``config.train.best_metric`` may also rank by); ``task``: the data once read, None: any the config's data may
    give."""
    del data_cfg, names, task
    return ()

  # ------------------------------------------------------------------------------------------- data in a workdir

  def load_task(self, data_cfg, workdir: str):
    """The task's splits and vocabulary for training (the vocabulary trained once and kept in ``workdir``)."""
    raise NotImplementedError

  def load_vocabularies(self, data_cfg, workdir: str):
    """The :class:`~attnjax.data.tasks.Vocabularies` a training run left in ``workdir``; never trains one."""
    raise NotImplementedError

  def load_split(self, data_cfg, split: str) -> list:
    """Only ``split`` of the task, every example of it in order (what analyses and baselines read; no vocabulary,
    no other split)."""
    raise NotImplementedError(f"{self.name}: no list of examples apart from the workdir's rows")

  def check_model(self, task, model) -> None:
    """What only the data can tell about the model (a position table long enough for the task's rows)."""

  # ------------------------------------------------------------------------------------------------- training

  def batchers(self, task, config, split: str, *, shards: dict):
    """``(training batcher, validation-loss batcher of split)``; ``shards``: ``batch_size``, ``max_tokens``,
    ``num_shards``, ``shard_index`` and ``batch_multiple`` (what the mesh and the processes ask of a batch)."""
    raise NotImplementedError

  def loss(self, config, *, tgt_vocab_size: int):
    """``loss_fn(model, params, batch, rng, deterministic) -> {"loss_sum", "nll_sum", "ntokens", ...}``: sums over
    the batch, divided once by the step (:mod:`attnjax.training.steps`); ``tgt_vocab_size``: the real (unpadded)
    size of the vocabulary it predicts. The one loss of the family: training, evaluation and planning all take it
    from here."""
    raise NotImplementedError

  def tokens(self, batch) -> float:
    """The tokens a host-local batch trains on (throughput)."""
    raise NotImplementedError

  def padded_lengths(self, data_cfg) -> tuple[int, int]:
    """The two padded lengths of the longest training batch (source and target, question and context, rows)."""
    raise NotImplementedError(f"{self.name}: no ahead-of-time batch shape")

  def abstract_batch(self, config, rows: int, first_len: int, second_len: int) -> tuple[dict, tuple[str, ...]]:
    """``({key: shape}, boolean keys)`` of a training batch, for compiling ahead of time without data."""
    raise NotImplementedError(f"{self.name}: no ahead-of-time batch shape")

  # ------------------------------------------------------------------------------------ evaluating a run's state

  def evaluate(self, run: Run, *, limit: int | None) -> tuple[dict[str, float], dict[str, str]]:
    """The validation loss on ``run.eval_batches`` (its first ``eval.loss_batches``), then :meth:`predict` on the
    first ``limit`` examples of ``eval.split``: the values and signatures a training evaluation logs."""
    cfg = run.config
    batches = [b for _, b in zip(range(cfg.eval.loss_batches), run.eval_batches.iterate_epoch(0))]
    values = mean_loss(run.loss_totals(batches))
    predictions = self.predict(run, cfg.eval.split, limit=limit)
    values.update(predictions.scores)
    return values, predictions.signatures

  def predict(self, run: Run, split: str, *, limit: int | None, **options) -> Predictions:
    """Predictions and scores of the run's parameters on the first ``limit`` examples (all: None) of ``split``: the
    one path to a prediction, for a training run's evaluations and a checkpoint's (:meth:`evaluate_checkpoint`)."""
    raise NotImplementedError

  # ------------------------------------------------------------------------------------ a checkpoint of a workdir

  def read_split(self, config, workdir: str, split: str, *, limit: int | None):
    """The first ``limit`` examples (all: None) of ``split`` for a checkpoint's evaluation, read before its
    parameters are (a missing file fails first): :meth:`load_split`'s by default."""
    del workdir
    examples = self.load_split(config.data, split)
    return examples[:limit] if limit else examples

  def checkpoint_task(self, config, split: str, examples, vocabularies):
    """The task :meth:`predict` reads for a checkpoint: ``split`` alone, its ``examples`` (:meth:`read_split`)
    with the workdir's ``vocabularies``."""
    raise NotImplementedError

  def num_examples(self, task, split: str) -> int:
    """How many examples of ``split`` an evaluation of ``task`` scores."""
    return len(task.splits[split])

  def predict_options(self, workdir: str, run: Run, split: str, loaded, *, names, limit) -> dict[str, Any]:
    """Keyword options of :meth:`predict` for a checkpoint's evaluation (a decision taken on another split)."""
    del workdir, run, split, loaded, names, limit
    return {}

  def write_files(self, workdir: str, split: str, loaded, run: Run, predictions: Predictions, *,
                  heatmap: str | None) -> dict[str, Any]:
    """The family's files of a checkpoint's evaluation (process 0 writes them); returns what the result adds (their
    paths)."""
    del workdir, split, loaded, run, predictions, heatmap
    return {}

  def metrics_name(self, run: Run, split: str) -> str:
    """``metrics.<name>.json``: the name a checkpoint's evaluation of ``split`` is kept under."""
    del run
    return split

  def evaluate_checkpoint(self, workdir: str, config, split: str, load, *, names, limit,
                          heatmap: str | None) -> dict[str, Any]:
    """Scores every example of ``split`` (the first ``limit``) with a checkpoint's parameters, ``load()`` giving them
    (:func:`attnjax.trained.load_workdir`: called once the split is read, so that a missing file fails first):
    :meth:`predict` on a :class:`CheckpointRun`, then the family's files (:meth:`write_files`) and
    ``metrics.<split>.json`` in the workdir (process 0). Returns the result that file keeps."""
    if heatmap and not self.decodes:
      no_heatmap(heatmap, config.model.name)
    examples = self.read_split(config, workdir, split, limit=limit)
    loaded = load()
    task = self.checkpoint_task(config, split, examples, loaded.vocabularies)
    run = CheckpointRun(config, task, loaded.model, loaded.mesh, loaded.params, tuple(names),
                        self.loss(config, tgt_vocab_size=loaded.vocabularies.tgt.size), limit=limit)
    options = self.predict_options(workdir, run, split, loaded, names=names, limit=limit)
    predictions = self.predict(run, split, limit=None, **options)  # the task holds the first `limit` only
    result: dict[str, Any] = result_head(loaded, split, self.num_examples(task, split))
    result.update(predictions.scores)
    result.update(self.write_files(workdir, split, loaded, run, predictions, heatmap=heatmap))
    write_metrics(workdir, self.metrics_name(run, split), result)
    return result


def mean_loss(totals: dict[str, float]) -> dict[str, float]:
  """``loss`` and ``nll`` per loss token from summed totals (``accuracy`` too where the loss counts correct
  predictions, with the number of predictions it is over)."""
  n = max(totals["ntokens"], 1.0)
  values = {"loss": totals["loss_sum"] / n, "nll": totals["nll_sum"] / n}
  if "correct_sum" in totals:
    values.update(accuracy=totals["correct_sum"] / n, ntokens=totals["ntokens"])
  return values


def raw_params(loaded) -> bool:
  """Whether ``loaded`` holds the parameters of a run that keeps their moving average, which evaluation reads
  unless told otherwise (``--weights=params``)."""
  return loaded.config.train.get("ema_decay") is not None and getattr(loaded, "weights", "params") == "params"


def step_tag(loaded) -> str:
  """``step<N>``, with ``.avg<K>`` for averaged parameters and ``.params`` for the parameters of a run evaluated on
  their moving average: the suffix of an evaluation's files."""
  return (f"step{loaded.step}" + (f".avg{len(loaded.steps)}" if len(loaded.steps) > 1 else "")
          + (".params" if raw_params(loaded) else ""))


def result_head(loaded, split: str, examples: int) -> dict:
  """The start of an evaluation's result: the step(s), the split, the number of examples scored, and ``weights``
  where the run kept a moving average of its parameters (``"average"`` or ``"params"``, which was read)."""
  head = {"step": loaded.step, "steps": list(loaded.steps), "split": split, "examples": int(examples)}
  if loaded.config.train.get("ema_decay") is not None:
    head["weights"] = getattr(loaded, "weights", "params")
  return head


def write_metrics(workdir: str, split: str, result: dict) -> None:
  """``metrics.<split>.json`` (process 0): what ``python -m attnjax.report`` reads; the parameters of a run that
  keeps their moving average (``result["weights"] == "params"``) go to ``metrics.<split>.params.json`` beside it."""
  import jax  # pylint: disable=g-import-not-at-top
  from attnjax import fs  # pylint: disable=g-import-not-at-top
  name = f"metrics.{split}.params.json" if result.get("weights") == "params" else f"metrics.{split}.json"
  if jax.process_index() == 0:
    fs.write_json(fs.join(workdir, name), result, indent=1, sort_keys=True)


def no_heatmap(heatmap: str | None, model_name: str) -> None:
  if heatmap:
    raise ValueError(f"heatmap: attention heatmaps are drawn for sequence-to-sequence models, not for "
                     f"model.name={model_name!r}")
