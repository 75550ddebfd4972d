"""Writes ``tests/transfer/bert_prenorm_reference/``: a tiny random Hugging Face ``RobertaPreLayerNormModel`` (the
architecture a pre-norm attnjax BERT encoder exports as) and what the ``transformers`` library computes from it, so
that :mod:`attnjax.transfer.bert` is checked against the library where neither ``torch`` nor ``transformers`` is
installed.

The checkpoint has the shape and random weights of ``tools/bert_reference.py``'s (2 layers of 32, 4 heads, d_ff 64,
a vocabulary of 100, LayerNorm epsilon 1e-3, the same WordPiece ``vocab.txt``), with ``pad_token_id`` 0 (BERT's
[PAD]) and 33 position rows: RoBERTa's positions count from ``pad_token_id + 1``, so row 0 is padding's (zero, as
the library initialises it) and 32 positions follow. ``reference.npz`` holds the same batch of sentence pairs
(``input_ids``, ``attention_mask``, ``token_type_ids``; padded on the right) and the library's
``hidden_states`` (the embeddings' output and every layer's; transformers 5 records the last layer's after the final
LayerNorm, as ``last_hidden_state``) and ``last_hidden_state``, once in float32 and once from ``model.double()``
(``*64``): how far float32 is from the exact values on the machine that wrote them.

    python3 -m venv /tmp/hfvenv && /tmp/hfvenv/bin/pip install torch transformers safetensors numpy
    /tmp/hfvenv/bin/python tools/bert_prenorm_reference.py     # [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import sys

import numpy as np
import torch
import transformers

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bert_reference  # pylint: disable=wrong-import-position

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "transfer", "bert_prenorm_reference")
FILES = ("config.json", "model.safetensors", "vocab.txt", "reference.npz", "reference.json")
CONFIG = {**{k: v for k, v in bert_reference.CONFIG.items() if k != "max_position_embeddings"},
          "max_position_embeddings": bert_reference.CONFIG["max_position_embeddings"] + 1, "pad_token_id": 0}


def write(out: str) -> dict[str, np.ndarray]:
  os.makedirs(out, exist_ok=True)
  for name in FILES:
    if os.path.exists(os.path.join(out, name)):
      os.remove(os.path.join(out, name))
  torch.manual_seed(bert_reference.SEED)
  model = transformers.RobertaPreLayerNormModel(transformers.RobertaPreLayerNormConfig(**CONFIG),
                                                add_pooling_layer=False)
  bert_reference.randomize(model, bert_reference.SEED)
  with torch.no_grad():  # padding's position row, zero as the library makes it
    model.embeddings.position_embeddings.weight[CONFIG["pad_token_id"]] = 0.0
  model.save_pretrained(out)
  with open(os.path.join(out, "vocab.txt"), "w", encoding="utf-8") as f:
    f.write("\n".join(bert_reference.vocabulary()) + "\n")
  tokenizer = transformers.BertTokenizer.from_pretrained(out, do_lower_case=True)
  batch = tokenizer(bert_reference.TEXTS, bert_reference.PAIRS, padding=True, return_tensors="pt")
  assert (batch["attention_mask"] == 0).any() and (batch["token_type_ids"] == 1).any()
  arrays = {key: batch[key].numpy().astype(np.int32) for key in ("input_ids", "attention_mask", "token_type_ids")}
  reference = transformers.RobertaPreLayerNormModel.from_pretrained(out, add_pooling_layer=False,
                                                                    attn_implementation="eager").eval()
  for suffix in ("", "64"):  # float32, then the same model made float64 (in place: so second)
    run = reference.double() if suffix else reference
    with torch.no_grad():
      outputs = run(**batch, output_hidden_states=True)
    dtype = np.float64 if suffix else np.float32
    arrays[f"hidden_states{suffix}"] = torch.stack(outputs.hidden_states).numpy().astype(dtype)
    arrays[f"last_hidden_state{suffix}"] = outputs.last_hidden_state.numpy().astype(dtype)
  np.savez(os.path.join(out, "reference.npz"), **arrays)
  with open(os.path.join(out, "reference.json"), "w", encoding="utf-8") as f:
    json.dump({"texts": bert_reference.TEXTS, "pairs": bert_reference.PAIRS, "seed": bert_reference.SEED,
               "transformers": transformers.__version__, "torch": torch.__version__}, f, indent=2)
    f.write("\n")
  return arrays


def main():
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("--out", default=OUT, help="the directory to (re)write (default: %(default)s)")
  out = parser.parse_args().out
  arrays = write(out)
  noise = np.abs(arrays["last_hidden_state"] - arrays["last_hidden_state64"]).max()
  print(f"float32 against float64: {noise:.2e}")
  total = sum(os.path.getsize(os.path.join(out, name)) for name in FILES)
  print(f"wrote {out} ({total / 1024:.0f} KiB)")


if __name__ == "__main__":
  main()
