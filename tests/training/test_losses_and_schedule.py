"""Label-smoothed cross-entropy and the inverse-square-root schedule against hand computations."""

import math

import jax.numpy as jnp
import ml_collections
import numpy as np
import pytest

from attnjax.training.losses import smoothed_cross_entropy
from attnjax.training.optim import learning_rate_schedule


def test_label_smoothed_loss_matches_hand_computation_and_ignores_padding():
  logits = np.array([[[2.0, 0.5, -1.0], [0.1, 0.2, 0.3]], [[1.0, 1.0, 1.0], [5.0, -5.0, 0.0]]], np.float32)
  targets = np.array([[0, 2], [1, 0]])
  weights = np.array([[1, 1], [1, 0]], np.float32)  # the last token is padding
  eps, vocab = 0.1, 3
  expected_loss, expected_nll = 0.0, 0.0
  for b in range(2):
    for t in range(2):
      if not weights[b, t]:
        continue
      logp = logits[b, t] - math.log(sum(math.exp(x) for x in logits[b, t]))
      q = [eps / vocab + (1 - eps) * (v == targets[b, t]) for v in range(vocab)]
      expected_loss += -sum(q[v] * logp[v] for v in range(vocab))
      expected_nll += -logp[targets[b, t]]
  out = smoothed_cross_entropy(jnp.asarray(logits), jnp.asarray(targets), jnp.asarray(weights), eps)
  assert float(out["ntokens"]) == 3
  np.testing.assert_allclose(float(out["loss_sum"]), expected_loss, rtol=1e-6)
  np.testing.assert_allclose(float(out["nll_sum"]), expected_nll, rtol=1e-6)


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
