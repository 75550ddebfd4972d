"""Exact attention in O(T·H + block²) memory: online softmax forward, recomputing backward (custom VJP).

FlashAttention-2 (Dao 2023) in JAX. The forward pass visits key blocks j for each query block i and keeps, per query
row, the running maximum m, the running normaliser l and the unnormalised output o:

    m' = max(m, rowmax(S_ij)),  P = exp(S_ij - m'),  l' = e^{m-m'} l + rowsum(P),  o' = e^{m-m'} o + P V_j,

and returns o / l and the log-sum-exp L = m + log l. The backward pass never stores P: for each key block it
recomputes P = exp(S_ij - L) and accumulates, with D = rowsum(dO ∘ O),

    dV_j += Pᵀ dO_i,  dP = dO_i V_jᵀ,  dS = P ∘ (dP - D),  dQ_i += dS K_j,  dK_j += dSᵀ Q_i   (Q pre-scaled).

Dropout multiplies P by the keep mask Z/(1-rate) after the normaliser (which sums the undropped P); the identity
D = rowsum(dO ∘ O) = rowsum(P ∘ dP) still holds with dP = Z ∘ (dO Vᵀ)/(1-rate). Z is regenerated per block from a
counter-based hash (:func:`attnjax.kernels.common.dropout_keep`), never stored.

Memory: the ``[B, N, block_q, block_kv]`` scores of one block pair, plus O(T·H) accumulators and the ``[B, N, T]``
log-sum-exp. A ``mask``/``bias`` whose T or S axis has size 1 (a key-padding mask) is sliced, never broadcast, so it
stays O(S). With ``is_causal`` the key blocks above the diagonal are skipped, halving the work.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from attnjax.kernels.common import MASK_VALUE, accumulation_dtype, dropout_keep


def _pad_axis(x, axis: int, size: int, value):
  if x is None or x.shape[axis] in (1, size):
    return x
  widths = [(0, 0)] * x.ndim
  widths[axis] = (0, size - x.shape[axis])
  return jnp.pad(x, widths, constant_values=value)


def _block(x, i, j, bq: int, bk: int):
  """Block (i, j) of a ``[b?, n?, T?, S?]`` array; axes of size 1 stay size 1 (they broadcast)."""
  if x is None:
    return None
  t_len = bq if x.shape[2] > 1 else 1
  s_len = bk if x.shape[3] > 1 else 1
  start = (0, 0, i * bq if x.shape[2] > 1 else 0, j * bk if x.shape[3] > 1 else 0)
  return jax.lax.dynamic_slice(x, start, x.shape[:2] + (t_len, s_len))


class _Config:
  """Static (hashable) parameters of the kernel."""

  def __init__(self, *, scale, is_causal, dropout_rate, block_q, block_kv, q_len, kv_len, batch, heads, dtype):
    self.acc = np.dtype(accumulation_dtype(dtype)).type  # accumulation dtype, callable on Python scalars
    self.scale = scale
    self.is_causal = is_causal
    self.dropout_rate = dropout_rate
    self.bq = block_q
    self.bk = block_kv
    self.q_len = q_len
    self.kv_len = kv_len
    self.batch = batch
    self.heads = heads
    self.kv_padded = kv_len % block_kv != 0
    self._key = (scale, is_causal, dropout_rate, block_q, block_kv, q_len, kv_len, batch, heads, self.acc)

  def __hash__(self):
    return hash(self._key)

  def __eq__(self, other):
    return isinstance(other, _Config) and self._key == other._key


def _scores_and_valid(cfg, qi, kj, mask, bias, i, j):
  """Scores ``[B, N, bq, bk]`` of block (i, j) (``qi`` is pre-scaled) and where they may be attended.

  ``valid`` is None when nothing can be masked (no mask, not causal, no key padding): the hot loop then skips every
  select, which on CPU is a full pass over the block.
  """
  s = jnp.einsum("bnqh,bnkh->bnqk", qi, kj, preferred_element_type=cfg.acc)
  if bias is not None:
    s = s + _block(bias, i, j, cfg.bq, cfg.bk).astype(cfg.acc)
  valid = None
  if cfg.kv_padded:
    cols = j * cfg.bk + jnp.arange(cfg.bk)
    valid = (cols < cfg.kv_len)[None, None, None, :]  # keys padded up to a whole block
  if cfg.is_causal:
    cols = j * cfg.bk + jnp.arange(cfg.bk)
    rows = i * cfg.bq + jnp.arange(cfg.bq)
    causal = (cols[None, :] <= rows[:, None])[None, None]
    valid = causal if valid is None else valid & causal
  if mask is not None:
    block_mask = _block(mask, i, j, cfg.bq, cfg.bk)
    valid = block_mask if valid is None else valid & block_mask
  if valid is None:
    return s, None
  return jnp.where(valid, s, MASK_VALUE), valid


def _masked_exp(x, valid):
  # exp(MASK_VALUE - m) is 0 unless every key so far was masked (m = MASK_VALUE): the select covers that case.
  return jnp.exp(x) if valid is None else jnp.where(valid, jnp.exp(x), 0.0)


def _dropout_scale(cfg, seeds, i, j):
  """Z/(1-rate) for block (i, j): ``[B, N, bq, bk]``."""
  b = jnp.arange(cfg.batch)[:, None, None, None]
  n = jnp.arange(cfg.heads)[None, :, None, None]
  t = (i * cfg.bq + jnp.arange(cfg.bq))[None, None, :, None]
  s = (j * cfg.bk + jnp.arange(cfg.bk))[None, None, None, :]
  keep = dropout_keep(seeds, cfg.dropout_rate, cfg.heads, cfg.q_len, b, n, t, s)
  return jnp.where(keep, cfg.acc(1.0 / (1.0 - cfg.dropout_rate)), cfg.acc(0.0))


def _kv_blocks_for(cfg, i, num_kv_blocks: int):
  """Number of key blocks query block i needs: all, or up to the diagonal when causal."""
  if not cfg.is_causal:
    return num_kv_blocks
  last_row = (i + 1) * cfg.bq - 1
  return jnp.minimum(num_kv_blocks, last_row // cfg.bk + 1)


def _first_q_block_for(cfg, j):
  """First query block that can see key block j (causal: rows t >= j·bk)."""
  if not cfg.is_causal:
    return 0
  return (j * cfg.bk) // cfg.bq


def _forward(cfg, q, k, v, mask, bias, seeds):
  """q ``[B, N, Tp, H]``, k/v ``[B, N, Sp, H]`` → (out ``[B, N, Tp, Hv]``, lse ``[B, N, Tp]``)."""
  bsz, heads, tp, _ = q.shape
  nq, nk = tp // cfg.bq, k.shape[2] // cfg.bk
  hv = v.shape[-1]

  def one_query_block(i):
    qi = jax.lax.dynamic_slice_in_dim(q, i * cfg.bq, cfg.bq, axis=2)

    def step(j, carry):
      o, m, l = carry
      kj = jax.lax.dynamic_slice_in_dim(k, j * cfg.bk, cfg.bk, axis=2)
      vj = jax.lax.dynamic_slice_in_dim(v, j * cfg.bk, cfg.bk, axis=2)
      s, valid = _scores_and_valid(cfg, qi, kj, mask, bias, i, j)
      m_new = jnp.maximum(m, s.max(axis=-1))
      p = _masked_exp(s - m_new[..., None], valid)
      correction = jnp.exp(m - m_new)
      l = l * correction + p.sum(axis=-1)
      if cfg.dropout_rate > 0.0:
        p = p * _dropout_scale(cfg, seeds, i, j)
      o = o * correction[..., None] + jnp.einsum("bnqk,bnkh->bnqh", p.astype(v.dtype), vj,
                                                 preferred_element_type=cfg.acc)
      return o, m_new, l

    init = (jnp.zeros((bsz, heads, cfg.bq, hv), cfg.acc),
            jnp.full((bsz, heads, cfg.bq), MASK_VALUE, cfg.acc),
            jnp.zeros((bsz, heads, cfg.bq), cfg.acc))
    o, m, l = jax.lax.fori_loop(0, _kv_blocks_for(cfg, i, nk), step, init)
    empty = l == 0.0  # no valid key in the whole row: output zeros, not 0/0
    l_safe = jnp.where(empty, 1.0, l)
    return (o / l_safe[..., None]).astype(q.dtype), jnp.where(empty, 0.0, m + jnp.log(l_safe))

  out, lse = jax.lax.map(one_query_block, jnp.arange(nq))  # [nq, B, N, bq, Hv], [nq, B, N, bq]
  out = jnp.moveaxis(out, 0, 2).reshape(bsz, heads, tp, hv)
  lse = jnp.moveaxis(lse, 0, 2).reshape(bsz, heads, tp)
  return out, lse


def _reduce_to(x, shape):
  """Sums ``x`` over the axes where ``shape`` has size 1 (the adjoint of broadcasting)."""
  axes = tuple(a for a, (xs, ts) in enumerate(zip(x.shape, shape)) if ts == 1 and xs != 1)
  return x.sum(axis=axes, keepdims=True) if axes else x


def _backward(cfg, res, d_out):
  q, k, v, mask, bias, seeds, out, lse = res
  nq, nk = q.shape[2] // cfg.bq, k.shape[2] // cfg.bk
  d_out = d_out.astype(cfg.acc)
  delta = jnp.sum(d_out * out.astype(cfg.acc), axis=-1)  # D = rowsum(dO ∘ O): [B, N, Tp]

  def one_key_block(j, carry):
    dq, dk, dv, dbias = carry
    kj = jax.lax.dynamic_slice_in_dim(k, j * cfg.bk, cfg.bk, axis=2)
    vj = jax.lax.dynamic_slice_in_dim(v, j * cfg.bk, cfg.bk, axis=2)

    def step(i, inner):
      dkj, dvj, dq, dbias = inner
      qi = jax.lax.dynamic_slice_in_dim(q, i * cfg.bq, cfg.bq, axis=2)
      doi = jax.lax.dynamic_slice_in_dim(d_out, i * cfg.bq, cfg.bq, axis=2)
      lse_i = jax.lax.dynamic_slice_in_dim(lse, i * cfg.bq, cfg.bq, axis=2)
      delta_i = jax.lax.dynamic_slice_in_dim(delta, i * cfg.bq, cfg.bq, axis=2)
      s, valid = _scores_and_valid(cfg, qi, kj, mask, bias, i, j)
      p = _masked_exp(s - lse_i[..., None], valid)
      dp = jnp.einsum("bnqh,bnkh->bnqk", doi, vj.astype(cfg.acc))
      if cfg.dropout_rate > 0.0:
        z = _dropout_scale(cfg, seeds, i, j)
        dvj = dvj + jnp.einsum("bnqk,bnqh->bnkh", p * z, doi)
        dp = dp * z
      else:
        dvj = dvj + jnp.einsum("bnqk,bnqh->bnkh", p, doi)
      ds = p * (dp - delta_i[..., None])
      if dbias is not None:
        g = _reduce_to(ds, dbias.shape[:2] + (cfg.bq if dbias.shape[2] > 1 else 1, cfg.bk if dbias.shape[3] > 1 else 1))
        start = (0, 0, i * cfg.bq if dbias.shape[2] > 1 else 0, j * cfg.bk if dbias.shape[3] > 1 else 0)
        dbias = jax.lax.dynamic_update_slice(dbias, jax.lax.dynamic_slice(dbias, start, g.shape) + g, start)
      dqi = jax.lax.dynamic_slice_in_dim(dq, i * cfg.bq, cfg.bq, axis=2)
      dqi = dqi + jnp.einsum("bnqk,bnkh->bnqh", ds, kj, preferred_element_type=cfg.acc)
      dq = jax.lax.dynamic_update_slice_in_dim(dq, dqi, i * cfg.bq, axis=2)
      dkj = dkj + jnp.einsum("bnqk,bnqh->bnkh", ds, qi, preferred_element_type=cfg.acc)
      return dkj, dvj, dq, dbias

    init = (jnp.zeros(kj.shape, cfg.acc), jnp.zeros(vj.shape, cfg.acc), dq, dbias)
    dkj, dvj, dq, dbias = jax.lax.fori_loop(_first_q_block_for(cfg, j), nq, step, init)
    dk = jax.lax.dynamic_update_slice_in_dim(dk, dkj, j * cfg.bk, axis=2)
    dv = jax.lax.dynamic_update_slice_in_dim(dv, dvj, j * cfg.bk, axis=2)
    return dq, dk, dv, dbias

  init = (jnp.zeros(q.shape, cfg.acc), jnp.zeros(k.shape, cfg.acc), jnp.zeros(v.shape, cfg.acc),
          None if bias is None else jnp.zeros(bias.shape, cfg.acc))
  dq, dk, dv, dbias = jax.lax.fori_loop(0, nk, one_key_block, init)
  dbias = None if bias is None else dbias.astype(bias.dtype)
  return dq.astype(q.dtype), dk.astype(k.dtype), dv.astype(v.dtype), None, dbias, None


@functools.partial(jax.custom_vjp, nondiff_argnums=(0,))
def _attention(cfg, q, k, v, mask, bias, seeds):
  return _forward(cfg, q, k, v, mask, bias, seeds)[0]


def _attention_fwd(cfg, q, k, v, mask, bias, seeds):
  out, lse = _forward(cfg, q, k, v, mask, bias, seeds)
  return out, (q, k, v, mask, bias, seeds, out, lse)


_attention.defvjp(_attention_fwd, _backward)


def blockwise_attention(query, key, value, *, mask, bias, is_causal, scale, dropout_rate, dropout_seeds,
                        block_q=512, block_kv=512):
  """Exact attention of ``[B, T, N, H]`` inputs block by block; see the module docstring.

  ``mask``/``bias`` are already rank 4 and broadcastable to ``[B, N, T, S]`` (checked by the caller). Lengths that
  are not multiples of the block sizes are padded; padded keys are masked, padded queries dropped.
  """
  bsz, t, heads, _ = query.shape
  s = key.shape[1]
  if block_q < 1 or block_kv < 1:
    raise ValueError(f"block_q and block_kv must be positive, got {block_q}, {block_kv}")
  bq, bk = min(block_q, t), min(block_kv, s)
  tp, sp = -(-t // bq) * bq, -(-s // bk) * bk
  cfg = _Config(scale=scale, is_causal=bool(is_causal), dropout_rate=float(dropout_rate), block_q=bq, block_kv=bk,
                q_len=t, kv_len=s, batch=bsz, heads=heads, dtype=query.dtype)
  # [B, L, N, H] -> [B, N, L, H]: a block is then a contiguous slice of one axis.
  q = _pad_axis(jnp.swapaxes(query, 1, 2), 2, tp, 0)
  k = _pad_axis(jnp.swapaxes(key, 1, 2), 2, sp, 0)
  v = _pad_axis(jnp.swapaxes(value, 1, 2), 2, sp, 0)
  mask = _pad_axis(_pad_axis(mask, 2, tp, False), 3, sp, False)
  bias = _pad_axis(_pad_axis(bias, 2, tp, 0), 3, sp, 0)
  # Scaling q once (O(T·H)) instead of every block of scores (O(T·S)); autodiff carries the factor back into dq.
  out = _attention(cfg, q * jnp.asarray(scale, q.dtype), k, v, mask, bias, dropout_seeds)
  return jnp.swapaxes(out[:, :, :t], 1, 2)
