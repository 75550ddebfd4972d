"""Optimiser and learning-rate schedules from the config, with optax.

Vaswani et al. 2017 §5.3: Adam(β₁ 0.9, β₂ 0.98, ε 1e-9) and lr = d_model^-0.5 · min(step^-0.5, step · warmup^-1.5)
("rsqrt"), here optionally times a ``learning_rate`` factor. Also ``constant``, ``linear_warmup_cosine``, ``linear``
(BERT's warm-up then linear decay to 0 at ``train.steps``), ``budget_linear`` (the same shape tied to the time budget,
:class:`BudgetSchedule`) and ``halving`` (the RNN papers' plain SGD schedule: constant, then halved every ``decay_every`` steps from
``decay_start``: Sutskever et al. 2014 halve every half epoch after 5 epochs, Luong et al. 2015 every epoch after 5).
Gradient clipping by global norm precedes the optimiser: ``adam`` (AdamW with ``weight_decay`` on the matrices only), ``sgd`` (with
``momentum``, Nesterov's when ``nesterov``: ConvS2S), ``adadelta`` (RNNsearch) or ``adagrad`` (See et al. 2017).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import optax

from attnjax.config import OPTIMIZERS, SCHEDULES  # the names the config check accepts, beside the config


class BudgetSchedule:
  """A learning rate tied to the run's time budget, not to a step count (Izsak et al. 2021; Geiping & Goldstein
  2022): linear warm-up over the first ``warmup_steps`` steps, then linear decay that reaches 0 when the budget
  (``train.time_limit_minutes``) is spent, however fast the machine steps:

      lr(step, p) = learning_rate · min((step + 1) / warmup_steps, 1) · max(1 − p, 0),

  where ``p`` is the share of the budget used before the step (training seconds over the whole run, restarts
  included, over ``60 · time_limit_minutes``). A step count cannot know ``p``, so the train step takes it as an
  argument (:func:`attnjax.training.steps.make_train_step`) and scales the optimiser's update by this rate; the
  optimiser itself is built with a rate of 1 (:func:`make_optimizer`), which for AdamW, SGD with momentum, Adagrad and
  Adadelta is the same update."""

  needs_progress = True

  def __init__(self, learning_rate: float, warmup_steps: int):
    self.learning_rate, self.warmup_steps = float(learning_rate), int(warmup_steps)

  def __call__(self, step, progress):
    step = jnp.asarray(step, jnp.float32)
    warm = jnp.minimum((step + 1.0) / max(self.warmup_steps, 1), 1.0) if self.warmup_steps else 1.0
    return self.learning_rate * warm * jnp.maximum(1.0 - jnp.asarray(progress, jnp.float32), 0.0)


def needs_progress(schedule) -> bool:
  """Whether ``schedule`` reads the share of the time budget used (the train step then takes it as an argument)."""
  return bool(getattr(schedule, "needs_progress", False))


def learning_rate_schedule(cfg, d_model: int | None = None):
  """``cfg``: ``schedule``, ``learning_rate``, ``warmup_steps``, ``steps``."""
  name, lr, warmup = cfg.schedule, float(cfg.learning_rate), int(cfg.warmup_steps)
  if name == "budget_linear":
    return BudgetSchedule(lr, warmup)
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
  if name == "linear":  # BERT's: linear warm-up to learning_rate, then linear decay to 0 at train.steps
    total = max(int(cfg.steps), warmup + 1)
    return optax.join_schedules([optax.linear_schedule(0.0, lr, max(warmup, 1)),
                                 optax.linear_schedule(lr, 0.0, total - warmup)], [max(warmup, 1)])
  if name == "halving":
    start, every = int(cfg.get("decay_start", 0)), max(int(cfg.get("decay_every", 1)), 1)
    def halving(step):
      halvings = jnp.maximum(jnp.floor((jnp.asarray(step, jnp.float32) - start) / every) + 1, 0)
      return lr * 0.5**halvings
    return halving
  raise ValueError(f"train.schedule must be one of {SCHEDULES}, got {name!r}")


class FusedUpdate(optax.GradientTransformation):
  """An optax transformation applied to one flat vector per group of parameters (:func:`fused_update`); the marker
  by which the train state knows its optimiser state is not shaped like the parameters."""
  __slots__ = ()


def _group(leaf, decay: bool) -> str:
  return f"{jnp.dtype(leaf.dtype).name}_{'decayed' if decay and leaf.ndim > 1 else 'plain'}"


def fused_update(inner: optax.GradientTransformation, *, decay_groups: bool = False) -> FusedUpdate:
  """``inner`` run on the parameters concatenated into one flat vector per group (dtype, and with
  ``decay_groups`` whether the leaf is a matrix, as the weight-decay mask decides), the updates cut back into the
  parameters' tree. Elementwise optimisers (Adam, SGD, Adagrad, Adadelta) and global-norm clipping compute the same
  numbers either way; a GPU runs the update as a few kernels instead of one (or more) per parameter leaf, which XLA
  does not merge across leaves (``attnjax.compile`` counts them). The optimiser state is then one vector per group:
  a checkpoint of the other layout does not restore into it. The parameters must be replicated: concatenating
  differently sharded leaves would gather them."""

  def ravel(tree):
    groups: dict[str, list] = {}
    for leaf in jax.tree_util.tree_leaves(tree):
      groups.setdefault(_group(leaf, decay_groups), []).append(jnp.ravel(leaf))
    return {key: jnp.concatenate(parts) for key, parts in groups.items()}

  def unravel(flat, like):
    leaves, treedef = jax.tree_util.tree_flatten(like)
    offsets: dict[str, int] = {}
    out = []
    for leaf in leaves:
      key = _group(leaf, decay_groups)
      start, size = offsets.get(key, 0), leaf.size
      out.append(jax.lax.slice(flat[key], (start,), (start + size,)).reshape(leaf.shape).astype(leaf.dtype))
      offsets[key] = start + size
    return jax.tree_util.tree_unflatten(treedef, out)

  def init(params):
    return inner.init(ravel(params))

  def update(updates, state, params=None):
    flat, state = inner.update(ravel(updates), state, None if params is None else ravel(params))
    return unravel(flat, updates), state

  return FusedUpdate(init, update)


def make_optimizer(cfg, d_model: int | None = None):
  """(optax transformation, schedule) from ``cfg`` = the config's ``train`` section; with ``fused_update`` the
  same optimiser over flat vectors (:func:`fused_update`)."""
  fused = bool(cfg.get("fused_update", False))
  schedule = learning_rate_schedule(cfg, d_model)
  rate = 1.0 if needs_progress(schedule) else schedule  # the train step scales the update by the budget's rate
  parts = []
  if cfg.grad_clip_norm and cfg.grad_clip_norm > 0:
    parts.append(optax.clip_by_global_norm(cfg.grad_clip_norm))
  name = cfg.get("optimizer", "adam")
  if name == "adam":
    # weight decay on the matrices (kernels, embeddings) only, not on biases and LayerNorm scales (BERT's rule). The
    # mask wraps the optimiser state: without weight decay there is none, so that the state (and every checkpoint
    # of a run without weight decay) keeps the layout it always had
    mask = (lambda params: jax.tree_util.tree_map(lambda p: p.ndim > 1, params)) if cfg.weight_decay else None
    if fused and cfg.weight_decay:  # the flat vectors are grouped by the same rule
      mask = lambda flat: {key: key.endswith("_decayed") for key in flat}
    parts.append(optax.adamw(rate, b1=cfg.adam_b1, b2=cfg.adam_b2, eps=cfg.adam_eps,
                             weight_decay=cfg.weight_decay, mask=mask))
  elif name == "sgd":
    momentum = cfg.get("momentum", 0.0) or None
    parts.append(optax.sgd(rate, momentum=momentum, nesterov=bool(cfg.get("nesterov", False)) and bool(momentum)))
  elif name == "adadelta":
    parts.append(optax.adadelta(rate, rho=0.95, eps=1e-6))  # Zeiler 2012, as RNNsearch trained
  elif name == "adagrad":
    parts.append(optax.adagrad(rate, initial_accumulator_value=0.1))
  else:
    raise ValueError(f"train.optimizer must be one of {OPTIMIZERS}, got {name!r}")
  tx = optax.chain(*parts)
  if fused:
    tx = fused_update(tx, decay_groups=name == "adam" and bool(cfg.weight_decay))
  return tx, schedule
