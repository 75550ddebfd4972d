"""Writes ``tests/transfer/bert_reference/``: a tiny random Hugging Face ``BertModel`` checkpoint and what the
``transformers`` library computes from it, so that the import of :mod:`attnjax.transfer.bert` is checked against the
library itself where neither ``torch`` nor ``transformers`` is installed.

The checkpoint (``config.json`` and ``model.safetensors`` as ``save_pretrained`` writes them, and a WordPiece
``vocab.txt``) has 2 layers of width 32 (4 heads, d_ff 64) and a vocabulary of 100; its weights are random with a
fixed seed, LayerNorm scales away from 1 and biases away from 0 so that each tensor matters, and large enough that
the feed-forward inputs reach |x| ~ 2, where the exact GELU and its tanh approximation differ by ~1e-3.
``layer_norm_eps`` is 1e-3 (BERT's is 1e-12), so that a LayerNorm that ignores it is visible at 1e-5.

The library loads the checkpoint once per ``hidden_act`` that :mod:`attnjax.transfer.bert` imports (``gelu``,
``gelu_new``, ``gelu_pytorch_tanh``, ``relu``: the same weights, ``config.json``'s activation overridden), and runs a
batch of three sentence pairs of different lengths (padded, so the attention mask has zeros; two segments, so the
token types differ), tokenised by its ``BertTokenizer`` from ``vocab.txt``. ``reference.npz`` holds the batch
(``input_ids``, ``attention_mask``, ``token_type_ids``) and, for each activation, ``<act>/hidden_states`` (the
embeddings' output and every layer's, ``[layers + 1, batch, length, 32]``) and ``<act>/pooler_output``, float32;
``reference.json`` the texts, the seed and the library versions. About 190 KB in all.

To write them again (say, for a new ``transformers``), in an environment of its own (the project's needs neither
torch nor transformers; a CPU build of torch is enough):

    python3 -m venv /tmp/hfvenv && /tmp/hfvenv/bin/pip install torch transformers safetensors numpy
    /tmp/hfvenv/bin/python tools/bert_reference.py            # [--out DIR], default tests/transfer/bert_reference

then ``python -m pytest tests/transfer/test_bert.py`` in the project's environment. Rerunning with the same versions
gives the same files, byte for byte. Where transformers is installed, that test file also checks that the installed
version computes the committed numbers again (to 1e-6).
"""

from __future__ import annotations

import argparse
import json
import os

import numpy as np
import torch
import transformers

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "transfer", "bert_reference")
FILES = ("config.json", "model.safetensors", "vocab.txt", "reference.npz", "reference.json")  # all that is written
SEED = 0
ACTIVATIONS = ("gelu", "gelu_new", "gelu_pytorch_tanh", "relu")  # attnjax.transfer.bert._ACTIVATIONS
WORDS = ["the", "a", "man", "woman", "is", "playing", "guitar", "piano", "dog", "runs", "cat", "sleeps", "on", "grass",
         "##s", "##ing", "play", "run", ".", "park", "in", "music", "loud", "small"]
CONFIG = {"vocab_size": 100, "hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 4,
          "intermediate_size": 64, "max_position_embeddings": 32, "type_vocab_size": 2, "layer_norm_eps": 1e-3,
          "hidden_act": "gelu", "hidden_dropout_prob": 0.1, "attention_probs_dropout_prob": 0.1,
          "initializer_range": 0.02, "pad_token_id": 0}
TEXTS = ["the man is playing the guitar in the park .", "a dog runs", "the woman plays piano"]
PAIRS = ["a woman is playing loud music", "the small cat sleeps on the grass", "dogs run"]


def vocabulary() -> list[str]:
  """BERT's special tokens, the words, and ``[unused<i>]`` entries up to ``vocab_size``, as BERT's vocabularies."""
  tokens = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + WORDS
  return tokens + [f"[unused{i}]" for i in range(CONFIG["vocab_size"] - len(tokens))]


def randomize(model: torch.nn.Module, seed: int) -> None:
  """Every parameter drawn from a seeded generator: LayerNorm scales in [0.5, 1.5), biases N(0, 0.1), embeddings
  N(0, 0.5), other weights N(0, 0.3)."""
  generator = torch.Generator().manual_seed(seed)
  with torch.no_grad():
    for name, parameter in sorted(model.named_parameters()):
      if "LayerNorm.weight" in name:
        value = 0.5 + torch.rand(parameter.shape, generator=generator)
      elif name.endswith(".bias"):
        value = 0.1 * torch.randn(parameter.shape, generator=generator)
      elif "embeddings" in name:
        value = 0.5 * torch.randn(parameter.shape, generator=generator)
      else:
        value = 0.3 * torch.randn(parameter.shape, generator=generator)
      parameter.copy_(value)


def write(out: str) -> dict[str, np.ndarray]:
  os.makedirs(out, exist_ok=True)
  for name in FILES:
    if os.path.exists(os.path.join(out, name)):
      os.remove(os.path.join(out, name))
  torch.manual_seed(SEED)
  model = transformers.BertModel(transformers.BertConfig(**CONFIG), add_pooling_layer=True)
  randomize(model, SEED)
  before = set(os.listdir(out))
  model.save_pretrained(out)
  with open(os.path.join(out, "vocab.txt"), "w", encoding="utf-8") as f:
    f.write("\n".join(vocabulary()) + "\n")
  written = sorted(set(os.listdir(out)) - before)
  assert written == ["config.json", "model.safetensors", "vocab.txt"], written  # what the import reads, no more

  tokenizer = transformers.BertTokenizer.from_pretrained(out, do_lower_case=True)
  batch = tokenizer(TEXTS, PAIRS, padding=True, return_tensors="pt")
  assert (batch["attention_mask"] == 0).any() and (batch["token_type_ids"] == 1).any()
  arrays = {key: batch[key].numpy().astype(np.int32) for key in ("input_ids", "attention_mask", "token_type_ids")}
  for act in ACTIVATIONS:
    reference = transformers.BertModel.from_pretrained(out, hidden_act=act, attn_implementation="eager").eval()
    assert reference.config.hidden_act == act
    with torch.no_grad():
      outputs = reference(**batch, output_hidden_states=True)
    arrays[f"{act}/hidden_states"] = torch.stack(outputs.hidden_states).numpy().astype(np.float32)
    arrays[f"{act}/pooler_output"] = outputs.pooler_output.numpy().astype(np.float32)
  np.savez(os.path.join(out, "reference.npz"), **arrays)
  with open(os.path.join(out, "reference.json"), "w", encoding="utf-8") as f:
    json.dump({"texts": TEXTS, "pairs": PAIRS, "activations": list(ACTIVATIONS), "seed": SEED,
               "transformers": transformers.__version__, "torch": torch.__version__}, f, indent=2)
    f.write("\n")
  return arrays


def main():
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("--out", default=OUT, help="the directory to (re)write (default: %(default)s)")
  out = parser.parse_args().out
  arrays = write(out)
  last = {act: arrays[f"{act}/hidden_states"][-1] for act in ACTIVATIONS}
  for act in ACTIVATIONS[1:]:
    print(f"{act}: last hidden states differ from gelu's by up to {np.abs(last[act] - last['gelu']).max():.2e}")
  total = sum(os.path.getsize(os.path.join(out, name)) for name in FILES)
  print(f"wrote {out} ({total / 1024:.0f} KiB)")


if __name__ == "__main__":
  main()
