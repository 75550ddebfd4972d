"""Text sources: parallel / TSV / JSONL files, held-out splits, config dispatch, and the tfds sources on mock data."""

import gzip
import json
import logging

import ml_collections
import pytest

from attnjax.data import sources
from attnjax.data.sources import (jsonl_summarization, load_text_task, parallel_text, split_by_source, tsv_pairs)

EN = ["Two dogs run.", "A man sleeps.", "Children play outside."]
DE = ["Zwei Hunde rennen.", "Ein Mann schläft.", "Kinder spielen draußen."]


def write(path, lines, *, gz=False, ending="\n"):
  data = "".join(line + ending for line in lines).encode("utf-8")
  path.write_bytes(gzip.compress(data) if gz else data)
  return path


# ------------------------------------------------------------------------------------------------ parallel text


def test_parallel_text_round_trip_plain_and_gzipped(tmp_path):
  plain = parallel_text(write(tmp_path / "a.en", EN), write(tmp_path / "a.de", DE))
  gzipped = parallel_text(write(tmp_path / "b.en.gz", EN, gz=True), write(tmp_path / "b.de.gz", DE, gz=True))
  assert plain == gzipped == list(zip(EN, DE))


def test_gzip_is_recognised_by_its_magic_bytes_without_the_suffix(tmp_path):
  pairs = parallel_text(write(tmp_path / "c.en", EN, gz=True), write(tmp_path / "c.de", DE))
  assert pairs == list(zip(EN, DE))


def test_line_ends_and_odd_separators_do_not_split_segments(tmp_path):
  # "\r\n" ends are removed; \x0b and U+2028 inside a line must not break it (str.splitlines would).
  src = write(tmp_path / "d.en", ["a\x0bb", "c\u2028d"], ending="\r\n")
  tgt = write(tmp_path / "d.de", ["x", "y"])
  assert parallel_text(src, tgt) == [("a\x0bb", "x"), ("c\u2028d", "y")]


def test_unequal_line_counts_name_both_files_and_counts(tmp_path):
  src, tgt = write(tmp_path / "a.en", EN), write(tmp_path / "a.de", DE[:2])
  with pytest.raises(ValueError, match=r"a\.en has 3 lines, .*a\.de has 2"):
    parallel_text(src, tgt)


def test_invalid_utf8_names_the_file_and_line(tmp_path):
  src = tmp_path / "bad.en"
  src.write_bytes(b"fine\nalso fine\nbroken \xff here\n")
  tgt = write(tmp_path / "bad.de", DE)
  with pytest.raises(ValueError, match=r"file .*bad\.en, line 3: invalid UTF-8"):
    parallel_text(src, tgt)


def test_empty_pairs_are_skipped_and_counted_in_the_log(tmp_path, caplog):
  src = write(tmp_path / "e.en", ["one", "", "three", "four", "  "])
  tgt = write(tmp_path / "e.de", ["eins", "zwei", "", "vier", "fünf"])
  with caplog.at_level(logging.WARNING):
    pairs = parallel_text(src, tgt)
  assert pairs == [("one", "eins"), ("four", "vier")]
  assert any("skipped 3 of 5 pairs with an empty side (first: line 2)" in r.getMessage() for r in caplog.records)


def test_max_chars_skips_and_counts_over_long_pairs(tmp_path, caplog):
  src = write(tmp_path / "f.en", ["short", "x" * 50])
  tgt = write(tmp_path / "f.de", ["kurz", "y"])
  with caplog.at_level(logging.WARNING):
    assert parallel_text(src, tgt, max_chars=10) == [("short", "kurz")]
  assert any("skipped 1 of 2 pairs with a side longer than max_chars=10" in r.getMessage() for r in caplog.records)


# ------------------------------------------------------------------------------------------------------ TSV / JSONL


def test_tsv_reads_the_chosen_columns(tmp_path):
  path = write(tmp_path / "fra.txt", ["Go.\tVa !\tCC-BY 2.0 (France) Attribution: tatoeba.org", "Hi.\tSalut !"],
               gz=True)
  assert tsv_pairs(path) == [("Go.", "Va !"), ("Hi.", "Salut !")]
  assert tsv_pairs(path, src_column=1, tgt_column=0) == [("Va !", "Go."), ("Salut !", "Hi.")]


def test_tsv_line_with_too_few_columns_names_file_and_line(tmp_path):
  path = write(tmp_path / "fra.txt", ["Go.\tVa !", "Hi. Salut !"])
  with pytest.raises(ValueError, match=r"fra\.txt, line 2: expected at least 2 tab-separated columns .*found 1"):
    tsv_pairs(path)


def test_tsv_empty_lines_and_sides_are_counted(tmp_path, caplog):
  path = write(tmp_path / "fra.txt", ["Go.\tVa !", "", "Hi.\t"])
  with caplog.at_level(logging.WARNING):
    assert tsv_pairs(path) == [("Go.", "Va !")]
  assert any("skipped 2 of 3 pairs" in r.getMessage() for r in caplog.records)


def test_jsonl_reads_documents_and_summaries(tmp_path):
  records = [{"document": "A long text.", "summary": "Short.", "id": 1}, {"document": "Another.", "summary": "S."}]
  path = write(tmp_path / "train.jsonl", [json.dumps(r) for r in records] + [""])
  assert jsonl_summarization(path) == [("A long text.", "Short."), ("Another.", "S.")]
  renamed = write(tmp_path / "cnn.jsonl", [json.dumps({"article": "Text.", "highlights": "Gist."})])
  assert jsonl_summarization(renamed, "article", "highlights") == [("Text.", "Gist.")]


@pytest.mark.parametrize("line, message", [
    ('{"document": "x", "summary": ', r"line 2: invalid JSON"),
    ('{"document": "x"}', r"line 2: missing key 'summary' \(keys: \['document'\]\)"),
    ('["x", "y"]', r"line 2: expected a JSON object"),
    ('{"document": "x", "summary": 3}', r"line 2: 'summary' must be a string"),
])
def test_jsonl_errors_name_file_and_line(tmp_path, line, message):
  path = write(tmp_path / "bad.jsonl", [json.dumps({"document": "d", "summary": "s"}), line])
  with pytest.raises(ValueError, match=r"bad\.jsonl, " + message):
    jsonl_summarization(path)


def test_split_by_source_keeps_each_source_in_one_split_whatever_the_order():
  pairs = [(f"sentence {i % 300}", f"traduction {i}") for i in range(900)]
  splits = split_by_source(pairs, {"validation": 0.1, "test": 0.1})
  assert sum(len(v) for v in splits.values()) == len(pairs)
  where = {src: name for name, split in splits.items() for src, _ in split}
  assert all(where[src] == name for name, split in splits.items() for src, _ in split)  # no source in two splits
  assert 15 <= len({s for s, _ in splits["validation"]}) <= 45  # about 10% of 300 sources
  reordered = split_by_source(pairs[::-1], {"validation": 0.1, "test": 0.1})
  assert {k: sorted(v) for k, v in reordered.items()} == {k: sorted(v) for k, v in splits.items()}
  assert split_by_source(pairs, {"validation": 0.1, "test": 0.1}, seed=1) != splits
  with pytest.raises(ValueError, match="sum to less than 1"):
    split_by_source(pairs, {"validation": 0.6, "test": 0.5})


# ------------------------------------------------------------------------------------------------ config dispatch


def test_load_text_task_reads_parallel_text_splits_by_file_stem(tmp_path):
  write(tmp_path / "train.en.gz", EN, gz=True)
  write(tmp_path / "train.de.gz", DE, gz=True)
  write(tmp_path / "val.en", EN[:1])
  write(tmp_path / "val.de", DE[:1])
  cfg = ml_collections.ConfigDict(dict(source="parallel_text", dir=str(tmp_path), src_lang="en", tgt_lang="de",
                                       splits={"train": "train", "validation": "val"}))
  assert load_text_task(cfg) == {"train": list(zip(EN, DE)), "validation": [(EN[0], DE[0])]}
  cfg.src_lang, cfg.tgt_lang = "de", "en"
  assert load_text_task(cfg)["validation"] == [(DE[0], EN[0])]


def test_load_text_task_splits_one_tsv_file_into_heldout_sets(tmp_path):
  write(tmp_path / "fra.txt", [f"English {i}.\tFrançais {i}." for i in range(200)])
  cfg = ml_collections.ConfigDict(dict(source="tsv", dir=str(tmp_path), path="fra.txt",
                                       heldout={"validation": 0.1, "test": 0.1}))
  splits = load_text_task(cfg)
  assert set(splits) == {"train", "validation", "test"} and sum(map(len, splits.values())) == 200
  assert all(len(splits[name]) > 0 for name in splits)


def test_load_text_task_reads_jsonl_splits_from_a_plain_dict(tmp_path):
  write(tmp_path / "train.jsonl", [json.dumps({"text": "Doc.", "gist": "D."})])
  cfg = {"source": "jsonl", "dir": str(tmp_path), "splits": {"train": "train.jsonl"}, "document_key": "text",
         "summary_key": "gist", "heldout": {}}  # no validation carved out of train
  assert load_text_task(cfg) == {"train": [("Doc.", "D.")]}


def test_unknown_source_names_the_key_and_lists_valid_ones():
  with pytest.raises(ValueError, match=r"config\.data\.source must be one of \['jsonl', 'parallel_text', 'tfds_"):
    load_text_task({"source": "csv"})


def test_missing_required_key_is_named(tmp_path):
  with pytest.raises(ValueError, match=r"config\.data\.src_lang is required for config\.data\.source='parallel_text'"):
    load_text_task({"source": "parallel_text", "dir": str(tmp_path), "splits": {"train": "train"}})
  with pytest.raises(FileNotFoundError, match=r"train\.en nor .*train\.en\.gz"):
    load_text_task({"source": "parallel_text", "dir": str(tmp_path), "src_lang": "en", "tgt_lang": "de",
                    "splits": {"train": "train"}})


# ------------------------------------------------------------------------------------------------------------ tfds
# Without TensorFlow, tfds.testing.mock_data can mock tfds.data_source (NumPy examples) but not tfds.load (which
# builds a tf.data pipeline): the data_source back end is tested here, the load back end only where TF is installed.


@pytest.fixture
def tfds():
  return pytest.importorskip("tensorflow_datasets")


def fixed_data_source(examples, seen_splits=None):
  """An ``as_data_source_fn`` for mock_data that serves ``examples`` (bytes text, as real ArrayRecord data gives)."""

  def as_data_source(builder, split, decoders=None, deserialize_method=None, **kwargs):
    del builder, decoders, deserialize_method, kwargs
    if seen_splits is not None:
      seen_splits.append(split)
    return list(examples)

  return as_data_source


def test_tfds_translation_reads_the_language_features(tfds):
  examples = [{"de": "Hallo Welt".encode(), "en": b"Hello world"}, {"de": b"", "en": b"dropped"}]
  with tfds.testing.mock_data(as_data_source_fn=fixed_data_source(examples)):
    pairs = sources.tfds_translation("wmt14_translate/de-en", "en", "de", "train", backend="data_source")
  assert pairs == [("Hello world", "Hallo Welt")]


def test_tfds_translation_on_generated_mock_data(tfds):
  with tfds.testing.mock_data(num_examples=5):
    pairs = sources.tfds_translation(split="validation", backend="data_source")
  assert len(pairs) == 5 and all(isinstance(s, str) and isinstance(t, str) and s and t for s, t in pairs)
  with tfds.testing.mock_data(num_examples=2), pytest.raises(ValueError, match=r"no feature 'fr' \(features: \["):
    sources.tfds_translation(src_lang="fr", backend="data_source")


@pytest.mark.parametrize("name, keys", [("cnn_dailymail", ("article", "highlights")),
                                        ("xsum", ("document", "summary"))])
def test_tfds_summarization_reads_each_datasets_feature_names(tfds, name, keys):
  with tfds.testing.mock_data(num_examples=4):
    pairs = sources.tfds_summarization(name, "test", backend="data_source")
  assert len(pairs) == 4 and all(doc and summary for doc, summary in pairs)
  examples = [{keys[0]: b"Line one.\nLine two.", keys[1]: b"Gist.\nMore."}]
  with tfds.testing.mock_data(as_data_source_fn=fixed_data_source(examples)):
    assert sources.tfds_summarization(name, backend="data_source") == [("Line one.\nLine two.", "Gist.\nMore.")]
  with pytest.raises(ValueError, match="unknown summarization dataset 'gigaword'"):
    sources.tfds_summarization("gigaword")


def test_tfds_squad_gives_questions_with_answers_and_impossibility(tfds):
  examples = [
      {"id": b"q1", "title": b"T", "question": b"Who?", "context": "Ana läuft.".encode(),
       "answers": {"text": [b"Ana"], "answer_start": [0]}, "is_impossible": False},
      {"id": b"q2", "title": b"T", "question": b"Why?", "context": b"No reason.",
       "answers": {"text": [], "answer_start": []}, "is_impossible": True,
       "plausible_answers": {"text": [b"reason"], "answer_start": [3]}},
  ]
  with tfds.testing.mock_data(as_data_source_fn=fixed_data_source(examples)):
    questions = sources.tfds_squad("squad/v2.0", "validation", backend="data_source")
  assert [q.qid for q in questions] == ["q1", "q2"]
  assert questions[0].answers == (("Ana", 0),) and questions[0].context == "Ana läuft."
  assert questions[1].is_impossible and questions[1].answers == ()
  v11 = [{"id": b"q3", "title": b"T", "question": b"What?", "context": b"A cat.",
          "answers": {"text": [b"cat", b"A cat"], "answer_start": [2, 0]}}]
  with tfds.testing.mock_data(as_data_source_fn=fixed_data_source(v11)):
    (question,) = sources.tfds_squad("squad/v1.1", "validation", backend="data_source")
  assert question.answers == (("cat", 2), ("A cat", 0)) and not question.is_impossible
  with pytest.raises(ValueError, match="unknown SQuAD dataset"):
    sources.tfds_squad("squad/v3")


def test_per_process_slicing_reads_this_hosts_even_split(tfds):
  seen = []
  with tfds.testing.mock_data(as_data_source_fn=fixed_data_source([{"de": b"a", "en": b"b"}], seen)):
    sources.tfds_translation(split="train", backend="data_source")
    sources.tfds_translation(split="train", backend="data_source", process_index=1, process_count=3)
  assert seen[0] == "train"
  assert str(seen[1]) == str(tfds.even_splits("train", 3)[1])
  with pytest.raises(ValueError, match="process_index < process_count"):
    sources.host_split("train", 3, 3)


def test_load_text_task_dispatches_to_tfds(tfds):
  cfg = ml_collections.ConfigDict(dict(source="tfds_translation", tfds_name="wmt14_translate/de-en", src_lang="de",
                                       tgt_lang="en", splits={"train": "train[:10]", "test": "test"},
                                       tfds_backend="data_source"))
  with tfds.testing.mock_data(num_examples=3):
    splits = load_text_task(cfg)
  assert set(splits) == {"train", "test"} and all(len(v) == 3 for v in splits.values())
  cfg = {"source": "tfds_summarization", "tfds_name": "xsum", "tfds_backend": "data_source"}
  with tfds.testing.mock_data(num_examples=2):
    assert {k: len(v) for k, v in load_text_task(cfg).items()} == {"train": 2, "validation": 2, "test": 2}


def test_tfds_load_backend_with_tensorflow(tfds):
  pytest.importorskip("tensorflow")  # tfds.load builds a tf.data pipeline, so its mock needs TensorFlow
  with tfds.testing.mock_data(num_examples=3):
    assert len(sources.tfds_translation(split="train", backend="load")) == 3
    assert len(sources.tfds_summarization("xsum", "train", backend="load")) == 3


def test_missing_prepared_data_error_says_how_to_prepare_it(tfds, monkeypatch):
  def not_prepared(name, **kwargs):
    raise AssertionError(f"Dataset {name}: could not find data in {kwargs['data_dir']}")

  monkeypatch.setattr(tfds, "data_source", not_prepared)
  with pytest.raises(AssertionError, match="could not find data") as info:
    sources.tfds_summarization("xsum", data_dir="/nowhere", backend="data_source")
  assert "tfds build xsum" in str(info.value.__notes__) and "tfds_download=True" in str(info.value.__notes__)


def test_unknown_tfds_backend_is_refused(tfds):
  with pytest.raises(ValueError, match="backend must be one of"):
    sources.tfds_translation(backend="grain")
