"""A run's vocabulary as a Hugging Face fast tokenizer gives the ids attnjax's vocabulary gives, and decodes them to
the same string: checked against the vocabularies themselves (sentencepiece for the SentencePiece models)."""

from __future__ import annotations

import pytest

from attnjax.data.tokenizer import train_sentencepiece
from attnjax.data.vocab import CharVocab
from attnjax.transfer import hf_tokenizer

CORPUS = ["A man in a blue shirt is standing on a ladder cleaning windows.",
          "Two young, White males are outside near many bushes.",
          "Several men in hard hats are operating a giant pulley system.",
          "A little girl climbing into a wooden playhouse.",
          "A man in an orange hat starring at something.",
          "People are fixing the roof of a house.",
          "A boy smiles underwater while wearing goggles.",
          "Eine Gruppe von Männern lädt Baumwolle auf einen Lastwagen.",
          "Ein Mann schläft in einem grünen Raum auf einem Sofa."] * 8
PROBES = CORPUS[:9] + ["  two  spaces ", "ﬁne café Ünïcödé ½", "tab\there", "", " ", "x" * 40, "日本語 text", "a\nb",
                       "Männer  ", "\u2047 the unknown sign", "a <b> tag"]
LITERAL_SPECIALS = "<s> literal </s>"  # the character vocabulary only (see attnjax.transfer.hf_tokenizer)


def _encode(tokenizer, text):
  tokenizer.encode_special_tokens = True  # what tokenizer_config.json's split_special_tokens asks of transformers
  return tokenizer.encode(text).ids


def test_a_character_vocabulary_tokenizes_and_decodes_as_attnjax_does():
  vocab = CharVocab.build(CORPUS[:4])
  tokenizer = hf_tokenizer.char_tokenizer(vocab)
  for text in PROBES + [LITERAL_SPECIALS]:
    ids = vocab.encode(text)
    assert _encode(tokenizer, text) == ids, text
    assert tokenizer.decode(ids, skip_special_tokens=True) == vocab.decode(ids), text


@pytest.mark.parametrize("kind", ["unigram", "bpe"])
def test_a_sentencepiece_vocabulary_tokenizes_as_sentencepiece_does(kind):
  vocab = train_sentencepiece(CORPUS, None, 100, model_type=kind)
  tokenizer = hf_tokenizer.sentencepiece_tokenizer(vocab)
  unknown = 0
  for text in PROBES:
    ids = vocab.encode(text)
    assert _encode(tokenizer, text) == ids, text
    if 3 in ids:  # UNK: sentencepiece writes " ⁇ ", the special <unk> is skipped
      unknown += 1
      continue
    assert tokenizer.decode(ids, skip_special_tokens=True) == vocab.decode(ids), text
  assert 0 < unknown < len(PROBES) // 2
  eos = vocab.encode("a man") + [2, 0]
  assert tokenizer.decode(eos, skip_special_tokens=True) == vocab.decode(eos) == "a man"
  assert [tokenizer.token_to_id(t) for t in ("<pad>", "<s>", "</s>", "<unk>")] == [0, 1, 2, 3]


def test_the_tokenizer_config_names_the_fast_tokenizer_and_its_special_tokens(tmp_path):
  import json
  hf_tokenizer.write_tokenizer(CharVocab.build(CORPUS[:2]), tmp_path, model_max_length=64)
  settings = json.loads((tmp_path / "tokenizer_config.json").read_text())
  assert settings["tokenizer_class"] == "PreTrainedTokenizerFast" and settings["split_special_tokens"]
  assert (settings["pad_token"], settings["bos_token"], settings["eos_token"]) == ("<pad>", "<s>", "</s>")
  assert "unk_token" not in settings  # the character vocabulary's UNK is the text "⁇", not a special token
  from tokenizers import Tokenizer
  assert Tokenizer.from_file(str(tmp_path / "tokenizer.json")).token_to_id("</s>") == 2
