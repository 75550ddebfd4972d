"""The Transformer's full forward pass against a NumPy transcription of the papers' equations.

Vaswani et al. 2017, "Attention Is All You Need" (§3.1-3.5), with the pre-norm variant x + Sublayer(LayerNorm(x)) of
Xiong et al. 2020 (final LayerNorm after each stack), and the relative positions of Shaw, Uszkoreit & Vaswani 2018.
Random parameters in the model's own tree (the names and shapes of ``model.init``; random biases and LayerNorm
gains/offsets, so that they matter) feed both the model and the computation below, which is written from the
equations, one sentence at a time and without any padding (a padded batch must give the unpadded sentence's
logits), in float64, dropout off. The conventions taken
from the code are only the parameter layouts (Flax: kernels ``[in, out]``, attention kernels ``[D, N, H]`` and
``[N, H, D]``) and LayerNorm's epsilon (1e-6, as T2T).

What the tests pin (each one a single-line change away from a wrong model that the self-consistency tests accept):
the sqrt(d_model) scaling of the embeddings (§3.4), the sinusoids of §3.5, the 1/sqrt(d_k) of eq. 1, the decoder's
causal mask (§3.2.3), the residual/LayerNorm order, the ReLU FFN (eq. 2), tied output logits h·Eᵀ without scaling
(§3.4, as T2T's shared softmax weights) and Shaw's clipping clip(j - i, -k, k) (eqs. 3-4 and §3.2).
"""

import flax
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from attnjax.models.interface import BOS_ID, PAD_ID
from attnjax.models.transformer import Transformer

V, D, N_HEADS, D_FF, K_CLIP = 13, 16, 4, 32, 2
SRC_LENGTHS, TGT_LENGTHS = (7, 4), (6, 3)  # 7 > k + 1: Shaw's clipping is exercised in both directions

VARIANTS = {
    # the paper's model: post-norm, sinusoids, target embedding tied to the output projection
    "post_norm_sinusoidal": dict(pre_norm=False, positional="sinusoidal"),
    "pre_norm_sinusoidal": dict(pre_norm=True, positional="sinusoidal"),
    "post_norm_shaw": dict(pre_norm=False, positional="relative"),
    # one matrix for source embedding, target embedding and the pre-softmax projection (§3.4)
    "pre_norm_shaw_shared_embeddings": dict(pre_norm=True, positional="relative", shared_vocab=True,
                                            share_source_embeddings=True),
}


# ------------------------------------------------------------------------------------------- the equations


def _layer_norm(x, p, eps=1e-6):
  """LayerNorm (Ba et al. 2016): g ⊙ (x - μ) / sqrt(σ² + ε) + b over the feature axis."""
  mu = x.mean(-1, keepdims=True)
  var = ((x - mu) ** 2).mean(-1, keepdims=True)
  return p["scale"] * (x - mu) / np.sqrt(var + eps) + p["bias"]


def _sinusoids(length, d):
  """§3.5: PE(pos, 2i) = sin(pos / 10000^(2i/d_model)), PE(pos, 2i+1) = cos(pos / 10000^(2i/d_model))."""
  pe = np.zeros((length, d))
  for pos in range(length):
    for i in range(d // 2):
      angle = pos / 10000.0 ** (2 * i / d)
      pe[pos, 2 * i] = np.sin(angle)
      pe[pos, 2 * i + 1] = np.cos(angle)
  return pe


def _softmax(e):
  e = e - e.max(-1, keepdims=True)
  return np.exp(e) / np.exp(e).sum(-1, keepdims=True)


def _clip(x, k):
  """Shaw et al. 2018 §3.2: clip(x, k) = max(-k, min(k, x))."""
  return max(-k, min(k, x))


def _multi_head(p, x_q, x_kv, *, causal, shaw_k=None):
  """MultiHead(Q, K, V) = Concat(head_1, ..., head_h) W^O, head_i = Attention(Q W_i^Q, K W_i^K, V W_i^V) (§3.2.2).

  Attention(Q, K, V) = softmax(Q Kᵀ / sqrt(d_k)) V (eq. 1); the decoder's self-attention sets the logits of j > i to
  -∞ (§3.2.3). With ``shaw_k`` (Shaw et al. 2018, eqs. 3-4, tables shared by all heads):

      e_ij = x_i W^Q (x_j W^K + a^K_ij)ᵀ / sqrt(d_z),   z_i = Σ_j α_ij (x_j W^V + a^V_ij),
      a^K_ij = w^K_{clip(j - i, k)},   a^V_ij = w^V_{clip(j - i, k)}.

  The projections carry biases (the code's Flax layers; the paper writes none).
  """
  t, s = len(x_q), len(x_kv)
  heads = []
  for i in range(N_HEADS):
    w_q, w_k, w_v = (p[name]["kernel"][:, i, :] for name in ("query", "key", "value"))  # [d_model, d_k]
    b_q, b_k, b_v = (p[name]["bias"][i] for name in ("query", "key", "value"))
    q, k, v = x_q @ w_q + b_q, x_kv @ w_k + b_k, x_kv @ w_v + b_v
    d_k = q.shape[-1]
    head = np.zeros((t, d_k))
    for a in range(t):
      keys = [b for b in range(s) if not causal or b <= a]
      if shaw_k is None:
        e = np.array([q[a] @ k[b] for b in keys]) / np.sqrt(d_k)
        alpha = _softmax(e)
        head[a] = sum(alpha[n] * v[b] for n, b in enumerate(keys))
      else:
        a_k = [p["rel_key"][_clip(b - a, shaw_k) + shaw_k] for b in keys]
        a_v = [p["rel_value"][_clip(b - a, shaw_k) + shaw_k] for b in keys]
        e = np.array([q[a] @ (k[b] + a_k[n]) for n, b in enumerate(keys)]) / np.sqrt(d_k)
        alpha = _softmax(e)
        head[a] = sum(alpha[n] * (v[b] + a_v[n]) for n, b in enumerate(keys))
    heads.append(head)
  w_o = p["out"]["kernel"].reshape(-1, p["out"]["kernel"].shape[-1])  # [h·d_v, d_model], head-major rows
  return np.concatenate(heads, axis=-1) @ w_o + p["out"]["bias"]


def _ffn(p, x):
  """Eq. 2: FFN(x) = max(0, x W₁ + b₁) W₂ + b₂."""
  return np.maximum(0.0, x @ p["Dense_0"]["kernel"] + p["Dense_0"]["bias"]) @ p["Dense_1"]["kernel"] \
      + p["Dense_1"]["bias"]


def _residual(x, sublayer, norm, pre_norm):
  """Post-norm (§3.1): LayerNorm(x + Sublayer(x)); pre-norm (Xiong et al. 2020): x + Sublayer(LayerNorm(x))."""
  if pre_norm:
    return x + sublayer(_layer_norm(x, norm))
  return _layer_norm(x + sublayer(x), norm)


def _reference_logits(params, src, tgt_in, *, num_layers, pre_norm, shaw_k, embeddings):
  """One sentence, no padding: logits ``[len(tgt_in), V]`` from the equations."""
  e_src, e_tgt = embeddings
  # §3.4: embeddings times sqrt(d_model); §3.5: plus the sinusoids (none with Shaw's relative positions)
  x = e_src[src] * np.sqrt(D)
  y = e_tgt[tgt_in] * np.sqrt(D)
  if shaw_k is None:
    x = x + _sinusoids(len(src), D)
    y = y + _sinusoids(len(tgt_in), D)
  for l in range(num_layers):
    p = params[f"encoder_{l}"]
    x = _residual(x, lambda h, p=p: _multi_head(p["self_attention"], h, h, causal=False, shaw_k=shaw_k),
                  p["attention_block"]["LayerNorm_0"], pre_norm)
    x = _residual(x, lambda h, p=p: _ffn(p["ffn"], h), p["ffn_block"]["LayerNorm_0"], pre_norm)
  if pre_norm:
    x = _layer_norm(x, params["encoder_norm"])
  for l in range(num_layers):
    p = params[f"decoder_{l}"]
    y = _residual(y, lambda h, p=p: _multi_head(p["self_attention"], h, h, causal=True, shaw_k=shaw_k),
                  p["self_attention_block"]["LayerNorm_0"], pre_norm)
    # encoder-decoder attention: queries from the decoder, keys and values from the encoder output (§3.2.3)
    y = _residual(y, lambda h, p=p: _multi_head(p["cross_attention"], h, x, causal=False),
                  p["cross_attention_block"]["LayerNorm_0"], pre_norm)
    y = _residual(y, lambda h, p=p: _ffn(p["ffn"], h), p["ffn_block"]["LayerNorm_0"], pre_norm)
  if pre_norm:
    y = _layer_norm(y, params["decoder_norm"])
  return y @ e_tgt.T  # §3.4: the pre-softmax linear map is the (unscaled) target embedding matrix, transposed


# ------------------------------------------------------------------------------------------------- tests


def _batch(rng):
  src = rng.integers(3, V, size=(2, max(SRC_LENGTHS)))
  tgt = rng.integers(3, V, size=(2, max(TGT_LENGTHS)))
  tgt[:, 0] = BOS_ID
  src[np.arange(src.shape[1])[None] >= np.asarray(SRC_LENGTHS)[:, None]] = PAD_ID
  tgt[np.arange(tgt.shape[1])[None] >= np.asarray(TGT_LENGTHS)[:, None]] = PAD_ID
  return src, tgt


def _random_params(model, src, tgt, rng):
  """Random values for the model's own parameter tree (names and shapes from ``jax.eval_shape(model.init)``, so
  nothing is compiled for the initialisation): kernels N(0, 1/fan_in), embeddings and Shaw's tables N(0, 1/width),
  biases N(0, 0.1²) and LayerNorm gains 1 + N(0, 0.1²). Zero biases and unit gains, as at initialisation, would
  hide their misuse."""
  shapes = jax.eval_shape(model.init, jax.random.PRNGKey(0), jnp.asarray(src), jnp.asarray(tgt))["params"]
  params = {}
  for path, leaf in flax.traverse_util.flatten_dict(flax.linen.meta.unbox(shapes)).items():
    shape, name = leaf.shape, path[-1]
    noise = rng.normal(size=shape)
    if name == "scale":
      params[path] = 1.0 + 0.1 * noise
    elif name == "bias":
      params[path] = 0.1 * noise
    elif name == "kernel":  # attention q/k/v kernels are [D, N, H]: fan-in D; the others [..., out]
      fan_in = shape[0] if path[-2] in ("query", "key", "value") else int(np.prod(shape[:-1]))
      params[path] = noise / np.sqrt(fan_in)
    else:  # embedding tables, rel_key, rel_value
      params[path] = noise / np.sqrt(shape[-1])
  return flax.traverse_util.unflatten_dict(params)


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_transformer_logits_equal_the_papers_equations(x64, variant):
  kw = VARIANTS[variant]
  model = Transformer(src_vocab_size=V, tgt_vocab_size=V, num_encoder_layers=2, num_decoder_layers=2, d_model=D,
                      num_heads=N_HEADS, d_ff=D_FF, dropout_rate=0.0, max_length=16, max_relative_distance=K_CLIP,
                      dtype=jnp.float64, param_dtype=jnp.float64, **kw)
  rng = np.random.default_rng(0)
  src, tgt = _batch(rng)
  params = _random_params(model, src, tgt, rng)
  logits = np.asarray(jax.jit(model.apply)({"params": params}, jnp.asarray(src), jnp.asarray(tgt)))

  e_tgt = params["tgt_embed"]["embedding"]
  e_src = e_tgt if kw.get("share_source_embeddings") else params["src_embed"]["embedding"]
  for b in range(2):
    ref = _reference_logits(params, src[b, :SRC_LENGTHS[b]], tgt[b, :TGT_LENGTHS[b]], num_layers=2,
                            pre_norm=kw["pre_norm"], shaw_k=K_CLIP if kw["positional"] == "relative" else None,
                            embeddings=(e_src, e_tgt))
    np.testing.assert_allclose(logits[b, :TGT_LENGTHS[b]], ref, atol=1e-5, rtol=1e-5,
                               err_msg=f"{variant}, sentence {b}")


def test_sinusoids_are_the_papers_formula_at_hand_computed_points():
  """§3.5 at two points, written out: d = 16, pos = 3, i = 1: angle 3/10000^(2/16) = 3/3.16227766 = 0.948683298."""
  pe = _sinusoids(4, 16)
  np.testing.assert_allclose(pe[3, 2], np.sin(0.9486832980505138), rtol=1e-12)
  np.testing.assert_allclose(pe[3, 3], np.cos(0.9486832980505138), rtol=1e-12)
  np.testing.assert_allclose(pe[0, 0::2], 0.0)
  np.testing.assert_allclose(pe[0, 1::2], 1.0)
