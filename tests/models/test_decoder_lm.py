"""The decoder-only LM: causal (no position sees its future), packed documents kept apart (each as if alone), the
output matrix tied to the embeddings, cached decoding equal to teacher forcing; and the rows it trains on."""

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from attnjax.data.lm import stream_rows
from attnjax.models.lm import DecoderLM
from attnjax.tokens import BOS_ID, EOS_ID

POSITIONALS = ("learned", "sinusoidal", "relative", "t5")


def _model(positional="learned"):
  return DecoderLM(vocab_size=23, num_layers=2, d_model=16, num_heads=2, d_ff=32, dropout_rate=0.0,
                   positional=positional, max_length=32, max_relative_distance=8, implementation="xla")


def _params(model, ids):
  return nn.meta.unbox(model.init(jax.random.PRNGKey(0), ids)["params"])


@pytest.mark.parametrize("positional", POSITIONALS)
def test_no_position_sees_its_future(positional):
  model = _model(positional)
  ids = jax.random.randint(jax.random.PRNGKey(1), (2, 10), 3, 23)
  params = _params(model, ids)
  logits = model.apply({"params": params}, ids)
  changed = ids.at[:, 6:].set((ids[:, 6:] + 5) % 20 + 3)
  again = model.apply({"params": params}, changed)
  np.testing.assert_allclose(np.asarray(logits[:, :6]), np.asarray(again[:, :6]), atol=1e-6)
  assert not np.allclose(np.asarray(logits[:, 6:]), np.asarray(again[:, 6:]))


@pytest.mark.parametrize("positional", POSITIONALS)
def test_packed_documents_are_each_scored_as_if_alone(positional):
  model = _model(positional)
  first, second = np.array([1, 5, 6, 7, 2]), np.array([1, 8, 9, 10, 11, 12, 2])
  row = np.concatenate([first, second, [0, 0]])[None].astype(np.int32)
  segments = np.array([[1] * 5 + [2] * 7 + [0, 0]], np.int32)
  positions = np.array([list(range(5)) + list(range(7)) + [0, 0]], np.int32)
  params = _params(model, row)
  packed = np.asarray(model.apply({"params": params}, row, segments, positions))
  alone = np.asarray(model.apply({"params": params}, second[None].astype(np.int32)))
  np.testing.assert_allclose(packed[0, 5:12], alone[0], atol=1e-5)
  np.testing.assert_allclose(packed[0, :5], np.asarray(model.apply({"params": params},
                                                                   first[None].astype(np.int32)))[0], atol=1e-5)


def test_the_output_matrix_is_the_embedding_matrix():
  model = _model()
  ids = jax.random.randint(jax.random.PRNGKey(2), (2, 7), 3, 23)
  params = _params(model, ids)
  names = [jax.tree_util.keystr(path) for path, _ in jax.tree_util.tree_flatten_with_path(params)[0]]
  assert not any("logits" in n or "output" in n for n in names)
  logits, state = model.apply({"params": params}, ids, capture_intermediates=True)
  normed = state["intermediates"]["final_norm"]["__call__"][0]
  np.testing.assert_allclose(np.asarray(logits), np.asarray(normed) @ np.asarray(params["embed"]["embedding"]).T,
                             atol=1e-5)


@pytest.mark.parametrize("positional", ("learned", "sinusoidal"))
def test_the_first_layer_reads_the_scaled_embeddings_plus_the_positions(positional):
  """h₀ = s·E[x] + P[positions], with s = √D and PE[p, 2i] = sin(p / 10000^(2i/D)), PE[p, 2i+1] = cos(...) for
  sinusoidal positions (Vaswani et al. §3.4, §3.5), s = 1 and P the learned table for learned ones (GPT-2)."""
  model = _model(positional)
  d = model.d_model
  ids = jax.random.randint(jax.random.PRNGKey(4), (2, 9), 3, 23)
  params = _params(model, ids)
  _, state = model.apply({"params": params}, ids, capture_intermediates=True)
  h0 = np.asarray(state["intermediates"]["dropout"]["__call__"][0])
  embedding = np.asarray(params["embed"]["embedding"])[np.asarray(ids)]
  p = np.arange(9)[:, None]
  if positional == "sinusoidal":
    i = np.arange(d // 2)[None, :]
    table = np.zeros((9, d))
    table[:, 0::2], table[:, 1::2] = np.sin(p / 10000 ** (2 * i / d)), np.cos(p / 10000 ** (2 * i / d))
    expected = np.sqrt(d) * embedding + table
  else:
    expected = embedding + np.asarray(params["positions"]["position_embedding"])[:9]
  np.testing.assert_allclose(h0, np.broadcast_to(expected, h0.shape), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("positional", POSITIONALS)
def test_cached_decoding_equals_teacher_forcing(positional):
  model = _model(positional)
  ids = jax.random.randint(jax.random.PRNGKey(3), (2, 9), 3, 23)
  params = _params(model, ids)
  full = model.apply({"params": params}, ids)
  cache = model.apply({"params": params}, 2, 16, method=model.init_cache)
  prefill, cache = model.apply({"params": params}, ids[:, :4], cache, method=model.decode)
  steps = [prefill]
  for t in range(4, 9):
    logits, cache = model.apply({"params": params}, ids[:, t:t + 1], cache, method=model.decode)
    steps.append(logits)
  np.testing.assert_allclose(np.asarray(jnp.concatenate(steps, axis=1)), np.asarray(full), atol=1e-5)


def test_rows_predict_every_token_of_the_stream_once_and_nothing_across_documents():
  rng = np.random.default_rng(0)
  documents = [rng.integers(3, 50, size=rng.integers(0, 30)) for _ in range(12)]
  rows = stream_rows(documents, 16)
  stream = np.concatenate([np.concatenate([[BOS_ID], d, [EOS_ID]]) for d in documents])
  # inputs are the stream cut in rows of 16; targets the same shifted by one
  assert np.array_equal(rows["inputs"].reshape(-1)[:len(stream)], stream)
  assert np.array_equal(rows["targets"].reshape(-1)[:len(stream) - 1], stream[1:])
  # weighted targets: every token and EOS of every document, never a BOS, never padding
  predicted = rows["targets"][rows["weights"] > 0]
  assert len(predicted) == sum(len(d) + 1 for d in documents) and not np.any(predicted == BOS_ID)
  assert np.array_equal(np.sort(predicted), np.sort(np.concatenate([np.append(d, EOS_ID) for d in documents])))
  for r in range(len(rows["inputs"])):
    seg, pos, inp = rows["segment_ids"][r], rows["positions"][r], rows["inputs"][r]
    for s in range(1, seg.max() + 1):
      where = np.flatnonzero(seg == s)
      assert np.array_equal(pos[where], np.arange(len(where)))  # restart in each document and at the row start
      assert s == 1 or inp[where[0]] == BOS_ID  # a later segment starts with its document
    assert np.all(rows["weights"][r][seg == 0] == 0)
