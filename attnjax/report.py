"""The study's results, gathered from run workdirs: markdown tables beside the seed's numbers, ablations and plots.

    python -m attnjax.report --runs=gs://B/runs/study[,runs/local_run,...] --out=gs://B/report

Every ``--runs`` entry is a launch root (searched recursively, never inside ``checkpoints/`` or ``tensorboard/``) or
one run workdir. A run workdir is a directory holding ``launch.json`` (written by the launcher) and/or
``config.json`` (written by ``attnjax.train``); the search does not descend into a run. Read from each run:

* ``launch.json``: ``{"experiment", "experiment_name", "sweep" (or null), "point", "overrides", "extra_overrides",
  "target", "commit", "commands", "start", "end", "status" ("pending" | "running" | "done" | "failed"),
  "returncode", "wall_seconds"}``.
* ``config.json``: the run's config (``data.task``, ``model.name`` / ``attention`` / ``d_model`` / ``encoder``,
  ``target``).
* ``metrics.<split>.json``: what ``attnjax.evaluate`` returned (``step``, ``steps``, ``examples``, ``bleu``, ``chrf``,
  ``ter``, ``meteor``, ``rouge1`` ..., ``exact_match``, ``f1`` ...). ``test`` is preferred, then ``validation`` (SQuAD
  has no test split), then any other split.
* ``tensorboard/events.out.tfevents.*``: the ``eval/*`` scalars, read without TensorFlow (:func:`read_scalars`).

Written into ``--out`` (a local directory or a URL), all through :mod:`attnjax.fs`:

* ``results.md`` (also printed): one table per task kind (translation, summarization, question answering), a row
  per run and a column per (task, metric), each of our scores (2 decimals) followed by the seed's reported score
  ``(seed X)`` where :data:`SEED_REPORTED` has one, and the run's budget (steps, wall time, hardware, sweep point);
  then one table per ablation sweep; then runs that fit no table. A run without numbers shows why in its cells:
  ``running``, ``pending``, ``failed``, ``no evaluation`` or ``unreadable: <file>``; never 0 or an empty cell.
* ``ablation_<sweep>.png``: the headline metric (BLEU / ROUGE-L / F1) against the sweep's points, a point without a
  score drawn as a gap with its state written in, not as 0.
* ``curves_<experiment_name, "/" -> "_">.png``: validation headline metric and eval loss against the step, one line
  per run.
* ``results.json``: ``{"roots": [...], "runs": [record, ...]}``, one :func:`read_run` record per run.
"""

from __future__ import annotations

import datetime
import io
import json
import math
import re
import struct
from typing import Any, Iterable, Iterator

from absl import app, flags, logging
from etils import epath

from attnjax import fs

RUN_FILES = ("launch.json", "config.json")
SKIPPED_DIRS = ("checkpoints", "tensorboard")  # large, and never hold a run of their own
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
    ("squad_v1", "BiLSTM reader"): {"exact_match": 67.7, "f1": 77.3},  # BiDAF, Seo et al. 2017
    ("squad_v1", "Transformer reader"): {"exact_match": 73.6, "f1": 82.7},  # QANet, Yu et al. 2018
    ("squad_v2", "BiLSTM reader"): {"exact_match": 59.8, "f1": 62.6},  # BiDAF-No-Answer, Rajpurkar et al. 2018
}

KINDS = ("translation", "summarization", "extractive_qa")
KIND_TITLES = {"translation": "Translation", "summarization": "Summarization", "extractive_qa": "Question answering"}
KIND_METRICS = {"translation": ("bleu", "meteor", "ter", "chrf"), "summarization": ("rouge1", "rouge2", "rougeL"),
                "extractive_qa": ("exact_match", "f1")}
HEADLINE = {"translation": "bleu", "summarization": "rougeL", "extractive_qa": "f1"}
METRIC_TITLES = {"bleu": "BLEU", "meteor": "METEOR", "ter": "TER", "chrf": "chrF", "rouge1": "ROUGE-1",
                 "rouge2": "ROUGE-2", "rougeL": "ROUGE-L", "rougeLsum": "ROUGE-Lsum", "exact_match": "EM", "f1": "F1"}
# Registered tasks (attnjax.data.tasks.TASKS) and the synthetic ones, in the tables' column order; the synthetic
# seq2seq tasks are scored like translation.
TASK_KINDS = {
    "wmt14_en_de": "translation", "wmt14_de_en": "translation", "wmt14_en_fr": "translation",
    "wmt14_fr_en": "translation", "multi30k_en_de": "translation", "dates": "translation", "reverse": "translation",
    "cnn_dailymail": "summarization", "xsum": "summarization",
    "squad_v1": "extractive_qa", "squad_v1_dev_by_article": "extractive_qa", "squad_v2": "extractive_qa",
}
LABEL_ORDER = ("LSTM seq2seq", "LSTM + Bahdanau", "LSTM + Luong (dot)", "LSTM + Luong (general)",
               "LSTM + Luong (concat)", "ConvS2S", "Transformer", "Transformer big", "BiLSTM reader",
               "Transformer reader")

# A run that never got as far as writing config.json (pending, or failed at start-up) is placed from its experiment
# file's name (and its overrides): the model each of experiments/<task>/<stem>.py builds.
_EXPERIMENT_MODELS = {
    "transformer": {"name": "transformer"}, "transformer_base": {"name": "transformer", "d_model": 512},
    "transformer_big": {"name": "transformer", "d_model": 1024}, "transformer_small": {"name": "transformer"},
    "dates_transformer": {"name": "transformer"}, "convs2s": {"name": "convs2s"},
    "lstm_seq2seq": {"name": "rnn_seq2seq", "attention": None},
    "lstm_bahdanau": {"name": "rnn_seq2seq", "attention": "bahdanau"},
    "lstm_attention": {"name": "rnn_seq2seq", "attention": "bahdanau"},
    "dates_lstm_bahdanau": {"name": "rnn_seq2seq", "attention": "bahdanau"},
    "lstm_luong": {"name": "rnn_seq2seq", "attention": "luong_general"},
    "bilstm_reader": {"name": "span_qa", "encoder": "bilstm"},
    "span_qa_bilstm": {"name": "span_qa", "encoder": "bilstm"},
    "transformer_reader": {"name": "span_qa", "encoder": "transformer"},
    "span_qa_transformer": {"name": "span_qa", "encoder": "transformer"},
}
_EXPERIMENT_TASKS = {"multi30k": "multi30k_en_de", "squad": "squad_v1_dev_by_article", "dates_transformer": "dates",
                     "dates_lstm_bahdanau": "dates"}

NOT_COMPUTED = "—"  # an evaluated run whose evaluation did not compute this metric (METEOR is opt-in)

_RUNS = flags.DEFINE_list("runs", None, "launch roots or run workdirs (local paths or URLs), comma-separated")
_OUT = flags.DEFINE_string("out", None, "directory for results.md, results.json and the plots (a local path or URL)")


# ---------------------------------------------------------------------------------------------------------------------
# TensorBoard events without TensorFlow


def _crc32c(data: bytes) -> int:
  try:
    import google_crc32c  # pylint: disable=g-import-not-at-top  (C implementation, installed with gcsfs)
    return google_crc32c.value(data)
  except ImportError:
    from tensorboardX.crc32c import crc32c  # pylint: disable=g-import-not-at-top
    return crc32c(data)


def _masked_crc(data: bytes) -> int:
  """TFRecord's masked CRC-32C: rotated right by 15 bits plus a constant."""
  crc = _crc32c(data)
  return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def read_records(data: bytes, source: str = "") -> Iterator[bytes]:
  """The payloads of a TFRecord stream: each record is ``uint64 length, uint32 masked_crc(length), data[length],
  uint32 masked_crc(data)``, little-endian.

  An incomplete last record (a writer still flushing, or a copy cut short) ends the stream quietly.

  Raises:
    ValueError: a checksum does not match (names ``source`` and the byte offset); records before it were yielded.
  """
  offset, size = 0, len(data)
  while size - offset >= 12:
    header = data[offset:offset + 8]
    (length,) = struct.unpack("<Q", header)
    (length_crc,) = struct.unpack("<I", data[offset + 8:offset + 12])
    if _masked_crc(header) != length_crc:
      raise ValueError(f"{source}: corrupt record length at byte {offset}")
    end = offset + 12 + length + 4
    if end > size:
      return
    payload = data[offset + 12:end - 4]
    (data_crc,) = struct.unpack("<I", data[end - 4:end])
    if _masked_crc(payload) != data_crc:
      raise ValueError(f"{source}: corrupt record data at byte {offset}")
    yield payload
    offset = end


def _scalar(value) -> float | None:
  """A summary value's number: ``simple_value`` (tensorboardX's default) or a one-element float tensor."""
  kind = value.WhichOneof("value")
  if kind == "simple_value":
    return float(value.simple_value)
  if kind == "tensor":
    numbers = list(value.tensor.float_val) or list(value.tensor.double_val)
    return float(numbers[0]) if len(numbers) == 1 else None
  return None


def read_scalars(logdir: fs.PathLike, tags: Iterable[str] | None = None) -> dict[str, list[tuple[int, float]]]:
  """The scalars of every ``events.out.tfevents.*`` file in ``logdir`` (not recursive; a local path or a URL).

  Args:
    logdir: a TensorBoard log directory, e.g. ``<workdir>/tensorboard``.
    tags: keep only these tags (e.g. ``("eval/bleu", "eval/loss")``); None keeps every scalar.

  Returns:
    tag -> ``[(step, value), ...]`` sorted by step, one value per step. A resumed run logs some steps again, in a
    newer file: files are read in name order (tensorboardX names them by creation time) and the last value wins. An
    empty dict when ``logdir`` does not exist. A corrupt file is reported as a warning and read up to the damage.
  """
  from tensorboardX.proto import event_pb2  # pylint: disable=g-import-not-at-top
  directory = fs.path(logdir)
  wanted = None if tags is None else set(tags)
  by_tag: dict[str, dict[int, float]] = {}
  if not directory.is_dir():
    return {}
  for events_file in sorted(directory.glob("events.out.tfevents.*"), key=lambda p: p.name):
    try:
      for payload in read_records(fs.read_bytes(events_file), source=str(events_file)):
        event = event_pb2.Event.FromString(payload)
        if not event.HasField("summary"):
          continue
        for value in event.summary.value:
          if wanted is not None and value.tag not in wanted:
            continue
          number = _scalar(value)
          if number is not None:
            by_tag.setdefault(value.tag, {})[int(event.step)] = number
    except ValueError as e:  # a corrupt record (or an undecodable event): keep what came before it
      logging.warning("TensorBoard events: %s", e)
  return {tag: sorted(steps.items()) for tag, steps in sorted(by_tag.items())}


# ---------------------------------------------------------------------------------------------------------------------
# Finding and reading runs


def find_runs(root: fs.PathLike) -> list[epath.Path]:
  """The run workdirs under ``root`` (``root`` itself if it is one), sorted by path.

  Raises:
    FileNotFoundError: ``root`` does not exist (the message names it).
    NotADirectoryError: ``root`` is a file.
  """
  base = fs.path(root)
  if not base.exists():
    raise FileNotFoundError(f"--runs directory {root} does not exist")
  if not base.is_dir():
    raise NotADirectoryError(f"--runs entry {root} is not a directory")
  runs, stack = [], [base]
  while stack:
    directory = stack.pop()
    children = list(directory.iterdir())
    if any(child.name in RUN_FILES for child in children):
      runs.append(directory)
      continue  # a run's own subdirectories (checkpoints, vocabularies) hold no further runs
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


def _metrics_file(workdir: epath.Path) -> epath.Path | None:
  files = {p.name[len("metrics."):-len(".json")]: p for p in workdir.glob("metrics.*.json")}
  for split in SPLIT_PREFERENCE:
    if split in files:
      return files[split]
  return files[sorted(files)[0]] if files else None


def model_label(model: dict) -> str:
  """The table's row label for a config's ``model`` section: "LSTM seq2seq", "LSTM + Bahdanau", "LSTM + Luong
  (general)", "ConvS2S", "Transformer" / "Transformer big" (d_model >= 1024), "BiLSTM reader", "Transformer
  reader"; the model name otherwise."""
  name = model.get("name")
  if name == "transformer":
    return "Transformer big" if (model.get("d_model") or 0) >= 1024 else "Transformer"
  if name == "rnn_seq2seq":
    cell = str(model.get("cell") or "lstm").upper()
    attention = model.get("attention")
    if not attention:
      return f"{cell} seq2seq"
    if attention == "bahdanau":
      return f"{cell} + Bahdanau"
    if str(attention).startswith("luong_"):
      return f"{cell} + Luong ({attention[len('luong_'):]})"
    return f"{cell} + {attention}"
  if name == "convs2s":
    return "ConvS2S"
  if name == "span_qa":
    encoder = model.get("encoder")
    return {"bilstm": "BiLSTM reader", "transformer": "Transformer reader"}.get(encoder, f"{encoder} reader")
  return str(name) if name else "unknown model"


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


def _from_experiment(launch: dict) -> tuple[str | None, dict | None]:
  """``(task, model section)`` guessed from the experiment's file name and overrides, for a run with no config."""
  name = launch.get("experiment_name") or re.sub(r"^.*experiments/|\.py$", "", launch.get("experiment") or "")
  if not name:
    return None, None
  parts = name.split("/")
  task = parts[0] if parts[0] in TASK_KINDS else _EXPERIMENT_TASKS.get(parts[0])
  model = dict(_EXPERIMENT_MODELS.get(parts[-1], {}))
  for key, value in _launch_overrides(launch).items():
    if key.startswith("model."):
      model[key[len("model."):]] = value
  return task, (model or None)


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


def read_run(workdir: fs.PathLike, root: fs.PathLike | None = None, *, curves: bool = True) -> dict[str, Any]:
  """One run's record (JSON-serialisable), as ``results.json`` lists it.

  Args:
    workdir: the run workdir (a local path or a URL).
    root: the ``--runs`` entry it was found under; ``run`` is the path relative to it.
    curves: also read the TensorBoard ``eval/*`` scalars into ``eval_curves``.

  Returns:
    ``{"run", "workdir", "experiment", "experiment_name", "sweep", "point", "overrides", "target", "commit", "start",
    "end", "status" (launch.json's, or None), "returncode", "wall_seconds", "task", "kind" ("translation" |
    "summarization" | "extractive_qa" | None), "model" (config's model section), "label", "headline", "split",
    "metrics_file", "step", "steps", "examples", "scores" ({metric: number}), "state", "unreadable" ([file names]),
    "launch", "config", "metrics" (the files as read), "eval_curves" ({tag: [[step, value], ...]})}``. ``state`` is what the
    tables show: "evaluated" (the scores), else "running", "pending", "failed", "no evaluation" or "unreadable:
    <file>[, <file>]".
  """
  directory = fs.path(workdir)
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
  launch, config = launch or {}, config or {}
  scores = {key: value for key, value in (metrics or {}).items()
            if key in METRIC_TITLES and isinstance(value, (int, float)) and not isinstance(value, bool)}

  task = (config.get("data") or {}).get("task")
  model = config.get("model") if isinstance(config.get("model"), dict) else None
  if launch and (task is None or model is None):
    guessed_task, guessed_model = _from_experiment(launch)
    task, model = task or guessed_task, model or guessed_model
  kind = _kind(task, model, scores)

  status = launch.get("status")
  if unreadable:
    state = "unreadable: " + ", ".join(unreadable)
  elif status in ("running", "pending", "failed"):
    state = status  # a metrics file next to it belongs to an earlier attempt, not to this one's result
  elif metrics is not None:
    state = "evaluated"
  else:
    state = "no evaluation"

  split = None
  if metrics_path is not None:
    split = (metrics or {}).get("split") or metrics_path.name[len("metrics."):-len(".json")]
  record = {
      "run": _relative(directory, fs.path(root)) if root is not None else directory.name,
      "workdir": str(directory),
      **{key: launch.get(key) for key in ("experiment", "experiment_name", "sweep", "point", "overrides", "target",
                                          "commit", "start", "end")},
      "status": status, "returncode": launch.get("returncode"), "wall_seconds": launch.get("wall_seconds"),
      "task": task, "kind": kind, "model": model, "label": model_label(model) if model else None,
      "headline": HEADLINE.get(kind),
      "split": split, "metrics_file": metrics_path.name if metrics_path is not None else None,
      "step": (metrics or {}).get("step"), "steps": (metrics or {}).get("steps"),
      "examples": (metrics or {}).get("examples"), "scores": scores,
      "state": state, "unreadable": unreadable, "launch": launch or None, "config": config or None,
      "metrics": metrics, "eval_curves": {},
  }
  record["target"] = record["target"] or config.get("target")
  if curves:
    scalars = read_scalars(directory / "tensorboard")
    record["eval_curves"] = {tag: [[step, value] for step, value in points] for tag, points in scalars.items()
                             if tag.startswith("eval/")}
  return record


def collect(roots: Iterable[fs.PathLike], *, curves: bool = True) -> list[dict[str, Any]]:
  """:func:`read_run` for every run under every root (in root order, then path order).

  Raises:
    FileNotFoundError / NotADirectoryError: a root that does not exist or is a file (named).
  """
  records = []
  for root in roots:
    workdirs = find_runs(root)
    if not workdirs:
      logging.warning("no run workdir (a directory with launch.json or config.json) under %s", root)
    records.extend(read_run(workdir, root, curves=curves) for workdir in workdirs)
  return records


# ---------------------------------------------------------------------------------------------------------------------
# Markdown


def format_score(value: float) -> str:
  return f"{value:.2f}"


def format_seed(value: float) -> str:
  return f"{value:g}"  # as the paper printed it: 27.3, 25.16


def format_wall(seconds) -> str:
  """``h:mm`` (rounded to the minute), "—" if unknown."""
  if not isinstance(seconds, (int, float)) or isinstance(seconds, bool) or not math.isfinite(seconds):
    return "—"
  minutes = int(round(seconds / 60))
  return f"{minutes // 60}:{minutes % 60:02d}"


def _format_steps(record: dict) -> str:
  if record["state"] != "evaluated" or record["step"] is None:
    return "—"
  steps = record["steps"]
  if isinstance(steps, list) and len(steps) > 1:
    return f"{record['step']} (avg of {len(steps)})"  # averaged parameters (--average_last)
  return str(record["step"])


def _cell(record: dict, metric: str) -> str:
  """Our score (or why there is none), then the seed's reported score for that task, model and metric."""
  if record["state"] == "evaluated":
    value = record["scores"].get(metric)
    text = NOT_COMPUTED if value is None else format_score(value)
  else:
    text = record["state"]
  seed = SEED_REPORTED.get((record["task"], record["label"]), {}).get(metric)
  return text if seed is None else f"{text} (seed {format_seed(seed)})"


def _escape(text) -> str:
  return "—" if text is None or text == "" else str(text).replace("|", "\\|").replace("\n", " ")


def _table(header: list[str], rows: list[list[str]]) -> str:
  lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
  lines.extend("| " + " | ".join(row) + " |" for row in rows)
  return "\n".join(lines)


def _start_key(record: dict) -> float:
  """Seconds since the epoch of launch.json's ``start`` (ISO-8601; a naive time is local), +inf if unknown."""
  start = record.get("start")
  if not start:
    return math.inf
  try:
    return datetime.datetime.fromisoformat(str(start).replace("Z", "+00:00")).timestamp()
  except ValueError:
    return math.inf


def _order(sequence: Iterable[str], canonical: Iterable[str]) -> list[str]:
  canonical = list(canonical)
  return sorted(set(sequence), key=lambda x: (canonical.index(x) if x in canonical else len(canonical), x))


def _columns(kind: str, task: str, records: list[dict]) -> list[str]:
  """The metrics a task's column group shows: the kind's own that a run computed or the seed reports, in the seed
  tables' order (plus exact match for tasks scored by it, such as the synthetic ones)."""
  computed = {metric for r in records if r["task"] == task for metric in r["scores"]}
  reported = {metric for (t, _), values in SEED_REPORTED.items() if t == task for metric in values}
  metrics = [m for m in KIND_METRICS[kind] if m in computed | reported]
  if "exact_match" in computed and "exact_match" not in metrics:
    metrics.append("exact_match")
  return metrics or [HEADLINE[kind]]  # a table of runs that are all still running: show the headline column


def kind_table(kind: str, records: list[dict]) -> str:
  """The table of one task kind: a row per run (ordered by model, task, start), a column per (task, metric)."""
  records = [r for r in records if r["kind"] == kind and r["task"] and r["label"]]
  tasks = _order((r["task"] for r in records), TASK_KINDS)
  groups = [(task, _columns(kind, task, records)) for task in tasks]
  header = ["model"] + [f"{task} {METRIC_TITLES.get(m, m)}" for task, metrics in groups for m in metrics]
  header += ["steps", "wall (h:mm)", "hardware", "point", "run"]
  labels = _order((r["label"] for r in records), LABEL_ORDER)
  records = sorted(records, key=lambda r: (labels.index(r["label"]), tasks.index(r["task"]), _start_key(r),
                                           r["run"]))
  rows = []
  for r in records:
    cells = [_escape(r["label"])]
    for task, metrics in groups:
      cells += [_escape(_cell(r, m)) if r["task"] == task else "" for m in metrics]
    cells += [_format_steps(r), format_wall(r["wall_seconds"]), _escape(r["target"]), _escape(r["point"]),
              _escape(r["run"])]
    rows.append(cells)
  return _table(header, rows)


def sweeps(records: list[dict]) -> list[dict[str, Any]]:
  """The ablation sweeps among ``records``: ``[{"experiment_name", "sweep", "headline", "points": [point, ...],
  "runs": [record, ...], "plot": file name}]``, points in launch order (each point's earliest ``start``)."""
  groups: dict[tuple[str, str], list[dict]] = {}
  for r in records:
    if r["sweep"]:
      groups.setdefault((r["experiment_name"] or r["experiment"] or "", r["sweep"]), []).append(r)
  names = [sweep for _, sweep in groups]
  found = []
  for (experiment, sweep), runs in sorted(groups.items()):
    runs = sorted(runs, key=lambda r: (_start_key(r), r["run"]))
    points = list(dict.fromkeys(r["point"] or r["run"] for r in runs))
    kinds = [r["kind"] for r in runs if r["kind"]]
    # ablation_<sweep>.png; a sweep name that two experiments share gets the experiment in its file name too
    stem = sweep if names.count(sweep) == 1 else f"{experiment}_{sweep}"
    found.append({"experiment_name": experiment, "sweep": sweep, "points": points, "runs": runs,
                  "headline": HEADLINE.get(kinds[0]) if kinds else None,
                  "plot": f"ablation_{_slug(stem)}.png"})
  return found


def _overrides_text(overrides) -> str:
  if not overrides:
    return "—"
  return ", ".join(f"{key}={json.dumps(value)}" for key, value in overrides.items())


def sweep_table(sweep: dict) -> str:
  """One sweep's table: a row per run in launch order, with the headline metric, budget and launch status."""
  metric = sweep["headline"]
  header = ["point", "overrides", METRIC_TITLES.get(metric, "headline"), "steps", "wall (h:mm)", "hardware", "status",
            "run"]
  rows = []
  for r in sweep["runs"]:
    if r["state"] != "evaluated":
      value = r["state"]
    elif metric in r["scores"]:
      value = format_score(r["scores"][metric])
    else:
      value = NOT_COMPUTED
    status = r["state"] if r["state"].startswith("unreadable") else (r["status"] or r["state"])
    rows.append([_escape(r["point"]), _escape(_overrides_text(r["overrides"])), _escape(value), _format_steps(r),
                 format_wall(r["wall_seconds"]), _escape(r["target"]), _escape(status), _escape(r["run"])])
  return _table(header, rows)


def curve_groups(records: list[dict]) -> dict[str, list[dict]]:
  """Runs by experiment (``experiment_name``; for a run without launch.json, task and model), for the curve plots."""
  groups: dict[str, list[dict]] = {}
  for r in records:
    name = r["experiment_name"] or (f"{r['task']}/{r['label']}" if r["task"] and r["label"] else r["run"])
    groups.setdefault(name, []).append(r)
  return groups


def _slug(name: str) -> str:
  return re.sub(r"[^A-Za-z0-9._-]+", "_", name.replace("/", "_")).strip("_") or "unnamed"


def curves_file(experiment_name: str) -> str:
  return f"curves_{_slug(experiment_name)}.png"


def render_markdown(records: list[dict], *, plots: dict[str, str] | None = None, roots: Iterable[str] = ()) -> str:
  """``results.md``: the kind tables, the ablation tables (with their plots) and the runs no table could place.

  Args:
    records: :func:`read_run` records.
    plots: PNG file name -> title, for the plots written next to results.md (linked from it).
    roots: the ``--runs`` entries, named in the preamble.
  """
  plots = plots or {}
  lines = ["# Results", ""]
  if roots:
    lines += [f"{len(records)} run{'s' if len(records) != 1 else ''} from {', '.join(f'`{r}`' for r in roots)}.", ""]
  lines += ["Each cell: our score on the evaluated split (`metrics.<split>.json`; `test`, or `validation` where the "
            "task has no test split), then in parentheses the seed study's reported score where it reports one. A run "
            "without a score says why: `running`, `pending`, `failed`, `no evaluation` (finished, no metrics file) or "
            f"`unreadable: <file>`; `{NOT_COMPUTED}` is a metric the run's evaluation did not compute. Budget: steps "
            "of the evaluated checkpoint, wall time of the launch, hardware target, sweep point.", ""]
  for kind in KINDS:
    if any(r["kind"] == kind and r["task"] and r["label"] for r in records):
      lines += [f"## {KIND_TITLES[kind]}", "", kind_table(kind, records), ""]
  found = sweeps(records)
  if found:
    lines += ["## Ablations", ""]
    for sweep in found:
      lines += [f"### {sweep['experiment_name']}: sweep `{sweep['sweep']}`", "",
                f"Points in launch order: {', '.join(sweep['points'])}.", "", sweep_table(sweep), ""]
      if sweep["plot"] in plots:
        lines += [f"![{sweep['sweep']}]({sweep['plot']})", ""]
  curve_plots = [(name, title) for name, title in plots.items() if name.startswith("curves_")]
  if curve_plots:
    lines += ["## Training curves", ""]
    for name, title in curve_plots:
      lines += [f"![{title}]({name})", ""]
  others = [r for r in records if not (r["kind"] and r["task"] and r["label"])]
  if others:
    lines += ["## Runs not placed in a table", "", "Task or model unknown (no readable config.json).", "",
              _table(["run", "experiment", "point", "state"],
                     [[_escape(r["run"]), _escape(r["experiment_name"]), _escape(r["point"]), _escape(r["state"])]
                      for r in others]), ""]
  return "\n".join(lines).rstrip("\n") + "\n"


# ---------------------------------------------------------------------------------------------------------------------
# Plots


def _figure(width: float, height: float):
  """A figure on the Agg canvas: no pyplot (no global state, no display)."""
  from matplotlib.backends.backend_agg import FigureCanvasAgg  # pylint: disable=g-import-not-at-top
  from matplotlib.figure import Figure  # pylint: disable=g-import-not-at-top
  figure = Figure(figsize=(width, height), dpi=110)
  FigureCanvasAgg(figure)
  return figure


def _write_png(figure, path: fs.PathLike) -> None:
  buffer = io.BytesIO()
  figure.tight_layout()
  figure.savefig(buffer, format="png")  # into memory, then through attnjax.fs: matplotlib cannot open gs:// paths
  fs.write_bytes(path, buffer.getvalue())


def plot_ablation(sweep: dict, path: fs.PathLike) -> None:
  """Headline metric against the sweep's points (x in launch order): a marker per run, a line through each point's
  mean; a point without a score is a gap with its state written at the bottom, never a 0."""
  metric = sweep["headline"]
  points = sweep["points"]
  figure = _figure(max(4.0, 1.0 + 0.9 * len(points)), 3.4)
  ax = figure.add_subplot()
  means = []
  for x, point in enumerate(points):
    runs = [r for r in sweep["runs"] if (r["point"] or r["run"]) == point]
    values = [r["scores"][metric] for r in runs if r["state"] == "evaluated" and metric in r["scores"]]
    means.append(sum(values) / len(values) if values else math.nan)
    if values:
      ax.plot([x] * len(values), values, "o", color="tab:blue")
    else:
      states = sorted({r["state"] if r["state"] != "evaluated" else f"no {metric}" for r in runs})
      ax.text(x, 0.03, "\n".join(states), transform=ax.get_xaxis_transform(), ha="center", va="bottom",
              color="tab:red", fontsize=8)
  ax.plot(range(len(points)), means, "-", color="tab:blue", alpha=0.6)  # NaN breaks the line at a missing point
  ax.set_xticks(range(len(points)), points)
  ax.set_xlim(-0.5, len(points) - 0.5)
  ax.set_xlabel(f"sweep {sweep['sweep']}")
  ax.set_ylabel(METRIC_TITLES.get(metric, metric or "headline"))
  ax.set_title(f"{sweep['experiment_name']}: {sweep['sweep']}", fontsize=9)
  ax.grid(alpha=0.3)
  _write_png(figure, path)


def plot_curves(experiment_name: str, records: list[dict], path: fs.PathLike) -> bool:
  """Validation headline metric and eval loss against the step, a line per run (from ``eval_curves``). Writes
  nothing and returns False when no run of the group has either scalar."""
  points = [r["point"] or r["run"] for r in records]
  series = []
  for r, point in zip(records, points):
    headline = r["headline"] or next((t[len("eval/"):] for t in ("eval/bleu", "eval/rougeL", "eval/f1")
                                      if t in r["eval_curves"]), None)
    metric = r["eval_curves"].get(f"eval/{headline}", [])
    loss = r["eval_curves"].get("eval/loss", [])
    if metric or loss:
      series.append((point if points.count(point) == 1 else r["run"], headline, metric, loss))  # seeds: by run
  if not series:
    return False
  figure = _figure(9.0, 3.4)
  left, right = figure.add_subplot(1, 2, 1), figure.add_subplot(1, 2, 2)
  for name, _, metric, loss in series:
    if metric:
      left.plot([s for s, _ in metric], [v for _, v in metric], "o-", markersize=3, label=name)
    if loss:
      right.plot([s for s, _ in loss], [v for _, v in loss], "o-", markersize=3, label=name)
  headlines = sorted({h for _, h, m, _ in series if m and h})
  left.set_ylabel("validation " + "/".join(METRIC_TITLES.get(h, h) for h in headlines))
  right.set_ylabel("eval loss")
  for ax in (left, right):
    ax.set_xlabel("step")
    ax.grid(alpha=0.3)
    if ax.lines:
      ax.legend(fontsize=7)
  figure.suptitle(experiment_name, fontsize=9)
  _write_png(figure, path)
  return True


# ---------------------------------------------------------------------------------------------------------------------
# The report


def write_report(roots: Iterable[fs.PathLike], out: fs.PathLike) -> str:
  """Reads every run under ``roots`` and writes ``results.md``, ``results.json`` and the PNG plots into ``out``;
  returns the markdown.

  Raises:
    FileNotFoundError / NotADirectoryError: a root that does not exist or is a file (named).
    ValueError: no run workdir under any root.
  """
  roots = [str(root) for root in roots]
  records = collect(roots)
  if not records:
    raise ValueError(f"no run workdir (a directory holding launch.json or config.json) under {', '.join(roots)}")
  fs.makedirs(out)
  plots = {}
  for sweep in sweeps(records):
    plot_ablation(sweep, fs.join(out, sweep["plot"]))
    plots[sweep["plot"]] = f"{sweep['experiment_name']}: {sweep['sweep']}"
  for name, group in curve_groups(records).items():
    if plot_curves(name, group, fs.join(out, curves_file(name))):
      plots[curves_file(name)] = name
  markdown = render_markdown(records, plots=plots, roots=roots)
  fs.write_text(fs.join(out, "results.md"), markdown)
  fs.write_json(fs.join(out, "results.json"), {"roots": roots, "runs": records}, indent=1)
  return markdown


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f"unexpected arguments: {argv[1:]}")
  try:
    markdown = write_report(_RUNS.value, _OUT.value)
  except (FileNotFoundError, NotADirectoryError, ValueError) as e:
    raise SystemExit(f"error: {e}") from None
  print(markdown, end="")


if __name__ == "__main__":
  flags.mark_flags_as_required(["runs", "out"])
  app.run(main)
