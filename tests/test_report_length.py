"""BLEU by source length (attnjax.report.length): the bucketing by hand-counted words, per-bucket corpus BLEU, and the
report section written from a run workdir whose test split is read back through its own data config."""

import gzip
import json
import os

import pytest

from attnjax import report
from attnjax.config import base_config
from attnjax.data.tasks import use_task
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
  assert cells[2].endswith("(2)") and 0.0 < float(cells[2].split()[0]) < 100.0
  assert "## Other evaluated splits" in markdown and "| test2017 | BLEU 31.50 |" in markdown
  assert (out / "bleu_by_length.png").read_bytes().startswith(PNG_MAGIC)

  os.remove(run / "hypotheses.test.step10.txt")  # a run without its hypotheses is left out, not scored as 0
  markdown = report.write_report([str(tmp_path / "runs")], str(tmp_path / "report2"))
  assert "## BLEU by source length" not in markdown
