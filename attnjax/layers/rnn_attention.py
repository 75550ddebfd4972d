"""Attention layers of the RNN encoder-decoder papers: Flax modules that own the parameters and call the kernels.

* :class:`AdditiveAttention` -- Bahdanau, Cho & Bengio (2015), "Neural Machine Translation by Jointly Learning to
  Align and Translate" (Sec. 3.1, App. A.1.2)::

      e_ij = v^T tanh(W_q s_{i-1} + W_k h_j),   a_ij = softmax_j(e_ij),   c_i = sum_j a_ij h_j

* :class:`LuongAttention` -- Luong, Pham & Manning (2015), "Effective Approaches to Attention-based Neural Machine
  Translation" (Sec. 3.1, Eq. 7-8), global attention with the score functions::

      dot:     score(h_t, h̄_s) = h_t^T h̄_s
      general: score(h_t, h̄_s) = h_t^T W_a h̄_s
      concat:  score(h_t, h̄_s) = v_a^T tanh(W_a [h_t; h̄_s])

The maths lives in :mod:`attnjax.kernels.additive` / :mod:`attnjax.kernels.multiplicative`; these modules only create
the parameters and pick the kernel. Shapes: ``query [B, T, Dq]``, ``keys [B, S, Dk]``, ``values [B, S, Dv]``,
``mask [B, S]`` (or broadcastable to ``[B, T, S]``, boolean, True = attend); they return
``(context [B, T, Dv], weights [B, T, S])`` with the weights in float32.
"""

from __future__ import annotations

from typing import Any, Optional

import flax.linen as nn
import jax.numpy as jnp

from attnjax.kernels.additive import additive_attention, additive_scores, masked_softmax
from attnjax.kernels.multiplicative import multiplicative_attention

__all__ = ["AdditiveAttention", "LuongAttention", "LUONG_SCORES"]

LUONG_SCORES = ("dot", "general", "concat")

Initializer = Any


def _cast(dtype, *xs):
  """Casts the arrays (None passes through) to the compute dtype."""
  return tuple(None if x is None else jnp.asarray(x, dtype) for x in xs)


def _check_positive(value, name):
  if value is not None and (not isinstance(value, int) or value < 1):
    raise ValueError(f"{name} must be a positive int, got {value!r}")


class AdditiveAttention(nn.Module):
  """Bahdanau additive ("concat" MLP) attention, Bahdanau et al. (2015) Sec. 3.1 and App. A.1.2.

      e_ij = v^T tanh(W_q s_{i-1} + W_k h_j)
      a_ij = exp(e_ij) / sum_{j' unmasked} exp(e_ij')
      c_i  = sum_j a_ij h_j

  Parameters (created lazily from the input sizes): ``w_query [Dq, A]``, ``w_keys [Dk, A]``, ``v [A]``; no biases,
  as in the paper. ``W_k h_j`` does not depend on the decoder step, so a decoder calls :meth:`project_keys` once per
  source sentence and passes the result as ``keys_proj`` at every step (App. A.1.2 makes the same remark).

  Attributes:
    attention_dim: A, the hidden size of the alignment MLP (n' = 1000 in the paper).
    dtype: compute dtype of the projections; the softmax runs in float32 regardless (see the kernels).
    param_dtype: dtype of the parameters.
    kernel_init: initializer of ``w_query`` and ``w_keys``.
    v_init: initializer of ``v``. The paper starts ``v_a`` at zero, which makes the first gradients of ``W_q``/``W_k``
      exactly zero; a small random ``v`` lets all three learn from the first step.
  """
  attention_dim: int
  dtype: Any = jnp.float32
  param_dtype: Any = jnp.float32
  kernel_init: Initializer = nn.initializers.lecun_normal()
  v_init: Initializer = nn.initializers.normal(stddev=0.1)

  def __post_init__(self):
    _check_positive(self.attention_dim, "attention_dim")
    super().__post_init__()

  @nn.compact
  def _weights(self, query_dim: Optional[int] = None, key_dim: Optional[int] = None):
    """The parameters that the given sizes ask for: ``(w_query, w_keys, v)``, None for the ones not asked for.

    The one compact method, so that both :meth:`project_keys` (which only knows Dk) and :meth:`__call__` (which may
    only know Dq when given ``keys_proj``) can create their parameters lazily; Flax checks the stored shapes.
    """
    a = self.attention_dim
    w_query = v = w_keys = None
    if query_dim is not None:
      w_query = self.param("w_query", self.kernel_init, (query_dim, a), self.param_dtype)
      v = self.param("v", self.v_init, (a,), self.param_dtype)
    if key_dim is not None:
      w_keys = self.param("w_keys", self.kernel_init, (key_dim, a), self.param_dtype)
    return w_query, w_keys, v

  def project_keys(self, keys):
    """``W_k h_j`` for every source position: keys ``[B, S, Dk]`` -> keys_proj ``[B, S, A]``."""
    if keys.ndim != 3:
      raise ValueError(f"keys must be [B, S, Dk], got shape {keys.shape}")
    _, w_keys, _ = self._weights(key_dim=keys.shape[-1])
    keys, w_keys = _cast(self.dtype, keys, w_keys)
    return jnp.einsum("bsd,da->bsa", keys, w_keys)

  def __call__(self, query, keys, keys_proj=None, values=None, mask=None):
    """Context vectors and alignment weights.

    Args:
      query: ``[B, T, Dq]`` decoder states (s_{i-1} in the paper).
      keys: ``[B, S, Dk]`` annotations h_j.
      keys_proj: optional ``[B, S, A]`` = ``project_keys(keys)``, precomputed once per source sentence.
      values: ``[B, S, Dv]``; defaults to ``keys`` (the paper sums the annotations themselves).
      mask: optional boolean, True = attend; ``[B, S]`` or broadcastable to ``[B, T, S]``.

    Returns:
      ``(context [B, T, Dv], weights [B, T, S])``.
    """
    if query.ndim != 3:
      raise ValueError(f"query must be [B, T, Dq], got shape {query.shape}")
    values = keys if values is None else values
    if keys_proj is None:
      w_query, w_keys, v = self._weights(query_dim=query.shape[-1], key_dim=keys.shape[-1])
      query, keys, values, w_query, w_keys, v = _cast(self.dtype, query, keys, values, w_query, w_keys, v)
      return additive_attention(query, keys, values, w_query=w_query, w_keys=w_keys, v=v, mask=mask)
    # With precomputed keys only the query side is projected per call: the O(S·Dk·A) key projection is what a
    # decoder step must not repeat.
    w_query, _, v = self._weights(query_dim=query.shape[-1])
    query, keys_proj, values, w_query, v = _cast(self.dtype, query, keys_proj, values, w_query, v)
    if keys_proj.shape[:2] != values.shape[:2]:
      raise ValueError(f"keys_proj shape {keys_proj.shape} does not match values shape {values.shape} in B, S")
    scores = additive_scores(jnp.einsum("btd,da->bta", query, w_query), keys_proj, v)
    weights = masked_softmax(scores, mask)
    # Same convention as the kernels: the weighted sum runs in the values dtype, the returned weights stay float32.
    context = jnp.einsum("bts,bsd->btd", weights.astype(values.dtype), values)
    return context, weights


class LuongAttention(nn.Module):
  """Luong et al. (2015) global attention (Sec. 3.1, Eq. 7-8) from the current decoder state h_t::

      score(h_t, h̄_s) = h_t^T h̄_s                    "dot"      (needs Dq == Dk; no parameters)
                      = h_t^T W_a h̄_s                "general"  (W_a: ``w_a [Dq, Dk]``)
                      = v_a^T tanh(W_a [h_t; h̄_s])   "concat"   (W_a: ``w_a [Dq + Dk, A]``, v_a: ``v_a [A]``)
      a_t(s) = softmax_s(score(h_t, h̄_s)),    c_t = sum_s a_t(s) h̄_s

  Attributes:
    score: ``"dot"``, ``"general"`` or ``"concat"``.
    attention_dim: A for ``"concat"``; None means Dq. Must be None for the other scores (it would be ignored).
    dtype / param_dtype / kernel_init: as in :class:`AdditiveAttention`; ``v_init`` for ``v_a``.
  """
  score: str = "general"
  attention_dim: Optional[int] = None
  dtype: Any = jnp.float32
  param_dtype: Any = jnp.float32
  kernel_init: Initializer = nn.initializers.lecun_normal()
  v_init: Initializer = nn.initializers.normal(stddev=0.1)

  def __post_init__(self):
    if self.score not in LUONG_SCORES:
      raise ValueError(f"score must be one of {LUONG_SCORES}, got {self.score!r}")
    _check_positive(self.attention_dim, "attention_dim")
    if self.attention_dim is not None and self.score != "concat":
      raise ValueError(f"attention_dim is only used by score='concat', got attention_dim={self.attention_dim} "
                       f"with score={self.score!r}")
    super().__post_init__()

  @nn.compact
  def __call__(self, query, keys, values=None, mask=None):
    """Context vectors and alignment weights.

    Args:
      query: ``[B, T, Dq]`` current decoder states h_t.
      keys: ``[B, S, Dk]`` encoder states h̄_s.
      values: ``[B, S, Dv]``; defaults to ``keys`` (c_t is a weighted average of the h̄_s in the paper).
      mask: optional boolean, True = attend; ``[B, S]`` or broadcastable to ``[B, T, S]``.

    Returns:
      ``(context [B, T, Dv], weights [B, T, S])``.
    """
    if query.ndim != 3 or keys.ndim != 3:
      raise ValueError(f"query must be [B, T, Dq] and keys [B, S, Dk], got {query.shape} and {keys.shape}")
    values = keys if values is None else values
    dq, dk = query.shape[-1], keys.shape[-1]
    w = v = None
    if self.score == "general":
      w = self.param("w_a", self.kernel_init, (dq, dk), self.param_dtype)
    elif self.score == "concat":
      a = self.attention_dim or dq
      w = self.param("w_a", self.kernel_init, (dq + dk, a), self.param_dtype)
      v = self.param("v_a", self.v_init, (a,), self.param_dtype)
    query, keys, values, w, v = _cast(self.dtype, query, keys, values, w, v)
    return multiplicative_attention(query, keys, values, score=self.score, w=w, v=v, mask=mask)
