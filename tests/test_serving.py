"""A trained model loaded once (attnjax.load / serving.Translator): per-call decoding options against the searches
run directly on the model, sampling for sequence-to-sequence models against the model's own distribution, and the
streaming command line (a line answered before stdin closes; bad input named, never a lost line or a hang)."""

import os
import select
import subprocess
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import attnjax
from attnjax import decoding, serving
from attnjax.models.interface import BOS_ID, EOS_ID, PAD_ID
from attnjax.training.loop import train_and_evaluate
from tests.training.run_steps import tiny_config

pytestmark = pytest.mark.xdist_group("tests/test_serving.py")

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SOURCES = ["march 3 , 1999", "12/01/2004", "", "tuesday , july 4th 1776", "5 may 2020"]


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
  """A tiny Transformer trained a few steps on the synthetic dates task: its distributions are far from peaked, so
  samples differ and the frequency test has room."""
  path = str(tmp_path_factory.mktemp("serving"))
  config = tiny_config((1, 1, 1))
  t = config.train
  t.steps, t.log_every, t.eval_every, t.checkpoint_every = 10, 5, 1000, 10
  config.eval.update(dict(num_decode_examples=4, loss_batches=1, batch_size=8, max_len_a=1.0, max_len_b=6))
  train_and_evaluate(config, path)
  return path


@pytest.fixture(scope="module")
def model(workdir):
  return attnjax.load(workdir, checkpoint="latest")


def _direct(model, texts, search, **kwargs):
  """The search run on the model directly, one text at a time: ids → search → text."""
  loaded, vocab = model.loaded, model.loaded.vocabularies
  out = []
  for text in texts:
    ids = vocab.src.encode(text)[:model.max_src_len]
    if not ids:
      out.append("")
      continue
    r = search(loaded.model, {"params": loaded.params}, jnp.asarray([ids], jnp.int32),
               max_len_a=model.config.eval.max_len_a, max_len_b=model.config.eval.max_len_b,
               vocab_size=vocab.tgt.size, **kwargs)
    tokens = np.asarray(r.tokens)[0]
    out.append(vocab.tgt.decode((tokens[0] if tokens.ndim == 2 else tokens).tolist()))
  return out


def test_load_returns_a_translator_and_its_searches_equal_the_searches_run_directly(model):
  assert isinstance(model, serving.Translator)
  beam = model.translate(SOURCES)  # the workdir's own search: beam 4, as evaluation decodes
  assert beam.hypotheses == _direct(model, SOURCES, decoding.beam_search, beam_size=4, alpha=0.6)
  greedy = model.translate(SOURCES, decode="greedy", no_repeat_ngram_size=1, min_len=3)
  assert greedy.hypotheses == _direct(model, SOURCES, decoding.greedy_search, no_repeat_ngram_size=1, min_len=3)
  assert greedy.hypotheses != model.translate(SOURCES, decode="greedy").hypotheses  # the options took effect
  wide = model.translate(SOURCES, beam_size=3, alpha=1.0, n_best=3)
  assert [h for h, _ in wide.nbest[0]] == _direct_nbest(model, SOURCES[0], beam_size=3, alpha=1.0, n_best=3)


def _direct_nbest(model, text, **kwargs):
  loaded, vocab = model.loaded, model.loaded.vocabularies
  r = decoding.beam_search(loaded.model, {"params": loaded.params}, jnp.asarray([vocab.src.encode(text)], jnp.int32),
                           max_len_a=model.config.eval.max_len_a, max_len_b=model.config.eval.max_len_b,
                           vocab_size=vocab.tgt.size, **kwargs)
  return [vocab.tgt.decode(row.tolist()) for row in np.asarray(r.tokens)[0]]


def test_a_search_is_built_once_and_its_programs_kept(model):
  model.translate(SOURCES[:2], decode="greedy")
  search = model.search(decode="greedy")
  decoder = model.decoder(search)
  shapes = list(decoder.traced_shapes)
  model.translate(SOURCES[:2], decode="greedy")
  assert model.decoder(search) is decoder and decoder.traced_shapes == shapes  # nothing traced again
  with pytest.raises(TypeError, match=r"unknown decoding option\(s\) \['beam'\]"):
    model.search(beam=3)
  with pytest.raises(ValueError, match=r"n_best must be in \[1, beam_size=2\], got 3"):
    model.translate(SOURCES, beam_size=2, n_best=3)
  with pytest.raises(ValueError, match="sampling needs temperature > 0"):
    model.translate(SOURCES, temperature=0.0)
  with pytest.raises(TypeError, match="one string"):
    model.translate("march 3")


def test_one_sentence_decodes_as_a_batch_of_one(model):
  search = model.search(decode="greedy")
  model.translate(["5 may 2020"], decode="greedy")
  assert model.decoder(search).traced_shapes[-1][0] == 1  # not the eval.batch_size of 8


def _first_token_distribution(model, text):
  """The model's probabilities of the first generated token for ``text``, over the ids a search may emit."""
  loaded = model.loaded
  variables = {"params": jax.device_get(loaded.params)}
  src = jnp.asarray([loaded.vocabularies.src.encode(text)], jnp.int32)
  memory = loaded.model.apply(variables, src, src != PAD_ID, method=loaded.model.encode)
  cache = loaded.model.apply(variables, memory, 8, method=loaded.model.init_cache)
  out = loaded.model.apply(variables, jnp.asarray([[BOS_ID]], jnp.int32), memory, cache, method=loaded.model.decode)
  logits = np.asarray(out.logits[0, 0], np.float64)
  allowed = np.arange(logits.size) < loaded.vocabularies.tgt.size
  allowed[[PAD_ID, BOS_ID]] = False
  p = np.where(allowed, np.exp(logits - logits[allowed].max()), 0.0)
  return p / p.sum()


def test_sampled_first_tokens_follow_the_models_distribution(model):
  """2,000 samples of one sentence: each token's frequency within 5 standard deviations of its probability (a
  binomial count; 5 sigma: a false alarm about once in 10^6 per token), and a token of probability 0 never drawn."""
  text, n = "march 3 , 1999", 2000
  p = _first_token_distribution(model, text)
  search = model.search(decode="sample", n_best=n, temperature=1.0, max_len_b=1, max_len_a=0.0)
  decoder = model.decoder(search)
  ids = model.loaded.vocabularies.src.encode(text)
  tokens, _, _ = decoder(model.loaded.params, decoder.rows.put(np.asarray([ids], np.int32)), jax.random.PRNGKey(7))
  first = np.asarray(tokens)[0, :, 0]
  # the length limit of 1 allows EOS only (rules.at_limit="eos"): the first token is EOS whatever the model says
  assert np.all(first == EOS_ID)
  search = model.search(decode="sample", n_best=n, temperature=1.0, max_len_b=6)
  decoder = model.decoder(search)
  tokens, _, _ = decoder(model.loaded.params, decoder.rows.put(np.asarray([ids], np.int32)), jax.random.PRNGKey(7))
  counts = np.bincount(np.asarray(tokens)[0, :, 0], minlength=p.size)
  assert counts[p == 0].sum() == 0
  sigma = np.sqrt(n * p * (1 - p))
  assert np.all(np.abs(counts - n * p) <= 5 * sigma + 1), np.max(np.abs(counts - n * p) / (sigma + 1e-9))
  assert np.count_nonzero(counts) > 3  # not a point mass: the test can tell sampling from greedy


def test_top_k_one_and_a_tiny_temperature_are_greedy(model):
  greedy = model.translate(SOURCES, decode="greedy").hypotheses
  assert model.translate(SOURCES, top_k=1).hypotheses == greedy
  assert model.translate(SOURCES, temperature=1e-4).hypotheses == greedy


def test_a_sentences_samples_depend_on_the_seed_and_the_sentence_only(model):
  alone = model.translate(["5 may 2020"], temperature=1.0, n_best=3, seed=1).nbest[0]
  batched = model.translate(SOURCES + ["5 may 2020"], temperature=1.0, n_best=3, seed=1)
  assert batched.nbest[-1] == batched.nbest[SOURCES.index("5 may 2020")]
  assert [h for h, _ in batched.nbest[-1]] == [h for h, _ in alone]
  for (_, a), (_, b) in zip(batched.nbest[-1], alone):
    assert abs(a - b) <= 1e-4 * max(1.0, abs(a))  # the same tokens; the batch's padding may round the scores
  other = model.translate(["5 may 2020"], temperature=1.0, n_best=3, seed=2).nbest[0]
  assert other != alone
  assert len({h for h, _ in alone} | {h for h, _ in other}) > 1


def _spawn(workdir, *flags):
  env = dict(os.environ, JAX_PLATFORMS="cpu")
  return subprocess.Popen([sys.executable, "-m", "attnjax.translate", f"--workdir={workdir}", "--checkpoint=latest",
                           *flags], cwd=ROOT, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE)


def _readline(proc, timeout=240.0) -> bytes:
  """One line of the process's stdout, waiting at most ``timeout`` seconds (its start-up and compilation)."""
  deadline = time.monotonic() + timeout
  while time.monotonic() < deadline:
    ready, _, _ = select.select([proc.stdout], [], [], 1.0)
    if ready:
      return proc.stdout.readline()
    if proc.poll() is not None:
      break
  proc.kill()
  raise AssertionError(f"no line within {timeout} s; stderr: {proc.stderr.read().decode()[-2000:]}")


def test_the_command_line_answers_a_line_before_stdin_closes(model, workdir):
  expected = model.translate(["march 3 , 1999", "5 may 2020"]).hypotheses
  proc = _spawn(workdir)
  proc.stdin.write(b"march 3 , 1999\n")
  proc.stdin.flush()
  assert _readline(proc).decode().rstrip("\n") == expected[0]  # stdin still open
  proc.stdin.write(b"5 may 2020\n")
  proc.stdin.flush()
  assert _readline(proc).decode().rstrip("\n") == expected[1]
  proc.stdin.close()
  assert proc.wait(timeout=60) == 0 and proc.stdout.read() == b""


def test_bad_input_is_named_and_every_line_answered(model, workdir):
  long_line = " ".join(["12/01/2004"] * 9100)  # 100,000 characters
  assert len(long_line) >= 100_000
  lines = [b"march 3 , 1999", b"", b"5 may \xff\xfe 2020", long_line.encode(), b"tuesday\r"]
  proc = _spawn(workdir, "--decode=greedy")
  out, err = proc.communicate(b"\n".join(lines) + b"\n", timeout=300)
  assert proc.returncode == 0, err.decode()[-2000:]
  got = out.decode("utf-8").split("\n")
  assert got[-1] == "" and len(got) - 1 == len(lines)  # one line each, nothing lost
  expected = model.translate(["march 3 , 1999", "", "5 may \ufffd\ufffd 2020", long_line, "tuesday"],
                             decode="greedy")
  assert got[:-1] == expected.hypotheses and got[1] == ""
  err = err.decode()
  assert "line 3 is not valid UTF-8 (byte 0xff at 6)" in err
  assert "1 of lines 1-5 were longer than the model's data.max_src_len" in err or \
      "were longer than the model's data.max_src_len" in err
  assert expected.truncated_sources == 1


def test_a_closed_output_ends_the_program_with_one_line(workdir):
  proc = _spawn(workdir, "--decode=greedy")
  proc.stdin.write(b"march 3 , 1999\n")
  proc.stdin.flush()
  _readline(proc)
  proc.stdout.close()  # the reader goes away
  proc.stdin.write(b"5 may 2020\n")
  proc.stdin.flush()
  assert proc.wait(timeout=120) == 1
  err = proc.stderr.read().decode()
  assert "the output was closed after" in err and "Traceback" not in err


def test_sampling_flags_print_n_samples_a_line(model, workdir):
  proc = _spawn(workdir, "--temperature=1.0", "--n_best=3", "--seed=4")
  out, err = proc.communicate(b"5 may 2020\n\nmarch 3 , 1999\n", timeout=300)
  assert proc.returncode == 0, err.decode()[-2000:]
  rows = [line.split("\t") for line in out.decode().split("\n")[:-1]]
  assert [int(r[0]) for r in rows] == [0, 0, 0, 1, 1, 1, 2, 2, 2]
  expected = model.translate(["5 may 2020", "", "march 3 , 1999"], temperature=1.0, n_best=3, seed=4)
  assert [r[2] for r in rows] == [h for hypotheses in expected.nbest for h, _ in hypotheses]


_WITHOUT_ATTNJAX = """
import runpy, sys
sys.modules["attnjax"] = None  # any import of attnjax fails: the program runs on JAX, NumPy, sentencepiece
sys.argv = ["run_program.py", sys.argv[1]]
runpy.run_path(sys.argv[1] + "/run_program.py", run_name="__main__")
"""


@pytest.mark.parametrize("decode", ["beam", "greedy"])
def test_an_exported_program_decodes_as_attnjax_without_attnjax(model, workdir, tmp_path, decode):
  from attnjax import export_program  # pylint: disable=g-import-not-at-top
  out = str(tmp_path / "program")
  options = dict(decode=decode, beam_size=3, n_best=2) if decode == "beam" else dict(decode=decode)
  export_program.export_program(workdir, out, checkpoint="latest", **options)
  texts = SOURCES + ["9" * (model.max_src_len + 5)]  # the last one is truncated
  proc = subprocess.run([sys.executable, "-c", _WITHOUT_ATTNJAX, out], input="\n".join(texts) + "\n",
                        capture_output=True, text=True, timeout=600, cwd=str(tmp_path), check=False)
  assert proc.returncode == 0, proc.stderr[-2000:]
  assert "1 of 6 sources are longer than the model's max_src_len" in proc.stderr
  expected = model.translate(texts, **options)
  assert proc.stdout.split("\n")[:-1] == expected.hypotheses

  sys.path.insert(0, out)
  try:
    import run_program  # pylint: disable=g-import-not-at-top,import-outside-toplevel
    nbest = run_program.Program(out).translate(texts, n_best=True)
  finally:
    sys.path.remove(out)
    sys.modules.pop("run_program", None)
  assert [[h for h, _ in row] for row in nbest] == [[h for h, _ in row] for row in expected.nbest]
  # scores: the same float32 program, lowered once with a symbolic batch and once for each batch size
  np.testing.assert_allclose([[s for _, s in row] for row in nbest], [[s for _, s in row] for row in expected.nbest],
                             rtol=1e-5, atol=1e-5)


def test_export_refuses_sampling_and_names_it(workdir, tmp_path):
  from attnjax import export_program  # pylint: disable=g-import-not-at-top
  with pytest.raises(ValueError, match="decode='sample'"):
    export_program.export_program(workdir, str(tmp_path / "p"), checkpoint="latest", decode="sample")
