"""Subword vocabularies for real text: a sentencepiece model (Kudo & Richardson 2018) with the model interface's ids.

:class:`SentencePieceVocab` has :class:`attnjax.data.vocab.CharVocab`'s interface (``encode(str) -> list[int]`` without
BOS/EOS, ``decode(ids)`` stopping at EOS and skipping PAD/BOS, ``size``) and the same reserved ids: ``PAD_ID = 0``,
``BOS_ID = 1``, ``EOS_ID = 2``, ``UNK_ID = 3`` (pieces ``<pad>``, ``<s>``, ``</s>``, ``<unk>``), then the learned
pieces. sentencepiece's own default layout (unk 0, bos 1, eos 2, no pad) differs, so a model trained elsewhere with it
is refused on load rather than silently shifting every id.

* :func:`train_sentencepiece` trains a unigram (Kudo 2018) or BPE (Sennrich et al. 2016) model from an in-memory
  iterator of texts. Training is deterministic: the corpus is taken in the given order (no sampling, no shuffling,
  the first ``max_sentences`` non-empty texts), sentencepiece's random generator is seeded and one thread is used by
  default, so the same texts give a byte-identical model.
* :func:`load_or_train` caches ``<workdir>/<name>.model``: the vocabulary is trained on the training split once and
  evaluation of a checkpoint reuses exactly that model. :func:`load_or_train_pair` builds one joint model for source
  and target (shared embeddings, as the Transformer's En-De model) or two separate ones.
* :meth:`SentencePieceVocab.encode_with_offsets` gives each token's character span in the *original* text (through
  sentencepiece's SentencePieceText proto, whose offsets survive normalisation), which SQuAD needs to map answer
  character spans to token spans (:mod:`attnjax.data.squad`).

Text is normalised with sentencepiece's ``nmt_nfkc`` rule by default (NFKC, extra whitespace removed), so
``decode(encode(text))`` gives back ``text`` for text that is already NFKC-normal with single spaces, and the
normalised form otherwise.
"""

from __future__ import annotations

import hashlib
import io
import itertools
import json
import os
from typing import Callable, Iterable, Sequence

import numpy as np
import sentencepiece as spm
from absl import logging
from sentencepiece import sentencepiece_model_pb2, sentencepiece_pb2

from attnjax import fs, tokens
from attnjax.data.vocab import UNK_ID
from attnjax.tokens import BOS_ID, EOS_ID, PAD_ID

MODEL_TYPES = ("unigram", "bpe")
SPECIAL_PIECES = {PAD_ID: "<pad>", BOS_ID: "<s>", EOS_ID: "</s>", UNK_ID: "<unk>"}
MODEL_SUFFIX = ".model"
VOCAB_SUFFIX = ".vocab"

Offsets = list[tuple[int, int]]


class SentencePieceVocab:
  """A trained sentencepiece model behind the :class:`~attnjax.data.vocab.CharVocab` interface.

  Build with :func:`train_sentencepiece`, :func:`load_or_train` or :meth:`load`; ``SentencePieceVocab(model_proto)``
  takes a serialized ``ModelProto`` (the bytes of a ``.model`` file).
  """

  def __init__(self, model_proto: bytes, *, path: str | None = None):
    self._proto = bytes(model_proto)
    self._path = path
    self._sp = spm.SentencePieceProcessor()
    where = path or "the given model proto"
    try:
      self._sp.LoadFromSerializedProto(self._proto)
    except RuntimeError as e:
      raise ValueError(f"{where} is not a sentencepiece model: {e}") from None
    actual = {"pad": self._sp.pad_id(), "bos": self._sp.bos_id(), "eos": self._sp.eos_id(), "unk": self._sp.unk_id()}
    expected = {"pad": PAD_ID, "bos": BOS_ID, "eos": EOS_ID, "unk": UNK_ID}
    if actual != expected:
      # A model with sentencepiece's default layout (unk=0, no pad) would shift ids under the model's PAD/BOS/EOS.
      raise ValueError(f"{where} has special ids {actual}, but attnjax needs {expected}: train it with "
                       f"train_sentencepiece (or spm_train --pad_id=0 --bos_id=1 --eos_id=2 --unk_id=3)")
    self._size = self._sp.get_piece_size()
    trainer_spec = sentencepiece_model_pb2.ModelProto.FromString(self._proto).trainer_spec
    self._model_type = sentencepiece_model_pb2.TrainerSpec.ModelType.Name(trainer_spec.model_type).lower()

  @classmethod
  def load(cls, path: str | os.PathLike) -> SentencePieceVocab:
    """Reads a ``.model`` file."""
    path = os.fspath(path)
    return cls(fs.read_bytes(path), path=path)

  def save(self, path: str | os.PathLike) -> None:
    """Writes the model as a ``.model`` file (atomically: a crash never leaves a truncated model to be reused)."""
    fs.write_bytes(path, self._proto)

  # Pickling (multi-process data loading, saving alongside a checkpoint) needs the bytes, not the C++ processor.
  def __getstate__(self):
    return {"model_proto": self._proto, "path": self._path}

  def __setstate__(self, state):
    self.__init__(state["model_proto"], path=state["path"])

  @property
  def size(self) -> int:
    """Number of ids, reserved ones included: the embedding / logits size."""
    return self._size

  def __len__(self) -> int:
    return self._size

  @property
  def path(self) -> str | None:
    """The file the model was loaded from or saved to by :func:`train_sentencepiece`, if any."""
    return self._path

  @property
  def model_proto(self) -> bytes:
    """The serialized ``ModelProto``: the whole model."""
    return self._proto

  @property
  def model_type(self) -> str:
    """"unigram" or "bpe" (from the model's trainer spec)."""
    return self._model_type

  @property
  def pieces(self) -> tuple[str, ...]:
    """Every piece in id order ("<pad>", "<s>", "</s>", "<unk>", then the learned ones, "▁" marking a space)."""
    return tuple(self._sp.id_to_piece(i) for i in range(self._size))

  def id_to_piece(self, i: int) -> str:
    return self._sp.id_to_piece(int(i))

  def score(self, i: int) -> float:
    """The piece's score: its log probability for unigram, minus its merge rank for BPE."""
    return self._sp.get_score(int(i))

  def __eq__(self, other) -> bool:
    return isinstance(other, SentencePieceVocab) and self._proto == other._proto

  def __hash__(self) -> int:
    return hash(self._proto)

  def __repr__(self) -> str:
    return f"SentencePieceVocab(size={self._size}, model_type={self.model_type!r}, path={self._path!r})"

  def encode(self, text: str) -> list[int]:
    """Ids of ``text``'s pieces (no BOS/EOS added); characters the model does not cover become :data:`UNK_ID`."""
    if not isinstance(text, str):
      raise TypeError(f"encode expects a str, got {type(text).__name__}")
    return self._sp.encode(text, out_type=int)

  def encode_with_offsets(self, text: str) -> tuple[list[int], Offsets]:
    """Ids of ``text`` (as :meth:`encode`) and each token's ``(char_start, char_end)`` span in ``text`` itself.

    ``text[char_start:char_end]`` is the original text the token came from, before normalisation: a piece with a
    leading "▁" usually covers the space(s) before its word, and a token can cover nothing (``char_start ==
    char_end``), e.g. the "▁" sentencepiece adds before the first word, or the first of two pieces that one character
    was normalised into ("ﬁ" -> "f" "i").
    """
    if not isinstance(text, str):
      raise TypeError(f"encode_with_offsets expects a str, got {type(text).__name__}")
    # "serialized_proto" exists in every sentencepiece >= 0.2.0; the proto's begin/end are UTF-8 *byte* offsets into
    # the unnormalised input ("immutable_proto" was dropped in 0.2.1+, "offset_mapping" only appeared later).
    proto = sentencepiece_pb2.SentencePieceText.FromString(self._sp.encode(text, out_type="serialized_proto"))
    byte_to_char = _byte_to_char_index(text)
    ids = [piece.id for piece in proto.pieces]
    offsets = [(byte_to_char[piece.begin], byte_to_char[piece.end]) for piece in proto.pieces]
    return ids, offsets

  def decode(self, ids: Iterable[int]) -> str:
    """The text of ``ids`` (a list or a 1-D array): stops at the first EOS, skips PAD and BOS; UNK decodes to
    sentencepiece's " ⁇ ". Raises ValueError on an id outside ``[0, size)``."""
    if isinstance(ids, np.ndarray) and ids.ndim != 1:
      raise ValueError(f"decode expects a 1-D sequence of ids, got an array of shape {ids.shape}")
    kept = []
    for i in ids:
      i = int(i)
      if i == EOS_ID:
        break
      if i in (PAD_ID, BOS_ID):
        continue
      if not 0 <= i < self._size:
        raise ValueError(f"id {i} is outside the vocabulary [0, {self._size})")
      kept.append(i)
    return self._sp.decode(kept)


def _byte_to_char_index(text: str) -> list[int]:
  """``index[b]`` = the character index at UTF-8 byte offset ``b`` of ``text`` (``len(index) = bytes + 1``)."""
  index = []
  for position, char in enumerate(text):
    index.extend([position] * len(char.encode("utf-8")))
  index.append(len(text))
  return index


def train_sentencepiece(texts: Iterable[str], model_prefix: str | os.PathLike | None, vocab_size: int, *,
                        model_type: str = "unigram", character_coverage: float = 1.0,
                        max_sentences: int | None = 10_000_000, max_sentence_length: int = 1 << 16,
                        normalization_rule_name: str = "nmt_nfkc", num_threads: int = 1,
                        seed: int = 0) -> SentencePieceVocab:
  """Trains a sentencepiece model on ``texts`` and returns it (also written to ``<model_prefix>.model``).

  Args:
    texts: the training texts (an iterable of str, consumed once); empty or whitespace-only ones are skipped.
    model_prefix: writes ``<model_prefix>.model`` (and a human-readable ``<model_prefix>.vocab``: piece TAB score per
      line); None keeps the model in memory only.
    vocab_size: number of ids including the 4 reserved ones. It is exact: a corpus too small for it is an error.
    model_type: "unigram" (sentencepiece's default) or "bpe".
    character_coverage: fraction of the characters (by frequency) given their own piece; the rest become UNK. 1.0 for
      alphabetic languages, 0.9995 for CJK (sentencepiece's advice).
    max_sentences: train on the first this many non-empty texts (None: all). Taken in order rather than sampled, so
      that training is deterministic.
    max_sentence_length: longer texts (in bytes) are skipped by sentencepiece; large enough for news articles.
    normalization_rule_name: sentencepiece's normaliser: "nmt_nfkc" (default), "nfkc", "identity", ...
    num_threads: sentencepiece trainer threads; 1 keeps training reproducible to the byte.
    seed: seed of sentencepiece's random generator.

  Raises:
    ValueError: no non-empty text, an unknown model_type, or a vocab_size the corpus cannot fill.
  """
  if isinstance(texts, str):
    raise TypeError("texts must be an iterable of strings, not a single str (wrap it in a list)")
  if model_type not in MODEL_TYPES:
    raise ValueError(f"model_type must be one of {MODEL_TYPES}, got {model_type!r}")
  if vocab_size <= len(SPECIAL_PIECES):
    raise ValueError(f"vocab_size must exceed the {len(SPECIAL_PIECES)} reserved ids, got {vocab_size}")
  if max_sentences is not None and max_sentences < 1:
    raise ValueError(f"max_sentences must be positive or None, got {max_sentences}")

  counts = {"used": 0, "empty": 0}

  def sentences():
    for i, text in enumerate(texts):
      if not isinstance(text, str):
        raise TypeError(f"texts[{i}] must be a str, got {type(text).__name__}")
      if not text.strip():
        counts["empty"] += 1
        continue
      counts["used"] += 1
      yield text

  corpus = itertools.islice(sentences(), max_sentences)
  # Peek so that an empty corpus is our clear error, not sentencepiece's "INTERNAL" one.
  first = next(corpus, None)
  if first is None:
    raise ValueError("no non-empty text to train the sentencepiece model on")
  model = io.BytesIO()
  spm.set_random_generator_seed(seed)
  try:
    spm.SentencePieceTrainer.train(
        sentence_iterator=itertools.chain([first], corpus), model_writer=model, vocab_size=vocab_size,
        model_type=model_type, character_coverage=character_coverage,
        pad_id=PAD_ID, bos_id=BOS_ID, eos_id=EOS_ID, unk_id=UNK_ID,
        pad_piece=SPECIAL_PIECES[PAD_ID], bos_piece=SPECIAL_PIECES[BOS_ID], eos_piece=SPECIAL_PIECES[EOS_ID],
        unk_piece=SPECIAL_PIECES[UNK_ID],
        # Use every given sentence in order: sampling (input_sentence_size) and shuffling would make the model depend
        # on sentencepiece's generator state; the caller already limited the corpus with max_sentences.
        input_sentence_size=0, shuffle_input_sentence=False, max_sentence_length=max_sentence_length,
        normalization_rule_name=normalization_rule_name, num_threads=num_threads, minloglevel=1)
  except RuntimeError as e:
    message = str(e)
    if "Vocabulary size too high" in message:
      raise ValueError(f"vocab_size={vocab_size} is too large for this corpus ({counts['used']} texts): "
                       f"{message.split(']')[-1].strip()}") from None
    raise
  path = None if model_prefix is None else os.fspath(model_prefix) + MODEL_SUFFIX
  vocab = SentencePieceVocab(model.getvalue(), path=path)
  logging.info("sentencepiece %s model, %d pieces, trained on %d texts (%d empty ones skipped)%s", model_type,
               vocab.size, counts["used"], counts["empty"], f", saved to {path}" if path else "")
  if path is not None:
    vocab.save(path)
    lines = [f"{vocab.id_to_piece(i)}\t{vocab.score(i)}\n" for i in range(vocab.size)]
    fs.write_text(os.fspath(model_prefix) + VOCAB_SUFFIX, "".join(lines))
  return vocab


_TRAINER_DEFAULTS = dict(train_sentencepiece.__kwdefaults__)  # part of a shared model's key


def spm_options(data_cfg, model_type: str = "unigram") -> dict:
  """:func:`load_or_train`'s options from ``config.data``: ``vocab_size`` (:func:`attnjax.tokens.vocab_size`),
  ``model_type`` (``data.spm_model_type``, else the family's default) and ``given`` (``data.spm_model``)."""
  from attnjax.data.config_keys import get  # pylint: disable=g-import-not-at-top
  return dict(vocab_size=tokens.vocab_size(data_cfg), model_type=get(data_cfg, "spm_model_type", model_type),
              given=get(data_cfg, "spm_model", None))


def load_or_train(workdir: str | os.PathLike, name: str, texts_fn: Callable[[], Iterable[str]], vocab_size: int, *,
                  shared_dir: str | os.PathLike | None = None, given: str | os.PathLike | None = None,
                  **train_options) -> SentencePieceVocab:
  """``<workdir>/<name>.model`` if it exists, else a model trained on ``texts_fn()`` and saved there.

  ``texts_fn`` is only called when training is needed. A cached model whose size or type differs from what is asked
  is an error rather than reused, since the config changed under an existing workdir.

  Args:
    workdir: the experiment's directory (created if missing).
    name: file stem, e.g. "spm" (joint) or "spm_src".
    texts_fn: returns the training texts (the training split only).
    shared_dir: a directory that runs share (the points of a sweep): a model trained there on the same texts with
      the same options is copied into the workdir instead of trained again (training is deterministic, so it is the
      model this run would train), and a model trained here is left there for the next run.
    given: a user's sentencepiece model (``config.data.spm_model``) used instead of training one: copied into the
      workdir on the first start, so that evaluation reads the copy; ``vocab_size`` and the options are its own then.
    vocab_size, train_options: as :func:`train_sentencepiece`.
  """
  prefix = os.fspath(fs.join(workdir, name))
  path = prefix + MODEL_SUFFIX
  if given is not None:
    return _given_model(os.fspath(given), path)
  if fs.exists(path):
    vocab = SentencePieceVocab.load(path)
    model_type = train_options.get("model_type", "unigram")
    if vocab.size != vocab_size or vocab.model_type != model_type:
      raise ValueError(f"{path} is a {vocab.model_type} model of {vocab.size} pieces but the config asks for "
                       f"{model_type} with vocab_size={vocab_size}: delete it to retrain, or use a new workdir")
    logging.info("Reusing the sentencepiece model %s (%d pieces)", path, vocab.size)
    return vocab
  if shared_dir is None:
    return train_sentencepiece(texts_fn(), prefix, vocab_size, **train_options)
  texts = list(texts_fn())
  settings = [name, vocab_size, sorted({**_TRAINER_DEFAULTS, **train_options}.items()),
              spm.__version__]  # what the trainer would use, defaults and version included
  digest = hashlib.sha256(json.dumps(settings, default=str).encode())
  for text in texts:
    digest.update(text.encode("utf-8") + b"\0")
  shared = os.fspath(fs.join(shared_dir, f"{name}.{digest.hexdigest()[:16]}"))
  if fs.exists(shared + MODEL_SUFFIX):
    for suffix in (VOCAB_SUFFIX, MODEL_SUFFIX):  # the model last: its presence means the pair is complete
      fs.write_bytes(prefix + suffix, fs.read_bytes(shared + suffix))
    logging.info("Copied the sentencepiece model %s, trained on the same texts, to %s", shared + MODEL_SUFFIX, path)
    return SentencePieceVocab.load(path)
  vocab = train_sentencepiece(texts, prefix, vocab_size, **train_options)
  for suffix in (VOCAB_SUFFIX, MODEL_SUFFIX):
    fs.write_bytes(shared + suffix, fs.read_bytes(prefix + suffix))
  return vocab


def _given_model(given: str, path: str) -> SentencePieceVocab:
  """The user's model ``given``, copied to ``path`` (a workdir's) on the first start; afterwards the copy (the
  original may have moved), which must be the same model if the original is still there."""
  if fs.exists(path):
    kept = fs.read_bytes(path)
    if fs.exists(given) and fs.read_bytes(given) != kept:
      raise ValueError(f"config.data.spm_model={given!r} differs from the model this workdir was trained with "
                       f"({path}): use a new workdir")
    return SentencePieceVocab(kept, path=path)
  if not fs.exists(given):
    raise FileNotFoundError(f"config.data.spm_model={given!r}: no such file")
  data = fs.read_bytes(given)
  vocab = SentencePieceVocab(data, path=given)  # ValueError naming the file: not a model, or other special ids
  fs.write_bytes(path, data)
  logging.info("Using the sentencepiece model %s (%d pieces), copied to %s", given, vocab.size, path)
  return SentencePieceVocab(data, path=path)


def load_or_train_pair(workdir: str | os.PathLike, pairs_fn: Callable[[], Sequence[tuple[str, str]]],
                       vocab_size: int, *, joint: bool = True, name: str = "spm",
                       **train_options) -> tuple[SentencePieceVocab, SentencePieceVocab]:
  """Source and target vocabularies for text pairs: one joint model (``<name>.model``, returned twice) trained on both
  sides, or separate ``<name>_src.model`` / ``<name>_tgt.model`` of ``vocab_size`` pieces each.

  ``pairs_fn`` returns the training pairs; it is called at most once, and not at all when the models are cached.
  """
  if train_options.get("given") is not None and not joint:
    raise ValueError("config.data.spm_model is one vocabulary for both sides: it needs config.data.joint_vocab=True")
  cache: list[Sequence[tuple[str, str]]] = []

  def pairs():
    if not cache:
      cache.append(pairs_fn())
    return cache[0]

  if joint:
    # Interleaved, so that max_sentences keeps both languages in the same proportion.
    vocab = load_or_train(workdir, name, lambda: (text for pair in pairs() for text in pair), vocab_size,
                          **train_options)
    return vocab, vocab
  src = load_or_train(workdir, f"{name}_src", lambda: (s for s, _ in pairs()), vocab_size, **train_options)
  tgt = load_or_train(workdir, f"{name}_tgt", lambda: (t for _, t in pairs()), vocab_size, **train_options)
  return src, tgt
