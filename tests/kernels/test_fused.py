"""The accelerator-native attention paths (attnjax.kernels.fused) on CPU.

Pallas splash attention runs in the Pallas interpreter and is compared with ``implementation="xla"`` (values and
gradients; no mask, causal, key padding, packed segments; self- and cross-attention shapes; sharded in shard_map over
a 2x2 mesh). The ``"auto"`` choice is a pure function of static facts and is tested for every platform here;
``"auto"`` on this CPU gives the ``"xla"`` numbers; the explicit fused implementations refuse to run off their
platform; the cuDNN path runs only where a GPU is present.
"""

import os
import subprocess
import sys
import textwrap

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from attnjax.kernels import fused, scaled_dot_product_attention
from tests.devices import cpu_devices_env

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _qkv(b, t, s, n, h, seed=0):
  keys = jax.random.split(jax.random.PRNGKey(seed), 3)
  return (jax.random.normal(keys[0], (b, t, n, h)), jax.random.normal(keys[1], (b, s, n, h)),
          jax.random.normal(keys[2], (b, s, n, h)))


def _packed(lengths, total):
  """Segment ids 1, 2, ... for examples of ``lengths`` packed in one row of ``total`` positions, 0 after."""
  ids = np.zeros(total, np.int32)
  start = 0
  for k, n in enumerate(lengths, start=1):
    ids[start:start + n] = k
    start += n
  return ids


CASES = {
    # name: (B, T, S, N, H, is_causal, segments(b, t, s) -> (q_seg, kv_seg) or None)
    "self_full": (1, 128, 128, 2, 64, False, None),
    "self_causal_packed": (2, 128, 128, 2, 32, True,
                           lambda: (np.stack([_packed([50, 60], 128), _packed([128], 128)]),) * 2),
    "cross_key_padding": (2, 256, 128, 1, 64, False,
                          lambda: (np.ones((2, 256), np.int32),
                                   np.stack([np.arange(128) < 77, np.arange(128) < 128]).astype(np.int32))),
    "cross_packed": (1, 256, 128, 2, 32, False,
                     lambda: (_packed([100, 90], 256)[None], _packed([40, 70], 128)[None])),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_splash_attention_in_interpret_mode_equals_xla_values_and_gradients(case):
  b, t, s, n, h, causal, segments = CASES[case]
  q, k, v = _qkv(b, t, s, n, h)
  q_seg, kv_seg = (None, None) if segments is None else (jnp.asarray(x) for x in segments())
  cotangent = jax.random.normal(jax.random.PRNGKey(9), q.shape)

  def loss(f):
    return lambda q, k, v: jnp.sum(f(q, k, v) * cotangent)

  splash = lambda q, k, v: fused.splash_attention(q, k, v, q_segment_ids=q_seg, kv_segment_ids=kv_seg,
                                                  is_causal=causal, interpret=True)
  if q_seg is None:
    xla = lambda q, k, v: scaled_dot_product_attention(q, k, v, is_causal=causal, implementation="xla")
  else:
    xla = lambda q, k, v: scaled_dot_product_attention(q, k, v, is_causal=causal, implementation="xla",
                                                       q_segment_ids=q_seg, kv_segment_ids=kv_seg)
  np.testing.assert_allclose(splash(q, k, v), xla(q, k, v), atol=2e-5, rtol=1e-5)
  for got, want in zip(jax.grad(loss(splash), (0, 1, 2))(q, k, v), jax.grad(loss(xla), (0, 1, 2))(q, k, v)):
    np.testing.assert_allclose(got, want, atol=1e-4, rtol=1e-4)
  if q_seg is not None:  # queries of segment 0 (packing's padding) attend nothing, as a fully masked row
    out = np.asarray(splash(q, k, v))
    assert np.all(out[np.asarray(q_seg) == 0] == 0)


def test_the_dispatcher_runs_splash_for_pallas_tpu_and_auto_on_a_tpu_with_packed_segments():
  """``scaled_dot_product_attention`` as the models call it, traced for a TPU and run in the Pallas interpreter: the
  explicit ``"pallas_tpu"`` and ``"auto"`` both reach splash and equal ``"xla"`` on packed segments."""
  q, k, v = _qkv(2, 256, 128, 2, 32)
  q_seg = jnp.asarray(np.stack([_packed([100, 90], 256), _packed([256], 256)]))
  kv_seg = jnp.asarray(np.stack([_packed([40, 70], 128), _packed([128], 128)]))
  want = scaled_dot_product_attention(q, k, v, q_segment_ids=q_seg, kv_segment_ids=kv_seg, implementation="xla")
  for implementation in ("pallas_tpu", "auto"):
    with fused.compiling_for("tpu"), fused.interpret_pallas(), fused.record_fused_calls() as calls:
      got = scaled_dot_product_attention(q, k, v, q_segment_ids=q_seg, kv_segment_ids=kv_seg,
                                         implementation=implementation)
    assert [c[0] for c in calls] == ["pallas_tpu"], implementation
    np.testing.assert_allclose(got, want, atol=2e-5, rtol=1e-5)


def test_a_packed_transformer_on_splash_equals_the_transformer_on_xla():
  """The Transformer's packed rows (segment ids and positions restarting per example) through splash attention in
  every layer, encoder self, decoder causal self and cross: the logits of ``implementation="xla"``."""
  from attnjax.data import packing  # pylint: disable=g-import-not-at-top
  from attnjax.models.transformer import Transformer  # pylint: disable=g-import-not-at-top
  rng = np.random.default_rng(0)
  example = lambda n, m: (rng.integers(3, 50, n).astype(np.int32), rng.integers(3, 50, m).astype(np.int32))
  batch = packing.packed_batch([[example(60, 50), example(40, 70)], [example(120, 100)]], 128, 128)
  packed = {key: jnp.asarray(batch[key]) for key in ("src_segment_ids", "tgt_segment_ids", "src_positions",
                                                     "tgt_positions")}
  args = (jnp.asarray(batch["src"]), jnp.asarray(batch["tgt_in"]), jnp.asarray(batch["src_mask"]))
  common = dict(src_vocab_size=50, tgt_vocab_size=50, num_encoder_layers=1, num_decoder_layers=1, d_model=64,
                num_heads=2, d_ff=128, dropout_rate=0.0, attention_dropout_rate=0.0, pre_norm=True)
  xla = Transformer(**common, implementation="xla")
  params = xla.init(jax.random.PRNGKey(0), *args, **packed)
  want = xla.apply(params, *args, **packed)
  with fused.compiling_for("tpu"), fused.interpret_pallas(), fused.record_fused_calls() as calls:
    got = Transformer(**common, implementation="auto").apply(params, *args, **packed)
  assert len(calls) == 3 and {c[0] for c in calls} == {"pallas_tpu"}  # encoder self, decoder self, cross
  assert sorted(c[3] for c in calls) == [False, False, True]  # only the decoder's self-attention is causal
  mask = np.asarray(batch["tgt_mask"], bool)
  np.testing.assert_allclose(np.asarray(got)[mask], np.asarray(want)[mask], atol=1e-4, rtol=1e-4)


def test_segment_ids_are_the_mask_they_stand_for():
  # key padding: every query attends the real keys; packing: only its own example's keys; segment 0 attends nothing
  q_seg = jnp.array([[1, 1, 2, 0]])
  kv_seg = jnp.array([[1, 2, 2, 0, 1]])
  want = np.array([[1, 0, 0, 0, 1], [1, 0, 0, 0, 1], [0, 1, 1, 0, 0], [0, 0, 0, 0, 0]], bool)
  np.testing.assert_array_equal(fused.segment_ids_mask(q_seg, kv_seg)[0, 0], want)
  q, k, v = _qkv(1, 4, 5, 2, 8)
  via_ids = scaled_dot_product_attention(q, k, v, q_segment_ids=q_seg, kv_segment_ids=kv_seg)
  via_mask = scaled_dot_product_attention(q, k, v, mask=jnp.asarray(want)[None, None])
  np.testing.assert_array_equal(via_ids, via_mask)
  with pytest.raises(ValueError, match="q_segment_ids and kv_segment_ids go together"):
    scaled_dot_product_attention(q, k, v, q_segment_ids=q_seg)
  with pytest.raises(ValueError, match=r"must be \[B=1, T=4\] / \[B=1, S=5\]"):
    scaled_dot_product_attention(q, k, v, q_segment_ids=q_seg[:, :3], kv_segment_ids=kv_seg)


def _choose(backend, t=256, s=256, h=64, dtype=jnp.bfloat16, **flags):
  facts = dict(has_mask=False, has_bias=False, dropout=False, return_weights=False, has_segment_ids=True)
  facts.update(flags)
  return fused.choose_implementation(backend=backend, query_length=t, key_length=s, head_dim=h, dtype=dtype, **facts)


def test_auto_choice_per_platform_and_its_fallbacks():
  assert _choose("tpu")[0] == "pallas_tpu"
  assert _choose("tpu", t=200) == ("xla", "splash attention needs T and S multiples of 128, got T=200, S=256")
  impl, reason = _choose("tpu", dropout=True, has_bias=True)
  assert impl == "xla" and "a bias, attention dropout" in reason
  assert _choose("gpu")[0] == "cudnn"
  assert _choose("gpu", dtype=jnp.float32) == ("xla", "cuDNN fused attention needs float16 or bfloat16, got float32")
  assert _choose("gpu", h=72)[0] == "cudnn" and _choose("gpu", h=36)[0] == "xla" and _choose("gpu", h=256)[0] == "xla"
  assert _choose("gpu", has_mask=True)[0] == "xla"
  assert _choose("cpu", t=64, s=64)[0] == "xla"
  assert _choose("cpu", t=1024, s=1024, dtype=jnp.float32)[0] == "blockwise"
  assert _choose("cpu", t=1024, s=1024, has_mask=True, dropout=True)[0] == "blockwise"  # blockwise takes both
  for backend in ("tpu", "gpu", "cpu"):
    impl, reason = _choose(backend, return_weights=True)
    assert impl == "xla" and "weights" in reason


def test_auto_equals_xla_on_this_cpu_for_short_and_long_inputs(monkeypatch):
  from attnjax.kernels import dot_product  # pylint: disable=g-import-not-at-top
  ran = []
  for name, target in (("xla", dot_product), ("blockwise", dot_product.blockwise)):
    attribute = f"{name}_attention"
    original = getattr(target, attribute)
    monkeypatch.setattr(target, attribute, lambda *a, _o=original, _n=name, **k: ran.append(_n) or _o(*a, **k))
  for t, want in ((64, "xla"), (1024, "blockwise")):
    q, k, v = _qkv(1, t, t, 2, 16)
    assert _choose("cpu", t=t, s=t, dtype=jnp.float32)[0] == want
    ran.clear()
    with fused.record_fused_calls() as calls:
      auto = scaled_dot_product_attention(q, k, v, is_causal=True, implementation="auto")
    assert not calls and ran == [want]  # the dispatcher ran what it chose
    ran.clear()
    np.testing.assert_allclose(auto, scaled_dot_product_attention(q, k, v, is_causal=True, implementation="xla"),
                               atol=2e-5)
    assert ran == ["xla"]


@pytest.mark.parametrize("implementation,platform", [("pallas_tpu", "TPU"), ("cudnn", "GPU")])
def test_explicit_fused_implementations_refuse_other_platforms(implementation, platform):
  if jax.default_backend() == platform.lower():
    pytest.skip(f"this process runs on {platform}")
  q, k, v = _qkv(1, 128, 128, 1, 64)
  with pytest.raises(ValueError, match=f"implementation='{implementation}' runs on {platform} only, and this "
                                       f"process's JAX backend is '{jax.default_backend()}'"):
    scaled_dot_product_attention(q, k, v, implementation=implementation)


def test_compiling_for_tpu_traces_splash_and_records_its_flops():
  q, k, v = _qkv(2, 256, 128, 4, 64)
  seg = (jnp.ones((2, 256), jnp.int32), jnp.ones((2, 128), jnp.int32))
  with fused.compiling_for("tpu"), fused.record_fused_calls() as calls:
    out = jax.eval_shape(lambda q, k, v: scaled_dot_product_attention(
        q, k, v, q_segment_ids=seg[0], kv_segment_ids=seg[1], implementation="auto"), q, k, v)
  assert out.shape == q.shape
  assert calls == [("pallas_tpu", (2, 256, 4, 64), (2, 128, 4, 64), False)]
  assert fused.attention_flops(*calls[0][1:]) == 4 * 2 * 4 * 256 * 128 * 64
  assert fused.attention_flops((1, 8, 1, 2), (1, 8, 1, 2), True) == 4 * 8 * 8 * 2 / 2
  with fused.compiling_for("tpu"), pytest.raises(ValueError, match="takes causality and q/kv_segment_ids only, not "
                                                                   "mask"):
    scaled_dot_product_attention(q, k, v, mask=jnp.ones((2, 1, 256, 128), bool), implementation="pallas_tpu")


def test_splash_attention_sharded_over_a_mesh_in_shard_map():
  script = textwrap.dedent("""
      import jax, jax.numpy as jnp, numpy as np
      from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
      from attnjax.kernels import fused, scaled_dot_product_attention
      mesh = Mesh(np.array(jax.devices()).reshape(2, 2), ("data", "tensor"))
      spec = P("data", None, "tensor", None)
      keys = jax.random.split(jax.random.PRNGKey(0), 3)
      q, k, v = (jax.device_put(jax.random.normal(key, (4, 128, 4, 32)), NamedSharding(mesh, spec)) for key in keys)
      seg = jnp.asarray(np.where(np.arange(128)[None] < np.array([[128], [90], [64], [1]]), 1, 0), jnp.int32)
      ones = jnp.ones_like(seg)
      @jax.jit
      def sharded(q, k, v):
        with fused.attention_mesh(mesh):
          return fused.splash_attention(q, k, v, q_segment_ids=ones, kv_segment_ids=seg, is_causal=True, spec=spec,
                                        interpret=True)
      text = sharded.lower(q, k, v).as_text()
      assert "shard_map" in text or "sdy.manual_computation" in text, "no shard_map in the lowered step"
      want = scaled_dot_product_attention(q, k, v, is_causal=True, q_segment_ids=ones, kv_segment_ids=seg)
      print(float(jnp.max(jnp.abs(sharded(q, k, v) - want))))
  """)
  env = cpu_devices_env(4)
  proc = subprocess.run([sys.executable, "-c", script], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
  assert proc.returncode == 0, proc.stderr[-3000:]
  assert float(proc.stdout.strip().splitlines()[-1]) < 2e-5


@pytest.mark.gpu
@pytest.mark.skipif(jax.default_backend() != "gpu",
                    reason="cuDNN attention needs a GPU: ATTNJAX_TEST_PLATFORMS=cuda pytest -m gpu on a GPU host")
@pytest.mark.parametrize("is_causal", [False, True])
def test_cudnn_attention_equals_xla_on_gpu_and_auto_takes_it(is_causal):
  """Values and gradients of cuDNN's fused attention against XLA's in bfloat16, with packed segments and key padding
  (the Transformer's masks), and ``"auto"`` dispatching to it."""
  q, k, v = (x.astype(jnp.bfloat16) for x in _qkv(2, 128, 128, 2, 64))
  seg = jnp.asarray(np.stack([_packed([50, 60], 128), _packed([128], 128)]))
  cotangent = jax.random.normal(jax.random.PRNGKey(1), q.shape).astype(jnp.bfloat16)

  def run(implementation):
    def loss(q, k, v):
      out = scaled_dot_product_attention(q, k, v, is_causal=is_causal, q_segment_ids=seg, kv_segment_ids=seg,
                                         implementation=implementation)
      return jnp.sum(out.astype(jnp.float32) * cotangent.astype(jnp.float32)), out
    with fused.record_fused_calls() as calls:
      (_, out), grads = jax.jit(jax.value_and_grad(loss, argnums=(0, 1, 2), has_aux=True))(q, k, v)
    return out, grads, calls

  want, want_grads, _ = run("xla")
  for implementation in ("cudnn", "auto"):
    got, got_grads, calls = run(implementation)
    assert [c[0] for c in calls] == ["cudnn"], implementation
    np.testing.assert_allclose(np.asarray(got, np.float32), np.asarray(want, np.float32), atol=2e-2)
    for g, w in zip(got_grads, want_grads):
      np.testing.assert_allclose(np.asarray(g, np.float32), np.asarray(w, np.float32), atol=5e-2, rtol=5e-2)
