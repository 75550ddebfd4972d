"""Label-smoothed cross-entropy and the inverse-square-root schedule against hand computations."""

import math

import jax.numpy as jnp
import ml_collections
import numpy as np
import pytest

from attnjax.models.losses import smoothed_cross_entropy
from attnjax.training.optim import learning_rate_schedule


def test_label_smoothed_loss_matches_hand_computation_and_ignores_padding():
  # a real vocabulary of 6 ids in a table padded to 8: smoothing mass goes to ids 2..5 only (K = 4), never to PAD (0),
  # BOS (1) or the padded ids 6 and 7 (Szegedy et al. 2016: q = (1 - ε) onehot(y) + ε u, u uniform over the targets)
  rng = np.random.default_rng(0)
  logits = rng.normal(size=(2, 2, 8)).astype(np.float32)
  logits[..., 6:] += 3.0  # large logits on the padded ids: they weigh in the softmax, not in the smoothed target
  targets = np.array([[2, 5], [3, 4]])
  weights = np.array([[1, 1], [1, 0]], np.float32)  # the last token is padding
  eps, real, support = 0.1, 6, (2, 3, 4, 5)
  expected_loss, expected_nll = 0.0, 0.0
  for b in range(2):
    for t in range(2):
      if not weights[b, t]:
        continue
      logp = logits[b, t] - math.log(sum(math.exp(x) for x in logits[b, t]))
      q = [(eps / len(support) if v in support else 0.0) + (1 - eps) * (v == targets[b, t]) for v in range(8)]
      assert abs(sum(q) - 1.0) < 1e-12
      expected_loss += -sum(q[v] * logp[v] for v in range(8))
      expected_nll += -logp[targets[b, t]]
  out = smoothed_cross_entropy(jnp.asarray(logits), jnp.asarray(targets), jnp.asarray(weights), eps, vocab_size=real)
  assert float(out["ntokens"]) == 3
  np.testing.assert_allclose(float(out["loss_sum"]), expected_loss, rtol=1e-5)
  np.testing.assert_allclose(float(out["nll_sum"]), expected_nll, rtol=1e-5)
  # without vocab_size the whole table but PAD and BOS is the support
  full = smoothed_cross_entropy(jnp.asarray(logits), jnp.asarray(targets), jnp.asarray(weights), eps)
  assert abs(float(full["loss_sum"]) - expected_loss) > 1e-3


def test_label_smoothing_out_of_range_is_refused():
  with pytest.raises(ValueError, match="label_smoothing"):
    smoothed_cross_entropy(jnp.zeros((1, 1, 3)), jnp.zeros((1, 1), int), jnp.ones((1, 1)), 1.0)


def test_rsqrt_schedule_is_vaswani_equation_3():
  cfg = ml_collections.ConfigDict(dict(schedule="rsqrt", learning_rate=1.0, warmup_steps=4000, steps=100000))
  schedule = learning_rate_schedule(cfg, d_model=512)
  for step in (1, 100, 3999, 4000, 4001, 20000):
    expected = 512**-0.5 * min(step**-0.5, step * 4000**-1.5)
    np.testing.assert_allclose(float(schedule(step - 1)), expected, rtol=1e-6)  # optax counts from 0
  peak = float(schedule(3999))
  assert abs(peak - 512**-0.5 * 4000**-0.5) < 1e-9  # the maximum is at the end of the warm-up


def test_unknown_schedule_is_refused_naming_the_key():
  cfg = ml_collections.ConfigDict(dict(schedule="cyclic", learning_rate=1.0, warmup_steps=1, steps=2))
  with pytest.raises(ValueError, match="train.schedule"):
    learning_rate_schedule(cfg, 8)


@pytest.mark.parametrize("dtype", [jnp.float32, jnp.bfloat16])
def test_fused_loss_gradients_equal_autodiff_of_log_softmax(dtype):
  # the hand-written VJP against autodiff of the textbook formula, for both outputs and weighted sums of them
  import jax  # pylint: disable=g-import-not-at-top
  rng = np.random.default_rng(1)
  logits = jnp.asarray(3 * rng.normal(size=(3, 5, 11)), dtype)
  targets = jnp.asarray(rng.integers(2, 9, (3, 5)))
  weights = jnp.asarray(rng.integers(0, 2, (3, 5)), jnp.float32)
  eps, real = 0.1, 9
  support = (jnp.arange(11) >= 2) & (jnp.arange(11) < real)

  def reference(z):
    log_probs = jax.nn.log_softmax(z.astype(jnp.float32))
    nll = -jnp.take_along_axis(log_probs, targets[..., None], axis=-1)[..., 0]
    uniform = -jnp.sum(jnp.where(support, log_probs, 0.0), axis=-1) / jnp.sum(support)
    loss = (1 - eps) * nll + eps * uniform
    return jnp.sum(loss * weights) + 0.3 * jnp.sum(nll * weights)

  def fused(z):
    out = smoothed_cross_entropy(z, targets, weights, eps, vocab_size=real)
    return out["loss_sum"] + 0.3 * out["nll_sum"]

  tol = 1e-5 if dtype == jnp.float32 else 1e-2
  np.testing.assert_allclose(float(fused(logits)), float(reference(logits)), rtol=tol)
  got, want = jax.grad(fused)(logits), jax.grad(reference)(logits)
  assert got.dtype == dtype
  np.testing.assert_allclose(np.asarray(got, np.float32), np.asarray(want, np.float32), atol=tol, rtol=tol)
