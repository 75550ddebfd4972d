"""The docs' numbers against the records that produce them.

Every committed study page is regenerated from its committed records (``results/``, or an earlier report's
``results.json`` where the runs' workdirs are gone) into a temporary directory, from another directory than the
repository's, and must equal the committed page section for section; and every number of the README's results table
is computed here from a record and must be the one printed there. A section that reads the data sets (scores by
source or article length) is compared only where ``../shared/data`` is at hand.
"""

import json
import pathlib
import re

import pytest

from attnjax import report

ROOT = pathlib.Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data"

# page directory -> the records it is generated from (as the docs' command names them, from the repository root;
# several joined by commas, as --runs takes them)
PAGES = {
    "docs/study": "docs/study/results.json",
    "docs/transfer_study": "results/transfer",
    "docs/scaling_study": "results/scaling",
    "docs/summarization": "results/summarization",
    "docs/squad2_study": "results/squad2",
    "docs/squad_official_study": "results/squad_official",
    # the BiLSTM reader of the same protocol is the transfer claim's LSTM baseline
    "docs/transfer_official_study": "results/transfer_official,"
                                    "results/squad_official/squad_v1_official/bilstm/single/default",
}
# sections whose rows are recomputed from the data sets, not read from the records
DATA_SECTIONS = re.compile(r"by (source|article) length")

pytestmark = pytest.mark.xdist_group("tests/test_docs_records.py")


def sections(markdown: str) -> dict[str, str]:
  """``{heading: text}`` of a report page, split at its headings (the text before the first under ""); a heading
  that repeats is numbered from its second time on (``## A (2)``), so that every section is kept."""
  out, heading, lines = {}, "", []

  def close():
    key, n = heading, 1
    while key in out:
      n += 1
      key = f"{heading} ({n})"
    out[key] = "\n".join(lines).strip()

  for line in markdown.splitlines():
    if line.startswith("#"):
      close()
      heading, lines = line.strip(), []
    else:
      lines.append(line)
  close()
  return out


def regenerate(page: str, out: pathlib.Path) -> str:
  """The page's results.md as the report writes it from its records now, with the records named as the committed
  page names them (relative to the repository root) although the report ran elsewhere."""
  records = [ROOT / runs for runs in PAGES[page].split(",")]
  for runs in records:
    if not runs.exists():
      pytest.fail(f"{runs.relative_to(ROOT)}: records of {page} are not in the repository")
  markdown = report.write_report([str(runs) for runs in records], str(out))
  return markdown.replace(f"{ROOT}/", "")


def summarization_replays() -> dict[str, int]:
  """The replayed arms and their step targets, as the Makefile's ``SUMMARIZATION_REPLAYS`` gives them."""
  text = (ROOT / "Makefile").read_text().replace("\\\n", " ")
  line = next(line for line in text.splitlines() if line.startswith("SUMMARIZATION_REPLAYS ="))
  return {arm: int(steps) for arm, steps in (item.split(":") for item in line.split("=", 1)[1].split())}


def summarization_recorded() -> list[str]:
  """The summarization runs recorded so far (``make summarization-replays`` records each as it finishes)."""
  root = ROOT / "results/summarization"
  return sorted(str(run.relative_to(root)) for run in (root.rglob("launch.json") if root.exists() else [])
                if json.loads(run.read_text()).get("status") == "done" for run in [run.parent])


def summarization_complete() -> bool:
  expected = {"lead3"} | {f"cnn_dailymail_cpu/{arm}/single/default" for arm in summarization_replays()}
  return set(summarization_recorded()) >= expected


def recorded(page: str) -> bool:
  # the summarization page is regenerated from its replays once every arm and Lead-3 is recorded; until then it is
  # the earlier report's, and the replays recorded so far are checked against what the Makefile replays
  return page != "docs/summarization" or summarization_complete()


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
  """page -> regenerated markdown, each report run once with the current directory outside the repository (the
  output must not depend on it)."""
  with pytest.MonkeyPatch.context() as patch:
    # the figures are drawn but not rendered: the pages' numbers are what is compared, and rendering is most of the time
    patch.setattr("attnjax.report.figures.write_png", lambda figure, path: pathlib.Path(path).write_bytes(b""))
    patch.chdir(tmp_path_factory.mktemp("elsewhere"))
    return {page: regenerate(page, tmp_path_factory.mktemp(page.replace("/", "_"))) for page in PAGES
            if recorded(page)}


def compare_pages(committed: str, regenerated: str, data_at_hand: bool) -> list[str]:
  """What differs between a committed page and its regeneration, one line per section (empty: the same)."""
  ours, theirs = sections(committed), sections(regenerated)
  problems = []
  for heading, text in ours.items():
    if heading not in theirs:
      if DATA_SECTIONS.search(heading) and not data_at_hand:
        continue
      problems.append(f"section {heading!r}: on the committed page, not in the regenerated one")
    elif theirs[heading] != text:
      mine = text.splitlines()
      new = theirs[heading].splitlines()
      first = next((i for i, (a, b) in enumerate(zip(mine, new)) if a != b), min(len(mine), len(new)))
      problems.append(f"section {heading!r}, line {first + 1}: committed {mine[first] if first < len(mine) else None!r}"
                      f", regenerated {new[first] if first < len(new) else None!r}")
  problems += [f"section {heading!r}: regenerated, not on the committed page" for heading in theirs
               if heading not in ours]
  return problems


@pytest.mark.parametrize("page", sorted(PAGES))
def test_a_committed_study_page_is_what_its_records_regenerate(page, generated):
  if page not in generated:
    pytest.skip(f"{PAGES[page]} not recorded yet")
  committed = (ROOT / page / "results.md").read_text()
  problems = compare_pages(committed, generated[page], DATA.is_dir())
  assert not problems, f"{page}/results.md differs from `python -m attnjax.report --runs={PAGES[page]} " \
                       f"--out={page}`:\n" + "\n".join(problems)


def test_each_recorded_summarization_replay_is_the_one_the_makefile_describes():
  """A replayed arm trained to its step target with no clock limit (the coverage phase from the pointer-generator's
  step 2,400, evaluated at step 2,600 too), and was evaluated on validation and test; Lead-3 on both splits."""
  replays = summarization_replays()
  assert set(replays) == {"lstm_seq2seq", "lstm_bahdanau", "lstm_pointer_generator", "lstm_coverage", "transformer",
                          "transformer_copy"}
  root = ROOT / "results/summarization"
  for run in summarization_recorded():
    for split in ("validation", "test"):
      assert (root / run / f"metrics.{split}.json").exists(), f"{run}: not evaluated on {split}"
    if run == "lead3":
      continue
    arm = run.split("/")[1]
    train = json.loads((root / run / "config.json").read_text())["train"]
    assert train["steps"] == replays[arm] and not train["time_limit_minutes"], f"{run}: {train['steps']} steps"
    if arm == "lstm_coverage":  # and evaluated at step 2600, where the budgeted run's time was up
      assert train["init_at_step"] == 2400 and train["eval_every"] == 200
    metrics = json.loads((root / run / "metrics.test.json").read_text())
    assert metrics["examples"] == 4490 and metrics["step"] <= replays[arm]


def test_the_comparison_sees_a_changed_digit_a_missing_and_an_added_section():
  page = "# Results\n\n3 runs from `x`.\n\n## A\n\n| m | 30.50 |\n\n## B by source length\n\n| 1 |\n"
  assert compare_pages(page, page, True) == []
  assert compare_pages(page, page.replace("30.50", "30.51"), True) == [
      "section '## A', line 1: committed '| m | 30.50 |', regenerated '| m | 30.51 |'"]
  twice = page + "\n## A\n\n| m | 9.00 |\n"  # a heading that repeats: each section compared
  assert compare_pages(twice, twice, True) == []
  assert compare_pages(twice, twice.replace("30.50", "30.51"), True) == [
      "section '## A', line 1: committed '| m | 30.50 |', regenerated '| m | 30.51 |'"]
  assert compare_pages(twice, twice.replace("9.00", "9.01"), True) == [
      "section '## A (2)', line 1: committed '| m | 9.00 |', regenerated '| m | 9.01 |'"]
  without = page.split("## B")[0]
  assert compare_pages(page, without, False) == []  # the data are not here: that section cannot be regenerated
  assert compare_pages(page, without, True) == [
      "section '## B by source length': on the committed page, not in the regenerated one"]
  assert compare_pages(without, page, True) == ["section '## B by source length': regenerated, not on the committed page"]


# --------------------------------------------------------------------------------------------- the README's table


def readme_rows() -> list[list[str]]:
  """The cells of the README's results table, a list per row (the task cell carried down where it is empty)."""
  text = (ROOT / "README.md").read_text()
  table = text.split("## Results at CPU scale", 1)[1]
  rows, task = [], ""
  for line in table.splitlines():
    if not line.startswith("| ") or line.startswith("| task") or line.startswith("|---"):
      if rows and not line.startswith("|"):
        break
      continue
    cells = [c.strip() for c in line.strip().strip("|").split("|")]
    task = cells[0] or task
    rows.append([task] + cells[1:])
  return rows


def _records(source: str) -> list[dict]:
  """The run records of a report's results.json (a page's archive) or of a directory of records (read here)."""
  path = ROOT / source
  if path.suffix == ".json":
    return json.loads(path.read_text())["runs"]
  return report.collect([str(path)])


def _one(records, **fields) -> dict:
  found = [r for r in records if all(r.get(k) == v for k, v in fields.items())]
  assert len(found) == 1, f"{len(found)} records with {fields}"
  return found[0]


def _steps(n: int) -> str:
  return f"{n:,}"


def _squad2_scores(s: dict) -> str:
  """EM / F1 (HasAns F1 / NoAns F1), as the README and the SQuAD page print a SQuAD 2.0 evaluation."""
  return f"{s['exact_match']:.2f} / {s['f1']:.2f} ({s['HasAns_f1']:.2f} / {s['NoAns_f1']:.2f})"


# the README's task cells, each the key of its rows with the model cell
MULTI30K = "Multi30k en→de (test2016, sacreBLEU)"
MANYTHINGS = "manythings en→fr (sacreBLEU)"
CNN_DAILYMAIL = "CNN/DailyMail subset (4,490 articles, ROUGE-1/2/L)"
SQUAD = "SQuAD v1.1 dev, split by article (EM / F1)"
SQUAD2 = "SQuAD 2.0 dev, split by article (EM / F1, then HasAns / NoAns F1)"
SQUAD_OFFICIAL = "SQuAD v1.1 dev, all 10,570 questions, trained on SQuAD 1.1 train (EM / F1)"
WIKIPEDIA = "Wikipedia, held-out articles (bits/byte, nats/token)"
WIKIPEDIA_MLM = "Wikipedia, held-out articles, masked LM (loss in nats / accuracy)"
TASK_TEXT_MLM = "SQuAD 1.1 train paragraphs, held-out articles, masked LM (loss in nats / accuracy)"
STS = "STS Benchmark test (cosine Spearman)"


def expected_rows() -> dict[tuple[str, str], tuple[str, str]]:
  """The README's rows as the records give them: (task cell, model cell) -> (score, budget)."""
  study = _records("docs/study/results.json")
  transfer = _records("results/transfer")
  scaling = _records("results/scaling")
  summarization = _records("results/summarization" if summarization_complete() else "docs/summarization/results.json")
  sts = json.loads((ROOT / "results/sts/all-MiniLM-L6-v2.sts-test.json").read_text())
  rows = {}

  def row(task, model, score, budget):
    assert (task, model) not in rows, f"two rows of {(task, model)}"
    rows[(task, model)] = (score, budget)

  def bleu(run):
    return f"{_one(study, run=run)['scores']['bleu']:.2f}"

  row(MULTI30K, "LSTM seq2seq, no attention", bleu("multi30k/lstm_seq2seq/single/default") + " BLEU", "30 min")
  row(MULTI30K, "LSTM + Bahdanau attention", bleu("multi30k/lstm_bahdanau/single/default") + " BLEU", "30 min")
  row(MULTI30K, "ConvS2S", bleu("multi30k/convs2s/single/default") + " BLEU", "30 min")
  # the default recipe's run: the warm-up sweep's 400-step point became the default
  row(MULTI30K, "Transformer, 3 + 3 layers of 256", bleu("multi30k/transformer/warmup/warmup400") + " BLEU",
      "30 min")
  row(MULTI30K, "Transformer, dropout 0.1, batches of 2,048 tokens (two seeds)",
      f"{bleu('multi30k/transformer/batch60/tokens2048')} / {bleu('multi30k/transformer/batch60/tokens2048/seed1')} "
      "BLEU", "60 min")
  row(MANYTHINGS, "LSTM + Bahdanau / Transformer", f"{bleu('manythings_en_fr/lstm_bahdanau/single/default')} / "
      f"{bleu('manythings_en_fr/transformer/single/default')} BLEU", "30 min")

  def summ(label):
    return _one(summarization, label=label)

  def rouge(label):
    s = summ(label)["scores"]
    return f"{s['rouge1']:.2f} / {s['rouge2']:.2f} / {s['rougeL']:.2f}"

  def repeated(label):
    return summ(label)["metrics"]["repeated_trigrams"]

  pg, full = "LSTM + Bahdanau + pointer-generator", "LSTM + Bahdanau + pointer-generator + coverage"
  seq2seq, bahdanau, coverage = summ("LSTM seq2seq"), summ("LSTM + Bahdanau"), summ(full)
  # where the coverage phase started: its config names the step (a replay); the budgeted run's config names its clock
  # rule instead (85 minutes), which chose the pointer-generator's step 2,400 (the run's log)
  start = coverage["config"]["train"].get("init_at_step") or 2400
  row(CNN_DAILYMAIL, "LSTM seq2seq, no attention", rouge("LSTM seq2seq"), "90 min")
  row(CNN_DAILYMAIL, f"LSTM + Bahdanau attention ({_steps(bahdanau['trained_step'])} steps: its step costs "
      f"{seq2seq['trained_step'] / bahdanau['trained_step']:.1f}× seq2seq's)", rouge("LSTM + Bahdanau"), "90 min")
  row(CNN_DAILYMAIL, "+ pointer-generator (See et al. 2017)", rouge(pg), "90 min")
  row(CNN_DAILYMAIL, f"+ coverage (its last {coverage['trained_step'] - start} steps, from the pointer-generator's "
      f"step {_steps(start)}; {repeated(full):.1f}% repeated trigrams, from {repeated(pg):.1f}%)", rouge(full),
      "90 min")
  row(CNN_DAILYMAIL, f"Transformer, 3 + 3 layers of 256 (its checkpoint at step "
      f"{_steps(summ('Transformer')['step'])}; {repeated('Transformer'):.0f}% repeated trigrams)", rouge("Transformer"),
      "90 min")
  row(CNN_DAILYMAIL, f"+ copy attention (Gehrmann et al. 2018; {_steps(summ('Transformer + copy')['trained_step'])} "
      f"steps, no coverage: {repeated('Transformer + copy'):.0f}% repeated trigrams)", rouge("Transformer + copy"),
      "90 min")
  row(CNN_DAILYMAIL, "Lead-3 (the first three sentences)", rouge("Lead-3"), "—")

  def squad(run):
    s = _one(transfer, run=run)["scores"]
    return f"{s['exact_match']:.2f} / {s['f1']:.2f}"

  mlm = _one(transfer, run="wikipedia/bert_mlm/single/default")
  mlm_tokens = mlm["step"] * mlm["config"]["data"]["batch_size"] * mlm["config"]["data"]["seq_len"]
  row(SQUAD, "BiDAF-style BiLSTM reader", squad("squad_transfer/bilstm/single/default"), "60 min")
  row(SQUAD, "MiniLM-sized BERT reader, from scratch", squad("squad_transfer/bert_scratch/single/default"), "60 min")
  row(SQUAD, f"the same, from this project's masked LM ({mlm['train_seconds'] / 3600:.0f} h on Wikipedia, "
      f"{mlm_tokens / 1e6:.1f}M tokens)", squad("squad_transfer/bert_from_mlm/single/default"), "60 min")
  row(SQUAD, "the same, from `all-MiniLM-L6-v2`", squad("squad_transfer/bert_from_minilm/single/default"), "60 min")

  official = _records("results/squad_official")
  minilm = _one(official, run="squad_v1_official/bert_from_minilm/single/default")
  scored = json.loads((ROOT / "results/squad_official" / minilm["run"] / "metrics.test.json").read_text())
  assert scored["examples"] == 10570  # every question of the official dev set
  bilstm = _one(official, run="squad_v1_official/bilstm/single/default")
  assert bilstm["metrics"]["examples"] == 10570 and bilstm["metrics"]["weights"] == "average"
  row(SQUAD_OFFICIAL, f"BiDAF-style BiLSTM reader, scored with its weights' moving average (its checkpoint at step "
      f"{_steps(bilstm['step'])})", f"{bilstm['scores']['exact_match']:.2f} / {bilstm['scores']['f1']:.2f}",
      f"{bilstm['config']['train']['time_limit_minutes']:.0f} min")
  row(SQUAD_OFFICIAL, f"MiniLM-sized BERT reader, from `all-MiniLM-L6-v2` ({_steps(minilm['step'])} steps of "
      f"{minilm['config']['data']['batch_size']} windows)",
      f"{minilm['scores']['exact_match']:.2f} / {minilm['scores']['f1']:.2f}",
      f"{minilm['config']['train']['time_limit_minutes']:.0f} min")
  scratch = _one(official, run="squad_v1_official/bert_scratch/single/default")
  assert scratch["metrics"]["examples"] == 10570
  row(SQUAD_OFFICIAL, f"the same, from scratch ({_steps(scratch['step'])} steps of "
      f"{scratch['config']['data']['batch_size']} windows)",
      f"{scratch['scores']['exact_match']:.2f} / {scratch['scores']['f1']:.2f}",
      f"{scratch['config']['train']['time_limit_minutes']:.0f} min")
  transfer = _records("results/transfer_official")
  budget_scratch = _one(transfer, run="squad_v1_official/bert_scratch_budget/single/default")
  assert budget_scratch["metrics"]["examples"] == 10570
  m = budget_scratch["config"]["model"]
  row(SQUAD_OFFICIAL, f"BERT reader of the pre-trained encoders' shape (pre-norm {m['num_layers']} × {m['d_model']}), "
      f"from scratch ({_steps(budget_scratch['step'])} steps of {budget_scratch['config']['data']['batch_size']} "
      "windows)", f"{budget_scratch['scores']['exact_match']:.2f} / {budget_scratch['scores']['f1']:.2f}",
      f"{budget_scratch['config']['train']['time_limit_minutes']:.0f} min")
  pretraining = _records("results/transfer_official/pretraining")
  encoders = {"wikipedia": ("Wikipedia", "wikipedia/bert_mlm_budget"),
              "task_text": ("SQuAD 1.1 train's paragraphs", "squad_v1_official/bert_mlm_task_text")}
  for encoder, (corpus, mlm_run) in encoders.items():
    readers = [r for r in transfer if str(r["config"]["train"].get("init_encoder_from", "")).endswith(
        f"results/transfer_official/encoders/{encoder}")]
    if not readers:  # that reader is not recorded yet
      continue
    reader, = readers
    assert reader["metrics"]["examples"] == 10570 and reader["config"]["model"] == budget_scratch["config"]["model"]
    mlm = _one(pretraining, run=f"{mlm_run}/single/default")
    mlm_tokens = mlm["step"] * mlm["config"]["data"]["batch_size"] * mlm["config"]["data"]["seq_len"]
    row(SQUAD_OFFICIAL, f"the same, from this project's masked LM on {corpus} "
        f"({mlm['config']['train']['time_limit_minutes']:.0f} min, {mlm_tokens / 1e6:.1f}M tokens; "
        f"{_steps(reader['step'])} steps of {reader['config']['data']['batch_size']} windows)",
        f"{reader['scores']['exact_match']:.2f} / {reader['scores']['f1']:.2f}",
        f"{reader['config']['train']['time_limit_minutes']:.0f} min")

  squad2 = _records("results/squad2")

  def squad2_row(run):
    return _squad2_scores(_one(squad2, run=run)["scores"])

  row(SQUAD2, 'always answering "no answer"', squad2_row("no_answer"), "—")
  row(SQUAD2, "BiDAF-style BiLSTM reader with a learned no-answer score",
      squad2_row("squad_v2_cpu/bilstm/single/default"), "60 min")
  row(SQUAD2, "MiniLM-sized BERT reader with the [CLS] null score, from scratch",
      squad2_row("squad_v2_cpu/bert_scratch/single/default"), "60 min")
  row(SQUAD2, "the same, from `all-MiniLM-L6-v2`", squad2_row("squad_v2_cpu/bert_from_minilm/single/default"),
      "60 min")
  v2_official = _one(official, run="squad_v2_with_v1_train/bert_from_minilm/single/default")
  assert v2_official["config"]["data"]["paragraph_negatives"] == 0.5
  row(SQUAD2, "the same, trained also on SQuAD 1.1 train, with unanswerable questions from other paragraphs",
      _squad2_scores(v2_official["scores"]), f"{v2_official['config']['train']['time_limit_minutes']:.0f} min")
  repeats = _one(official, run="squad_v2_with_v1_train/bert_from_minilm_repeats/single/default")
  assert repeats["config"]["data"]["unanswerable_repeats"] == 10
  assert not repeats["config"]["data"]["paragraph_negatives"]
  row(SQUAD2, "the same, trained also on SQuAD 1.1 train, each unanswerable question ten times an epoch",
      _squad2_scores(repeats["scores"]), f"{repeats['config']['train']['time_limit_minutes']:.0f} min")
  averaged = _one(official, run="squad_v2_with_v1_train/bert_from_minilm_batch16_ema/single/default")
  assert averaged["config"]["data"]["paragraph_negatives"] == 0.5 and averaged["config"]["train"]["ema_decay"]
  assert averaged["config"]["data"]["batch_size"] == 16 and averaged["metrics"]["weights"] == "average"
  row(SQUAD2, "the same, trained also on SQuAD 1.1 train, with unanswerable questions from other paragraphs, batches "
      "of 16 and the weights' moving average", _squad2_scores(averaged["scores"]),
      f"{averaged['config']['train']['time_limit_minutes']:.0f} min")

  lm = _one(scaling, run="wikipedia/lm/size/l4d192")
  from attnjax.report.scaling import non_embedding_params  # pylint: disable=g-import-not-at-top
  row(WIKIPEDIA, f"decoder-only LM, 4 × 192 ({non_embedding_params(lm['config']) / 1e6:.1f}M non-embedding params)",
      f"{lm['scores']['bits_per_byte']:.2f} / {lm['scores']['lm_loss']:.2f}", f"{lm['train_seconds'] / 60:.0f} min")
  for task, run in ((WIKIPEDIA_MLM, "wikipedia/bert_mlm_budget"),
                    (TASK_TEXT_MLM, "squad_v1_official/bert_mlm_task_text")):
    mlm = _one(pretraining, run=f"{run}/single/default")
    m = mlm["config"]["model"]
    mlm_tokens = mlm["step"] * mlm["config"]["data"]["batch_size"] * mlm["config"]["data"]["seq_len"]
    row(task, f"BERT encoder, pre-norm {m['num_layers']} × {m['d_model']}, the budget recipe "
        f"({_steps(mlm['step'])} steps, {mlm_tokens / 1e6:.1f}M tokens)",
        f"{mlm['scores']['mlm_loss']:.2f} / {100 * mlm['scores']['mlm_accuracy']:.1f}%",
        f"{mlm['config']['train']['time_limit_minutes']:.0f} min")
  # MTEB's number is the published one this run is checked against
  row(STS, "`all-MiniLM-L6-v2` imported from its safetensors", f"{sts['cosine_spearman']:.5f} (MTEB: 0.82032)", "—")
  return rows


def test_every_number_of_the_readme_results_table_comes_from_a_record():
  expected = expected_rows()
  keys = [(task, model) for task, model, _, _ in readme_rows()]
  shared = [key for key in keys if keys.count(key) > 1]
  assert not shared, f"README rows that share a task and model: {shared}"
  printed = {(task, model): (score, budget) for task, model, score, budget in readme_rows()}
  for key, cells in printed.items():
    assert key in expected, f"README row {key}: no record gives it"
    assert cells == expected[key], f"README row {key}: the records give {expected[key]}"
  assert set(printed) == set(expected), f"rows the records give that the README lacks: {set(expected) - set(printed)}"


# ------------------------------------------------------------ the SQuAD 2.0 page's tables of the readers' variants

# heading -> the run directory (a glob) of that table's reader in each record
SQUAD2_VARIANT_TABLES = {"### The MiniLM reader's variants": "bert_from_minilm*",
                         "### The BiLSTM reader's variants": "bilstm*"}


def squad2_variant_rows(heading: str) -> dict[str, list[str]]:
  """The record cell (a ``results/`` directory) -> the other cells after it, of the SQuAD docs page's variants table
  under ``heading``."""
  text = (ROOT / "docs/study_squad.md").read_text()
  assert heading in text, f"docs/study_squad.md has no {heading!r} section"
  rows = {}
  for line in text.split(heading, 1)[1].lstrip().splitlines():
    if not line.startswith("|"):
      break
    cells = [c.strip() for c in line.strip().strip("|").split("|")]
    if cells[0] == "variant" or cells[0].startswith("---"):
      continue
    record = re.fullmatch(r"`(results/[\w/]+)`", cells[1])
    assert record, f"docs/study_squad.md {heading!r}: {cells[1]!r} does not name a results directory"
    rows[record.group(1)] = cells[2:]
  return rows


def squad2_variant_cells(record: str, reader: str) -> list[str]:
  """What a variants row must read, from the metrics files of the ``reader`` run (a glob) in ``record``: steps,
  validation F1, test EM / F1 (HasAns / NoAns F1), the threshold chosen on validation, the test no-answer AUC and the
  test HasAns F1 with every question answered by its best span ("—" where an earlier evaluation did not write
  them)."""
  runs = list((ROOT / record).glob(f"squad_v2_cpu/{reader}/single/default/metrics.test.json"))
  assert len(runs) == 1, f"{record}: {len(runs)} {reader} readers evaluated on test"
  test = json.loads(runs[0].read_text())
  validation = json.loads((runs[0].parent / "metrics.validation.json").read_text())
  optional = lambda key, digits: f"{test[key]:.{digits}f}" if key in test else "—"
  return [_steps(test["step"]), f"{validation['f1']:.2f}", _squad2_scores(test), f"{test['no_answer_threshold']:.2f}",
          optional("no_answer_auc", 3), optional("HasAns_f1_spans", 2)]


@pytest.mark.parametrize("heading", sorted(SQUAD2_VARIANT_TABLES))
def test_every_number_of_the_squad2_variants_tables_comes_from_its_record(heading):
  rows = squad2_variant_rows(heading)
  assert "results/squad2" in rows, f"{heading!r}: the table leaves out the study's own reader"
  for record, cells in rows.items():
    expected = squad2_variant_cells(record, SQUAD2_VARIANT_TABLES[heading])
    assert cells == expected, f"{heading!r} row {record}: its record gives {expected}"
