"""NumPy transcriptions of the papers' formulas, in float64: the independent side of the kernel tests."""

import math

import numpy as np


def attention(q, k, v, *, mask=None, bias=None, scale=None, rel_key=None, rel_value=None):
  """softmax(q·(k + a^K)·scale + bias) (v + a^V) per (b, n, t), with explicit loops; masked rows give zeros.

  q: [B,T,N,H], k/v: [B,S,N,H], mask/bias broadcastable to [B,N,T,S], rel_*: [T,S,H]. Returns (out, weights).
  """
  q, k, v = (np.asarray(x, np.float64) for x in (q, k, v))
  b_, t_, n_, h_ = q.shape
  s_ = k.shape[1]
  scale = 1.0 / np.sqrt(h_) if scale is None else scale
  mask = np.ones((b_, n_, t_, s_), bool) if mask is None else np.broadcast_to(np.asarray(mask), (b_, n_, t_, s_))
  bias = np.zeros((b_, n_, t_, s_)) if bias is None else np.broadcast_to(np.asarray(bias, np.float64),
                                                                          (b_, n_, t_, s_))
  out = np.zeros((b_, t_, n_, v.shape[-1]))
  weights = np.zeros((b_, n_, t_, s_))
  for b in range(b_):
    for n in range(n_):
      for t in range(t_):
        e = np.array([q[b, t, n] @ (k[b, s, n] + (0 if rel_key is None else rel_key[t, s])) * scale
                      + bias[b, n, t, s] for s in range(s_)])
        valid = mask[b, n, t]
        if not valid.any():
          continue
        w = np.where(valid, np.exp(e - e[valid].max()), 0.0)
        w /= w.sum()
        weights[b, n, t] = w
        out[b, t, n] = sum(w[s] * (v[b, s, n] + (0 if rel_value is None else rel_value[t, s])) for s in range(s_))
  return out, weights


def masked_softmax_and_context(e, values, mask):
  """Bahdanau/Luong weights and context from scores e [B,T,S], mask [B,T,S] or None, with loops:

  a_ts = exp(e_ts) / sum_{allowed s'} exp(e_ts'); c_t = sum_s a_ts values_s."""
  values = np.asarray(values, np.float64)
  b_, t_, s_ = e.shape
  weights = np.zeros((b_, t_, s_))
  context = np.zeros((b_, t_, values.shape[-1]))
  for b in range(b_):
    for t in range(t_):
      allowed = [s for s in range(s_) if mask is None or mask[b, t, s]]
      if not allowed:
        continue  # no valid key: weights and context stay zero
      top = max(e[b, t, s] for s in allowed)
      denom = sum(math.exp(e[b, t, s] - top) for s in allowed)
      for s in allowed:
        weights[b, t, s] = math.exp(e[b, t, s] - top) / denom
        context[b, t] += weights[b, t, s] * values[b, s]
  return context, weights
