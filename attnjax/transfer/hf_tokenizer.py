"""A run's vocabulary as a Hugging Face fast tokenizer: ``tokenizer.json`` + ``tokenizer_config.json``, which
``transformers.AutoTokenizer.from_pretrained`` loads as a ``PreTrainedTokenizerFast`` and the ``tokenizers`` library
alone reads too.

Text in gives the ids attnjax's vocabulary gives, and ids out decode to the string attnjax writes:

* :class:`attnjax.data.vocab.CharVocab` (the embedded synthetic tasks): a ``WordLevel`` model over the characters,
  each character its own pre-token, and a decoder that joins them with nothing between.
* :class:`attnjax.data.tokenizer.SentencePieceVocab` (the real tasks): the model's own pieces and scores, as a
  ``Unigram`` (with sentencepiece's normalisation rules, its precompiled character map) or a ``BPE`` model (its
  merges recovered from the pieces: each piece that two other pieces concatenate to, ranked by the piece's id),
  ``▁`` marking spaces as sentencepiece does.

No BOS or EOS is added to an encoding (attnjax's sources carry neither; the decoder's BOS is the model's
``decoder_start_token_id``). ``<pad>``, ``<s>`` and ``</s>`` are special tokens at ids 0-2 as in :mod:`attnjax.tokens`, and
``split_special_tokens`` keeps a literal ``<s>`` in the text the characters it is in a character vocabulary. (A
SentencePiece model's table holds those four pieces too, and ``tokenizers``' models, unlike sentencepiece, match
them in text: a literal ``<s>``, ``</s>``, ``<pad>`` or ``<unk>`` in the input is the one text that tokenizes
differently there, as it does in every sentencepiece tokenizer ``transformers`` converts.) UNK (id 3)
is the token ``⁇`` of a character vocabulary, so that it decodes as attnjax decodes it; a SentencePiece vocabulary's
``<unk>`` is special, and ``skip_special_tokens`` drops it where attnjax writes sentencepiece's ``⁇`` (spaced).
"""

from __future__ import annotations

import json

from attnjax import fs
from attnjax.tokens import BOS_ID, EOS_ID, NUM_RESERVED, PAD_ID, UNK_ID

TOKENIZER_FILE, TOKENIZER_CONFIG_FILE = "tokenizer.json", "tokenizer_config.json"
SPECIAL = {PAD_ID: "<pad>", BOS_ID: "<s>", EOS_ID: "</s>", UNK_ID: "<unk>"}


def _with_specials(tokenizer, ids=tuple(sorted(SPECIAL))):
  from tokenizers import AddedToken  # pylint: disable=g-import-not-at-top
  tokenizer.add_special_tokens([AddedToken(SPECIAL[i], special=True, normalized=False) for i in ids])
  return tokenizer


def _unk_is_text(vocab) -> bool:
  """A character vocabulary's UNK is the token ``⁇`` (what attnjax decodes it to), not a special token, unless
  ``⁇`` is one of its characters."""
  from attnjax.data.vocab import UNK_TEXT, CharVocab  # pylint: disable=g-import-not-at-top
  return isinstance(vocab, CharVocab) and UNK_TEXT not in vocab.chars


def char_tokenizer(vocab):
  """A ``tokenizers.Tokenizer`` giving ``vocab``'s (a :class:`CharVocab`) ids: one token per character."""
  from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers  # pylint: disable=g-import-not-at-top
  from attnjax.data.vocab import UNK_TEXT  # pylint: disable=g-import-not-at-top
  unk = UNK_TEXT if _unk_is_text(vocab) else SPECIAL[UNK_ID]
  table = {SPECIAL[i]: i for i in (PAD_ID, BOS_ID, EOS_ID)}
  table[unk] = UNK_ID
  table.update({c: i + NUM_RESERVED for i, c in enumerate(vocab.chars)})
  tokenizer = Tokenizer(models.WordLevel(table, unk_token=unk))
  tokenizer.pre_tokenizer = pre_tokenizers.Split(Regex(r"[\s\S]"), behavior="isolated")  # every character, \n too
  tokenizer.decoder = decoders.Fuse()
  return _with_specials(tokenizer, (PAD_ID, BOS_ID, EOS_ID) + (() if unk == UNK_TEXT else (UNK_ID,)))


def _bpe_merges(pieces: list[str], vocab: dict[str, int]) -> list[tuple[str, str]]:
  """sentencepiece BPE's merges, recovered from its pieces: every split of a piece into two pieces of the
  vocabulary, ordered by the merged piece's id (sentencepiece numbers BPE pieces in merge order), then by the
  left part's id."""
  merges = []
  for piece in pieces:
    for cut in range(1, len(piece)):
      left, right = piece[:cut], piece[cut:]
      if left in vocab and right in vocab:
        merges.append((vocab[piece], vocab[left], left, right))
  merges.sort()
  return [(left, right) for _, _, left, right in merges]


def sentencepiece_tokenizer(vocab):
  """A ``tokenizers.Tokenizer`` giving ``vocab``'s (a :class:`SentencePieceVocab`) ids, from its model's pieces."""
  from sentencepiece import sentencepiece_model_pb2  # pylint: disable=g-import-not-at-top
  from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers  # pylint: disable=g-import-not-at-top
  proto = sentencepiece_model_pb2.ModelProto.FromString(vocab.model_proto)
  kind = proto.trainer_spec.model_type  # 1 unigram, 2 BPE
  # control and unknown pieces (<pad> <s> </s> <unk>) are never merged into, as in sentencepiece
  normal = [p.type in (p.NORMAL, p.USER_DEFINED) for p in proto.pieces]
  pieces = [(p.piece, p.score) for p in proto.pieces]
  if proto.trainer_spec.byte_fallback:
    raise ValueError("a sentencepiece model with byte_fallback is not exported (attnjax trains none)")
  if kind == 1:
    model = models.Unigram(pieces, UNK_ID, False)
  elif kind == 2:
    table = {piece: i for i, (piece, _) in enumerate(pieces)}
    mergeable = {piece: i for piece, i in table.items() if normal[i]}
    model = models.BPE(table, _bpe_merges([p for (p, _), ok in zip(pieces, normal) if ok], mergeable),
                       unk_token=SPECIAL[UNK_ID],
                       fuse_unk=True)
  else:
    raise ValueError(f"sentencepiece model_type {kind} is not exported (only unigram and BPE)")
  tokenizer = Tokenizer(model)
  rules = [normalizers.Precompiled(proto.normalizer_spec.precompiled_charsmap)] if (
      proto.normalizer_spec.precompiled_charsmap) else []
  if proto.normalizer_spec.remove_extra_whitespaces:
    rules += [normalizers.Strip(left=True, right=True), normalizers.Replace(Regex(" {2,}"), " ")]
  if rules:
    tokenizer.normalizer = normalizers.Sequence(rules)
  scheme = "always" if proto.normalizer_spec.add_dummy_prefix else "never"
  tokenizer.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme=scheme, split=kind == 2)
  tokenizer.decoder = decoders.Metaspace(replacement="▁", prepend_scheme=scheme)
  return _with_specials(tokenizer)


def hf_tokenizer(vocab):
  """The fast tokenizer of a :class:`CharVocab` or a :class:`SentencePieceVocab`."""
  from attnjax.data.tokenizer import SentencePieceVocab  # pylint: disable=g-import-not-at-top
  from attnjax.data.vocab import CharVocab  # pylint: disable=g-import-not-at-top
  if isinstance(vocab, CharVocab):
    return char_tokenizer(vocab)
  if isinstance(vocab, SentencePieceVocab):
    return sentencepiece_tokenizer(vocab)
  raise TypeError(f"no Hugging Face tokenizer for a {type(vocab).__name__}")


def write_tokenizer(vocab, out_dir, *, model_max_length: int) -> None:
  """Writes ``tokenizer.json`` and ``tokenizer_config.json`` for ``vocab`` into ``out_dir``."""
  fs.makedirs(out_dir)
  fs.write_text(fs.join(out_dir, TOKENIZER_FILE), hf_tokenizer(vocab).to_str(pretty=True) + "\n")
  settings = {"tokenizer_class": "PreTrainedTokenizerFast", "pad_token": SPECIAL[PAD_ID], "bos_token": SPECIAL[BOS_ID],
              "eos_token": SPECIAL[EOS_ID], "model_max_length": model_max_length,
              "clean_up_tokenization_spaces": False, "split_special_tokens": True}
  if not _unk_is_text(vocab):
    settings["unk_token"] = SPECIAL[UNK_ID]
  fs.write_text(fs.join(out_dir, TOKENIZER_CONFIG_FILE), json.dumps(settings, indent=2, sort_keys=True) + "\n")
