"""Recurrent encoder-decoder translation models, with and without attention, behind the model interface.

One module, :class:`RNNSeq2Seq`, covers three papers (``attention=``):

* ``None`` -- Sutskever, Vinyals & Le (2014), "Sequence to Sequence Learning with Neural Networks": a stacked LSTM
  reads the (optionally reversed) source; the decoder starts from the encoder's final states, layer by layer, and
  models p(y_t | y_<t, x) = softmax(W h_t) with no attention.
* ``"bahdanau"`` -- Bahdanau, Cho & Bengio (2015), RNNsearch: a bidirectional encoder gives annotations
  h_j = [→h_j; ←h_j]; the decoder starts from s_0 = tanh(W_s ←h_1), and step i computes

      c_i = sum_j a_ij h_j,   a_ij = softmax_j(v^T tanh(W_q s_{i-1} + W_k h_j))     (from the PREVIOUS state)
      s_i = f(s_{i-1}, [E y_{i-1}; c_i])
      t̃_i = U_o s + V_o E y_{i-1} + C_o c_i,   t_i = [max(t̃_{i,2j-1}, t̃_{i,2j})]_{j=1..l},   logits = W_o t_i

  with s = s_i (``readout_state="current"``, the default: Eq. 4, p(y_i | ...) = g(y_{i-1}, s_i, c_i)) or
  s = s_{i-1} (``"previous"``: App. A.2.2 as printed, and the authors' GroundHog code), and l = ``maxout_dim``
  (500 in the paper; None means E). With ``cell="gru"`` f is the paper's gated unit (App. A.1.1, see
  :class:`ResetBeforeGRUCell`).

* ``"luong_dot" | "luong_general" | "luong_concat"`` -- Luong, Pham & Manning (2015), global attention: step t runs
  the stacked LSTM on [E y_{t-1}; h̃_{t-1}] (input feeding), then attends from the CURRENT top state h_t:

      c_t = sum_s a_t(s) h̄_s,   a_t(s) = softmax_s(score(h_t, h̄_s))
      h̃_t = tanh(W_c [c_t; h_t]),   logits = W_s h̃_t

With ``attention="bahdanau"``, two additions of See et al. (2017) for summarization (:mod:`attnjax.layers.copy`):
``copy=True``, the pointer-generator: p_gen = σ(w_h·c_i + w_s·s_i + w_x·E y_{i-1} + b_ptr) mixes the vocabulary
distribution with the attention over the source ids, and the model returns log P(w) in place of logits; and
``coverage=True``: c_i = Σ_{i' < i} a_i' enters the scores, e_ij = v^T tanh(W_q s_{i-1} + W_k h_j + w_c c_ij), and
λ·Σ_j min(a_ij, c_ij) per target token is added to the training loss (sown into the ``"losses"`` collection). The
attention stays Bahdanau's, from s_{i-1} (See et al. attend from s_i), so that the pointer-generator arm differs from
the attention arm by the copy mechanism alone.

Shape letters: B batch, S source length, T target length, E ``embed_dim``, H ``hidden_dim``, L ``num_layers``,
A ``attention_dim``, l ``maxout_dim``, V the vocabulary. Every recurrent step (teacher forcing, prefill, one-token
decoding) goes through the one function :meth:`_DecoderStep.__call__`, scanned over the T given tokens, so the three
agree.
"""

from __future__ import annotations

from typing import Any, Optional

import flax.linen as nn
import jax
import jax.numpy as jnp

from attnjax.layers.recurrent import (CELLS, MaskedCellStep, ResetBeforeGRUCell, make_cell,  # noqa: F401
                                      over_time, reverse_real_tokens, zero_carry)
from attnjax.layers.copy import PointerGate, coverage_loss, mix_log_probs
from attnjax.layers.rnn_attention import AdditiveAttention, LuongAttention

from attnjax.models.interface import DecoderOutput, source_mask

__all__ = ["RNNSeq2Seq", "ResetBeforeGRUCell", "reverse_real_tokens", "ATTENTIONS", "CELLS", "READOUT_STATES"]

ATTENTIONS = (None, "bahdanau", "luong_dot", "luong_general", "luong_concat")
READOUT_STATES = ("current", "previous")


class _DecoderStep(nn.Module):
  """The decoder's single time step, shared by teacher forcing and cached decoding (see the module docstring).

  ``state`` holds ``"h"`` ``[B, L, H]`` (and ``"c"`` ``[B, L, H]`` for LSTMs, ``"feed"`` ``[B, H]`` = h̃_{t-1} with
  Luong input feeding); ``emb`` is the embedded previous token ``[B, E]``. Returns the new state and
  ``(features [B, F], weights [B, S])`` where ``features`` feeds the output projection (F = ``maxout_dim`` = l for
  Bahdanau's maxout readout, H otherwise) and ``weights`` are the alignment weights (``[B, 0]`` without attention),
  and ``extras``: ``"p_gen" [B]`` with ``copy``, ``"coverage_loss" [B]`` with ``coverage`` (``state["coverage"]
  [B, S]`` carries c_i).
  """
  cell: str
  hidden_dim: int
  num_layers: int
  attention: Optional[str]
  attention_dim: int
  input_feeding: bool
  maxout_dim: int
  readout_state: str
  dropout_rate: float
  copy: bool = False
  coverage: bool = False
  dtype: Any = jnp.float32

  def setup(self):
    if self.coverage:
      # w_c of See et al. eq. 11, one weight per attention unit; starts at zero, so coverage enters the scores as it
      # is learned
      self.w_coverage = self.param("w_coverage", nn.initializers.zeros_init(), (self.attention_dim,), jnp.float32)
    if self.copy:
      self.pointer = PointerGate(self.dtype, name="pointer")
    self.cells = [make_cell(self.cell, self.hidden_dim, self.dtype, name=f"cell_{l}") for l in range(self.num_layers)]
    self.dropout = nn.Dropout(self.dropout_rate)
    if self.attention == "bahdanau":
      self.attend = AdditiveAttention(self.attention_dim, dtype=self.dtype, name="attention")
      # t̃_i = U_o s + V_o E y_{i-1} + C_o c_i (2l units): one Dense on [s; E y_{i-1}; c_i] is the same affine map.
      self.readout = nn.Dense(2 * self.maxout_dim, dtype=self.dtype, name="readout")
    elif self.attention is not None:
      score = self.attention.split("_", 1)[1]
      self.attend = LuongAttention(score, attention_dim=self.attention_dim if score == "concat" else None,
                                   dtype=self.dtype, name="attention")
      self.w_c = nn.Dense(self.hidden_dim, use_bias=False, dtype=self.dtype, name="w_c")

  def __call__(self, state, emb, memory, deterministic: bool = True):
    h_prev = state["h"]
    batch = h_prev.shape[0]
    inputs = [emb]
    extras = {}
    if self.attention == "bahdanau":
      # Bahdanau Eq. 5-6: the alignment query is s_{i-1}, the top-layer state BEFORE this step, so c_i is known
      # before the recurrence and can enter it.
      keys_proj = memory["keys_proj"]
      if self.coverage:  # See et al. eq. 11: w_c c_ij joins W_k h_j inside the tanh
        keys_proj = keys_proj + (state["coverage"][..., None] * self.w_coverage).astype(keys_proj.dtype)
      context, weights = self.attend(h_prev[:, -1][:, None], memory["annotations"], keys_proj=keys_proj,
                                     mask=memory["src_mask"])
      context, weights = context[:, 0], weights[:, 0]
      inputs.append(context)
      if self.coverage:
        extras["coverage_loss"] = coverage_loss(weights, state["coverage"])  # eq. 12, c_i excludes step i
        coverage = state["coverage"] + weights.astype(state["coverage"].dtype)
    elif self.attention is not None and self.input_feeding:
      inputs.append(state["feed"])  # Luong Sec. 3.3: h̃_{t-1} joins the input so past alignments are known.
    x = jnp.concatenate(inputs, axis=-1).astype(self.dtype)

    new_h, new_c = [], []
    for layer, cell in enumerate(self.cells):
      # Dropout on the non-recurrent connections only (Zaremba et al. 2014, as used by Luong et al.).
      x = self.dropout(x, deterministic=deterministic)
      carry = (state["c"][:, layer], h_prev[:, layer]) if self.cell == "lstm" else h_prev[:, layer]
      carry, x = cell(carry, x)
      if self.cell == "lstm":
        new_c.append(carry[0])
        new_h.append(carry[1])
      else:
        new_h.append(carry)
    top = x
    new_state = {"h": jnp.stack(new_h, axis=1)}
    if self.cell == "lstm":
      new_state["c"] = jnp.stack(new_c, axis=1)
    if self.coverage:
      new_state["coverage"] = coverage
    if self.copy:  # See et al. eq. 8: from the context, the new state and the input
      extras["p_gen"] = self.pointer(context, top, emb)

    if self.attention == "bahdanau":
      # Deep output with a maxout of pool size 2 (App. A.2.2): t_i = [max(t̃_{i,2j-1}, t̃_{i,2j})]_{j=1..l}, i.e.
      # adjacent units pooled. The state read is s_i (Eq. 4: p(y_i | ...) = g(y_{i-1}, s_i, c_i)) by default;
      # "previous" reads s_{i-1}, the top layer's state before this step, as App. A.2.2 prints
      # t̃_i = U_o s_{i-1} + V_o E y_{i-1} + C_o c_i and as the authors' GroundHog decoder does.
      state_read = top if self.readout_state == "current" else h_prev[:, -1]
      t_tilde = self.readout(jnp.concatenate([state_read.astype(self.dtype), emb.astype(self.dtype),
                                              context.astype(self.dtype)], axis=-1))
      features = jnp.max(t_tilde.reshape(batch, self.maxout_dim, 2), axis=-1)
    elif self.attention is not None:
      # Luong Eq. 5: attention from the CURRENT top state h_t, then the attentional state h̃_t.
      context, weights = self.attend(top[:, None], memory["annotations"], mask=memory["src_mask"])
      context, weights = context[:, 0], weights[:, 0]
      features = jnp.tanh(self.w_c(jnp.concatenate([context.astype(self.dtype), top], axis=-1)))
      if self.input_feeding:
        new_state["feed"] = features
    else:
      features = top
      weights = jnp.zeros((batch, 0), jnp.float32)
    features = self.dropout(features, deterministic=deterministic)
    return new_state, (features, weights, extras)


class RNNSeq2Seq(nn.Module):
  """Recurrent encoder-decoder (Sutskever et al. 2014; Bahdanau et al. 2015; Luong et al. 2015).

  Implements :mod:`attnjax.models.interface`. See the module docstring for the equations of each variant.

  Attributes:
    src_vocab_size / tgt_vocab_size: vocabulary sizes (ids include PAD/BOS/EOS).
    embed_dim: E, token embedding size (620 in Bahdanau et al., 1000 in Sutskever/Luong et al.).
    hidden_dim: H, decoder state size. Bahdanau's encoder has H units per direction (annotations are 2H); the other
      variants' bidirectional encoders use H/2 per direction so that annotations and final states have size H (the
      OpenNMT "brnn" convention), which the decoder and the "dot" score need.
    num_layers: L, layers in the encoder and in the decoder (4 in Sutskever/Luong, 1 in Bahdanau).
    cell: ``"lstm"`` (Flax's LSTM: i, f, g, o gates, no peepholes), ``"gru"`` (the GRU of Cho et al. 2014 and
      Bahdanau et al. 2015 App. A.1.1: the reset gate multiplies s before the recurrent matrix, see
      :class:`ResetBeforeGRUCell`) or ``"gru_reset_after"`` (Flax's ``nn.GRUCell``: r ⊙ (U s + b), as in cuDNN).
    attention: ``None``, ``"bahdanau"``, ``"luong_dot"``, ``"luong_general"`` or ``"luong_concat"``.
    reverse_source: Sutskever's trick: the encoder reads each row's real tokens backwards (padding stays at the end).
      Annotations are put back in source order, so alignment weights always index the original source positions.
    bidirectional_encoder: None means True for Bahdanau and False otherwise.
    dropout_rate: dropout on the non-recurrent connections (layer inputs) and before the output projection.
    attention_dim: A of the additive / "concat" scores; None means H. Ignored by "dot" and "general".
    input_feeding: Luong's input feeding (h̃_{t-1} concatenated to the input); ignored by the other variants.
    maxout_dim: l, the units of Bahdanau's maxout readout t_i (t̃_i has 2l; l = 500 in the paper, App. A.2.2).
      None means E. Only for ``attention="bahdanau"``.
    readout_state: which decoder state Bahdanau's readout t̃_i reads: ``"current"`` s_i (Eq. 4) or ``"previous"``
      s_{i-1} (App. A.2.2 as printed, and GroundHog); the top layer's when L > 1. Only for ``attention="bahdanau"``.
    tie_output_embedding: use the target embedding matrix as the output projection (plus a bias). The decoder's
      output features must then have size E: for Bahdanau l == E (``maxout_dim`` None or E), else H == E.
    copy: See et al.'s pointer-generator (``attention="bahdanau"``, one shared vocabulary); the model then returns
      log-probabilities of the mixed distribution where it returned logits.
    coverage: See et al.'s coverage mechanism and loss (``attention="bahdanau"``).
    coverage_loss_weight: λ of the coverage loss (1 in See et al.).
    dtype: compute dtype; parameters and logits stay float32.

  Memory (``encode``): ``"src_mask" [B, S]``, ``"annotations" [B, S, Dk]`` (Dk = 2H for bidirectional Bahdanau,
  else H; zero at padding), ``"final_h" [B, L, Dk]`` (and ``"final_c" [B, L, Dk]`` for LSTMs): each encoder layer's
  final state at its row's last real token, [forward; backward] when bidirectional; ``"keys_proj" [B, S, A]`` for
  Bahdanau (W_k h_j, computed once per sentence); ``"src_ids" [B, S]`` with copy.

  Cache (``init_cache``): ``"h" [B, L, H]`` (and ``"c" [B, L, H]`` for LSTMs) the decoder carries, ``"feed" [B, H]``
  h̃_{t-1} for Luong with input feeding, ``"coverage" [B, S]`` with coverage, ``"index" [B]`` int32. A recurrent
  cache has a fixed size, so ``max_length`` is accepted for the interface and not needed.
  """
  src_vocab_size: int
  tgt_vocab_size: int
  embed_dim: int = 256
  hidden_dim: int = 512
  num_layers: int = 1
  cell: str = "lstm"
  attention: Optional[str] = None
  reverse_source: bool = False
  bidirectional_encoder: Optional[bool] = None
  dropout_rate: float = 0.0
  attention_dim: Optional[int] = None
  input_feeding: bool = True
  maxout_dim: Optional[int] = None
  readout_state: str = "current"
  tie_output_embedding: bool = False
  copy: bool = False
  coverage: bool = False
  coverage_loss_weight: float = 1.0
  dtype: Any = jnp.float32

  # ---------------------------------------------------------------------------------------------- configuration

  def __post_init__(self):
    self._validate()
    super().__post_init__()

  def _validate(self):
    if self.attention not in ATTENTIONS:
      raise ValueError(f"attention must be one of {ATTENTIONS}, got {self.attention!r}")
    if self.cell not in CELLS:
      raise ValueError(f"cell must be one of {CELLS}, got {self.cell!r}")
    for name in ("src_vocab_size", "tgt_vocab_size", "embed_dim", "hidden_dim", "num_layers"):
      value = getattr(self, name)
      if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ValueError(f"{name} must be a positive int, got {value!r}")
    for name in ("attention_dim", "maxout_dim"):
      value = getattr(self, name)
      if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 1):
        raise ValueError(f"{name} must be a positive int or None, got {value!r}")
    if self.maxout_dim is not None and self.attention != "bahdanau":
      raise ValueError(f"maxout_dim is only used by attention='bahdanau' (the maxout readout), got "
                       f"maxout_dim={self.maxout_dim} with attention={self.attention!r}")
    if self.readout_state not in READOUT_STATES:
      raise ValueError(f"readout_state must be one of {READOUT_STATES}, got {self.readout_state!r}")
    if self.readout_state != "current" and self.attention != "bahdanau":
      raise ValueError(f"readout_state is only used by attention='bahdanau' (the maxout readout), got "
                       f"readout_state={self.readout_state!r} with attention={self.attention!r}")
    if (self.copy or self.coverage) and self.attention != "bahdanau":
      raise ValueError(f"copy and coverage are See et al.'s additions to additive attention: they need "
                       f"attention='bahdanau', got copy={self.copy}, coverage={self.coverage} with "
                       f"attention={self.attention!r}")
    if self.copy and self.src_vocab_size != self.tgt_vocab_size:
      raise ValueError(f"copy=True copies source ids as target ids: it needs one shared vocabulary, got "
                       f"src_vocab_size={self.src_vocab_size} != tgt_vocab_size={self.tgt_vocab_size}")
    if self.coverage_loss_weight < 0:
      raise ValueError(f"coverage_loss_weight must be >= 0, got {self.coverage_loss_weight}")
    if not 0.0 <= self.dropout_rate < 1.0:
      raise ValueError(f"dropout_rate must be in [0, 1), got {self.dropout_rate!r}")
    if self.bidirectional_encoder not in (None, True, False):
      raise ValueError(f"bidirectional_encoder must be None, True or False, got {self.bidirectional_encoder!r}")
    if self._bidirectional and self.attention != "bahdanau" and self.hidden_dim % 2:
      raise ValueError(f"hidden_dim must be even for a bidirectional encoder with attention={self.attention!r} "
                       f"(H/2 units per direction), got {self.hidden_dim}")
    if self.tie_output_embedding and self.attention != "bahdanau" and self.hidden_dim != self.embed_dim:
      raise ValueError(f"tie_output_embedding needs hidden_dim == embed_dim for attention={self.attention!r} "
                       f"(the output layer reads H-sized states), got {self.hidden_dim} != {self.embed_dim}")
    if self.tie_output_embedding and self.attention == "bahdanau" and self._maxout_dim != self.embed_dim:
      raise ValueError(f"tie_output_embedding needs maxout_dim == embed_dim (or None) for attention='bahdanau' "
                       f"(the output layer reads the maxout units), got {self.maxout_dim} != {self.embed_dim}")

  @property
  def _bidirectional(self) -> bool:
    return self.attention == "bahdanau" if self.bidirectional_encoder is None else bool(self.bidirectional_encoder)

  @property
  def _direction_dim(self) -> int:
    """Units per encoder direction."""
    if self._bidirectional and self.attention != "bahdanau":
      return self.hidden_dim // 2
    return self.hidden_dim

  @property
  def _maxout_dim(self) -> int:
    """l, the maxout units of Bahdanau's readout."""
    return self.embed_dim if self.maxout_dim is None else self.maxout_dim

  @property
  def _is_luong(self) -> bool:
    return self.attention is not None and self.attention.startswith("luong")

  def setup(self):
    d = self._direction_dim
    self.src_embed = nn.Embed(self.src_vocab_size, self.embed_dim, dtype=self.dtype, name="src_embed")
    self.tgt_embed = nn.Embed(self.tgt_vocab_size, self.embed_dim, dtype=self.dtype, name="tgt_embed")
    self.encoder_fwd = [MaskedCellStep(self.cell, d, self.dtype, name=f"encoder_fwd_{l}")
                        for l in range(self.num_layers)]
    if self._bidirectional:
      self.encoder_bwd = [MaskedCellStep(self.cell, d, self.dtype, name=f"encoder_bwd_{l}")
                          for l in range(self.num_layers)]
    self.decoder_step = _DecoderStep(
        cell=self.cell, hidden_dim=self.hidden_dim, num_layers=self.num_layers, attention=self.attention,
        attention_dim=self.attention_dim or self.hidden_dim, input_feeding=self.input_feeding,
        maxout_dim=self._maxout_dim, readout_state=self.readout_state, dropout_rate=self.dropout_rate,
        copy=self.copy, coverage=self.coverage, dtype=self.dtype, name="decoder")
    if self.attention == "bahdanau":
      # s_0 = tanh(W_s ←h_1), one W_s per decoder layer (the paper has one layer).
      self.init_state = [nn.Dense(self.hidden_dim, use_bias=False, dtype=self.dtype, name=f"init_state_{l}")
                         for l in range(self.num_layers)]
    self.dropout = nn.Dropout(self.dropout_rate)
    if self.tie_output_embedding:
      self.output_bias = self.param("output_bias", nn.initializers.zeros_init(), (self.tgt_vocab_size,))
    else:
      self.output = nn.Dense(self.tgt_vocab_size, dtype=self.dtype, name="output")

  # ------------------------------------------------------------------------------------------------------ encoder

  def encode(self, src, src_mask=None, *, deterministic: bool = True):
    """Runs the encoder. src: ``[B, S]`` ids; returns the memory dict described in the class docstring."""
    mask = source_mask(src, src_mask)
    batch = src.shape[0]
    d = self._direction_dim
    x = self.src_embed(src)
    if self.reverse_source:
      x = reverse_real_tokens(x, mask)
    finals = []
    for layer in range(self.num_layers):
      x = self.dropout(x, deterministic=deterministic)
      carry, out = over_time(self.encoder_fwd[layer], zero_carry(self.cell, batch, d, self.dtype), (x, mask), None)
      if self._bidirectional:
        # The backward pass reads each row from its LAST REAL token: reversing the real tokens in place keeps the
        # padding at the end, where the frozen carries ignore it.
        carry_b, out_b = over_time(self.encoder_bwd[layer], zero_carry(self.cell, batch, d, self.dtype),
                                    (reverse_real_tokens(x, mask), mask), None)
        out = jnp.concatenate([out, reverse_real_tokens(out_b, mask)], axis=-1)
        carry = jax.tree_util.tree_map(lambda f, b: jnp.concatenate([f, b], axis=-1), carry, carry_b)
      finals.append(carry)
      x = out
    annotations = reverse_real_tokens(x, mask) if self.reverse_source else x
    memory = {"src_mask": mask, "annotations": annotations}
    if self.cell == "lstm":
      memory["final_c"] = jnp.stack([c for c, _ in finals], axis=1)
      memory["final_h"] = jnp.stack([h for _, h in finals], axis=1)
    else:
      memory["final_h"] = jnp.stack(finals, axis=1)
    if self.attention == "bahdanau":
      memory["keys_proj"] = self.decoder_step.attend.project_keys(annotations)
    if self.copy:
      memory["src_ids"] = src
    return memory

  # ------------------------------------------------------------------------------------------------------ decoder

  def init_cache(self, memory, max_length: int):
    """Decoder state before the first target token (see the class docstring for the layout)."""
    del max_length  # the recurrent state does not grow with the target
    final_h = memory["final_h"]
    batch = final_h.shape[0]
    if self.attention == "bahdanau":
      # Bahdanau App. A.2.2: s_0 = tanh(W_s ←h_1), from the backward pass's state after reading the whole source
      # (a unidirectional encoder has no ←h_1: its final state →h_Tx, which has also read the whole source, serves).
      backward = final_h[..., self._direction_dim:] if self._bidirectional else final_h
      h = jnp.stack([jnp.tanh(self.init_state[l](backward[:, l])) for l in range(self.num_layers)], axis=1)
      # The paper's GRU has no memory cell; an LSTM's starts empty and the state carries the source summary.
      c = jnp.zeros_like(h)
    else:
      # Sutskever et al. / Luong et al.: each decoder layer starts from the same encoder layer's final state.
      h = final_h
      c = memory.get("final_c")
    cache = {"h": h.astype(self.dtype), "index": jnp.zeros((batch,), jnp.int32)}
    if self.cell == "lstm":
      cache["c"] = c.astype(self.dtype)
    if self._is_luong and self.input_feeding:
      cache["feed"] = jnp.zeros((batch, self.hidden_dim), self.dtype)  # h̃_0 = 0
    if self.coverage:
      # c_0 = 0, summed in float32 at least (bfloat16 would round away small attention weights)
      cache["coverage"] = jnp.zeros(memory["src_mask"].shape, jnp.promote_types(self.dtype, jnp.float32))
    return cache

  def decode(self, tgt_in, memory, cache=None, *, deterministic: bool = True, return_attention: bool = False):
    """Logits ``[B, T, V]`` for ``tgt_in`` ``[B, T]``: teacher forcing, or continuing ``cache`` (see interface)."""
    if tgt_in.ndim != 2:
      raise ValueError(f"tgt_in must be [B, T] token ids, got shape {tgt_in.shape}")
    given = cache is not None
    if cache is None:
      cache = self.init_cache(memory, tgt_in.shape[1])
    state = {k: v for k, v in cache.items() if k != "index"}
    step_memory = {k: memory[k] for k in ("src_mask", "annotations", "keys_proj") if k in memory}
    emb = self.tgt_embed(tgt_in)
    # The same recurrence for every call: teacher forcing runs all T tokens from init_cache, a prefill its T tokens
    # from the cache, a single step one token; the step function is shared, hence the same numbers.
    state, (features, weights, extras) = over_time(self.decoder_step, state, emb, step_memory,
                                                   deterministic=deterministic)
    if self.tie_output_embedding:
      logits = self.tgt_embed.attend(features) + self.output_bias
    else:
      logits = self.output(features)
    if self.copy:  # See et al. eq. 9: log P(w) stands in for the logits
      logits = mix_log_probs(logits, extras["p_gen"], weights, memory["src_ids"])
      self.sow("intermediates", "p_gen", extras["p_gen"])  # [B, T], for pictures (mutable=["intermediates"])
    if self.coverage:  # λ·covloss_t [B, T], added to the training loss under the target mask
      self.sow("losses", "coverage", self.coverage_loss_weight * extras["coverage_loss"])
    new_cache = {**state, "index": cache["index"] + tgt_in.shape[1]} if given else None
    attention = weights if (return_attention and self.attention is not None) else None
    return DecoderOutput(logits=logits.astype(jnp.float32), cache=new_cache, attention=attention)

  def __call__(self, src, tgt_in, src_mask=None, *, deterministic: bool = True):
    """Teacher-forced logits ``[B, T, V]``."""
    memory = self.encode(src, src_mask, deterministic=deterministic)
    return self.decode(tgt_in, memory, deterministic=deterministic).logits
