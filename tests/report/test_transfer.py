"""The transfer study's section of the report (attnjax.report.transfer), from workdirs laid out as `make transfer`
leaves them: the readers' scores and budgets against their own files, the pre-training budget computed here from the
masked-LM run's config and checkpoint, and the claim's verdict and the goals against hand-chosen scores."""

import importlib
import json

import numpy as np
import pytest
from tensorboardX import SummaryWriter

from attnjax import fs, report
from attnjax.report import transfer
from tests.markdown_tables import table_rows


def _workdir(root, experiment: str, *, step: int, seconds: float, scores: dict | None = None, curve=(),
             older: dict | None = None):
  config = importlib.import_module("experiments." + experiment.replace("/", ".")).get_config()
  run = root / experiment / "single" / "default"
  for s, t in {**(older or {}), step: seconds}.items():  # checkpoints: step -> training seconds
    (run / "checkpoints" / str(s) / "meta").mkdir(parents=True)
    (run / "checkpoints" / str(s) / "meta" / "metadata").write_text(json.dumps({"train_seconds": t}))
  (run / "config.json").write_text(config.to_json_best_effort())
  (run / "launch.json").write_text(json.dumps({"experiment_name": experiment, "point": "default", "status": "done"}))
  if scores is not None:
    best = scores.pop("step", step)
    (run / "metrics.test.json").write_text(json.dumps({"split": "test", "step": best, **scores}))
  writer = SummaryWriter(str(run / "tensorboard"))
  for s, value in curve:
    writer.add_scalar("eval/f1", value, s)
  writer.close()
  return config


EM = {"bilstm": 20.9, "bert_scratch": 7.1, "bert_from_mlm": 14.0, "bert_from_minilm": 45.5}


def test_the_section_shows_each_reader_its_budget_the_seed_numbers_the_claim_and_the_goals(tmp_path):
  root = tmp_path / "runs" / "transfer"  # as `make transfer` lays it out: bert_from_mlm.py points there
  # the readers load the run's best checkpoint (step 4000, scored by its evaluation), not its newest (5000)
  mlm = _workdir(root, "wikipedia/bert_mlm", step=5000, seconds=4 * 3600.0, older={4000: 3.2 * 3600},
                 scores={"step": 4000, "mlm_accuracy": 0.4, "mlm_loss": 3.0})
  # the rows its evaluation cached: the test split's maskable tokens are 6, 6, 6, 7 ([PAD], [CLS], [SEP] never masked)
  mlm_run = root / "wikipedia/bert_mlm/single/default"
  (mlm_run / "wordpiece.vocab.txt").write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "b", "c"]))
  from attnjax.data.mlm import MlmTaskData  # pylint: disable=g-import-not-at-top
  fs.save_npz(MlmTaskData(mlm.data, str(mlm_run))._cache_path("test"),  # pylint: disable=protected-access
              ids=np.array([[2, 6, 6, 3, 2, 6, 7, 3, 0]]), segment_ids=np.array([[1, 1, 1, 1, 2, 2, 2, 2, 0]]),
              positions=np.array([[0, 1, 2, 3, 0, 1, 2, 3, 0]]))
  configs = {}
  for i, reader in enumerate(EM):
    configs[reader] = _workdir(root, f"squad_transfer/{reader}", step=600 + i, seconds=3600.0,
                               scores={"exact_match": EM[reader], "f1": EM[reader] + 10},
                               curve=[(100, EM[reader]), (200, EM[reader] + 5)])
  markdown = report.write_report([str(root)], str(tmp_path / "report"))
  rows = {row["starts from"] + "/" + row["reader"]: row
          for row in table_rows(markdown, "## Transfer: readers from pre-trained encoders")}
  assert set(rows) == {"random/BiLSTM reader", "random/BERT reader", "wikipedia/bert_mlm/BERT reader (from "
                       "wikipedia/bert_mlm)", "all-MiniLM-L6-v2/BERT reader (from all-MiniLM-L6-v2)"}
  tokens = 4000 * mlm.data.batch_size * mlm.data.seq_len  # 64 rows of 128 tokens a step
  mine = rows["wikipedia/bert_mlm/BERT reader (from wikipedia/bert_mlm)"]
  assert mine["pre-training"].startswith(f"3.2 h, 4,000 steps, {tokens / 1e6:.0f}M tokens (its best checkpoint; "
                                         "the run trained 4.0 h, 5,000 steps;")
  assert mine["test EM"] == "14.00" and mine["test F1"] == "24.00" and mine["seed EM (SQuAD v1.1)"] == "84.1"
  assert mine["fine-tuning"] == f"602 steps ({602 * configs['bert_from_mlm'].data.batch_size:,} questions), 1:00 (h:mm)"
  assert rows["random/BiLSTM reader"]["seed EM (SQuAD v1.1)"] == "71.3"
  assert rows["random/BiLSTM reader"]["fine-tuning"] == "600 steps, 1:00 (h:mm)"  # batches by tokens
  assert [row["reader"] for row in table_rows(markdown, "## Transfer")][:2] == ["BiLSTM reader", "BERT reader"]
  assert rows["random/BERT reader"]["seed EM (SQuAD v1.1)"] == "—"
  assert rows["all-MiniLM-L6-v2/BERT reader (from all-MiniLM-L6-v2)"]["pre-training"].startswith("published")
  entropy = -(0.75 * np.log(0.75) + 0.25 * np.log(0.25))
  assert (f"- The masked-LM run wikipedia/bert_mlm/single/default reaches test MLM loss 3.00 and accuracy 40.0% at the checkpoint "
          f"the readers load. Token frequencies alone, ignoring the context, reach loss {entropy:.2f} and accuracy "
          "75.0% on the same rows: its loss is above theirs, so it had not yet learnt to use context.") in markdown
  claim = table_rows(markdown, "| claim | evidence (EM) | verdict |")[0]
  # 45.5 beats 7.1 and 20.9; 14.0 only the first (these runs have no per-question scores: point estimates)
  assert claim["verdict"] == "holds for all-MiniLM-L6-v2 only (on point estimates: no per-question scores)"
  assert "Goal: the reader from all-MiniLM-L6-v2 reaches 40 EM: met (45.50)" in markdown
  assert "beats the one from scratch by 5 EM: met (+6.90 EM)" in markdown
  assert (tmp_path / "report" / "transfer_squad_v1_dev_by_article.png").read_bytes().startswith(b"\x89PNG")


@pytest.mark.parametrize("ems,verdict,own_goal", [
    ({"lstm": 20.9, "scratch": 7.1, "wikipedia/bert_mlm": 22.0, "all-MiniLM-L6-v2": 45.0}, "holds", "met (+14.90"),
    ({"lstm": 20.9, "scratch": 7.1, "wikipedia/bert_mlm": 10.0, "all-MiniLM-L6-v2": 45.0},
     "holds for all-MiniLM-L6-v2 only", "missed (+2.90"),
    ({"lstm": 20.9, "scratch": 7.1, "wikipedia/bert_mlm": 7.1, "all-MiniLM-L6-v2": 20.9}, "does not hold",
     "missed (+0.00"),
    ({"lstm": 20.9, "wikipedia/bert_mlm": 30.0}, "not measured", "not measured"),
])
def test_the_claim_holds_only_when_every_pre_trained_reader_beats_scratch_and_the_lstm(ems, verdict, own_goal):
  text = transfer._claim_and_goals({role: [{"scores": {"exact_match": em}}] for role, em in ems.items()},
                                   {"wikipedia/bert_mlm": 0})
  assert table_rows(text, "| claim")[0]["verdict"].startswith(verdict)
  assert f"scratch by 5 EM: {own_goal}" in text


def test_a_missed_own_goal_sets_the_tokens_pre_trained_against_berts():
  ems = {"lstm": 20.9, "scratch": 1.20, "wikipedia/bert_mlm": 1.28}
  by_role = {role: [{"scores": {"exact_match": em}}] for role, em in ems.items()}
  tokens = 1_199 * 20 * 384  # 9,208,320; BERT: 1e6 steps x 128,000 tokens = 1.28e11, 13,900.5 times as many
  text = transfer._claim_and_goals(by_role, {"wikipedia/bert_mlm": tokens})
  assert "missed (+0.08 EM): its pre-training saw 9.2M tokens, 1/13,900 of BERT's 128B" in text
  ems["wikipedia/bert_mlm"] = 6.20  # met: nothing to explain
  by_role = {role: [{"scores": {"exact_match": em}}] for role, em in ems.items()}
  assert "saw" not in transfer._claim_and_goals(by_role, {"wikipedia/bert_mlm": tokens})


def test_seeds_of_one_reader_are_averaged_and_only_this_projects_pre_training_counts_as_its_own():
  runs = lambda *ems: [{"scores": {"exact_match": em}} for em in ems]  # noqa: E731
  by_role = {"lstm": runs(20.0, 22.0), "scratch": runs(6.0, 8.0), "bert-base-uncased": runs(30.0),
             "all-MiniLM-L6-v2": runs(45.0)}
  text = transfer._claim_and_goals(by_role, {})  # a published BERT is nobody's pre-training here
  assert "BiLSTM 21.00 (mean of 2)" in text and "BERT from scratch 7.00 (mean of 2)" in text
  assert "scratch by 5 EM: not measured." in text
  assert "scratch by 5 EM: met (+23.00 EM)." in transfer._claim_and_goals(by_role, {"bert-base-uncased": 0})


def _scored(tmp_path, name: str, em_by_paragraph: list[list[int]]) -> list[dict]:
  """A run whose evaluation wrote per-question scores: paragraph p's questions have the EMs given."""
  table = {f"p{p}q{i}": [float(em), float(em), p] for p, ems in enumerate(em_by_paragraph) for i, em in enumerate(ems)}
  path = tmp_path / f"question_scores.{name}.json"
  path.write_text(json.dumps(table))
  mean = 100.0 * sum(row[0] for row in table.values()) / len(table)
  return [{"scores": {"exact_match": mean}, "metrics": {"question_scores": str(path)}}]


def test_beating_is_judged_on_a_paired_bootstrap_over_paragraphs(tmp_path):
  lstm = [[1, 0, 0, 0]] * 30
  by_role = {"lstm": _scored(tmp_path, "lstm", lstm), "scratch": _scored(tmp_path, "scratch", [[0, 0, 0, 0]] * 30),
             "all-MiniLM-L6-v2": _scored(tmp_path, "minilm", [[1, 1, 0, 0]] * 30)}
  text = transfer._claim_and_goals(by_role, {})
  verdict = table_rows(text, "| claim")[0]
  # one more question right in every paragraph: +25 EM in every resample, so the interval is that point
  assert verdict["verdict"].startswith("holds (95% intervals")
  assert "from all-MiniLM-L6-v2 50.00 (+50.0 to +50.0 vs BERT from scratch; +25.0 to +25.0 vs BiLSTM)" in (
      verdict["evidence (EM)"])
  # as many paragraphs a question better as a question worse: ahead by nothing for sure
  mixed = [[1, 1, 0, 0]] * 15 + [[0, 0, 0, 0]] * 15
  by_role["all-MiniLM-L6-v2"] = _scored(tmp_path, "mixed", mixed)
  assert table_rows(transfer._claim_and_goals(by_role, {}), "| claim")[0]["verdict"].startswith("inconclusive")
  # a point estimate ahead (+0.8 EM) that the paragraphs do not bear out is not "holds"
  by_role["all-MiniLM-L6-v2"] = _scored(tmp_path, "ahead", mixed[:14] + [[1, 1, 0, 0]] + mixed[15:] + [[1, 0, 0, 0]])
  by_role["lstm"] = _scored(tmp_path, "lstm31", lstm + [[0, 0, 0, 0]])
  by_role["scratch"] = _scored(tmp_path, "scratch31", [[0, 0, 0, 0]] * 31)
  assert table_rows(transfer._claim_and_goals(by_role, {}), "| claim")[0]["verdict"].startswith("inconclusive")
  # behind in every paragraph: does not hold
  by_role = {"lstm": _scored(tmp_path, "lstm", lstm), "scratch": _scored(tmp_path, "scratch", [[0, 0, 0, 0]] * 30),
             "wikipedia/bert_mlm": _scored(tmp_path, "behind", [[0, 0, 0, 0]] * 29 + [[1, 0, 0, 0]])}
  text = transfer._claim_and_goals(by_role, {"wikipedia/bert_mlm": 0})
  assert table_rows(text, "| claim")[0]["verdict"].startswith("does not hold")
  assert "scratch by 5 EM: missed (+0.83 EM; 95% interval +0.0 to +2.5)." in text


def test_few_paragraphs_decide_nothing_and_a_moved_or_torn_scores_file_is_handled(tmp_path):
  one = {"lstm": _scored(tmp_path, "lstm1", [[0, 0, 0, 0]]), "scratch": _scored(tmp_path, "s1", [[0, 0, 0, 0]]),
         "all-MiniLM-L6-v2": _scored(tmp_path, "m1", [[1, 1, 0, 0]])}  # one paragraph: a zero-width interval
  assert transfer.paired_interval({"a": 1.0}, {"a": 0.0}, {"a": 0}) is None
  assert table_rows(transfer._claim_and_goals(one, {}), "| claim")[0]["verdict"].startswith("inconclusive")
  by_role = {"lstm": _scored(tmp_path, "lstm", [[1, 0, 0, 0]] * 30),
             "scratch": _scored(tmp_path, "scratch", [[0, 0, 0, 0]] * 30),
             "all-MiniLM-L6-v2": _scored(tmp_path, "minilm", [[1, 1, 0, 0]] * 30)}
  for runs in by_role.values():  # the runs moved: the recorded paths are gone, the files are in their workdirs
    runs[0]["workdir"] = str(tmp_path)
    runs[0]["metrics"]["question_scores"] = "/elsewhere/" + runs[0]["metrics"]["question_scores"].rsplit("/", 1)[1]
  assert "(95% intervals" in table_rows(transfer._claim_and_goals(by_role, {}), "| claim")[0]["verdict"]
  (tmp_path / "question_scores.minilm.json").write_text("{")  # torn
  assert "(on point estimates" in table_rows(transfer._claim_and_goals(by_role, {}), "| claim")[0]["verdict"]


def test_the_paragraph_bootstrap_interval_is_the_clustered_standard_errors():
  """Against the analytic interval: for paragraphs of equal size, the mean difference is the mean of the paragraphs'
  means, whose standard error is their standard deviation over sqrt(G); questions of one paragraph move together,
  so a question-level interval would be narrower by about the square root of the paragraph size."""
  import numpy as np  # pylint: disable=g-import-not-at-top
  rng = np.random.default_rng(3)
  groups, size = 400, 6
  shift = rng.integers(0, 2, groups)  # the whole paragraph right or wrong together for reader a
  a = {f"{g}.{i}": float(shift[g]) for g in range(groups) for i in range(size)}
  b = {f"{g}.{i}": float(rng.integers(0, 2)) for g in range(groups) for i in range(size)}
  paragraph = {q: int(q.split(".")[0]) for q in a}
  lo, hi = transfer.paired_interval(a, b, paragraph, samples=4000)
  means = [100 * np.mean([a[f"{g}.{i}"] - b[f"{g}.{i}"] for i in range(size)]) for g in range(groups)]
  center, se = np.mean(means), np.std(means) / np.sqrt(groups)
  assert (lo + hi) / 2 == pytest.approx(center, abs=0.15 * se)
  assert (hi - lo) / 2 == pytest.approx(1.96 * se, rel=0.1)
  question_se = np.std([a[q] - b[q] for q in a]) * 100 / np.sqrt(len(a))
  assert hi - lo > 1.5 * 2 * 1.96 * question_se  # wider than the questions-as-independent interval


@pytest.mark.parametrize("loss, accuracy, verdict", [
    (2.9, 0.50, "its loss is below theirs, so it uses context."),
    (3.1, 0.45, "its accuracy is above theirs but its loss is not below, so it has begun to use context"),
    (3.0, 0.45, "its accuracy is above theirs but its loss is not below, so it has begun to use context"),
    (3.1, 0.40, "its loss is above theirs, so it had not yet learnt to use context."),
    (3.1, 0.30, "its loss is above theirs, so it had not yet learnt to use context.")])
def test_a_masked_lm_uses_context_when_it_beats_token_frequencies(loss, accuracy, verdict):
  from attnjax.report import transfer  # pylint: disable=g-import-not-at-top
  frequencies = {"mlm_loss": 3.0, "mlm_accuracy": 0.40}
  assert transfer.context_verdict({"mlm_loss": loss, "mlm_accuracy": accuracy}, frequencies).startswith(verdict)


def test_a_reader_of_windows_counts_windows_not_questions():
  from attnjax.report.transfer import fine_tuning  # pylint: disable=g-import-not-at-top
  record = {"config": {"data": {"batch_size": 32, "doc_stride": 128}}, "trained_step": 10, "train_seconds": 3600}
  assert fine_tuning(record).startswith("10 steps (320 windows), ")
  record["config"]["data"]["doc_stride"] = None  # contexts cut instead: one example a question
  assert fine_tuning(record).startswith("10 steps (320 questions), ")


def test_without_a_bilstm_each_pre_trained_reader_is_judged_against_scratch_and_against_each_other(tmp_path):
  """The official-protocol transfer study: readers of one shape from random weights, from a Wikipedia encoder and from
  a task-text encoder; every interval is still computed, the claim (which needs the BiLSTM) is not measured."""
  by_role = {"scratch": _scored(tmp_path, "scratch", [[0, 0, 0, 0]] * 30),
             "wikipedia": _scored(tmp_path, "wikipedia", [[1, 1, 0, 0]] * 30),  # +50 over scratch in every paragraph
             "task_text": _scored(tmp_path, "task_text", [[1, 0, 0, 0]] * 30)}  # +25; 25 behind wikipedia
  text = transfer._claim_and_goals(by_role, {"wikipedia": 0, "task_text": 0})
  claim = table_rows(text, "| claim")[0]
  assert claim["verdict"].startswith("not measured")
  assert "from task_text 25.00 (+25.0 to +25.0 vs BERT from scratch; -25.0 to -25.0 vs from wikipedia)" in (
      claim["evidence (EM)"])
  assert "from wikipedia 50.00 (+50.0 to +50.0 vs BERT from scratch)" in claim["evidence (EM)"]
  assert "scratch by 5 EM: met (+50.00 EM; 95% interval +50.0 to +50.0)." in text
  # a study of the project's own encoders is not judged on the published encoder's goal; a study without them is
  assert "MiniLM" not in text
  assert "all-MiniLM-L6-v2 reaches 40 EM: not measured." in transfer._claim_and_goals(
      {"scratch": by_role["scratch"]}, {})


def test_a_reader_from_an_exported_encoder_is_credited_to_the_run_it_was_exported_from(tmp_path):
  root = tmp_path / "runs"
  # recorded one level deeper than the launcher's root (results/transfer_official/pretraining/...), and the export
  # took the checkpoint of step 3000, not the one the run's evaluation scored (3250)
  mlm = _workdir(root / "pretraining", "wikipedia/bert_mlm_budget", step=3500, seconds=140 * 60.0,
                 older={3000: 120 * 60.0, 3250: 130 * 60.0}, scores={"step": 3250, "mlm_accuracy": 0.3, "mlm_loss": 4.5})
  encoder = tmp_path / "encoders" / "wikipedia"  # what attnjax.export writes beside the Hugging Face files
  encoder.mkdir(parents=True)
  from attnjax.transfer import PROVENANCE_FILE  # pylint: disable=g-import-not-at-top
  (encoder / PROVENANCE_FILE).write_text(json.dumps(
      {"workdir": "/elsewhere/transfer/wikipedia/bert_mlm_budget/single/default", "checkpoint": "3000", "step": 3000,
       "dtype": "bfloat16"}))
  for reader, source in (("bert_scratch_budget", None), ("bert_from_mlm_budget", str(encoder))):
    config = importlib.import_module(f"experiments.squad_transfer.{reader}").get_config()
    run = root / "readers" / reader
    (run / "checkpoints" / "700" / "meta").mkdir(parents=True)
    (run / "checkpoints" / "700" / "meta" / "metadata").write_text(json.dumps({"train_seconds": 3600.0}))
    with config.train.unlocked():
      config.train.init_encoder_from = source
    (run / "config.json").write_text(config.to_json_best_effort())
    (run / "launch.json").write_text(json.dumps({"status": "done"}))
    (run / "metrics.test.json").write_text(json.dumps({"split": "test", "step": 700, "exact_match": 9.0, "f1": 19.0}))
  markdown = report.write_report([str(root)], str(tmp_path / "report"))
  row = next(row for row in table_rows(markdown, "## Transfer") if row["starts from"] == "wikipedia")
  tokens = 3000 * mlm.data.batch_size * mlm.data.seq_len
  assert row["pre-training"] == (f"2.0 h, 3,000 steps, {tokens / 1e6:.0f}M tokens (the checkpoint exported to "
                                 f"{encoder}; the run trained 2.3 h, 3,500 steps; "
                                 "pretraining/wikipedia/bert_mlm_budget/single/default)")
  # a goal missed sets the tokens of the same checkpoint against BERT's
  assert f"its pre-training saw {tokens / 1e6:.1f}M tokens" in markdown
  assert transfer.exported_from(str(tmp_path / "nowhere")) is None


def test_an_exported_encoder_kept_beside_the_records_is_not_read_as_a_run(tmp_path):
  root = tmp_path / "results"
  _workdir(root, "wikipedia/bert_mlm_budget", step=10, seconds=60.0, scores={"mlm_accuracy": 0.1, "mlm_loss": 7.0})
  encoder = root / "encoders" / "wikipedia"
  encoder.mkdir(parents=True)
  (encoder / "config.json").write_text(json.dumps({"architectures": ["RobertaPreLayerNormModel"]}))
  from attnjax.transfer import PROVENANCE_FILE  # pylint: disable=g-import-not-at-top
  assert [p.name for p in report.find_runs(root)] == ["wikipedia", "default"]  # a hand-made run: config.json alone
  (encoder / PROVENANCE_FILE).write_text(json.dumps({"workdir": "w", "checkpoint": "best", "step": 10}))
  assert [str(p.relative_to(root)) for p in report.find_runs(root)] == ["wikipedia/bert_mlm_budget/single/default"]
