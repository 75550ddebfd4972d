"""SQuAD-format sources and the span batcher: what a QA training run reads, checked against the fixture's own text."""

import copy
import json
import logging

import ml_collections
import numpy as np
import pytest

from attnjax.data import squad
from attnjax.data.spans import SpanBatcher
from attnjax.families import load_task
from tests.squad_fixture import synthetic_squad, write_squad


def qa_config(directory, **overrides):
  cfg = dict(source="squad_json", dir=str(directory), splits={"train": "train.json", "validation": "dev.json"},
             vocab_size=56, max_question_len=16, max_context_len=64)
  cfg.update(overrides)
  return ml_collections.ConfigDict(cfg)


@pytest.fixture(scope="module")
def task(tmp_path_factory):
  directory = tmp_path_factory.mktemp("squad")
  write_squad(directory / "train.json", synthetic_squad(200, seed=0, unanswerable=0.25))
  write_squad(directory / "dev.json", synthetic_squad(20, seed=1, unanswerable=0.25))
  return load_task(qa_config(directory), str(directory / "work"))


def test_qa_task_has_splits_vocabulary_and_squad_metrics(task):
  assert task.kind == "span" and task.version == "2.0"
  assert sorted(task.splits) == ["train", "validation"] and len(task.splits["train"]) == 400
  assert task.vocab.decode(task.vocab.encode("what is alpha ?")) == "what is alpha ?"
  with pytest.raises(ValueError, match=r"split 'test' \(config.eval.split, or attnjax.evaluate --split\) is not one"):
    task.examples("test", train=False)


def test_every_row_holds_its_question_context_and_gold_span(task):
  examples = task.examples("train", train=True)
  batcher = SpanBatcher(examples, max_question_len=16, max_context_len=64, batch_size=16, shuffle=True, seed=3)
  seen = 0
  for batch in batcher.iterate_epoch(0):
    for row, index in enumerate(batch["example_index"]):
      if index < 0:
        assert batch["weights"][row] == 0 and not batch["context_mask"][row].any()
        continue
      e, seen = examples[index], seen + 1
      assert batch["weights"][row] == 1
      context = batch["context"][row][batch["context_mask"][row]]
      assert context.tolist() == e.context_ids and not batch["context"][row][~batch["context_mask"][row]].any()
      assert batch["question"][row][batch["question_mask"][row]].tolist() == e.question_ids
      assert bool(batch["is_impossible"][row]) == e.is_impossible
      if not e.is_impossible:  # the gold span, cut from the original context through the offsets, is the answer
        start, end = batch["start_positions"][row], batch["end_positions"][row]
        assert squad.token_span_to_text(e.context, e.offsets, start, end) == e.answers[0]
  assert seen == len(examples)


def test_shards_concatenate_to_the_global_batch_and_state_resumes(task):
  examples = task.examples("train", train=True)
  options = dict(max_question_len=16, max_context_len=64, batch_size=16, shuffle=True, seed=1)
  whole = SpanBatcher(examples, **options)
  shards = [SpanBatcher(examples, num_shards=2, shard_index=i, **options) for i in range(2)]
  for _ in range(3):
    batch, parts = next(whole), [next(s) for s in shards]
    for key in batch:
      np.testing.assert_array_equal(batch[key], np.concatenate([p[key] for p in parts]))
  state = json.loads(json.dumps(whole.state()))
  expected = next(whole)
  resumed = SpanBatcher(examples, **options)
  resumed.restore(state)
  for key, value in next(resumed).items():
    np.testing.assert_array_equal(value, expected[key])


def test_evaluation_examples_keep_unreachable_answers_which_training_cannot_use(task):
  assert len(task.examples("validation", train=False)) == len(task.splits["validation"])
  short = squad.encode_examples(task.splits["validation"], task.vocab, max_context_tokens=8, drop_unreachable=False)
  with pytest.raises(ValueError, match="have no token span .* drop_unreachable=True"):
    SpanBatcher(short, max_question_len=16, max_context_len=8, batch_size=4)
  with pytest.raises(ValueError, match="does not pack"):
    SpanBatcher(task.examples("train", train=True), max_question_len=16, max_context_len=64, batch_size=4, pack=True)


def test_one_file_is_split_by_article_into_heldout_sets(tmp_path):
  write_squad(tmp_path / "all.json", synthetic_squad(900, seed=2, paragraphs_per_article=3))
  cfg = qa_config(tmp_path, splits=None, path="all.json", heldout={"validation": 0.2, "test": 0.1})
  del cfg["splits"]
  splits = squad.load_qa_task(cfg)
  articles = {name: {q.title for q in questions} for name, questions in splits.items()}
  assert sum(len(a) for a in articles.values()) == 300  # every article (3 paragraphs each) in exactly one split
  assert sum(len(q) for q in splits.values()) == 1800
  assert not (articles["train"] & articles["validation"]) and not (articles["train"] & articles["test"])
  assert 0.1 < len(articles["validation"]) / 300 < 0.3 and 0.03 < len(articles["test"]) / 300 < 0.2
  # a path beside split files: they may name only splits the path does not give
  with pytest.raises(ValueError, match=r"config.data.splits names \[.*'train'.*\], which config.data.path='all.json' "
                                       "already gives"):
    squad.load_qa_task(qa_config(tmp_path, path="all.json"))


def test_a_second_file_adds_to_train_only_the_articles_the_split_file_lacks(tmp_path, caplog):
  main = synthetic_squad(60, seed=2, unanswerable=0.5, paragraphs_per_article=3)  # "article 0" .. "article 19"
  extra = copy.deepcopy(synthetic_squad(30, seed=3, paragraphs_per_article=3))  # "article 0" .. "article 9"
  for i, article in enumerate(extra["data"]):
    for paragraph in article["paragraphs"]:
      for question in paragraph["qas"]:
        question["id"] = "x" + question["id"]
    if i >= 5:  # new titles; the last of them carries one of the split file's paragraphs under its new title
      article["title"] = f"other {i}"
  extra["data"][9]["paragraphs"][0] = copy.deepcopy(main["data"][12]["paragraphs"][0])
  write_squad(tmp_path / "all.json", main)
  write_squad(tmp_path / "more.json", extra)
  cfg = qa_config(tmp_path, path="all.json", heldout={"validation": 0.2, "test": 0.2})
  del cfg["splits"]
  alone = squad.load_qa_task(cfg)
  cfg.train_also = "more.json"
  with caplog.at_level(logging.INFO):
    joined = squad.load_qa_task(cfg)
  expected = [q["id"] for article in extra["data"][5:9] for p in article["paragraphs"] for q in p["qas"]]
  assert [q.qid for q in joined["train"]] == [q.qid for q in alone["train"]] + expected
  assert {q.title for q in joined["train"][len(alone["train"]):]} == {"other 5", "other 6", "other 7", "other 8"}
  for split in ("validation", "test"):
    assert joined[split] == alone[split]
  assert "24 questions of 4 articles join the train split; 36 questions of 6 articles" in caplog.text
  cfg.train_also = "missing.json"  # read only when the train split is
  assert squad.load_qa_task(cfg, splits=["validation", "test"]) == {k: alone[k] for k in ("validation", "test")}


def test_malformed_squad_file_names_file_and_location(tmp_path):
  dataset = synthetic_squad(2)
  del dataset["data"][1]["paragraphs"][0]["qas"][0]["question"]
  write_squad(tmp_path / "train.json", dataset)
  write_squad(tmp_path / "dev.json", synthetic_squad(2))
  with pytest.raises(ValueError, match=r"train.json: data\[1\].paragraphs\[0\].qas\[0\] has no 'question' key"):
    load_task(qa_config(tmp_path), str(tmp_path / "work"))
