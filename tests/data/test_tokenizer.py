"""SentencePieceVocab: reserved ids, deterministic training, caching in the workdir, round trips and offsets."""

import os
import pickle

import numpy as np
import pytest
import sentencepiece as spm

from attnjax.data import tokenizer
from attnjax.data.tokenizer import SentencePieceVocab, load_or_train, load_or_train_pair, train_sentencepiece
from attnjax.data.vocab import UNK_ID
from attnjax.models.interface import BOS_ID, EOS_ID, PAD_ID

WORDS = ("the a an cat dog bird fish sat ran flew swam on under over near mat table chair window quickly slowly "
         "happily big small tall short red green blue yellow house garden river street station morning evening "
         "Männer weiße straße café naïve 1990s 2018 prices rose fell market bank , . ! ?").split()
VOCAB_SIZE = 80


def corpus(n=400, seed=0):
  """Sentences of random words, reproducible: every character the tests encode occurs in it."""
  rng = np.random.default_rng(seed)
  return [" ".join(rng.choice(WORDS, size=rng.integers(3, 12))) for _ in range(n)]


@pytest.fixture(scope="module")
def vocab():
  return train_sentencepiece(corpus(), None, VOCAB_SIZE)


def test_special_ids_are_pad_bos_eos_unk(vocab):
  assert (PAD_ID, BOS_ID, EOS_ID, UNK_ID) == (0, 1, 2, 3)
  assert vocab.pieces[:4] == ("<pad>", "<s>", "</s>", "<unk>")
  assert vocab.size == len(vocab) == VOCAB_SIZE


@pytest.mark.parametrize("model_type", ["unigram", "bpe"])
def test_training_twice_gives_identical_models(tmp_path, model_type):
  first = train_sentencepiece(corpus(), tmp_path / "first", VOCAB_SIZE, model_type=model_type)
  second = train_sentencepiece(iter(corpus()), tmp_path / "second", VOCAB_SIZE, model_type=model_type)
  assert first.model_type == second.model_type == model_type
  assert first.pieces == second.pieces
  assert [first.score(i) for i in range(first.size)] == [second.score(i) for i in range(second.size)]
  assert first.model_proto == second.model_proto
  assert (tmp_path / "first.model").read_bytes() == first.model_proto
  assert (tmp_path / "first.vocab").read_text(encoding="utf-8").splitlines()[4].split("\t")[0] == first.pieces[4]


def test_encode_decode_round_trip_of_plain_text(vocab):
  for text in ["the cat sat on the mat.", "Männer weiße straße café naïve", "prices rose in 1990s, 2018!", ""]:
    ids = vocab.encode(text)
    assert all(UNK_ID < i < vocab.size for i in ids)
    assert vocab.decode(ids) == text
    assert vocab.decode(np.asarray(ids, np.int32)) == text


def test_decode_stops_at_eos_and_skips_pad_and_bos(vocab):
  ids = vocab.encode("the cat")
  assert vocab.decode([BOS_ID] + ids + [EOS_ID] + vocab.encode("dog") + [PAD_ID]) == "the cat"
  assert vocab.decode([PAD_ID, BOS_ID] + ids[:1] + [PAD_ID] + ids[1:]) == "the cat"
  assert vocab.decode([EOS_ID] + ids) == ""
  with pytest.raises(ValueError, match="outside the vocabulary"):
    vocab.decode([vocab.size])
  with pytest.raises(ValueError, match="1-D"):
    vocab.decode(np.zeros((2, 2), np.int32))


def test_characters_outside_the_corpus_encode_to_unk(vocab):
  assert UNK_ID in vocab.encode("the 猫")
  with pytest.raises(TypeError):
    vocab.encode(b"bytes")


def test_offsets_map_tokens_back_to_original_substrings(vocab):
  text = "  the  big Männer sat  under the table, quickly."
  ids, offsets = vocab.encode_with_offsets(text)
  assert ids == vocab.encode(text)
  assert len(offsets) == len(ids)
  # Tokens tile the text in order from its first word: no character is lost or covered twice.
  assert "".join(text[b:e] for b, e in offsets) == text.lstrip()
  assert all(b <= e for b, e in offsets) and all(e0 == b1 for (_, e0), (b1, _) in zip(offsets, offsets[1:]))
  # Apart from whitespace (collapsed by normalisation, and the first word's "▁" covers nothing), a token's substring
  # is its piece.
  for i, (b, e) in zip(ids, offsets):
    assert text[b:e].strip() == vocab.id_to_piece(i).replace("\u2581", " ").strip()


def test_offsets_are_character_offsets_after_normalisation(vocab):
  # "ﬁ" (one character, three UTF-8 bytes) is normalised by NFKC to "fi": offsets must still index the original.
  text = "café ﬁ naïve"
  _, offsets = vocab.encode_with_offsets(text)
  assert offsets[-1][1] == len(text)
  assert "".join(text[b:e] for b, e in offsets) == text
  assert any(text[b:e] == "ﬁ" for b, e in offsets)


def test_load_or_train_reuses_the_cached_model(tmp_path):
  calls = []

  def texts_fn():
    calls.append(1)
    return corpus()

  first = load_or_train(tmp_path, "spm", texts_fn, VOCAB_SIZE)
  path = tmp_path / "spm.model"
  mtime = os.stat(path).st_mtime_ns
  second = load_or_train(tmp_path, "spm", texts_fn, VOCAB_SIZE)
  assert len(calls) == 1
  assert os.stat(path).st_mtime_ns == mtime
  assert second == first and second.path == str(path)


def test_runs_sharing_a_directory_train_one_model_per_texts_and_options(tmp_path, monkeypatch):
  trained = []
  real = tokenizer.train_sentencepiece

  def counting(texts, prefix, size, **options):
    trained.append(size)
    return real(texts, prefix, size, **options)

  monkeypatch.setattr(tokenizer, "train_sentencepiece", counting)
  shared = tmp_path / "shared"
  first = load_or_train(tmp_path / "run1", "spm", corpus, VOCAB_SIZE, shared_dir=shared)
  second = load_or_train(tmp_path / "run2", "spm", corpus, VOCAB_SIZE, shared_dir=shared)
  assert trained == [VOCAB_SIZE]  # the second run copied the first's model
  assert (tmp_path / "run2" / "spm.model").read_bytes() == (tmp_path / "run1" / "spm.model").read_bytes()
  assert (tmp_path / "run2" / "spm.vocab").exists() and second == first
  # other texts, or other options, are another model: trained, and the same as one trained without sharing
  other = load_or_train(tmp_path / "run3", "spm", lambda: corpus(seed=1), VOCAB_SIZE, shared_dir=shared)
  load_or_train(tmp_path / "run4", "spm", corpus, VOCAB_SIZE - 10, shared_dir=shared)
  assert trained == [VOCAB_SIZE, VOCAB_SIZE, VOCAB_SIZE - 10]
  assert other == real(corpus(seed=1), None, VOCAB_SIZE) and other != first


def test_load_or_train_refuses_a_cached_model_of_another_size(tmp_path):
  load_or_train(tmp_path, "spm", corpus, VOCAB_SIZE)
  with pytest.raises(ValueError, match=r"spm\.model.*80 pieces.*vocab_size=70"):
    load_or_train(tmp_path, "spm", corpus, 70)
  with pytest.raises(ValueError, match="bpe"):
    load_or_train(tmp_path, "spm", corpus, VOCAB_SIZE, model_type="bpe")


def test_joint_vocabulary_is_one_model_and_separate_ones_are_two(tmp_path):
  pairs = list(zip(corpus(200, seed=1), [s.upper() for s in corpus(200, seed=2)]))
  calls = []

  def pairs_fn():
    calls.append(1)
    return pairs

  src, tgt = load_or_train_pair(tmp_path / "joint", pairs_fn, VOCAB_SIZE, joint=True)
  assert src is tgt and os.listdir(tmp_path / "joint").count("spm.model") == 1
  assert "A" in "".join(src.pieces) and "a" in "".join(src.pieces)  # trained on both sides

  src, tgt = load_or_train_pair(tmp_path / "separate", pairs_fn, 60, joint=False)
  assert {"spm_src.model", "spm_tgt.model"} <= set(os.listdir(tmp_path / "separate"))
  assert src != tgt and "A" not in "".join(src.pieces) and "A" in "".join(tgt.pieces)
  assert calls == [1, 1]  # once per training run, shared by the source and target models
  load_or_train_pair(tmp_path / "separate", pairs_fn, 60, joint=False)
  assert calls == [1, 1]


def test_vocabulary_too_large_for_the_corpus_is_a_clear_error():
  with pytest.raises(ValueError, match="vocab_size=5000 is too large"):
    train_sentencepiece(["the cat sat"] * 10, None, 5000)
  with pytest.raises(ValueError, match="no non-empty text"):
    train_sentencepiece(["", "  "], None, 50)
  with pytest.raises(ValueError, match="model_type"):
    train_sentencepiece(corpus(), None, 50, model_type="word")
  with pytest.raises(TypeError, match="single str"):
    train_sentencepiece("the cat", None, 50)


def test_model_with_sentencepiece_default_ids_is_refused(tmp_path):
  # sentencepiece's defaults (unk=0, bos=1, eos=2, no pad) would put UNK under PAD_ID.
  spm.SentencePieceTrainer.train(sentence_iterator=iter(corpus()), model_prefix=str(tmp_path / "default"),
                                 vocab_size=60, minloglevel=2)
  with pytest.raises(ValueError, match="special ids"):
    SentencePieceVocab.load(tmp_path / "default.model")


def test_vocab_survives_pickling_and_saving(tmp_path, vocab):
  assert pickle.loads(pickle.dumps(vocab)) == vocab
  vocab.save(tmp_path / "copy.model")
  copy = SentencePieceVocab.load(tmp_path / "copy.model")
  assert copy == vocab and copy.encode("the cat") == vocab.encode("the cat")
  assert tokenizer.SPECIAL_PIECES[UNK_ID] == "<unk>"
