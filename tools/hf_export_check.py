"""Does a trained workdir, exported, behave in ``transformers`` as it does in attnjax? Two stages, each in its own
environment (the project's needs neither torch nor transformers):

    # 1. the project's: export the workdir, score the split with attnjax, write both into DIR
    python -m tools.hf_export_check --workdir=RUN --out=DIR [--split=test] [--decode=greedy|beam] [--limit=N]
    # 2. one with transformers: load DIR with AutoModelFor... / AutoTokenizer, score the same split, compare
    /tmp/hfvenv/bin/python tools/hf_export_check.py --compare=DIR

**An encoder-decoder** (``transformer``): stage 1 writes ``DIR/attnjax_outputs.json``: the sources, attnjax's
hypotheses (``python -m attnjax.translate``'s, with ``--decode``; beam search at α = 0, the length penalty the two
libraries share), the references, and the score attnjax's metric gives them. Stage 2 tokenizes the sources with the
exported tokenizer, generates with the exported ``generation_config.json``, decodes, and prints how many hypotheses
are the same string, and the score of each side (exact match and sacreBLEU where sacrebleu is installed), as JSON.

**A decoder-only LM** (``decoder_lm``): stage 1 writes the split's documents and the packed rows attnjax scores
(``DIR/attnjax_rows.npz``: inputs, targets, weights, segment ids) beside ``python -m attnjax.evaluate``'s loss per
token. Stage 2 tokenizes every document with the exported tokenizer (``[BOS] ids [EOS]``, laid end to end, must be
the rows' token stream), runs ``AutoModelForCausalLM`` on each document's part of each row from position 0 (the rows'
positions restart there, and attention stays inside a document), and prints the loss per token over the same
targets, summed in float64, beside attnjax's.
"""

from __future__ import annotations

import argparse
import json
import os

OUTPUTS = "attnjax_outputs.json"
LM_ROWS = "attnjax_rows.npz"


def stage_attnjax(workdir: str, out: str, split: str, decode: str, limit: int | None) -> dict:
  from attnjax import config as config_lib, families  # pylint: disable=g-import-not-at-top
  from attnjax.export import export_workdir  # pylint: disable=g-import-not-at-top
  from attnjax.translate import translate_lines  # pylint: disable=g-import-not-at-top
  summary = export_workdir(workdir, out)
  config = config_lib.load_config(workdir)
  pairs = families.load_split(config.data, split)[:limit]
  sources, references = [s for s, _ in pairs], [t for _, t in pairs]
  result = translate_lines(workdir, sources, eval_overrides={"decode": decode, "alpha": 0.0})
  exact = 100.0 * sum(h == r for h, r in zip(result.hypotheses, references)) / len(references)
  record = {"workdir": workdir, "split": split, "decode": decode, "beam_size": config.eval.beam_size,
            "sources": sources, "references": references, "hypotheses": result.hypotheses,
            "exact_match": exact, "export": summary}
  with open(os.path.join(out, OUTPUTS), "w", encoding="utf-8") as f:
    json.dump(record, f, indent=1, ensure_ascii=False)
  return {"attnjax_exact_match": exact, "examples": len(sources), **summary}


def stage_attnjax_lm(workdir: str, out: str, split: str, checkpoint: str = "best") -> dict:
  import numpy as np  # pylint: disable=g-import-not-at-top
  from attnjax import config as config_lib  # pylint: disable=g-import-not-at-top
  from attnjax.data.lm import LmTaskData  # pylint: disable=g-import-not-at-top
  from attnjax.export import export_workdir  # pylint: disable=g-import-not-at-top
  from attnjax.scoring import evaluate_checkpoint  # pylint: disable=g-import-not-at-top
  summary = export_workdir(workdir, out, checkpoint=checkpoint)
  scores = evaluate_checkpoint(workdir, split=split, checkpoint=checkpoint)
  task = LmTaskData(config_lib.load_config(workdir).data, workdir)
  rows = task.rows(split)
  np.savez(os.path.join(out, LM_ROWS), **{k: rows[k] for k in ("inputs", "targets", "weights", "segment_ids")})
  record = {"workdir": workdir, "split": split, "family": "language_model", "step": scores["step"],
            "lm_loss": scores["lm_loss"], "lm_tokens": scores["lm_tokens"], "texts": task.texts(split),
            "export": summary}
  with open(os.path.join(out, OUTPUTS), "w", encoding="utf-8") as f:
    json.dump(record, f, indent=1, ensure_ascii=False)
  return {"attnjax_lm_loss": scores["lm_loss"], "lm_tokens": scores["lm_tokens"], "rows": len(rows["inputs"]),
          **summary}


def compare_lm(out: str, record: dict) -> dict:
  import numpy as np  # pylint: disable=g-import-not-at-top
  import torch  # pylint: disable=g-import-not-at-top
  import transformers  # pylint: disable=g-import-not-at-top
  rows = dict(np.load(os.path.join(out, LM_ROWS)))
  tokenizer = transformers.AutoTokenizer.from_pretrained(out)
  model = transformers.AutoModelForCausalLM.from_pretrained(out).eval()
  bos, eos = 1, 2  # attnjax.tokens' BOS_ID, EOS_ID
  stream = np.concatenate([[bos, *tokenizer(text, add_special_tokens=False)["input_ids"], eos]
                           for text in record["texts"]])
  ours = np.concatenate([rows["inputs"].reshape(-1), rows["targets"][-1:, -1]])
  same_stream = bool(len(ours) >= len(stream) and np.array_equal(ours[:len(stream)], stream)
                     and not ours[len(stream):].any())
  nll, count = 0.0, 0.0
  with torch.no_grad():
    for r in range(len(rows["inputs"])):
      for segment in np.unique(rows["segment_ids"][r]):
        if segment == 0:
          continue
        inside = rows["segment_ids"][r] == segment
        weights = rows["weights"][r][inside].astype(np.float64)
        if not weights.any():
          continue
        logits = model(input_ids=torch.tensor(rows["inputs"][r][inside][None].astype(np.int64))).logits[0]
        log_probs = torch.log_softmax(logits.double(), dim=-1).numpy()
        picked = log_probs[np.arange(len(weights)), rows["targets"][r][inside]]
        nll -= float((picked * weights).sum())
        count += float(weights.sum())
  loss = nll / max(count, 1.0)
  return {"architecture": type(model).__name__, "split": record["split"], "step": record["step"],
          "documents": len(record["texts"]), "tokenizer_gives_the_rows_stream": same_stream,
          "lm_tokens": count, "attnjax_lm_tokens": record["lm_tokens"],
          "attnjax_lm_loss": record["lm_loss"], "transformers_lm_loss": loss,
          "difference": loss - record["lm_loss"],
          "versions": {"transformers": transformers.__version__, "torch": torch.__version__.split("+")[0]}}


def stage_compare(out: str, batch_size: int = 64) -> dict:
  import torch  # pylint: disable=g-import-not-at-top
  import transformers  # pylint: disable=g-import-not-at-top
  with open(os.path.join(out, OUTPUTS), encoding="utf-8") as f:
    record = json.load(f)
  if record.get("family") == "language_model":
    return compare_lm(out, record)
  tokenizer = transformers.AutoTokenizer.from_pretrained(out)
  model = transformers.AutoModelForSeq2SeqLM.from_pretrained(out).eval()
  beams = record["beam_size"] if record["decode"] == "beam" else 1
  hypotheses = []
  with torch.no_grad():
    for start in range(0, len(record["sources"]), batch_size):
      batch = tokenizer(record["sources"][start:start + batch_size], padding=True, return_tensors="pt")
      tokens = model.generate(**batch, num_beams=beams, length_penalty=0.0, early_stopping=False)
      hypotheses += tokenizer.batch_decode(tokens, skip_special_tokens=True)
  refs = record["references"]
  same = sum(a == b for a, b in zip(hypotheses, record["hypotheses"]))
  report = {"architecture": type(model).__name__, "examples": len(refs), "decode": record["decode"],
            "num_beams": beams, "same_hypothesis": same,
            "attnjax_exact_match": record["exact_match"],
            "transformers_exact_match": 100.0 * sum(h == r for h, r in zip(hypotheses, refs)) / len(refs),
            "versions": {"transformers": transformers.__version__, "torch": torch.__version__.split("+")[0]}}
  try:
    import sacrebleu  # pylint: disable=g-import-not-at-top
    report["attnjax_bleu"] = sacrebleu.corpus_bleu(record["hypotheses"], [refs]).score
    report["transformers_bleu"] = sacrebleu.corpus_bleu(hypotheses, [refs]).score
  except ImportError:
    pass
  report["differing"] = [(s, a, b) for s, a, b in zip(record["sources"], record["hypotheses"], hypotheses)
                         if a != b][:5]
  return report


if __name__ == "__main__":
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("--workdir")
  parser.add_argument("--out")
  parser.add_argument("--split", default="test")
  parser.add_argument("--decode", default="greedy", choices=("greedy", "beam"))
  parser.add_argument("--limit", type=int, default=None)
  parser.add_argument("--compare", help="stage 2: the directory stage 1 wrote")
  args = parser.parse_args()
  if args.compare:
    print(json.dumps(stage_compare(args.compare), indent=1, ensure_ascii=False))
  else:
    from attnjax import config as config_lib  # pylint: disable=g-import-not-at-top
    if config_lib.load_config(args.workdir).model.name == "decoder_lm":
      print(json.dumps(stage_attnjax_lm(args.workdir, args.out, args.split), indent=1))
    else:
      print(json.dumps(stage_attnjax(args.workdir, args.out, args.split, args.decode, args.limit), indent=1))
