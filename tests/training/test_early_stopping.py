"""Early stopping (train.patience): a run stops after that many evaluations in a row without a better best metric
(a tie is no improvement), keeps its best checkpoint, and a restart of a stopped run trains no further; nor does a
restart of a run that used its time budget (train.time_limit_minutes)."""

import pytest

from attnjax import families
from attnjax.config import validate
from attnjax.runtime.checkpointing import Checkpointer
from attnjax.training import loop
from attnjax.training.loop import early_stopping, train_and_evaluate
from tests import lm_fixture

# bits per byte by evaluation, every 5 steps; lower is better. Best at step 10; 2.5, a tie (2.0) and 2.1 are three
# evaluations without a better one.
SCRIPT = [3.0, 2.0, 2.5, 2.0, 2.1]
# in training, with patience 3: best at step 10, then three worse, so it stops at step 25, when the three latest
# checkpoints kept are 15, 20 and 25 (the best, 10, kept besides); a later 1.0 would be reached only without stopping
TRAINING = [3.0, 2.0, 2.5, 2.2, 2.1, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0]


def test_the_record_follows_a_hand_counted_sequence():
  record = {}
  expected = [(5, 3.0, 0), (10, 2.0, 0), (10, 2.0, 1), (10, 2.0, 2), (10, 2.0, 3)]
  for i, value in enumerate(SCRIPT):
    record = early_stopping(record, 5 * (i + 1), value, "min")
    assert (record["best_step"], record["best_value"], record["evals_since_best"]) == expected[i]
  nan = early_stopping({}, 1, float("nan"), "min")  # a diverged first evaluation is never the best
  assert nan["evals_since_best"] == 1 and early_stopping(nan, 2, 3.0, "min")["best_value"] == 3.0
  record = early_stopping({}, 1, 0.5, "max")
  assert early_stopping(record, 2, 0.6, "max")["evals_since_best"] == 0
  assert early_stopping(record, 2, 0.4, "max")["evals_since_best"] == 1


def test_a_run_stops_after_patience_evaluations_without_improvement_and_stays_stopped(tmp_path, monkeypatch):
  config = lm_fixture.tiny_lm_config(tmp_path / "data", steps=60, eval_every=5, checkpoint_every=5, log_every=5,
                                     sync_every=5, patience=3)
  families.resolve_best(config)  # the language model's own (bits per byte, lower is better), as training sets it
  metric = config.train.best_metric
  real, calls = loop.Experiment.evaluate, []

  def scripted(self, *, limit):
    values, signatures = real(self, limit=limit)
    values[metric] = TRAINING[len(calls)]
    calls.append(values[metric])
    return values, signatures

  monkeypatch.setattr(loop.Experiment, "evaluate", scripted)
  workdir = tmp_path / "run"
  assert train_and_evaluate(config, str(workdir))["step"] == 25
  assert calls == TRAINING[:5]
  checkpoints = Checkpointer(str(workdir / "checkpoints"), best_metric=metric, best_mode="min", read_only=True)
  assert checkpoints.best_step() == 10 and max(checkpoints.steps()) == 25
  again = train_and_evaluate(config, str(workdir))  # relaunched: stopped, so no step and no evaluation
  assert again["step"] == 25 and calls == TRAINING[:5]


def test_a_run_that_used_its_time_budget_trains_no_further_when_relaunched(tmp_path):
  # 6 ms of training: spent by the first sync point, where the run evaluates, saves and stops
  config = lm_fixture.tiny_lm_config(tmp_path / "data", steps=60, eval_every=30, checkpoint_every=30, log_every=5,
                                     sync_every=5, time_limit_minutes=1e-4)
  workdir = tmp_path / "run"
  first = train_and_evaluate(config, str(workdir))["step"]
  assert first < 30
  again = train_and_evaluate(config, str(workdir))  # relaunched (its evaluation of the splits cut off, say)
  assert again["step"] == first
  assert Checkpointer(str(workdir / "checkpoints"), read_only=True).steps() == [first]


@pytest.mark.parametrize("patience", [0, -1])
def test_a_patience_that_is_not_a_positive_count_is_refused_by_name(tmp_path, patience):
  config = lm_fixture.tiny_lm_config(tmp_path / "data", patience=patience)
  with pytest.raises(ValueError, match="config.train.patience"):
    validate(config)
