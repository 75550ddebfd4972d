"""Writes ``tests/transfer/hf_import_reference/``: tiny checkpoints that the ``transformers`` library itself writes
(``save_pretrained``) in the shape of published ones, and what the library computes from them, so that
:mod:`attnjax.transfer.published` is checked against the library where neither ``torch`` nor ``transformers`` is
installed.

* ``marian/``: a ``MarianMTModel`` as opus-mt's are: SiLU (``swish``) feed-forward activations, embeddings scaled by
  √d_model, one embedding for the encoder, the decoder and the (tied) output layer, a non-zero ``final_logits_bias``,
  ``</s>`` = 0 as EOS, ``<unk>`` = 1, and ``<pad>`` the last id, which is also the decoder's start; a
  ``MarianTokenizer`` over a tiny SentencePiece model (``source.spm`` = ``target.spm``, ``vocab.json``) and
  opus-mt's ``generation_config.json`` (4 beams, ``<pad>`` a bad word, EOS forced at ``max_length``, the library's
  default length penalty 1 and early-stopping heuristic).
* ``gpt2/``: a ``GPT2LMHeadModel`` as GPT-2's: the tanh GELU (``gelu_new``), learned positions, LayerNorm ε 1e-5,
  a byte-level BPE ``GPT2TokenizerFast`` trained on a few sentences (the ``tokenizers`` library), whose last id,
  ``<|endoftext|>``, is both BOS and EOS.

Each model is trained for a few hundred steps (Marian: to reverse the order of the words of ``TEXTS``' vocabulary;
GPT-2: on ``TEXTS``, each document ended by ``<|endoftext|>``), so that its searches end rows with EOS and differ
between greedy and beam search, as a trained model's do. ``reference.npz`` holds the tokenizer's ids of ``TEXTS``
(padded with the tokenizer's pad), the logits of a teacher-forced batch from the model made float64 (``logits64``;
``float32_noise`` in ``reference.json`` is how far the float32 model's are from them: float32 rounding alone), and
the library's greedy and 4-beam
outputs of ``model.generate`` under the directory's ``generation_config.json`` (for GPT-2, ``MAX_NEW`` new tokens
after each prompt); ``reference.json`` the texts, the decoded outputs, the library versions and ``float32_noise``.

    python3 -m venv /tmp/hfvenv && /tmp/hfvenv/bin/pip install torch transformers sentencepiece tokenizers
    /tmp/hfvenv/bin/python tools/hf_import_reference.py     # [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile

import numpy as np
import torch
import transformers

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "transfer", "hf_import_reference")
SEED = 0
STEPS = {"marian": 400, "gpt2": 60}  # GPT-2 longer would know TEXTS by heart: its beams would be greedy's
MAX_NEW = 12  # GPT-2's new tokens per prompt
MARIAN_MAX_LENGTH = 16  # generation_config.json's max_length: the start token and 15 generated, EOS forced last
TEXTS = ["the cat sat on the mat", "a dog runs in the park", "two men play music", "a woman reads",
         "the small cat sleeps on the grass", "children play in the snow near a house"]
# beyond the training texts: a word of unseen letters (Marian: <unk>), and a sentence longer than any trained
UNSEEN = ["the zebra quizzed", "a dog and a cat play in the park near the small house on the grass"]
PROMPTS = ["the cat", "a woman", "children play in", "two"]


def _words() -> list[str]:
  return sorted({w for t in TEXTS for w in t.split()})


def reverse_words(text: str) -> str:
  return " ".join(text.split()[::-1])


def _randomize(model: torch.nn.Module, generator: torch.Generator) -> None:
  """LayerNorm scales in [0.5, 1.5), biases N(0, 0.1), other weights N(0, 0.3): no parameter at its initial value."""
  with torch.no_grad():
    for name, parameter in sorted(model.named_parameters()):
      if "layer_norm.weight" in name or ".ln_" in name and name.endswith("weight"):
        parameter.copy_(0.5 + torch.rand(parameter.shape, generator=generator))
      elif name.endswith(".bias"):
        parameter.copy_(0.1 * torch.randn(parameter.shape, generator=generator))
      else:
        parameter.copy_(0.3 * torch.randn(parameter.shape, generator=generator))


def _train(model, batches, steps: int) -> float:
  optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
  model.train()
  loss = None
  for step in range(steps):
    loss = model(**batches(step)).loss
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
  model.eval()
  return float(loss)


# --------------------------------------------------------------------------------------------- Marian


def _marian_tokenizer(out: str) -> transformers.MarianTokenizer:
  """A ``MarianTokenizer`` as opus-mt's: one SentencePiece model for both sides, and ``vocab.json`` numbering
  ``</s>`` 0, ``<unk>`` 1, the pieces, and ``<pad>`` last."""
  import sentencepiece as spm  # pylint: disable=g-import-not-at-top
  with tempfile.TemporaryDirectory() as tmp:
    prefix = os.path.join(tmp, "spm")
    spm.SentencePieceTrainer.train(sentence_iterator=iter(TEXTS * 4), model_prefix=prefix, vocab_size=32,
                                   model_type="unigram", character_coverage=1.0, pad_id=-1, bos_id=-1, eos_id=-1,
                                   unk_id=0, normalization_rule_name="identity", minloglevel=2)
    processor = spm.SentencePieceProcessor(model_file=prefix + ".model")
    pieces = [processor.id_to_piece(i) for i in range(1, processor.get_piece_size())]
    vocab = {"</s>": 0, "<unk>": 1, **{p: i + 2 for i, p in enumerate(pieces)}}
    vocab["<pad>"] = len(vocab)
    for name in ("source.spm", "target.spm"):
      shutil.copyfile(prefix + ".model", os.path.join(tmp, name))
    with open(os.path.join(tmp, "vocab.json"), "w", encoding="utf-8") as f:
      json.dump(vocab, f)
    tokenizer = transformers.MarianTokenizer(os.path.join(tmp, "source.spm"), os.path.join(tmp, "target.spm"),
                                             os.path.join(tmp, "vocab.json"), model_max_length=64)
    tokenizer.save_pretrained(out)
  return transformers.AutoTokenizer.from_pretrained(out)


def _marian(out: str) -> dict:
  tokenizer = _marian_tokenizer(out)
  size, pad = len(tokenizer), tokenizer.pad_token_id
  assert (tokenizer.eos_token_id, tokenizer.unk_token_id, pad) == (0, 1, size - 1)
  config = transformers.MarianConfig(
      vocab_size=size, decoder_vocab_size=size, d_model=16, encoder_layers=2, decoder_layers=2,
      encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=32, decoder_ffn_dim=32,
      activation_function="swish", max_position_embeddings=64, scale_embedding=True, dropout=0.0,
      pad_token_id=pad, eos_token_id=0, bos_token_id=0, decoder_start_token_id=pad, forced_eos_token_id=0,
      share_encoder_decoder_embeddings=True, tie_word_embeddings=True)
  torch.manual_seed(SEED)
  generator = torch.Generator().manual_seed(SEED)
  model = transformers.MarianMTModel(config)
  _randomize(model, generator)
  with torch.no_grad():
    model.final_logits_bias.copy_(0.5 * torch.randn(model.final_logits_bias.shape, generator=generator))
  words = _words()
  rng = np.random.default_rng(SEED)

  def batch(step):
    del step
    texts = [" ".join(rng.choice(words, size=int(rng.integers(1, 5)))) for _ in range(32)]
    return dict(tokenizer(texts, text_target=[reverse_words(t) for t in texts], padding=True, return_tensors="pt"))

  loss = _train(model, lambda step: _labelled(batch(step), pad), STEPS["marian"])
  print(f"marian: reverse-words loss {loss:.3f} after {STEPS['marian']} steps")
  model.generation_config = transformers.GenerationConfig(
      bad_words_ids=[[pad]], bos_token_id=0, decoder_start_token_id=pad, eos_token_id=0, forced_eos_token_id=0,
      max_length=MARIAN_MAX_LENGTH, num_beams=4, pad_token_id=pad)
  model.save_pretrained(out)
  model = transformers.MarianMTModel.from_pretrained(out, attn_implementation="eager").eval()
  texts = TEXTS + UNSEEN
  source = tokenizer(texts, padding=True, return_tensors="pt")
  target = tokenizer(text_target=[reverse_words(t) for t in texts], padding=True, return_tensors="pt")
  decoder_ids = torch.cat([torch.full_like(target["input_ids"][:, :1], pad), target["input_ids"][:, :-1]], dim=1)
  arrays = {"input_ids": source["input_ids"], "attention_mask": source["attention_mask"],
            "labels": target["input_ids"], "decoder_input_ids": decoder_ids}
  arrays = {k: v.numpy().astype(np.int32) for k, v in arrays.items()}
  with torch.no_grad():
    run = dict(input_ids=source["input_ids"], attention_mask=source["attention_mask"], decoder_input_ids=decoder_ids)
    logits = model(**run).logits.numpy()
    arrays["logits64"] = model.double()(**run).logits.numpy()
    model = model.float()
    for key, beams in (("greedy", 1), ("beam", 4)):
      arrays[key] = model.generate(input_ids=source["input_ids"], attention_mask=source["attention_mask"],
                                   num_beams=beams).numpy().astype(np.int32)
  decoded = {key: tokenizer.batch_decode(arrays[key], skip_special_tokens=True) for key in ("greedy", "beam")}
  assert decoded["greedy"] != decoded["beam"], "the beams should find what greedy does not"
  noise = _float32_noise(logits, arrays["logits64"], arrays["decoder_input_ids"] != pad)
  return dict(arrays=arrays, info={"texts": texts, "targets": [reverse_words(t) for t in texts], "decoded": decoded,
                                   "float32_noise": noise})


def _float32_noise(logits, logits64, real) -> float:
  """How far the library's float32 logits are from its float64 ones at the real positions: the scale of the
  tests' bounds."""
  return float(np.abs(logits - logits64)[real].max())


def _labelled(batch: dict, pad: int) -> dict:
  """The batch with ``labels`` padding ignored by the loss (-100), as the library's translation examples do."""
  labels = batch["labels"].clone()
  labels[labels == pad] = -100
  return {**batch, "labels": labels}


# --------------------------------------------------------------------------------------------- GPT-2


def _gpt2_tokenizer(out: str):
  """A byte-level BPE trained on ``TEXTS`` (``tokenizers``), ``<|endoftext|>`` added last, as GPT-2's."""
  from tokenizers import ByteLevelBPETokenizer  # pylint: disable=g-import-not-at-top
  bpe = ByteLevelBPETokenizer()
  bpe.train_from_iterator(TEXTS * 4, vocab_size=300, min_frequency=2, special_tokens=[], show_progress=False)
  bpe.add_special_tokens(["<|endoftext|>"])
  tokenizer = transformers.GPT2TokenizerFast(tokenizer_object=bpe._tokenizer, bos_token="<|endoftext|>",  # pylint: disable=protected-access
                                             eos_token="<|endoftext|>", unk_token="<|endoftext|>",
                                             model_max_length=64)
  tokenizer.save_pretrained(out)
  return transformers.AutoTokenizer.from_pretrained(out)


def _gpt2(out: str) -> dict:
  tokenizer = _gpt2_tokenizer(out)
  size, eot = len(tokenizer), tokenizer.eos_token_id
  assert eot == size - 1 == tokenizer.bos_token_id
  config = transformers.GPT2Config(vocab_size=size, n_positions=64, n_embd=16, n_layer=2, n_head=4,
                                   activation_function="gelu_new", layer_norm_epsilon=1e-5, resid_pdrop=0.0,
                                   embd_pdrop=0.0, attn_pdrop=0.0, bos_token_id=eot, eos_token_id=eot)
  torch.manual_seed(SEED)
  model = transformers.GPT2LMHeadModel(config)
  _randomize(model, torch.Generator().manual_seed(SEED))
  documents = [tokenizer(t)["input_ids"] + [eot] for t in TEXTS]
  stream = torch.tensor([i for d in documents for i in d] * 8)
  rng = np.random.default_rng(SEED)

  def batch(step):
    del step
    starts = rng.integers(0, len(stream) - 16, size=16)
    ids = torch.stack([stream[s:s + 16] for s in starts])
    return {"input_ids": ids, "labels": ids}

  loss = _train(model, batch, STEPS["gpt2"])
  print(f"gpt2: language-model loss {loss:.3f} after {STEPS['gpt2']} steps")
  model.generation_config = transformers.GenerationConfig(bos_token_id=eot, eos_token_id=eot)
  model.save_pretrained(out)
  model = transformers.GPT2LMHeadModel.from_pretrained(out, attn_implementation="eager").eval()
  texts = TEXTS[:3] + UNSEEN  # a few rows: the logits are [rows, length, 301] float64
  encoded = [tokenizer(t)["input_ids"] for t in texts]
  width = max(len(e) for e in encoded)
  ids = torch.tensor([e + [eot] * (width - len(e)) for e in encoded])
  mask = torch.tensor([[1] * len(e) + [0] * (width - len(e)) for e in encoded])
  arrays = {"input_ids": ids.numpy().astype(np.int32), "attention_mask": mask.numpy().astype(np.int32)}
  with torch.no_grad():
    logits = model(input_ids=ids, attention_mask=mask).logits.numpy()
    arrays["logits64"] = model.double()(input_ids=ids, attention_mask=mask).logits.numpy()
    model = model.float()
    outputs = {"greedy": [], "beam": []}
    for prompt in PROMPTS:
      prompt_ids = tokenizer(prompt, return_tensors="pt")["input_ids"]
      for key, beams in (("greedy", 1), ("beam", 4)):
        new = model.generate(prompt_ids, attention_mask=torch.ones_like(prompt_ids), num_beams=beams,
                             max_new_tokens=MAX_NEW)[0, prompt_ids.shape[1]:].tolist()
        outputs[key].append(new + [-1] * (MAX_NEW - len(new)))  # -1: nothing (the row stopped at EOS)
  arrays.update({k: np.asarray(v, np.int32) for k, v in outputs.items()})
  decoded = {key: [tokenizer.decode(tokenizer(p)["input_ids"] + [t for t in row if t >= 0], skip_special_tokens=True)
                   for p, row in zip(PROMPTS, arrays[key])] for key in ("greedy", "beam")}
  assert decoded["greedy"] != decoded["beam"], "the beams should find what greedy does not"
  return dict(arrays=arrays, info={"texts": texts, "prompts": PROMPTS, "max_new_tokens": MAX_NEW,
                                   "decoded": decoded, "float32_noise": _float32_noise(logits, arrays["logits64"],
                                                                                       mask.numpy() > 0),
                                   "token_ids": {t: tokenizer(t)["input_ids"] for t in texts + PROMPTS}})


NAMES = ("marian", "gpt2")


def write(out: str, names=NAMES) -> None:
  for name, build in (("marian", _marian), ("gpt2", _gpt2)):
    if name not in names:
      continue
    directory = os.path.join(out, name)
    if os.path.isdir(directory):
      shutil.rmtree(directory)
    os.makedirs(directory)
    written = build(directory)
    np.savez(os.path.join(directory, "reference.npz"), **written["arrays"])
    info = {**written["info"], "seed": SEED,
            "versions": {"transformers": transformers.__version__, "torch": torch.__version__.split("+")[0]}}
    with open(os.path.join(directory, "reference.json"), "w", encoding="utf-8") as f:
      json.dump(info, f, indent=1, sort_keys=True, ensure_ascii=False)
      f.write("\n")
    noise = written["info"]["float32_noise"]
    size = sum(os.path.getsize(os.path.join(directory, n)) for n in os.listdir(directory))
    print(f"{name}: float32 against float64 {noise:.2e}; {sorted(os.listdir(directory))} ({size / 1024:.0f} KiB)")


def main():
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("--out", default=OUT, help="the directory to (re)write (default: %(default)s)")
  parser.add_argument("--names", default=",".join(NAMES), help="which of marian, gpt2 to write")
  args = parser.parse_args()
  write(args.out, tuple(args.names.split(",")))


if __name__ == "__main__":
  main()
