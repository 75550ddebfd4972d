"""Start-up of a WMT14 en-de sized seq2seq task: tokenizing every pair with sentencepiece vs reading the token cache.

    python -m benchmarks.startup                          # 4.5M pairs, as WMT14 en-de's training split
    python -m benchmarks.startup --pairs=20000            # smoke check, a few seconds
    python -m benchmarks.startup --threads=8 --workdir=gs://bucket/tmp/startup

The corpus is synthetic but shaped like the real one: two "languages" with their own Zipf-distributed lexicons of
50k words (English-like letter frequencies; German with umlauts and longer words), ~25 words per sentence
(log-normal lengths, target lengths correlated with the source's), a fixed seed. A joint sentencepiece unigram model
of ``--vocab_size`` pieces is trained on the first ``--train_sentences`` texts, at most a tenth of the corpus's
(interleaved source / target, as :func:`attnjax.data.tokenizer.load_or_train_pair` does; the cap keeps the 20000-pair
smoke run's training to about a second). Then, timed once each (each is a start-up, not a loop):

  (a0) the per-text loop ``TaskData.encoded`` runs today (ids counted, not kept: keeping ~270M ids as Python lists
       would need ~10 GB at full size, so this is a lower bound on that path's time);
  (a)  :func:`attnjax.data.token_cache.encode_pairs`: sentencepiece batch encoding on ``--threads`` threads, i.e. a
       cache miss;
  (b)  writing the cache file (:func:`attnjax.data.token_cache.save` through :func:`attnjax.fs.save_npz`);
  (c)  :func:`attnjax.data.token_cache.load_or_encode` hitting that file, i.e. a restart or another host;
  (d)  building a :class:`~attnjax.data.pipeline.Seq2SeqBatcher` from the cached ``TokenizedSplit``: the part of
       start-up that remains once tokenizing is cached. A batcher that only iterates its input re-flattens every id
       in Python here; one that takes the flat arrays as they are does not.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time

import numpy as np

from attnjax import fs
from attnjax.data import token_cache
from attnjax.data.pipeline import Seq2SeqBatcher
from attnjax.data.tokenizer import train_sentencepiece
from benchmarks.common import machine_description, markdown_table

WMT14_EN_DE_TRAIN_PAIRS = 4_508_785  # tfds wmt14_translate/de-en, train
LEXICON_SIZE = 50_000
# Rough English letter frequencies (per mille); German gets umlauts and ß on top.
_LETTERS_EN = dict(zip("etaoinshrdlcumwfgypbvkjxqz",
                       [127, 91, 82, 75, 70, 67, 63, 61, 60, 43, 40, 28, 28, 24, 24, 22, 20, 20, 19, 15, 10, 8, 2,
                        2, 1, 1]))
_LETTERS_DE = {**dict(zip("enisratdhulcgmobwfkzpvjyxq",
                          [164, 98, 76, 73, 70, 65, 62, 51, 48, 44, 34, 31, 30, 25, 25, 19, 19, 17, 14, 11, 8, 7, 3,
                           1, 1, 1])), "ä": 5, "ö": 3, "ü": 7, "ß": 3}


def _lexicon(rng: np.random.Generator, letters: dict, mean_length: float) -> tuple[np.ndarray, np.ndarray,
                                                                                   np.ndarray]:
  """A lexicon as UTF-8 bytes ``[total]`` (each word followed by a space), offsets and lengths in bytes.

  Ranks 0 and 1 (the most frequent) are "," and ".", as in tokenized news text.
  """
  alphabet = np.array(list(letters))
  p = np.array(list(letters.values()), float)
  lengths = np.clip(rng.poisson(mean_length - 1, LEXICON_SIZE - 2) + 1, 1, 24)
  chars = alphabet[rng.choice(len(alphabet), size=int(lengths.sum()), p=p / p.sum())]
  bounds = np.concatenate([[0], np.cumsum(lengths)]).tolist()
  words = [",", "."] + ["".join(chars[a:b]) for a, b in zip(bounds[:-1], bounds[1:])]
  encoded = [w.encode("utf-8") + b" " for w in words]
  data = np.frombuffer(b"".join(encoded), np.uint8)
  sizes = np.array([len(e) for e in encoded], np.int64)
  return data, np.concatenate([[0], np.cumsum(sizes)[:-1]]), sizes


def _sentences(rng: np.random.Generator, lexicon, cdf: np.ndarray, lengths: np.ndarray) -> list[str]:
  """Sentences of ``lengths`` Zipf-drawn words, built as one byte buffer per call (no Python loop over words)."""
  data, offsets, sizes = lexicon
  words = np.searchsorted(cdf, rng.random(int(lengths.sum())), side="right")
  word_bytes = sizes[words]
  starts = np.cumsum(word_bytes) - word_bytes  # where each word goes in the output buffer
  # output byte k of word w comes from data[offsets[w] + (k - starts[w])]
  gather = np.repeat(offsets[words] - starts, word_bytes) + np.arange(int(word_bytes.sum()))
  buffer = data[gather]
  sentence_end = np.cumsum(np.add.reduceat(word_bytes, np.concatenate([[0], np.cumsum(lengths)[:-1]])))
  buffer[sentence_end - 1] = ord("\n")  # each sentence's trailing space ends the line instead
  return buffer.tobytes().decode("utf-8").split("\n")[:-1]


def synthetic_corpus(num_pairs: int, seed: int = 0, chunk: int = 50_000) -> list[tuple[str, str]]:
  """``num_pairs`` (English-like, German-like) sentence pairs; deterministic for a seed (and chunk)."""
  rng = np.random.default_rng(seed)
  lexicons = _lexicon(rng, _LETTERS_EN, 5.0), _lexicon(rng, _LETTERS_DE, 6.0)
  ranks = np.arange(LEXICON_SIZE, dtype=float)
  cdf = np.cumsum(1.0 / (ranks + 2.7) ** 1.05)  # Zipf-Mandelbrot
  cdf /= cdf[-1]
  pairs = []
  for start in range(0, num_pairs, chunk):
    n = min(chunk, num_pairs - start)
    src_len = np.clip(np.rint(rng.lognormal(np.log(22.0), 0.55, n)), 1, 150).astype(np.int64)  # mean ~25.5
    tgt_len = np.clip(np.rint(src_len * rng.lognormal(-0.05, 0.2, n)), 1, 150).astype(np.int64)
    pairs.extend(zip(_sentences(rng, lexicons[0], cdf, src_len), _sentences(rng, lexicons[1], cdf, tgt_len)))
  return pairs


def _timed(fn):
  start = time.perf_counter()
  result = fn()
  return result, time.perf_counter() - start


def _legacy_encode(vocab, pairs) -> int:
  """What ``TaskData.encoded`` does per pair, counting the ids instead of keeping them."""
  total = 0
  for s, t in pairs:
    total += len(vocab.encode(s)) + len(vocab.encode(t))
  return total


def main():
  parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
  parser.add_argument("--pairs", type=int, default=4_500_000)
  parser.add_argument("--threads", type=int, default=None, help="sentencepiece threads (default: all usable cores)")
  parser.add_argument("--vocab_size", type=int, default=8000)
  parser.add_argument("--train_sentences", type=int, default=200_000)
  parser.add_argument("--seed", type=int, default=0)
  parser.add_argument("--workdir", default=None, help="where the cache file goes (default: a temporary directory)")
  parser.add_argument("--skip_legacy", action="store_true", help="skip (a0), the single-threaded per-text loop")
  args = parser.parse_args()
  threads = args.threads or token_cache._default_threads()  # pylint: disable=protected-access

  print(f"# start-up: {args.pairs} synthetic pairs (WMT14 en-de train: {WMT14_EN_DE_TRAIN_PAIRS}), sentencepiece "
        f"unigram {args.vocab_size} pieces, {threads} threads\n# {machine_description()}", flush=True)
  pairs, t_corpus = _timed(lambda: synthetic_corpus(args.pairs, args.seed))
  words = sum(len(s.split()) + len(t.split()) for s, t in pairs[:10_000]) / min(len(pairs), 10_000) / 2
  print(f"corpus: {len(pairs)} pairs, {words:.1f} words per side, generated in {t_corpus:.1f} s", flush=True)
  train_texts = min(args.train_sentences, 2 * len(pairs) // 10)
  vocab, t_train = _timed(lambda: train_sentencepiece((text for pair in pairs for text in pair), None,
                                                      args.vocab_size, max_sentences=train_texts, num_threads=threads))
  print(f"sentencepiece: trained on {train_texts} texts in {t_train:.1f} s", flush=True)

  workdir = args.workdir or tempfile.mkdtemp(prefix="attnjax_startup_")
  try:
    rows = []

    def row(step, seconds, note=""):
      rows.append([step, f"{seconds:.3f}", f"{len(pairs) / seconds:,.0f}", note])
      print(rows[-1], flush=True)

    t_legacy = None
    if not args.skip_legacy:
      legacy_ids, t_legacy = _timed(lambda: _legacy_encode(vocab, pairs))
      row("(a0) per-text vocab.encode loop (today)", t_legacy, "1 thread; ids not kept")
    tokens, t_encode = _timed(lambda: token_cache.encode_pairs(vocab, vocab, pairs, num_threads=threads))
    num_ids = len(tokens.src) + len(tokens.tgt)
    assert t_legacy is None or legacy_ids == num_ids
    row("(a) encode_pairs: cache miss", t_encode, f"{threads} threads; {num_ids:,} ids")

    source_key = f"benchmarks.startup pairs={args.pairs} seed={args.seed}"
    inputs = token_cache.fingerprint_inputs("train", vocab, vocab, source_key)
    path = token_cache.cache_path(workdir, "train", token_cache.fingerprint(inputs))
    _, t_write = _timed(lambda: token_cache.save(path, tokens, inputs))
    size = fs.path(path).stat().length
    row("(b) write the cache", t_write, f"{size / 2**20:.1f} MiB")

    def not_called():
      raise AssertionError("the cache missed")

    cached, t_hit = _timed(lambda: token_cache.load_or_encode(workdir, "train", vocab, vocab, not_called, source_key))
    assert cached == tokens
    row("(c) load_or_encode: cache hit", t_hit)

    _, t_batcher = _timed(lambda: Seq2SeqBatcher(cached, max_tokens=4096, max_src_len=256, max_tgt_len=256,
                                                 bucket_boundaries=(16, 32, 64, 128)))
    row("(d) Seq2SeqBatcher(tokens)", t_batcher, "after a hit: what start-up still does")
    print()
    print(markdown_table(["step", "seconds", "pairs/s", "notes"], rows))
    print()
    print(f"Start-up tokenizing / reading the cache: (a) / (c) = {t_encode / t_hit:.0f}x"
          + ("" if t_legacy is None else f", (a0) / (c) = {t_legacy / t_hit:.0f}x"))
    if not args.pairs == len(pairs) == WMT14_EN_DE_TRAIN_PAIRS:
      scale = WMT14_EN_DE_TRAIN_PAIRS / len(pairs)
      print(f"Linear estimate for WMT14 en-de ({WMT14_EN_DE_TRAIN_PAIRS} pairs): (a) {t_encode * scale:.0f} s, "
            f"(c) {t_hit * scale:.1f} s" + ("" if t_legacy is None else f", (a0) {t_legacy * scale:.0f} s"))
  finally:
    if args.workdir is None:
      shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
  main()
