"""Label-smoothed cross-entropy over the real (non-padding) target tokens.

Szegedy et al. 2016 §7 / Vaswani et al. 2017 §5.4 (ε_ls = 0.1): the target distribution is
q = (1 - ε)·onehot(y) + ε·u, u uniform over the K entries that can be targets, and the loss per token is
H(q, p) = -Σ_v q_v log p_v. The support of u is the real vocabulary without PAD and BOS (never targets) and without
the ids the embedding table is padded with (``data.vocab_multiple``): K = vocab_size - 2, not the padded V. Reported alongside: the plain NLL
-log p_y (what perplexity and the paper's comparisons use) and the number of real tokens, so that sums over devices,
micro-batches and hosts normalise exactly once.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from attnjax.tokens import never_predicted


def smoothed_cross_entropy(logits, targets, weights, label_smoothing: float = 0.0, vocab_size: int | None = None):
  """Sums over real tokens; divide by ``ntokens`` after any accumulation.

  Args:
    logits: ``[B, T, V]`` (float32); V may exceed the vocabulary (padded tables).
    targets: ``[B, T]`` int ids.
    weights: ``[B, T]`` 1.0 for real tokens, 0.0 for padding.
    label_smoothing: ε.
    vocab_size: the real vocabulary's size (default V): smoothing mass goes to ids in [2, vocab_size) only.

  Returns:
    dict of scalars: ``loss_sum`` (smoothed), ``nll_sum`` (unsmoothed), ``ntokens``.
  """
  if not 0.0 <= label_smoothing < 1.0:
    raise ValueError(f"label_smoothing must be in [0, 1), got {label_smoothing}")
  padded = logits.shape[-1]
  support = ~never_predicted(jnp.arange(padded), padded if vocab_size is None else vocab_size)
  log_probs = jax.nn.log_softmax(logits.astype(jnp.float32))
  nll = -jnp.take_along_axis(log_probs, targets[..., None], axis=-1)[..., 0]
  # H(q, p) = (1 - ε)·(-log p_y) + ε · mean over the support of (-log p_v)
  uniform = -jnp.sum(jnp.where(support, log_probs, 0.0), axis=-1) / jnp.sum(support)
  loss = (1.0 - label_smoothing) * nll + label_smoothing * uniform
  weights = weights.astype(jnp.float32)
  return {"loss_sum": jnp.sum(loss * weights), "nll_sum": jnp.sum(nll * weights), "ntokens": jnp.sum(weights)}
