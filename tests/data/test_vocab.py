"""CharVocab: deterministic ids, reserved specials, encode/decode round trip, JSON save/load, clear errors."""

import json

import numpy as np
import pytest

from attnjax.data.vocab import NUM_RESERVED, UNK_ID, UNK_TEXT, CharVocab
from attnjax.models.interface import BOS_ID, EOS_ID, PAD_ID


def test_ids_are_sorted_characters_after_the_reserved_ones():
  vocab = CharVocab.build(["cab", "b a"])
  assert vocab.chars == (" ", "a", "b", "c")
  assert vocab.encode(" abc") == [4, 5, 6, 7]
  assert vocab.size == len(vocab) == NUM_RESERVED + 4
  assert (PAD_ID, BOS_ID, EOS_ID, UNK_ID) == (0, 1, 2, 3)


def test_build_does_not_depend_on_text_order():
  texts = ["2018-05-09", "May 9, 2018", "the 9th"]
  assert CharVocab.build(texts) == CharVocab.build(reversed(texts)) == CharVocab.build(iter(texts))


def test_encode_decode_round_trip():
  texts = ["Wednesday, 9 May 2018", "2018-05-09", "", "héllo ⁂"]
  vocab = CharVocab.build(texts)
  for text in texts:
    ids = vocab.encode(text)
    assert all(NUM_RESERVED <= i < vocab.size for i in ids)
    assert vocab.decode(ids) == text
    assert vocab.decode(np.asarray(ids, np.int32)) == text


def test_decode_stops_at_eos_and_skips_pad_and_bos():
  vocab = CharVocab.build(["ab"])
  a, b = vocab.encode("ab")
  assert vocab.decode([BOS_ID, a, PAD_ID, b, EOS_ID, a, a]) == "ab"
  assert vocab.decode([EOS_ID, a]) == ""
  assert vocab.decode(np.array([BOS_ID, b, EOS_ID, PAD_ID, PAD_ID])) == "b"


def test_unknown_characters_encode_to_unk_and_decode_to_unk_text():
  vocab = CharVocab.build(["ab"])
  assert vocab.encode("axb") == [4, UNK_ID, 5]
  assert vocab.decode([4, UNK_ID, 5]) == f"a{UNK_TEXT}b"


def test_save_load_round_trip(tmp_path):
  vocab = CharVocab.build(["Mai 9 — 2018 ' \" \\ é"])
  path = tmp_path / "vocab.json"
  vocab.save(path)
  loaded = CharVocab.load(path)
  assert loaded == vocab and loaded.encode("é 9") == vocab.encode("é 9")
  assert json.loads(path.read_text(encoding="utf-8"))["chars"] == list(vocab.chars)


def test_errors_are_clear(tmp_path):
  with pytest.raises(TypeError, match="not a single str"):
    CharVocab.build("abc")
  with pytest.raises(TypeError, match=r"texts\[1\] must be a str"):
    CharVocab.build(["a", 3])
  with pytest.raises(ValueError, match=r"duplicates \['a'\]"):
    CharVocab(["a", "b", "a"])
  with pytest.raises(ValueError, match="single character"):
    CharVocab(["ab"])
  vocab = CharVocab.build(["ab"])
  with pytest.raises(TypeError, match="encode expects a str"):
    vocab.encode(["a"])
  with pytest.raises(ValueError, match=r"id 6 is outside the vocabulary \[0, 6\)"):
    vocab.decode([4, 6])
  with pytest.raises(ValueError, match="outside the vocabulary"):
    vocab.decode([-1])
  with pytest.raises(ValueError, match="1-D"):
    vocab.decode(np.zeros((2, 3), np.int32))
  bad = tmp_path / "bad.json"
  bad.write_text("{not json")
  with pytest.raises(ValueError, match="not a CharVocab JSON file"):
    CharVocab.load(bad)
  bad.write_text(json.dumps({"chars": ["a"]}))
  with pytest.raises(ValueError, match="not a CharVocab JSON file"):
    CharVocab.load(bad)
  bad.write_text(json.dumps({"format": "attnjax.CharVocab", "version": 99, "chars": ["a"]}))
  with pytest.raises(ValueError, match="version 99"):
    CharVocab.load(bad)
