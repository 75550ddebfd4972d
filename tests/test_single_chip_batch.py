"""One accelerator takes the experiment's whole global batch when it fits, in micro-batches when it does not: the
memory formula that chooses (:func:`attnjax.targets.transformer_step_bytes`) against XLA's own estimate of the
compiled step, and the choice it makes."""

from __future__ import annotations

import pytest

from attnjax import compile as compile_lib
from attnjax import targets
from attnjax.config import base_config


def _tiny(rows: int, length: int, implementation: str = "xla"):
  config = base_config()
  m, d = config.model, config.data
  m.update(num_encoder_layers=2, num_decoder_layers=2, d_model=64, num_heads=4, d_ff=256, max_length=length,
           implementation=implementation)
  d.max_src_len = d.max_tgt_len = length
  d.max_tokens, d.batch_size, d.vocab_size, d.vocab_multiple = None, rows, 512, 1
  d.bucket_boundaries = ()
  targets.use_target(config, "cpu")
  return config


@pytest.mark.parametrize("rows,length,width", [(8, 64, 64), (32, 64, 64), (8, 256, 64), (8, 64, 256),
                                               (32, 128, 256)])
def test_the_formula_tracks_xla_s_estimate_of_the_compiled_step(rows, length, width):
  """Within -25% / +50% of XLA's estimate (this CPU's float32 program) as the rows, the lengths and the width change:
  what :data:`attnjax.targets.HBM_HEADROOM` leaves room for."""
  config = _tiny(rows, length)
  config.model.d_model, config.model.d_ff = width, 4 * width
  xla = compile_lib.compile_experiment(config, "tiny", decode=False).step["total"]
  formula = targets.transformer_step_bytes(config.model, rows, length, length, 512, "float32")
  assert 0.75 * xla <= formula <= 1.5 * xla, (xla, formula)


def test_the_formula_grows_with_the_batch_the_lengths_and_the_attention_scores():
  m = _tiny(8, 64).model
  one, two = (targets.transformer_step_bytes(m, r, 64, 64, 512) for r in (1, 2))
  state = targets.transformer_step_bytes(m, 0, 64, 64, 512)
  assert two - one == pytest.approx(one - state) and one > state > 0
  fused = _tiny(8, 64, implementation="auto").model
  per_row = lambda model, s: targets.transformer_step_bytes(model, 1, s, s, 512) - state
  # the score matrices grow as s²: quadrupled rows of 4x the length cost more than 4x without fusion, 4x with it
  assert per_row(m, 256) > 4 * per_row(m, 64)
  assert per_row(fused, 256) == pytest.approx(4 * per_row(fused, 64))


@pytest.mark.parametrize("name", ["gpu-1xh100", "gpu-1xh200"])
@pytest.mark.parametrize("experiment", ["transformer_base", "transformer_big"])
def test_one_gpu_takes_the_whole_wmt14_batch_in_one_step(experiment, name):
  config = compile_lib.load_experiment(f"experiments/wmt14_en_de/{experiment}.py", name)
  assert config.train.grad_accum_steps == 1
  target = targets.get(name)
  rows = config.data.max_tokens // config.data.max_tgt_len
  need = targets.transformer_step_bytes(config.model, rows, 256, 256, config.data.vocab_size, target.dtype)
  assert need <= targets.HBM_HEADROOM * target.hbm_bytes


def test_a_batch_too_large_for_one_chip_is_taken_in_the_fewest_micro_batches_that_fit():
  config = compile_lib.load_experiment("experiments/wmt14_en_de/transformer_big.py", "tpu-v5p-64")
  config.data.max_tokens = 400_000
  target = targets.get("gpu-1xh100")
  accum = targets.single_device_accumulation(config, target)
  rows = 400_000 // 256
  fits = lambda steps: targets.transformer_step_bytes(config.model, -(-rows // steps), 256, 256, 32000,
                                                       "bfloat16") <= targets.HBM_HEADROOM * target.hbm_bytes
  assert accum > 1 and fits(accum) and not fits(accum - 1)
  targets.use_target(config, "gpu-1xh100")
  assert config.train.grad_accum_steps == accum
  # a slice keeps what the experiment says: the formula is for one chip
  config.train.grad_accum_steps = 1
  targets.use_target(config, "tpu-v5p-64")
  assert config.train.grad_accum_steps == 1


def test_a_row_no_chip_can_hold_is_a_named_error():
  config = compile_lib.load_experiment("experiments/wmt14_en_de/transformer_big.py", "tpu-v5p-64")
  config.model.d_model, config.model.d_ff = 65536, 262144
  with pytest.raises(ValueError, match=r"target gpu-1xh100: one row of \(256, 256\) tokens needs about"):
    targets.single_device_accumulation(config, targets.get("gpu-1xh100"))


@pytest.mark.aot
@pytest.mark.parametrize("name", ["gpu-1xh100", "gpu-1xh200"])
@pytest.mark.parametrize("experiment", ["transformer_base", "transformer_big"])
def test_xla_s_estimate_of_the_one_gpu_step_at_the_chosen_batch_fits_the_chip(experiment, name):
  """The real program at the chosen batch, compiled for the target's one device on this CPU (with JAX's CUDA plugin:
  the GPU program itself), and XLA's memory estimate against the chip; unfused attention, which needs more memory
  than cuDNN's (the CUDA plugin's compiler emits no cuDNN attention without cuDNN's libraries)."""
  config = compile_lib.load_experiment(f"experiments/wmt14_en_de/{experiment}.py", name)
  config.model.implementation = "xla"
  report = compile_lib.compile_experiment(config, experiment, decode=False)
  assert report.batch.startswith(f"{config.data.max_tokens // 256} x")
  assert report.step["total"] <= targets.get(name).hbm_bytes, report.step


def test_a_gpu_target_compiles_without_the_cuda_plugin_with_xla_s_attention_in_place_of_cudnn_s():
  if compile_lib._cuda_plugin():  # pylint: disable=protected-access
    pytest.skip("the CUDA plugin is installed: GPU targets compile the GPU program")
  config = _tiny(8, 64, implementation="auto")
  targets.use_target(config, "gpu-1xh100")
  report = compile_lib.compile_experiment(config, "tiny", decode=False)
  assert report.fits and report.single_chip["micro_batches"] == 1 and report.single_chip["rows"] == 8
  assert report.single_chip["formula_bytes"] == targets.transformer_step_bytes(config.model, 8, 64, 64, 512)
