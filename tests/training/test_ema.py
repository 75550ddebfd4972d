"""train.ema_decay: an exponential moving average of the parameters (BiDAF's 0.999), ema ← d · ema + (1 − d) · params
after every update, against a NumPy transcription over the run's own parameters; kept in the checkpoint and resumed
exactly after a crash; what evaluation reads."""

import json
import os

import jax
import numpy as np
import pytest

from attnjax import config as config_lib
from attnjax.config import load_config
from attnjax.training.loop import Experiment, train_and_evaluate
from tests.training.run_steps import tiny_config

pytestmark = pytest.mark.xdist_group("tests/training/test_ema.py")

DECAY = 0.8  # a short average: after 12 steps the initial weights still weigh 0.8^12 = 7%


def _config(steps=12, ema_decay=DECAY):
  config = tiny_config((1, 1, 1))
  t = config.train
  t.steps, t.log_every, t.eval_every, t.checkpoint_every = steps, 4, 1000, 4
  t.best_metric, t.best_mode = "loss", "min"
  with t.unlocked():
    t.ema_decay = ema_decay
  config.eval.num_decode_examples, config.eval.loss_batches, config.eval.batch_size = 8, 1, 8
  return config


def _state(workdir, step=None):
  exp = Experiment(load_config(workdir), workdir)
  restored = exp.restore(step)
  state = jax.device_get(exp.state)
  exp.checkpointer.close()
  return restored, state


def _leaves(tree):
  return [np.asarray(x) for x in jax.tree_util.tree_leaves(tree)]


def _run_keeping_every_step(workdir, config):
  """The initial state and the state after each of the run's steps (a checkpoint of every step): the same seed builds
  the same state, the initial weights the average starts from."""
  config.train.checkpoint_every, config.train.keep_checkpoints = 1, 20
  exp = Experiment(config, workdir)
  initial = jax.device_get(exp.state)
  exp.checkpointer.close()
  train_and_evaluate(config, workdir)
  exp = Experiment(load_config(workdir), workdir)
  states = {0: initial}
  for step in range(1, config.train.steps + 1):
    assert exp.restore(step) == step
    states[step] = jax.device_get(exp.state)
  exp.checkpointer.close()
  return states


@pytest.fixture(scope="module")
def straight(tmp_path_factory):
  """A 12-step run that keeps a checkpoint of every step: the parameters and their average after each, and before
  the first."""
  workdir = str(tmp_path_factory.mktemp("ema"))
  return workdir, _run_keeping_every_step(workdir, _config())


def _check_recursion(states, decays, units):
  """The recursion in float64 from the initial weights, over the parameters after each step, ``decays[t]`` the decay
  of the update after t others; each float32 rounding within a unit of |ema| + |p| (``units`` of them a step), the
  error so far damped by the decay."""
  average = [x.astype(np.float64) for x in _leaves(states[0].params)]
  unit = np.finfo(np.float32).eps / 2
  bound = [np.zeros_like(a) for a in average]
  for step, d in enumerate(decays, start=1):
    params = _leaves(states[step].params)
    average = [d * a + (1 - d) * p for a, p in zip(average, params)]
    bound = [d * e + units * unit * (np.abs(a) + np.abs(p)) for e, a, p in zip(bound, average, params)]
    for ours, exact, e in zip(_leaves(states[step].ema_params), average, bound):
      assert np.all(np.abs(ours - exact) <= e), (step, np.max(np.abs(ours - exact) / e))


def test_the_average_is_the_papers_recursion_over_the_runs_parameters(straight):
  _, states = straight
  assert all(np.array_equal(a, b) for a, b in zip(_leaves(states[0].ema_params), _leaves(states[0].params)))
  # float32: the two products and the sum rounded
  _check_recursion(states, [DECAY] * 12, units=3)
  # the average is not the parameters: it lags them
  assert max(np.abs(a - p).max() for a, p in zip(_leaves(states[12].ema_params), _leaves(states[12].params))) > 1e-3


def test_the_warmed_up_decay_is_min_of_d_and_one_plus_t_over_ten_plus_t(tmp_path):
  """``train.ema_warmup``: the update after t others decays by min(d, (1 + t) / (10 + t)) (0.1 for the first, so the
  initial weights keep a tenth after one update, not 0.999 of the average)."""
  config = _config(ema_decay=0.999)
  with config.train.unlocked():
    config.train.ema_warmup = True
  states = _run_keeping_every_step(str(tmp_path), config)
  decays = [min(0.999, (1 + t) / (10 + t)) for t in range(12)]
  # two more roundings than the plain recursion: the decay's division (a unit of d) and 1 - d taken from the rounded d
  # (a unit of 1 - d); to first order the error is within u (3 |ema| + (4 - 3d) |p|), inside 5 u (|ema| + |p|)
  _check_recursion(states, decays, units=5)
  # the constant decay's average would still be almost the initial weights; the warmed-up one has left them
  moved = lambda tree: max(np.abs(a - b).max() for a, b in zip(_leaves(tree), _leaves(states[0].params)))
  assert moved(states[12].ema_params) > 0.3 * moved(states[12].params)


def test_a_crash_resumes_the_average_exactly(straight, tmp_path):
  class Crash(Exception):
    pass

  def crash(step):
    if step == 6:
      raise Crash()

  workdir = str(tmp_path)
  with pytest.raises(Crash):
    train_and_evaluate(_config(), workdir, on_step=crash)
  train_and_evaluate(_config(), workdir)  # from step 4's checkpoint
  step, state = _state(workdir)
  assert step == 12
  for a, b in zip(_leaves((state.params, state.ema_params)), _leaves((straight[1][12].params,
                                                                    straight[1][12].ema_params))):
    np.testing.assert_array_equal(a, b)


def test_evaluation_reads_the_average(straight):
  from attnjax import trained  # pylint: disable=g-import-not-at-top
  workdir, states = straight
  loaded = trained.load_workdir(workdir, checkpoint="12")
  for a, b in zip(_leaves(jax.device_get(loaded.params)), _leaves(states[12].ema_params)):
    np.testing.assert_array_equal(a, b)
  # without the option the same checkpoint's parameters (a config without it reads them)
  config = load_config(workdir)
  config.train.ema_decay = None
  plain = trained.load_workdir(workdir, checkpoint="12", config=config)
  for a, b in zip(_leaves(jax.device_get(plain.params)), _leaves(states[12].params)):
    np.testing.assert_array_equal(a, b)


def test_evaluation_scores_the_parameters_beside_the_average_when_asked(straight):
  """``weights="params"`` reads the same checkpoint's parameters and writes its files beside the average's, which
  stay what the report reads."""
  from attnjax import scoring, trained  # pylint: disable=g-import-not-at-top
  workdir, states = straight
  plain = trained.load_workdir(workdir, checkpoint="12", weights="params")
  assert plain.weights == "params"
  for a, b in zip(_leaves(jax.device_get(plain.params)), _leaves(states[12].params)):
    np.testing.assert_array_equal(a, b)
  averaged = scoring.evaluate_checkpoint(workdir, split="validation", checkpoint="12", limit=8)
  raw = scoring.evaluate_checkpoint(workdir, split="validation", checkpoint="12", limit=8, weights="params")
  assert averaged["weights"] == "average" and raw["weights"] == "params"
  assert raw["hypotheses"].endswith("hypotheses.validation.step12.params.txt")
  assert averaged["hypotheses"].endswith("hypotheses.validation.step12.txt")
  with open(os.path.join(workdir, "metrics.validation.json")) as f:
    assert json.load(f)["weights"] == "average"
  with open(os.path.join(workdir, "metrics.validation.params.json")) as f:
    assert json.load(f) == raw


def test_a_run_without_the_average_keeps_none_and_a_bad_decay_is_named(tmp_path):
  config = _config(steps=1, ema_decay=None)
  exp = Experiment(config, str(tmp_path / "plain"))
  assert exp.state.ema_params is None and exp.params is exp.state.params
  exp.checkpointer.close()
  from attnjax import trained  # pylint: disable=g-import-not-at-top
  config_lib.save_config(config, str(tmp_path / "plain"))
  with pytest.raises(ValueError, match="weights='average': .*plain kept no moving average"):
    trained.load_workdir(str(tmp_path / "plain"), weights="average")
  with pytest.raises(ValueError, match="weights must be one of auto, average, params, got 'ema'"):
    trained.load_workdir(str(tmp_path / "plain"), weights="ema")
  for bad in (0.0, 1.0, 1.5):
    with pytest.raises(ValueError, match=r"config.train.ema_decay: must be in \(0, 1\)"):
      config_lib.validate(_config(ema_decay=bad))
  warm_without_average = _config(ema_decay=None)
  with warm_without_average.train.unlocked():
    warm_without_average.train.ema_warmup = True
  with pytest.raises(ValueError, match="config.train.ema_warmup: .* train.ema_decay is None"):
    config_lib.validate(warm_without_average)


def test_a_checkpoint_written_before_the_average_existed_restores_and_turning_it_on_is_a_change(tmp_path):
  """A train state without the field (as every checkpoint before it was written) restores into today's state without
  an average, step and arrays as saved; a run that asks for an average there stops naming it, and nothing moves."""
  from typing import Any  # pylint: disable=g-import-not-at-top
  import flax.struct  # pylint: disable=g-import-not-at-top
  import jax.numpy as jnp  # pylint: disable=g-import-not-at-top
  from attnjax.runtime.checkpointing import Checkpointer, CheckpointRestoreError  # pylint: disable=g-import-not-at-top
  from attnjax.training.state import TrainState  # pylint: disable=g-import-not-at-top

  @flax.struct.dataclass
  class EarlierTrainState:
    step: Any
    params: Any
    opt_state: Any
    rng: Any

  arrays = dict(step=jnp.asarray(4, jnp.int32), params={"w": jnp.arange(3.0)}, opt_state={"m": jnp.ones(3)},
                rng=jnp.asarray([1, 2], jnp.uint32))
  directory = str(tmp_path / "checkpoints")
  old = Checkpointer(directory, async_save=False)
  old.save(4, EarlierTrainState(**arrays), {"position": 1}, force=True)
  old.close()
  abstract = lambda state: jax.tree_util.tree_map(lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype,
                                                                                  sharding=x.sharding), state)
  checkpointer = Checkpointer(directory, async_save=False)
  state, data, step, _ = checkpointer.restore(abstract(TrainState(**arrays)))
  assert step == 4 and data == {"position": 1} and isinstance(state, TrainState) and state.ema_params is None
  for a, b in zip(jax.tree_util.tree_leaves(state), jax.tree_util.tree_leaves(TrainState(**arrays))):
    np.testing.assert_array_equal(a, b)
  with pytest.raises(CheckpointRestoreError, match="ema_params.*missing from the checkpoint"):
    checkpointer.restore(abstract(TrainState(**arrays, ema_params={"w": jnp.zeros(3)})))
  assert checkpointer.steps() == [4]
  checkpointer.close()
  # a state whose average is None written as an empty node (the dataclass saved as it is) restores too
  from attnjax.runtime import checkpointing  # pylint: disable=g-import-not-at-top
  with pytest.MonkeyPatch.context() as patch:
    patch.setattr(checkpointing, "to_checkpoint_tree", lambda state, keep_empty=(): state)
    writer = Checkpointer(str(tmp_path / "as_is"), async_save=False)
    writer.save(4, TrainState(**arrays), {"position": 1}, force=True)
    writer.close()
  checkpointer = Checkpointer(str(tmp_path / "as_is"), async_save=False)
  state, _, step, _ = checkpointer.restore(abstract(TrainState(**arrays)))
  assert step == 4 and state.ema_params is None and checkpointer.steps() == [4]
  checkpointer.close()
