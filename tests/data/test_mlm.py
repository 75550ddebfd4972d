"""Masked-LM data (attnjax.data.mlm): packing keeps every article's tokens in order inside its own segments; BERT's
masking chooses 15% of the real tokens and replaces them 80/10/10; batches resume and cover every held-out row."""

import collections

import numpy as np
import pytest

from attnjax.data import articles as articles_lib
from attnjax.data import mlm
from tests import mlm_fixture

CLS, SEP, MASK, VOCAB = 2, 3, 4, 50


def _documents(rng, n=40):
  return [rng.integers(5, VOCAB, size=rng.integers(0, 70)).astype(np.int32) for _ in range(n)]


def test_packing_keeps_every_document_in_order_in_chunks_with_their_own_segments_and_positions():
  rng = np.random.default_rng(0)
  documents = _documents(rng)
  ids, segments, positions = mlm.pack_documents(documents, 32, CLS, SEP)
  assert ids.shape == segments.shape == positions.shape and ids.shape[1] == 32
  chunks = []
  for r in range(len(ids)):
    for s in range(1, segments[r].max() + 1):
      where = np.flatnonzero(segments[r] == s)
      assert np.array_equal(where, np.arange(where[0], where[0] + len(where)))  # one contiguous span
      assert np.array_equal(positions[r, where], np.arange(len(where)))  # positions restart in each chunk
      assert ids[r, where[0]] == CLS and ids[r, where[-1]] == SEP
      chunks.append(ids[r, where[1:-1]])
    assert np.all(ids[r, segments[r] == 0] == 0)
  rebuilt = np.concatenate(chunks)
  assert np.array_equal(rebuilt, np.concatenate([d for d in documents if len(d)]))
  assert all(len(c) <= 30 for c in chunks)
  # greedy: a row is closed only when the next chunk does not fit
  for r in range(len(ids) - 1):
    next_chunk = ids[r + 1, segments[r + 1] == 1]
    assert (segments[r] > 0).sum() + len(next_chunk) > 32


def test_masking_chooses_15_percent_of_the_real_tokens_and_replaces_them_80_10_10():
  rng = np.random.default_rng(1)
  ids, segments, _ = mlm.pack_documents(_documents(rng, 400), 64, CLS, SEP)
  out = mlm.mask_rows(ids, segments, np.random.default_rng(2), vocab_size=VOCAB, mask_id=MASK,
                      special_ids=(0, CLS, SEP), max_predictions=20)
  actions = collections.Counter()
  for r in range(len(ids)):
    real = (segments[r] > 0) & ~np.isin(ids[r], (0, CLS, SEP))
    n = int(out["mlm_weights"][r].sum())
    assert n == min(20, max(1, round(real.sum() * 0.15)))
    chosen = out["mlm_positions"][r, :n]
    assert len(set(chosen)) == n and real[chosen].all()
    assert np.array_equal(out["mlm_ids"][r, :n], ids[r, chosen])  # the targets are the original tokens
    untouched = np.setdiff1d(np.arange(ids.shape[1]), chosen)
    assert np.array_equal(out["input_ids"][r, untouched], ids[r, untouched])
    for position in chosen:
      new = out["input_ids"][r, position]
      actions["mask" if new == MASK else "same" if new == ids[r, position] else "random"] += 1
  total = sum(actions.values())
  # random replacements that happen to draw the same token count as "same": 10% · 1/VOCAB of the chosen
  assert actions["mask"] / total == pytest.approx(0.8, abs=0.02)
  assert actions["random"] / total == pytest.approx(0.1 * (1 - 1 / VOCAB), abs=0.015)
  assert actions["same"] / total == pytest.approx(0.1 * (1 + 1 / VOCAB), abs=0.015)


def _batcher(ids, segments, positions, **kwargs):
  return mlm.MlmBatcher(ids, segments, positions, vocab_size=VOCAB, mask_id=MASK, special_ids=(0, CLS, SEP),
                        max_predictions=8, **kwargs)


def test_a_resumed_batcher_gives_the_batches_an_uninterrupted_one_would():
  ids, segments, positions = mlm.pack_documents(_documents(np.random.default_rng(3), 200), 32, CLS, SEP)
  straight = _batcher(ids, segments, positions, batch_size=8, seed=5)
  expected = [next(straight) for _ in range(straight.num_batches() + 3)]  # into the second epoch
  first = _batcher(ids, segments, positions, batch_size=8, seed=5)
  got = [next(first) for _ in range(4)]
  resumed = _batcher(ids, segments, positions, batch_size=8, seed=5)
  resumed.restore(first.state())
  got += [next(resumed) for _ in range(len(expected) - 4)]
  for a, b in zip(expected, got):
    assert all(np.array_equal(a[k], b[k]) for k in mlm.MLM_BATCH_KEYS)
  with pytest.raises(ValueError, match="fingerprint"):
    _batcher(ids, segments, positions, batch_size=8, seed=6).restore(first.state())


def test_evaluation_batches_cover_every_row_once_and_shards_split_them():
  ids, segments, positions = mlm.pack_documents(_documents(np.random.default_rng(4), 60), 32, CLS, SEP)
  whole = list(_batcher(ids, segments, positions, batch_size=8, shuffle=False).iterate_epoch(0))
  assert len(whole) == -(-len(ids) // 8)
  seen = np.concatenate([b["segment_ids"] for b in whole])
  assert np.array_equal(seen[:len(ids)], segments) and not seen[len(ids):].any()  # padding rows: empty
  assert np.all(np.concatenate([b["mlm_weights"] for b in whole])[len(ids):] == 0)
  again = list(_batcher(ids, segments, positions, batch_size=8, shuffle=False).iterate_epoch(0))
  assert all(np.array_equal(a["input_ids"], b["input_ids"]) for a, b in zip(whole, again))  # the same masks
  shards = [list(_batcher(ids, segments, positions, batch_size=8, shuffle=False, num_shards=2,
                          shard_index=i).iterate_epoch(0)) for i in range(2)]
  for b, (s0, s1) in zip(whole, zip(*shards)):
    assert np.array_equal(b["input_ids"][0::2], s0["input_ids"]) and np.array_equal(b["input_ids"][1::2],
                                                                                      s1["input_ids"])


def test_articles_split_by_title_skip_empty_ones_and_name_a_bad_line(tmp_path):
  path, _ = mlm_fixture.write_corpus(tmp_path)
  articles = articles_lib.read_articles(path)
  splits = articles_lib.split_articles(articles, {"validation": 0.2, "test": 0.2})
  assert sum(len(v) for v in splits.values()) == len(articles) - 2  # the two empty ones
  again = articles_lib.split_articles(list(reversed(articles)), {"validation": 0.2, "test": 0.2})
  assert {k: sorted(v) for k, v in splits.items()} == {k: sorted(v) for k, v in again.items()}  # by title, not order
  assert all(len(v) > 5 for v in splits.values())
  with open(path, "a", encoding="utf-8") as f:
    f.write("{not json\n")
  with pytest.raises(ValueError, match=r"articles.jsonl, line 81: invalid JSON"):
    articles_lib.read_articles(path)


def test_the_context_free_baseline_is_what_guessing_by_token_frequency_scores_at_the_masked_positions():
  """Against the masking itself: the masked targets of many draws, scored by the rows' token frequencies, give the
  baseline's loss and accuracy; and no other context-free distribution scores below its loss."""
  rng = np.random.default_rng(0)
  ids = rng.choice(np.arange(5, 12), p=[0.4, 0.2, 0.15, 0.1, 0.08, 0.05, 0.02], size=(6, 24)).astype(np.int32)
  ids[:, 0], ids[:, 21], ids[:, 22:] = CLS, SEP, 0  # 20 real tokens a row: 3 masked each, every token alike
  segments = np.where(ids > 0, 1, 0).astype(np.int32)
  baseline = mlm.context_free_scores(ids, segments, special_ids=(0, CLS, SEP))
  counts = collections.Counter(ids[:, 1:21].ravel().tolist())
  p = {t: c / 120 for t, c in counts.items()}
  assert baseline["mlm_loss"] == pytest.approx(-sum(q * np.log(q) for q in p.values()), rel=1e-12)
  assert baseline["mlm_accuracy"] == pytest.approx(max(p.values()), rel=1e-12)
  targets = np.concatenate([
      mlm.mask_rows(ids, segments, rng, vocab_size=VOCAB, mask_id=MASK, special_ids=(0, CLS, SEP),
                    max_predictions=3)["mlm_ids"].ravel() for _ in range(3000)])
  best = max(p, key=p.get)
  assert np.mean([-np.log(p[t]) for t in targets]) == pytest.approx(baseline["mlm_loss"], abs=0.01)
  assert np.mean(targets == best) == pytest.approx(baseline["mlm_accuracy"], abs=0.01)
  for _ in range(20):
    q = rng.dirichlet(np.ones(len(p)))
    assert -sum(p[t] * np.log(qt) for t, qt in zip(sorted(p), q)) >= baseline["mlm_loss"]
  with pytest.raises(ValueError, match="no maskable token"):
    mlm.context_free_scores(ids[:, :1], segments[:, :1], special_ids=(0, CLS, SEP))
