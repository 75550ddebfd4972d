"""ConvS2S's full forward pass against a NumPy transcription of Gehring et al. 2017 ("Convolutional Sequence to
Sequence Learning", §3.1-3.4).

Random parameters in the model's own tree (the names and shapes of ``model.init``; random biases and weight-norm
gains, so that they matter) feed both the model and the computation below, which is written from the paper, one
sentence at a time without padding (a padded batch must give the unpadded sentence's logits), in float64, dropout
off. Taken from the code's documentation, not the paper:
the parameter layouts (Flax ``[in, out]`` kernels, convolution kernels ``[k, C_in, 2C]`` whose tap 0 multiplies the
leftmost input of the window), weight normalisation W = g·V/‖V‖ (Salimans & Kingma 2016, used by the paper's
fairseq code), the 0-based positions, and the two choices the paper leaves open that the module docstring documents:
(h_i + W_c c_i + b_c)·sqrt(0.5), and d_i = W_d h_i + b_d + g_i without fairseq's extra sqrt(0.5).
"""

import flax
import jax
import jax.numpy as jnp
import numpy as np

from attnjax.models.convs2s import ConvS2S
from attnjax.models.interface import BOS_ID, PAD_ID

V, E, C, K_WIDTH, LAYERS = 11, 8, 6, 3, 2  # C != E so that a mixed-up projection cannot pass
SRC_LENGTHS, TGT_LENGTHS = (7, 4), (6, 3)


# ------------------------------------------------------------------------------------------- the equations


def _linear(p, x):
  """A weight-normalised linear map (Salimans & Kingma 2016): x (g ⊙ V/‖V‖_columns) + b."""
  v = p["kernel_v"].reshape(-1, p["kernel_v"].shape[-1])  # a convolution's [k, C_in, 2C] -> [k·C_in, 2C]
  w = p["kernel_g"] * v / np.sqrt((v ** 2).sum(axis=0, keepdims=True))
  return x @ w + p["bias"]


def _sigmoid(x):
  return 1.0 / (1.0 + np.exp(-x))


def _glu(y):
  """Dauphin et al. 2017: v([A B]) = A ⊗ σ(B), A the first half of the 2C channels."""
  a, b = y[..., :C], y[..., C:]
  return a * _sigmoid(b)


def _conv_glu(p, h, offsets):
  """§3.2: v(W [h_{i+o} for o in offsets] + b_w), positions outside the sentence being zero vectors."""
  n = len(h)
  out = np.zeros((n, C))
  for i in range(n):
    window = [h[i + o] if 0 <= i + o < n else np.zeros(C) for o in offsets]
    out[i] = _glu(_linear(p, np.concatenate(window)))
  return out


def _softmax(e):
  e = np.exp(e - e.max())
  return e / e.sum()


def _reference(params, src, tgt_in):
  """One sentence, no padding: (logits ``[len(tgt_in), V]``, last layer's attention ``[len(tgt_in), len(src)]``)."""
  m = len(src)
  half = (K_WIDTH - 1) // 2
  # §3.1: e_j = w_j + p_j, g_i = w_i + p_i (learned absolute positions)
  e = params["src_embed"]["embedding"][src] + params["src_positions"]["embedding"][np.arange(m)]
  g = params["tgt_embed"]["embedding"][tgt_in] + params["tgt_positions"]["embedding"][np.arange(len(tgt_in))]

  # encoder: E -> C, blocks h^l_i = v(W^l [h^{l-1}_{i-k/2}, ..., h^{l-1}_{i+k/2}] + b^l_w) + h^{l-1}_i, each residual
  # sum scaled by sqrt(0.5) (§3.4), then C -> E: z^u
  h = _linear(params["encoder_in"], e)
  for l in range(LAYERS):
    h = (_conv_glu(params[f"encoder_blocks_{l}"]["conv"], h, range(-half, half + 1)) + h) * np.sqrt(0.5)
  z = _linear(params["encoder_out"], h)

  # decoder: E -> C, then per layer a causal convolution (the window h_{i-k+1} ... h_i) and multi-step attention
  h = _linear(params["decoder_in"], g)
  for l in range(LAYERS):
    p = params[f"decoder_blocks_{l}"]
    conv = _conv_glu(p["conv"], h, range(-(K_WIDTH - 1), 1))
    out = np.zeros_like(conv)
    attention = np.zeros((len(tgt_in), m))
    for i in range(len(tgt_in)):
      d = _linear(p["attention"]["in_proj"], conv[i]) + g[i]  # §3.3: d^l_i = W^l_d h^l_i + b^l_d + g_i
      a = _softmax(np.array([d @ z[j] for j in range(m)]))  # a^l_ij = softmax_j(d^l_i · z^u_j)
      attention[i] = a
      c = sum(a[j] * (z[j] + e[j]) for j in range(m))  # c^l_i = Σ_j a^l_ij (z^u_j + e_j)
      c = c * m * np.sqrt(1.0 / m)  # §3.4: "scale the output of the attention layer by m sqrt(1/m)"
      # §3.3: c^l_i is added to h^l_i (projected back to C), the two-branch sum scaled by sqrt(0.5) (§3.4)
      out[i] = (conv[i] + _linear(p["attention"]["out_proj"], c)) * np.sqrt(0.5)
    h = (out + h) * np.sqrt(0.5)  # the block's residual connection, scaled (§3.4)

  # §3.2: p(y_{i+1} | y_1..y_i, x) = softmax(W_o h^L_i + b_o), after the linear map C -> E
  return _linear(params["logits_proj"], _linear(params["decoder_out"], h)), attention


# ------------------------------------------------------------------------------------------------- tests


def _random_params(model, src, tgt, rng):
  """Random values for the model's own parameter tree (names and shapes from ``jax.eval_shape(model.init)``, so
  nothing is compiled for the initialisation), rounded to the float32 they are stored in: tables N(0, 1/E), weight-norm
  directions V ~ N(0, 1) (their scale cancels), gains g = 1 + N(0, 0.1²), biases N(0, 0.1²). Zero biases and gains
  equal to ‖V‖, as at initialisation, would hide their misuse."""
  shapes = jax.eval_shape(model.init, jax.random.PRNGKey(0), jnp.asarray(src), jnp.asarray(tgt))["params"]
  params = {}
  for path, leaf in flax.traverse_util.flatten_dict(shapes).items():
    noise = rng.normal(size=leaf.shape)
    params[path] = {"embedding": noise / np.sqrt(E), "kernel_v": noise, "kernel_g": 1.0 + 0.1 * noise,
                    "bias": 0.1 * noise}[path[-1]].astype(np.float32)
  return flax.traverse_util.unflatten_dict(params)


def test_convs2s_logits_and_attention_equal_the_papers_equations(x64):
  rng = np.random.default_rng(0)
  src = rng.integers(3, V, size=(2, max(SRC_LENGTHS)))
  tgt = rng.integers(3, V, size=(2, max(TGT_LENGTHS)))
  tgt[:, 0] = BOS_ID
  src[np.arange(src.shape[1])[None] >= np.asarray(SRC_LENGTHS)[:, None]] = PAD_ID
  tgt[np.arange(tgt.shape[1])[None] >= np.asarray(TGT_LENGTHS)[:, None]] = PAD_ID
  model = ConvS2S(src_vocab_size=V, tgt_vocab_size=V, embed_dim=E, hidden_dim=C, encoder_layers=LAYERS,
                  decoder_layers=LAYERS, kernel_width=K_WIDTH, dropout_rate=0.0, max_length=16, dtype=jnp.float64)
  params = _random_params(model, src, tgt, rng)

  @jax.jit
  def forward(params, src, tgt):
    memory = model.apply({"params": params}, src, method=model.encode)
    out = model.apply({"params": params}, tgt, memory, return_attention=True, method=model.decode)
    return out.logits, out.attention

  logits, attention = (np.asarray(x) for x in forward(params, jnp.asarray(src), jnp.asarray(tgt)))
  params64 = jax.tree_util.tree_map(lambda x: np.asarray(x, np.float64), params)
  for b in range(2):
    ref_logits, ref_attention = _reference(params64, src[b, :SRC_LENGTHS[b]], tgt[b, :TGT_LENGTHS[b]])
    np.testing.assert_allclose(logits[b, :TGT_LENGTHS[b]], ref_logits, atol=1e-5, rtol=1e-5, err_msg=f"sentence {b}")
    # the returned (last layer's) attention is a_ij = softmax_j(d_i · z_j), nothing on padded source positions
    np.testing.assert_allclose(attention[b, :TGT_LENGTHS[b], :SRC_LENGTHS[b]], ref_attention, atol=1e-6, rtol=1e-6)
    np.testing.assert_array_equal(attention[b, :, SRC_LENGTHS[b]:], 0.0)
