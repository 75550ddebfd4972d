"""SQuAD: JSON loading (v1.1 / v2.0), character -> token spans through sentencepiece offsets, spans back to text."""

import gzip
import json
import logging

import pytest

from attnjax.data.squad import (NO_ANSWER, SquadQuestion, char_span_to_token_span, encode_examples, gold_answers,
                                load_squad_json, parse_squad, predictions_from_spans, squad_version,
                                token_span_to_text)
from attnjax.data.tokenizer import train_sentencepiece
from attnjax.metrics import squad_scores

NORMANS = ("The Normans were the people who in the 10th and 11th centuries gave their name to Normandy, a region in "
           "France.")
PRICES = "Prices rose sharply in the 1990s across Europe"


def qa(qid, question, context, *answers, impossible=None):
  record = {"id": qid, "question": question,
            "answers": [{"text": a, "answer_start": context.index(a)} for a in answers]}
  if impossible is not None:
    record["is_impossible"] = impossible
  return record


def dataset(version="1.1"):
  normans = [qa("n1", "In what country is Normandy located?", NORMANS, "France", "France"),
             qa("n2", "When were the Normans in Normandy?", NORMANS, "10th and 11th centuries", "in the 10th")]
  prices = [qa("p1", "Where did prices rise?", PRICES, "Europe"), qa("p2", "What rose?", PRICES, "Prices")]
  if version == "2.0":
    normans.append(qa("n3", "Who gave their name to France?", NORMANS, impossible=True))
    normans[0]["is_impossible"] = False
    normans[2]["plausible_answers"] = [{"text": "Normans", "answer_start": 4}]
  return {"version": version, "data": [{"title": "Normans", "paragraphs": [{"context": NORMANS, "qas": normans}]},
                                       {"title": "Prices", "paragraphs": [{"context": PRICES, "qas": prices}]}]}


@pytest.fixture(scope="module")
def vocab():
  texts = [NORMANS, PRICES, "In what country is Normandy located?", "When were the Normans in Normandy?",
           "Where did prices rise?", "What rose?", "Who gave their name to France?"] * 20
  return train_sentencepiece(texts, None, 60)


# ---------------------------------------------------------------------------------------------- char -> token spans

# Hand-made offsets of "the cat sat down" tokenized as "▁the" "▁c" "at" "▁sat" "▁down" (a piece carries its space).
TEXT = "the cat sat down"
OFFSETS = [(0, 3), (3, 5), (5, 7), (7, 11), (11, 16)]


def test_token_aligned_answers_map_to_their_tokens():
  assert char_span_to_token_span(OFFSETS, 0, 3) == (0, 0)  # "the"
  assert char_span_to_token_span(OFFSETS, 4, 7) == (1, 2)  # "cat", two tokens
  assert char_span_to_token_span(OFFSETS, 8, 11) == (3, 3)  # "sat", its token starting at the space before it


def test_answer_starting_or_ending_inside_a_token_gets_the_whole_token():
  assert char_span_to_token_span(OFFSETS, 5, 7) == (2, 2)  # "at": starts inside no token but "at"
  assert char_span_to_token_span(OFFSETS, 6, 7) == (2, 2)  # "t": inside "at"
  assert char_span_to_token_span(OFFSETS, 4, 6) == (1, 2)  # "ca": ends inside "at"
  assert char_span_to_token_span(OFFSETS, 9, 13) == (3, 4)  # "at d"


def test_answer_at_the_end_of_the_context():
  assert char_span_to_token_span(OFFSETS, 12, 16) == (4, 4)
  assert char_span_to_token_span(OFFSETS, 15, 16) == (4, 4)


def test_tokens_covering_no_character_are_never_part_of_a_span():
  offsets = [(0, 0), (0, 3), (3, 3), (3, 7)]  # e.g. sentencepiece's leading "▁" and a split ligature
  assert char_span_to_token_span(offsets, 0, 3) == (1, 1)
  assert char_span_to_token_span(offsets, 2, 5) == (1, 3)


def test_spans_no_token_covers_are_errors():
  with pytest.raises(ValueError, match="no token overlaps"):
    char_span_to_token_span(OFFSETS[:2], 8, 11)  # past a truncated context
  with pytest.raises(ValueError, match="empty character span"):
    char_span_to_token_span(OFFSETS, 4, 4)


def test_token_span_back_to_text_strips_the_pieces_space():
  assert token_span_to_text(TEXT, OFFSETS, 1, 2) == "cat"
  assert token_span_to_text(TEXT, OFFSETS, 0, 4) == TEXT
  assert token_span_to_text(TEXT, OFFSETS, NO_ANSWER, NO_ANSWER) == ""
  with pytest.raises(ValueError, match="not inside the 5 context tokens"):
    token_span_to_text(TEXT, OFFSETS, 3, 5)
  with pytest.raises(ValueError, match="not inside"):
    token_span_to_text(TEXT, OFFSETS, 3, 2)


# ---------------------------------------------------------------------------------------------------- loading


def test_load_v11_plain_and_gzipped(tmp_path):
  (tmp_path / "dev.json").write_text(json.dumps(dataset()), encoding="utf-8")
  (tmp_path / "dev.json.gz").write_bytes(gzip.compress(json.dumps(dataset()).encode("utf-8")))
  questions = load_squad_json(tmp_path / "dev.json")
  assert questions == load_squad_json(tmp_path / "dev.json.gz")
  assert [q.qid for q in questions] == ["n1", "n2", "p1", "p2"]
  assert questions[1].answers == (("10th and 11th centuries", NORMANS.index("10th")),
                                  ("in the 10th", NORMANS.index("in the 10th")))
  assert questions[0].title == "Normans" and squad_version(questions) == "1.1"


def test_v20_impossible_questions_have_no_answer(tmp_path):
  questions = parse_squad(dataset("2.0"))
  impossible = [q for q in questions if q.is_impossible]
  assert [q.qid for q in impossible] == ["n3"] and impossible[0].answers == ()  # plausible answers are not gold
  assert squad_version(questions) == "2.0"
  assert gold_answers(questions)["n3"] == [] and gold_answers(questions)["n1"] == ["France", "France"]


def test_invalid_json_names_file_line_and_column(tmp_path):
  path = tmp_path / "broken.json"
  path.write_text('{"data": [\n  {"title": "x",\n  "paragraphs": [}\n]}', encoding="utf-8")
  with pytest.raises(ValueError, match=r"broken\.json: invalid JSON at line 3, column 18"):
    load_squad_json(path)


@pytest.mark.parametrize("edit, message", [
    (lambda d: d["data"][1]["paragraphs"][0]["qas"][1].pop("question"),
     r"data\[1\]\.paragraphs\[0\]\.qas\[1\] has no 'question' key"),
    (lambda d: d["data"][0]["paragraphs"][0].pop("context"), r"data\[0\]\.paragraphs\[0\] has no 'context' key"),
    (lambda d: d["data"][0]["paragraphs"][0]["qas"][0]["answers"][1].update(answer_start="7"),
     r"qas\[0\]\.answers\[1\]\['answer_start'\] must be a int, got str"),
    (lambda d: d["data"][0]["paragraphs"][0]["qas"][0]["answers"][0].update(answer_start=10_000),
     r"answer_start 10000 .* outside the"),
    (lambda d: d["data"][1]["paragraphs"][0]["qas"][1].update(id="p1"), r"qas\[1\] repeats question id 'p1'"),
    (lambda d: d["data"][1]["paragraphs"][0]["qas"][1].update(answers=[]), r"has no answer and is not marked"),
    (lambda d: d.pop("data"), r"the top level has no 'data' key"),
])
def test_malformed_squad_errors_name_file_and_location(tmp_path, edit, message):
  data = dataset()
  edit(data)
  path = tmp_path / "bad.json"
  path.write_text(json.dumps(data), encoding="utf-8")
  with pytest.raises(ValueError, match=r"bad\.json: .*" + message):
    load_squad_json(path)


def test_answer_not_matching_its_start_is_kept_and_counted(caplog):
  data = dataset()
  data["data"][1]["paragraphs"][0]["qas"][0]["answers"][0]["answer_start"] -= 1
  with caplog.at_level(logging.WARNING):
    questions = parse_squad(data)
  assert len(questions) == 4
  assert any("1 answers do not match the context" in r.getMessage() for r in caplog.records)


# ------------------------------------------------------------------------------------------------ examples + metric


def test_gold_spans_back_to_text_score_exact_match_100(vocab):
  for version in ("1.1", "2.0"):
    questions = parse_squad(dataset(version))
    examples = encode_examples(questions, vocab)
    assert len(examples) == len(questions)
    predictions = predictions_from_spans(examples, [(e.start, e.end) for e in examples])
    assert predictions["p1"] == "Europe" and predictions["n1"] == "France"
    scores = squad_scores(predictions, gold_answers(examples), version=version)
    assert scores["exact_match"] == scores["f1"] == 100.0
    if version == "2.0":
      assert predictions["n3"] == "" and scores["NoAns_total"] == 1


def test_encoded_examples_carry_ids_offsets_and_the_gold_span(vocab):
  (example,) = encode_examples([q for q in parse_squad(dataset()) if q.qid == "p1"], vocab)
  assert example.question_ids == vocab.encode("Where did prices rise?")
  assert example.context_ids == vocab.encode(PRICES) and len(example.offsets) == len(example.context_ids)
  assert example.end == len(example.context_ids) - 1  # "Europe" ends the context
  start, end = example.offsets[example.start][0], example.offsets[example.end][1]
  assert PRICES[start:end].strip() == "Europe"


def test_answer_inside_a_sentencepiece_token_is_covered(vocab):
  question = SquadQuestion("m1", "When?", PRICES, (("1990", PRICES.index("1990")),))
  (example,) = encode_examples([question], vocab)
  text = token_span_to_text(PRICES, example.offsets, example.start, example.end)
  assert "1990" in text and text in PRICES


def test_truncated_answers_are_dropped_for_training_and_kept_for_evaluation(vocab, caplog):
  questions = parse_squad(dataset())
  # Cut the contexts just after "Prices", the answer that opens its context; every other answer lies further on.
  prices_end = next(e.end for e in encode_examples(questions, vocab) if e.qid == "p2")
  with caplog.at_level(logging.WARNING):
    kept = encode_examples(questions, vocab, max_context_tokens=prices_end + 1, drop_unreachable=False)
    dropped = encode_examples(questions, vocab, max_context_tokens=prices_end + 1)
  assert [e.qid for e in dropped] == ["p2"]
  assert len(kept) == 4 and all(len(e.context_ids) == prices_end + 1 for e in kept)
  assert [(e.start, e.end) for e in kept if e.qid != "p2"] == [(NO_ANSWER, NO_ANSWER)] * 3
  assert any("3 of 4 answers are not a token span of the truncated context" in r.getMessage()
             for r in caplog.records)
  scores = squad_scores(predictions_from_spans(kept, {e.qid: (e.start, e.end) for e in kept}), gold_answers(kept))
  assert scores["total"] == 4 and scores["exact_match"] == 25.0


def test_answer_straddling_the_truncation_is_unreachable_not_clipped(vocab):
  (question,) = [q for q in parse_squad(dataset()) if q.qid == "n2"]  # "10th and 11th centuries", several tokens
  (full,) = encode_examples([question], vocab)
  assert full.end > full.start
  (cut,) = encode_examples([question], vocab, max_context_tokens=full.end, drop_unreachable=False)
  assert (cut.start, cut.end) == (NO_ANSWER, NO_ANSWER)


def test_predictions_need_one_valid_span_per_example(vocab):
  examples = encode_examples(parse_squad(dataset()), vocab)
  with pytest.raises(ValueError, match="got 1 spans for 4 examples"):
    predictions_from_spans(examples, [(0, 0)])
  with pytest.raises(ValueError, match="no prediction for 3 questions"):
    predictions_from_spans(examples, {"n1": (0, 0)})
  with pytest.raises(ValueError, match="question 'n1': token span"):
    predictions_from_spans(examples, [(0, 10_000)] + [(0, 0)] * 3)
