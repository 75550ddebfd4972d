"""Finding and reading run workdirs: their launch manifest, config, evaluation and TensorBoard curves (see
:mod:`attnjax.report`)."""

from __future__ import annotations

import collections
import json
import os
import re
import statistics
from typing import Any, Iterable

from absl import logging
from etils import epath

from attnjax import fs
from attnjax.transfer import PROVENANCE_FILE
from attnjax.report.tensorboard import read_scalars

RUN_FILES = ("launch.json", "config.json")
SKIPPED_DIRS = ("checkpoints", "tensorboard")  # large, and never hold a run of their own
EXPORTED = PROVENANCE_FILE  # beside an exported model's config.json: a model kept with the records, not a run
SPLIT_PREFERENCE = ("test", "validation")

# The seed study's published numbers, (task, model label) -> {metric: value}, as the papers printed them.
SEED_REPORTED: dict[tuple[str, str], dict[str, float]] = {
    ("wmt14_en_de", "Transformer"): {"bleu": 27.3},  # Vaswani et al. 2017
    ("wmt14_en_de", "Transformer big"): {"bleu": 28.4},
    ("wmt14_en_de", "ConvS2S"): {"bleu": 25.16},  # Gehring et al. 2017
    ("wmt14_en_de", "LSTM + Luong (general)"): {"bleu": 20.9},  # Luong et al. 2015
    ("wmt14_en_fr", "Transformer"): {"bleu": 38.1},
    ("wmt14_en_fr", "Transformer big"): {"bleu": 41.8},
    ("wmt14_en_fr", "ConvS2S"): {"bleu": 40.51},
    ("wmt14_en_fr", "LSTM seq2seq"): {"bleu": 34.81},  # Sutskever et al. 2014, an ensemble of 5
    ("wmt14_en_fr", "LSTM + Bahdanau"): {"bleu": 26.75},  # Bahdanau et al. 2015, RNNsearch-50
    ("cnn_dailymail", "LSTM + Bahdanau"): {"rouge1": 31.33, "rouge2": 11.81, "rougeL": 28.83},  # See et al. 2017
    ("cnn_dailymail", "Transformer"): {"rouge1": 40.21, "rouge2": 17.76, "rougeL": 37.09},
    ("xsum", "LSTM + Bahdanau"): {"rouge1": 28.42, "rouge2": 8.77, "rougeL": 22.48},  # Narayan et al. 2018
    ("xsum", "Transformer"): {"rouge1": 29.41, "rouge2": 9.77, "rougeL": 23.01},
    # The offline CNN/DailyMail subset: the published scores on the full test set (11,490 articles), for orientation
    # (ROUGE-L as pyrouge computes it, summary-level: our rougeLsum). See et al. 2017 Table 1; the Transformer the
    # seed reports (TransformerAbs, Liu & Lapata 2019); Gehrmann et al. 2018's CopyTransformer.
    ("cnn_dailymail_subset", "Lead-3"): {"rouge1": 40.34, "rouge2": 17.70, "rougeLsum": 36.57},
    ("cnn_dailymail_subset", "LSTM + Bahdanau"): {"rouge1": 31.33, "rouge2": 11.81, "rougeLsum": 28.83},
    ("cnn_dailymail_subset", "LSTM + Bahdanau + pointer-generator"): {"rouge1": 36.44, "rouge2": 15.66,
                                                                        "rougeLsum": 33.42},
    ("cnn_dailymail_subset", "LSTM + Bahdanau + pointer-generator + coverage"): {"rouge1": 39.53, "rouge2": 17.28,
                                                                                   "rougeLsum": 36.38},
    ("cnn_dailymail_subset", "Transformer"): {"rouge1": 40.21, "rouge2": 17.76, "rougeLsum": 37.09},
    ("cnn_dailymail_subset", "Transformer + copy"): {"rouge1": 39.25, "rouge2": 17.54, "rougeLsum": 36.45},
    ("squad_v1", "BiLSTM reader"): {"exact_match": 67.7, "f1": 77.3},  # BiDAF, Seo et al. 2017
    ("squad_v1", "Transformer reader"): {"exact_match": 73.6, "f1": 82.7},  # QANet, Yu et al. 2018
    ("squad_v2", "BiLSTM reader"): {"exact_match": 59.8, "f1": 62.6},  # BiDAF-No-Answer, Rajpurkar et al. 2018
}

# Tasks that are a subset of a published test set: the published numbers beside them are the full set's
SUBSET_TASKS = ("cnn_dailymail_subset",)

KINDS = ("translation", "summarization", "extractive_qa", "mlm", "lm")
KIND_TITLES = {"translation": "Translation", "summarization": "Summarization", "extractive_qa": "Question answering",
               "mlm": "Masked-LM pre-training", "lm": "Language modelling"}
KIND_METRICS = {"translation": ("bleu", "meteor", "ter", "chrf"),
                "summarization": ("rouge1", "rouge2", "rougeL", "rougeLsum"),
                # SQuAD 2.0 adds which half carries the score, the official best F1 and the threshold applied
                "extractive_qa": ("exact_match", "f1", "HasAns_f1", "NoAns_f1", "best_f1", "no_answer_threshold"),
                "mlm": ("mlm_accuracy", "mlm_loss"),
                "lm": ("bits_per_byte", "lm_loss")}
HEADLINE = {"translation": "bleu", "summarization": "rougeL", "extractive_qa": "f1", "mlm": "mlm_accuracy",
            "lm": "bits_per_byte"}
# The synthetic tasks have one right answer per example: their sweeps and plots rank by exact match, not BLEU.
TASK_HEADLINE = {"dates": "exact_match", "reverse": "exact_match"}
METRIC_TITLES = {"bleu": "BLEU", "meteor": "METEOR", "ter": "TER", "chrf": "chrF", "rouge1": "ROUGE-1",
                 "rouge2": "ROUGE-2", "rougeL": "ROUGE-L", "rougeLsum": "ROUGE-Lsum", "exact_match": "EM", "f1": "F1",
                 "mlm_accuracy": "MLM accuracy", "mlm_loss": "MLM loss", "bits_per_byte": "bits/byte",
                 "lm_loss": "loss/token", "HasAns_f1": "HasAns F1", "NoAns_f1": "NoAns F1", "best_f1": "best F1",
                 "no_answer_threshold": "no-answer threshold"}
# Registered tasks (attnjax.data.catalogue.TASKS) and the synthetic ones, in the tables' column order; the synthetic
# seq2seq tasks are scored like translation.
TASK_KINDS = {
    "wmt14_en_de": "translation", "wmt14_de_en": "translation", "wmt14_en_fr": "translation",
    "wmt14_fr_en": "translation", "multi30k_en_de": "translation", "manythings_en_fr": "translation",
    "dates": "translation", "reverse": "translation",
    "cnn_dailymail": "summarization", "cnn_dailymail_subset": "summarization", "xsum": "summarization",
    "squad_v1": "extractive_qa", "squad_v1_dev_by_article": "extractive_qa", "squad_v2": "extractive_qa",
    "squad_v2_dev_by_article": "extractive_qa", "wikipedia_mlm": "mlm", "wikipedia_lm": "lm",
    "squad_v1_official": "extractive_qa", "squad_v2_with_v1_train": "extractive_qa", "squad_v1_official_text": "mlm",
}
LABEL_ORDER = ("Lead-3", "Always no answer", "LSTM seq2seq", "LSTM + Bahdanau", "LSTM + Bahdanau + pointer-generator",
               "LSTM + Bahdanau + pointer-generator + coverage", "LSTM + Luong (dot)", "LSTM + Luong (general)",
               "LSTM + Luong (concat)", "ConvS2S", "Transformer", "Transformer + copy", "Transformer big",
               "BiLSTM reader",
               "Transformer reader")

_REPOSITORY = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # experiments/ lives here

NOT_COMPUTED = "—"  # an evaluated run whose evaluation did not compute this metric (METEOR is opt-in)


# ---------------------------------------------------------------------------------------------------------------------
# Finding and reading runs


def find_runs(root: fs.PathLike) -> list[epath.Path]:
  """The run workdirs under ``root`` (``root`` itself if it is one), sorted by path, runs nested in a run's workdir
  included (the launcher's ``<point>/seed<N>``); ``checkpoints`` and ``tensorboard`` are not searched, and a
  Hugging Face directory that ``attnjax.export`` wrote (its ``attnjax_export.json`` beside its ``config.json``) is
  a model kept with the records, not a run.

  Raises:
    FileNotFoundError: ``root`` does not exist (the message names it).
    NotADirectoryError: ``root`` is a file.
  """
  base = fs.path(root)
  if not base.exists():
    raise FileNotFoundError(f"--runs directory {root} does not exist")
  if not base.is_dir():
    raise NotADirectoryError(f"--runs entry {root} is not a directory (nor an earlier report's results.json, whose "
                             "name ends in .json)")
  runs, stack = [], [base]
  while stack:
    directory = stack.pop()
    children = list(directory.iterdir())
    names = {child.name for child in children}
    if names & set(RUN_FILES) and EXPORTED not in names:  # an exported model's config.json is not a run's
      runs.append(directory)
    # not only below directories that are no run: the launcher puts a point's ``--seeds`` runs in <point>/seed<N>,
    # inside the point's own workdir when the point was first run without --seeds
    stack.extend(child for child in children
                 if child.name not in SKIPPED_DIRS and not child.name.startswith(".") and child.is_dir())
  return sorted(runs, key=str)


def _read_json_file(path: epath.Path) -> tuple[Any, bool]:
  """``(value, readable)``: ``(None, True)`` for a missing file; ``(None, False)`` for one that is not a JSON
  object (a half-written file, a wrong encoding)."""
  if not path.exists():
    return None, True
  try:
    value = json.loads(fs.read_text(path))
  except (ValueError, OSError):  # JSONDecodeError and UnicodeDecodeError are ValueErrors
    return None, False
  return (value, True) if isinstance(value, dict) else (None, False)


def _set_aside(path: epath.Path) -> list[dict]:
  """The entries of a workdir's record of damaged checkpoint steps set aside (a JSON list; [] if none or unreadable)."""
  try:
    value = json.loads(fs.read_text(path)) if path.exists() else []
  except (ValueError, OSError):
    return []
  return [entry for entry in value if isinstance(entry, dict)] if isinstance(value, list) else []


def _scores(metrics: dict | None) -> dict:
  return {key: value for key, value in (metrics or {}).items()
          if key in METRIC_TITLES and isinstance(value, (int, float)) and not isinstance(value, bool)}


def _metrics_file(workdir: epath.Path) -> epath.Path | None:
  files = {p.name[len("metrics."):-len(".json")]: p for p in workdir.glob("metrics.*.json")}
  for split in SPLIT_PREFERENCE:
    if split in files:
      return files[split]
  return files[sorted(files)[0]] if files else None


def model_label(model: dict) -> str:
  """The table's row label for a config's ``model`` section: "LSTM seq2seq", "LSTM + Bahdanau" (+ "pointer-generator"
  + "coverage"), "LSTM + Luong (general)", "ConvS2S", "Transformer" / "Transformer big" (d_model >= 1024) (+ "copy"),
  "BiLSTM reader", "Transformer reader", "Lead-3" and "Always no answer" (:mod:`attnjax.baselines`); the model name otherwise."""
  name = model.get("name")
  if name == "lead3":
    return "Lead-3"
  if name == "no_answer":
    return "Always no answer"
  if name == "transformer":
    label = "Transformer big" if (model.get("d_model") or 0) >= 1024 else "Transformer"
    return label + (" + copy" if model.get("copy") else "")
  if name == "rnn_seq2seq":
    cell = str(model.get("cell") or "lstm").upper()
    attention = model.get("attention")
    if not attention:
      return f"{cell} seq2seq"
    if attention == "bahdanau":
      return (f"{cell} + Bahdanau" + (" + pointer-generator" if model.get("copy") else "")
              + (" + coverage" if model.get("coverage") else ""))
    if str(attention).startswith("luong_"):
      return f"{cell} + Luong ({attention[len('luong_'):]})"
    return f"{cell} + {attention}"
  if name == "convs2s":
    return "ConvS2S"
  if name == "span_qa":
    encoder = model.get("encoder")
    return {"bilstm": "BiLSTM reader", "transformer": "Transformer reader", "bert": "BERT reader"}.get(
        encoder, f"{encoder} reader")
  if name == "bert_mlm":
    return "BERT (masked LM)"
  if name == "decoder_lm":
    return "Decoder-only LM"
  return str(name) if name else "unknown model"


def init_label(source: str) -> str:
  """A short name for a pre-trained encoder's source (``train.init_encoder_from``): a checkpoint directory's name
  (``all-MiniLM-L6-v2``), or for a launcher's workdir ``<root>/<task>/<experiment>/<sweep>/<point>`` the
  experiment (``wikipedia/bert_mlm``)."""
  parts = [p for p in str(source).rstrip("/").split("/") if p not in ("", ".")]
  if len(parts) >= 4 and parts[-2] == "single" and parts[-1] == "default":
    return "/".join(parts[-4:-2])
  return parts[-1] if parts else str(source)


BASELINE_MODELS = ("lead3", "no_answer")  # attnjax.baselines' models: no weights


def _label(model: dict | None, config: dict) -> str | None:
  """The row label: the model's, and for a fine-tuned encoder where its weights came from."""
  if not model:
    return None
  source = (config.get("train") or {}).get("init_encoder_from")
  if model.get("name") in BASELINE_MODELS:  # a baseline keeps the experiment's config it was scored for, not its weights
    source = None
  return model_label(model) + (f" (from {init_label(source)})" if source else "")


def _parse_value(text: str):
  try:
    return json.loads(text)
  except ValueError:
    return text


def _launch_overrides(launch: dict) -> dict:
  """``overrides`` plus the ``--config.KEY=VALUE`` items of ``extra_overrides``, as dotted key -> value."""
  overrides = dict(launch.get("overrides") or {})
  for item in launch.get("extra_overrides") or []:
    key, sep, value = str(item).partition("=")
    if sep and key.startswith("--config."):
      overrides[key[len("--config."):]] = _parse_value(value)
  return overrides


def experiment_path(experiment: str) -> str:
  """launch.json's ``experiment`` as a file path: relative to the repository root (where the launcher runs) whatever
  the directory the report runs in, so that its output is the same from any directory; then relative to the current
  directory (an experiment file outside the repository); as given where neither holds it."""
  if not experiment or os.path.isabs(experiment) or fs.is_url(experiment):
    return experiment
  for base in (_REPOSITORY, os.getcwd()):
    if os.path.isfile(os.path.join(base, experiment)):
      return os.path.join(base, experiment)
  return experiment


def _from_experiment(launch: dict) -> tuple[str | None, dict | None]:
  """``(task, model section)`` of a run with no config.json (pending, or failed at start-up): the config its
  experiment file builds (``launch.json``'s ``experiment``, as given to the launcher or from the repository root),
  with the run's ``--config`` overrides applied. ``(None, None)`` when the file cannot be loaded: the run is then
  listed among the runs the report cannot place."""
  from attnjax import config as config_lib  # pylint: disable=g-import-not-at-top
  path = experiment_path(launch.get("experiment") or "")
  if not path or not os.path.isfile(path):
    return None, None
  try:
    config = config_lib.experiment_module(path).get_config()
  except Exception as e:  # pylint: disable=broad-except
    logging.warning("report: could not load %s to place a run without config.json: %s", path, e)
    return None, None
  task = config.data.get("task")
  model = config.model.to_dict()
  for key, value in _launch_overrides(launch).items():
    if key == "data.task":
      task = value
    elif key.startswith("model."):
      model[key[len("model."):]] = value
  return task, model


def _kind(task: str | None, model: dict | None, scores: dict) -> str | None:
  if task in TASK_KINDS:
    return TASK_KINDS[task]
  if model and model.get("name") == "span_qa":
    return "extractive_qa"
  if any(key.startswith("rouge") for key in scores):
    return "summarization"
  if "bleu" in scores:
    return "translation"
  if "f1" in scores:
    return "extractive_qa"
  return None


def _relative(path: epath.Path, root: epath.Path) -> str:
  text, base = str(path), str(root).rstrip("/")
  if text == base:
    return path.name
  return text[len(base) + 1:] if text.startswith(base + "/") else text


def _run_name(directory: epath.Path, root: fs.PathLike | None, launch: dict) -> str:
  """The run's path under its ``--runs`` entry; a run given as its own entry keeps the launcher's name
  (``<experiment>/<sweep>/<point>``, where its workdir ends so), not just its last directory."""
  if root is None:
    return directory.name
  if str(directory).rstrip("/") == str(fs.path(root)).rstrip("/") and launch.get("experiment_name"):
    name = f"{launch['experiment_name']}/{launch.get('sweep') or 'single'}/{launch.get('point') or 'default'}"
    if str(directory).rstrip("/").endswith("/" + name):
      return name
  return _relative(directory, fs.path(root))


def read_run(workdir: fs.PathLike, root: fs.PathLike | None = None, *, curves: bool = True) -> dict[str, Any]:
  """One run's record (JSON-serialisable), as ``results.json`` lists it.

  Args:
    workdir: the run workdir (a local path or a URL).
    root: the ``--runs`` entry it was found under; ``run`` is the path relative to it.
    curves: also read the TensorBoard ``eval/*`` scalars into ``eval_curves``.

  Returns:
    ``{"run", "workdir", "experiment", "experiment_name", "sweep", "point", "overrides", "target", "commit", "start",
    "end", "seed" (config.json's), "parameters" (all of the model's, or None), "tokens_per_s" (median training
    throughput from TensorBoard, the first logging window left out), "status" (launch.json's, or None), "returncode", "wall_seconds", "task", "kind"
    ("translation" | "summarization" | "extractive_qa" | None), "model" (config's model section), "label", "headline",
    "split", "metrics_file", "step", "steps", "examples", "scores" ({metric: number}), "state", "unreadable" ([file
    names]), "launch", "config", "metrics" (the files as read), "other_splits" ({split: scores} of the other
    metrics files), "eval_curves" ({tag: [[step, value], ...]}), "checkpoints_set_aside" (the damaged checkpoint
    steps a restart set aside: ``checkpoints.unreadable/set_aside.json``'s entries)}``. ``state`` is what the
    tables show: "evaluated" (the scores), else "running", "pending", "failed", "no evaluation" or "unreadable:
    <file>[, <file>]".
  """
  directory = fs.path(workdir)
  launch, config, metrics_path, metrics, unreadable = _run_files(directory)
  scores = _scores(metrics)
  other_splits = _other_splits(directory, metrics_path)
  task = (config.get("data") or {}).get("task")
  model = config.get("model") if isinstance(config.get("model"), dict) else None
  if launch and (task is None or model is None):
    guessed_task, guessed_model = _from_experiment(launch)
    task, model = task or guessed_task, model or guessed_model
  kind = _kind(task, model, scores)

  status = launch.get("status")
  state = _state(unreadable, status, metrics)

  split = None
  if metrics_path is not None:
    split = (metrics or {}).get("split") or metrics_path.name[len("metrics."):-len(".json")]
  record = {
      "run": _run_name(directory, root, launch),
      "workdir": str(directory),
      **{key: launch.get(key) for key in ("experiment", "experiment_name", "sweep", "point", "overrides", "target",
                                          "commit", "start", "end")},
      "seed": config.get("seed", launch.get("seed")),
      "status": status, "returncode": launch.get("returncode"), "wall_seconds": launch.get("wall_seconds"),
      "task": task, "kind": kind, "model": model, "label": _label(model, config),
      "headline": TASK_HEADLINE.get(task, HEADLINE.get(kind)),
      "split": split, "metrics_file": metrics_path.name if metrics_path is not None else None,
      "step": (metrics or {}).get("step"), "steps": (metrics or {}).get("steps"),
      "examples": (metrics or {}).get("examples"), "scores": scores,
      "state": state, "unreadable": unreadable, "launch": launch or None, "config": config or None,
      "metrics": metrics, "other_splits": other_splits, "eval_curves": {},
  }
  record["target"] = record["target"] or config.get("target")
  record["parameters"] = _parameters(config, directory, record["run"])
  record["trained_step"], record["train_seconds"] = _training(directory)
  record["checkpoints_set_aside"] = _set_aside(directory / "checkpoints.unreadable" / "set_aside.json")
  record["tokens_per_s"] = None
  if curves:
    record["eval_curves"], record["tokens_per_s"] = _curves(directory)
  return record


def _run_files(directory: epath.Path):
  """``(launch.json, config.json, the metrics file's path, its contents, the unreadable files' names)``; a missing
  JSON file reads as ``{}`` (None for the metrics), a damaged one is named."""
  unreadable = []
  launch, ok = _read_json_file(directory / "launch.json")
  if not ok:
    unreadable.append("launch.json")
  config, ok = _read_json_file(directory / "config.json")
  if not ok:
    unreadable.append("config.json")
  metrics_path = _metrics_file(directory)
  metrics = None
  if metrics_path is not None:
    metrics, ok = _read_json_file(metrics_path)
    if not ok:
      unreadable.append(metrics_path.name)
  return launch or {}, config or {}, metrics_path, metrics, unreadable


def _other_splits(directory: epath.Path, metrics_path) -> dict[str, dict]:
  """The scores of the other ``metrics.<split>.json`` files (a second test set, longer rows): split -> scores."""
  out = {}
  for path in sorted(directory.glob("metrics.*.json"), key=lambda p: p.name):
    if metrics_path is not None and path.name != metrics_path.name:
      other, ok = _read_json_file(path)
      if ok and other:
        out[path.name[len("metrics."):-len(".json")]] = _scores(other)  # test2017; validation.len1024
  return out


def _state(unreadable: list[str], status: str | None, metrics) -> str:
  """What the tables show for a run (see :func:`read_run`)."""
  if unreadable:
    return "unreadable: " + ", ".join(unreadable)
  if status in ("running", "pending", "failed"):
    return status  # a metrics file next to it belongs to an earlier attempt, not to this one's result
  return "evaluated" if metrics is not None else "no evaluation"


def _curves(directory: epath.Path):
  """``(eval_curves, tokens_per_s)`` from the run's TensorBoard scalars: every ``eval/*`` curve, and the median
  training throughput with the first logging window (which compiles) left out."""
  scalars = read_scalars(directory / "tensorboard")
  curves = {tag: [[step, value] for step, value in points] for tag, points in scalars.items()
            if tag.startswith("eval/")}
  speeds = [value for _, value in scalars.get("train/tokens_per_s", [])][1:]
  return curves, (statistics.median(speeds) if speeds else None)


def _training(workdir: epath.Path) -> tuple[int | None, float | None]:
  """``(step, seconds)``: the newest checkpoint's step and the training time it keeps (``train_seconds``, summed over
  the run's restarts, in the JSON ``meta`` item of :mod:`attnjax.runtime.checkpointing`); None where unknown."""
  steps = [int(p.name) for p in (workdir / "checkpoints").glob("*") if p.name.isdigit()]
  if not steps:
    return None, None
  return max(steps), checkpoint_seconds(workdir, max(steps))


def checkpoint_seconds(workdir: fs.PathLike, step: int) -> float | None:
  """The training time (over restarts) a run's checkpoint of ``step`` keeps, or None."""
  meta, _ = _read_json_file(fs.path(workdir) / "checkpoints" / str(step) / "meta" / "metadata")
  seconds = (meta or {}).get("train_seconds")
  return float(seconds) if isinstance(seconds, (int, float)) and not isinstance(seconds, bool) else None


def _parameters(config: dict, workdir: epath.Path, run: str) -> int | None:
  """All parameters of the run's sequence-to-sequence model or language model (embeddings included) with the
  vocabulary the run left in its workdir (else ``data.vocab_size``; the larger side for both), or None (span readers,
  or a model that cannot be built here: reason logged)."""
  model = config.get("model") if isinstance(config.get("model"), dict) else None
  if not model or model.get("name") not in ("transformer", "rnn_seq2seq", "convs2s", "decoder_lm"):
    return None
  from attnjax.report.scaling import non_embedding_params  # pylint: disable=g-import-not-at-top
  try:
    vocab_size = None
    if any(workdir.glob("*.model")) or any(workdir.glob("*vocab*.json")):
      from attnjax import config as config_lib  # pylint: disable=g-import-not-at-top
      from attnjax import families  # pylint: disable=g-import-not-at-top
      vocabularies = families.load_vocabularies(config_lib.load_config(workdir).data, str(workdir))
      vocab_size = max(vocabularies.src.size, vocabularies.tgt.size)
    return non_embedding_params(config, embeddings=True, vocab_size=vocab_size)
  except Exception as e:  # pylint: disable=broad-except  (a column of the report: never its failure)
    logging.warning("report: %s: cannot count its parameters (%s: %s)", run, type(e).__name__, e)
    return None


ARCHIVE_SUFFIX = ".json"


def read_archive(path: fs.PathLike) -> list[dict[str, Any]]:
  """The run records of an earlier report's ``results.json``, each marked ``"archived": path``.

  A study outlives the disks it ran on: a TPU VM's local workdirs, or a CPU machine's, are gone when the machine is,
  while the report they produced is committed. Its records carry everything the tables and plots need (scores, steps,
  tokens/s, validation curves, and, from reports written since they existed, the per-length scores of
  :mod:`attnjax.report.length`), so they are reported again as they were, never re-read from their workdirs.

  Raises:
    FileNotFoundError: ``path`` does not exist.
    ValueError: it is not a report's ``results.json`` (``{"roots": [...], "runs": [record, ...]}``); the message names
      the file and, for a bad record, its index.
  """
  if not fs.exists(path):
    raise FileNotFoundError(f"--runs archive {path} does not exist")
  try:
    archive = json.loads(fs.read_text(path))
  except ValueError as e:
    raise ValueError(f"--runs archive {path} is not JSON ({e})") from None
  if not isinstance(archive, dict) or not isinstance(archive.get("runs"), list):
    raise ValueError(f"--runs archive {path} is not a report's results.json (no \"runs\" list)")
  records = []
  for i, record in enumerate(archive["runs"]):
    if not isinstance(record, dict) or not isinstance(record.get("run"), str) or "state" not in record:
      raise ValueError(f"--runs archive {path}: runs[{i}] is not a run record (a dict with \"run\" and \"state\")")
    records.append({**record, "archived": record.get("archived") or str(path)})
  return records


# What a budgeted run measured about its own training, which an exact replay of it (below) does not re-measure.
_BUDGET_FIELDS = ("tokens_per_s", "wall_seconds", "start", "end", "commit")


def _same_scores(a: dict | None, b: dict | None) -> bool:
  """Every score of ``a`` is in ``b`` with the same value (to float64 rounding of a JSON round trip)."""
  if not a or not b:
    return False
  return all(isinstance(v, (int, float)) and isinstance(b.get(k), (int, float)) and abs(v - b[k]) <= 1e-9 * max(1, abs(v))
             for k, v in a.items())


def exact_replay(live: dict[str, Any], archived: dict[str, Any]) -> bool:
  """Whether ``live`` reproduced ``archived``: evaluated at the same step with every archived score, on the headline
  split and every other split, equal. Training is deterministic, so a run replayed from the same seed to the step
  count its wall-clock budget reached (``--config.train.steps=N --config.train.time_limit_minutes=0``) decodes the
  same hypotheses; equal scores to the last digit are the evidence. The live run must have started at another time
  than the archived one: a workdir still on disk that the archive recorded is that run read again, not a replay."""
  if not live.get("start") or live.get("start") == archived.get("start"):
    return False
  if live.get("state") != "evaluated" or live.get("step") != archived.get("step") or not archived.get("scores"):
    return False
  if not _same_scores(archived["scores"], live.get("scores")):
    return False
  return all(_same_scores(scores, (live.get("other_splits") or {}).get(split))
             for split, scores in (archived.get("other_splits") or {}).items())


def _merge_replay(live: dict[str, Any], archived: dict[str, Any]) -> dict[str, Any]:
  """The live replay's record (its scores include what the archive lacks, e.g. METEOR) with the budgeted run's
  throughput, wall time, dates and commit, and ``"replay_of"`` naming the archive."""
  merged = {**live, **{key: archived.get(key) for key in _BUDGET_FIELDS}}
  merged["replay_of"] = {"archived": archived["archived"], "start": archived.get("start"),
                         "replay_start": live.get("start"), "replay_commit": live.get("commit"),
                         "replay_tokens_per_s": live.get("tokens_per_s"), "replay_wall_seconds": live.get("wall_seconds")}
  return merged


def collect(roots: Iterable[fs.PathLike], *, curves: bool = True) -> list[dict[str, Any]]:
  """:func:`read_run` for every run under every root, and the records of the roots that end in ``.json``: earlier
  reports' ``results.json`` (:func:`read_archive`); sorted by run path (a stable sort: roots' order among equal paths).

  A run found in a workdir supersedes an archived record of the same ``run`` path (it is the newer attempt: a run the
  archive saw ``running``, or the same point trained again, once evaluated), and a later archive's record an earlier
  one's. A run that
  reproduced its archived record exactly (:func:`exact_replay`) is that run again: it keeps the archive's training
  throughput, wall time and dates (what the budget measured; the replay ran under other load) and adds the replay's
  other scores, with ``"replay_of"`` saying so.

  Raises:
    FileNotFoundError / NotADirectoryError: a root that does not exist or is a file (named).
    ValueError: an archive that is not a report's ``results.json``.
  """
  live, archived = [], {}
  for root in roots:
    if str(root).endswith(ARCHIVE_SUFFIX):
      records = read_archive(root)
      paths = collections.Counter(record["run"] for record in records)
      for record in records:
        if paths[record["run"]] > 1 and record.get("experiment_name"):
          # a report over one launch root per experiment: its runs' paths repeat (single/default), and would replace
          # one another; the launcher's layout under one root tells them apart
          record["run"] = f"{record['experiment_name']}/{record['run']}"
        archived.pop(record["run"], None)
        archived[record["run"]] = record
      continue
    workdirs = find_runs(root)
    if not workdirs:
      logging.warning("no run workdir (a directory with launch.json or config.json) under %s", root)
    live.extend(read_run(workdir, root, curves=curves) for workdir in workdirs)
  # a workdir training the point again (running, pending, failed) does not replace the archive's scores before it has
  # its own: a report written meanwhile would otherwise drop them from its results.json
  unfinished = {r["run"] for r in live if r["state"] != "evaluated" and archived.get(r["run"], {}).get("state") == "evaluated"}
  if unfinished:
    logging.info("report: %d run(s) training again are not evaluated yet; their archived records stand: %s",
                 len(unfinished), ", ".join(sorted(unfinished)))
    live = [r for r in live if r["run"] not in unfinished]
  seen = {record["run"] for record in live}
  superseded = sorted(run for run in archived if run in seen)
  if superseded:
    logging.info("report: %d archived run(s) superseded by their workdirs: %s", len(superseded), ", ".join(superseded))
  replays = [run for run in superseded
             if exact_replay(next(r for r in live if r["run"] == run), archived[run])]
  if replays:
    logging.info("report: %d of them reproduced their archived scores exactly (replays; the archive's throughput and "
                 "wall time kept): %s", len(replays), ", ".join(replays))
    live = [_merge_replay(r, archived[r["run"]]) if r["run"] in replays else r for r in live]
  # by run path, wherever each record came from, so that a report (and its results.json) lists the same runs in the
  # same order whether a run is read from an archive, from its workdir or replayed
  return sorted([record for run, record in archived.items() if run not in seen] + live, key=lambda r: r["run"])


def evaluation_file(record: dict, key: str):
  """The file an evaluation recorded under ``metrics[key]`` (its hypotheses, its per-question scores), or the same
  file name inside the run's workdir when the recorded path is gone (the workdir moved); None if neither exists."""
  path = (record.get("metrics") or {}).get(key)
  if not path:
    return None
  if fs.exists(path):
    return path
  candidate = fs.join(record["workdir"], fs.path(path).name)
  return candidate if fs.exists(candidate) else None
