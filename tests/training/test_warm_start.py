"""train.init_from: a run that starts from another run's checkpoint (See et al.'s final coverage phase)."""

import json

import jax
import numpy as np
import pytest

from attnjax import config as config_lib
from attnjax.training import loop, warm_start
from attnjax.training.loop import train_and_evaluate


def _config(**model):
  config = config_lib.base_config()
  config.data.train_examples, config.data.validation_examples, config.data.test_examples = 64, 16, 16
  config.data.max_tokens = 256
  config.data.bucket_boundaries = None  # one batch shape: each run compiles one train step, not one per bucket
  config.model = dict(name="rnn_seq2seq", attention="bahdanau", embed_dim=8, hidden_dim=8, **model)
  t = config.train
  t.steps, t.eval_every, t.checkpoint_every, t.log_every, t.warmup_steps = 4, 4, 2, 2, 0
  t.optimizer, t.schedule, t.learning_rate, t.label_smoothing = "adam", "constant", 1e-2, 0.0
  config.eval.decode, config.eval.num_decode_examples, config.eval.max_len_b = "greedy", 4, 4
  config.data.vocab_multiple = 8
  return config


def _params(workdir, step):
  from attnjax.trained import load_workdir  # pylint: disable=g-import-not-at-top
  return jax.device_get(load_workdir(str(workdir), checkpoint=str(step)).params)


def test_a_coverage_phase_starts_from_the_copy_models_checkpoint_and_continues_its_step_and_clock(tmp_path,
                                                                                                  monkeypatch):
  first, second = tmp_path / "pointer_generator", tmp_path / "coverage"
  train_and_evaluate(_config(copy=True), str(first))
  config = _config(copy=True, coverage=True)
  config.train.steps, config.train.init_from = 6, "../pointer_generator"  # relative to the new workdir
  config.train.learning_rate = 0.0  # the parameters stay what the warm start made them
  now = [0.0]  # the second run's clock: one second per optimizer step, nothing else
  monkeypatch.setattr(loop, "_clock", lambda: now[0])
  result = train_and_evaluate(config, str(second), on_step=lambda step: now.__setitem__(0, now[0] + 1.0))
  assert result["step"] == 6
  assert (second / "vocab.json").read_text() == (first / "vocab.json").read_text()
  # at the warm start: every shared parameter is the checkpoint's; w_coverage is new
  before = _params(first, 4)
  after = _params(second, 6)
  assert "w_coverage" in after["decoder"] and "w_coverage" not in before["decoder"]
  shared = jax.tree_util.tree_map(lambda x: x, {k: v for k, v in after.items()})
  shared["decoder"] = {k: v for k, v in after["decoder"].items() if k != "w_coverage"}
  jax.tree_util.tree_map(np.testing.assert_array_equal, shared, before)
  # one phase: the second run's clock starts where the first's stopped, and adds its own two steps' seconds
  meta = json.loads((second / "checkpoints" / "6" / "meta" / "metadata").read_text())
  first_meta = json.loads((first / "checkpoints" / "4" / "meta" / "metadata").read_text())
  assert first_meta["train_seconds"] > 0
  assert meta["train_seconds"] == first_meta["train_seconds"] + 2.0


def test_a_warm_start_that_would_begin_with_its_time_used_up_is_refused_naming_the_fix(tmp_path):
  train_and_evaluate(_config(copy=True), str(tmp_path / "pointer_generator"))
  config = _config(copy=True, coverage=True)
  config.train.steps, config.train.init_from = 6, "../pointer_generator"
  config.train.time_limit_minutes = 1e-4  # less than the first run trained
  with pytest.raises(ValueError, match=r"train.init_from=.*pointer_generator: its checkpoint of step 4 was trained "
                                       r".* minutes, already train.time_limit_minutes=0.0001: set "
                                       r"train.init_at_minutes below the limit"):
    train_and_evaluate(config, str(tmp_path / "coverage"))


def test_merge_params_takes_the_shared_leaves_and_names_a_mismatch():
  own = {"a": {"w": np.zeros((2, 3))}, "new": np.ones(4)}
  source = {"a": {"w": np.full((2, 3), 7.0)}}
  merged, new = warm_start.merge_params(own, source)
  assert (merged["a"]["w"] == 7.0).all() and (merged["new"] == 1.0).all() and new == ["new"]
  with pytest.raises(ValueError, match="parameter a/w has shape .2, 3. in the checkpoint and .3, 3."):
    warm_start.merge_params({"a": {"w": np.zeros((3, 3))}}, source)
  with pytest.raises(ValueError, match="the model has no parameter a/w"):
    warm_start.merge_params({"b": np.zeros(1)}, source)


def test_choose_step_takes_the_newest_checkpoint_within_the_minutes(tmp_path):
  class Fake:
    directory = "ckpt"

    def steps(self):
      return [100, 200, 300]

    def restore_bookkeeping(self, step):
      return {}, {"train_seconds": 60.0 * step / 10}  # 10, 20, 30 minutes

  assert warm_start.choose_step(Fake(), 25.0)[0] == 200
  assert warm_start.choose_step(Fake(), None)[0] == 300
  with pytest.raises(ValueError, match="init_at_minutes=5.0: every checkpoint in ckpt was trained longer"):
    warm_start.choose_step(Fake(), 5.0)
  # a step named exactly wins over the clock; a step without a checkpoint is refused, naming the steps there
  assert warm_start.choose_step(Fake(), 25.0, 300) == (300, {"train_seconds": 1800.0})
  assert warm_start.choose_step(Fake(), None, 100)[0] == 100
  with pytest.raises(ValueError, match=r"init_at_step=250: no checkpoint of that step in ckpt \(it has 100, 200, 300\)"):
    warm_start.choose_step(Fake(), None, 250)


def test_the_optimiser_state_of_shared_parameters_and_the_update_count_carry_over():
  """Adam's moments of the shared parameters and its count (which the schedule reads: no second warm-up) come from
  the source; a new parameter's moments start at zero."""
  import jax.numpy as jnp  # pylint: disable=g-import-not-at-top
  import optax  # pylint: disable=g-import-not-at-top
  tx = optax.chain(optax.clip_by_global_norm(1.0), optax.adam(optax.linear_schedule(0.0, 1e-3, 200)))
  source_params = {"w": jnp.ones(3)}
  source_state = tx.init(source_params)
  for _ in range(2):
    _, source_state = tx.update({"w": jnp.full(3, 0.5)}, source_state, source_params)
  own = tx.init({"w": jnp.zeros(3), "w_coverage": jnp.zeros(2)})
  merged = warm_start.merge_state_tree(own, source_state)
  adam = merged[1][0]
  np.testing.assert_allclose(adam.mu["w"], source_state[1][0].mu["w"])
  assert float(jnp.abs(adam.mu["w"]).sum()) > 0 and float(jnp.abs(adam.mu["w_coverage"]).sum()) == 0
  assert int(adam.count) == 2 and int(merged[1][1].count) == 2  # scale_by_adam's and the schedule's counts
