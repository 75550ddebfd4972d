"""Writes ``tests/transfer/hf_export_reference/``: tiny attnjax models exported to Hugging Face (a post-norm
Transformer as Marian, a pre-norm one as Pegasus, a decoder-only LM as GPT-2) and what the ``transformers`` library
computes from the exported files, so that :mod:`attnjax.export` is checked against the library itself in an
environment without torch or transformers.

Two stages, each in its own environment:

    # 1. the project's: the models, random with a fixed seed and exported (config, weights, tokenizer files)
    python -m tools.hf_export_reference --stage=models [--names=marian,pegasus,marian_separate,gpt2]
    # 2. one with the library (the project needs neither torch nor transformers; a CPU torch is enough)
    python3 -m venv /tmp/hfvenv && /tmp/hfvenv/bin/pip install torch transformers safetensors numpy
    /tmp/hfvenv/bin/python tools/hf_export_reference.py --stage=reference [--names=...]

Stage 2 loads each directory with ``AutoModelForSeq2SeqLM`` / ``AutoModelForCausalLM`` and ``AutoTokenizer`` and
writes ``reference.npz``: the token ids of ``TEXTS`` (``input_ids``, padded with 0, and ``attention_mask``), the
logits of a teacher-forced batch (``logits``, and ``logits64`` from the same model in float64: how far float32
rounding alone moves them), greedy continuations (``greedy``) and, for the encoder-decoders, beam
search with 4 beams by raw log-probability (``beam``), each ``MAX_NEW`` tokens at most; and ``reference.json``: the
texts, the decoded strings and the library versions. The tests (``tests/transfer/test_hf_export.py``) import the
committed files into attnjax and compare.

The models: width 16, 2 layers a stack, 4 heads, FFN 32; weights are the initialiser's plus N(0, 0.3) noise (so that
LayerNorm scales and biases are not 1 and 0), and an EOS bias on the untied output layer so that some rows stop.
The Marian model has LayerNorm ε 1e-5 (the library's), the Pegasus one attnjax's default 1e-6, so that the tests
see both the exact case and the size of the ε difference. The encoder-decoders read characters (a ``CharVocab``).
``marian_separate`` has two vocabularies, as a run with ``data.joint_vocab=False`` does (``decoder_vocab_size``,
the output layer tied to the decoder's embedding): its source is ``TEXTS``' characters, its target the upper-cased
characters and a full stop (``target_text``), so that the same letter has another id on each side; it learns to
reverse and upper-case, and its target vocabulary travels in ``target_tokenizer/``. The rest learn to reverse;
the LM a 120-piece SentencePiece BPE model trained on ``TEXTS`` (identity normalisation: NFKC's table would add
480 KB; test_hf_tokenizer.py checks it against sentencepiece), whose ``.model`` file is kept beside it.
"""

from __future__ import annotations

import argparse
import json
import os

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "transfer", "hf_export_reference")
SEED = 0
MAX_NEW = 24
NOISE = 0.3
STEPS = 300
TEXTS = ["the cat sat on the mat", "a dog runs in the park", "two men play music", "a woman reads",
         "the small cat sleeps on the grass", "children play in the snow near a house"]
SPM_FILE = "vocab.spm.model"
TARGET_TOKENIZER = "target_tokenizer"
NAMES = ("marian", "pegasus", "marian_separate", "gpt2")


def target_text(text: str) -> str:
  """``marian_separate``'s target for ``text``: reversed, upper-cased, with a full stop."""
  return text[::-1].upper() + "."


def target_texts() -> list[str]:
  return [target_text(t) for t in TEXTS]


def _noisy(params, seed):
  import jax  # pylint: disable=g-import-not-at-top
  rng = np.random.default_rng(seed)
  return jax.tree_util.tree_map(lambda x: np.asarray(x) + NOISE * rng.standard_normal(x.shape).astype(np.float32),
                                params)


def _train_reverse(module, params, chars, tgt_chars=None, steps: int = STEPS):
  """``steps`` of Adam on reversing random words of ``TEXTS`` (teacher forcing), so that the model's greedy and
  beam outputs differ from row to row and end with EOS, as a trained model's do. With ``tgt_chars`` (a second
  vocabulary), the target is :func:`target_text`."""
  import jax  # pylint: disable=g-import-not-at-top
  import jax.numpy as jnp  # pylint: disable=g-import-not-at-top
  import optax  # pylint: disable=g-import-not-at-top
  from attnjax.tokens import BOS_ID, EOS_ID  # pylint: disable=g-import-not-at-top
  words = sorted({w for t in TEXTS for w in t.split()})
  rng = np.random.default_rng(SEED)
  src = np.zeros((len(words) * 4, 16), np.int32)
  tgt = np.zeros((len(words) * 4, 18), np.int32)
  for row in range(src.shape[0]):
    text = " ".join(rng.choice(words, size=2))[:15]
    src[row, :len(text)] = chars.encode(text)
    out = [BOS_ID] + (tgt_chars.encode(target_text(text)) if tgt_chars else chars.encode(text[::-1])) + [EOS_ID]
    tgt[row, :len(out)] = out
  src, tgt = jnp.asarray(src), jnp.asarray(tgt)

  def loss_fn(p):
    logits = module.apply({"params": p}, src, tgt[:, :-1], src != 0)
    weights = (tgt[:, 1:] != 0).astype(jnp.float32)
    nll = optax.softmax_cross_entropy_with_integer_labels(logits, tgt[:, 1:])
    return jnp.sum(nll * weights) / jnp.sum(weights)

  optimizer = optax.adam(3e-3)
  state = optimizer.init(params)

  @jax.jit
  def step(p, s):
    loss, grads = jax.value_and_grad(loss_fn)(p)
    updates, s = optimizer.update(grads, s)
    return optax.apply_updates(p, updates), s, loss

  params = jax.tree_util.tree_map(jnp.asarray, params)
  for _ in range(steps):
    params, state, loss = step(params, state)
  print(f"reverse task: loss {float(loss):.3f} after {steps} steps")
  return jax.tree_util.tree_map(np.asarray, params)


def models(names=NAMES) -> None:
  import jax  # pylint: disable=g-import-not-at-top
  import jax.numpy as jnp  # pylint: disable=g-import-not-at-top
  import flax.linen as nn  # pylint: disable=g-import-not-at-top
  from attnjax.data.tokenizer import train_sentencepiece  # pylint: disable=g-import-not-at-top
  from attnjax.data.vocab import CharVocab  # pylint: disable=g-import-not-at-top
  from attnjax.models.lm import DecoderLM  # pylint: disable=g-import-not-at-top
  from attnjax.models.transformer import Transformer  # pylint: disable=g-import-not-at-top
  from attnjax.transfer import hf_tokenizer, lm, seq2seq  # pylint: disable=g-import-not-at-top
  chars = CharVocab.build(TEXTS)
  upper = CharVocab.build(target_texts())
  shape = dict(num_encoder_layers=2, num_decoder_layers=2, d_model=32, num_heads=4, d_ff=64, dropout_rate=0.0,
               max_length=64, implementation="xla")
  ids = jnp.ones((1, 4), jnp.int32)
  for name, fields in (("marian", dict(pre_norm=False, shared_vocab=True, share_source_embeddings=False,
                                       tie_decoder_embeddings=False, layer_norm_epsilon=1e-5)),
                       ("pegasus", dict(pre_norm=True, shared_vocab=True, share_source_embeddings=True,
                                        tie_decoder_embeddings=True)),
                       ("marian_separate", dict(pre_norm=False, shared_vocab=False, share_source_embeddings=False,
                                                tie_decoder_embeddings=True, layer_norm_epsilon=1e-5))):
    if name not in names:
      continue
    tgt = upper if name == "marian_separate" else None
    module = Transformer(src_vocab_size=chars.size, tgt_vocab_size=(tgt or chars).size, **shape, **fields)
    params = _noisy(nn.meta.unbox(module.init(jax.random.PRNGKey(SEED), ids, ids))["params"], SEED)
    params = _train_reverse(module, params, chars, tgt)
    out = os.path.join(OUT, name)
    seq2seq.export_transformer(module, params, out, beam_size=4, max_new_tokens=MAX_NEW)
    hf_tokenizer.write_tokenizer(chars, out, model_max_length=module.max_length)
    if tgt:
      hf_tokenizer.write_tokenizer(tgt, os.path.join(out, TARGET_TOKENIZER), model_max_length=module.max_length)
  if "gpt2" not in names:
    return
  out = os.path.join(OUT, "gpt2")
  os.makedirs(out, exist_ok=True)
  pieces = train_sentencepiece(TEXTS * 4, os.path.join(out, SPM_FILE[:-len(".model")]), 120, model_type="bpe",
                               normalization_rule_name="identity")  # no 240 KB NFKC table in the repository
  os.remove(os.path.join(out, SPM_FILE[:-len(".model")] + ".vocab"))
  module = DecoderLM(vocab_size=pieces.size, num_layers=2, d_model=16, num_heads=4, d_ff=32, dropout_rate=0.0,
                     max_length=64, implementation="xla")
  params = _noisy(nn.meta.unbox(module.init(jax.random.PRNGKey(SEED), ids))["params"], SEED)
  lm.export_lm(module, params, out, max_new_tokens=MAX_NEW)
  hf_tokenizer.write_tokenizer(pieces, out, model_max_length=module.max_length)


def reference(names=NAMES) -> None:
  import torch  # pylint: disable=g-import-not-at-top
  import transformers  # pylint: disable=g-import-not-at-top
  for name in names:
    out = os.path.join(OUT, name)
    tokenizer = transformers.AutoTokenizer.from_pretrained(out)
    separate = os.path.isdir(os.path.join(out, TARGET_TOKENIZER))
    target = transformers.AutoTokenizer.from_pretrained(os.path.join(out, TARGET_TOKENIZER)) if separate else tokenizer
    batch = tokenizer(TEXTS, padding=True, return_tensors="pt")
    ids, mask = batch["input_ids"], batch["attention_mask"]
    arrays = {"input_ids": ids.numpy().astype(np.int32), "attention_mask": mask.numpy().astype(np.int32)}
    with torch.no_grad():
      if name == "gpt2":
        model = transformers.AutoModelForCausalLM.from_pretrained(out).eval()
        arrays["logits"] = model(input_ids=ids, attention_mask=mask).logits.numpy()
        arrays["logits64"] = model.double()(input_ids=ids, attention_mask=mask).logits.numpy()
        model = model.float()
        prompt = ids[:, :3]  # the first three tokens of every text (every text has at least three)
        arrays["prompt"] = prompt.numpy().astype(np.int32)
        arrays["greedy"] = model.generate(prompt, attention_mask=torch.ones_like(prompt),
                                          max_new_tokens=MAX_NEW)[:, prompt.shape[1]:].numpy().astype(np.int32)
      else:
        model = transformers.AutoModelForSeq2SeqLM.from_pretrained(out).eval()
        prefixes = target_texts()[::-1] if separate else TEXTS[::-1]
        decoder_ids = torch.tensor([[1] + target(t)["input_ids"][:7] for t in prefixes])
        if separate:  # the target tokenizer's ids of the targets, as attnjax's target vocabulary gives them
          batch = target(target_texts(), padding=True, return_tensors="pt")
          arrays["target_ids"] = batch["input_ids"].numpy().astype(np.int32)
          arrays["target_mask"] = batch["attention_mask"].numpy().astype(np.int32)
        arrays["decoder_input_ids"] = decoder_ids.numpy().astype(np.int32)
        arrays["logits"] = model(input_ids=ids, attention_mask=mask, decoder_input_ids=decoder_ids).logits.numpy()
        arrays["logits64"] = model.double()(input_ids=ids, attention_mask=mask,
                                            decoder_input_ids=decoder_ids).logits.numpy()
        model = model.float()
        arrays["greedy"] = model.generate(ids, attention_mask=mask, num_beams=1, do_sample=False,
                                          max_new_tokens=MAX_NEW)[:, 1:].numpy().astype(np.int32)
        arrays["beam"] = model.generate(ids, attention_mask=mask, num_beams=4, length_penalty=0.0,
                                        early_stopping=False, max_new_tokens=MAX_NEW)[:, 1:].numpy().astype(np.int32)
    np.savez(os.path.join(out, "reference.npz"), **arrays)
    decoded = {key: target.batch_decode(arrays[key], skip_special_tokens=True)
               for key in ("greedy", "beam") if key in arrays}
    info = {"texts": TEXTS, "decoded": decoded, "architecture": type(model).__name__, "max_new_tokens": MAX_NEW,
            "versions": {"transformers": transformers.__version__, "torch": torch.__version__.split("+")[0]}}
    if separate:
      info["target_texts"] = target_texts()
    with open(os.path.join(out, "reference.json"), "w", encoding="utf-8") as f:
      json.dump(info, f, indent=1, sort_keys=True)
      f.write("\n")
    print(name, type(model).__name__, {k: v.shape for k, v in arrays.items()})


if __name__ == "__main__":
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("--stage", choices=("models", "reference"), required=True)
  parser.add_argument("--names", default=",".join(NAMES), help=f"which of {', '.join(NAMES)} to write")
  args = parser.parse_args()
  chosen = tuple(n for n in args.names.split(",") if n)
  if not set(chosen) <= set(NAMES):
    parser.error(f"--names: unknown {sorted(set(chosen) - set(NAMES))}; the models are {', '.join(NAMES)}")
  {"models": models, "reference": reference}[args.stage](chosen)
