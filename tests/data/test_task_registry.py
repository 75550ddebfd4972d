"""The named tasks of the literature: each one's config validates and asks for metrics its task kind computes."""

import os

import ml_collections
import pytest

from attnjax import config as config_lib
from attnjax import families
from attnjax.data.catalogue import TASKS, use_task


# task kind -> (its family, the metrics the kind's papers report, the headline that ranks checkpoints and its mode)
KINDS = {
    "translation": ("seq2seq", {"bleu", "chrf", "ter", "meteor"}, ("bleu", "max")),
    "summarization": ("seq2seq", {"rouge"}, ("rougeL", "max")),
    "extractive_qa": ("span_qa", {"exact_match", "f1"}, ("f1", "max")),
    "mlm": ("masked_lm", {"mlm_accuracy"}, ("mlm_accuracy", "max")),
    "lm": ("language_model", {"bits_per_byte"}, ("bits_per_byte", "min")),
}


@pytest.mark.parametrize("name", sorted(TASKS))
def test_every_registered_task_gives_a_valid_config(name):
  spec = TASKS[name]
  config = config_lib.base_config()
  use_task(config, name)
  # the model a task of each kind goes with (the config's default is the encoder-decoder Transformer)
  model = {"extractive_qa": "span_qa", "mlm": "bert_mlm", "lm": "decoder_lm"}.get(spec.kind)
  if model:
    config.model = ml_collections.ConfigDict(dict(name=model))
  if spec.kind in ("mlm", "lm"):
    config.data.batch_size, config.data.max_tokens = 8, None  # rows of a fixed length
  config_lib.validate(config)
  assert config.data.source == spec.source and config.data.task == name
  plain = lambda v: v.to_dict() if isinstance(v, ml_collections.ConfigDict) else v
  assert all(plain(config.data[key]) == value for key, value in spec.fields.items())
  # the family a task of this kind goes to, and the metrics its literature reports: written here, apart from both
  family, literature, headline = KINDS[spec.kind]
  assert families.of(config) is families.FAMILIES[family]
  allowed = families.of(config).metrics
  assert set(config.eval.metrics) <= set(allowed) and set(config.eval.metrics) <= literature
  # the "best" checkpoint is ranked by the kind's headline (SQuAD 2.0: F1 at the threshold best for the spans), a
  # value the evaluation computes
  families.resolve_best(config)
  if config.data.get("squad_version") == "2.0":
    headline = ("best_f1_spans", "max")
  assert (config.train.best_metric, config.train.best_mode) == headline
  families.check_best(config)
  values = families.of(config).values(config.data, config.eval.metrics)
  # what the papers report is computable: a metric itself or one of its values (ROUGE-1/2/L of "rouge")
  assert all(m in allowed or m in values for m in spec.reported)
  assert set(spec.reported) <= literature | {"rouge1", "rouge2", "rougeL"}


def test_translation_tasks_read_the_named_direction():
  config = config_lib.base_config()
  use_task(config, "wmt14_fr_en")
  assert (config.data.tfds_name, config.data.src_lang, config.data.tgt_lang) == ("wmt14_translate/fr-en", "fr", "en")


def _config(best: str, metrics=(), **data):
  config = config_lib.base_config()
  with config.data.unlocked():
    config.data.update(data)
  config.eval.metrics, config.train.best_metric = tuple(metrics), best
  return config


def test_a_best_metric_the_evaluation_does_not_compute_is_refused():
  families.check_best(_config("rougeL", ("rouge",), source="jsonl"))  # one of ROUGE's four values
  families.check_best(_config("rougeL", source="jsonl"))  # the task's own metrics: ROUGE
  with pytest.raises(ValueError, match="config.train.best_metric='exact_match' is not computed .*'bleu'"):
    families.check_best(_config("exact_match", ("bleu", "chrf", "ter"), source="tsv"))
  with pytest.raises(ValueError, match="best_metric='bleu' is not computed .*'chrf'"):
    families.check_best(_config("bleu", ("chrf",), source="tsv"))


def test_squad2_tasks_keep_the_checkpoint_best_at_its_best_no_answer_threshold():
  family = families.FAMILIES["span_qa"]
  for name in ("squad_v2", "squad_v2_dev_by_article"):
    config = config_lib.base_config()
    use_task(config, name)
    families.resolve_best(config)
    assert config.train.best_metric == "best_f1_spans"
  v2 = _config("best_f1_spans", source="squad_json", squad_version="2.0")
  assert family.extra_values(v2.data, ("exact_match", "f1")) == ("best_exact", "best_f1", "best_f1_spans")
  families.check_best(v2)
  # a v1.1 evaluation has no threshold to choose, so nothing to rank by there: declared, or read from the data
  with pytest.raises(ValueError, match="best_metric='best_f1_spans' is not computed"):
    families.check_best(_config("best_f1_spans", source="squad_json", squad_version="1.1"))
  undeclared = _config("best_f1_spans", source="squad_json")
  families.check_best(undeclared)  # before the data is read, a task that does not declare its version may be 2.0
  with pytest.raises(ValueError, match="best_metric='best_f1_spans' is not computed"):
    families.check_best(undeclared, ml_collections.ConfigDict(dict(version="1.1")))


def test_unknown_task_lists_the_registered_ones():
  with pytest.raises(ValueError, match="unknown task 'wmt15_en_de'; registered tasks: .*'wmt14_en_de'"):
    use_task(config_lib.base_config(), "wmt15_en_de")


@pytest.mark.parametrize("task, bleu_expected", [("reverse", False), ("dates", True)])
def test_synthetic_tasks_score_bleu_only_where_their_targets_have_ngrams(tmp_path, task, bleu_expected):
  """BLEU is left out exactly where it cannot tell right from wrong: sacreBLEU's 13a tokenizer leaves a reversed string
  whole (one token, no bigrams), so even the reference scored against itself gets 0; dates split at their hyphens."""
  import sacrebleu  # pylint: disable=g-import-not-at-top
  config = config_lib.base_config()
  config.data.task = task
  config.data.train_examples, config.data.validation_examples, config.data.test_examples = 50, 20, 20
  data = families.load_task(config.data, str(tmp_path))
  references = [target for _, target in data.splits["test"]]
  perfect = sacrebleu.corpus_bleu(references, [references]).score
  assert (perfect > 99) == bleu_expected
  names = families.of(config).metric_names(config)  # what training and attnjax.evaluate both score with
  assert ("bleu" in names) == bleu_expected
  assert {"exact_match", "chrf"} <= set(names)


def test_every_task_reporting_meteor_names_its_target_language():
  """METEOR stems in the target language: each task the literature scores with METEOR (or that has a target text
  language at all) must say which, and it must be its real target language, not English by default."""
  expected = {"wmt14_en_de": "de", "wmt14_de_en": "en", "wmt14_en_fr": "fr", "wmt14_fr_en": "en",
              "multi30k_en_de": "de", "manythings_en_fr": "fr", "cnn_dailymail": "en", "xsum": "en",
              "cnn_dailymail_subset": "en"}
  for name, spec in TASKS.items():
    config = config_lib.base_config()
    use_task(config, name)
    if name in expected:
      assert config_lib.meteor_language(config) == expected[name], name
    else:
      assert spec.kind in ("extractive_qa", "mlm", "lm") and "meteor" not in spec.reported, name
  assert {name for name, spec in TASKS.items() if "meteor" in spec.reported} <= set(expected)


_SQUAD2_DEV = os.path.join(os.path.dirname(__file__), "..", "..", "..", "shared", "data", "squad_v2",
                           "dev-v2.0.json.gz")


@pytest.mark.skipif(not os.path.exists(_SQUAD2_DEV), reason="the SQuAD 2.0 dev file is not on this machine")
def test_squad2_dev_by_article_splits_as_its_spec_says():
  """What the task's comment and the study's experiment files state: no article in two splits, the test split at
  least 1,500 questions from at least 5 articles, and each split's share of unanswerable questions."""
  config = config_lib.base_config()
  use_task(config, "squad_v2_dev_by_article")
  config.data.dir = os.path.dirname(_SQUAD2_DEV)
  splits = {name: families.load_split(config.data, name) for name in ("train", "validation", "test")}
  articles = {name: {q.title for q in qs} for name, qs in splits.items()}
  assert not (articles["train"] & articles["validation"] or articles["train"] & articles["test"]
              or articles["validation"] & articles["test"])
  stated = {"train": (24, 8242, 50.0), "validation": (6, 2076, 51.1), "test": (5, 1555, 48.9)}
  for name, (n_articles, n_questions, unanswerable) in stated.items():
    qs = splits[name]
    share = 100 * sum(not q.answer_texts for q in qs) / len(qs)
    assert (len(articles[name]), len(qs), round(share, 1)) == (n_articles, n_questions, unanswerable), name
  assert sum(len(qs) for qs in splits.values()) == 11873
