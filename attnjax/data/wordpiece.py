"""BERT's WordPiece vocabulary (a ``vocab.txt``) through the well-kept ``tokenizers`` library: ids without special
tokens for masked-LM pre-training, and ids with each token's character span in the original text for SQuAD
(:func:`attnjax.data.squad.encode_examples` maps answer spans through them)."""

from __future__ import annotations

import hashlib
from typing import Sequence

import numpy as np

from attnjax import fs

SPECIALS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")


class WordPieceVocab:
  """A BERT WordPiece vocabulary (``vocab.txt``) through ``tokenizers``: ``encode_documents`` gives token ids without
  special tokens; ``size``, ``pad_id``, ``cls_id``, ``sep_id``, ``mask_id`` as the file numbers them."""

  def __init__(self, vocab_file, lowercase: bool = True):
    from tokenizers.implementations import BertWordPieceTokenizer  # pylint: disable=g-import-not-at-top
    if not fs.exists(vocab_file):
      raise FileNotFoundError(f"data.vocab_file={vocab_file}: no such file (a BERT vocab.txt)")
    self.path = str(vocab_file)
    self.tokenizer = BertWordPieceTokenizer(self.path, lowercase=lowercase)
    vocab = self.tokenizer.get_vocab()
    missing = [token for token in SPECIALS if token not in vocab]
    if missing:
      raise ValueError(f"data.vocab_file={vocab_file}: no {', '.join(missing)} token(s)")
    self.size = self.tokenizer.get_vocab_size()
    self.pad_id, self.unk_id, self.cls_id, self.sep_id, self.mask_id = (vocab[t] for t in SPECIALS)
    self.fingerprint = hashlib.sha256(fs.read_bytes(vocab_file) + str(lowercase).encode()).hexdigest()[:16]

  def encode_documents(self, texts: Sequence[str]) -> list[np.ndarray]:
    encodings = self.tokenizer.encode_batch(list(texts), add_special_tokens=False)
    return [np.asarray(e.ids, np.int32) for e in encodings]

  def encode(self, text: str) -> list[int]:
    return self.tokenizer.encode(text, add_special_tokens=False).ids

  def encode_with_offsets(self, text: str) -> tuple[list[int], list[tuple[int, int]]]:
    """Ids and each token's ``(begin, end)`` character span in ``text`` (a word's pieces share their word's span
    between them: "##s" covers only its own characters)."""
    if not isinstance(text, str):
      raise TypeError(f"encode_with_offsets expects a str, got {type(text).__name__}")
    encoding = self.tokenizer.encode(text, add_special_tokens=False)
    return list(encoding.ids), [tuple(o) for o in encoding.offsets]

  def decode(self, ids: Sequence[int]) -> str:
    return self.tokenizer.decode(list(ids))

  def id_to_piece(self, i: int) -> str:
    return self.tokenizer.id_to_token(int(i))


WORDPIECE_FILE = "wordpiece.vocab.txt"  # data.vocab_file, copied into the workdir: evaluation needs the workdir only


def wordpiece_in_workdir(data_cfg, workdir: str):
  """The WordPiece vocabulary of ``data.vocab_file``, copied to ``<workdir>/wordpiece.vocab.txt`` on the first start
  (so that a workdir carries its vocabulary, as it carries a SentencePiece model) and read from there."""
  kept = fs.join(workdir, WORDPIECE_FILE)
  if not fs.exists(kept):
    source = str(data_cfg.get("vocab_file"))
    if not fs.exists(source):
      raise FileNotFoundError(f"data.vocab_file={source}: no such file (a BERT vocab.txt)")
    import jax  # pylint: disable=g-import-not-at-top
    if jax.process_index() == 0:
      fs.makedirs(workdir)
      fs.write_bytes(kept, fs.read_bytes(source))
    else:
      return WordPieceVocab(source, lowercase=bool(data_cfg.get("lowercase", True)))
  return WordPieceVocab(kept, lowercase=bool(data_cfg.get("lowercase", True)))
