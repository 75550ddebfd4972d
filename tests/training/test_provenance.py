"""Resuming a workdir: harmless config changes are recorded, run-changing ones refused unless explicitly allowed."""

import json

import jax
import pytest

from attnjax import config as config_lib
from attnjax import fs
from attnjax.training import provenance


def _config(**changes):
  """The base config with dotted keys changed (``_config(**{"model.num_heads": 8})``)."""
  config = config_lib.base_config()
  for dotted, value in changes.items():
    section, key = dotted.split(".")
    with config[section].unlocked():
      config[section][key] = value
  return config


def _save(workdir, config):
  # as loop.save_config writes it: tuples become lists on the way through JSON
  fs.write_text(fs.join(workdir, provenance.CONFIG_FILE), config.to_json_best_effort(indent=2, sort_keys=True))


def _as_dict(config):
  return json.loads(config.to_json_best_effort())


def test_identical_configs_have_no_differences_and_write_nothing(tmp_path):
  _save(tmp_path, _config())
  assert provenance.check_resume(tmp_path, _config(), allow_change=False) == []
  assert not (tmp_path / provenance.HISTORY_FILE).exists()


def test_new_workdir_has_nothing_to_compare(tmp_path):
  assert provenance.check_resume(tmp_path / "fresh", _config(), allow_change=False) == []
  assert not (tmp_path / "fresh").exists()


def test_harmless_changes_are_recorded_without_error(tmp_path):
  _save(tmp_path, _config())
  changed = _config(**{"train.steps": 6000, "eval.beam_size": 8, "data.dir": "/elsewhere", "mesh.shape": [-1, 1, 1]})
  differences = provenance.check_resume(tmp_path, changed, allow_change=False)
  # mesh.shape given as a list is no difference (ConfigDict keeps it a tuple, JSON saved it as a list); data.dir is
  # new here (the base config has none)
  assert {d.key: (d.old, d.new) for d in differences} == {
      "train.steps": (3000, 6000), "eval.beam_size": (4, 8), "data.dir": (provenance.ABSENT, "/elsewhere")}
  assert not any(d.changes_run for d in differences)
  (record,) = provenance.read_history(tmp_path)
  assert record["allowed"] is False
  assert {d["key"]: (d["old"], d["new"], d["changes_run"]) for d in record["differences"]} == {
      "train.steps": (3000, 6000, False), "eval.beam_size": (4, 8, False),
      "data.dir": ("<absent>", "/elsewhere", False)}
  assert record["time"].endswith("+00:00")


def test_history_keeps_earlier_lines(tmp_path):
  _save(tmp_path, _config())
  provenance.check_resume(tmp_path, _config(**{"train.steps": 6000}), allow_change=False)
  _save(tmp_path, _config(**{"train.steps": 6000}))
  provenance.check_resume(tmp_path, _config(**{"train.steps": 9000}), allow_change=False)
  history = provenance.read_history(tmp_path)
  assert [r["differences"][0]["new"] for r in history] == [6000, 9000]


RUN_CHANGING = {"model.num_heads": (4, 8), "train.learning_rate": (0.3, 0.5),
                "data.vocab_size": (provenance.ABSENT, 8000)}


def test_run_changing_differences_are_refused_and_nothing_is_written(tmp_path):
  _save(tmp_path, _config())
  changed = _config(**{key: new for key, (_, new) in RUN_CHANGING.items()}, **{"train.steps": 6000})
  with pytest.raises(provenance.ConfigChangedError) as raised:
    provenance.check_resume(tmp_path, changed, allow_change=False)
  message = str(raised.value)
  assert "  model.num_heads: 4 -> 8\n" in message
  assert "  train.learning_rate: 0.3 -> 0.5\n" in message
  assert "  data.vocab_size: <absent> -> 8000\n" in message
  assert "train.steps" not in message  # only what changes the run is listed
  assert str(tmp_path / provenance.CONFIG_FILE) in message
  assert "--allow_config_change" in message and "new workdir" in message
  assert isinstance(raised.value, ValueError)
  assert not (tmp_path / provenance.HISTORY_FILE).exists()


def test_every_process_refuses_but_only_process_0_writes(tmp_path, monkeypatch):
  _save(tmp_path, _config())
  monkeypatch.setattr(jax, "process_index", lambda: 1)
  with pytest.raises(provenance.ConfigChangedError):
    provenance.check_resume(tmp_path, _config(**{"model.num_heads": 8}), allow_change=False)
  assert len(provenance.check_resume(tmp_path, _config(**{"train.steps": 6000}), allow_change=False)) == 1
  assert not (tmp_path / provenance.HISTORY_FILE).exists()


def test_allowed_run_changing_differences_are_recorded(tmp_path):
  _save(tmp_path, _config())
  changed = _config(**{key: new for key, (_, new) in RUN_CHANGING.items()})
  differences = provenance.check_resume(tmp_path, changed, allow_change=True)
  assert {d.key: (d.old, d.new) for d in differences} == RUN_CHANGING
  (record,) = provenance.read_history(tmp_path)
  assert record["allowed"] is True
  assert all(d["changes_run"] for d in record["differences"])
  assert len(record["differences"]) == 3


def test_lists_and_tuples_are_equal():
  saved = {"mesh": {"shape": [-1, 1, 1], "rules": [["batch", ["data", "fsdp"]], ["length", None]]}}
  new = {"mesh": {"shape": (-1, 1, 1), "rules": (("batch", ("data", "fsdp")), ("length", None))}}
  assert provenance.config_differences(saved, new) == []
  assert provenance.config_differences(_as_dict(_config()), _config().to_dict()) == []  # to_dict keeps tuples
  (difference,) = provenance.config_differences(saved, {"mesh": {**new["mesh"], "shape": (-1, 2, 1)}})
  assert difference == provenance.Difference("mesh.shape", [-1, 1, 1], [-1, 2, 1], changes_run=False)


def test_key_or_section_present_on_one_side_only():
  saved = {"model": {"num_heads": 4}, "train": {"steps": 10}}
  new = {"model": {"num_heads": 4, "use_bias": False}, "extra": {"a": 1}}
  differences = provenance.config_differences(saved, new)
  assert differences == [
      provenance.Difference("model.use_bias", provenance.ABSENT, False, changes_run=True),
      provenance.Difference("train.steps", 10, provenance.ABSENT, changes_run=False),
      provenance.Difference("extra.a", provenance.ABSENT, 1, changes_run=True),  # unknown section: conservative
  ]
  assert str(differences[0]) == "model.use_bias: <absent> -> false"


def test_an_optional_key_added_since_the_run_started_and_left_unset_is_no_change(tmp_path):
  """A workdir trained before a new optional key existed (here train.init_encoder_from) resumes: the key is absent
  from its config.json and None in the new config. Set to a value, it is a change like any other."""
  config = _config()
  saved = _as_dict(config)
  del saved["train"]["init_encoder_from"]
  _save_dict = lambda d: fs.write_text(fs.join(str(tmp_path), provenance.CONFIG_FILE), json.dumps(d))  # noqa: E731
  _save_dict(saved)
  assert provenance.check_resume(str(tmp_path), config, allow_change=False) == []
  with config.train.unlocked():
    config.train.init_encoder_from = "elsewhere"
  with pytest.raises(ValueError, match="train.init_encoder_from: <absent> -> \"elsewhere\""):
    provenance.check_resume(str(tmp_path), config, allow_change=False)


def test_a_flag_is_not_a_number():
  assert provenance.config_differences({"model": {"x": 1}}, {"model": {"x": True}})
  assert not provenance.config_differences({"train": {"learning_rate": 1}}, {"train": {"learning_rate": 1.0}})


@pytest.mark.parametrize("key, expected", [
    ("model.num_heads", True), ("data.vocab_size", True), ("data.pack", True), ("seed", True),
    ("train.learning_rate", True), ("train.adam_b2", True), ("train.grad_accum_steps", True),
    ("train.some_new_key", True), ("new_section.x", True),
    ("train.steps", False), ("train.best_mode", False), ("eval.beam_size", False), ("mesh.rules", False),
    ("distributed.num_processes", False), ("data.dir", False), ("data.tfds_data_dir", False),
    ("data.dir_suffix", True),
])
def test_classification(key, expected):
  assert provenance.changes_run(key) is expected
