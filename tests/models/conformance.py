"""Checks every model of the interface must pass (see attnjax/models/interface.py); model tests call these."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from attnjax.models.interface import BOS_ID, PAD_ID


def random_batch(rng, batch, src_len, tgt_len, vocab, *, src_lengths=None, tgt_lengths=None):
  """Token ids in [3, vocab) with PAD_ID after each row's length; tgt_in starts with BOS_ID."""
  src = rng.integers(3, vocab, size=(batch, src_len))
  tgt = rng.integers(3, vocab, size=(batch, tgt_len))
  tgt[:, 0] = BOS_ID
  if src_lengths is not None:
    src[np.arange(src_len)[None, :] >= np.asarray(src_lengths)[:, None]] = PAD_ID
  if tgt_lengths is not None:
    tgt[np.arange(tgt_len)[None, :] >= np.asarray(tgt_lengths)[:, None]] = PAD_ID
  return jnp.asarray(src, jnp.int32), jnp.asarray(tgt, jnp.int32)


def apply_fn(model, method=None, *, jit=False, **kwargs):
  """``model.apply`` of ``method``, op by op or (``jit=True``) under ``jax.jit`` as training and decoding run it.
  Op by op, a model whose attention scans over blocks under a custom_vjp (implementation="blockwise") compiles its
  scan bodies again on every call; jitted, it compiles once per shape."""
  fn = functools.partial(model.apply, method=method, **kwargs)
  return jax.jit(fn) if jit else fn


_STATIC = (int, float, bool, str, type(None))
_JITTED: dict[int, tuple[object, "Jitted"]] = {}


class _Traced:  # marks an argument passed to the compiled program (not a constant of it)
  pass


class Jitted:
  """``model.apply`` under ``jax.jit``, compiled once per method, Python-valued arguments and shapes, and kept.

  Op by op, a model that scans (the RNNs, the BiLSTM reader) compiles its scans again on every call, since each call
  traces them anew; jitted, a test that applies a model several times at one shape compiles it once. Arguments that
  are Python scalars or None (a cache length) and keyword arguments other than ``rngs`` are static.
  """

  def __init__(self, model):
    self.model = model
    self._fns = {}

  def __call__(self, variables, *args, method=None, rngs=None, **static):
    fixed = tuple(a if isinstance(a, _STATIC) else _Traced for a in args)
    key = (getattr(method, "__name__", method), fixed, tuple(sorted(static.items())), rngs is None)
    if key not in self._fns:
      def run(variables, traced, rngs):
        it = iter(traced)
        full = [next(it) if f is _Traced else f for f in fixed]
        return self.model.apply(variables, *full, method=method, rngs=rngs, **static)
      self._fns[key] = jax.jit(run)
    return self._fns[key](variables, [a for a in args if not isinstance(a, _STATIC)], rngs)


def jitted(model) -> Jitted:
  """The :class:`Jitted` apply of ``model`` (kept for the test session, one per model object)."""
  if id(model) not in _JITTED:
    _JITTED[id(model)] = (model, Jitted(model))
  return _JITTED[id(model)][1]


def init(model, src, tgt, seed=0, *, jit=False):
  fn = jax.jit(model.init) if jit else model.init
  return fn({"params": jax.random.PRNGKey(seed), "dropout": jax.random.PRNGKey(seed + 1)}, src, tgt)


def incremental_logits(model, variables, src, tgt_in, *, prefill=0, jit=False):
  """Logits from the cache: first `prefill` tokens in one call, then one token per call."""
  memory = apply_fn(model, model.encode, jit=jit)(variables, src)
  cache = model.apply(variables, memory, tgt_in.shape[1], method=model.init_cache)
  decode = apply_fn(model, model.decode, jit=jit)
  pieces = []
  steps = ([(0, prefill)] if prefill else []) + [(t, t + 1) for t in range(prefill, tgt_in.shape[1])]
  for start, stop in steps:
    out = decode(variables, tgt_in[:, start:stop], memory, cache)
    cache = out.cache
    pieces.append(out.logits)
  return jnp.concatenate(pieces, axis=1)


def assert_teacher_forcing_equals_incremental(model, variables, src, tgt_in, *, prefill=0, atol=1e-5, jit=False):
  forced = apply_fn(model, jit=jit)(variables, src, tgt_in)
  stepwise = incremental_logits(model, variables, src, tgt_in, prefill=prefill, jit=jit)
  np.testing.assert_allclose(np.asarray(stepwise), np.asarray(forced), atol=atol, rtol=1e-5)


def assert_padding_does_not_change_real_positions(model, variables, src, tgt_in, extra=3, atol=1e-5, jit=False):
  """Appending padding to source and target leaves the logits of the original positions unchanged."""
  apply = apply_fn(model, jit=jit)
  logits = apply(variables, src, tgt_in)
  src_p = jnp.pad(src, ((0, 0), (0, extra)), constant_values=PAD_ID)
  tgt_p = jnp.pad(tgt_in, ((0, 0), (0, extra)), constant_values=PAD_ID)
  logits_p = apply(variables, src_p, tgt_p)
  np.testing.assert_allclose(np.asarray(logits_p[:, :tgt_in.shape[1]]), np.asarray(logits), atol=atol, rtol=1e-5)


def assert_finite_nonzero_gradients(model, variables, src, tgt_in, *, jit=False):
  def loss(params):
    logits = model.apply({**variables, "params": params}, src, tgt_in, deterministic=False,
                         rngs={"dropout": jax.random.PRNGKey(0)})
    return jnp.mean(jax.nn.log_softmax(logits)[..., 3])
  grads = (jax.jit(jax.grad(loss)) if jit else jax.grad(loss))(variables["params"])
  leaves = jax.tree_util.tree_leaves_with_path(grads)
  assert leaves
  for path, g in leaves:
    assert np.isfinite(np.asarray(g)).all(), jax.tree_util.keystr(path)
  total = sum(float(jnp.abs(g).sum()) for _, g in leaves)
  assert total > 0
