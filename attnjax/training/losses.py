"""Label-smoothed cross-entropy over the real (non-padding) target tokens.

Szegedy et al. 2016 §7 / Vaswani et al. 2017 §5.4 (ε_ls = 0.1): the target distribution is
q = (1 - ε)·onehot(y) + ε/V, and the loss per token is H(q, p) = -Σ_v q_v log p_v. Reported alongside: the plain NLL
-log p_y (what perplexity and the paper's comparisons use) and the number of real tokens, so that sums over devices,
micro-batches and hosts normalise exactly once.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import optax


def smoothed_cross_entropy(logits, targets, weights, label_smoothing: float = 0.0):
  """Sums over real tokens; divide by ``ntokens`` after any accumulation.

  Args:
    logits: ``[B, T, V]`` (float32).
    targets: ``[B, T]`` int ids.
    weights: ``[B, T]`` 1.0 for real tokens, 0.0 for padding.
    label_smoothing: ε.

  Returns:
    dict of scalars: ``loss_sum`` (smoothed), ``nll_sum`` (unsmoothed), ``ntokens``.
  """
  if not 0.0 <= label_smoothing < 1.0:
    raise ValueError(f"label_smoothing must be in [0, 1), got {label_smoothing}")
  vocab = logits.shape[-1]
  log_probs = jax.nn.log_softmax(logits.astype(jnp.float32))
  nll = -jnp.take_along_axis(log_probs, targets[..., None], axis=-1)[..., 0]
  smoothed = optax.smooth_labels(jax.nn.one_hot(targets, vocab), label_smoothing)
  loss = -jnp.sum(smoothed * log_probs, axis=-1)
  weights = weights.astype(jnp.float32)
  return {"loss_sum": jnp.sum(loss * weights), "nll_sum": jnp.sum(nll * weights), "ntokens": jnp.sum(weights)}
