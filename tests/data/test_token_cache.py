"""Token cache: flat storage, batch encoding equal to vocab.encode, cache hits, misses, fingerprints and rebuilds."""

import logging
import os

import numpy as np
import pytest

from attnjax.data import token_cache
from attnjax.data.pipeline import Seq2SeqBatcher
from attnjax.data.token_cache import TokenizedSplit, encode_pairs, load_or_encode
from attnjax.data.tokenizer import train_sentencepiece
from attnjax.data.vocab import CharVocab

WORDS = ("the a cat dog bird sat ran on under mat table house river morning evening prices rose fell market bank "
         "der die das Katze Hund saß lief auf unter Matte Tisch Haus Fluss Morgen Abend Preise Männer straße , "
         ".").split()


def _pairs(n=300, seed=0):
  """Random sentence pairs; every 50th source and every 70th target empty, as real corpora have a few."""
  rng = np.random.default_rng(seed)
  out = []
  for i in range(n):
    src = "" if i % 50 == 7 else " ".join(rng.choice(WORDS, size=rng.integers(1, 15)))
    tgt = "" if i % 70 == 3 else " ".join(rng.choice(WORDS, size=rng.integers(1, 15)))
    out.append((src, tgt))
  return out


PAIRS = _pairs()


@pytest.fixture(scope="module")
def spm_vocab():
  return train_sentencepiece((text for pair in PAIRS for text in pair), None, 60)


@pytest.fixture(scope="module")
def char_vocab():
  return CharVocab.build(text for pair in PAIRS for text in pair)


@pytest.fixture(params=["sentencepiece", "chars"])
def vocab(request, spm_vocab, char_vocab):
  return spm_vocab if request.param == "sentencepiece" else char_vocab


class PairsFn:
  """pairs_fn that counts its calls."""

  def __init__(self, pairs):
    self.pairs, self.calls = pairs, 0

  def __call__(self):
    self.calls += 1
    return self.pairs


def _assert_equals_direct(tokens, src_vocab, tgt_vocab, pairs):
  assert len(tokens) == len(pairs)
  for i, ((s, t), (s_ids, t_ids)) in enumerate(zip(pairs, tokens)):
    assert s_ids.dtype == np.int32 and t_ids.dtype == np.int32
    assert s_ids.tolist() == src_vocab.encode(s), i
    assert t_ids.tolist() == tgt_vocab.encode(t), i


@pytest.mark.parametrize("num_threads, chunk_pairs", [(1, 1 << 16), (2, 7)])
def test_encode_pairs_equals_encoding_text_by_text(vocab, num_threads, chunk_pairs):
  tokens = encode_pairs(vocab, vocab, PAIRS, num_threads=num_threads, chunk_pairs=chunk_pairs)
  _assert_equals_direct(tokens, vocab, vocab, PAIRS)
  assert tokens.src.dtype == tokens.tgt.dtype == np.int32
  assert tokens.src_offsets.dtype == tokens.tgt_offsets.dtype == np.int64


def test_separate_source_and_target_vocabularies(spm_vocab, char_vocab):
  _assert_equals_direct(encode_pairs(spm_vocab, char_vocab, PAIRS), spm_vocab, char_vocab, PAIRS)


def test_empty_strings_encode_to_empty_arrays(vocab):
  tokens = encode_pairs(vocab, vocab, [("", ""), ("the cat", ""), ("", "der Hund")])
  assert tokens.src_lengths[0] == tokens.tgt_lengths[0] == 0
  assert tokens.pair(1)[1].shape == (0,) and tokens.pair(2)[0].shape == (0,)
  assert tokens.pair(0)[0].dtype == np.int32
  empty = encode_pairs(vocab, vocab, [])
  assert len(empty) == 0 and empty.src.shape == (0,) and empty.src_offsets.tolist() == [0]


def test_round_trip_through_the_cache_equals_direct_encoding(tmp_path, vocab):
  direct = encode_pairs(vocab, vocab, PAIRS)
  first = load_or_encode(tmp_path, "train", vocab, vocab, PairsFn(PAIRS), "key")
  pairs_fn = PairsFn(PAIRS)
  second = load_or_encode(tmp_path, "train", vocab, vocab, pairs_fn, "key")
  assert pairs_fn.calls == 0  # a hit never reads the text
  assert first == direct and second == direct
  assert second.src.dtype == np.int32  # stored narrower, read back as int32
  _assert_equals_direct(second, vocab, vocab, PAIRS)
  (name,) = os.listdir(tmp_path)
  assert name.startswith("tokens.train.") and name.endswith(".npz")


def test_hits_and_misses_are_logged(tmp_path, char_vocab, caplog):
  with caplog.at_level(logging.INFO):
    load_or_encode(tmp_path, "train", char_vocab, char_vocab, PairsFn(PAIRS), "key")
    load_or_encode(tmp_path, "train", char_vocab, char_vocab, PairsFn(PAIRS), "key")
  messages = [r.getMessage() for r in caplog.records]
  assert any("miss" in m for m in messages)
  assert any("hit" in m and f"{len(PAIRS)} pairs" in m for m in messages)


def test_other_vocab_source_key_or_split_uses_another_file(tmp_path, spm_vocab, char_vocab):
  load_or_encode(tmp_path, "train", spm_vocab, spm_vocab, PairsFn(PAIRS), "key")
  other_tgt = PairsFn(PAIRS)
  tokens = load_or_encode(tmp_path, "train", spm_vocab, char_vocab, other_tgt, "key")
  assert other_tgt.calls == 1
  _assert_equals_direct(tokens, spm_vocab, char_vocab, PAIRS)
  other_text = PairsFn(PAIRS[:10])
  assert len(load_or_encode(tmp_path, "train", spm_vocab, spm_vocab, other_text, "key with other files")) == 10
  assert other_text.calls == 1
  other_split = PairsFn(PAIRS[:5])
  assert len(load_or_encode(tmp_path, "validation", spm_vocab, spm_vocab, other_split, "key")) == 5
  assert other_split.calls == 1
  assert len(os.listdir(tmp_path)) == 4
  # a vocabulary trained on other text (same size) is another vocabulary
  retrained = train_sentencepiece((text for pair in _pairs(seed=1) for text in pair), None, 60)
  assert retrained.model_proto != spm_vocab.model_proto
  pairs_fn = PairsFn(PAIRS)
  _assert_equals_direct(load_or_encode(tmp_path, "train", retrained, retrained, pairs_fn, "key"), retrained,
                        retrained, PAIRS)
  assert pairs_fn.calls == 1


@pytest.mark.parametrize("damage", ["garbage", "truncated", "empty", "other_inputs"])
def test_unreadable_or_stale_file_is_rebuilt_with_a_warning(tmp_path, char_vocab, caplog, damage):
  load_or_encode(tmp_path, "train", char_vocab, char_vocab, PairsFn(PAIRS), "key")
  (path,) = tmp_path.iterdir()
  data = path.read_bytes()
  if damage == "garbage":
    path.write_bytes(b"not a zip file" * 100)
  elif damage == "truncated":
    path.write_bytes(data[:len(data) // 2])
  elif damage == "empty":
    path.write_bytes(b"")
  else:  # a valid file whose recorded inputs are another split's (e.g. copied by hand)
    other = token_cache.fingerprint_inputs("validation", char_vocab, char_vocab, "key")
    token_cache.save(path, encode_pairs(char_vocab, char_vocab, PAIRS[:3]), other)
  pairs_fn = PairsFn(PAIRS)
  with caplog.at_level(logging.WARNING):
    tokens = load_or_encode(tmp_path, "train", char_vocab, char_vocab, pairs_fn, "key")
  assert pairs_fn.calls == 1
  _assert_equals_direct(tokens, char_vocab, char_vocab, PAIRS)
  assert any("unreadable or stale" in r.getMessage() and r.levelno == logging.WARNING for r in caplog.records)
  assert path.read_bytes() == data  # rewritten in full
  hit = PairsFn(PAIRS)
  assert load_or_encode(tmp_path, "train", char_vocab, char_vocab, hit, "key") == tokens and hit.calls == 0


def test_expected_pairs_mismatch_rebuilds(tmp_path, char_vocab, caplog):
  load_or_encode(tmp_path, "train", char_vocab, char_vocab, PairsFn(PAIRS[:10]), "key")
  pairs_fn = PairsFn(PAIRS)
  with caplog.at_level(logging.WARNING):
    tokens = load_or_encode(tmp_path, "train", char_vocab, char_vocab, pairs_fn, "key", expected_pairs=len(PAIRS))
  assert pairs_fn.calls == 1 and len(tokens) == len(PAIRS)
  assert any("10 pairs" in r.getMessage() for r in caplog.records)


def test_unwritable_cache_dir_still_returns_the_tokens(tmp_path, char_vocab, caplog):
  blocker = tmp_path / "file"
  blocker.write_text("a file where the cache directory should be")
  with caplog.at_level(logging.WARNING):
    tokens = load_or_encode(blocker / "cache", "train", char_vocab, char_vocab, PairsFn(PAIRS), "key")
  _assert_equals_direct(tokens, char_vocab, char_vocab, PAIRS)
  assert any("Could not write" in r.getMessage() for r in caplog.records)


def test_tokenized_split_access_and_validation():
  tokens = TokenizedSplit.from_pairs([([5, 6], [7]), ([], [8, 9, 10]), (np.array([11]), [])])
  assert len(tokens) == 3 and tokens.src_lengths.tolist() == [2, 0, 1] and tokens.tgt_lengths.tolist() == [1, 3, 0]
  assert [(s.tolist(), t.tolist()) for s, t in tokens.as_pairs()] == [([5, 6], [7]), ([], [8, 9, 10]), ([11], [])]
  assert tokens[-1][0].tolist() == [11] and tokens.pair(1)[1].tolist() == [8, 9, 10]
  with pytest.raises(IndexError):
    tokens.pair(3)
  with pytest.raises(TypeError):
    tokens[0:2]  # pylint: disable=pointless-statement
  with pytest.raises(ValueError, match="src_offsets"):
    TokenizedSplit(np.arange(3), np.array([0, 2]), np.arange(3), np.array([0, 3]))
  with pytest.raises(ValueError, match="non-decreasing"):
    TokenizedSplit(np.arange(3), np.array([0, 2, 1, 3]), np.arange(3), np.array([0, 1, 2, 3]))
  with pytest.raises(ValueError, match="as many pairs"):
    TokenizedSplit(np.arange(3), np.array([0, 3]), np.arange(3), np.array([0, 1, 3]))


def test_bad_pairs_are_type_errors(char_vocab):
  with pytest.raises(TypeError, match=r"pairs\[1\]"):
    encode_pairs(char_vocab, char_vocab, [("a", "b"), ("a", "b", "c")])
  with pytest.raises(TypeError, match=r"pairs\[0\]"):
    encode_pairs(char_vocab, char_vocab, [(b"bytes", "b")])
  with pytest.raises(TypeError, match="fingerprint"):
    load_or_encode("/nonexistent", "train", object(), object(), PairsFn([]), "key")


def test_seq2seq_batcher_takes_the_pairs(spm_vocab):
  tokens = encode_pairs(spm_vocab, spm_vocab, PAIRS)
  as_lists = [(spm_vocab.encode(s), spm_vocab.encode(t)) for s, t in PAIRS]
  common = dict(batch_size=8, max_src_len=64, max_tgt_len=64, shuffle=True, seed=3)
  from_tokens, from_lists = Seq2SeqBatcher(tokens.as_pairs(), **common), Seq2SeqBatcher(as_lists, **common)
  assert from_tokens.state() == from_lists.state()  # same examples and lengths: same fingerprint
  batches = list(from_tokens.iterate_epoch(0)), list(from_lists.iterate_epoch(0))
  assert len(batches[0]) == len(batches[1]) >= 2
  for a, b in zip(*batches):
    assert sorted(a) == sorted(b)
    for key in a:
      np.testing.assert_array_equal(a[key], b[key])


def test_a_tasks_cache_is_kept_across_batching_changes_and_renewed_when_its_text_changes(tmp_path, caplog):
  """The cache file of a text task's split is named by the task's source key: tuning the batches (lengths, batch
  size, buckets, packing, truncation, vocabulary padding) reads the same file; pointing a split at another file,
  even one with the same text, encodes into a new one."""
  import copy  # pylint: disable=g-import-not-at-top
  from attnjax.config import base_config  # pylint: disable=g-import-not-at-top
  from attnjax.data.catalogue import use_task
  from attnjax.families import load_task  # pylint: disable=g-import-not-at-top
  data = tmp_path / "data"
  data.mkdir()
  for name in ("train", "train_copy", "val", "test_2016_flickr"):
    for side, lang in ((0, "en"), (1, "de")):
      (data / f"{name}.{lang}").write_text("".join(f"{pair[side] or 'x'}\n" for pair in PAIRS), encoding="utf-8")
  config = base_config()
  use_task(config, "multi30k_en_de")
  config.data.dir, config.data.vocab_size = str(data), 60
  workdir = tmp_path / "run"
  workdir.mkdir()

  def encode(data_cfg):
    caplog.clear()
    with caplog.at_level(logging.INFO):
      tokens = load_task(data_cfg, str(workdir)).encoded("train")
    assert len(tokens) == len(PAIRS)
    hit = any("hit" in r.getMessage() for r in caplog.records)
    return sorted(f for f in os.listdir(workdir) if f.startswith("tokens.train.")), hit

  (first,), hit = encode(config.data)
  assert not hit
  for key, value in (("max_src_len", 7), ("max_tgt_len", 9), ("max_tokens", 777), ("batch_size", 3),
                     ("bucket_boundaries", (5, 9)), ("pack", True), ("truncate", True), ("vocab_multiple", 64)):
    changed = copy.deepcopy(config.data)
    changed[key] = value
    assert encode(changed) == ([first], True), key
  changed = copy.deepcopy(config.data)
  changed.splits = {**config.data.splits, "train": "train_copy"}
  files, hit = encode(changed)
  assert not hit and len(files) == 2 and first in files
