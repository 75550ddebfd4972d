"""Linear attention (Katharopoulos et al. 2020, "Transformers are RNNs"): softmax(q k^T) replaced by a positive
feature map phi(q) phi(k)^T, so that attention costs time and memory linear in the sequence length.

Pure functions of arrays (no Flax, no state), with the head layout used throughout attnjax:

* query  ``[B, T, N, H]``
* key    ``[B, S, N, H]``
* value  ``[B, S, N, H_v]``

where ``B`` is the batch, ``T``/``S`` the query/key lengths, ``N`` the number of heads and ``H`` the head dimension.
Boolean masks use ``True`` = attend.

Feature-map accumulations are carried out in float32 whatever the input dtype (float64 inputs keep float64), and a
query row that has no valid key yields exactly zero (never NaN).

``is_causal``, ``chunk_size`` and ``feature_map`` determine array shapes or control flow, so they must be static
Python values under ``jax.jit`` (pass them through ``static_argnames`` or close over them with ``functools.partial``).
"""

from __future__ import annotations

from typing import Optional

import jax
import jax.numpy as jnp
from jax import lax

from attnjax.kernels.common import accumulation_dtype, check_qkv, check_static_int, check_valid_mask

__all__ = ["linear_attention"]

Array = jax.Array

_FEATURE_MAPS = {
    # elu(x) + 1 > 0 keeps the denominator positive (paper, Sec. 3.2.1).
    "elu": lambda x: jax.nn.elu(x) + 1.0,
    "relu": jax.nn.relu,
}


def linear_attention(
    query: Array,
    key: Array,
    value: Array,
    *,
    is_causal: bool = False,
    kv_valid: Optional[Array] = None,
    feature_map: str = "elu",
    eps: float = 1e-6,
    chunk_size: Optional[int] = None,
) -> Array:
  r"""Kernelised linear attention (Katharopoulos et al., 2020).

    From "Transformers are RNNs: Fast Autoregressive Transformers with Linear
    Attention" (ICML 2020). With a positive feature map ``phi``::

        non-causal:  out_i = phi(q_i)^T (sum_j phi(k_j) v_j^T)
                             / (phi(q_i)^T sum_j phi(k_j) + eps)
        causal:      same, with both sums restricted to j <= i

    ``phi(x) = elu(x) + 1`` (``feature_map="elu"``, the paper's choice) or
    ``phi(x) = relu(x)`` (``feature_map="relu"``). Keys with
    ``kv_valid == False`` get ``phi(k_j) = 0`` and so contribute nothing; a
    query with no valid key outputs 0 (numerator 0, denominator ``eps``).

    The causal form is evaluated chunk-wise: a ``lax.scan`` over chunks of
    ``chunk_size`` positions carries the running state
    ``S = sum phi(k) v^T`` ``[B, N, H, H_v]`` and ``z = sum phi(k)`` ``[B, N, H]``;
    inside a chunk the contribution of earlier positions of the same chunk is
    computed exactly by a ``[chunk, chunk]`` masked product. Neither a
    ``[T, T]`` matrix nor a ``[T, H, H_v]`` prefix sum is materialised in the
    forward pass.

    Args:
      query: ``[B, T, N, H]``.
      key: ``[B, S, N, H]`` (``S == T`` required when causal).
      value: ``[B, S, N, H_v]``.
      is_causal: static bool.
      kv_valid: optional bool ``[B, S]`` key padding mask (True = real key).
      feature_map: static, ``"elu"`` or ``"relu"``.
      eps: added to the denominator.
      chunk_size: static int >= 1 (causal only), default ``min(64, T)``;
        ``T`` is padded up to a multiple of it.

    Returns:
      ``[B, T, N, H_v]`` in ``query.dtype``; computed in float32 (float64 for
      float64 inputs).

    Complexity:
      non-causal: time ``O(B N (T + S) H H_v)``, memory ``O(B N (T + S) (H + H_v) +
      B N H H_v)``. Causal: time ``O(B N T (chunk + H) H_v)``, memory
      ``O(B N T chunk)`` in the forward pass; reverse-mode additionally keeps
      one ``[B, N, H, H_v]`` state per chunk, i.e. ``O(B N (T / chunk) H H_v)``.
    """
  if not isinstance(feature_map, str) or feature_map not in _FEATURE_MAPS:
    raise ValueError(f"`feature_map` must be one of {sorted(_FEATURE_MAPS)}, got {feature_map!r}.")
  if chunk_size is not None:
    chunk_size = check_static_int("chunk_size", chunk_size, 1)
  if not isinstance(is_causal, bool):
    raise ValueError(f"`is_causal` must be a static Python bool, got {is_causal!r}.")
  batch, t_len, s_len, heads, _ = check_qkv(query, key, value)
  if is_causal and s_len != t_len:
    raise ValueError("causal linear_attention needs aligned positions: `key` length S="
                     f"{s_len} must equal `query` length T={t_len}.")
  kv_valid = check_valid_mask("kv_valid", kv_valid, (batch, s_len))
  phi = _FEATURE_MAPS[feature_map]

  # float32 accumulation: the state sums T outer products, which bfloat16
  # cannot represent accurately.
  acc = accumulation_dtype(query, key, value)
  q = phi(query.astype(acc))
  k = phi(key.astype(acc))
  v = value.astype(acc)
  if kv_valid is not None:
    k = k * kv_valid[:, :, None, None].astype(acc)
  eps = jnp.asarray(eps, acc)

  if not is_causal:
    kv = jnp.einsum("bsnh,bsnv->bnhv", k, v)
    z = jnp.sum(k, axis=1)  # [B, N, H]
    num = jnp.einsum("btnh,bnhv->btnv", q, kv)
    den = jnp.einsum("btnh,bnh->btn", q, z) + eps
    return (num / den[..., None]).astype(query.dtype)

  if chunk_size is None:
    chunk_size = 64
  chunk = max(1, min(chunk_size, t_len))
  num_chunks = -(-t_len // chunk)
  padded = num_chunks * chunk

  def to_chunks(x):
    # Padding sits after every real position, so under the causal mask it
    # can never reach a real query; padded keys also have zero values.
    x = jnp.pad(x, [(0, 0), (0, padded - t_len), (0, 0), (0, 0)])
    x = x.reshape((batch, num_chunks, chunk) + x.shape[2:])
    return jnp.moveaxis(x, 1, 0)  # scan runs over the leading axis

  qc, kc, vc = to_chunks(q), to_chunks(k), to_chunks(v)
  intra_mask = jnp.tril(jnp.ones((chunk, chunk), acc))  # j <= i

  def step(carry, xs):
    state, z = carry  # [B, N, H, Hv], [B, N, H]: sums over earlier chunks
    q_i, k_i, v_i = xs  # [B, C, N, *]
    # Earlier chunks, through the carried state.
    num = jnp.einsum("bcnh,bnhv->bcnv", q_i, state)
    den = jnp.einsum("bcnh,bnh->bcn", q_i, z)
    # Same chunk, exactly: a small [C, C] causal product.
    a = jnp.einsum("bcnh,bdnh->bncd", q_i, k_i) * intra_mask
    num = num + jnp.einsum("bncd,bdnv->bcnv", a, v_i)
    den = den + jnp.sum(a, axis=-1).transpose(0, 2, 1)
    out = num / (den + eps)[..., None]
    state = state + jnp.einsum("bcnh,bcnv->bnhv", k_i, v_i)
    z = z + jnp.sum(k_i, axis=1)
    return (state, z), out

  init = (
      jnp.zeros((batch, heads, q.shape[-1], v.shape[-1]), acc),
      jnp.zeros((batch, heads, q.shape[-1]), acc),
  )
  _, out = lax.scan(step, init, (qc, kc, vc))
  out = jnp.moveaxis(out, 0, 1).reshape(batch, padded, heads, v.shape[-1])
  return out[:, :t_len].astype(query.dtype)
