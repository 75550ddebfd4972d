"""The reserved token ids every vocabulary and every model share, below both ``data/`` and ``models/``.

``PAD_ID = 0`` (padding, never a target), ``BOS_ID = 1`` (the decoder's first input, never a target), ``EOS_ID = 2``
(ends every target), ``UNK_ID = 3`` (text the vocabulary does not cover); learned ids start at ``NUM_RESERVED``. A
model's embedding tables may be padded past the vocabulary (``data.vocab_multiple``) so the vocab axis shards evenly:
those ids, PAD and BOS are never predicted (:func:`never_predicted`), and label smoothing gives them no mass.
"""

from __future__ import annotations

PAD_ID = 0
BOS_ID = 1
EOS_ID = 2
UNK_ID = 3
NUM_RESERVED = 4


def never_predicted(vocab_ids, vocab_size):
  """Boolean mask over ``vocab_ids`` (an array of ids, e.g. ``arange(V_padded)``): True for ids a decoder must never
  emit and a smoothed target never weights: PAD, BOS, and the padding ids at or past the real ``vocab_size``."""
  return (vocab_ids == PAD_ID) | (vocab_ids == BOS_ID) | (vocab_ids >= vocab_size)
