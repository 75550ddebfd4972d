"""Extractive question answering: start/end pointers over the context, with a no-answer option (SQuAD 2.0).

Given a question q (length Q) and a context c (length C), the model scores every context position as the start and
as the end of the answer span,

    p_start(s) = softmax_s(start_logits),   p_end(e) = softmax_e(end_logits),   score(s, e) = start_s + end_e,

and predicts argmax_{s ≤ e < s + max_answer_length} score(s, e) (Seo et al. 2017 §2.6; Devlin et al. 2019 §4.2).
SQuAD 2.0 questions may be unanswerable (Rajpurkar et al. 2018): the model also outputs a null span score n and
answers "no answer" when n > max_{s,e} score(s, e), the rule of BERT's SQuAD 2.0 head (there n = start[CLS] +
end[CLS]; Devlin et al. 2019 §4.3).

Two encoder families (``encoder=``):

* ``"transformer"`` -- BERT-style (Devlin et al. 2019): one Transformer encoder over the packed pair

      [CLS] q₁ … q_Q [SEP] c₁ … c_C,   x_i = LayerNorm(E_tok(w_i)·sqrt(D) + E_seg(segment_i) + PE(i)),

  segment A for [CLS], the question and [SEP], B for the context. [CLS] and [SEP] are two learned vectors rather
  than vocabulary ids, so any vocabulary works unchanged. The real tokens are packed to the front of the row (a
  stable sort on "is padding") before positions are assigned, which is BERT's own layout (its tokenizer emits the
  pair then pads at the end): a question's padding neither shifts the context's positions nor changes any
  relative distance, so the output does not depend on how much padding either input carries. The encoder layers
  are :class:`attnjax.models.transformer.EncoderLayer` (post-norm, as BERT) with a key-padding mask. One dense
  layer gives (start_i, end_i) = W h_i + b for every context position (BERT's ``qa_outputs``), and the null span
  score is the same layer on [CLS]: n = start(h_CLS) + end(h_CLS).

* ``"bilstm"`` -- a BiDAF-style recurrent reader (Seo et al. 2017), with Luong attention for C2Q:

      u = BiLSTM_ctx(E q) [B, Q, D],   h = BiLSTM_ctx(E c) [B, C, D]     (ONE shared contextual BiLSTM, as BiDAF)
      a_tj = softmax_j(h_tᵀ W_a u_j) over real question tokens,  ũ_t = Σ_j a_tj u_j       (Luong 'general' score)
      G = [h; ũ; h∘ũ] [B, C, 3D],   M = BiLSTM_model(G) [B, C, D],   M² = BiLSTM_end(M) [B, C, D]
      start = w_1ᵀ [G; M],   end = w_2ᵀ [G; M²]                                           (BiDAF eq. 3-4)

  BiDAF's trilinear similarity and its Q2C attention are replaced by the Luong 'general' score and left out: the
  fusion is the [c; c2q; c∘c2q] part of BiDAF's G. Each BiLSTM has D/2 units per direction so that every stack
  outputs D features. The contextual and modelling stacks have ``num_layers`` layers, the end stack one (BiDAF:
  1, 2 and 1). The null span score follows Levy et al. (2017), who append one trainable bias b to both the
  start and end logit vectors of BiDAF; here n = b + wᵀ maxpool_t(M_t), the pooled term (zero-initialised, so
  training starts from Levy's model) letting the score depend on the question-context pair.

**The no-answer class in the loss.** Each pointer's distribution gets one extra class, the null span's share of
its factorised score n = start_null + end_null, so that the decoding rule "no answer iff n > start_s + end_e"
compares quantities the loss defines (shifting a pointer's logits and its null class by a constant k changes neither
softmax and shifts both sides of the rule by the same k):

* the Transformer and BERT readers: start[CLS] joins the start distribution and end[CLS] the end distribution, as
  Devlin et al. (2019, §4.3) extend both probability spaces with the [CLS] position (the model's outputs
  ``no_answer_start_logit`` and ``no_answer_end_logit``, whose sum is ``no_answer_logit`` without a verifier);
* the BiLSTM reader, whose n is one score: n/2 joins both (Levy et al.'s b = n/2). Appending n itself to both would
  make the rule compare n with a score whose null counterpart is 2n.

**A verifier beside the null span** (``no_answer_verifier``, Transformer and BERT readers): a second dense layer on
h_CLS gives the logit v of "unanswerable", trained jointly with its own binary cross-entropy,

    L = ½ [−log p_start(s*) − log p_end(e*) + BCE(σ(v), is_impossible)],

the three terms weighted alike, as the internal front verifier of Zhang et al.'s Retro-Reader (2021) is trained
beside the span loss. The decision then adds v to the null span score,

    no answer iff n + v > start_s + end_e,   n = start[CLS] + end[CLS].

This is a single-model stand-in for Retro-Reader's rear verification, which adds the null score to the score of a
separately trained external verifier (with weights ½ and ½, a scale the threshold chosen on validation absorbs); here
the internal verifier's logit takes that place. n and v are both linear in h_CLS, so the decision gains no capacity:
what the verifier changes is the training signal the encoder gets about answerability. ``no_answer_logit`` is n + v,
so every consumer of the null score (the decoding rule, the windows' minimum, the no-answer probability) uses it
unchanged, while the pointers' loss reads start[CLS] and end[CLS] alone: the rule no longer compares only quantities
the pointers' loss defines.

Shapes: B batch, Q question length, C context length, D ``d_model``. Padding context positions get the finite
logit ``MASKED_LOGIT`` so they are never predicted and contribute exactly zero probability.
"""

from __future__ import annotations

import numbers
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp
import optax

from attnjax import kernels
from attnjax.layers.embedding import POSITIONAL_ENCODINGS, PositionalEncoding, TokenEmbedding
from attnjax.models.interface import token_mask
# The recurrent encoder's machinery over padded sequences: a masked cell step (carry frozen, output zeroed at
# padding), the scan over time, and the in-place reversal of real tokens for the backward direction.
from attnjax.layers.recurrent import MaskedCellStep, over_time, reverse_real_tokens, zero_carry
from attnjax.models.transformer import EncoderLayer, LayerConfig

__all__ = ["SpanQA", "best_span", "span_loss", "span_nll", "span_objective", "verifier_nll", "ENCODERS",
           "MASKED_LOGIT"]

ENCODERS = ("transformer", "bilstm", "bert")

# Finite rather than -inf: two of them still add up to a finite float32 (best_span sums start and end logits), and
# exp(MASKED_LOGIT - max) underflows to exactly 0, so a padding position has zero probability in the loss.
MASKED_LOGIT = -1e9
# The verifier's binary cross-entropy beside the pointers' ½ (NLL_start + NLL_end): every term weighted ½.
VERIFIER_LOSS_WEIGHT = 0.5


class _BiLSTM(nn.Module):
  """Stacked bidirectional LSTM over padded rows: ``x [B, T, F]``, ``mask [B, T]`` -> ``[B, T, features]``.

  Each layer is [→h_t; ←h_t] with ``features // 2`` units per direction. The backward pass reads each row from its
  last REAL token (:func:`reverse_real_tokens` keeps the padding at the end), and the masked cell steps freeze the
  carry at padding, so no amount of padding changes a real position's output; outputs at padding are zero.
  Dropout is applied to every layer's input (the non-recurrent connections).
  """
  features: int
  num_layers: int
  dropout_rate: float
  dtype: Any = jnp.float32

  def setup(self):
    d = self.features // 2
    self.forward_cells = [MaskedCellStep("lstm", d, self.dtype, name=f"fwd_{l}") for l in range(self.num_layers)]
    self.backward_cells = [MaskedCellStep("lstm", d, self.dtype, name=f"bwd_{l}") for l in range(self.num_layers)]
    self.dropout = nn.Dropout(self.dropout_rate)

  def __call__(self, x, mask, *, deterministic=True):
    batch, d = x.shape[0], self.features // 2
    for fwd, bwd in zip(self.forward_cells, self.backward_cells):
      x = self.dropout(x, deterministic=deterministic).astype(self.dtype)
      _, out_f = over_time(fwd, zero_carry("lstm", batch, d, self.dtype), (x, mask), None)
      _, out_b = over_time(bwd, zero_carry("lstm", batch, d, self.dtype), (reverse_real_tokens(x, mask), mask), None)
      x = jnp.concatenate([out_f, reverse_real_tokens(out_b, mask)], axis=-1)
    return x


class SpanQA(nn.Module):
  """Extractive QA with start/end pointers and an optional no-answer score; see the module docstring.

  Attributes:
    vocab_size: shared question/context vocabulary (``PAD_ID`` = padding).
    encoder: ``"transformer"`` (BERT-style over the packed pair), ``"bilstm"`` (BiDAF-style reader) or ``"bert"``
      (:class:`attnjax.models.bert.BertEncoder` with BERT's exact semantics over ``[CLS] question [SEP] context
      [SEP]``, so that a pre-trained encoder's weights load into it: :mod:`attnjax.transfer`).
    d_model: D, the hidden size (transformer width; BiLSTM outputs, D/2 units per direction).
    num_layers: Transformer encoder layers, or layers of the contextual and of the modelling BiLSTM.
    num_heads: attention heads (transformer).
    d_ff: feed-forward width (transformer).
    dropout_rate: dropout on embeddings, sublayer outputs and attention weights (transformer), or on every LSTM
      layer's input (bilstm).
    max_length: longest packed pair Q + C + 2 for learned positions (transformer).
    positional: ``"sinusoidal"`` | ``"learned"`` (BERT) | ``"relative"`` (Shaw et al. 2018) (transformer).
    allow_no_answer: output the null span score ``no_answer_logit`` (SQuAD 2.0).
    max_answer_length: longest span that :meth:`decode_spans` considers.
    cls_id / sep_id: the vocabulary's [CLS] and [SEP] ids (bert).
    layer_norm_epsilon: the LayerNorms' epsilon (bert).
    dtype: computation dtype; parameters and logits stay float32.
    pre_norm: a pre-norm BERT encoder with a final LayerNorm (bert; :class:`attnjax.models.bert.BertEncoder`), as a
      reader fine-tuned from a pre-norm masked LM must be.
    no_answer_verifier: a verifier's logit v on h_CLS, trained with its own binary loss and added to the null span
      score (transformer and bert, with ``allow_no_answer``; see the module docstring).

  ``__call__(question [B, Q], context [B, C], question_mask=None, context_mask=None, *, deterministic=True)``
  returns ``{"start_logits": [B, C], "end_logits": [B, C], "context_mask": [B, C]}`` plus ``"no_answer_logit": [B]``
  when ``allow_no_answer`` (and, from the Transformer and BERT encoders, its terms ``"no_answer_start_logit"`` and
  ``"no_answer_end_logit"``: start[CLS] and end[CLS], and with the verifier ``"no_answer_verifier_logit"``: v);
  masks default to ``ids != PAD_ID``, and padding context positions carry ``MASKED_LOGIT``.
  """
  vocab_size: int
  encoder: str = "transformer"
  d_model: int = 128
  num_layers: int = 2
  num_heads: int = 4
  d_ff: int = 512
  dropout_rate: float = 0.1
  max_length: int = 512
  positional: str = "learned"
  allow_no_answer: bool = True
  max_answer_length: int = 30
  cls_id: int = 101  # encoder "bert": the WordPiece vocabulary's [CLS] and [SEP] (BERT's uncased vocab.txt: 101, 102)
  sep_id: int = 102
  layer_norm_epsilon: float = 1e-12  # encoder "bert"
  dtype: Any = jnp.float32
  pre_norm: bool = False  # encoder "bert"
  no_answer_verifier: bool = False  # "transformer", "bert"; needs allow_no_answer

  def __post_init__(self):
    # At construction, so a bad config fails before anything is initialised or compiled.
    if self.encoder not in ENCODERS:
      raise ValueError(f"encoder must be one of {ENCODERS}, got {self.encoder!r}")
    for name in ("vocab_size", "d_model", "num_layers", "num_heads", "d_ff", "max_length", "max_answer_length"):
      value = getattr(self, name)
      if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ValueError(f"{name} must be a positive int, got {value!r}")
    if not (isinstance(self.dropout_rate, (int, float)) and 0.0 <= self.dropout_rate < 1.0):
      raise ValueError(f"dropout_rate must be in [0, 1), got {self.dropout_rate!r}")
    if self.positional not in POSITIONAL_ENCODINGS:
      raise ValueError(f"positional must be one of {POSITIONAL_ENCODINGS}, got {self.positional!r}")
    if not isinstance(self.allow_no_answer, bool):
      raise ValueError(f"allow_no_answer must be a bool, got {self.allow_no_answer!r}")
    if not isinstance(self.no_answer_verifier, bool):
      raise ValueError(f"no_answer_verifier must be a bool, got {self.no_answer_verifier!r}")
    if self.no_answer_verifier and (not self.allow_no_answer or self.encoder == "bilstm"):
      raise ValueError(f"no_answer_verifier needs allow_no_answer=True and the [CLS] of encoder 'transformer' or "
                       f"'bert', got allow_no_answer={self.allow_no_answer}, encoder={self.encoder!r}")
    if self.pre_norm and self.encoder != "bert":
      raise ValueError(f"pre_norm applies to the BERT encoder (encoder='bert'), got encoder={self.encoder!r}")
    if self.encoder == "transformer" and (isinstance(self.num_heads, bool) or not isinstance(self.num_heads, int)
                                          or self.num_heads < 1):
      raise ValueError(f"num_heads must be a positive integer, got {self.num_heads!r}")
    if self.encoder in ("transformer", "bert") and self.d_model % self.num_heads:
      raise ValueError(f"d_model ({self.d_model}) must be divisible by num_heads ({self.num_heads})")
    if self.encoder == "bilstm" and self.d_model % 2:
      raise ValueError(f"d_model must be even for encoder='bilstm' (d_model/2 units per direction), "
                       f"got {self.d_model}")
    super().__post_init__()

  def setup(self):
    d = self.d_model
    self.token_embed = TokenEmbedding(self.vocab_size, d, dtype=self.dtype, name="token_embed")
    if self.encoder == "bert":
      from attnjax.models.bert import BertEncoder  # pylint: disable=g-import-not-at-top
      self.bert = BertEncoder(self.vocab_size, d, self.num_layers, self.num_heads, self.d_ff, self.max_length,
                              layer_norm_epsilon=self.layer_norm_epsilon, dropout_rate=self.dropout_rate,
                              attention_dropout_rate=self.dropout_rate, use_pooler=False, dtype=self.dtype,
                              pre_norm=self.pre_norm, name="bert")
      self.qa_outputs = nn.Dense(2, dtype=jnp.float32, name="qa_outputs",
                                 kernel_init=nn.initializers.normal(0.02))
      self._verifier_head()
      return
    if self.encoder == "transformer":
      cfg = LayerConfig(d, self.num_heads, self.d_ff, self.dropout_rate, attention_dropout_rate=self.dropout_rate,
                        relu_dropout_rate=0.0, pre_norm=False,
                        relative="shaw" if self.positional == "relative" else None, max_relative_distance=16,
                        implementation="auto", dtype=self.dtype, param_dtype=jnp.float32)
      special = nn.initializers.normal(1.0)  # the same scale as the sqrt(D)-scaled token embeddings
      self.cls_embedding = self.param("cls_embedding", special, (d,))
      self.sep_embedding = self.param("sep_embedding", special, (d,))
      self.segment_embed = nn.Embed(2, d, embedding_init=nn.initializers.normal(1.0), dtype=self.dtype,
                                    name="segment_embed")
      self.positions = PositionalEncoding(self.positional, d, self.max_length, self.dtype, jnp.float32)
      self.embed_norm = nn.LayerNorm(epsilon=1e-6, dtype=self.dtype, name="embed_norm")
      self.layers = [EncoderLayer(cfg, name=f"encoder_{i}") for i in range(self.num_layers)]
      self.embed_dropout = nn.Dropout(self.dropout_rate)
      self.qa_outputs = nn.Dense(2, dtype=jnp.float32, name="qa_outputs")
      self._verifier_head()
    else:
      self.contextual = _BiLSTM(d, self.num_layers, self.dropout_rate, self.dtype, name="contextual")
      self.w_a = self.param("w_a", nn.initializers.lecun_normal(), (d, d))
      self.modelling = _BiLSTM(d, self.num_layers, self.dropout_rate, self.dtype, name="modelling")
      self.end_encoder = _BiLSTM(d, 1, self.dropout_rate, self.dtype, name="end_encoder")
      self.start_head = nn.Dense(1, dtype=jnp.float32, name="start_head")
      self.end_head = nn.Dense(1, dtype=jnp.float32, name="end_head")
      if self.allow_no_answer:
        # Bias = Levy et al.'s trainable b (×2, see the module docstring); the zero kernel starts there exactly.
        self.no_answer_head = nn.Dense(1, kernel_init=nn.initializers.zeros_init(), dtype=jnp.float32,
                                       name="no_answer_head")

  def _verifier_head(self):
    if self.no_answer_verifier:
      self.verifier = nn.Dense(1, dtype=jnp.float32, kernel_init=nn.initializers.normal(0.02),
                               name="no_answer_verifier")

  def _cls_scores(self, h_cls):
    """``[B, 2]``: (start[CLS], end[CLS]) from ``h_cls [B, D]``, and with the verifier ``[B, 3]``, its logit v last."""
    h_cls = h_cls.astype(jnp.float32)
    scores = self.qa_outputs(h_cls)
    return jnp.concatenate([scores, self.verifier(h_cls)], axis=-1) if self.no_answer_verifier else scores

  # ------------------------------------------------------------------------------------------------- encoders

  def _transformer(self, question, context, qm, cm, deterministic):
    """``(start [B, C], end [B, C], null [B, 2 or 3])`` from the BERT-style encoder (null: start and end at [CLS],
    then the verifier's logit if any)."""
    (b, q), c = question.shape, context.shape[1]
    length = q + c + 2
    if self.positional == "learned" and length > self.max_length:
      raise ValueError(f"max_length ({self.max_length}) is shorter than the packed pair Q + C + 2 = {length}")
    special = lambda v: jnp.broadcast_to(v.astype(self.dtype), (b, 1, self.d_model))
    x = jnp.concatenate([special(self.cls_embedding), self.token_embed(question), special(self.sep_embedding),
                         self.token_embed(context)], axis=1)  # [B, L, D]
    segments = jnp.concatenate([jnp.zeros((q + 2,), jnp.int32), jnp.ones((c,), jnp.int32)])
    x = x + self.segment_embed(segments)[None]
    real = jnp.concatenate([jnp.ones((b, 1), bool), qm, jnp.ones((b, 1), bool), cm], axis=1)  # [B, L]
    # Pack the real tokens to the front (stable, so their order is kept): positions then count real tokens only.
    order = jnp.argsort(jnp.logical_not(real).astype(jnp.int32), axis=1, stable=True)  # packed slot -> slot
    x = jnp.take_along_axis(x, order[..., None], axis=1)
    packed_real = jnp.take_along_axis(real, order, axis=1)
    pe = self.positions(jnp.arange(length))
    if pe is not None:
      x = x + pe[None]
    x = self.embed_dropout(self.embed_norm(x), deterministic=deterministic)
    # key padding as segment ids: every query attends the real keys
    segments = (None, packed_real.astype(jnp.int32))
    for layer in self.layers:
      x = layer(x, None, segment_ids=segments, deterministic=deterministic)
    # Where each original slot went (the inverse of `order`): real slots to their rank among the real ones,
    # padding after all of them in order -- the same stable order, without a second sort.
    n_real = jnp.sum(real, axis=1, keepdims=True)
    slot = jnp.where(real, jnp.cumsum(real, axis=1) - 1, n_real + jnp.cumsum(~real, axis=1) - 1)
    h_context = jnp.take_along_axis(x, slot[:, q + 2:, None], axis=1)  # [B, C, D]
    logits = self.qa_outputs(h_context.astype(jnp.float32))  # [B, C, 2]
    # [CLS] is real and first, so it stays at packed slot 0; BERT's null span (start[CLS], end[CLS]).
    null = self._cls_scores(x[:, 0])  # [B, 2], or [B, 3] with the verifier
    return logits[..., 0], logits[..., 1], null

  def _bert(self, question, context, qm, cm, deterministic):
    """``(start [B, C], end [B, C], null [B, 2 or 3])`` from a BERT encoder over ``[CLS] question [SEP] context [SEP]``
    (token types 0 then 1), BERT's SQuAD head (Devlin et al. 2019, §4.2): a start and an end vector dotted with each
    context token, the null score from [CLS]. Padding inside the row is skipped: positions count real tokens only, and a
    token attends the real ones."""
    (b, q), c = question.shape, context.shape[1]
    token = lambda i: jnp.full((b, 1), i, jnp.int32)  # noqa: E731
    ids = jnp.concatenate([token(self.cls_id), question, token(self.sep_id), context, token(self.sep_id)], axis=1)
    ones = jnp.ones((b, 1), bool)
    real = jnp.concatenate([ones, qm, ones, cm, ones], axis=1)
    types = jnp.concatenate([jnp.zeros((b, q + 2), jnp.int32), jnp.ones((b, c + 1), jnp.int32)], axis=1)
    positions = jnp.maximum(jnp.cumsum(real, axis=1) - 1, 0)
    hidden = self.bert(ids, token_type_ids=types, segment_ids=real.astype(jnp.int32), positions=positions,
                       deterministic=deterministic)["last_hidden_state"]
    logits = self.qa_outputs(hidden[:, q + 2:q + 2 + c].astype(jnp.float32))  # [B, C, 2]
    null = self._cls_scores(hidden[:, 0])  # [B, 2]: (start[CLS], end[CLS]); [B, 3] with the verifier
    return logits[..., 0], logits[..., 1], null

  def _bilstm(self, question, context, qm, cm, deterministic):
    """``(start [B, C], end [B, C], null [B] or None)`` from the BiDAF-style reader."""
    b, q = question.shape
    c = context.shape[1]
    t = max(q, c)
    pad = lambda x, n: jnp.pad(x, ((0, 0), (0, t - n)) + ((0, 0),) * (x.ndim - 2))
    # The contextual BiLSTM is shared, so question and context run as ONE batch of 2B rows padded to max(Q, C):
    # half the sequential steps of two passes, and padding never changes a real position's output.
    both = self.contextual(jnp.concatenate([pad(self.token_embed(question), q), pad(self.token_embed(context), c)]),
                           jnp.concatenate([pad(qm, q), pad(cm, c)]), deterministic=deterministic)
    u, h = both[:b, :q], both[b:, :c]  # [B, Q, D], [B, C, D]
    c2q, _ = kernels.multiplicative_attention(h, u, u, score="general", w=self.w_a.astype(self.dtype), mask=qm)
    g = jnp.concatenate([h, c2q.astype(h.dtype), h * c2q.astype(h.dtype)], axis=-1)  # [B, C, 3D]
    m = self.modelling(g, cm, deterministic=deterministic)
    m2 = self.end_encoder(m, cm, deterministic=deterministic)
    start = self.start_head(jnp.concatenate([g, m], axis=-1).astype(jnp.float32))[..., 0]
    end = self.end_head(jnp.concatenate([g, m2], axis=-1).astype(jnp.float32))[..., 0]
    null = None
    if self.allow_no_answer:
      pooled = jnp.max(jnp.where(cm[..., None], m, -jnp.inf), axis=1)
      pooled = jnp.where(jnp.any(cm, axis=1, keepdims=True), pooled, 0.0)  # an empty context pools to zeros
      null = self.no_answer_head(pooled.astype(jnp.float32))[..., 0]
    return start, end, null

  # --------------------------------------------------------------------------------------------------- public

  def __call__(self, question, context, question_mask=None, context_mask=None, *, deterministic=True):
    """Span logits for ``question [B, Q]`` and ``context [B, C]``; see the class docstring for the outputs."""
    qm = token_mask("question", question, question_mask)
    cm = token_mask("context", context, context_mask)
    if question.shape[0] != context.shape[0]:
      raise ValueError(f"question batch {question.shape[0]} != context batch {context.shape[0]}")
    encode = {"transformer": self._transformer, "bilstm": self._bilstm, "bert": self._bert}[self.encoder]
    start, end, null = encode(question, context, qm, cm, deterministic)
    out = {"start_logits": jnp.where(cm, start, MASKED_LOGIT).astype(jnp.float32),
           "end_logits": jnp.where(cm, end, MASKED_LOGIT).astype(jnp.float32), "context_mask": cm}
    if self.allow_no_answer:
      null = null.astype(jnp.float32)
      if null.ndim == 2:  # the null span's start and end logits at [CLS], then the verifier's logit if any
        out["no_answer_start_logit"], out["no_answer_end_logit"] = null[:, 0], null[:, 1]
        if null.shape[1] == 3:
          out["no_answer_verifier_logit"] = null[:, 2]
        null = jnp.sum(null, axis=1)  # n = start[CLS] + end[CLS] (+ v)
      out["no_answer_logit"] = null
    return out

  def decode_spans(self, outputs):
    """:func:`best_span` of the outputs of ``__call__`` with this model's ``max_answer_length`` (no parameters used,
    so it can be called on the unbound module)."""
    return best_span(outputs["start_logits"], outputs["end_logits"], outputs["context_mask"],
                     max_answer_length=self.max_answer_length, no_answer_logit=outputs.get("no_answer_logit"))


def best_span(start_logits, end_logits, context_mask, *, max_answer_length, no_answer_logit=None):
  """Exact best span: argmax over s ≤ e < s + max_answer_length, s and e real context tokens, of start_s + end_e.

  Vectorised over the band of K = min(max_answer_length, C) span lengths: scores[b, s, k] = start[b, s] +
  end[b, s + k], an O(B·C·K) array rather than O(B·C²). Ties go to the smallest s, then the smallest e.

  Args:
    start_logits, end_logits: ``[B, C]``.
    context_mask: ``[B, C]`` bool, True = real context token.
    max_answer_length: static positive int (the longest span, in tokens).
    no_answer_logit: optional ``[B]`` null span score n (BERT: start[CLS] + end[CLS]); "no answer" iff n > the best
      span's score.

  Returns:
    ``(start [B] int32, end [B] int32, score [B] float32, is_no_answer [B] bool)``: the best non-null span (also
    when "no answer" wins, so a caller can still inspect it), and the score of the decision taken: the null score
    when ``is_no_answer``, else the span's score. A row without any real context token gives (0, 0, -inf) and
    always "no answer" when a null score is given.
  """
  length = max_answer_length
  if not isinstance(length, numbers.Integral) or isinstance(length, bool) or length < 1:
    raise ValueError(f"max_answer_length must be a positive int, got {length!r}")
  start_logits, end_logits, context_mask = (jnp.asarray(x) for x in (start_logits, end_logits, context_mask))
  if start_logits.ndim != 2 or end_logits.shape != start_logits.shape or context_mask.shape != start_logits.shape:
    raise ValueError(f"start_logits, end_logits and context_mask must all be [B, C], got {start_logits.shape}, "
                     f"{end_logits.shape} and {context_mask.shape}")
  b, c = start_logits.shape
  if c == 0:
    raise ValueError("the context must have at least one position (C = 0)")
  k = min(int(length), c)  # static: the band's width
  ends = jnp.arange(c)[:, None] + jnp.arange(k)[None, :]  # [C, K]: e = s + k
  in_range = ends < c
  ends = jnp.minimum(ends, c - 1)  # a valid index; the out-of-range entries are masked below
  mask = context_mask.astype(bool)
  valid = in_range[None] & mask[:, :, None] & mask[:, ends]  # [B, C, K]
  scores = start_logits.astype(jnp.float32)[:, :, None] + end_logits.astype(jnp.float32)[:, ends]
  flat = jnp.where(valid, scores, -jnp.inf).reshape(b, c * k)
  best = jnp.argmax(flat, axis=1)  # first maximum: row-major (s, k) order = smallest s, then smallest e
  score = jnp.take_along_axis(flat, best[:, None], axis=1)[:, 0]
  start = (best // k).astype(jnp.int32)
  end = (start + best % k).astype(jnp.int32)
  if no_answer_logit is None:
    return start, end, score, jnp.zeros((b,), bool)
  null = jnp.asarray(no_answer_logit).astype(jnp.float32)
  is_null = null > score
  return start, end, jnp.where(is_null, null, score), is_null


def span_loss(outputs, start_positions, end_positions, is_impossible=None):
  """Mean cross-entropy of the start and end pointers (Seo et al. 2017 eq. 5; Devlin et al. 2019 §4.2):

      L = mean_b ½ [−log p_start(s*_b) − log p_end(e*_b)],   p = softmax over the real context positions (+ null)

  the mean of :func:`span_objective`'s loss (see :func:`span_nll` for the arguments; with a verifier, half its
  binary cross-entropy is added). Returns a scalar float32.
  """
  return jnp.mean(span_objective(outputs, start_positions, end_positions, is_impossible)[0])


def span_nll(outputs, start_positions, end_positions, is_impossible=None):
  """Per-question span loss ``[B]``: ½ [−log p_start(s*_b) − log p_end(e*_b)] (without a verifier, :func:`span_loss`
  is its mean; the training step weights and sums it so that filler rows count zero).

  With ``no_answer_logit`` n in ``outputs`` both distributions get an extra class C: ``no_answer_start_logit`` and
  ``no_answer_end_logit`` (start[CLS] and end[CLS], Devlin et al. 2019 §4.3) where the outputs have them, else n/2
  in both; either way the null option's factorised score is n, the quantity :func:`best_span` compares with
  start_s + end_e without a verifier (with one it compares n + v; see the module docstring). An impossible question's
  target is that class for both pointers (its given positions are ignored). The verifier's loss, where the model has
  one, is :func:`verifier_nll`; the training objective adds both (:func:`span_objective`).

  Args:
    outputs: ``SpanQA.__call__``'s dict; ``context_mask`` (if absent: logits above ``MASKED_LOGIT / 2``) defines
      the real positions.
    start_positions, end_positions: ``[B]`` int, answer span (inclusive) in context coordinates.
    is_impossible: ``[B]`` bool, or None (every question answerable). Needs ``no_answer_logit`` in ``outputs``.

  Returns:
    ``[B]`` float32.
  """
  start, end = outputs["start_logits"].astype(jnp.float32), outputs["end_logits"].astype(jnp.float32)
  b, c = start.shape
  for name, positions in (("start_positions", start_positions), ("end_positions", end_positions)):
    if jnp.shape(positions) != (b,):
      raise ValueError(f"{name} must be [B] = [{b}], got shape {jnp.shape(positions)}")
  mask = outputs.get("context_mask")
  mask = start > MASKED_LOGIT / 2 if mask is None else mask.astype(bool)
  start, end = jnp.where(mask, start, MASKED_LOGIT), jnp.where(mask, end, MASKED_LOGIT)
  start_positions, end_positions = jnp.asarray(start_positions), jnp.asarray(end_positions)
  if "no_answer_logit" in outputs:
    if "no_answer_start_logit" in outputs:
      null_start = outputs["no_answer_start_logit"].astype(jnp.float32)[:, None]
      null_end = outputs["no_answer_end_logit"].astype(jnp.float32)[:, None]
    else:
      null_start = null_end = outputs["no_answer_logit"].astype(jnp.float32)[:, None] / 2
    start, end = jnp.concatenate([start, null_start], axis=1), jnp.concatenate([end, null_end], axis=1)
    if is_impossible is not None:
      impossible = jnp.asarray(is_impossible).astype(bool)
      start_positions = jnp.where(impossible, c, start_positions)
      end_positions = jnp.where(impossible, c, end_positions)
  elif is_impossible is not None:
    raise ValueError("is_impossible needs outputs['no_answer_logit'] (a model with allow_no_answer=True)")

  def nll(logits, target):
    return -jnp.take_along_axis(jax.nn.log_softmax(logits, axis=-1), target[:, None].astype(jnp.int32), axis=1)[:, 0]

  return 0.5 * (nll(start, start_positions) + nll(end, end_positions))


def verifier_nll(outputs, is_impossible=None):
  """Per-question binary cross-entropy ``[B]`` of the verifier's logit v (``no_answer_verifier_logit``) against
  "unanswerable": log(1 + e^v) − y·v, y = 1 for an impossible question (every y = 0 without ``is_impossible``:
  every question answerable); None for a model without a verifier."""
  if "no_answer_verifier_logit" not in outputs:
    return None
  verifier = outputs["no_answer_verifier_logit"].astype(jnp.float32)
  impossible = jnp.zeros(verifier.shape, bool) if is_impossible is None else jnp.asarray(is_impossible).astype(bool)
  return optax.sigmoid_binary_cross_entropy(verifier, impossible.astype(jnp.float32))


def span_objective(outputs, start_positions, end_positions, is_impossible=None):
  """Per-question ``(loss [B], nll [B])``: the pointers' :func:`span_nll`, and the training loss, which adds half
  the verifier's :func:`verifier_nll` where the model has one,

      loss = ½ [−log p_start(s*) − log p_end(e*)] + ½ BCE(σ(v), y)  =  ½ [NLL_start + NLL_end + BCE],

  the three terms weighted alike, as Retro-Reader's jointly trained verifier (α₁ = α₂ = ½ on the span loss
  NLL_start + NLL_end and the verifier's). ``nll`` stays the pointers' alone, comparable with a reader without one.
  """
  nll = span_nll(outputs, start_positions, end_positions, is_impossible)
  verifier = verifier_nll(outputs, is_impossible)
  return (nll if verifier is None else nll + VERIFIER_LOSS_WEIGHT * verifier), nll
