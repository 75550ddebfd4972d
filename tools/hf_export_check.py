"""Does a trained workdir, exported, behave in ``transformers`` as it does in attnjax? Two stages, each in its own
environment (the project's needs neither torch nor transformers):

    # 1. the project's: export the workdir, decode the split's sources with attnjax, write both into DIR
    python -m tools.hf_export_check --workdir=RUN --out=DIR [--split=test] [--decode=greedy|beam] [--limit=N]
    # 2. one with transformers: load DIR with AutoModelForSeq2SeqLM / AutoTokenizer, generate, compare
    /tmp/hfvenv/bin/python tools/hf_export_check.py --compare=DIR

Stage 1 writes ``DIR/attnjax_outputs.json``: the sources, attnjax's hypotheses (``python -m attnjax.translate``'s,
with ``--decode``; beam search at α = 0, the length penalty the two libraries share), the references, and the
score attnjax's metric gives them. Stage 2 tokenizes the sources with the exported tokenizer, generates with the
exported ``generation_config.json``, decodes, and prints how many hypotheses are the same string, and the score of
each side (exact match and sacreBLEU where sacrebleu is installed), as JSON.
"""

from __future__ import annotations

import argparse
import json
import os

OUTPUTS = "attnjax_outputs.json"


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


def stage_compare(out: str, batch_size: int = 64) -> dict:
  import torch  # pylint: disable=g-import-not-at-top
  import transformers  # pylint: disable=g-import-not-at-top
  with open(os.path.join(out, OUTPUTS), encoding="utf-8") as f:
    record = json.load(f)
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
    print(json.dumps(stage_attnjax(args.workdir, args.out, args.split, args.decode, args.limit), indent=1))
