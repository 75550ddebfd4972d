"""BLEU by source length (attnjax.report.length): the bucketing by hand-counted words, per-bucket corpus BLEU, and the
report section written from a run workdir whose test split is read back through its own data config; and exact match
by length on the reversal task (position extrapolation)."""

import gzip
import json
import os
import shutil

import pytest
import sacrebleu

from attnjax import report
from attnjax.config import base_config
from attnjax.data.catalogue import use_task
from attnjax.report import length

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def test_buckets_follow_the_word_count_of_the_source():
  assert length.bucket_names((3, 6)) == ["1-3", "4-6", "≥7"]
  assert [length.bucket_of(n, (3, 6)) for n in (1, 3, 4, 6, 7, 40)] == [0, 0, 1, 1, 2, 2]
  sources = ["a b", "a b c", "a b c d e", "a b c d e f g h"]  # 2, 3, 5 and 8 words
  references = ["the cat sat on the mat today", "a dog ran in the park at noon", "he reads a long book every night",
                "we walk to the old bridge by the river"]
  hypotheses = [references[0], references[1], "zzz qqq", references[3]]
  buckets = length.bleu_by_length(sources, hypotheses, references, edges=(3, 6))
  assert [b["sentences"] for b in buckets] == [2, 1, 1]
  assert buckets[0]["bleu"] == pytest.approx(100.0) and buckets[2]["bleu"] == pytest.approx(100.0)
  assert buckets[1]["bleu"] == pytest.approx(0.0)
  assert length.bleu_by_length(["a"], ["a"], ["a"], edges=(3,))[1] == {"bucket": "≥4", "sentences": 0, "bleu": None}
  with pytest.raises(ValueError, match="2 sources, 1 hypotheses"):
    length.bleu_by_length(["a", "b"], ["a"], ["a", "b"])


def _write_gz(path, lines):
  with gzip.open(path, "wt", encoding="utf-8") as f:
    f.write("".join(line + "\n" for line in lines))


def test_report_scores_each_length_bucket_of_a_run_and_lists_its_other_test_set(tmp_path):
  data = tmp_path / "multi30k"
  data.mkdir()
  sources = [" ".join(["w"] * n) for n in (3, 5, 9, 12, 12, 30)]
  targets = [f"ref {i} " + " ".join(f"t{j}" for j in range(6)) for i in range(6)]
  _write_gz(data / "test_2016_flickr.en.gz", sources)
  _write_gz(data / "test_2016_flickr.de.gz", targets)
  config = base_config()
  use_task(config, "multi30k_en_de")
  config.data.dir = str(data)
  config.model.name = "rnn_seq2seq"
  with config.model.unlocked():
    config.model.attention = "bahdanau"
  run = tmp_path / "runs" / "bahdanau"
  run.mkdir(parents=True)
  (run / "config.json").write_text(config.to_json_best_effort())
  hypotheses = list(targets)
  hypotheses[3] = "nothing alike"  # one of the two 12-word sources is mistranslated
  (run / "hypotheses.test.step10.txt").write_text("".join(h + "\n" for h in hypotheses))
  (run / "metrics.test.json").write_text(json.dumps(
      {"split": "test", "step": 10, "steps": [10], "examples": 6, "bleu": 80.0,
       "hypotheses": "/elsewhere/when/evaluated/hypotheses.test.step10.txt"}))
  (run / "metrics.test2017.json").write_text(json.dumps({"split": "test2017", "step": 10, "bleu": 31.5}))

  out = tmp_path / "report"
  markdown = report.write_report([str(tmp_path / "runs")], str(out))
  assert "## BLEU by source length" in markdown
  row = next(line for line in markdown.splitlines() if line.startswith("| LSTM + Bahdanau | bahdanau | test |"))
  cells = [c.strip() for c in row.strip("|").split("|")][3:]
  # buckets 1-8, 9-11, 12-14, 15-18, 19-24, ≥25 words: (3, 5) | 9 | (12, 12) | - | - | 30
  assert cells[0] == "100.00 (2)" and cells[1] == "100.00 (1)" and cells[3] == "—" and cells[5] == "100.00 (1)"
  # the mixed bucket: sacreBLEU's corpus BLEU of its two sentences, one right and one mistranslated
  mixed = sacrebleu.corpus_bleu([hypotheses[3], hypotheses[4]], [[targets[3], targets[4]]]).score
  assert 0.0 < mixed < 100.0 and cells[2] == f"{mixed:.2f} (2)"
  assert "## Other evaluated splits" in markdown and "| test2017 | BLEU 31.50 |" in markdown
  assert (out / "bleu_by_length.png").read_bytes().startswith(PNG_MAGIC)

  # the run's workdir gone, the report's own results.json draws the same table again
  archive = tmp_path / "archive" / "results.json"
  archive.parent.mkdir()
  archive.write_text((out / "results.json").read_text())
  shutil.move(str(tmp_path / "runs"), str(tmp_path / "moved"))
  again = report.write_report([str(archive)], str(tmp_path / "from_archive"))
  assert _section(again, "## BLEU by source length") == _section(markdown, "## BLEU by source length")
  assert _section(again, "## Other evaluated splits") == _section(markdown, "## Other evaluated splits")
  assert f"1 of them as `{archive}` recorded them" in again
  shutil.move(str(tmp_path / "moved"), str(tmp_path / "runs"))

  os.remove(run / "hypotheses.test.step10.txt")  # a run without its hypotheses is left out, not scored as 0
  markdown = report.write_report([str(tmp_path / "runs")], str(tmp_path / "report2"))
  assert "## BLEU by source length" not in markdown


def test_extrapolation_section_gives_exact_match_per_length_over_both_splits(tmp_path):
  """Two reversal runs written by hand: exact match per source length, validation lengths pooled, test lengths one
  column each; the synthetic runs stay out of the BLEU-by-length table."""
  from attnjax.data import synthetic  # pylint: disable=g-import-not-at-top
  config = base_config()
  config.data.task = "reverse"
  config.data.validation_examples = config.data.test_examples = 40
  splits = {s: synthetic.make_examples("reverse", s, 40, seed=0) for s in ("validation", "test")}
  expected = {}
  for name, positional in (("a", "learned"), ("b", "t5")):
    config.model.positional = positional
    run = tmp_path / "runs" / name
    run.mkdir(parents=True)
    (run / "config.json").write_text(config.to_json_best_effort())
    for split, examples in splits.items():
      # run a gets every example right; run b misses every test string of odd length and the first validation one:
      # at 13 it reverses the first 12 letters only, at 15 it writes 12 letters of nonsense
      wrong = {13: lambda s, t: s[:12][::-1], 15: lambda s, t: "y" * 12}
      hypotheses = [t if name == "a" or (len(s) % 2 == 0 if split == "test" else i > 0)
                    else wrong.get(len(s) if split == "test" else 0, lambda s, t: t[::-1] + "x")(s, t)
                    for i, (s, t) in enumerate(examples)]
      (run / f"hypotheses.{split}.step5.txt").write_text("".join(h + "\n" for h in hypotheses))
      (run / f"metrics.{split}.json").write_text(json.dumps(
          {"split": split, "step": 5, "examples": 40, "exact_match": 0.0,
           "hypotheses": f"/elsewhere/hypotheses.{split}.step5.txt"}))
      for (s, t), h in zip(examples, hypotheses):
        total, right = expected.setdefault((name, split, len(s)), [0, 0])
        expected[(name, split, len(s))] = [total + 1, right + (h == t)]

  out = tmp_path / "report"
  markdown = report.write_report([str(tmp_path / "runs")], str(out))
  assert "## BLEU by source length" not in markdown
  lines = markdown[markdown.index("## Position extrapolation"):].splitlines()
  header = [c.strip() for c in next(line for line in lines if line.startswith("| positions")).strip("|").split("|")]
  test_lengths = sorted({n for (_, split, n) in expected if split == "test"})
  assert header[2] == "lengths 3–12 (validation)" and header[3:] == [f"length {n}" for n in test_lengths]
  for name, positional in (("a", "learned"), ("b", "t5")):
    row = next(line for line in lines if line.startswith(f"| {positional} | {name} |"))
    cells = [c.strip() for c in row.strip("|").split("|")][2:]
    pooled = [sum(v[i] for (r, split, _), v in expected.items() if r == name and split == "validation") for i in (0, 1)]
    assert cells[0] == f"{100 * pooled[1] / pooled[0]:.1f}"
    for n, cell in zip(test_lengths, cells[1:]):
      total, right = expected[(name, "test", n)]
      assert cell == f"{100 * right / total:.1f}", (name, n)
      assert (cell == "100.0") == (name == "a" or n % 2 == 0)
  assert (out / "extrapolation.png").read_bytes().startswith(PNG_MAGIC)
  # how the longer strings fail: outputs as long as the longest training string, and the first 12 letters reversed
  for name, positional in (("a", "learned"), ("b", "t5")):
    row = next(line for line in lines if line.startswith(f"| {positional} | {name} | "))
    row = next(line for line in lines[lines.index(row) + 1:] if line.startswith(f"| {positional} | {name} | "))
    tests = splits["test"]
    n13, n15 = (sum(len(s) == n for s, _ in tests) for n in (13, 15))
    counts = (0, 0) if name == "a" else (n13 + n15, n13)
    assert n13 and n15 and [c.strip() for c in row.strip("|").split("|")][2:] == [
        str(len(tests)), *(f"{c} ({100 * c / len(tests):.1f}%)" for c in counts)]
  assert "| test strings longer than 12 | outputs of 12 characters | reversal of the first 12 characters |" in markdown

  shutil.rmtree(tmp_path / "runs")  # from the report's results.json alone: the same section
  again = report.write_report([str(out / "results.json")], str(tmp_path / "from_archive"))
  assert _section(again, "## Position extrapolation") == _section(markdown, "## Position extrapolation")


def _section(markdown, heading):
  text = markdown[markdown.index(heading):]
  end = text.find("\n## ", len(heading))
  return text if end < 0 else text[:end]


def test_the_length_curve_takes_each_experiments_best_run_on_validation_not_on_test():
  def record(run, experiment, validation, test):
    return {"run": run, "experiment_name": experiment, "headline": "bleu", "scores": {"bleu": test},
            "eval_curves": {"eval/bleu": [[500, validation - 5.0], [1000, validation]] if validation else []}}
  runs = [record("t/default", "multi30k/transformer", 27.3, 25.9),
          record("t/heads8", "multi30k/transformer", 28.1, 24.0),  # best on validation, worse on test: still chosen
          record("t/heads1", "multi30k/transformer", 20.0, 30.0),
          record("b/default", "multi30k/lstm_bahdanau", 29.0, 28.4),
          record("manual", None, None, 10.0),  # no experiment and no curve: kept as it is
          record("s/default", "multi30k/lstm_seq2seq", None, 8.9)]  # no validation curve: kept
  assert [r["run"] for r in length.selected_runs(runs)] == ["t/heads8", "b/default", "manual", "s/default"]


def test_the_length_curve_compares_one_split_per_task():
  def record(run, experiment, task, split, validation):
    return {"run": run, "experiment_name": experiment, "task": task, "split": split, "kind": "translation",
            "state": "evaluated", "config": {"data": {}}, "headline": "bleu", "scores": {"bleu": 20.0},
            "eval_curves": {"eval/bleu": [[500, validation]]}, "archived": True,
            "bleu_by_length": {"edges": list(length.EDGES), "buckets": [{"bleu": validation}]}}
  runs = [record("t/default", "fr/transformer", "fr", "test", 30.0),
          record("t/size/d384", "fr/transformer", "fr", "validation", 40.0),  # best on validation, scored on it
          record("b/default", "fr/lstm", "fr", "test", 25.0),
          record("r/default", "rev/transformer", "rev", "validation", 50.0)]  # a task scored on validation only
  assert length.compared_splits(runs) == {"fr": "test", "rev": "validation"}
  assert [r["run"] for r, _ in length.length_rows(runs)] == ["t/default", "b/default", "r/default"]


def test_the_length_curve_leaves_out_a_run_trained_for_a_budget_of_its_own():
  def record(run, experiment, validation, overrides):
    return {"run": run, "experiment_name": experiment, "task": "de", "split": "test", "kind": "translation",
            "state": "evaluated", "config": {"data": {}}, "headline": "bleu", "scores": {"bleu": 20.0},
            "overrides": overrides, "eval_curves": {"eval/bleu": [[500, validation]]}, "archived": True,
            "bleu_by_length": {"edges": list(length.EDGES), "buckets": [{"bleu": validation}]}}
  runs = [record("t/default", "de/transformer", 30.0, {}),
          record("t/budget/minutes60", "de/transformer", 38.0, {"train.time_limit_minutes": 60.0}),  # best, longer
          record("t/heads/heads8", "de/transformer", 31.0, {"model.num_heads": 8}),
          record("s/default", "de/lstm_seq2seq", 10.0, None)]
  assert [r["run"] for r, _ in length.length_rows(runs)] == ["t/heads/heads8", "s/default"]


def test_extrapolation_rows_of_one_encoding_are_told_apart_by_seed():
  def record(run, positional, seed):
    return {"run": run, "label": "Transformer", "model": {"positional": positional}, "seed": seed}
  rows = [(record("p/sinusoidal/seed0", "sinusoidal", 0), {}), (record("p/sinusoidal/seed1", "sinusoidal", 1), {}),
          (record("p/t5/seed0", "t5", 0), {})]
  assert [length._run_label(r, rows) for r, _ in rows] == ["sinusoidal (seed 0)", "sinusoidal (seed 1)", "t5"]


def test_an_archived_run_without_validation_lengths_shows_its_validation_score():
  """A run archived before records kept per-length results has only its test lengths (carried over) and its
  validation split's exact match: the pooled column shows that score; beside a run with validation lengths, the
  column keeps their range."""
  old = {"run": "old", "label": "Transformer", "model": {"positional": "learned"}, "seed": 0, "split": "test",
         "scores": {"exact_match": 0.0}, "other_splits": {"validation": {"exact_match": 95.04}}}
  new = {"run": "new", "label": "Transformer", "model": {"positional": "t5"}, "seed": 1, "split": "test",
         "scores": {"exact_match": 50.0}, "other_splits": {"validation": {"exact_match": 99.0}}}
  old_counts = {"test": {13: [10, 0], 14: [10, 0]}}
  new_counts = {"validation": {3: [4, 4], 12: [6, 3]}, "test": {13: [2, 1], 14: [2, 1]}}
  table = length.extrapolation_table([(old, old_counts)]).splitlines()
  assert table[0] == "| positions | run | validation (training lengths) | length 13 | length 14 |"
  assert table[2] == "| learned | old | 95.0 | 0.0 | 0.0 |"
  table = length.extrapolation_table([(old, old_counts), (new, new_counts)]).splitlines()
  assert table[0] == "| positions | run | lengths 3–12 (validation) | length 13 | length 14 |"
  assert table[2:] == ["| learned | old | 95.0 | 0.0 | 0.0 |", "| t5 | new | 70.0 | 50.0 | 50.0 |"]
