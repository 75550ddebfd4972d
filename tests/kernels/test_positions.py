"""Sinusoidal tables, Shaw relative attention and T5 buckets against transcriptions of the papers."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.test_util import check_grads

from attnjax.kernels import (RelativeTable, multi_head_attention, relative_attention, relative_position_ids,
                             shaw_relative_embeddings, shaw_relative_table, sinusoidal_positions, t5_relative_bias,
                             t5_relative_position_bucket)
from tests.kernels import reference


@pytest.mark.parametrize("dim", [8, 7])
def test_sinusoidal_positions_follow_vaswani_section_3_5(dim):
  pe = np.asarray(sinusoidal_positions(11, dim))
  assert pe.shape == (11, dim)
  for pos in range(11):
    for j in range(dim):
      i = j // 2
      angle = pos / 10000 ** (2 * i / dim)
      expected = math.sin(angle) if j % 2 == 0 else math.cos(angle)
      assert abs(pe[pos, j] - expected) < 1e-5, (pos, j)


def test_sinusoidal_positions_at_offsets_equal_rows_of_the_table():
  table = sinusoidal_positions(20, 16)
  np.testing.assert_allclose(sinusoidal_positions(0, 16, positions=jnp.array([[5, 6, 7]]))[0], table[5:8], atol=1e-6)


def _shaw_inputs(rng, t=6, s=6, n=2, h=4, k_max=2):
  q, k, v = (jnp.asarray(rng.normal(size=(1, l, n, h)), jnp.float32) for l in (t, s, s))
  wk, wv = (jnp.asarray(rng.normal(size=(2 * k_max + 1, h)), jnp.float32) for _ in range(2))
  return q, k, v, wk, wv


def test_relative_attention_matches_shaw_equations(rng):
  q, k, v, wk, wv = _shaw_inputs(rng, t=5, s=7)
  k_max = 2
  rel_k = shaw_relative_embeddings(wk, jnp.arange(5), jnp.arange(7), k_max)
  rel_v = shaw_relative_embeddings(wv, jnp.arange(5), jnp.arange(7), k_max)
  # a^K_ij = w^K_{clip(j - i, -k, k)} written out index by index
  a_k = np.array([[np.asarray(wk)[min(max(j - i, -k_max), k_max) + k_max] for j in range(7)] for i in range(5)])
  a_v = np.array([[np.asarray(wv)[min(max(j - i, -k_max), k_max) + k_max] for j in range(7)] for i in range(5)])
  np.testing.assert_allclose(rel_k, a_k)
  out, w = relative_attention(q, k, v, rel_key=rel_k, rel_value=rel_v, return_weights=True)
  ref_out, ref_w = reference.attention(q, k, v, rel_key=a_k, rel_value=a_v)
  np.testing.assert_allclose(out, ref_out, atol=1e-5)
  np.testing.assert_allclose(w, ref_w, atol=1e-6)


def _padded_self_attention(x, pad, params, position_term):
  """Self-attention of x placed after `pad` masked-out padding tokens; returns the outputs of x's tokens."""
  b, t, d = x.shape
  xp = jnp.concatenate([jnp.zeros((b, pad, d)), x], axis=1)
  valid = jnp.arange(t + pad) >= pad
  mask = (valid[:, None] & valid[None, :])[None, None]
  return position_term(xp, mask, jnp.arange(t + pad))[:, pad:]


def test_relative_attention_is_invariant_to_shifting_all_positions(rng, x64):
  """In float64: the invariance is exact, so the two paddings agree to float64's rounding (in float32 they differ by
  float32's, which two CPUs round differently)."""
  d, n, t = 8, 2, 6
  x = jnp.asarray(rng.normal(size=(1, t, d)), jnp.float64)
  params = {name: {"kernel": jnp.asarray(rng.normal(size=(d, n, d // n)), jnp.float64)}
            for name in ("query", "key", "value")}
  params["out"] = {"kernel": jnp.asarray(rng.normal(size=(n, d // n, d)), jnp.float64)}
  wk = jnp.asarray(rng.normal(size=(7, d // n)), jnp.float64)

  def shaw(xp, mask, pos):
    rel = shaw_relative_embeddings(wk, pos, pos, 3)
    return multi_head_attention(xp, xp, params, num_heads=n, mask=mask, rel_key=rel, rel_value=rel)

  def absolute(xp, mask, pos):
    xp = xp + sinusoidal_positions(0, d, positions=pos)
    return multi_head_attention(xp, xp, params, num_heads=n, mask=mask)

  shifted, plain = _padded_self_attention(x, 5, params, shaw), _padded_self_attention(x, 0, params, shaw)
  assert shifted.dtype == jnp.float64
  np.testing.assert_allclose(shifted, plain, atol=1e-11)
  # the same test separates absolute encodings, which do change with the shift
  assert not np.allclose(_padded_self_attention(x, 5, params, absolute),
                         _padded_self_attention(x, 0, params, absolute), atol=1e-3)


def test_relative_attention_gradients_match_numerical_differentiation(rng, x64):
  q, k, v, wk, wv = (x.astype(jnp.float64) for x in _shaw_inputs(rng))
  pos = jnp.arange(6)
  f = lambda q, k, v, wk, wv: relative_attention(q, k, v, rel_key=shaw_relative_embeddings(wk, pos, pos, 2),
                                                 rel_value=shaw_relative_embeddings(wv, pos, pos, 2), is_causal=True)
  check_grads(f, (q, k, v, wk, wv), order=1, modes=["rev"], atol=1e-6, rtol=1e-6)


def test_the_factored_table_matches_shaw_equations_per_row_of_positions(rng):
  """RelativeTable (q·w_r per distance, then gathered; weights summed by distance, then · w_r) against eqs. 3-4
  written out per example, with positions that differ by row (packed documents restart them) and a causal mask."""
  b, t, n, h, k_max = 2, 6, 2, 4, 2
  q, k, v = (jnp.asarray(rng.normal(size=(b, t, n, h)), jnp.float32) for _ in range(3))
  wk, wv = (jnp.asarray(rng.normal(size=(2 * k_max + 1, h)), jnp.float32) for _ in range(2))
  pos = jnp.array([[0, 1, 2, 3, 4, 5], [0, 1, 0, 1, 2, 3]])
  mask = np.tril(np.ones((t, t), bool))[None, None]
  out, w = relative_attention(q, k, v, rel_key=shaw_relative_table(wk, pos, pos, k_max),
                              rel_value=shaw_relative_table(wv, pos, pos, k_max), mask=mask, return_weights=True)
  for row in range(b):
    p = np.asarray(pos[row])
    clip = lambda i, j: min(max(p[j] - p[i], -k_max), k_max) + k_max
    a_k = np.array([[np.asarray(wk)[clip(i, j)] for j in range(t)] for i in range(t)])
    a_v = np.array([[np.asarray(wv)[clip(i, j)] for j in range(t)] for i in range(t)])
    ref_out, ref_w = reference.attention(q[row:row + 1], k[row:row + 1], v[row:row + 1], mask=mask, rel_key=a_k,
                                         rel_value=a_v)
    np.testing.assert_allclose(out[row:row + 1], ref_out, atol=1e-5)
    np.testing.assert_allclose(w[row:row + 1], ref_w, atol=1e-6)


def test_the_factored_table_equals_the_gathered_vectors_with_dropout_and_in_gradients(rng, x64):
  q, k, v, wk, wv = (x.astype(jnp.float64) for x in _shaw_inputs(rng, t=5, s=7))
  qp, kp = jnp.arange(1, 6), jnp.arange(7)  # distances -5..5, clipped at ±2: every row sees several
  common = dict(dropout_rate=0.3, dropout_rng=jax.random.PRNGKey(5))
  factored = lambda q, k, v, wk, wv: relative_attention(q, k, v, rel_key=shaw_relative_table(wk, qp, kp, 2),
                                                        rel_value=shaw_relative_table(wv, qp, kp, 2), **common)
  gathered = lambda q, k, v, wk, wv: relative_attention(q, k, v, rel_key=shaw_relative_embeddings(wk, qp, kp, 2),
                                                        rel_value=shaw_relative_embeddings(wv, qp, kp, 2), **common)
  args = (q, k, v, wk, wv)
  np.testing.assert_allclose(factored(*args), gathered(*args), atol=1e-12)
  loss = lambda f: lambda *a: jnp.sum(jnp.sin(f(*a)))
  grads = (jax.grad(loss(f), argnums=range(5))(*args) for f in (factored, gathered))
  for g_f, g_g in zip(*grads):
    np.testing.assert_allclose(g_f, g_g, atol=1e-12)
  check_grads(factored, args, order=1, modes=["rev"], atol=1e-6, rtol=1e-6)


def test_a_factored_table_of_the_wrong_shape_is_refused(rng):
  q, k, v, wk, _ = _shaw_inputs(rng)
  with pytest.raises(ValueError, match="rel_key must be a RelativeTable of table"):
    ids = relative_position_ids(jnp.arange(6), jnp.arange(6), 2)
    relative_attention(q, k, v, rel_key=RelativeTable(wk[:, :3], ids))


def _t5_bucket_reference(rel, bidirectional, num_buckets, max_distance):
  """T5's bucketing (Raffel et al. 2020) for one integer relative position rel = j - i."""
  n = -rel
  ret = 0
  if bidirectional:
    num_buckets //= 2
    if n < 0:
      ret += num_buckets
    n = abs(n)
  else:
    n = max(n, 0)
  max_exact = num_buckets // 2
  if n < max_exact:
    return ret + n
  large = max_exact + int(math.log(n / max_exact) / math.log(max_distance / max_exact) * (num_buckets - max_exact))
  return ret + min(large, num_buckets - 1)


@pytest.mark.parametrize("bidirectional", [True, False])
def test_t5_buckets_match_the_scalar_definition(bidirectional):
  rel = np.arange(-300, 301)
  got = np.asarray(t5_relative_position_bucket(jnp.asarray(rel), bidirectional=bidirectional, num_buckets=32,
                                               max_distance=128))
  expected = [_t5_bucket_reference(int(r), bidirectional, 32, 128) for r in rel]
  np.testing.assert_array_equal(got, expected)
  assert got.min() == 0 and got.max() == 31  # every bucket is used over [-300, 300]


def test_t5_relative_bias_gathers_one_scalar_per_head_and_bucket(rng):
  table = jnp.asarray(rng.normal(size=(32, 3)), jnp.float32)
  bias = np.asarray(t5_relative_bias(table, jnp.arange(4), jnp.arange(6)))
  assert bias.shape == (1, 3, 4, 6)
  for i in range(4):
    for j in range(6):
      np.testing.assert_allclose(bias[0, :, i, j], np.asarray(table)[_t5_bucket_reference(j - i, True, 32, 128)])


def test_relative_position_ids_and_errors():
  np.testing.assert_array_equal(relative_position_ids(jnp.arange(3), jnp.arange(3), 1),
                                [[1, 2, 2], [0, 1, 2], [0, 0, 1]])
  with pytest.raises(ValueError, match="table"):
    shaw_relative_embeddings(jnp.zeros((4, 2)), jnp.arange(3), jnp.arange(3), 2)
  with pytest.raises(ValueError, match="rel_key"):
    relative_attention(*(jnp.zeros((1, 3, 1, 2)),) * 3, rel_key=jnp.zeros((3, 4, 2)))
