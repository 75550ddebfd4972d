"""The packed rows of the Wikipedia tasks are cached in the workdir under a key of their settings: the key must not
depend on the order in which ``data.heldout`` is written, or a run whose config was read back from ``config.json``
(keys sorted) would miss the cache that the same run wrote from its experiment file (keys as written)."""

import pytest

from tests.lm_fixture import tiny_lm_config
from tests.mlm_fixture import tiny_mlm_config


@pytest.mark.parametrize("task", ["mlm", "lm"])
def test_the_cache_key_of_a_split_ignores_the_order_of_the_held_out_splits(tmp_path, task):
  if task == "mlm":
    from attnjax.data.mlm import MlmTaskData as Task  # pylint: disable=g-import-not-at-top
    config = tiny_mlm_config(tmp_path / "data")
  else:
    from attnjax.data.lm import LmTaskData as Task  # pylint: disable=g-import-not-at-top
    config = tiny_lm_config(tmp_path / "data")
  workdir = str(tmp_path / "run")
  data = config.data.to_dict()
  forward = Task({**data, "heldout": {"validation": 0.15, "test": 0.15}}, workdir)
  backward = Task({**data, "heldout": {"test": 0.15, "validation": 0.15}}, workdir)
  other = Task({**data, "heldout": {"test": 0.15, "validation": 0.2}}, workdir)
  for split in ("train", "validation", "test"):
    assert forward._cache_path(split) == backward._cache_path(split)  # pylint: disable=protected-access
    assert forward._cache_path(split) != other._cache_path(split)  # pylint: disable=protected-access
