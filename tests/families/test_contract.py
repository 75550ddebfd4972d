"""Every registered task family keeps the contract the core relies on (attnjax.families.base.TaskFamily): a new
family is checked here for free, by being registered."""

from __future__ import annotations

import ml_collections
import pytest

from attnjax import config as config_lib
from attnjax import families
from attnjax.families.base import TaskFamily

# what a family must implement itself (the base class raises NotImplementedError for each)
REQUIRED = ("load_task", "load_vocabularies", "batchers", "loss", "tokens", "predict")


def _data(family, source):
  base = config_lib.base_config()
  with base.data.unlocked():
    base.data.source = source
  return base


@pytest.mark.parametrize("name", sorted(families.FAMILIES))
def test_a_family_keeps_the_contract(name):
  family = families.FAMILIES[name]
  assert isinstance(family, TaskFamily) and family.name == name and family.title and family.sources
  for method in REQUIRED:
    assert getattr(type(family), method) is not getattr(TaskFamily, method), f"{name} does not implement {method}"
  # a checkpoint's evaluation: the family's own task of one split, unless it reads its data another way
  assert (type(family).checkpoint_task is not TaskFamily.checkpoint_task
          or type(family).read_split is not TaskFamily.read_split)
  for source in family.sources:
    assert families.for_source(source) is family  # each source belongs to this family alone
    config = _data(family, source)
    assert families.of(config) is family
    defaults = family.default_metrics(config.data)
    assert defaults and set(defaults) <= set(family.metrics)  # what it scores by default it allows
    assert family.metric_names(config) == tuple(defaults)  # an empty eval.metrics means the family's own
    best, mode = family.default_best(config.data)
    assert mode in ("max", "min") and best in family.values(config.data, defaults)  # ranks by a value it reports
    # the best checkpoint resolved for the config is one training's check accepts
    families.resolve_best(config)
    families.check_best(config)
    for key, kind in family.source_data_keys(source).items():
      assert key in family.data_keys and kind is not None
  for model in family.model_names:  # a claimed model trains on these sources only
    assert families._CLAIMED_MODELS[model] is family  # pylint: disable=protected-access


@pytest.mark.parametrize("name", sorted(families.FAMILIES))
def test_a_metric_outside_the_family_is_refused_by_the_config_check(name):
  family = families.FAMILIES[name]
  config = _data(family, family.sources[0])
  config.eval.metrics = ("no_such_metric",)
  with pytest.raises(ValueError, match="config.eval.metrics"):
    config_lib.validate(config)


def test_registering_refuses_a_clash_and_unregisters_cleanly():
  class Copy(TaskFamily):
    name, title, sources = "copy_of_span_qa", "copy", ("squad_json",)
  with pytest.raises(ValueError, match="already registered: source 'squad_json' \\(span_qa\\)"):
    families.register(Copy())
  assert "copy_of_span_qa" not in families.FAMILIES

  class Fresh(TaskFamily):
    name, title, sources, model_names = "fresh", "fresh", ("fresh_source",), ("fresh_model",)
  families.register(Fresh())
  try:
    assert families.for_source("fresh_source").name == "fresh"
    assert "fresh_source" in families.sources()
  finally:
    families.unregister("fresh")
  assert "fresh_source" not in families.sources()
  assert "fresh_model" not in families._CLAIMED_MODELS  # pylint: disable=protected-access
  with pytest.raises(ValueError, match="config.data.source: must be one of"):
    families.for_source("fresh_source")


def test_data_keys_of_a_config_dict_and_of_a_plain_dict_name_the_same_family():
  plain = {"source": "lm_text"}
  assert families.of(ml_collections.ConfigDict({"data": plain})) is families.of(plain)
