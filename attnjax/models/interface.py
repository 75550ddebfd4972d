"""The one interface every sequence-to-sequence model implements, so training, decoding and evaluation never
special-case a model.

A model is a ``flax.linen.Module`` with four methods, all called through ``model.apply(variables, ..., method=...)``:

``encode(src, src_mask=None, *, deterministic=True) -> memory``
    src: ``[B, S]`` int token ids (``PAD_ID`` = padding). ``src_mask``: ``[B, S]`` bool, True = real token; None means
    ``src != PAD_ID``. ``memory`` is a dict of arrays, **every leaf with the batch axis first** (beam search tiles and
    reorders it along axis 0). It must carry the source mask under the key ``"src_mask"``.

``init_cache(memory, max_length) -> cache``
    The decoder state before the first target token, for up to ``max_length`` target positions. A dict of arrays,
    **every leaf with the batch axis first** (beam search reorders it along axis 0); the position of the next token is
    kept per row as ``cache["index"]: [B] int32``. Searches start with a short cache and grow it: the cache for more
    positions must be the one for fewer with zeros appended along the axes that grow, position p stored at index p
    (no ring buffers, no non-zero fill). What depends on the source alone (the Transformer's projected
    encoder-decoder keys and values) goes under a ``PER_SOURCE`` key: it is the same for every beam of a row, so beam
    search keeps it once per source (``[B, ...]`` while the rest of the cache is ``[B·K, ...]``, source b's beams
    in rows b·K .. b·K + K - 1) and never copies it; ``decode`` must accept it so (the Transformer's
    cross-attention reads each row once for its K beams).

``decode(tgt_in, memory, cache=None, *, deterministic=True, return_attention=False) -> DecoderOutput``
    tgt_in: ``[B, T]`` int, the shifted target (``BOS_ID`` first). Without a cache: teacher forcing over all T
    positions (causal). With a cache: ``tgt_in`` continues the prefix already in the cache (T = 1 for step-by-step
    decoding, T > 1 for a prefill), and the returned cache includes it. Logits equal teacher forcing's at the same
    positions. ``attention`` (when requested and the model has encoder-decoder attention) is ``[B, T, S]``: the
    cross-attention weights used for alignment plots (for multi-head / multi-layer models: the last layer, averaged
    over heads; the Transformer also takes ``return_attention="heads"`` for the last layer per head, ``[B, N, T, S]``).

``__call__(src, tgt_in, src_mask=None, *, deterministic=True) -> logits [B, T, V]``
    Teacher forcing: ``decode(tgt_in, encode(src, src_mask)).logits``.

Token ids: ``PAD_ID = 0``, ``BOS_ID = 1``, ``EOS_ID = 2`` unless a model is given others. Dropout draws from the
``"dropout"`` RNG stream when ``deterministic=False``.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from attnjax.tokens import BOS_ID, EOS_ID, PAD_ID  # pylint: disable=unused-import  (re-exported)


PER_SOURCE = "per_source"  # a cache subtree that depends on the source alone (see init_cache)


class DecoderOutput(NamedTuple):
  logits: Any  # [B, T, V] float32
  cache: Any = None  # the updated cache when one was given, else None
  attention: Any = None  # [B, T, S] cross-attention weights when return_attention=True, else None


def token_mask(name, ids, mask=None):
  """``[B, L]`` bool, True = real token: ``mask`` if given, else ``ids != PAD_ID``; errors name ``name``."""
  if ids.ndim != 2:
    raise ValueError(f"{name} must be [B, L] token ids, got shape {ids.shape}")
  if mask is None:
    return ids != PAD_ID
  if mask.shape != ids.shape:
    raise ValueError(f"{name}_mask shape {mask.shape} != {name} shape {ids.shape}")
  return mask.astype(bool)


def source_mask(src, src_mask=None):
  """``[B, S]`` bool mask of real source tokens: ``src_mask`` if given, else ``src != PAD_ID``."""
  return token_mask("src", src, src_mask)
