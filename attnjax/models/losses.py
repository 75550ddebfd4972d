"""Label-smoothed cross-entropy over the real (non-padding) target tokens.

Szegedy et al. 2016 §7 / Vaswani et al. 2017 §5.4 (ε_ls = 0.1): the target distribution is
q = (1 - ε)·onehot(y) + ε·u, u uniform over the K entries that can be targets, and the loss per token is
H(q, p) = -Σ_v q_v log p_v. The support of u is the real vocabulary without PAD and BOS (never targets) and without
the ids the embedding table is padded with (``data.vocab_multiple``): K = vocab_size - 2, not the padded V. Reported alongside: the plain NLL
-log p_y (what perplexity and the paper's comparisons use) and the number of real tokens, so that sums over devices,
micro-batches and hosts normalise exactly once.

The per-token losses have a hand-written VJP (:func:`_token_losses`). With lse = log Σ_v exp z_v and p = softmax(z),

    loss = lse - (1 - ε) z_y - (ε / K) Σ_{v ∈ support} z_v,     nll = lse - z_y,
    ∂loss/∂z = p - (1 - ε) onehot(y) - (ε / K) 1_support,       ∂nll/∂z = p - onehot(y),

so the backward pass is one elementwise pass over the logits, recomputing p from the saved log-sum-exp, where
autodiff of ``log_softmax`` keeps a second ``[B, T, V]`` array (the log-probabilities) alive from the forward pass
and makes several passes over it. The output layer's logits are the largest activation of a translation model.
"""

from __future__ import annotations

import functools

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
  loss, nll = _token_losses(logits, targets, support, float(label_smoothing))
  weights = weights.astype(jnp.float32)
  return {"loss_sum": jnp.sum(loss * weights), "nll_sum": jnp.sum(nll * weights), "ntokens": jnp.sum(weights)}


def _forward(logits, targets, support, label_smoothing):
  z = logits.astype(jnp.float32)
  lse = jax.nn.logsumexp(z, axis=-1)
  z_target = jnp.take_along_axis(z, targets[..., None], axis=-1)[..., 0]
  mean_support = jnp.sum(jnp.where(support, z, 0.0), axis=-1) / jnp.sum(support)
  nll = lse - z_target
  # H(q, p) = (1 - ε)·(-log p_y) + ε · mean over the support of (-log p_v)
  loss = (1.0 - label_smoothing) * nll + label_smoothing * (lse - mean_support)
  return (loss, nll), lse


@functools.partial(jax.custom_vjp, nondiff_argnums=(3,))
def _token_losses(logits, targets, support, label_smoothing):
  """``(loss, nll)`` per token, ``[B, T]`` each, float32 (see the module docstring)."""
  return _forward(logits, targets, support, label_smoothing)[0]


def _token_losses_fwd(logits, targets, support, label_smoothing):
  out, lse = _forward(logits, targets, support, label_smoothing)
  return out, (logits, targets, support, lse)


def _token_losses_bwd(label_smoothing, residuals, cotangents):
  logits, targets, support, lse = residuals
  g_loss, g_nll = (c[..., None] for c in cotangents)
  probs = jnp.exp(logits.astype(jnp.float32) - lse[..., None])
  is_target = jnp.arange(logits.shape[-1]) == targets[..., None]
  d_logits = ((g_loss + g_nll) * probs
              - jnp.where(is_target, (1.0 - label_smoothing) * g_loss + g_nll, 0.0)
              - jnp.where(support, label_smoothing / jnp.sum(support) * g_loss, 0.0))
  return d_logits.astype(logits.dtype), None, None


_token_losses.defvjp(_token_losses_fwd, _token_losses_bwd)
