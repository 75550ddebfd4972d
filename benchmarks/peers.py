"""attnjax's decoding against the engines people serve with, on the same weights: ``transformers``' ``generate``
(torch) and CTranslate2.

    python -m benchmarks.peers --workdir=RUN [--split=test] [--limit=N] [--batches=1,64] [--beams=1,4]
                               [--max_len=64] [--reps=3] [--engines=attnjax,transformers,ctranslate2,ctranslate2-int8]

The run's Transformer is exported as a Hugging Face directory (``attnjax.export``: Marian when post-norm, Pegasus
when pre-norm) and that directory converted for CTranslate2 (:func:`convert_ctranslate2`: CTranslate2's own weight
mapping for these architectures, with attnjax's conventions: the decoder starts from BOS's embedding, every row of
the padded vocabulary kept). Every engine then decodes the same source strings in the same batches (sorted by
length, longest first), with the same search: greedy or beam, length penalty off (raw log-probability: attnjax's
GNMT penalty is neither library's), at most ``--max_len`` output tokens, PAD, BOS and the padding rows never
emitted. Each engine runs in a process of its own and keeps it, so that start-up and compilation stay out of the
times: an untimed pass first, then ``--reps`` timed passes, the engines taking turns pass by pass (one working at a
time), the median kept. Text in and text out: each engine's tokenization is in its time.

Outputs are compared with attnjax's: identical, or the count of sentences that differ with the first of them and
the two engines' log-probabilities of their outputs (a near tie is float rounding choosing between two hypotheses;
anything else is a different search). Threads: attnjax as ``attnjax.translate`` runs, a JAX device per core on a
CPU-only host (``attnjax.cli.one_device_per_core``: the batch is split over them), and ``attnjax-one-device`` with
JAX's single CPU device; torch's ``set_num_threads(cores)``; CTranslate2's ``intra_threads=cores``. Needs the
``bench`` extra and ``ctranslate2``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

UNUSED = "<unused_{}>"  # the CTranslate2 token of a padding row of the vocabulary (never emitted)


# ---------------------------------------------------------------------------------------------------------- convert


def _vocabulary(tokenizer, rows: int) -> list[str]:
  """The token of each id of a table of ``rows`` rows: the tokenizer's, then one unused token a padding row."""
  tokens = [token for token, _ in sorted(tokenizer.get_vocab().items(), key=lambda item: item[1])]
  if len(tokens) > rows:
    raise ValueError(f"the tokenizer has {len(tokens)} tokens, the model's table {rows} rows")
  return tokens + [UNUSED.format(i) for i in range(len(tokens), rows)]


def _tokenizers(hf_dir: str):
  """The export's source tokenizer and its target one (``target_tokenizer/`` when the vocabularies differ)."""
  import transformers  # pylint: disable=g-import-not-at-top
  source = transformers.AutoTokenizer.from_pretrained(hf_dir)
  target_dir = os.path.join(hf_dir, "target_tokenizer")
  return source, transformers.AutoTokenizer.from_pretrained(target_dir) if os.path.isdir(target_dir) else source


def convert_ctranslate2(hf_dir: str, out: str) -> None:
  """Writes the CTranslate2 model of an attnjax Marian / Pegasus export ``hf_dir`` into ``out`` (float32)."""
  import ctranslate2  # pylint: disable=g-import-not-at-top
  import transformers  # pylint: disable=g-import-not-at-top
  from ctranslate2.converters import transformers as ct2_transformers  # pylint: disable=g-import-not-at-top

  model = transformers.AutoModelForSeq2SeqLM.from_pretrained(hf_dir)
  source, target = _tokenizers(hf_dir)
  generation = json.load(open(os.path.join(hf_dir, "generation_config.json"), encoding="utf-8"))
  pre_norm = model.config.model_type == "pegasus"

  class Loader(ct2_transformers.BartLoader):
    """CTranslate2's BART mapping (the layers Marian and Pegasus share) with attnjax's conventions."""

    def get_model_spec(self, model):
      model.config.normalize_before = pre_norm  # Pegasus: pre-norm, with a final layer norm on each stack
      model.config.normalize_embedding = False
      return super().get_model_spec(model)

    def set_config(self, config, model, tokenizer):
      vocab = _vocabulary(target, model.get_decoder().embed_tokens.weight.shape[0])
      config.bos_token = vocab[generation["bos_token_id"]]
      config.eos_token = vocab[generation["eos_token_id"]]
      config.decoder_start_token = vocab[generation["decoder_start_token_id"]]
      config.unk_token = target.unk_token or vocab[generation["bos_token_id"]]

    def set_vocabulary(self, spec, tokens):
      spec.register_source_vocabulary(_vocabulary(source, model.get_encoder().embed_tokens.weight.shape[0]))
      spec.register_target_vocabulary(_vocabulary(target, model.get_decoder().embed_tokens.weight.shape[0]))

  class Converter(ctranslate2.converters.Converter):
    def _load(self):
      return Loader()(model, target)

  Converter().convert(out, force=True)
  with open(os.path.join(out, "attnjax_banned.json"), "w", encoding="utf-8") as f:
    vocab = _vocabulary(target, model.get_decoder().embed_tokens.weight.shape[0])
    json.dump([vocab[i] for i in generation.get("suppress_tokens", [])], f)


# ----------------------------------------------------------------------------------------------------------- engines


class _Attnjax:
  def __init__(self, job):
    if job.get("cores", True):  # as attnjax.translate runs: a JAX device per core on a CPU-only host
      from attnjax.cli import one_device_per_core  # pylint: disable=g-import-not-at-top
      one_device_per_core()
    import attnjax  # pylint: disable=g-import-not-at-top
    self.model = attnjax.load(job["workdir"], checkpoint=job["checkpoint"])
    self.options = dict(decode="beam" if job["beam"] > 1 else "greedy", beam_size=max(job["beam"], 1), alpha=0.0,
                        max_len_a=0.0, max_len_b=job["max_len"], min_len=0, no_repeat_ngram_size=0,
                        log_progress=False)

  def __call__(self, batch):
    out = self.model.translate(batch, batch_size=len(batch), n_best=1, **self.options)
    return list(out.hypotheses), [row[0][1] for row in out.nbest]


class _Transformers:
  def __init__(self, job):
    import torch  # pylint: disable=g-import-not-at-top
    import transformers  # pylint: disable=g-import-not-at-top
    torch.set_num_threads(os.cpu_count())
    self.torch = torch
    hf = job["hf_dir"]
    self.model = transformers.AutoModelForSeq2SeqLM.from_pretrained(hf).eval()
    self.source, self.target = _tokenizers(hf)
    self.options = dict(num_beams=job["beam"], do_sample=False, max_new_tokens=job["max_len"], length_penalty=0.0,
                        output_scores=True, return_dict_in_generate=True)

  def __call__(self, batch):
    inputs = self.source(batch, return_tensors="pt", padding=True)
    with self.torch.inference_mode():
      out = self.model.generate(**inputs, **self.options)
    texts = self.target.batch_decode(out.sequences, skip_special_tokens=True)
    if self.options["num_beams"] > 1:
      scores = out.sequences_scores.tolist()
    else:  # greedy: the sum of the chosen tokens' log-probabilities, up to EOS
      steps = self.model.compute_transition_scores(out.sequences, out.scores, normalize_logits=True)
      scores = [float(s[s > -float("inf")].sum()) for s in steps]
    return texts, scores


class _CTranslate2:
  def __init__(self, job):
    import ctranslate2  # pylint: disable=g-import-not-at-top
    self.translator = ctranslate2.Translator(job["ct2_dir"], device="cpu", compute_type=job["compute_type"],
                                             intra_threads=os.cpu_count(), inter_threads=1)
    self.source, self.target = _tokenizers(job["hf_dir"])
    banned = json.load(open(os.path.join(job["ct2_dir"], "attnjax_banned.json"), encoding="utf-8"))
    self.options = dict(beam_size=job["beam"], length_penalty=0.0, max_decoding_length=job["max_len"],
                        return_scores=True, suppress_sequences=[[token] for token in banned] or None,
                        max_batch_size=0, num_hypotheses=1)

  def __call__(self, batch):
    tokens = [self.source.convert_ids_to_tokens(ids) for ids in self.source(batch)["input_ids"]]
    results = self.translator.translate_batch(tokens, **self.options)
    texts = [self.target.decode(self.target.convert_tokens_to_ids(r.hypotheses[0]), skip_special_tokens=True)
             for r in results]
    return texts, [r.scores[0] for r in results]


ENGINES = {"attnjax": (_Attnjax, {}), "attnjax-one-device": (_Attnjax, {"cores": False}),
           "transformers": (_Transformers, {}),
           "ctranslate2": (_CTranslate2, {"compute_type": "float32"}),
           "ctranslate2-int8": (_CTranslate2, {"compute_type": "int8"})}


def worker(job_file: str, engine: str) -> None:
  """A process of one engine: reads ``run`` lines on stdin, decodes every batch, answers one JSON line each."""
  with open(job_file, encoding="utf-8") as f:
    job = json.load(f)
  cls, extra = ENGINES[engine]
  decode = cls({**job, **extra})
  print(json.dumps({"ready": True}), flush=True)
  for line in sys.stdin:
    if line.strip() != "run":
      break
    texts, scores = [], []
    start = time.perf_counter()
    for batch in job["batches"]:
      t, s = decode(batch)
      texts += t
      scores += s
    seconds = time.perf_counter() - start
    print(json.dumps({"seconds": seconds, "texts": texts, "scores": scores}), flush=True)


# ------------------------------------------------------------------------------------------------------------ driver


def _difference(name, reference, other) -> str:
  """Identical, or the count of differing outputs and the first of them with both engines' scores."""
  differ = [i for i, (a, b) in enumerate(zip(reference["texts"], other["texts"])) if a != b]
  if not differ:
    return f"identical ({len(reference['texts'])})"
  i = differ[0]
  return (f"{len(differ)} of {len(reference['texts'])} differ; first: attnjax {reference['texts'][i]!r} "
          f"(log p {reference['scores'][i]:.4f}), {name} {other['texts'][i]!r} (log p {other['scores'][i]:.4f})")


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
  parser.add_argument("--workdir", required=True)
  parser.add_argument("--checkpoint", default="best")
  parser.add_argument("--split", default="test")
  parser.add_argument("--limit", type=int, default=None, help="only the first N sources")
  parser.add_argument("--batches", default="1,64", help="batch sizes (1: latency)")
  parser.add_argument("--beams", default="1,4", help="beam sizes (1: greedy)")
  parser.add_argument("--max_len", type=int, default=64, help="output tokens at most")
  parser.add_argument("--reps", type=int, default=3)
  parser.add_argument("--latency_limit", type=int, default=128, help="sources decoded at batch 1")
  parser.add_argument("--engines", default="attnjax,transformers,ctranslate2,ctranslate2-int8")
  parser.add_argument("--work", default=None, help="directory for the exports (default: a temporary one)")
  parser.add_argument("--worker", default=None, help=argparse.SUPPRESS)
  parser.add_argument("--job", default=None, help=argparse.SUPPRESS)
  args = parser.parse_args()
  if args.worker:
    worker(args.job, args.worker)
    return

  from attnjax import config as config_lib, export, families, serving  # pylint: disable=g-import-not-at-top
  from attnjax.data import tasks  # pylint: disable=g-import-not-at-top
  from benchmarks.common import machine_description, markdown_table  # pylint: disable=g-import-not-at-top
  work = args.work or tempfile.mkdtemp(prefix="peers.")
  hf_dir, ct2_dir = os.path.join(work, "hf"), os.path.join(work, "ct2")
  summary = export.export_workdir(args.workdir, hf_dir, checkpoint=args.checkpoint)
  engines = args.engines.split(",")
  if any(e.startswith("ctranslate2") for e in engines):
    convert_ctranslate2(hf_dir, ct2_dir)
  config = config_lib.load_config(args.workdir)
  tasks.resolve_data_dir(config.data, args.workdir)
  sources = [source for source, _ in families.load_split(config.data, args.split)][:args.limit]
  vocabularies = serving.load(args.workdir, checkpoint=args.checkpoint).loaded.vocabularies
  sources = [s for s in sources if vocabularies.src.encode(s)]  # an empty source is no work for any engine
  sources.sort(key=lambda s: -len(vocabularies.src.encode(s)))  # longest first, the order attnjax batches in
  rows = []
  for beam in [int(b) for b in args.beams.split(",")]:
    for batch_size in [int(b) for b in args.batches.split(",")]:
      texts = sources[:args.latency_limit] if batch_size == 1 else sources
      job = dict(workdir=args.workdir, checkpoint=args.checkpoint, hf_dir=hf_dir, ct2_dir=ct2_dir, beam=beam,
                 max_len=args.max_len, batches=[texts[i:i + batch_size] for i in range(0, len(texts), batch_size)])
      job_file = os.path.join(work, f"job.b{beam}.n{batch_size}.json")
      with open(job_file, "w", encoding="utf-8") as f:
        json.dump(job, f)
      procs = {}
      for engine in engines:
        procs[engine] = subprocess.Popen(
            [sys.executable, "-m", "benchmarks.peers", "--workdir", args.workdir, "--worker", engine,
             "--job", job_file], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
            env=dict(os.environ, JAX_PLATFORMS=os.environ.get("JAX_PLATFORMS", "cpu")))
        assert json.loads(procs[engine].stdout.readline())["ready"], engine

      def ask(engine):
        procs[engine].stdin.write("run\n")
        procs[engine].stdin.flush()
        line = procs[engine].stdout.readline()
        if not line:
          raise RuntimeError(f"the {engine} worker ended (beam {beam}, batch {batch_size})")
        return json.loads(line)

      first = {engine: ask(engine) for engine in engines}  # untimed: compilation, caches
      seconds = {engine: [] for engine in engines}
      for _ in range(args.reps):
        for engine in engines:
          seconds[engine].append(ask(engine)["seconds"])
      for p in procs.values():
        p.stdin.close()
        p.wait()
      base = statistics.median(seconds[engines[0]])
      for engine in engines:
        median = statistics.median(seconds[engine])
        out_tokens = sum(len(vocabularies.tgt.encode(t)) + 1 for t in first[engine]["texts"])  # and EOS
        rows.append(["greedy" if beam == 1 else f"beam {beam}", batch_size, engine, len(texts), f"{median:.2f}",
                     f"{len(texts) / median:.1f}", f"{out_tokens / median:.0f}", f"{base / median:.2f}",
                     "—" if engine == engines[0] else _difference(engine, first[engines[0]], first[engine])])
      print(markdown_table(["search", "batch", "engine", "sentences", "seconds", "sentences/s", "output tokens/s",
                            f"speed vs {engines[0]}", "outputs"], rows[-len(engines):]), flush=True)
  print()
  print(f"{summary['architecture']} from {args.workdir} (step {summary['step']}), split {args.split}, at most "
        f"{args.max_len} output tokens; {machine_description()}; medians of {args.reps} interleaved passes")
  print(markdown_table(["search", "batch", "engine", "sentences", "seconds", "sentences/s", "output tokens/s",
                        f"speed vs {engines[0]}", "outputs"], rows))


if __name__ == "__main__":
  main()
