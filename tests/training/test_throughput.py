"""The training throughput logged per window (train/tokens_per_s, train/model_flops_per_s) is the window's tokens
over the time its steps took: compilation and evaluation left out, whichever step of the window they fall on."""

import jax

from attnjax.families.language_model import LanguageModel
from attnjax.report.tensorboard import read_scalars
from attnjax.training import loop
from attnjax.training.loop import train_and_evaluate
from tests import lm_fixture

STEP_SECONDS = 1.0  # each optimizer step, on the test's clock
EVAL_SECONDS = 100.0  # each evaluation (and the checkpoint after it)
COMPILE_SECONDS = 50.0  # each ahead-of-time compilation (the train step's, at the first step)


def test_each_window_counts_its_steps_time_only(tmp_path, monkeypatch):
  # evaluations after steps 6 and 12 and logs after 4, 8 and 12: the window of steps 5-8 has an evaluation inside
  config = lm_fixture.tiny_lm_config(tmp_path / "data", steps=12, log_every=4, eval_every=6, checkpoint_every=6,
                                     sync_every=1)
  now = [0.0]
  monkeypatch.setattr(loop, "_clock", lambda: now[0])
  tokens = []
  real_tokens, real_evaluate = LanguageModel.tokens, loop.Experiment.evaluate

  def counted(family, local):
    tokens.append(real_tokens(family, local))
    return tokens[-1]

  def slow_evaluate(self, *, limit):
    out = real_evaluate(self, limit=limit)
    now[0] += EVAL_SECONDS
    return out

  real_compile = jax.stages.Lowered.compile

  def slow_compile(self, *args, **kwargs):
    out = real_compile(self, *args, **kwargs)
    now[0] += COMPILE_SECONDS
    return out

  def step_done(step):
    now[0] += STEP_SECONDS
    assert len(tokens) == step

  monkeypatch.setattr(LanguageModel, "tokens", counted)
  monkeypatch.setattr(loop.Experiment, "evaluate", slow_evaluate)
  monkeypatch.setattr(jax.stages.Lowered, "compile", slow_compile)
  workdir = tmp_path / "run"
  assert train_and_evaluate(config, str(workdir), on_step=step_done)["step"] == 12
  logged = read_scalars(workdir / "tensorboard")
  rates = dict(logged["train/tokens_per_s"])
  assert sorted(rates) == [4, 8, 12]
  for end in (4, 8, 12):
    window = tokens[end - 4:end]
    assert min(window) > 0
    assert abs(rates[end] - sum(window) / (4 * STEP_SECONDS)) <= 1e-6 * rates[end], end
  # FLOP/s over the same time: one compiled shape here, so every step counts the same FLOPs
  flop_rates = dict(logged["train/model_flops_per_s"])
  assert flop_rates[4] > 0 and abs(flop_rates[8] - flop_rates[4]) <= 1e-6 * flop_rates[4]
  assert abs(flop_rates[12] - flop_rates[4]) <= 1e-6 * flop_rates[4]
