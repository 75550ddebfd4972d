"""Recurrent building blocks shared by the RNN models (:mod:`attnjax.models.rnn_seq2seq`, the BiLSTM reader of
:mod:`attnjax.models.span_qa`): the paper's GRU cell, cells by name, masked encoder steps that freeze at padding, the
driver that runs a step over time, and the in-place reversal of each row's real tokens (Sutskever et al.'s reversed
source, the backward direction of a bidirectional encoder).
"""

from __future__ import annotations

from typing import Any, Optional

import flax.linen as nn
import jax
import jax.numpy as jnp

# "gru": Cho et al. (2014) / Bahdanau et al. (2015, App. A.1.1), the reset gate applied BEFORE the recurrent matrix;
# "gru_reset_after": Flax's nn.GRUCell (cuDNN / Keras reset_after=True), r ⊙ (U s + b_U).
CELLS = ("lstm", "gru", "gru_reset_after")

def reverse_real_tokens(x, mask):
  """Reverses each row's real tokens in place; padding positions keep their content.

  For right-padded rows ``[a, b, c, PAD, PAD] -> [c, b, a, PAD, PAD]``, so a recurrent pass over the result reads
  the real tokens backwards *starting from the last real one*, and padding still comes last. The map is its own
  inverse, which is how outputs of a backward pass are put back in source order.

  Args:
    x: ``[B, S, ...]``.
    mask: ``[B, S]`` bool, True = real token (any pattern; real tokens are reversed among themselves).

  Returns:
    ``[B, S, ...]``, same dtype as ``x``.
  """
  s = mask.shape[1]
  positions = jnp.arange(s)[None, :]
  # Real positions first, in source order (a stable sort on "is padding").
  real_in_order = jnp.argsort(jnp.logical_not(mask).astype(jnp.int32), axis=1, stable=True)
  rank = jnp.cumsum(mask, axis=1) - 1  # rank of each real token among its row's real tokens
  count = jnp.sum(mask, axis=1, keepdims=True)
  mirrored = jnp.take_along_axis(real_in_order, jnp.clip(count - 1 - rank, 0, s - 1), axis=1)
  index = jnp.where(mask, mirrored, positions)
  index = index.reshape(index.shape + (1,) * (x.ndim - 2))
  return jnp.take_along_axis(x, index, axis=1)


class ResetBeforeGRUCell(nn.Module):
  """The gated recurrent unit as the papers define it: Cho et al. (2014) Eq. 5-8, Bahdanau et al. (2015) App. A.1.1
  (decoder) and App. A.2.1 (each encoder direction)::

      z = σ(W_z x + U_z s + b_z)          update gate
      r = σ(W_r x + U_r s + b_r)          reset gate
      s̃ = tanh(W x + U (r ⊙ s) + b)      candidate: r resets s BEFORE the recurrent matrix U
      s' = (1 - z) ⊙ s + z ⊙ s̃           Bahdanau's convention (Cho et al. write z ⊙ s + (1 - z) ⊙ s̃: z ↦ 1 - z,
                                           the same family of functions with W_z, U_z, b_z negated)

  Flax's :class:`flax.linen.GRUCell` computes the candidate as tanh(W x + b + r ⊙ (U s + b_U)) instead (the
  "reset-after" variant of cuDNN); ``RNNSeq2Seq(cell="gru_reset_after")`` selects that one.

  x is the cell input: in the RNNsearch decoder x = [E y_{i-1}; c_i], so ``W x`` is the paper's W E y_{i-1} + C c_i
  with [W C] one matrix (likewise W_z/C_z and W_r/C_r). The paper omits biases from its equations; here the input
  side carries one bias per gate (a bias on the U side would add nothing, since r multiplies s before U).

  Parameters: ``w_z``, ``w_r``, ``w`` (Dense, kernel ``[D, H]`` and bias ``[H]``), ``u_z``, ``u_r``, ``u`` (kernel
  ``[H, H]``, no bias). Carry and output: s ``[..., H]``.

  Attributes:
    features: H.
    dtype / param_dtype: compute and parameter dtypes.
    kernel_init / recurrent_kernel_init / bias_init: as in Flax's cells (the paper: orthogonal U's as well).
  """
  features: int
  dtype: Any = None
  param_dtype: Any = jnp.float32
  kernel_init: Any = nn.initializers.lecun_normal()
  recurrent_kernel_init: Any = nn.initializers.orthogonal()
  bias_init: Any = nn.initializers.zeros_init()

  @nn.compact
  def __call__(self, carry, inputs):
    """carry: s ``[..., H]``; inputs: x ``[..., D]``. Returns ``(s', s')``."""
    s = carry

    def w(name):
      return nn.Dense(self.features, use_bias=True, dtype=self.dtype, param_dtype=self.param_dtype,
                      kernel_init=self.kernel_init, bias_init=self.bias_init, name=name)

    def u(name):
      return nn.Dense(self.features, use_bias=False, dtype=self.dtype, param_dtype=self.param_dtype,
                      kernel_init=self.recurrent_kernel_init, name=name)

    z = nn.sigmoid(w("w_z")(inputs) + u("u_z")(s))
    r = nn.sigmoid(w("w_r")(inputs) + u("u_r")(s))
    candidate = jnp.tanh(w("w")(inputs) + u("u")(r * s))
    new_s = (1.0 - z) * s + z * candidate
    return new_s, new_s


def make_cell(cell: str, features: int, dtype, name: Optional[str] = None):
  """The recurrent cell called ``cell`` (see ``CELLS``); an LSTM's carry is ``(c, h)``, a GRU's is ``h``."""
  if cell == "lstm":
    return nn.OptimizedLSTMCell(features, dtype=dtype, param_dtype=jnp.float32, name=name)
  if cell == "gru":
    return ResetBeforeGRUCell(features, dtype=dtype, param_dtype=jnp.float32, name=name)
  if cell == "gru_reset_after":
    return nn.GRUCell(features, dtype=dtype, param_dtype=jnp.float32, name=name)
  raise ValueError(f"cell must be one of {CELLS}, got {cell!r}")


def zero_carry(cell: str, batch: int, features: int, dtype):
  zeros = jnp.zeros((batch, features), dtype)
  return (zeros, zeros) if cell == "lstm" else zeros


def over_time(step, carry, xs, consts, **kwargs):
  """``carry, y_t = step(carry, x_t, consts, **kwargs)`` for every t along axis 1 of ``xs``; the y_t stacked on axis 1.

  One driver, whatever the caller: an ``nn.scan`` over time (parameters broadcast, a fresh dropout key per step), so
  the body is compiled once whatever the length and jitted training, decoding and eager calls run the same program.
  An eager call re-traces the scan each time; measured on the RNN model, decoding and SQuAD tests (145 tests,
  ``pytest -n 2`` on 2 cores) that cost 7 min 54 s against 7 min 33 s with an eager Python loop beside it, too
  little to keep a second driver chosen by whether values are concrete.
  """
  def body(module, c, x, k):
    return module(c, x, k, **kwargs)

  scan = nn.scan(body, variable_broadcast="params", split_rngs={"params": False, "dropout": True},
                 in_axes=(1, nn.broadcast), out_axes=1)
  return scan(step, carry, xs, consts)


class MaskedCellStep(nn.Module):
  """One encoder time step; the carry is frozen and the output zeroed where ``mask`` is False.

  Freezing (rather than running the cell on PAD embeddings) makes the final carry the state at each row's last real
  token, and keeps whatever padding follows from reaching any real position.
  """
  cell: str
  features: int
  dtype: Any = jnp.float32

  @nn.compact
  def __call__(self, carry, inputs, consts=None):
    del consts  # the over_time signature; an encoder step needs nothing beyond its input
    x, mask = inputs  # [B, D], [B]
    new_carry, y = make_cell(self.cell, self.features, self.dtype, name="cell")(carry, x)
    keep = mask[:, None]
    carry = jax.tree_util.tree_map(lambda new, old: jnp.where(keep, new, old), new_carry, carry)
    return carry, jnp.where(keep, y, jnp.zeros_like(y))
