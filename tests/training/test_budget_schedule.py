"""train.schedule = "budget_linear": the learning rate tied to the time budget (warm-up over steps, then linear decay
to 0 when train.time_limit_minutes is spent), against its formula, against optax's AdamW at the same rate, and
through the training loop on a clock the test drives, across a restart."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from attnjax import config as config_lib
from attnjax.report import read_scalars
from attnjax.training import loop, optim
from attnjax.training.loop import train_and_evaluate


@pytest.mark.parametrize("step, progress, warmup", [(0, 0.0, 10), (4, 0.1, 10), (9, 0.2, 10), (50, 0.5, 10),
                                                    (50, 0.999, 10), (60, 1.0, 10), (60, 1.3, 10), (0, 0.25, 0)])
def test_the_rate_is_the_warm_up_times_the_budget_left(step, progress, warmup):
  schedule = optim.BudgetSchedule(1e-3, warmup)
  expected = 1e-3 * (min((step + 1) / warmup, 1.0) if warmup else 1.0) * max(1.0 - progress, 0.0)
  assert float(schedule(step, progress)) == pytest.approx(expected, rel=1e-4, abs=1e-12)  # float32


def test_a_budget_step_is_adamw_at_the_rate_of_that_moment():
  """Weight decay, gradient clipping, several steps at different shares of the budget: the same parameters as
  optax's AdamW stepped at each moment's rate.

  Both sides get the same gradients, exactly: the train step's loss is linear in the parameters, ``s_t · <G, p>``
  with a fixed ``G`` and a scale ``s_t`` the step's batch carries, so its gradient is the one product ``s_t · G``
  however the step is compiled. (With the model's own loss the two sides differentiate in two compiled programs, and
  Adam scales the rounding of a gradient that is 0 but for rounding, such as a key bias's, up to the rate: a
  comparison of two CPUs' float32 rounding, not of the optimiser.) What is left to differ is the optimiser's own
  elementwise float32 arithmetic and the clipping norm's sum, each a few units of float32's rounding on the update
  and on the parameter, which the bound below counts step by step."""
  import optax  # pylint: disable=g-import-not-at-top
  from attnjax.models.registry import build_model  # pylint: disable=g-import-not-at-top
  from attnjax.runtime import partitioning  # pylint: disable=g-import-not-at-top
  from attnjax.training import steps as steps_lib  # pylint: disable=g-import-not-at-top
  from attnjax.training.state import create_train_state  # pylint: disable=g-import-not-at-top
  config = config_lib.base_config()
  config.model.update(num_encoder_layers=1, num_decoder_layers=1, d_model=16, num_heads=2, d_ff=32, dropout_rate=0.0)
  t = config.train
  t.schedule, t.learning_rate, t.warmup_steps, t.time_limit_minutes = "budget_linear", 3e-3, 2, 10.0
  t.weight_decay, t.grad_clip_norm, t.adam_b2, t.adam_eps = 0.01, 0.5, 0.99, 1e-8
  model = build_model(config.model.to_dict(), src_vocab_size=32, tgt_vocab_size=32)
  mesh = partitioning.create_mesh(config.mesh.axes, (1, 1, 1), devices=jax.devices()[:1])
  tx, schedule = optim.make_optimizer(t, 16)
  state, sharding, _ = create_train_state(model, tx, mesh, config.mesh.rules, seed=0)
  params = jax.tree_util.tree_map(np.array, jax.device_get(state.params))  # copies: the step donates the state
  rng = np.random.default_rng(0)
  # |G| in [0.5, 1.5): every coordinate moves, none sits at Adam's epsilon
  direction = jax.tree_util.tree_map(
      lambda p: (rng.choice([-1.0, 1.0], p.shape) * rng.uniform(0.5, 1.5, p.shape)).astype(np.float32), params)

  def linear_loss(model, p, batch, rng, deterministic):
    del model, rng, deterministic
    s = batch["scale"][0, 0]
    loss = s * sum(jnp.vdot(g, x) for g, x in zip(jax.tree_util.tree_leaves(direction), jax.tree_util.tree_leaves(p)))
    return {"loss_sum": loss, "nll_sum": loss, "ntokens": jnp.float32(1.0)}

  step = steps_lib.make_train_step(model, tx, schedule, state_sharding=sharding, mesh=mesh, rules=config.mesh.rules,
                                   loss_fn=linear_loss)
  progresses, scales = [0.0, 0.3, 0.7, 1.0], [1.0, -0.5, 2.0, 0.25]  # the scales make Adam's moments disagree
  # the reference: optax's AdamW with the same clipping, its rate set for each step
  reference = optax.inject_hyperparams(lambda learning_rate: optax.chain(
      optax.clip_by_global_norm(t.grad_clip_norm),
      optax.adamw(learning_rate, b1=t.adam_b1, b2=t.adam_b2, eps=t.adam_eps, weight_decay=t.weight_decay,
                  mask=lambda p: jax.tree_util.tree_map(lambda x: x.ndim > 1, p))))(learning_rate=0.0)
  ref_state = reference.init(params)
  ref_params = params
  # float32 rounding left between the two: per step, a few roundings of the parameter (its update added, its decay)
  # and a few of the update (the clipping norm, the moments, the square root, the division, the rate), each of at
  # most one unit of float32's rounding, 2^-24 relative: 16 units of both, summed over the steps, covers them
  unit = np.finfo(np.float32).eps / 2
  bound = jax.tree_util.tree_map(lambda p: np.zeros(p.shape), params)
  for i, (progress, s) in enumerate(zip(progresses, scales)):
    batch = {"scale": np.full((2, 6), s, np.float32)}
    state, metrics = step(state, batch, *steps_lib.step_arguments(schedule, progress))
    rate = 3e-3 * min((i + 1) / 2, 1.0) * (1.0 - progress)
    assert float(metrics["learning_rate"]) == pytest.approx(rate, rel=1e-6, abs=1e-12)
    ref_state.hyperparams["learning_rate"] = rate
    grads = jax.tree_util.tree_map(lambda g: np.float32(s) * g, direction)
    updates, ref_state = reference.update(grads, ref_state, ref_params)
    bound = jax.tree_util.tree_map(lambda b, p, u: b + 16 * unit * (np.abs(p) + np.abs(u)), bound, ref_params,
                                   updates)
    ref_params = optax.apply_updates(ref_params, updates)
  for a, b, e, p in zip(*(jax.tree_util.tree_leaves(x) for x in (jax.device_get(state.params), ref_params, bound,
                                                                   params))):
    assert np.all(np.abs(a - b) <= e), np.max(np.abs(a - b) / e)
    assert np.all(np.abs(b - p) > 100 * e)  # the steps moved every parameter by far more than the bound
  assert float(metrics["learning_rate"]) == 0.0  # the last step ran at the end of the budget


def _config():
  config = config_lib.base_config()
  config.data.train_examples, config.data.validation_examples, config.data.test_examples = 64, 16, 16
  config.data.max_tokens = 256
  config.data.bucket_boundaries = None
  config.model = dict(name="rnn_seq2seq", attention="bahdanau", embed_dim=8, hidden_dim=8)
  t = config.train
  t.steps, t.eval_every, t.checkpoint_every, t.log_every, t.sync_every, t.warmup_steps = 100, 100, 1, 1, 1, 2
  t.optimizer, t.schedule, t.learning_rate, t.label_smoothing = "adam", "budget_linear", 1e-2, 0.0
  t.time_limit_minutes = 1.0  # 60 seconds: 6 s a step on the test's clock, so 10 steps
  config.eval.decode, config.eval.num_decode_examples, config.eval.max_len_b = "greedy", 4, 4
  config.data.vocab_multiple = 8
  return config


def test_the_rate_reaches_zero_when_the_budget_ends_also_across_a_restart(tmp_path, monkeypatch):
  now = [0.0]  # the run's clock: six seconds per optimizer step, nothing else
  monkeypatch.setattr(loop, "_clock", lambda: now[0])
  workdir = tmp_path / "run"

  class Killed(Exception):
    pass

  def tick_and_kill_after(kill):
    def on_step(step):
      now[0] += 6.0
      if step == kill:
        raise Killed
    return on_step

  with pytest.raises(Killed):  # killed after step 4, before its checkpoint
    train_and_evaluate(_config(), str(workdir), on_step=tick_and_kill_after(4))
  now[0] = 1000.0  # a new process: its clock starts anywhere, the run's training seconds come from the checkpoint
  result = train_and_evaluate(_config(), str(workdir), on_step=tick_and_kill_after(-1))
  # the loop stops once the training seconds exceed the budget: step 11 starts at 60 s, with rate 0, and is the last
  assert result["step"] == 11
  rates = dict(read_scalars(str(workdir / "tensorboard"))["train/learning_rate"])
  # step s (1-based) ran with p = (its seconds before it) / 60; the resumed run restarted from step 3's checkpoint
  # (step 4 was killed before it saved) with that checkpoint's 18 training seconds, and ran steps 4 to 11 (the killed
  # process's last summaries may not have reached the disk)
  assert set(range(4, 12)) <= set(rates) <= set(range(1, 12))
  for s, rate in rates.items():
    expected = 1e-2 * min(s / 2, 1.0) * max(1.0 - 6.0 * (s - 1) / 60.0, 0.0)
    assert rate == pytest.approx(expected, rel=1e-5, abs=1e-12), s
  assert rates[10] == pytest.approx(1e-3) and rates[11] == 0.0


def test_budget_linear_without_a_time_budget_is_one_line():
  config = _config()
  config.train.time_limit_minutes = None
  with pytest.raises(ValueError, match="train.schedule: 'budget_linear' decays to 0 at the end of the time budget"):
    config_lib.validate(config)
