"""SpanQA (BERT-style Transformer and BiDAF-style BiLSTM readers): outputs, padding, span decoding, loss, training."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from attnjax.models.interface import PAD_ID
from attnjax.families.span_qa import span_loss_stats
from attnjax.models.span_qa import MASKED_LOGIT, SpanQA, best_span, span_loss, span_nll

V, B, Q, C = 13, 3, 4, 7
Q_LENGTHS, C_LENGTHS = (4, 1, 0), (7, 5, 2)  # incl. an empty question: C2Q over no keys
CONFIGS = [dict(encoder="transformer", positional="sinusoidal"), dict(encoder="transformer", positional="learned"),
           dict(encoder="transformer", positional="relative"), dict(encoder="bilstm")]


def _id(config):
  return "-".join(str(v) for v in config.values()) if isinstance(config, dict) else None


def _model(**overrides):
  kwargs = dict(vocab_size=V, d_model=8, num_layers=2, num_heads=2, d_ff=16, dropout_rate=0.1, max_length=32,
                max_answer_length=4)
  return SpanQA(**{**kwargs, **overrides})


def _ids(rng, lengths, length):
  """Ids in [3, V) with PAD_ID after each row's length."""
  ids = rng.integers(3, V, size=(len(lengths), length))
  ids[np.arange(length)[None, :] >= np.asarray(lengths)[:, None]] = PAD_ID
  return jnp.asarray(ids, jnp.int32)


@functools.lru_cache(maxsize=None)
def _setup(items):
  """(model, variables, question, context) for a config given as sorted items, initialised once per config."""
  model = _model(**dict(items))
  rng = np.random.default_rng(0)
  question, context = _ids(rng, Q_LENGTHS, Q), _ids(rng, C_LENGTHS, C)
  variables = model.init({"params": jax.random.PRNGKey(0), "dropout": jax.random.PRNGKey(1)}, question, context)
  return model, variables, question, context


def setup_for(config):
  return _setup(tuple(sorted(config.items())))


def _close(a, b, atol=1e-5):
  np.testing.assert_allclose(np.asarray(a), np.asarray(b), atol=atol, rtol=1e-5)


# -------------------------------------------------------------------------------------------------- the model


@pytest.mark.parametrize("config", CONFIGS, ids=_id)
def test_output_shapes_and_masked_context_positions(config):
  model, variables, question, context = setup_for(config)
  out = model.apply(variables, question, context)
  per_pointer = {"no_answer_start_logit", "no_answer_end_logit"} if config["encoder"] != "bilstm" else set()
  assert set(out) == {"start_logits", "end_logits", "no_answer_logit", "context_mask"} | per_pointer
  if per_pointer:  # the null span's score is its start plus its end at [CLS]
    _close(out["no_answer_start_logit"] + out["no_answer_end_logit"], out["no_answer_logit"])
  real = np.arange(C)[None, :] < np.asarray(C_LENGTHS)[:, None]
  np.testing.assert_array_equal(np.asarray(out["context_mask"]), real)
  for key in ("start_logits", "end_logits"):
    logits = np.asarray(out[key])
    assert logits.shape == (B, C) and logits.dtype == np.float32
    assert (logits[~real] == MASKED_LOGIT).all()  # padding gets exactly the large negative logit
    assert np.isfinite(logits).all() and (np.abs(logits[real]) < 1e3).all()
  assert out["no_answer_logit"].shape == (B,) and np.isfinite(np.asarray(out["no_answer_logit"])).all()


def test_without_no_answer_there_is_no_null_logit():
  model = _model(allow_no_answer=False)
  _, _, question, context = setup_for(CONFIGS[0])
  out = model.apply(model.init(jax.random.PRNGKey(0), question, context), question, context)
  assert set(out) == {"start_logits", "end_logits", "context_mask"}
  assert not model.decode_spans(out)[3].any()


@pytest.mark.parametrize("config", CONFIGS, ids=_id)
def test_padding_does_not_change_outputs(config):
  """Appending PAD to the question and to the context leaves every output at the original positions unchanged."""
  model, variables, question, context = setup_for(config)
  out = model.apply(variables, question, context)
  padded = model.apply(variables, jnp.pad(question, ((0, 0), (0, 3))), jnp.pad(context, ((0, 0), (0, 2))))
  assert padded["start_logits"].shape == (B, C + 2)
  for key in ("start_logits", "end_logits"):
    _close(padded[key][:, :C], out[key])
    assert (np.asarray(padded[key][:, C:]) == MASKED_LOGIT).all()
  _close(padded["no_answer_logit"], out["no_answer_logit"])


@pytest.mark.parametrize("config", CONFIGS, ids=_id)
def test_explicit_masks_hide_the_ids_under_them(config):
  """With explicit masks, whatever ids sit at masked positions (here real-looking ones) do not matter."""
  model, variables, question, context = setup_for(config)
  out = model.apply(variables, question, context)
  rng = np.random.default_rng(5)
  noisy_q = jnp.where(question == PAD_ID, jnp.asarray(rng.integers(3, V, question.shape)), question)
  noisy_c = jnp.where(context == PAD_ID, jnp.asarray(rng.integers(3, V, context.shape)), context)
  masked = model.apply(variables, noisy_q, noisy_c, question != PAD_ID, context != PAD_ID)
  for key in ("start_logits", "end_logits", "no_answer_logit"):
    _close(masked[key], out[key])


def test_dropout_changes_real_positions_only():
  model, variables, question, context = setup_for(CONFIGS[1])
  out = model.apply(variables, question, context)
  noisy = model.apply(variables, question, context, deterministic=False, rngs={"dropout": jax.random.PRNGKey(3)})
  real = np.asarray(out["context_mask"])
  assert np.abs(np.asarray(noisy["start_logits"] - out["start_logits"]))[real].max() > 1e-4
  assert (np.asarray(noisy["start_logits"])[~real] == MASKED_LOGIT).all()
  assert np.isfinite(np.asarray(noisy["no_answer_logit"])).all()


@pytest.mark.parametrize("encoder", ["transformer", "bert", "bilstm"])
def test_bfloat16_compute_keeps_float32_parameters_and_logits_and_stays_close_to_float32(encoder):
  """``dtype=bfloat16`` changes the arithmetic only: the same parameters (float32, initialised identically), float32
  logits, and every output within bfloat16's rounding of the float32 reader's on the same weights."""
  extra = dict(cls_id=1, sep_id=2) if encoder == "bert" else {}
  _, _, question, context = setup_for(CONFIGS[0])
  f32, bf16 = _model(encoder=encoder, **extra), _model(encoder=encoder, dtype=jnp.bfloat16, **extra)
  params = f32.init(jax.random.PRNGKey(0), question, context)["params"]
  bf16_params = bf16.init(jax.random.PRNGKey(0), question, context)["params"]
  assert all(x.dtype == jnp.float32 for x in jax.tree_util.tree_leaves(bf16_params))
  jax.tree_util.tree_map(np.testing.assert_array_equal, bf16_params, params)
  want, got = f32.apply({"params": params}, question, context), bf16.apply({"params": params}, question, context)
  real = np.asarray(want["context_mask"])
  for key in ("start_logits", "end_logits", "no_answer_logit"):
    assert got[key].dtype == jnp.float32, key
    a, b = np.asarray(got[key]), np.asarray(want[key])
    a, b = (a[real], b[real]) if a.ndim == 2 else (a, b)
    scale = np.abs(b).max()
    np.testing.assert_allclose(a, b, atol=0.03 * scale, err_msg=key)  # bfloat16 keeps 8 bits: ~0.4% a rounding
  # the arithmetic did change (the BiLSTM's no-answer score starts at exactly 0 either way: a zero kernel and bias)
  assert np.abs(np.asarray(got["start_logits"] - want["start_logits"]))[real].max() > 0


@pytest.mark.parametrize("encoder", ["transformer", "bert"])
def test_the_verifier_reads_cls_and_adds_its_logit_to_the_null_score(encoder):
  """v is a dense layer on the same h_CLS as start[CLS] and end[CLS]: given the start column of ``qa_outputs`` as its
  weights it equals start[CLS] (then end[CLS] for the end column), and the null score is start + end + v. The span
  logits and the null span's terms are those of the reader without a verifier on the same weights."""
  extra = dict(cls_id=1, sep_id=2) if encoder == "bert" else {}
  plain = _model(encoder=encoder, **extra)
  model = _model(encoder=encoder, no_answer_verifier=True, **extra)
  _, _, question, context = setup_for(CONFIGS[0])
  params = model.init(jax.random.PRNGKey(0), question, context)["params"]
  assert set(params) - set(plain.init(jax.random.PRNGKey(0), question, context)["params"]) == {"no_answer_verifier"}
  without = {k: v for k, v in params.items() if k != "no_answer_verifier"}
  reference = plain.apply({"params": without}, question, context)
  head = params["qa_outputs"]
  for column, term in ((0, "no_answer_start_logit"), (1, "no_answer_end_logit")):
    verifier = {"kernel": head["kernel"][:, column:column + 1], "bias": head["bias"][column:column + 1]}
    out = model.apply({"params": {**params, "no_answer_verifier": verifier}}, question, context)
    for key in ("start_logits", "end_logits", "no_answer_start_logit", "no_answer_end_logit"):
      _close(out[key], reference[key])
    _close(out["no_answer_verifier_logit"], reference[term])
    _close(out["no_answer_logit"], reference["no_answer_logit"] + reference[term])


@pytest.mark.parametrize("overrides", [dict(encoder="bilstm"), dict(allow_no_answer=False)])
def test_the_verifier_needs_a_cls_null_span(overrides):
  with pytest.raises(ValueError, match="no_answer_verifier"):
    _model(no_answer_verifier=True, **overrides)


def test_learned_positions_must_cover_the_packed_pair():
  model = _model(positional="learned", max_length=Q + C + 1)  # one short of [CLS] q [SEP] c
  _, _, question, context = setup_for(CONFIGS[0])
  with pytest.raises(ValueError, match="max_length"):
    model.init(jax.random.PRNGKey(0), question, context)


@pytest.mark.parametrize("field, value", [
    ("vocab_size", 0), ("encoder", "gru"), ("d_model", 0), ("num_layers", 0), ("num_heads", -1), ("d_ff", 0),
    ("dropout_rate", 1.0), ("max_length", 0), ("positional", "rotary"), ("allow_no_answer", "yes"),
    ("max_answer_length", 0), ("num_heads", 3), ("d_model", 7)])
def test_bad_config_raises_naming_the_field(field, value):
  encoder = "bilstm" if (field, value) == ("d_model", 7) else "transformer"  # odd width: D/2 units per direction
  kwargs = {"encoder": encoder, field: value}
  with pytest.raises(ValueError, match=field):
    _model(**kwargs)


# ------------------------------------------------------------------------------------------------ best_span


def _random_logits(rng, batch, length):
  start = rng.normal(size=(batch, length)).astype(np.float32) * 3
  end = rng.normal(size=(batch, length)).astype(np.float32) * 3
  lengths = rng.integers(0, length + 1, size=batch)
  lengths[:2] = (length, 0)  # a full row and an empty one
  mask = np.arange(length)[None, :] < lengths[:, None]
  mask[2] = rng.random(length) < 0.6  # and one row with holes
  return start, end, mask


def _brute_force_best_span(start, end, mask, max_answer_length, null):
  out = []
  for b in range(start.shape[0]):
    best, best_s, best_e = -np.inf, 0, 0
    for s in range(start.shape[1]):
      for e in range(s, min(start.shape[1], s + max_answer_length)):
        score = start[b, s] + end[b, e]  # float32 + float32, as in the model
        if mask[b, s] and mask[b, e] and score > best:
          best, best_s, best_e = score, s, e
    is_null = null is not None and null[b] > best
    out.append((best_s, best_e, null[b] if is_null else best, is_null))
  return [np.array(x) for x in zip(*out)]


@pytest.mark.parametrize("max_answer_length", [1, 3, 50])
@pytest.mark.parametrize("with_null", [False, True])
def test_best_span_equals_brute_force(max_answer_length, with_null):
  rng = np.random.default_rng(max_answer_length)
  start, end, mask = _random_logits(rng, 12, 9)
  null = (rng.normal(size=12) * 3 + 4).astype(np.float32) if with_null else None  # about half the rows go null
  want = _brute_force_best_span(start, end, mask, max_answer_length, null)
  decode = jax.jit(functools.partial(best_span, max_answer_length=max_answer_length))
  got = decode(jnp.asarray(start), jnp.asarray(end), jnp.asarray(mask),
               no_answer_logit=None if null is None else jnp.asarray(null))
  for g, w in zip(got[:2] + got[3:], want[:2] + want[3:]):
    np.testing.assert_array_equal(np.asarray(g), w)
  np.testing.assert_array_equal(np.asarray(got[2]), want[2].astype(np.float32))
  if with_null:
    assert 0 < want[3].sum() < 12  # both decisions occur
    assert want[3][1]  # the empty row has no span, so the null wins


# ------------------------------------------------------------------------------------------------ span_loss


def _numpy_span_loss(start, end, mask, null, start_positions, end_positions, impossible, null_pointers=None):
  """Per row: log-softmax over the real positions (+ the null class: logit n/2 in both, or with ``null_pointers`` =
  (start[CLS], end[CLS]) each pointer's own, Devlin et al. 2019 §4.3), targets mapped accordingly."""
  total = 0.0
  for b in range(start.shape[0]):
    real = np.flatnonzero(mask[b])
    losses = []
    nulls = (None, None) if null is None else ((null[b] / 2.0,) * 2 if null_pointers is None
                                                else (null_pointers[0][b], null_pointers[1][b]))
    for logits, target, null_class in ((start[b], start_positions[b], nulls[0]), (end[b], end_positions[b], nulls[1])):
      classes = list(logits[real].astype(np.float64)) + ([] if null is None else [float(null_class)])
      index = len(real) if impossible is not None and impossible[b] else int(np.flatnonzero(real == target)[0])
      log_z = np.log(np.sum(np.exp(np.array(classes) - max(classes)))) + max(classes)
      losses.append(log_z - classes[index])
    total += 0.5 * sum(losses)
  return total / start.shape[0]


@pytest.mark.parametrize("with_null, with_impossible", [(True, True), (True, False), (False, False)])
def test_span_loss_equals_numpy(with_null, with_impossible):
  rng = np.random.default_rng(3)
  start, end, mask = _random_logits(rng, 6, 8)
  mask[1] = np.arange(8) < 3  # every row needs a real token for its answer
  impossible = np.array([False, True, False, True, False, False]) if with_impossible else None
  starts, ends = np.zeros(6, int), np.zeros(6, int)
  for b in range(6):
    real = np.flatnonzero(mask[b])
    starts[b], ends[b] = real[0], real[-1]
  null = rng.normal(size=6).astype(np.float32) * 2 if with_null else None
  outputs = {"start_logits": jnp.where(mask, start, MASKED_LOGIT), "end_logits": jnp.where(mask, end, MASKED_LOGIT),
             "context_mask": jnp.asarray(mask)}
  if with_null:
    outputs["no_answer_logit"] = jnp.asarray(null)
  got = span_loss(outputs, jnp.asarray(starts), jnp.asarray(ends),
                  None if impossible is None else jnp.asarray(impossible))
  want = _numpy_span_loss(start, end, mask, null, starts, ends, impossible)
  np.testing.assert_allclose(float(got), want, rtol=1e-5)


def test_span_loss_puts_the_cls_start_and_end_in_their_own_pointer_distributions():
  """The Transformer and BERT readers' null span, as Devlin et al. (2019, §4.3) train it: start[CLS] is one more class
  of the start distribution and end[CLS] of the end one (not their mean in both), also for answerable questions."""
  rng = np.random.default_rng(5)
  start, end, mask = _random_logits(rng, 6, 8)
  mask[1] = np.arange(8) < 3
  impossible = np.array([False, True, False, True, False, True])
  starts = np.array([np.flatnonzero(mask[b])[0] for b in range(6)])
  ends = np.array([np.flatnonzero(mask[b])[-1] for b in range(6)])
  null_start = rng.normal(size=6).astype(np.float32) * 3
  null_end = rng.normal(size=6).astype(np.float32) * 3 - 2  # unequal terms: their mean would give another loss
  outputs = {"start_logits": jnp.where(mask, start, MASKED_LOGIT), "end_logits": jnp.where(mask, end, MASKED_LOGIT),
             "context_mask": jnp.asarray(mask), "no_answer_logit": jnp.asarray(null_start + null_end),
             "no_answer_start_logit": jnp.asarray(null_start), "no_answer_end_logit": jnp.asarray(null_end)}
  for rows in (impossible, None):
    got = span_loss(outputs, jnp.asarray(starts), jnp.asarray(ends), None if rows is None else jnp.asarray(rows))
    want = _numpy_span_loss(start, end, mask, null_start + null_end, starts, ends, rows, (null_start, null_end))
    np.testing.assert_allclose(float(got), want, rtol=1e-5)
    split = _numpy_span_loss(start, end, mask, null_start + null_end, starts, ends, rows)
    assert abs(want - split) > 1e-3  # the test tells the two forms apart


def test_span_loss_adds_the_verifiers_binary_cross_entropy():
  """With the verifier's logit v: the pointers' loss (start[CLS] and end[CLS] alone as the null classes, not n + v)
  plus half of BCE = log(1 + e^v) - y·v (every term of ½ [NLL_start + NLL_end + BCE] weighted alike), y = 1 for an
  impossible question, and every y = 0 without is_impossible."""
  rng = np.random.default_rng(7)
  start, end, mask = _random_logits(rng, 6, 8)
  mask[:, 0], mask[1] = True, np.arange(8) < 3  # every row needs a real token for its answer
  impossible = np.array([False, True, False, True, True, False])
  starts = np.array([np.flatnonzero(mask[b])[0] for b in range(6)])
  ends = np.array([np.flatnonzero(mask[b])[-1] for b in range(6)])
  null_start, null_end = (rng.normal(size=6).astype(np.float32) * 2 for _ in range(2))
  verifier = rng.normal(size=6).astype(np.float32) * 3
  outputs = {"start_logits": jnp.where(mask, start, MASKED_LOGIT), "end_logits": jnp.where(mask, end, MASKED_LOGIT),
             "context_mask": jnp.asarray(mask), "no_answer_logit": jnp.asarray(null_start + null_end + verifier),
             "no_answer_start_logit": jnp.asarray(null_start), "no_answer_end_logit": jnp.asarray(null_end),
             "no_answer_verifier_logit": jnp.asarray(verifier)}
  v = verifier.astype(np.float64)
  for rows in (impossible, None):
    y = np.zeros(6) if rows is None else rows.astype(np.float64)
    bce = np.mean(np.log1p(np.exp(v)) - y * v)
    pointers = _numpy_span_loss(start, end, mask, null_start + null_end, starts, ends, rows, (null_start, null_end))
    got = span_loss(outputs, jnp.asarray(starts), jnp.asarray(ends), None if rows is None else jnp.asarray(rows))
    np.testing.assert_allclose(float(got), pointers + 0.5 * bce, rtol=1e-5)


def test_the_training_step_adds_the_verifier_to_the_loss_but_not_to_the_nll_and_skips_filler_rows():
  """``span_loss_stats``: loss_sum = Σ w (NLL + ½ BCE) and nll_sum = Σ w NLL (the pointers' alone, comparable with a
  reader without a verifier); a filler row (weight 0) changes neither, and the verifier's weights get a gradient."""
  model = _model(encoder="transformer", no_answer_verifier=True)
  _, _, question, context = setup_for(CONFIGS[0])
  params = model.init(jax.random.PRNGKey(0), question, context)["params"]
  batch = {"question": question, "context": context, "question_mask": question != PAD_ID,
           "context_mask": context != PAD_ID, "start_positions": jnp.array([1, 0, 0]),
           "end_positions": jnp.array([2, 3, 1]), "is_impossible": jnp.array([True, False, False]),
           "weights": jnp.array([1.0, 1.0, 0.0])}
  stats = span_loss_stats(model, params, batch, None, True)
  out = model.apply({"params": params}, question, context)
  nll = np.asarray(span_nll(out, batch["start_positions"], batch["end_positions"], batch["is_impossible"]))
  v, y = np.asarray(out["no_answer_verifier_logit"], np.float64), np.array([1.0, 0.0, 0.0])
  bce = np.log1p(np.exp(v)) - y * v
  w = np.array([1.0, 1.0, 0.0])
  np.testing.assert_allclose(float(stats["nll_sum"]), np.sum(w * nll), rtol=1e-5)
  np.testing.assert_allclose(float(stats["loss_sum"]), np.sum(w * (nll + 0.5 * bce)), rtol=1e-5)
  filler = span_loss_stats(model, params, {**batch, "is_impossible": jnp.array([True, False, True])}, None, True)
  np.testing.assert_allclose(float(filler["loss_sum"]), float(stats["loss_sum"]), rtol=1e-6)
  grads = jax.grad(lambda p: span_loss_stats(model, p, batch, None, True)["loss_sum"])(params)
  assert np.abs(np.asarray(grads["no_answer_verifier"]["kernel"])).max() > 0


def test_span_loss_needs_a_null_logit_for_impossible_questions():
  outputs = {"start_logits": jnp.zeros((2, 3)), "end_logits": jnp.zeros((2, 3))}
  with pytest.raises(ValueError, match="no_answer_logit"):
    span_loss(outputs, jnp.array([0, 1]), jnp.array([0, 1]), jnp.array([False, True]))


# ------------------------------------------------------------------------------------------------- training

TASK_V, TASK_C, QUESTION_MARK = 12, 10, 3


def _synthetic(rng, n, p_impossible=0.3):
  """The question is a token x, then "?" or padding; the answer is the run (1-3 long) of x in a context of 6-10
  other tokens, or no answer when the context has no x (probability ``p_impossible``). The "?" matters to the
  gradient test: over a single question token the C2Q softmax is constant and W_a gets no gradient."""
  question = np.stack([rng.integers(4, TASK_V, size=n), np.where(rng.random(n) < 0.5, QUESTION_MARK, PAD_ID)], 1)
  context = np.full((n, TASK_C), PAD_ID)
  starts, ends = np.zeros(n, int), np.zeros(n, int)
  impossible = rng.random(n) < p_impossible
  for i in range(n):
    length = rng.integers(6, TASK_C + 1)
    context[i, :length] = rng.choice([t for t in range(4, TASK_V) if t != question[i, 0]], size=length)
    if not impossible[i]:
      run = rng.integers(1, 4)
      starts[i] = rng.integers(0, length - run + 1)
      ends[i] = starts[i] + run - 1
      context[i, starts[i]:ends[i] + 1] = question[i, 0]
  return tuple(jnp.asarray(x) for x in (question, context, starts, ends, impossible))


TRAINING = {  # encoder -> (model fields, Adam steps, learning rate)
    "transformer": (dict(d_model=32, num_layers=2, d_ff=64, positional="relative"), 300, 3e-3),
    "bilstm": (dict(d_model=16, num_layers=1), 150, 5e-3),
}


@functools.lru_cache(maxsize=None)
def _training_run(encoder, seed=0):
  """Adam on batches of 64 synthetic examples: (model, params, gradients of the first step, losses, exact-match
  accuracy on 8 held-out batches). Cached: the gradient and the training tests share one run.

  Exact match: the right span, or "no answer" exactly when there is none. The training step also returns the
  outputs of its forward pass, so evaluating is calling it on held-out batches (same shapes) and dropping the
  update: one compilation instead of two, which is most of this test's time.
  """
  fields, steps, lr = TRAINING[encoder]
  model = SpanQA(vocab_size=TASK_V, encoder=encoder, num_heads=2, dropout_rate=0.0, max_length=16,
                 max_answer_length=5, **fields)
  rng = np.random.default_rng(seed)
  batches = [_synthetic(rng, 64) for _ in range(50)]
  params = jax.jit(model.init)(jax.random.PRNGKey(seed), *batches[0][:2])["params"]
  optimizer = optax.adam(lr)

  @jax.jit
  def step(params, opt_state, batch):
    question, context, starts, ends, impossible = batch

    def loss_fn(p):
      out = model.apply({"params": p}, question, context)
      return span_loss(out, starts, ends, impossible), out

    (loss, out), grads = jax.value_and_grad(loss_fn, has_aux=True)(params)
    updates, opt_state = optimizer.update(grads, opt_state, params)
    return optax.apply_updates(params, updates), opt_state, loss, out, grads

  initial, opt_state, losses, first_grads = params, optimizer.init(params), [], None
  for i in range(steps):
    params, opt_state, loss, _, grads = step(params, opt_state, batches[i % len(batches)])
    if i == 0:
      first_grads = grads
    losses.append(float(loss))
  rng = np.random.default_rng(seed + 1000)
  correct = []
  for _ in range(8):
    batch = _synthetic(rng, 64)
    _, _, _, out, _ = step(params, opt_state, batch)  # outputs under `params`, before the discarded update
    pred_start, pred_end, _, no_answer = model.decode_spans(out)
    _, _, starts, ends, impossible = batch
    correct.append(jnp.where(impossible, no_answer, ~no_answer & (pred_start == starts) & (pred_end == ends)))
  return model, initial, first_grads, losses, float(jnp.concatenate(correct).mean())


@pytest.mark.parametrize("encoder", sorted(TRAINING))
def test_span_loss_gradients_are_finite_and_nonzero_for_every_parameter(encoder):
  _, params, grads, _, _ = _training_run(encoder)
  leaves = jax.tree_util.tree_leaves_with_path(grads)
  assert len(leaves) == len(jax.tree_util.tree_leaves(params))
  for path, g in leaves:
    g = np.asarray(g)
    assert np.isfinite(g).all(), jax.tree_util.keystr(path)
    assert np.abs(g).max() > 0, f"zero gradient for {jax.tree_util.keystr(path)}"


@pytest.mark.parametrize("encoder", sorted(TRAINING))
def test_trains_to_exact_span_accuracy(encoder):
  _, _, _, losses, accuracy = _training_run(encoder)
  assert np.mean(losses[-10:]) < 0.2 * np.mean(losses[:10])
  assert accuracy >= 0.95
