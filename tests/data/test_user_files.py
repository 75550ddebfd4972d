"""A user's own files and flags: documents in plain text, splits carved by hash where no file gives them, a
SentencePiece model of one's own, tfds datasets by name with their feature keys, data keys set on the command line
for the source it names, and the metric that ranks checkpoints following the data."""

from __future__ import annotations

import hashlib
import json

import ml_collections
import pytest

from attnjax import cli, families
from attnjax.config import base_config
from attnjax.data import articles, sources
from attnjax.data.tokenizer import SentencePieceVocab, load_or_train, train_sentencepiece


def share_of(key: str, seed: int = 0, sep: str = "\x00") -> float:
  """Where ``key`` falls in [0, 1): sha256 of ``seed sep key``, its first 8 bytes over 2^64 (the stated rule)."""
  return int.from_bytes(hashlib.sha256(f"{seed}{sep}{key}".encode()).digest()[:8], "big") / 2.0**64


# -------------------------------------------------------------------------------------------------- documents


def test_plain_text_is_one_document_a_line_or_blank_line_separated_documents(tmp_path):
  lines = tmp_path / "lines.txt"
  lines.write_text("first doc\nsecond doc\n\nthird doc\n")
  paragraphs = tmp_path / "paragraphs.txt"
  paragraphs.write_text("one a\none b\n\n\ntwo a\n\nthree\n")
  assert [a["text"] for a in articles.read_articles(paragraphs)] == ["one a\none b", "two a", "three"]
  assert [a["text"] for a in articles.read_articles(paragraphs, text_format="lines")] == [
      "one a", "one b", "", "", "two a", "", "three"]
  # auto: a blank line between texts makes paragraphs; explicit formats override
  assert [a["text"] for a in articles.read_articles(lines)] == ["first doc\nsecond doc", "third doc"]
  only_lines = tmp_path / "only.txt"
  only_lines.write_text("a b\nc d\n")
  assert [a["text"] for a in articles.read_articles(only_lines)] == ["a b", "c d"]
  assert all(a["title"] == a["text"] for a in articles.read_articles(only_lines))  # split by its own text
  with pytest.raises(ValueError, match="text_format must be one of"):
    articles.read_articles(only_lines, text_format="csv")


def test_json_lines_documents_take_their_keys_and_name_a_bad_line(tmp_path):
  path = tmp_path / "docs.jsonl"
  path.write_text(json.dumps({"body": "x y", "name": "X"}) + "\n\n" + json.dumps({"body": "z", "name": "Z"}) + "\n")
  assert articles.read_articles(path, text_key="body", title_key="name") == [
      {"title": "X", "text": "x y"}, {"title": "Z", "text": "z"}]
  with pytest.raises(ValueError, match=r"docs.jsonl, line 1: missing key 'text' \(keys: \['body', 'name'\]"):
    articles.read_articles(path)
  path.write_text('{"text": "ok"}\n[1, 2]\n')
  with pytest.raises(ValueError, match=r"docs.jsonl, line 2: expected a JSON object"):
    articles.read_articles(path)


def test_document_splits_carve_validation_out_of_a_train_file_by_title_hash(tmp_path):
  texts = [f"document number {i}" for i in range(200)]
  (tmp_path / "train.txt").write_text("\n".join(texts) + "\n")
  (tmp_path / "test.txt").write_text("a test document\nanother one\n")
  cfg = {"source": "lm_text", "dir": str(tmp_path), "splits": {"train": "train.txt", "test": "test.txt"}}
  out = articles.document_splits(cfg, {"validation": 0.005, "test": 0.005})
  expected = [t for t in texts if share_of(t, sep=":") < 0.05]  # the article rule: sha256("seed:title")
  assert out["validation"] == expected and 0 < len(expected) < 30
  assert out["train"] == [t for t in texts if t not in expected]
  assert out["test"] == ["a test document", "another one"]
  cfg["heldout"] = {}  # nothing carved
  assert "validation" not in articles.document_splits(cfg, {})
  (tmp_path / "test.txt").write_text("\n")
  with pytest.raises(ValueError, match=r"split 'test' has no document \(config.data.splits\['test'\]='test.txt'\)"):
    articles.document_splits({**cfg, "heldout": {}}, {})


# ---------------------------------------------------------------------------------------------- file sources


def _tsv(path, n: int, first: int = 0):
  path.write_text("".join(f"source {i}\ttarget {i}\n" for i in range(first, first + n)))


def test_a_train_file_without_validation_gets_one_carved_by_source_hash(tmp_path):
  _tsv(tmp_path / "train.tsv", 400)
  _tsv(tmp_path / "test.tsv", 5, first=1000)
  cfg = {"source": "tsv", "dir": str(tmp_path), "splits": {"train": "train.tsv", "test": "test.tsv"}}
  out = sources.load_text_task(cfg)
  carved = [(f"source {i}", f"target {i}") for i in range(400) if share_of(f"source {i}") < 0.05]
  assert out["validation"] == carved and 5 < len(carved) < 40
  assert len(out["train"]) + len(carved) == 400 and not set(out["train"]) & set(carved)
  assert len(out["test"]) == 5
  assert sources.load_text_task(cfg, splits=("validation",)) == {"validation": carved}  # reads train to carve it
  # explicit shares: the named splits the files lack, by name order
  out = sources.load_text_task({**cfg, "heldout": {"validation": 0.1, "dev2": 0.1}})
  assert out["dev2"] == [(f"source {i}", f"target {i}") for i in range(400) if share_of(f"source {i}") < 0.1]
  assert sorted(out) == ["dev2", "test", "train", "validation"]


def test_jsonl_summaries_from_one_file_split_by_document(tmp_path):
  rows = [{"body": f"document {i} text", "abstract": f"gist {i}"} for i in range(100)]
  (tmp_path / "a.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
  out = sources.load_text_task({"source": "jsonl", "path": str(tmp_path / "a.jsonl"), "document_key": "body",
                                "summary_key": "abstract"})
  pair = lambda r: (r["body"], r["abstract"])
  # the held-out splits take their shares in the order of their names: test first, then validation
  assert out["test"] == [pair(r) for r in rows if share_of(r["body"]) < 0.05]
  assert out["validation"] == [pair(r) for r in rows if 0.05 <= share_of(r["body"]) < 0.10]
  assert sum(len(v) for v in out.values()) == 100


def test_a_split_that_would_be_empty_is_named(tmp_path):
  _tsv(tmp_path / "p.tsv", 3)
  with pytest.raises(ValueError, match=r"config.data.heldout: split '(test|validation)' would be empty \(0.05 of the "
                                       r"distinct pairs of config.data.path="):
    sources.load_text_task({"source": "tsv", "path": str(tmp_path / "p.tsv")})
  (tmp_path / "empty.tsv").write_text("")
  with pytest.raises(ValueError, match=r"split 'train' \('.*empty.tsv'\) has no usable pair: the file is empty"):
    sources.load_text_task({"source": "tsv", "splits": {"train": str(tmp_path / "empty.tsv")}, "heldout": {}})


def test_a_cleared_shared_cache_keeps_a_language_models_files_in_its_workdir(tmp_path, monkeypatch):
  from attnjax.data.lm import LmTaskData  # pylint: disable=g-import-not-at-top
  (tmp_path / "corpus.txt").write_text("".join(f"the cat {i % 7} sat on mat {i % 5}\n" for i in range(200)))
  monkeypatch.chdir(tmp_path)
  cfg = {"source": "lm_text", "path": "corpus.txt", "vocab_size": 30, "seq_len": 16, "shared_cache_dir": "",
         "heldout": {"validation": 0.1}}
  task = LmTaskData(cfg, str(tmp_path / "run"))
  task.rows("train")
  assert sorted(p.name for p in tmp_path.iterdir()) == ["corpus.txt", "run"]  # nothing beside the workdir


# ------------------------------------------------------------------------------------------ a vocabulary given


def test_a_users_sentencepiece_model_is_copied_into_the_workdir_and_kept(tmp_path):
  texts = [f"word{i % 37} other{i % 11} thing" for i in range(300)]
  mine = train_sentencepiece(texts, tmp_path / "mine", 26)
  workdir = tmp_path / "run"
  never = lambda: pytest.fail("a given model is not trained")
  vocab = load_or_train(workdir, "spm", never, 8000, given=tmp_path / "mine.model")
  assert vocab.model_proto == mine.model_proto and (workdir / "spm.model").read_bytes() == mine.model_proto
  (tmp_path / "mine.model").unlink()  # the run keeps its copy: evaluation does not need the original
  assert load_or_train(workdir, "spm", never, 8000, given=tmp_path / "mine.model").size == 26
  other = train_sentencepiece(texts, tmp_path / "mine", 27)
  with pytest.raises(ValueError, match="differs from the model this workdir was trained with"):
    load_or_train(workdir, "spm", never, 8000, given=tmp_path / "mine.model")
  del other
  import sentencepiece as spm  # a model with sentencepiece's own ids (unk 0, no pad) is refused, naming the file
  spm.SentencePieceTrainer.train(sentence_iterator=iter(texts), model_prefix=str(tmp_path / "plain"), vocab_size=26,
                                 minloglevel=2)
  with pytest.raises(ValueError, match=r"plain.model has special ids"):
    load_or_train(tmp_path / "run2", "spm", never, 8000, given=tmp_path / "plain.model")
  with pytest.raises(FileNotFoundError, match="config.data.spm_model=.*nope.model.*no such file"):
    load_or_train(tmp_path / "run3", "spm", never, 8000, given=tmp_path / "nope.model")
  assert isinstance(vocab, SentencePieceVocab)


# --------------------------------------------------------------------------------------------------- tfds


@pytest.fixture
def tfds():
  return pytest.importorskip("tensorflow_datasets")


def _serving(examples):
  def as_data_source(builder, split, decoders=None, deserialize_method=None, **kwargs):
    del builder, split, decoders, deserialize_method, kwargs
    return list(examples)
  return as_data_source


def test_any_tfds_summarization_dataset_by_name_with_its_feature_keys(tfds):
  examples = [{"document": b"A long text.", "summary": b"Short."}]
  cfg = {"source": "tfds_summarization", "tfds_name": "gigaword", "document_key": "document",
         "summary_key": "summary", "tfds_backend": "data_source", "splits": {"test": "test"}}
  with tfds.testing.mock_data(as_data_source_fn=_serving(examples), policy=tfds.testing.MockPolicy.USE_CODE):
    assert sources.load_text_task(cfg) == {"test": [("A long text.", "Short.")]}
  with tfds.testing.mock_data(as_data_source_fn=_serving(examples), policy=tfds.testing.MockPolicy.USE_CODE), pytest.raises(ValueError,
                                                                                      match="no feature 'headline'"):
    sources.load_text_task({**cfg, "summary_key": "headline"})


def test_a_tfds_text_feature_is_a_language_models_documents(tfds):
  examples = [{"text": f"sentence {i} of the corpus".encode()} for i in range(60)]
  cfg = {"source": "tfds_lm", "tfds_name": "lm1b", "text_key": "text", "tfds_backend": "data_source",
         "splits": {"train": "train", "test": "test"}}
  with tfds.testing.mock_data(as_data_source_fn=_serving(examples), policy=tfds.testing.MockPolicy.USE_CODE):
    out = articles.document_splits(cfg, {"validation": 0.005})
  texts = [e["text"].decode() for e in examples]
  assert out["test"] == texts
  assert out["validation"] == [t for t in texts if share_of(t, sep=":") < 0.05]
  assert sorted(out["train"] + out["validation"]) == sorted(texts)


# ------------------------------------------------------------------------------------------ the command line


def _experiment(tmp_path, body: str = "") -> str:
  path = tmp_path / "exp.py"
  path.write_text("from attnjax.config import base_config\n\ndef get_config():\n  c = base_config()\n" + body +
                  "  return c\n")
  return str(path)


def test_data_keys_of_the_named_source_are_taken_and_typed(tmp_path):
  exp = _experiment(tmp_path)
  argv = ["prog", f"--config={exp}", "--config.data.source=tsv", "--config.data.path=1e5",
          "--config.data.src_column=2", "--config.data.heldout={'validation': 0.1}",
          "--config.data.splits.test=test.tsv", "--config.data.max_src_len=30"]
  taken = cli.check_config_overrides(argv)
  assert taken == argv[3:7]  # max_src_len is the experiment's own key: ml_collections sets it
  config = base_config()
  config.data.source = "tsv"
  cli.set_data_overrides(config, taken)
  assert config.data.path == "1e5" and config.data.src_column == 2  # a path stays text; a column is an int
  assert dict(config.data.heldout.items()) == {"validation": 0.1} and config.data.splits.test == "test.tsv"
  config.data.lock()
  with pytest.raises(AttributeError):  # the keys are set, not the config opened to any
    config.data.anything = 1


def test_a_data_key_no_source_reads_is_named_with_the_nearest_one(tmp_path):
  exp = _experiment(tmp_path)
  with pytest.raises(ValueError, match=r"--config.data.pth: config.data has no key 'pth', and its data source "
                                       r"reads none by that name \(did you mean path\?\)"):
    cli.check_config_overrides(["p", f"--config={exp}", "--config.data.source=tsv", "--config.data.pth=x"])
  # the experiment's own source decides when the command line names none: synthetic reads no path
  with pytest.raises(ValueError, match="config.data has no key 'path'"):
    cli.check_config_overrides(["p", f"--config={exp}", "--config.data.path=x"])
  config = base_config()
  config.data.source = "tsv"
  with pytest.raises(ValueError, match=r"--config.data.src_column: expected an integer, got 'two'"):
    cli.set_data_overrides(config, ["--config.data.src_column=two"])
  with pytest.raises(ValueError, match=r"--config.data.splits: expected a dict"):
    cli.set_data_overrides(config, ["--config.data.splits=train.tsv"])


# ------------------------------------------------------------------------------------------ the best metric


@pytest.mark.parametrize("data, expected", [
    ({"source": "synthetic", "task": "dates"}, ("exact_match", "max")),
    ({"source": "tsv"}, ("bleu", "max")),
    ({"source": "jsonl"}, ("rougeL", "max")),
    ({"source": "squad_json"}, ("f1", "max")),
    ({"source": "squad_json", "squad_version": "2.0"}, ("best_f1_spans", "max")),
    ({"source": "lm_text"}, ("bits_per_byte", "min")),
    ({"source": "mlm_text"}, ("mlm_accuracy", "max")),
])
def test_the_best_checkpoint_follows_the_data_unless_named(data, expected):
  config = base_config()
  with config.data.unlocked():
    config.data.update(data)
  families.resolve_best(config)
  assert (config.train.best_metric, config.train.best_mode) == expected
  config.train.best_metric, config.train.best_mode = "loss", "min"
  families.resolve_best(config)
  assert (config.train.best_metric, config.train.best_mode) == ("loss", "min")


def test_a_config_dict_and_a_plain_dict_split_alike(tmp_path):
  _tsv(tmp_path / "p.tsv", 300)
  plain = {"source": "tsv", "path": str(tmp_path / "p.tsv"), "heldout": {"validation": 0.1, "test": 0.1}}
  as_config = ml_collections.ConfigDict(plain)  # which gives its keys in name order
  assert sources.load_text_task(plain) == sources.load_text_task(as_config)
