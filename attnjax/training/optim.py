"""Optimiser and learning-rate schedules from the config, with optax.

Vaswani et al. 2017 §5.3: Adam(β₁ 0.9, β₂ 0.98, ε 1e-9) and lr = d_model^-0.5 · min(step^-0.5, step · warmup^-1.5)
("rsqrt"), here optionally times a ``learning_rate`` factor. Also ``constant`` and ``linear_warmup_cosine``.
Gradient clipping by global norm precedes Adam.
"""

from __future__ import annotations

import jax.numpy as jnp
import optax

SCHEDULES = ("rsqrt", "constant", "linear_warmup_cosine")


def learning_rate_schedule(cfg, d_model: int | None = None):
  """``cfg``: ``schedule``, ``learning_rate``, ``warmup_steps``, ``steps``."""
  name, lr, warmup = cfg.schedule, float(cfg.learning_rate), int(cfg.warmup_steps)
  if name == "rsqrt":
    if d_model is None:
      raise ValueError("schedule 'rsqrt' needs the model's d_model")
    def rsqrt(step):
      step = jnp.maximum(jnp.asarray(step, jnp.float32) + 1.0, 1.0)  # optax counts from 0, the paper from 1
      return lr * d_model**-0.5 * jnp.minimum(step**-0.5, step * max(warmup, 1)**-1.5)
    return rsqrt
  if name == "constant":
    return optax.linear_schedule(0.0, lr, max(warmup, 1)) if warmup else optax.constant_schedule(lr)
  if name == "linear_warmup_cosine":
    return optax.warmup_cosine_decay_schedule(0.0, lr, max(warmup, 1), max(int(cfg.steps), warmup + 1))
  raise ValueError(f"train.schedule must be one of {SCHEDULES}, got {name!r}")


def make_optimizer(cfg, d_model: int | None = None):
  """(optax transformation, schedule) from ``cfg`` = the config's ``train`` section."""
  schedule = learning_rate_schedule(cfg, d_model)
  parts = []
  if cfg.grad_clip_norm and cfg.grad_clip_norm > 0:
    parts.append(optax.clip_by_global_norm(cfg.grad_clip_norm))
  parts.append(optax.adamw(schedule, b1=cfg.adam_b1, b2=cfg.adam_b2, eps=cfg.adam_eps,
                           weight_decay=cfg.weight_decay))
  return optax.chain(*parts), schedule
