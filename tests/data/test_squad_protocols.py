"""SQuAD's splits as the literature uses them: a train file with held-out validation articles beside an evaluation file
of its own (the official protocol), and SQuAD 2.0 with SQuAD 1.1's train questions; no evaluated article or paragraph
is ever in train."""

import copy
import dataclasses
import pathlib

import numpy as np
import pytest

from attnjax import config as config_lib
from attnjax import families
from attnjax.data import squad
from attnjax.data.catalogue import use_task
from attnjax.families import span_qa
from tests.squad_fixture import synthetic_squad, write_squad

DATA = pathlib.Path(__file__).resolve().parents[2].parent / "shared" / "data"


def _files(tmp_path):
  """A train file of 40 one-paragraph articles and an evaluation file of 10 others (titles and texts apart)."""
  train = synthetic_squad(40, seed=0)
  dev = synthetic_squad(10, seed=1)
  for article in dev["data"]:
    article["title"] = "dev " + article["title"]
  write_squad(tmp_path / "train.json", train)
  write_squad(tmp_path / "dev.json", dev)
  return train, dev


def _config(tmp_path, **fields):
  data = config_lib.base_config().data
  with data.unlocked():
    data.source, data.dir, data.path, data.heldout = "squad_json", str(tmp_path), "train.json", {"validation": 0.2}
    data.splits = {"test": "dev.json"}
    for key, value in fields.items():
      data[key] = value
  return data


def test_a_path_split_by_article_beside_a_test_file_of_its_own(tmp_path):
  train, dev = _files(tmp_path)
  splits = squad.load_qa_task(_config(tmp_path))
  assert sorted(splits) == ["test", "train", "validation"]
  # every question of the train file in train or validation, whole articles in one of them; test is the dev file
  by_split = {name: {q.qid for q in qs} for name, qs in splits.items()}
  assert by_split["train"] | by_split["validation"] == {qa["id"] for a in train["data"] for p in a["paragraphs"]
                                                         for qa in p["qas"]}
  assert not by_split["train"] & by_split["validation"] and by_split["validation"]
  assert [q.qid for q in splits["test"]] == [qa["id"] for a in dev["data"] for p in a["paragraphs"] for qa in p["qas"]]
  titles = {name: {q.title for q in qs} for name, qs in splits.items()}
  assert not titles["train"] & titles["validation"] and not titles["train"] & titles["test"]
  # one split asked for: only it (evaluation reads the test file, and train to check it against)
  assert sorted(squad.load_qa_task(_config(tmp_path), splits=("test",))) == ["test"]


@pytest.mark.parametrize("shared", ["title", "paragraph"])
def test_a_test_file_sharing_an_article_or_a_paragraph_with_train_is_one_line(tmp_path, shared):
  train, dev = _files(tmp_path)
  splits = squad.load_qa_task(_config(tmp_path))
  trained = next(iter(splits["train"]))
  leaking = copy.deepcopy(dev)
  if shared == "title":
    leaking["data"][3]["title"] = trained.title
  else:
    leaking["data"][3]["paragraphs"][0]["context"] = trained.context
    leaking["data"][3]["paragraphs"][0]["qas"] = [
        {"id": "leak", "question": "?", "answers": [{"text": trained.context[:4], "answer_start": 0}]}]
  write_squad(tmp_path / "dev.json", leaking)
  with pytest.raises(ValueError, match=r"config.data.splits\['test'\]='dev.json' shares (article|a paragraph of "
                                       r"article) .* with the train split"):
    squad.load_qa_task(_config(tmp_path))


def test_splits_may_not_name_what_the_path_already_gives(tmp_path):
  _files(tmp_path)
  for named in ("train", "validation"):
    with pytest.raises(ValueError, match=rf"config.data.splits names \['{named}'\], which config.data.path"):
      squad.load_qa_task(_config(tmp_path, splits={named: "dev.json"}))
  with pytest.raises(ValueError, match="needs config.data.path .* or config.data.splits"):
    data = _config(tmp_path)
    with data.unlocked():
      del data["path"]
      del data["splits"]
    squad.load_qa_task(data)


def test_a_missing_train_file_is_named(tmp_path):
  _files(tmp_path)
  with pytest.raises(FileNotFoundError, match="nowhere.json"):
    squad.load_qa_task(_config(tmp_path, path="nowhere.json"))


def test_a_squad_2_0_file_given_to_a_1_1_task_is_one_line(tmp_path):
  write_squad(tmp_path / "train.json", synthetic_squad(40, seed=0, unanswerable=0.3))
  data = _config(tmp_path, squad_version="1.1")
  splits = squad.load_qa_task(data, splits=("train", "validation"))  # what load_task gives check_version
  assert squad.squad_version(splits["train"] + splits["validation"]) == "2.0"
  with pytest.raises(ValueError, match="squad_version='1.1' but train.json has unanswerable questions: a SQuAD 2.0 "
                                       "file given to a 1.1 task"):
    span_qa.FAMILY.check_version(data, "2.0")
  span_qa.FAMILY.check_version(data, "1.1")


# ------------------------------------------------------------------------------- the registered tasks, real data


def _task(name):
  config = config_lib.base_config()
  use_task(config, name)
  with config.data.unlocked():
    config.data.dir = str(DATA)
  return squad.load_qa_task(config.data)


@pytest.mark.skipif(not (DATA / "squad_v1_train").is_dir(), reason="../shared/data is not on this machine")
@pytest.mark.parametrize("name, sizes", [
    ("squad_v1_official", {"train": 84_872, "validation": 2_727, "test": 10_570}),
    ("squad_v2_with_v1_train", {"train": 95_841, "validation": 2_076, "test": 1_555}),
])
def test_no_article_or_paragraph_of_an_evaluated_split_is_in_train(name, sizes):
  """Titles compared after URL-decoding and case-folding, and paragraphs after collapsing whitespace, so that the
  same text written two ways still counts as shared."""
  from urllib.parse import unquote  # pylint: disable=g-import-not-at-top
  splits = _task(name)
  assert {split: len(qs) for split, qs in splits.items()} == sizes
  title = lambda q: unquote(q.title).replace("_", " ").casefold()
  text = lambda q: " ".join(q.context.split())
  train_titles, train_texts = {title(q) for q in splits["train"]}, {text(q) for q in splits["train"]}
  for split in ("validation", "test"):
    assert not {title(q) for q in splits[split]} & train_titles, split
    assert not {text(q) for q in splits[split]} & train_texts, split
  if name == "squad_v1_official":  # the official dev file, whole, scored with its three answers a question
    assert sum(len(q.answer_texts) for q in splits["test"]) == 34_726
    assert not any(q.is_impossible for qs in splits.values() for q in qs)
  else:
    assert sum(q.is_impossible for q in splits["train"]) == 4_125


def test_the_official_protocol_readers_share_task_budget_and_evaluation_and_differ_in_their_start():
  import importlib  # pylint: disable=g-import-not-at-top
  configs = {name: importlib.import_module(f"experiments.squad_v1_official.{name}").get_config()
             for name in ("bilstm", "bert_scratch", "bert_from_minilm")}
  for name, config in configs.items():
    config_lib.validate(config)
    families.resolve_best(config)  # what the training run ranks its checkpoints by
    assert (config.data.task, config.data.dir, config.train.time_limit_minutes) == (
        "squad_v1_official", "../shared/data", 120.0), name
    assert dict(config.data.splits) == {"test": "squad/dev-v1.1.json.gz"} and config.train.best_metric == "f1"
  scratch, minilm = (configs[n].to_dict() for n in ("bert_scratch", "bert_from_minilm"))
  assert scratch["data"] == minilm["data"] and scratch["model"] == minilm["model"] and scratch["eval"] == minilm["eval"]
  assert scratch["data"]["doc_stride"] == 128 and scratch["train"]["schedule"] == "budget_linear"
  keys = set(scratch["train"]) | set(minilm["train"])
  differ = {k for k in keys if scratch["train"].get(k) != minilm["train"].get(k)}
  assert differ == {"init_encoder_from", "learning_rate"}


def test_paragraph_negatives_ask_a_question_of_another_paragraph_of_its_article_that_lacks_its_answer(tmp_path):
  questions = squad.load_squad_json(write_squad(tmp_path / "t.json", synthetic_squad(
      60, seed=3, unanswerable=0.2, paragraphs_per_article=3)))
  made = squad.paragraph_negatives(questions, 0.5, seed=0)
  by_id = {q.qid: q for q in questions}
  answerable = [q for q in questions if not q.is_impossible]
  # about half the answerable questions, each at most once, the impossible ones never
  assert 0.3 * len(answerable) < len(made) < 0.7 * len(answerable)
  assert len({q.qid for q in made}) == len(made) and all(q.qid.endswith("/neg") for q in made)
  for negative in made:
    source = by_id[negative.qid[:-len("/neg")]]
    assert not source.is_impossible and negative.question == source.question and negative.title == source.title
    assert negative.is_impossible and negative.answers == () and negative.context != source.context
    assert negative.context in {q.context for q in questions if q.title == source.title}
    assert not any(text in negative.context for text in source.answer_texts)
  assert squad.paragraph_negatives(questions, 0.5, seed=0) == made  # the seed decides
  assert not squad.paragraph_negatives(questions, 0.0) and len(squad.paragraph_negatives(questions, 1.0)) > len(made)


def test_paragraph_negatives_join_train_only_and_only_for_a_2_0_task(tmp_path):
  write_squad(tmp_path / "train.json", synthetic_squad(40, seed=0, unanswerable=0.2, paragraphs_per_article=2))
  write_squad(tmp_path / "dev.json", synthetic_squad(10, seed=1, unanswerable=0.2))
  data = _config(tmp_path, squad_version="2.0", paragraph_negatives=0.5, heldout={"validation": 0.25},
                 splits={"test": "dev.json"})
  with pytest.raises(ValueError, match="shares article"):  # the dev file's titles are the train file's
    squad.load_qa_task(data)
  dev = synthetic_squad(10, seed=1, unanswerable=0.2)
  for article in dev["data"]:
    article["title"] = "dev " + article["title"]
  write_squad(tmp_path / "dev.json", dev)
  plain = squad.load_qa_task(_config(tmp_path, squad_version="2.0", heldout={"validation": 0.25},
                                     splits={"test": "dev.json"}))
  more = squad.load_qa_task(data)
  assert more["validation"] == plain["validation"] and more["test"] == plain["test"]
  added = more["train"][len(plain["train"]):]
  assert more["train"][:len(plain["train"])] == plain["train"] and added
  assert added == squad.paragraph_negatives(plain["train"], 0.5, seed=0)
  with pytest.raises(ValueError, match="paragraph_negatives=0.5 makes unanswerable questions: it needs a SQuAD 2.0"):
    squad.load_qa_task(_config(tmp_path, paragraph_negatives=0.5))


def _q(qid, title, context, question, answer):
  return squad.SquadQuestion(qid=qid, question=question, context=context, answers=((answer, context.index(answer)),),
                             title=title)


TREATY = "The treaty was signed in 1783 by Benjamin Franklin and John Adams, ending the war of the Treaty of Paris."
CAESAR = "Julius Caesar crossed the Rubicon in 49 BC with one legion, and then Pompey fled Rome for Greece."
MOON = "Neil Armstrong walked on the Moon in July 1969, and later Buzz Aldrin followed him down."
DUKE = "After the battle the Duke of Wellington returned to London, where Parliament thanked him in June."
SCORES = "The scores were 1, 2, 3, 4, 5, 6 and 7 across 9 rounds, with 8 ties."
# question -> what may be swapped in it, by hand: a name inside the question that its paragraph has as a whole word,
# or a number; never the first word, never inside an answer
SWAPPABLE = {
    "q1": [("Treaty of Paris", "name"), ("1783", "year")],
    "q2": [],  # "Franklin" is inside the answer
    "q3": [],  # "Paris" is the first word (and the paragraph's only "Paris" is inside a longer name anyway)
    "q4": [("Rome", "name"), ("Caesar", "name"), ("Rubicon", "name")],
    "q5": [("Rubicon", "name"), ("49", "number"), ("BC", "name")],
    "q6": [("Moon", "name"), ("1969", "year")],
    "q7": [("1969", "year"), ("Armstrong", "name")],
    "q8": [("Duke of Wellington", "name"), ("London", "name")],
    "q9": [("9", "number")],  # and "0" is the only digit its paragraph lacks
}
HANDMADE = [
    _q("q1", "treaty", TREATY, "Who signed the Treaty of Paris in 1783?", "Benjamin Franklin and John Adams"),
    _q("q2", "treaty", TREATY, "Which Franklin signed the treaty?", "Benjamin Franklin"),
    _q("q3", "treaty", TREATY, "Paris ended which war?", "the war"),
    _q("q4", "caesar", CAESAR, "Who fled Rome after Caesar crossed the Rubicon?", "Pompey"),
    _q("q5", "caesar", CAESAR, "How many legions crossed the Rubicon in 49 BC?", "one"),
    _q("q6", "moon", MOON, "Who walked on the Moon in 1969?", "Neil Armstrong"),
    _q("q7", "moon", MOON, "In which month of 1969 did Armstrong walk?", "July"),
    _q("q8", "duke", DUKE, "Who thanked the Duke of Wellington in London?", "Parliament"),
    _q("q9", "scores", SCORES, "How many ties were there across 9 rounds?", "8"),
]


def _whole_word(text, phrase):
  return any(text[i - 1:i].isalnum() is False and not text[i + len(phrase):i + len(phrase) + 1].isalnum()
             for i in range(len(text)) if text.startswith(phrase, i))


def test_question_negatives_swap_one_name_or_number_for_one_their_paragraph_lacks():
  by_id = {q.qid: q for q in HANDMADE}
  seen = set()
  for seed in range(30):
    made = squad.question_negatives(HANDMADE, 1.0, seed=seed)
    # every question with something to swap makes one, the others none
    assert sorted(m.qid for m in made) == sorted(f"{k}/swap" for k, v in SWAPPABLE.items() if v)
    for negative in made:
      source = by_id[negative.qid[:-len("/swap")]]
      assert negative.context == source.context and negative.title == source.title
      assert negative.is_impossible and negative.answers == ()
      swaps = [(old, kind, source.question.index(old)) for old, kind in SWAPPABLE[source.qid]]
      # exactly one listed span replaced, the rest of the question as it was
      fits = [(old, kind, negative.question[a:len(negative.question) - (len(source.question) - a - len(old))])
              for old, kind, a in swaps if negative.question.startswith(source.question[:a])
              and negative.question.endswith(source.question[a + len(old):])]
      fits = [(old, kind, new) for old, kind, new in fits if new != old]
      assert len(fits) == 1, (source.question, negative.question)
      old, kind, new = fits[0]
      assert not _whole_word(source.context, new), (new, source.context)
      if kind == "year":
        assert 0 < abs(int(new) - int(old)) <= 30 and int(new) <= 2016 and len(new) == 4
      elif kind == "number":
        assert new.isdigit() and len(new) == len(old) and (source.qid != "q9" or new == "0")
      else:  # a name of as many words, from another article's paragraph
        assert len(new.split()) == len(old.split())
        assert any(_whole_word(q.context, new) for q in HANDMADE if q.title != source.title), new
      seen.add((source.qid, old))
  # over the seeds, each listed span is swapped at least once
  assert seen == {(k, old) for k, v in SWAPPABLE.items() for old, _ in v}
  assert squad.question_negatives(HANDMADE, 1.0, seed=4) == squad.question_negatives(HANDMADE, 1.0, seed=4)
  assert not squad.question_negatives(HANDMADE, 0.0)
  # unanswerable questions make none
  impossible = [dataclasses.replace(q, answers=(), is_impossible=True) for q in HANDMADE]
  assert not squad.question_negatives(impossible, 1.0)


def _handmade_articles():
  """HANDMADE in the official format (names and numbers to swap: the synthetic articles have none)."""
  articles = {}
  for q in HANDMADE:
    paragraphs = articles.setdefault(q.title, {})
    paragraphs.setdefault(q.context, []).append({"id": q.qid, "question": q.question, "answers": [
        {"text": text, "answer_start": start} for text, start in q.answers]})
  return [{"title": title, "paragraphs": [{"context": c, "qas": qas} for c, qas in paragraphs.items()]}
          for title, paragraphs in articles.items()]


def test_question_negatives_join_train_only_and_only_for_a_2_0_task(tmp_path):
  train = synthetic_squad(40, seed=0, unanswerable=0.2, paragraphs_per_article=2)
  train["data"] += _handmade_articles()
  write_squad(tmp_path / "train.json", train)
  dev = synthetic_squad(10, seed=1, unanswerable=0.2)
  for article in dev["data"]:
    article["title"] = "dev " + article["title"]
  write_squad(tmp_path / "dev.json", dev)
  fields = dict(squad_version="2.0", heldout={"validation": 0.25}, splits={"test": "dev.json"})
  plain = squad.load_qa_task(_config(tmp_path, **fields))
  both = squad.load_qa_task(_config(tmp_path, paragraph_negatives=0.5, question_negatives=0.5, **fields))
  assert both["validation"] == plain["validation"] and both["test"] == plain["test"]
  own = plain["train"]
  swapped = squad.question_negatives(own, 0.5, seed=0)
  assert swapped and both["train"] == own + squad.paragraph_negatives(own, 0.5, seed=0) + swapped
  with pytest.raises(ValueError, match="question_negatives=0.5 makes unanswerable questions: it needs a SQuAD 2.0"):
    squad.load_qa_task(_config(tmp_path, question_negatives=0.5))
  with pytest.raises(ValueError, match=r"config.data.question_negatives must be a share in \[0, 1\], got 1.5"):
    squad.load_qa_task(_config(tmp_path, question_negatives=1.5, squad_version="2.0"))
  # the recipe: the first 2.0 reader with swapped questions and a warmed-up moving average, nothing else changed
  from experiments.squad_v2_with_v1_train import bert_from_minilm as first_recipe  # pylint: disable=g-import-not-at-top
  from experiments.squad_v2_with_v1_train import bert_from_minilm_swaps  # pylint: disable=g-import-not-at-top
  swaps, first = bert_from_minilm_swaps.get_config(), first_recipe.get_config()
  config_lib.validate(swaps)
  assert (swaps.data.question_negatives, swaps.data.paragraph_negatives) == (0.5, 0.5)
  flat = lambda c: {f"{s}.{k}": v for s, d in c.to_dict().items() if isinstance(d, dict) for k, v in d.items()}
  a, b = flat(swaps), flat(first)
  assert {k for k in a.keys() | b.keys() if a.get(k) != b.get(k)} == {"data.question_negatives", "train.ema_decay",
                                                                      "train.ema_warmup"}


def test_the_2_0_reader_is_the_official_1_1_reader_on_the_2_0_task_with_a_null_span_and_negatives():
  import importlib  # pylint: disable=g-import-not-at-top
  v1 = importlib.import_module("experiments.squad_v1_official.bert_from_minilm").get_config()
  v2 = importlib.import_module("experiments.squad_v2_with_v1_train.bert_from_minilm").get_config()
  config_lib.validate(v2)
  families.resolve_best(v2)
  assert (v2.data.task, v2.data.squad_version, v2.data.paragraph_negatives) == ("squad_v2_with_v1_train", "2.0", 0.5)
  assert v2.model.allow_no_answer and v2.train.best_metric == "best_f1_spans"
  model = {k: v for k, v in v2.model.to_dict().items() if k != "allow_no_answer"}
  assert model == {k: v for k, v in v1.model.to_dict().items() if k != "allow_no_answer"}
  train = {k: v for k, v in v2.train.to_dict().items() if k != "best_metric"}
  assert train == {k: v for k, v in v1.train.to_dict().items() if k != "best_metric"}


def test_the_task_text_corpus_is_the_train_splits_paragraphs_each_once_by_article(tmp_path):
  from attnjax.data import mlm  # pylint: disable=g-import-not-at-top
  train, dev = _files(tmp_path)
  for article in train["data"][:10]:  # a second paragraph, and a paragraph repeated: read once
    first = article["paragraphs"][0]
    for suffix, context in (("b", first["context"] + " x ."), ("c", first["context"])):
      qas = [dict(qa, id=qa["id"] + suffix) for qa in first["qas"]]
      article["paragraphs"].append({"context": context, "qas": qas})
  write_squad(tmp_path / "train.json", train)
  data = _config(tmp_path)
  splits = squad.load_qa_task(data)
  from attnjax.data import catalogue  # pylint: disable=g-import-not-at-top
  spec = catalogue.TaskSpec("extractive_qa", "squad_json", {"path": "train.json", "heldout": {"validation": 0.2}},
                        {"test": "dev.json"}, ("exact_match", "f1"), ("exact_match", "f1"))
  with pytest.MonkeyPatch.context() as patch:
    patch.setitem(catalogue.TASKS, "tiny_squad", spec)
    articles = mlm.squad_train_articles("tiny_squad", str(tmp_path))
  expected = {}
  for q in splits["train"]:
    paragraphs = expected.setdefault(q.title, [])
    if q.context not in paragraphs:
      paragraphs.append(q.context)
  assert {a["title"]: a["text"] for a in articles} == {t: "\n\n".join(p) for t, p in expected.items()}
  evaluated = {q.context for name in ("validation", "test") for q in splits[name]}
  assert not any(c in a["text"] for a in articles for c in evaluated)
  assert any(a["text"].count("\n\n") == 1 for a in articles)  # two distinct paragraphs, the repeat read once
  with pytest.raises(ValueError, match="squad_task='wikipedia_mlm': not a registered SQuAD task"):
    mlm.squad_train_articles("wikipedia_mlm", str(tmp_path))


def test_the_task_text_pre_training_is_the_budget_recipe_on_the_official_tasks_train_paragraphs():
  import importlib  # pylint: disable=g-import-not-at-top
  text = importlib.import_module("experiments.squad_v1_official.bert_mlm_task_text").get_config()
  wiki = importlib.import_module("experiments.wikipedia.bert_mlm_budget").get_config()
  config_lib.validate(text)
  assert (text.data.squad_task, text.data.dir, text.train.time_limit_minutes) == ("squad_v1_official",
                                                                                  "../shared/data", 120.0)
  assert text.model.to_dict() == wiki.model.to_dict()
  assert {k: v for k, v in text.train.to_dict().items() if k != "time_limit_minutes"} == {
      k: v for k, v in wiki.train.to_dict().items() if k != "time_limit_minutes"}


def test_a_masked_lm_task_reads_the_squad_tasks_train_paragraphs_into_rows(tmp_path):
  from attnjax.data import catalogue, mlm  # pylint: disable=g-import-not-at-top
  from tests import mlm_fixture  # pylint: disable=g-import-not-at-top
  _files(tmp_path)
  data = mlm_fixture.tiny_mlm_config(tmp_path / "corpus").data
  spec = catalogue.TaskSpec("extractive_qa", "squad_json", {"path": "train.json", "heldout": {"validation": 0.2}},
                        {"test": "dev.json"}, ("exact_match", "f1"), ("exact_match", "f1"))
  with data.unlocked():
    data.squad_task = "tiny_squad"
    data.dir = str(tmp_path)
  with pytest.raises(ValueError, match="set exactly one of path .* and squad_task"):
    mlm.MlmTaskData(data, str(tmp_path / "run"))
  with data.unlocked():
    del data["path"]
  with pytest.MonkeyPatch.context() as patch:
    patch.setitem(catalogue.TASKS, "tiny_squad", spec)
    task = mlm.MlmTaskData(data, str(tmp_path / "run"))
    ids = np.concatenate([task.rows(split)[0].ravel() for split in ("train", "validation", "test")])
    articles = mlm.squad_train_articles("tiny_squad", str(tmp_path))
  # every token of the task's train paragraphs in the rows, in some split, besides [CLS], [SEP] and padding
  words = sum(len(task.vocab.encode(a["text"])) for a in articles)
  assert np.sum(~np.isin(ids, task.special_ids)) == words


def test_the_official_transfer_readers_differ_in_their_initial_weights_only():
  import importlib  # pylint: disable=g-import-not-at-top
  names = ("bert_scratch_budget", "bert_from_wikipedia_mlm", "bert_from_task_text_mlm")
  configs = {n: importlib.import_module(f"experiments.squad_v1_official.{n}").get_config().to_dict() for n in names}
  for name, config in configs.items():
    assert (config["data"]["task"], config["train"]["time_limit_minutes"]) == ("squad_v1_official", 120.0), name
    assert config["model"]["pre_norm"] and config["model"]["d_model"] == 256 and config["model"]["num_layers"] == 4
  scratch, wiki, text = (configs[n] for n in names)
  assert scratch["data"] == wiki["data"] == text["data"] and scratch["model"] == wiki["model"] == text["model"]
  assert wiki["train"]["init_encoder_from"] == "results/transfer_official/encoders/wikipedia"
  assert text["train"]["init_encoder_from"] == "results/transfer_official/encoders/task_text"
  assert {k for k in wiki["train"] if wiki["train"][k] != text["train"][k]} == {"init_encoder_from"}
  assert {k for k in wiki["train"] if wiki["train"][k] != scratch["train"].get(k)} == {"init_encoder_from",
                                                                                      "learning_rate"}


def test_unanswerable_repeats_show_each_unanswerable_training_question_that_many_times(tmp_path):
  write_squad(tmp_path / "train.json", synthetic_squad(40, seed=0, unanswerable=0.2, paragraphs_per_article=2))
  write_squad(tmp_path / "dev.json", synthetic_squad(10, seed=1, unanswerable=0.2))
  dev = synthetic_squad(10, seed=1, unanswerable=0.2)
  for article in dev["data"]:
    article["title"] = "dev " + article["title"]
  write_squad(tmp_path / "dev.json", dev)
  base = dict(squad_version="2.0", heldout={"validation": 0.25}, splits={"test": "dev.json"})
  plain = squad.load_qa_task(_config(tmp_path, **base))
  more = squad.load_qa_task(_config(tmp_path, unanswerable_repeats=3, **base))
  assert more["validation"] == plain["validation"] and more["test"] == plain["test"]
  impossible = [q for q in plain["train"] if q.is_impossible]
  assert impossible and len(more["train"]) == len(plain["train"]) + 2 * len(impossible)
  copies = {}
  for q in more["train"]:
    copies.setdefault(q.qid.split("/rep")[0], []).append(q)
  for q in plain["train"]:  # an unanswerable question three times (ids apart), an answerable one once
    assert len(copies[q.qid]) == (3 if q.is_impossible else 1)
    assert all((c.question, c.context, c.answers) == (q.question, q.context, q.answers) for c in copies[q.qid])
  assert len({q.qid for q in more["train"]}) == len(more["train"])
  for bad in (0, 2.5, True):
    with pytest.raises(ValueError, match="unanswerable_repeats must be an int >= 1"):
      squad.load_qa_task(_config(tmp_path, unanswerable_repeats=bad, **base))
  with pytest.raises(ValueError, match="unanswerable_repeats=3 repeats unanswerable questions: it needs a SQuAD 2.0"):
    squad.load_qa_task(_config(tmp_path, unanswerable_repeats=3, heldout={"validation": 0.25},
                               splits={"test": "dev.json"}))
  from experiments.squad_v2_with_v1_train import bert_from_minilm_repeats  # pylint: disable=g-import-not-at-top
  config = bert_from_minilm_repeats.get_config()
  config_lib.validate(config)
  assert (config.data.unanswerable_repeats, config.data.paragraph_negatives) == (10, 0.0)
