"""Translation throughput from trained checkpoints: sentences per second decoding a whole test split.

    python -m benchmarks.translation_speed --workdirs=runs/study/multi30k/lstm_bahdanau/single/default,... \
        [--split=test] [--beam_size=4] [--reps=2]

Each workdir's best checkpoint (by its validation metric) is loaded as ``attnjax.evaluate`` loads it, and every source
sentence of ``--split`` is translated with the run's own decoding settings (beam ``--beam_size``, its length penalty
and maximum length), batched by ``eval.batch_size``. A first pass compiles every batch shape and is not timed; then
``--reps`` timed passes, of which the median is reported. The workdirs are interleaved pass by pass, so that the
machine's noise hits them alike. Output: a markdown table of sentences/s and output tokens/s (SentencePiece pieces).
"""

from __future__ import annotations

import argparse
import statistics
import time

import jax

from attnjax import config as config_lib, inference, trained
from attnjax import families
from attnjax.data import tasks
from benchmarks.common import machine_description, markdown_table


def _translator(workdir: str, split: str, beam_size: int, limit: int | None = None):
  config = config_lib.load_config(workdir)
  tasks.resolve_data_dir(config.data, workdir)
  examples = families.load_split(config.data, split)[:limit]
  loaded = trained.load_workdir(workdir, checkpoint="best", config=config)
  with config.eval.unlocked():
    config.eval.beam_size, config.eval.decode = beam_size, "beam"
  decoder = inference.decoder_for(loaded.model, loaded.mesh, config.eval, vocab_size=loaded.vocabularies.tgt.size)
  sources = [source for source, _ in examples]

  def run():
    out = inference.translate_texts(decoder, loaded.params, loaded.vocabularies.src, loaded.vocabularies.tgt, sources,
                                    max_src_len=config.data.max_src_len, batch_size=config.eval.batch_size)
    return sum(len(loaded.vocabularies.tgt.encode(h)) for h in out.hypotheses)
  label = f"{config.model.name}" + (f" + {config.model.attention}" if config.model.get("attention") else "")
  return label, len(sources), loaded.step, run


def main():
  parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
  parser.add_argument("--workdirs", required=True, help="comma-separated training workdirs")
  parser.add_argument("--split", default="test")
  parser.add_argument("--beam_size", type=int, default=4)
  parser.add_argument("--reps", type=int, default=2)
  parser.add_argument("--limit", type=int, default=None, help="only the first N sentences (a smoke test)")
  args = parser.parse_args()
  runs = {}
  for workdir in args.workdirs.split(","):
    label, count, step, run = _translator(workdir, args.split, args.beam_size, args.limit)
    tokens = run()  # compiles every batch shape
    runs[workdir] = (label, count, step, run, tokens, [])
  for _ in range(args.reps):
    for workdir, (_, _, _, run, _, seconds) in runs.items():
      start = time.perf_counter()
      run()
      seconds.append(time.perf_counter() - start)
  print(f"# translating {args.split} with beam {args.beam_size}, {jax.device_count()} device(s), median of "
        f"{args.reps} passes after a compiling pass\n# {machine_description()}")
  rows = []
  for workdir, (label, count, step, _, tokens, seconds) in runs.items():
    median = statistics.median(seconds)
    rows.append([label, workdir, str(step), str(count), f"{median:.1f}", f"{count / median:.1f}",
                 f"{tokens / median:.0f}"])
  print(markdown_table(["model", "workdir", "step", "sentences", "seconds", "sentences/s", "output pieces/s"], rows))


if __name__ == "__main__":
  main()
