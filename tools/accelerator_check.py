"""The accelerator check: everything worth knowing about attnjax on the accelerator at hand, in one call.

    python -m tools.accelerator_check [--out=docs/accelerators] [--steps=300]     # on a GPU (or TPU) machine
    python -m tools.accelerator_check --dry_run --out=/tmp/check                  # the small CPU version

It measures, on whatever JAX's default backend is:

1. **Fused attention.** ``implementation="auto"`` against ``"xla"``, values and gradients, in bfloat16, for the
   shapes and masks the models use (encoder self-attention with key padding, causal decoder self-attention on packed
   rows, cross-attention), and which kernel ``"auto"`` really ran (on a GPU it must be cuDNN).
2. **bfloat16 training against a float32 CPU reference.** Every model family's train step (Transformer, LSTM +
   Bahdanau attention, ConvS2S, the Transformer span-QA reader) for ``--steps`` steps from the same initial
   parameters and the same batches: the device in bfloat16, the CPU in float32. The curves agree when their mean
   distance over all steps is within :data:`CURVE_TOLERANCE` of the float32 curve's loss drop.
3. **Train-step throughput.** Transformer-base and Transformer-big (``experiments/wmt14_en_de``) at the experiment's
   per-device share of their slice's batch, and again at the batch one chip trains with (the whole global batch
   when it fits in the chip's memory, :func:`attnjax.targets.single_device_accumulation`): tokens/s, model FLOP/s (XLA's count of the compiled step plus the fused attention's), MFU
   against the chip's peak from :mod:`attnjax.targets`, and the ahead-of-time roofline estimate of the same step.
4. **Beam-4 decoding throughput** of the Multi30k-size Transformer (3 + 3 layers of 256): sentences/s.
5. On a GPU, the tests marked ``gpu`` (``ATTNJAX_TEST_PLATFORMS=cuda pytest -m gpu``).

It writes ``accelerator_check.md`` and ``accelerator_check.json`` (device, driver, JAX version and every figure)
into ``--out``, and exits 1 if a check failed. ``--dry_run`` shrinks every size and step count so that the whole
check runs on a CPU in minutes: ``make test-slow`` runs it, so the check cannot rot before a machine is at hand.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import platform
import subprocess
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CURVE_TOLERANCE = 0.05  # mean |bfloat16 - float32| loss over all steps, in units of the float32 curve's loss drop
STEP_FILL_SCALE = 8  # on a chip no target names (and in the dry run), the "chip" batch is 8x the per-device share
ATTENTION_TOLERANCE = {"out": 2e-2, "grad": 6e-2}  # max |difference| in bfloat16, relative to the largest value


# ---------------------------------------------------------------------------------------------------- the machine


def machine() -> dict:
  import jax  # pylint: disable=g-import-not-at-top
  device = jax.devices()[0]
  info = {"platform": device.platform, "device_kind": device.device_kind, "devices": jax.device_count(),
          "jax": jax.__version__, "jaxlib": getattr(jax.lib, "__version__", None) or _jaxlib_version(),
          "python": platform.python_version(), "host": platform.node(), "driver": None}
  if device.platform == "gpu":
    try:
      out = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,memory.total", "--format=csv,noheader"],
                           capture_output=True, text=True, timeout=30).stdout.strip()
      info["driver"] = out.splitlines()[0] if out else None
    except (OSError, subprocess.SubprocessError):
      pass
  return info


def _jaxlib_version():
  try:
    import jaxlib  # pylint: disable=g-import-not-at-top
    return jaxlib.__version__
  except (ImportError, AttributeError):
    return None


def _target_for(device_kind: str, platform_name: str):
  """The one-device attnjax target whose chip this is (for its peak FLOP/s and bandwidth), or None: matched by the
  chip's name in JAX's device kind ("NVIDIA H100 80GB HBM3" is an H100)."""
  from attnjax import targets  # pylint: disable=g-import-not-at-top
  if "PCIe" in device_kind.split():
    return None  # the PCIe cards' peaks are lower than the SXM modules' the targets hold
  for target in targets.TARGETS.values():
    chip = target.device_kind.split()[1] if len(target.device_kind.split()) > 1 else target.device_kind
    if target.platform == platform_name and target.num_devices == 1 and chip in device_kind.split():
      return target
  return None


# ---------------------------------------------------------------------------------------------------- 1. attention


ATTENTION_CASES = {  # name: (batch, query length, key length, heads, head size, causal, packed)
    "encoder self, key padding": (4, 256, 256, 8, 64, False, False),
    "decoder self, causal, packed": (4, 256, 256, 8, 64, True, True),
    "cross, key padding": (4, 128, 256, 8, 64, False, False),
}


def _segments(b, n, rng, packed):
  if packed:
    ids = np.zeros((b, n), np.int32)
    for row in range(b):
      cut = int(rng.integers(n // 4, 3 * n // 4))
      ids[row, :cut], ids[row, cut:n - 8] = 1, 2  # two examples, then padding
    return ids
  lengths = rng.integers(n // 2, n + 1, size=b)
  return (np.arange(n)[None, :] < lengths[:, None]).astype(np.int32)


def attention_check(dry: bool) -> list[dict]:
  import jax  # pylint: disable=g-import-not-at-top
  import jax.numpy as jnp  # pylint: disable=g-import-not-at-top
  from attnjax.kernels import fused, scaled_dot_product_attention  # pylint: disable=g-import-not-at-top
  rows = []
  rng = np.random.default_rng(0)
  for name, (b, t, s, n, h, causal, packed) in ATTENTION_CASES.items():
    if dry:
      b, t, s, n, h = 2, t // 4, s // 4, 2, 16
    q, k, v = (jnp.asarray(rng.normal(size=shape), jnp.bfloat16) for shape in ((b, t, n, h), (b, s, n, h), (b, s, n, h)))
    kv_seg = _segments(b, s, rng, packed)
    q_seg = kv_seg[:, :t] if packed else np.ones((b, t), np.int32)
    cotangent = jnp.asarray(rng.normal(size=(b, t, n, h)), jnp.float32)

    def loss(implementation):
      def f(q, k, v):
        out = scaled_dot_product_attention(q, k, v, is_causal=causal, q_segment_ids=jnp.asarray(q_seg),
                                           kv_segment_ids=jnp.asarray(kv_seg), implementation=implementation)
        return jnp.sum(out.astype(jnp.float32) * cotangent), out
      return jax.jit(jax.value_and_grad(f, argnums=(0, 1, 2), has_aux=True))

    results = {}
    for implementation in ("xla", "auto"):
      with fused.record_fused_calls() as calls:
        (_, out), grads = loss(implementation)(q, k, v)
      results[implementation] = (np.asarray(out, np.float32), [np.asarray(g, np.float32) for g in grads],
                                 sorted({c[0] for c in calls}) or ["xla or blockwise"])
    (want, want_grads, _), (got, got_grads, ran) = results["xla"], results["auto"]
    live = q_seg != 0  # rows of padding attend nothing on either side
    out_diff = float(np.max(np.abs(got - want)[live]) / max(np.max(np.abs(want)), 1e-6))
    grad_diff = max(float(np.max(np.abs(g - w)) / max(np.max(np.abs(w)), 1e-6)) for g, w in zip(got_grads, want_grads))
    chosen = fused.choose_implementation(
        backend=fused.platform(), query_length=t, key_length=s, head_dim=h, dtype=jnp.bfloat16, has_mask=False,
        has_bias=False, dropout=False, return_weights=False, has_segment_ids=True)[0]
    expected = {"gpu": "cudnn", "tpu": "pallas_tpu"}.get(jax.default_backend())
    ok = out_diff <= ATTENTION_TOLERANCE["out"] and grad_diff <= ATTENTION_TOLERANCE["grad"]
    if expected:
      ok = ok and ran == [expected]
    rows.append({"case": name, "shape": [b, t, s, n, h], "auto_chose": chosen, "auto_ran": ran,
                 "out_rel_diff": out_diff, "grad_rel_diff": grad_diff, "ok": bool(ok)})
  return rows


# ---------------------------------------------------------------------------------------------------- 2. curves


FAMILIES = {
    "transformer": dict(name="transformer", num_encoder_layers=2, num_decoder_layers=2, d_model=128, num_heads=4,
                        d_ff=512, dropout_rate=0.0, shared_vocab=True, pre_norm=True),
    "lstm_bahdanau": dict(name="rnn_seq2seq", attention="bahdanau", embed_dim=64, hidden_dim=128, dropout_rate=0.0),
    "convs2s": dict(name="convs2s", embed_dim=64, hidden_dim=128, encoder_layers=2, decoder_layers=2,
                    dropout_rate=0.0, max_length=64),
    "span_qa_transformer": dict(name="span_qa", encoder="transformer", d_model=128, num_heads=4, num_layers=2,
                                d_ff=512, dropout_rate=0.0, max_length=96),
}
# a dry run's families: one layer of half the width, the same code paths (compiled in a third of the time on a CPU)
DRY_FAMILIES = {
    "transformer": dict(num_encoder_layers=1, num_decoder_layers=1, d_model=64, d_ff=128),
    "lstm_bahdanau": dict(embed_dim=32, hidden_dim=64),
    "convs2s": dict(embed_dim=32, hidden_dim=64, encoder_layers=1, decoder_layers=1),
    "span_qa_transformer": dict(d_model=64, num_layers=1, d_ff=128),
}
VOCAB, BATCH, SRC_LEN, CONTEXT_LEN, QUESTION_LEN = 64, 16, 24, 64, 16


def _batches(family: str, steps: int) -> list[dict]:
  """The same synthetic batches everywhere: reversal of random token strings, or a span marked in the context."""
  rng = np.random.default_rng(1)
  out = []
  for _ in range(steps):
    if family.startswith("span_qa"):
      context = rng.integers(4, VOCAB, size=(BATCH, CONTEXT_LEN)).astype(np.int32)
      question = rng.integers(4, VOCAB, size=(BATCH, QUESTION_LEN)).astype(np.int32)
      start = rng.integers(0, CONTEXT_LEN - 4, size=BATCH).astype(np.int32)
      context[np.arange(BATCH), start] = 3  # the answer starts after a marker token
      out.append({"question": question, "question_mask": np.ones_like(question, bool), "context": context,
                  "context_mask": np.ones_like(context, bool), "start_positions": start,
                  "end_positions": start + 2, "is_impossible": np.zeros(BATCH, bool),
                  "weights": np.ones(BATCH, np.float32)})
      continue
    src = rng.integers(4, VOCAB, size=(BATCH, SRC_LEN)).astype(np.int32)
    tgt = src[:, ::-1]
    tgt_in = np.concatenate([np.full((BATCH, 1), 1, np.int32), tgt[:, :-1]], axis=1)
    out.append({"src": src, "src_mask": np.ones_like(src, bool), "tgt_in": tgt_in, "tgt_out": tgt,
                "tgt_mask": np.ones_like(tgt, bool)})
  return out


def train_curve(family: str, steps: int, dtype: str, device, dry: bool = False) -> list[float]:
  """Losses of ``steps`` Adam steps of ``family`` in ``dtype`` on ``device``, from parameters initialised in
  float32 on the CPU (the same for every device and dtype); ``dry``: the family shrunk (:data:`DRY_FAMILIES`)."""
  import jax  # pylint: disable=g-import-not-at-top
  import optax  # pylint: disable=g-import-not-at-top
  from attnjax.models.registry import build_model  # pylint: disable=g-import-not-at-top
  batches = _batches(family, steps)
  from attnjax.models.registry import model_fields  # pylint: disable=g-import-not-at-top
  cfg = dict(FAMILIES[family], **(DRY_FAMILIES[family] if dry else {}), dtype=dtype)
  if "param_dtype" in model_fields(cfg["name"]):
    cfg["param_dtype"] = "float32"  # the others keep float32 parameters whatever their compute dtype
  model = build_model(cfg, src_vocab_size=VOCAB, tgt_vocab_size=VOCAB)
  cpu = jax.devices("cpu")[0]
  first = batches[0]
  with jax.default_device(cpu):
    init_args = ((first["question"], first["context"]) if family.startswith("span_qa")
                 else (first["src"], first["tgt_in"], first["src_mask"]))
    params = jax.jit(model.init)(jax.random.PRNGKey(0), *init_args)["params"]
  params = jax.device_put(params, device)
  tx = optax.adam(1e-3)
  opt_state = jax.device_put(tx.init(params), device)
  from attnjax.families.seq2seq import seq2seq_loss_stats  # pylint: disable=g-import-not-at-top
  from attnjax.families.span_qa import span_loss_stats  # pylint: disable=g-import-not-at-top
  loss_fn = span_loss_stats if family.startswith("span_qa") else seq2seq_loss_stats

  @jax.jit
  def step(params, opt_state, batch):
    def f(p):
      stats = loss_fn(model, p, batch, None, True)
      return stats["loss_sum"] / stats["ntokens"]
    loss, grads = jax.value_and_grad(f)(params)
    updates, opt_state = tx.update(grads, opt_state, params)
    return optax.apply_updates(params, updates), opt_state, loss

  losses = []
  for batch in batches:
    params, opt_state, loss = step(params, opt_state, jax.device_put(batch, device))
    losses.append(loss)
  return [float(x) for x in jax.device_get(losses)]


def compare_curves(low: list[float], reference: list[float]) -> tuple[float, float, float, bool]:
  """``(last low, last reference, gap, agree)``. The last losses are the means of the last 10% of steps. The gap is
  the mean over all steps of ``|low_t - reference_t|``, in units of the reference's loss drop (its first loss less
  its last, and at least a tenth of its first loss). The curves agree when every low-precision loss is finite and the gap is within :data:`CURVE_TOLERANCE`.

  Why not the last losses' relative difference: two float32 runs of the same step on two CPUs (another summation
  order) already differ by more than 5% at the end of 300 steps, where a model is in a steep descent, and by
  tens of percent of a loss near zero. A precision problem shows as a curve that stalls or drifts away for many
  steps; a lead or lag of a few steps is not one."""
  tail = max(len(reference) // 10, 1)
  a, b = float(np.mean(low[-tail:])), float(np.mean(reference[-tail:]))
  drop = max(reference[0] - b, 0.1 * abs(reference[0]), 1e-6)  # a curve that hardly fell (a dry run): 10% of its start
  gap = float(np.mean(np.abs(np.asarray(low, np.float64) - np.asarray(reference, np.float64)))) / drop
  return a, b, gap, bool(all(math.isfinite(x) for x in low) and gap <= CURVE_TOLERANCE)


def curves_check(steps: int, rows: list | None = None, done=lambda: None, dry: bool = False) -> list[dict]:
  """One row per model family, appended to ``rows`` as each finishes (``done()`` is called after each, so that a
  report written then keeps the families measured before a time limit cut the call short); ``dry``: each family
  shrunk (:data:`DRY_FAMILIES`)."""
  import jax  # pylint: disable=g-import-not-at-top
  device, cpu = jax.devices()[0], jax.devices("cpu")[0]
  rows = [] if rows is None else rows
  for family in FAMILIES:
    t0 = time.perf_counter()
    low = train_curve(family, steps, "bfloat16", device, dry)
    reference = train_curve(family, steps, "float32", cpu, dry)
    a, b, diff, ok = compare_curves(low, reference)
    rows.append({"family": family, "steps": steps, "first_loss": reference[0], "last_loss_bf16": a,
                 "last_loss_f32_cpu": b, "gap": diff, "fell": b < reference[0],
                 "ok": ok, "seconds": time.perf_counter() - t0,
                 "bf16_curve": low[:: max(steps // 50, 1)], "f32_curve": reference[:: max(steps // 50, 1)]})
    done()
  return rows


# ---------------------------------------------------------------------------------------------------- 3. steps


PROFILE_STEPS = 5  # steady steps traced by the profiler for the summary (after the timed ones)
_HOST_BOOKKEEPING = ("ThreadpoolListener", "SlinkyThreadPool", "end: ", "ThunkExecutor", "CommonPjRt", "PjRt")


def _device_ops(events: list[dict]) -> list[tuple[float, float, str]]:
  """``(start µs, end µs, name)`` of the kernels in a Chrome-format trace (the profiler's ``perfetto_trace.json``):
  on an accelerator the events of its ``/device:`` process (the ``XLA Ops`` line when there is one, else every
  stream), on a CPU the XLA ops that the runtime's ``tf_XLA`` threads ran (not the thread pool's bookkeeping)."""
  procs = {e["pid"]: e["args"]["name"] for e in events if e.get("ph") == "M" and e.get("name") == "process_name"}
  threads = {(e["pid"], e["tid"]): e["args"]["name"] for e in events
             if e.get("ph") == "M" and e.get("name") == "thread_name"}
  devices = {pid for pid, name in procs.items() if name.startswith("/device:")}
  xla_ops = {key for key, name in threads.items() if key[0] in devices and name == "XLA Ops"}
  ops = []
  for e in events:
    if e.get("ph") != "X" or "dur" not in e:
      continue
    key, name = (e.get("pid"), e.get("tid")), e.get("name", "")
    if devices:
      keep = key in xla_ops if xla_ops else key[0] in devices and not threads.get(key, "").startswith("XLA Modules")
    else:
      keep = threads.get(key, "").startswith("tf_XLA") and not name.startswith(_HOST_BOOKKEEPING)
    if keep:
      ops.append((float(e["ts"]), float(e["ts"]) + float(e["dur"]), name))
  return sorted(ops)


def profile_summary(events: list[dict], steps: list[tuple[float, float]], top: int = 10) -> dict:
  """What a trace of ``steps`` (each ``(start µs, end µs)`` of its host-side step annotation) says of the device:
  the busy fraction (the union of its kernels' time over the span from the first kernel to the last), the mean gap
  between steps (idle time from one step's last kernel to the next step's first), kernels per step, and the ``top``
  ops by time per step (each name's total over the steps, over their number)."""
  ops = _device_ops(events)
  per_step: list[list[tuple[float, float, str]]] = [[] for _ in steps]
  for op in ops:
    for i, (begin, end) in enumerate(steps):
      if begin <= op[0] < end:
        per_step[i].append(op)
        break
  ops = [op for step in per_step for op in step]
  if not ops:
    raise ValueError(f"the trace holds no device kernel inside the {len(steps)} annotated steps")
  busy, covered_to = 0.0, float("-inf")
  for start, end, _ in ops:  # sorted by start: the union of the intervals
    if end > covered_to:
      busy += end - max(start, covered_to)
      covered_to = end
  span = max(end for _, end, _ in ops) - ops[0][0]
  gaps = [nxt[0][0] - max(op[1] for op in cur) for cur, nxt in zip(per_step, per_step[1:]) if cur and nxt]
  totals: dict[str, list] = {}
  for start, end, name in ops:
    entry = totals.setdefault(name, [0.0, 0])
    entry[0] += end - start
    entry[1] += 1
  n = len(steps)
  ranked = sorted(totals.items(), key=lambda kv: -kv[1][0])[:top]
  return {"steps": n, "busy_fraction": busy / span if span > 0 else 1.0,
          "gap_ms": sum(gaps) / len(gaps) / 1e3 if gaps else None, "kernels_per_step": len(ops) / n,
          "device_ms_per_step": busy / n / 1e3, "span_ms_per_step": span / n / 1e3,
          "top_ops": [{"name": name, "ms_per_step": t / n / 1e3, "calls_per_step": c / n} for name, (t, c) in ranked]}


def trace_steps(step, state, batch, directory: str, steps: int = PROFILE_STEPS) -> tuple[dict, object]:
  """``steps`` calls of ``state = step(state, batch)[0]`` under ``jax.profiler.trace`` (each in a step annotation,
  blocked on before the next, so that its kernels fall in its window), then :func:`profile_summary` of the trace."""
  import glob  # pylint: disable=g-import-not-at-top
  import gzip  # pylint: disable=g-import-not-at-top
  import jax  # pylint: disable=g-import-not-at-top
  windows = []
  with jax.profiler.trace(directory, create_perfetto_trace=True):
    for i in range(steps):
      t0 = time.perf_counter_ns()
      with jax.profiler.StepTraceAnnotation("train", step_num=i):
        state, metrics = step(state, batch)
        jax.block_until_ready(metrics)
      windows.append((t0, time.perf_counter_ns()))
  path = sorted(glob.glob(os.path.join(directory, "**", "perfetto_trace.json.gz"), recursive=True))[-1]
  with gzip.open(path, "rt") as f:
    trace = json.load(f)
  events = trace["traceEvents"] if isinstance(trace, dict) else trace
  annotated = sorted((float(e["ts"]), float(e["ts"]) + float(e["dur"])) for e in events
                     if e.get("ph") == "X" and e.get("name") == "train" and "dur" in e)
  if len(annotated) != steps:
    raise ValueError(f"{path}: {len(annotated)} step annotations for {steps} traced steps")
  return profile_summary(events, annotated), state


def step_batch(experiment: str, batch: str, chip) -> tuple[int, int, int]:
  """``(rows, source length, target length)`` of one device's train step for :func:`step_throughput`'s ``batch``
  on ``chip`` (a single-device target, or None)."""
  from attnjax import compile as compile_lib  # pylint: disable=g-import-not-at-top
  from attnjax import targets  # pylint: disable=g-import-not-at-top
  path = os.path.join(ROOT, "experiments", experiment)
  config = compile_lib.load_experiment(path)
  home = targets.get(config.target)
  rows, q, c = compile_lib._batch_shape(config, home.resolved_mesh()[0] * home.resolved_mesh()[1])  # pylint: disable=protected-access
  share = max(rows // home.num_devices, 1)
  if batch == "share":
    return share, q, c
  if chip is None or chip.platform == "cpu":
    return share * STEP_FILL_SCALE, q, c
  on_chip = compile_lib.load_experiment(path, chip.name)
  rows, q, c = compile_lib._batch_shape(on_chip, 1)  # pylint: disable=protected-access
  return rows // on_chip.train.grad_accum_steps, q, c


def step_throughput(experiment: str, dry: bool, timed_steps: int, batch: str = "share", profile: bool = False) -> dict:
  """The experiment's train step on one device, measured and estimated ahead of time, at ``batch``: ``"share"``,
  the per-device share of the batch of the slice the experiment is made for (too few rows to fill one chip), or
  ``"chip"``, the micro-batch the experiment trains with on this chip's single-device target (the whole global
  batch when it fits: :func:`attnjax.targets.single_device_accumulation`); on a chip no target names,
  :data:`STEP_FILL_SCALE` times the share. With ``profile``, :data:`PROFILE_STEPS` more steps are traced (into a
  temporary directory) and summarised (:func:`profile_summary`) under ``"profile"``."""
  if batch not in ("share", "chip"):
    raise ValueError(f"batch must be 'share' or 'chip', got {batch!r}")
  batch_from = batch
  import jax  # pylint: disable=g-import-not-at-top
  import jax.numpy as jnp  # pylint: disable=g-import-not-at-top
  from attnjax import compile as compile_lib  # pylint: disable=g-import-not-at-top
  from attnjax.kernels import fused  # pylint: disable=g-import-not-at-top
  from attnjax import families, tokens  # pylint: disable=g-import-not-at-top
  from attnjax.models.registry import model_for  # pylint: disable=g-import-not-at-top
  from attnjax.runtime import partitioning  # pylint: disable=g-import-not-at-top
  from attnjax.training import steps as steps_lib  # pylint: disable=g-import-not-at-top
  from attnjax.training.optim import make_optimizer  # pylint: disable=g-import-not-at-top
  from attnjax.training.state import create_train_state  # pylint: disable=g-import-not-at-top
  config = compile_lib.load_experiment(os.path.join(ROOT, "experiments", experiment))
  device = jax.devices()[0]
  chip = _target_for(device.device_kind, device.platform)
  per_device, q, c = step_batch(experiment, batch_from, chip)
  m = config.model
  if dry:  # a few layers of little width: the same code path in seconds on a CPU
    with m.unlocked():
      m.update(num_encoder_layers=1, num_decoder_layers=1, d_model=64, num_heads=4, d_ff=128)
    per_device, q, c = 4 * (STEP_FILL_SCALE if batch_from == "chip" else 1), 32, 32
  dtype = "float32" if device.platform == "cpu" else "bfloat16"
  with m.unlocked():
    m.dtype = dtype
  vocab = 512 if dry else tokens.vocab_size(config.data)  # the real vocabulary; the tables pad it
  model = model_for(config, src_vocab_size=vocab, tgt_vocab_size=vocab)
  mesh = partitioning.create_mesh(config.mesh.axes, (1, 1, 1), devices=[device])
  rules = config.mesh.rules
  tx, schedule = make_optimizer(config.train, m.d_model)
  state, sharding, _ = create_train_state(model, tx, mesh, rules, seed=0)
  rng = np.random.default_rng(0)
  batch = {"src": rng.integers(4, vocab, size=(per_device, q)).astype(np.int32),
           "tgt_in": rng.integers(4, vocab, size=(per_device, c)).astype(np.int32),
           "tgt_out": rng.integers(4, vocab, size=(per_device, c)).astype(np.int32)}
  batch["src_mask"], batch["tgt_mask"] = np.ones((per_device, q), bool), np.ones((per_device, c), bool)
  batch = jax.device_put(batch, partitioning.batch_sharding(mesh, rules))
  loss_fn = families.of(config).loss(config, tgt_vocab_size=vocab)
  train_step = steps_lib.make_train_step(model, tx, schedule, state_sharding=sharding, mesh=mesh, rules=rules,
                                         loss_fn=loss_fn)
  with fused.record_fused_calls() as calls:
    compiled = train_step.lower(state, batch).compile()
  memory = compile_lib._memory(compiled)  # pylint: disable=protected-access
  attention_flops = 3.0 * sum(fused.attention_flops(q_, k_, causal) for _, q_, k_, causal in calls)
  flops = memory["flops"] + attention_flops
  for _ in range(2):  # warm-up
    state, metrics = compiled(state, batch)
  jax.block_until_ready(metrics)
  t0 = time.perf_counter()
  for _ in range(timed_steps):
    state, metrics = compiled(state, batch)
  jax.block_until_ready(metrics)
  seconds = (time.perf_counter() - t0) / timed_steps
  summary = None
  if profile:
    import tempfile  # pylint: disable=g-import-not-at-top
    with tempfile.TemporaryDirectory() as directory:
      summary, state = trace_steps(compiled, state, batch, directory)
  parts = _step_parts(model, state, sharding, batch, mesh, rules, loss_fn, timed_steps)
  peak = chip.peak_flops if chip else None
  estimate = None
  if chip and chip.peak_flops:
    estimate = max(flops / chip.peak_flops, memory["bytes_accessed"] / chip.hbm_bandwidth)
  return {"experiment": experiment, "dtype": dtype, "batch": [per_device, q, c], "batch_from": batch_from,
          "fused_attention": sorted({call[0] for call in calls}) or ["none"],
          "step_seconds": seconds, "tokens_per_s": per_device * c / seconds, "model_flops": flops,
          "flops_per_s": flops / seconds, "peak_flops": peak, "mfu": flops / seconds / peak if peak else None,
          "aot_estimate_seconds": estimate, "memory_gib": memory["total"] / 2**30, "loss": float(metrics["loss"]),
          "profile": summary,
          **parts}


def _seconds(fn, args, repeats: int) -> float:
  """Mean seconds of ``fn(*args)`` over ``repeats`` calls, after one that compiles and warms up."""
  import jax  # pylint: disable=g-import-not-at-top
  jax.block_until_ready(fn(*args))
  t0 = time.perf_counter()
  for _ in range(repeats):
    out = fn(*args)
  jax.block_until_ready(out)
  return (time.perf_counter() - t0) / repeats


def _step_parts(model, state, sharding, batch, mesh, rules, loss_fn, repeats) -> dict:
  """Where a train step's time goes: the forward pass alone (evaluation mode); the forward and backward passes of the
  same batch in training mode (dropout on), without dropout, and with dropout masks drawn by the ``rbg`` generator;
  the rest of the step is the optimiser update and what surrounds it. A step far from its estimate shows here
  whether the passes, the masks' random bits or the update hold the time."""
  import jax  # pylint: disable=g-import-not-at-top
  from attnjax.runtime import partitioning  # pylint: disable=g-import-not-at-top
  from attnjax.training import steps as steps_lib  # pylint: disable=g-import-not-at-top
  forward = steps_lib.make_eval_step(model, state_sharding=sharding, mesh=mesh, rules=rules, loss_fn=loss_fn)

  def passes(key, deterministic):
    @partitioning.traced_in(mesh, rules)
    def gradients(params, batch):
      def loss(p):
        stats = loss_fn(model, p, batch, key, deterministic)
        return stats["loss_sum"] / stats["ntokens"]
      return jax.grad(loss)(params)
    backward = jax.jit(gradients, in_shardings=(sharding.params, partitioning.batch_sharding(mesh, rules)),
                       out_shardings=sharding.params)
    return _seconds(backward, (state.params, batch), repeats)

  return {"forward_seconds": _seconds(forward, (state.params, batch), repeats),
          "forward_backward_seconds": passes(jax.random.PRNGKey(0), False),
          # the dropout masks' share: the same passes with no dropout, and with masks drawn by the "rbg" generator
          # (the hardware-friendly one large-scale trainers switch to) instead of threefry
          "forward_backward_no_dropout_seconds": passes(jax.random.PRNGKey(0), True),
          "forward_backward_rbg_seconds": passes(jax.random.key(0, impl="rbg"), False)}


def matmul_peak(dry: bool) -> dict:
  """The throughput of one large square matmul in the step's dtype: the chip's reachable peak, beside its published
  one (an MFU against the published peak is also bounded by this ratio)."""
  import jax  # pylint: disable=g-import-not-at-top
  import jax.numpy as jnp  # pylint: disable=g-import-not-at-top
  device = jax.devices()[0]
  dtype = jnp.float32 if device.platform == "cpu" else jnp.bfloat16
  n = 256 if dry else 8192
  a = jnp.ones((n, n), dtype) / n
  seconds = _seconds(jax.jit(lambda x, y: x @ y), (a, a), 3 if dry else 20)
  chip = _target_for(device.device_kind, device.platform)
  peak = chip.peak_flops if chip else None
  return {"n": n, "dtype": jnp.dtype(dtype).name, "flops_per_s": 2 * n**3 / seconds, "peak_flops": peak,
          "of_peak": 2 * n**3 / seconds / peak if peak else None}


# ---------------------------------------------------------------------------------------------------- 4. decoding


def decode_throughput(dry: bool, sentences: int) -> dict:
  import jax  # pylint: disable=g-import-not-at-top
  from attnjax import compile as compile_lib  # pylint: disable=g-import-not-at-top
  from attnjax import inference  # pylint: disable=g-import-not-at-top
  from attnjax.models.registry import build_model  # pylint: disable=g-import-not-at-top
  from attnjax.runtime import partitioning  # pylint: disable=g-import-not-at-top
  config = compile_lib.load_experiment(os.path.join(ROOT, "experiments", "multi30k", "transformer.py"))
  m = config.model
  with m.unlocked():
    if dry:
      m.update(num_encoder_layers=1, num_decoder_layers=1, d_model=32, num_heads=2, d_ff=64)
    m.dtype = "float32" if jax.default_backend() == "cpu" else "bfloat16"
  vocab = 8192 if not dry else 256
  model = build_model(m.to_dict(), src_vocab_size=vocab, tgt_vocab_size=vocab)
  device = jax.devices()[0]
  mesh = partitioning.create_mesh(config.mesh.axes, (1, 1, 1), devices=[device])
  with config.eval.unlocked():
    config.eval.beam_size, config.eval.max_len_a, config.eval.max_len_b = 4, 1.0, 10
  decoder = inference.decoder_for(model, mesh, config.eval, vocab_size=vocab)
  rng = np.random.default_rng(0)
  src = rng.integers(4, vocab, size=(decoder.rows.rows(config.eval.batch_size), 14)).astype(np.int32)
  params = model.init(jax.random.PRNGKey(0), src[:1], src[:1, :4])["params"]
  params = jax.device_put(params, partitioning.replicated(mesh))
  batch = decoder.rows.put(src)
  jax.block_until_ready(decoder(params, batch))  # compiled
  batches = max(sentences // src.shape[0], 1)
  t0 = time.perf_counter()
  for _ in range(batches):
    out = decoder(params, batch)
  jax.block_until_ready(out)
  seconds = time.perf_counter() - t0
  return {"model": "multi30k/transformer" + (" (shrunk)" if dry else ""), "beam": 4, "batch": int(src.shape[0]),
          "source_length": 14, "sentences": batches * int(src.shape[0]),
          "sentences_per_s": batches * src.shape[0] / seconds}


# ---------------------------------------------------------------------------------------------------- 5. gpu tests


def gpu_tests() -> dict:
  env = dict(os.environ, ATTNJAX_TEST_PLATFORMS="cuda")
  proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-m", "gpu", "tests/kernels/test_fused.py",
                         "-p", "no:cacheprovider"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=1200)
  return {"returncode": proc.returncode, "summary": (proc.stdout.strip().splitlines() or [""])[-1],
          "ok": proc.returncode == 0}


# ---------------------------------------------------------------------------------------------------- the report


def _fmt(x, digits=3):
  if x is None:
    return "—"
  if isinstance(x, float):
    return f"{x:.{digits}g}"
  return str(x)


def markdown(report: dict) -> str:
  m = report["machine"]
  lines = ["# Accelerator check", "",
           f"`python -m tools.accelerator_check{' --dry_run' if report['dry_run'] else ''}` on {m['devices']} x "
           f"{m['device_kind']} ({m['platform']}), driver {m['driver'] or '—'}, JAX {m['jax']}, jaxlib "
           f"{m['jaxlib']}, Python {m['python']}. Overall: **{'pass' if report['ok'] else 'FAIL'}**.", "",
           "## Fused attention (`auto` against `xla`, bfloat16)", "",
           "| case | shape (B, T, S, N, H) | auto chose | auto ran | output diff | gradient diff | ok |",
           "|---|---|---|---|---|---|---|"]
  for r in report.get("attention", []):
    lines.append(f"| {r['case']} | {tuple(r['shape'])} | {r['auto_chose']} | {', '.join(r['auto_ran'])} | "
                 f"{r['out_rel_diff']:.2e} | {r['grad_rel_diff']:.2e} | {'yes' if r['ok'] else 'NO'} |")
  steps = report["curves"][0]["steps"] if report.get("curves") else "—"
  lines += ["", f"Differences: max |auto - xla| over the largest |xla| value; tolerances {ATTENTION_TOLERANCE}.", "",
            f"## bfloat16 training against the float32 CPU reference ({steps} steps)", "",
            "| family | first loss | last loss, bf16 on device | last loss, f32 on CPU | gap | ok |",
            "|---|---|---|---|---|---|"]
  for r in report.get("curves", []):
    lines.append(f"| {r['family']} | {r['first_loss']:.4f} | {r['last_loss_bf16']:.4f} | {r['last_loss_f32_cpu']:.4f}"
                 f" | {r['gap']:.2%} | {'yes' if r['ok'] else 'NO'} |")
  lines += ["", "Last loss: the mean of the last 10% of steps. Gap: the mean |bf16 - f32| loss over all steps over the f32 "
            f"curve's drop (first loss less last); tolerance {CURVE_TOLERANCE:.0%}.", "",
            "## Train step", "",
            "| experiment | dtype | batch (rows, S, T) | fused attention | step (ms) | forward (ms) | forward + "
            "backward (ms) | no dropout (ms) | rbg dropout (ms) | tokens/s | TFLOP/s | MFU | AOT estimate (ms) | "
            "memory (GiB) |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
  for r in report.get("steps", []):
    estimate = None if r["aot_estimate_seconds"] is None else 1e3 * r["aot_estimate_seconds"]
    parts = [_fmt(None if r.get(key) is None else 1e3 * r[key])
             for key in ("forward_seconds", "forward_backward_seconds", "forward_backward_no_dropout_seconds",
                         "forward_backward_rbg_seconds")]
    lines.append(f"| {r['experiment']} | {r['dtype']} | {tuple(r['batch'])} | {', '.join(r['fused_attention'])} | "
                 f"{1e3 * r['step_seconds']:.1f} | {' | '.join(parts)} | {r['tokens_per_s']:,.0f} | "
                 f"{r['flops_per_s'] / 1e12:.2f} | "
                 f"{_fmt(None if r['mfu'] is None else round(100 * r['mfu'], 1))}{'%' if r['mfu'] else ''} | "
                 f"{_fmt(estimate)} | {r['memory_gib']:.2f} |")
  profiled = [r for r in report.get("steps", []) if r.get("profile")]
  if profiled:
    lines += ["", f"### Profile ({PROFILE_STEPS} steady steps under `jax.profiler.trace`)", "",
              "| experiment | batch | kernels per step | device busy | gap between steps (ms) | device time per step "
              "(ms) | span per step (ms) |", "|---|---|---|---|---|---|---|"]
    for r in profiled:
      p = r["profile"]
      lines.append(f"| {r['experiment']} | {tuple(r['batch'])} | {p['kernels_per_step']:.0f} | "
                   f"{100 * p['busy_fraction']:.1f}% | {_fmt(p['gap_ms'])} | {p['device_ms_per_step']:.2f} | "
                   f"{p['span_ms_per_step']:.2f} |")
    for r in profiled:
      lines += ["", f"Ten most expensive ops of {r['experiment']} at {tuple(r['batch'])}:", "",
                "| op | ms per step | calls per step |", "|---|---|---|"]
      lines += [f"| `{o['name']}` | {o['ms_per_step']:.3f} | {o['calls_per_step']:g} |" for o in r["profile"]["top_ops"]]
    lines += ["", "Busy: the union of the device's kernels over the span from a step's first kernel to the last "
              "step's last; the gap: idle time from one step's last kernel to the next one's first (each step is "
              "waited on before the next, so the gap includes the host's dispatch of a step)."]
  mm = report.get("matmul")
  if mm:
    of_peak = "" if mm["of_peak"] is None else f", {100 * mm['of_peak']:.0f}% of the published peak"
    lines += ["", f"One {mm['n']}² {mm['dtype']} matmul: {mm['flops_per_s'] / 1e12:.1f} TFLOP/s{of_peak}. "
              "Forward and forward + backward time the step's passes alone; the rest of a step is the optimiser "
              "update. No dropout and rbg dropout time the forward and backward passes again, without dropout and "
              "with its masks drawn by the rbg generator instead of threefry: the share of the masks' random bits."]
  d = report.get("decoding")
  lines += ["", "## Beam-4 decoding", ""]
  lines += ["—"] if d is None else [
      f"{d['model']}: {d['sentences_per_s']:,.1f} sentences/s (beam {d['beam']}, batch {d['batch']}, sources of "
      f"{d['source_length']} tokens, {d['sentences']} sentences, compilation excluded)."]
  if report.get("gpu_tests"):
    g = report["gpu_tests"]
    lines += ["", "## Tests marked gpu", "", f"`ATTNJAX_TEST_PLATFORMS=cuda pytest -m gpu`: {g['summary']}"]
  if report.get("errors"):
    lines += ["", "## Errors", ""] + [f"- {name}: `{text[:500]}`" for name, text in report["errors"].items()]
  return "\n".join(lines) + "\n"


def main(argv=None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("--out", default="docs/accelerators", help="directory for accelerator_check.{md,json}")
  parser.add_argument("--steps", type=int, default=300, help="training steps per model family")
  parser.add_argument("--dry_run", action="store_true", help="tiny sizes and few steps (a CPU, the tests)")
  args = parser.parse_args(argv)
  import jax  # pylint: disable=g-import-not-at-top
  dry = args.dry_run
  steps = 8 if dry else args.steps
  report = {"dry_run": dry, "machine": machine()}
  print(f"accelerator check on {report['machine']['device_kind']} ({report['machine']['platform']})", flush=True)
  errors = report["errors"] = {}

  def section(name, fn, default):
    """One section; an error is recorded (and fails the check) instead of costing the others: a lent machine's time
    is short, and one call must bring back everything it can."""
    t0 = time.perf_counter()
    try:
      value = fn()
    except Exception as e:  # pylint: disable=broad-except
      import traceback  # pylint: disable=g-import-not-at-top
      errors[name] = f"{type(e).__name__}: {e}"
      traceback.print_exc()
      value = default
    print(f"{name}: done in {time.perf_counter() - t0:.0f} s{' (error)' if name in errors else ''}", flush=True)
    return value

  def write():
    """The report as it stands: written after every section, so that a call cut short by the machine's time limit
    still brings back what was measured."""
    report["ok"] = (not errors and all(r["ok"] for r in report.get("attention", []))
                    and all(r["ok"] for r in report.get("curves", []))
                    and report.get("gpu_tests", {"ok": True})["ok"])
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "accelerator_check.json"), "w", encoding="utf-8") as f:
      json.dump(report, f, indent=1)
    text = markdown(report)
    with open(os.path.join(args.out, "accelerator_check.md"), "w", encoding="utf-8") as f:
      f.write(text)
    return text

  # The quick sections first; the bfloat16 curves, the longest, last, each family written as it finishes.
  report["attention"] = section("attention", lambda: attention_check(dry), [])
  write()
  report["matmul"] = section("matmul", lambda: matmul_peak(dry), None)
  report["steps"] = []
  for batch in ("share", "chip"):
    for name in ("transformer_base", "transformer_big"):
      report["steps"] += section(
          f"step {name} {batch}",
          lambda n=name, b=batch: [step_throughput(
              f"wmt14_en_de/{n}.py", dry, 3 if dry else 20, b, profile=b == "chip")], [])
      write()
  report["decoding"] = section("decoding", lambda: decode_throughput(dry, 64 if dry else 2000), None)
  write()
  if jax.default_backend() == "gpu":
    report["gpu_tests"] = section("gpu tests", gpu_tests, {"ok": False, "summary": "error", "returncode": None})
    write()
  report["curves"] = []
  section("curves", lambda: curves_check(steps, report["curves"], write, dry=dry), [])
  text = write()
  print(text)
  return 0 if report["ok"] else 1


if __name__ == "__main__":
  sys.exit(main())
