"""The study's results, gathered from run workdirs: markdown tables beside the seed's numbers, ablations and plots.

    python -m attnjax.report --runs=gs://B/runs/study[,runs/local_run,...] --out=gs://B/report

Every ``--runs`` entry is a launch root (searched recursively, never inside ``checkpoints/`` or ``tensorboard/``) or
one run workdir. A run workdir is a directory holding ``launch.json`` (written by the launcher) and/or
``config.json`` (written by ``attnjax.train``); the search does not descend into a run. An entry ending in ``.json``
is an earlier report's ``results.json``, whose records are reported again as recorded (their workdirs gone: a TPU
VM's disk, an earlier machine's), unless a workdir found here holds the same run (:func:`collect`). Read from each
run:

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
  then one table per ablation sweep (and, where a point has several scored runs, random seeds, its mean and
  min–max); then runs that fit no table. A run without numbers shows why in its cells:
  ``running``, ``pending``, ``failed``, ``no evaluation`` or ``unreadable: <file>``; never 0 or an empty cell.
* ``ablation_<sweep>.png``: the headline metric (BLEU / ROUGE-L / F1) against the sweep's points, a point without a
  score drawn as a gap with its state written in, not as 0.
* ``curves_<experiment_name, "/" -> "_">.png``: validation headline metric and eval loss against the step, one line
  per run.
* ``bleu_by_length.png`` (``bleu_by_length_<task>.png`` for several tasks) and a section of ``results.md`` per task:
  BLEU by source-sentence length of each experiment's run with the best validation score (:mod:`attnjax.report.length`,
  Bahdanau et al. 2015 Fig. 2); runs evaluated on more than one
  split (``metrics.test2017.json`` beside ``metrics.test.json``) get an "Other evaluated splits" table.
* a summarization section (:mod:`attnjax.report.summarization`): ROUGE, repetition and novel n-grams of every
  summarization run, the seed's and See et al.'s claims with verdicts, and ROUGE-1 by article length.
* ``scaling_<experiment>.png`` and a section: for a sweep named ``size``, best validation NLL against non-embedding
  parameters and the fit of L(N) = (N_c / N)^α with its standard error (:mod:`attnjax.report.scaling`).
* ``transfer_<task>.png`` and a section: span-QA readers that differ only in their starting weights (a run with
  ``train.init_encoder_from``), with the seed's numbers, the pre-training budgets, the claim and the goals
  (:mod:`attnjax.report.transfer`).
* ``squad2_<task>.png`` and a section: SQuAD 2.0 readers with HasAns / NoAns F1, the share of questions each answered,
  the no-answer threshold chosen on validation, the seed's 2.0 numbers, the claims and goals judged on paired
  paragraph-bootstrap intervals of F1 (:mod:`attnjax.report.squad2`).
* ``lm_scaling_{N,D,C}_<experiment>.png`` and sections: a language model's three scaling laws (its ``size`` and
  ``data`` sweeps), its position extrapolation (``positional``), and their claims (:mod:`attnjax.report.lm_scaling`).
* ``extrapolation.png`` and a section: exact match by source length of every evaluated run of the synthetic
  ``reverse`` task, whose test strings are longer than its training strings (position extrapolation), and how each
  run answers those longer strings (outputs as long as the longest training string; the reversal of its first
  that many characters).
* ``results.json``: ``{"roots": [...], "runs": [record, ...]}``, one :func:`read_run` record per run.
"""

from __future__ import annotations

from typing import Iterable

from attnjax import fs
from attnjax.report.runs import (
    HEADLINE, KINDS, KIND_METRICS, KIND_TITLES, LABEL_ORDER, METRIC_TITLES, NOT_COMPUTED, RUN_FILES, SEED_REPORTED,
    SKIPPED_DIRS, SPLIT_PREFERENCE, TASK_KINDS, collect, find_runs, model_label, read_archive, read_run)
from attnjax.report.tables import (
    common_eval_step, curve_groups, curves_file, format_score, format_seed, format_wall, kind_table, render_markdown,
    second_seed_margin, second_seed_points, seed_table, sweep_table, sweeps)
from attnjax.report.plots import plot_ablation, plot_curves
from attnjax.report.tensorboard import read_records, read_scalars

__all__ = [
    "HEADLINE",
    "KINDS",
    "KIND_METRICS",
    "KIND_TITLES",
    "LABEL_ORDER",
    "METRIC_TITLES",
    "NOT_COMPUTED",
    "RUN_FILES",
    "SEED_REPORTED",
    "SKIPPED_DIRS",
    "SPLIT_PREFERENCE",
    "TASK_KINDS",
    "collect",
    "common_eval_step",
    "curve_groups",
    "curves_file",
    "find_runs",
    "format_score",
    "format_seed",
    "format_wall",
    "kind_table",
    "model_label",
    "plot_ablation",
    "plot_curves",
    "read_archive",
    "read_records",
    "read_run",
    "read_scalars",
    "render_markdown",
    "second_seed_margin",
    "second_seed_points",
    "seed_table",
    "sweep_table",
    "sweeps",
    "write_report",
]


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
  sections = []
  from attnjax.report import length  # pylint: disable=g-import-not-at-top
  by_task: dict[str, list] = {}
  for row in length.length_rows(records):
    by_task.setdefault(row[0]["task"], []).append(row)
  for task, rows in sorted(by_task.items()):
    png = "bleu_by_length.png" if len(by_task) == 1 else f"bleu_by_length_{task}.png"
    length.plot_length(rows, fs.join(out, png))
    sections.append(f"## BLEU by source length: {task}\n\nCorpus BLEU of each source-length bucket of the evaluated "
                    "split (sentences in the bucket in parentheses), Bahdanau et al. 2015, Fig. 2; one split per task "
                    "(`test` when a run was scored on it) and one run per experiment among the runs scored on it, the "
                    "best by validation BLEU during training.\n\n"
                    f"{length.length_table(rows)}\n\n![BLEU by source length: {task}]({png})")
  rows = length.extrapolation_rows(records)
  if rows:
    length.plot_extrapolation(rows, fs.join(out, "extrapolation.png"))
    failures = length.longer_strings_table(rows)
    failures = ("\n\nWhat each run outputs for the test strings longer than the training strings (runs whose workdir "
                f"held both splits' hypotheses):\n\n{failures}") if failures else ""
    sections.append("## Position extrapolation\n\nExact match (%) of string reversal by source length: the validation "
                    "split has the training lengths, the test split only longer strings.\n\n"
                    f"{length.extrapolation_table(rows)}\n\n![Position extrapolation](extrapolation.png){failures}")
  from attnjax.report import summarization  # pylint: disable=g-import-not-at-top
  statistics = summarization.statistics_table(records)
  if statistics:
    text = ("## Summarization: repetition and novelty\n\nSee et al. (2017)'s measures on each run's evaluated split: "
            "the share of a summary's trigrams it already used (repetition), and of its n-grams that are not in its "
            "article (how abstractive it is); every article of the split counts, an empty one with an empty "
            f"summary.\n\n{statistics}")
    claims = summarization.claims_table(records)
    text += f"\n\n### Claims\n\n{claims}" if claims else ""
    goals = summarization.goal_lines(records)
    text += ("\n\n### Goals\n\nOn this subset's test split; See et al.'s number is on the full test set (11,490 "
             "articles). Where one is missed, the curves above and the step and epochs show how far the runs "
             "trained.\n\n" + "\n".join(goals)) if goals else ""
    rows = summarization.length_rows(records)
    if rows:
      text += ("\n\n### ROUGE-1 by article length\n\nMean ROUGE-1 F1 of the articles in each length bucket (words of "
               "the tokenized article; articles in the bucket in parentheses). Models read the first 400 tokens.\n\n"
               + summarization.length_table(rows))
    sections.append(text)
  from attnjax.report import scaling  # pylint: disable=g-import-not-at-top
  for name, points in scaling.scaling_points(records).items():
    plot = f"scaling_{name.replace('/', '_')}.png"
    scaling.plot_scaling(name, points, fs.join(out, plot))
    sections.append("## Loss against model size\n\n" + scaling.scaling_section(name, points, plot))
  from attnjax.report import pretraining  # pylint: disable=g-import-not-at-top
  text = pretraining.pretraining_section(records, out)
  sections += [text] if text else []
  from attnjax.report import transfer  # pylint: disable=g-import-not-at-top
  text = transfer.transfer_section(records, out)
  sections += [text] if text else []
  from attnjax.report import averaging  # pylint: disable=g-import-not-at-top
  text = averaging.averaging_section(records)
  sections += [text] if text else []
  from attnjax.report import squad2  # pylint: disable=g-import-not-at-top
  text = squad2.squad2_section(records, out)
  sections += [text] if text else []
  from attnjax.report import lm_scaling  # pylint: disable=g-import-not-at-top
  sections += lm_scaling.sections(records, out)
  markdown = render_markdown(records, plots=plots, roots=roots, sections=sections)
  fs.write_text(fs.join(out, "results.md"), markdown)
  fs.write_json(fs.join(out, "results.json"), {"roots": roots, "runs": records}, indent=1)
  return markdown
