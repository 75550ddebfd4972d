"""The report's summarization sections: claims with verdicts, repetition and novelty, ROUGE by article length."""

import pytest

from attnjax.report import model_label
from attnjax.report import summarization as summ


def _record(label, rouge1, repeated=None, task="cnn_dailymail_subset", run=None):
  return {"kind": "summarization", "state": "evaluated", "label": label, "task": task, "run": run or label,
          "split": "test", "scores": {"rouge1": rouge1, "rouge2": rouge1 / 2, "rougeLsum": rouge1 - 3},
          "metrics": {"repeated_trigrams": repeated, "novel_1grams": 1.0}, "examples": 10, "step": 100}


def _verdicts(records):
  table = summ.claims_table(records)
  return [line.rsplit("|", 2)[-2].strip() for line in table.splitlines()[2:]]


def test_claims_hold_only_for_the_stated_orderings():
  arms = [_record("LSTM seq2seq", 20.0), _record("LSTM + Bahdanau", 25.0, 12.0),
          _record("LSTM + Bahdanau + pointer-generator", 30.0, 10.0),
          _record("LSTM + Bahdanau + pointer-generator + coverage", 33.0, 2.0), _record("Transformer", 35.0, 30.0),
          _record("Transformer + copy", 36.0, 20.0)]
  assert _verdicts(arms) == ["holds", "holds", "holds"]
  assert "Transformer: ROUGE-1 35.00, repeated 3-grams 30.00%; Transformer + copy: ROUGE-1 36.00" in (
      summ.claims_table(arms))
  arms[4] = _record("Transformer", 24.0)  # below LSTM + attention
  arms[3] = _record("LSTM + Bahdanau + pointer-generator + coverage", 33.0, 11.0)  # more repetition than copy alone
  assert _verdicts(arms) == ["does not hold", "ROUGE holds, repetition does not", "holds"]
  arms[3] = _record("LSTM + Bahdanau + pointer-generator + coverage", 29.0, 1.0)  # less ROUGE than copy alone
  arms[5] = _record("Transformer + copy", 24.0, 1.0)  # copy without a ROUGE gain over the Transformer
  assert _verdicts(arms) == ["does not hold", "repetition holds, ROUGE does not", "does not hold"]
  assert _verdicts(arms[1:5]) == ["not measured", "repetition holds, ROUGE does not", "not measured"]
  assert "missing: LSTM seq2seq" in summ.claims_table(arms[1:])
  assert "missing: Transformer + copy" in summ.claims_table(arms[:5])


def test_the_goal_and_the_ambition_are_judged_on_the_best_arm_and_the_full_model_against_lead3():
  full = "LSTM + Bahdanau + pointer-generator + coverage"
  arms = [_record("Lead-3", 37.47), _record("LSTM seq2seq", 15.4), _record(full, 34.5)]
  goal, ambition = summ.goal_lines(arms)
  assert f"met ({full}, 34.50, at step 100" in goal  # 34.5 >= 31.33, and Lead-3 is no arm
  assert "met (2.97 below Lead-3's 37.47" in ambition  # within 3
  arms[2] = _record(full, 31.3)
  goal, ambition = summ.goal_lines(arms)
  assert "missed (LSTM + Bahdanau + pointer-generator + coverage, 31.30" in goal  # 31.30 < 31.33
  assert "missed (6.17 below" in ambition
  goal, ambition = summ.goal_lines(arms[:2])
  assert "missed (LSTM seq2seq, 15.40" in goal and f"not measured (missing: {full})" in ambition
  assert summ.goal_lines(arms[:1]) == []  # Lead-3 alone: no arm to judge


def test_statistics_table_reads_the_measures_from_the_metrics_file_in_model_order():
  table = summ.statistics_table([_record("Transformer", 35.0, 4.0), _record("Lead-3", 37.5, 0.5)])
  rows = table.splitlines()[2:]
  assert rows[0].startswith("| Lead-3 |") and "| 0.50 |" in rows[0]
  assert rows[1].startswith("| Transformer |") and "| 35.00 | 17.50 | 32.00 | 4.00 | 1.00 |" in rows[1]
  assert summ.statistics_table([{**_record("Lead-3", 1.0), "kind": "translation"}]) is None


def test_rouge_by_length_averages_each_buckets_examples():
  from rouge_score import rouge_scorer  # pylint: disable=g-import-not-at-top
  scorer = rouge_scorer.RougeScorer(["rouge1"], use_stemmer=True)
  articles = ["w " * 10, "w " * 500, "w " * 450, "w " * 2000]
  hypotheses = ["the cat sat", "a dog ran far", "the cat", "nothing here"]
  references = ["the cat sat down", "a dog ran", "cats sat", "something else"]
  by = summ.rouge_by_length(articles, hypotheses, references)
  f = [scorer.score(r, h)["rouge1"].fmeasure * 100 for h, r in zip(hypotheses, references)]
  assert by["1-400"] == pytest.approx([f[0], 1])
  assert by["401-800"] == pytest.approx([(f[1] + f[2]) / 2, 2])
  assert by[">1200"] == pytest.approx([f[3], 1]) and "801-1200" not in by


def test_copy_and_coverage_arms_get_their_own_labels():
  lstm = {"name": "rnn_seq2seq", "attention": "bahdanau"}
  assert model_label(lstm) == "LSTM + Bahdanau"
  assert model_label({**lstm, "copy": True}) == "LSTM + Bahdanau + pointer-generator"
  assert model_label({**lstm, "copy": True, "coverage": True}) == "LSTM + Bahdanau + pointer-generator + coverage"
  assert model_label({"name": "transformer", "d_model": 256, "copy": True}) == "Transformer + copy"
  assert model_label({"name": "lead3"}) == "Lead-3"


def test_lead3_scores_every_article_of_the_split_an_empty_one_with_an_empty_summary(tmp_path):
  import gzip  # pylint: disable=g-import-not-at-top
  import json  # pylint: disable=g-import-not-at-top
  from attnjax import baselines, config as config_lib, metrics  # pylint: disable=g-import-not-at-top
  from attnjax.data.catalogue import use_task  # pylint: disable=g-import-not-at-top
  articles = ["the cat sat . it was happy . then it slept . the end came .", "", "a dog ran ! far away ."]
  summaries = ["the cat sat .\nit slept .", "nothing .", "a dog ran far ."]
  for name in ("cnndm_train", "cnndm_val", "cnndm_test"):
    with gzip.open(tmp_path / f"{name}.jsonl.gz", "wt") as f:
      for i, (a, s) in enumerate(zip(articles, summaries)):
        f.write(json.dumps({"id": f"0:{i}", "article": a, "summary": s}) + "\n")
  config = config_lib.base_config()
  use_task(config, "cnn_dailymail_subset")
  config.data.dir = str(tmp_path)
  result, hypotheses = baselines.score_lead(config, "test")
  assert hypotheses == ["the cat sat .\nit was happy .\nthen it slept .", "", "a dog ran !\nfar away ."]
  assert (result["examples"], result["empty_sources"]) == (3, 1)
  expected = metrics.rouge([metrics.split_sentences(h) for h in hypotheses], summaries)
  assert result["rouge1"] == pytest.approx(expected["rouge1"]) and result["rougeLsum"] == pytest.approx(
      expected["rougeLsum"])
  assert result["novel_1grams"] == 0.0  # extractive


def test_lead3_command_writes_the_workdir_with_rouge_of_each_splits_first_three_sentences(tmp_path):
  """``python -m attnjax.baselines`` on two splits of five-sentence articles: the metrics files hold rouge-score's F1
  of each article's first three sentences (the project's sentence rule) against its summary, computed here, and
  differ from those of the first two or four sentences."""
  import gzip  # pylint: disable=g-import-not-at-top
  import json  # pylint: disable=g-import-not-at-top
  import os  # pylint: disable=g-import-not-at-top
  import subprocess  # pylint: disable=g-import-not-at-top
  import sys  # pylint: disable=g-import-not-at-top
  from rouge_score import rouge_scorer  # pylint: disable=g-import-not-at-top
  from attnjax import metrics  # pylint: disable=g-import-not-at-top
  splits = {  # (article, summary one highlight a line), each article five sentences
      "validation": [("the cat sat on the mat . it was warm there . then the cat slept for hours . a dog came by . "
                      "the dog barked loudly .", "the cat slept on the mat .\na dog barked ."),
                     ("Rain fell on the town. The river rose fast! People left their homes? Boats carried them away. "
                      "The water fell a week later.", "the river rose and boats carried people away .")],
      "test": [("markets opened higher on monday . tech shares led the gains . oil prices slipped . the central bank "
                "held rates . analysts expect a cut soon .", "tech shares led gains .\nthe central bank held rates ."),
               ("the team won the final . its captain scored twice . fans filled the streets . the coach thanked "
                "them . a parade is planned .", "the captain scored twice as the team won .\nfans plan a parade .")],
  }
  files = {"train": "cnndm_train", "validation": "cnndm_val", "test": "cnndm_test"}
  for split, name in files.items():
    with gzip.open(tmp_path / f"{name}.jsonl.gz", "wt") as f:
      for i, (article, summary) in enumerate(splits.get(split, splits["validation"])):  # train: unread
        f.write(json.dumps({"id": f"{split}:{i}", "article": article, "summary": summary}) + "\n")
  experiment = tmp_path / "lead.py"
  experiment.write_text("from attnjax.config import base_config\nfrom attnjax.data.catalogue import use_task\n\n\n"
                        "def get_config():\n  config = base_config()\n  use_task(config, 'cnn_dailymail_subset')\n"
                        f"  config.data.dir = {str(tmp_path)!r}\n  return config\n")
  root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
  workdir = tmp_path / "lead3"
  done = subprocess.run([sys.executable, "-m", "attnjax.baselines", f"--experiment={experiment}",
                         f"--workdir={workdir}", "--split=validation,test"], cwd=root,
                        env={**os.environ, "PYTHONPATH": root}, capture_output=True, text=True, timeout=300)
  assert done.returncode == 0, done.stderr
  assert json.loads((workdir / "config.json").read_text())["model"] == {"name": "lead3"}
  types = ("rouge1", "rouge2", "rougeL", "rougeLsum")
  scorer = rouge_scorer.RougeScorer(list(types), use_stemmer=True)

  def lead_rouge(pairs, n):
    """Mean F1 x 100 of each article's first n sentences, one a line, against its summary."""
    leads = ["\n".join(metrics.split_sentences(article).split("\n")[:n]) for article, _ in pairs]
    scores = [scorer.score(metrics.split_sentences(summary), lead) for lead, (_, summary) in zip(leads, pairs)]
    return leads, {t: 100.0 * sum(s[t].fmeasure for s in scores) / len(scores) for t in types}

  for split, pairs in splits.items():
    assert all(len(metrics.split_sentences(article).split("\n")) == 5 for article, _ in pairs)
    leads, expected = lead_rouge(pairs, 3)
    result = json.loads((workdir / f"metrics.{split}.json").read_text())
    assert (result["split"], result["examples"], result["empty_sources"]) == (split, len(pairs), 0)
    assert {t: result[t] for t in types} == pytest.approx(expected, abs=1e-9)
    for n in (2, 4):  # the scores tell three sentences from two or four
      other = lead_rouge(pairs, n)[1]
      assert max(abs(other[t] - expected[t]) for t in types) > 1.0, (split, n)
    assert result["hypotheses"] == str(workdir / f"hypotheses.{split}.lead3.txt")
    assert (workdir / f"hypotheses.{split}.lead3.txt").read_text().splitlines() == [
        lead.replace("\n", " ") for lead in leads]
    assert f"lead3 {split}: rouge1 {expected['rouge1']:.2f}" in done.stdout


def _pointer_generator_attention_and_p_gen(params, src, tgt_in, hidden):
  """See et al. eq. 8, 10-11 for one sentence of a one-layer LSTM pointer-generator with coverage, in float64, the
  attention from s_{i-1} as the model has it: (attention a_t ``[T, S]``, p_gen ``[T]``) over the inputs ``tgt_in``."""
  import numpy as np  # pylint: disable=g-import-not-at-top
  from tests.models.test_rnn_equations import _lstm, _rnn, _sigmoid, _softmax  # pylint: disable=g-import-not-at-top
  x = params["src_embed"]["embedding"][src]
  forward, _ = _rnn("lstm", params["encoder_fwd_0"]["cell"], x, hidden)
  backward, _ = _rnn("lstm", params["encoder_bwd_0"]["cell"], x[::-1], hidden)
  h = np.concatenate([forward, backward[::-1]], axis=-1)  # annotations h_i
  state = (np.zeros(hidden), np.tanh(backward[-1] @ params["init_state_0"]["kernel"]))  # s_0 = tanh(W_s ←h_1)
  dec = params["decoder"]
  att, gate = dec["attention"], dec["pointer"]
  coverage = np.zeros(len(src))  # eq. 10: c^0 = 0
  attention, p_gen = [], []
  for y in tgt_in:
    e = np.array([att["v"] @ np.tanh(state[1] @ att["w_query"] + h_i @ att["w_keys"] + coverage[i] * dec["w_coverage"])
                  for i, h_i in enumerate(h)])  # eq. 11
    a = _softmax(e)
    context = a @ h
    coverage = coverage + a
    ey = params["tgt_embed"]["embedding"][y]
    state = _lstm(dec["cell_0"], np.concatenate([ey, context]), state)
    attention.append(a)
    # eq. 8: p_gen = σ(w_h·h*_t + w_s·s_t + w_x·x_t + b_ptr)
    p_gen.append(_sigmoid(context @ gate["w_0"][:, 0] + state[1] @ gate["w_1"][:, 0] + ey @ gate["w_2"][:, 0]
                          + gate["b_ptr"][0]))
  return np.stack(attention), np.array(p_gen)


@pytest.mark.parametrize("family", ["lstm", "transformer"])
def test_copy_map_gives_the_decoded_summarys_attention_and_p_gen(tmp_path, family):
  import flax  # pylint: disable=g-import-not-at-top
  import jax  # pylint: disable=g-import-not-at-top
  import jax.numpy as jnp  # pylint: disable=g-import-not-at-top
  import ml_collections  # pylint: disable=g-import-not-at-top
  import numpy as np  # pylint: disable=g-import-not-at-top
  from attnjax.models.interface import BOS_ID  # pylint: disable=g-import-not-at-top
  from attnjax.models.rnn_seq2seq import RNNSeq2Seq  # pylint: disable=g-import-not-at-top
  from attnjax.models.transformer import Transformer  # pylint: disable=g-import-not-at-top
  from attnjax.analysis import copy_maps  # pylint: disable=g-import-not-at-top
  from tests.models.test_transformer import cross_attention_from_parameters  # pylint: disable=g-import-not-at-top
  if family == "lstm":
    model = RNNSeq2Seq(src_vocab_size=12, tgt_vocab_size=12, embed_dim=8, hidden_dim=8, attention="bahdanau",
                       copy=True, coverage=True)
  else:  # the cross-attention of the last layer, averaged over its heads
    model = Transformer(src_vocab_size=12, tgt_vocab_size=12, num_encoder_layers=1, num_decoder_layers=2, d_model=8,
                        num_heads=2, d_ff=16, dropout_rate=0.0, shared_vocab=True, copy=True)
  src = [3, 4, 5, 6, 7, 8]
  params = flax.core.meta.unbox(model.init(jax.random.PRNGKey(0), jnp.asarray([src]), jnp.asarray([[1, 3]]))["params"])
  rng = np.random.default_rng(1)  # noise on every parameter: w_c and the biases start at zero
  params = jax.tree_util.tree_map(lambda v: jnp.asarray(np.asarray(v) + 0.3 * rng.normal(size=v.shape), v.dtype),
                                  params)
  if family == "lstm":  # sharper attention, so that the steps attend differently
    params["decoder"]["attention"]["v"] = 10.0 * params["decoder"]["attention"]["v"]
  eval_cfg = ml_collections.ConfigDict(dict(beam_size=2, alpha=0.0, max_len_a=0.0, max_len_b=6, min_len=3,
                                            no_repeat_ngram_size=0))
  tokens, attention, p_gen = copy_maps.copy_map(model, params, src, eval_cfg)
  assert len(tokens) >= 4 and attention.shape == (len(tokens), len(src)) and p_gen.shape == (len(tokens),)
  # the same summary teacher-forced, computed here: each output token reads the token before it (BOS first)
  tgt_in = [BOS_ID] + tokens[:-1]
  params64 = jax.tree_util.tree_map(lambda v: np.asarray(v, np.float64), params)
  if family == "lstm":
    expected_attention, expected_p_gen = _pointer_generator_attention_and_p_gen(params64, src, tgt_in, 8)
  else:  # the last decoder layer's cross-attention from its parameters, and the gate on its output
    variables = {"params": params}
    memory = model.apply(variables, jnp.asarray([src]), method=model.encode)
    _, state = model.apply(variables, jnp.asarray([tgt_in]), memory, method=model.decode, capture_intermediates=True)
    captured = state["intermediates"]
    first, last = (cross_attention_from_parameters(params64[f"decoder_{i}"],
                                                   captured[f"decoder_{i}"]["self_attention_block"]["__call__"][0][0],
                                                   memory["encoded"], memory["src_mask"])[0] for i in (0, 1))
    expected_attention = last
    h = np.asarray(captured["decoder_1"]["__call__"][0][0][0], np.float64)  # [T, D], post-norm: no final norm
    gate = params64["pointer"]
    expected_p_gen = 1.0 / (1.0 + np.exp(-(h @ gate["w_0"][:, 0] + gate["b_ptr"][0])))
  np.testing.assert_allclose(attention, expected_attention, atol=2e-5)
  np.testing.assert_allclose(p_gen, expected_p_gen, atol=2e-5)
  # what the comparison tells apart: another layer's attention, the copy probability 1 − p_gen, a shifted step
  assert family == "lstm" or np.abs(first - last).max() > 0.05
  assert np.abs(expected_p_gen - 0.5).max() > 0.1 and np.abs(np.diff(expected_p_gen)).max() > 0.05
  assert np.abs(np.diff(expected_attention, axis=0)).max() > 0.01
  np.testing.assert_allclose(attention.sum(-1), 1.0, rtol=1e-5)
  assert ((p_gen > 0) & (p_gen < 1)).all()
  path = copy_maps.draw(attention, p_gen, [f"s{i}" for i in range(6)], [f"o{i}" for i in range(len(tokens))],
                        str(tmp_path / "map.png"), min_weight=0.1)
  assert open(path, "rb").read(8) == b"\x89PNG\r\n\x1a\n"
  heatmap, bars = copy_maps.figure(attention, p_gen, [f"s{i}" for i in range(6)],
                                   [f"o{i}" for i in range(len(tokens))], min_weight=0.1).axes
  for ax in (heatmap, bars):  # the summary reads top to bottom: its first token's row is at the top
    bottom, top = ax.get_ylim()
    assert top < bottom and abs(top - (-0.5)) < 1e-9
  assert [t.get_text() for t in heatmap.get_yticklabels()][0] == "o0"
  from attnjax.visualize import plt  # pylint: disable=g-import-not-at-top
  plt.close(heatmap.figure)
  with pytest.raises(ValueError, match="copy=False"):
    copy_maps.copy_map(RNNSeq2Seq(src_vocab_size=12, tgt_vocab_size=12, attention="bahdanau"), params, src, eval_cfg)


def test_epochs_are_the_steps_batches_over_the_training_pairs(tmp_path):
  import numpy as np  # pylint: disable=g-import-not-at-top
  np.savez(tmp_path / "tokens.train.abc.npz", src=np.zeros(5, np.int32), src_offsets=np.arange(201),
           tgt=np.zeros(5, np.int32), tgt_offsets=np.arange(201))
  record = {"workdir": str(tmp_path), "step": 50, "config": {"data": {"batch_size": 16}}}
  assert summ.epochs(record) == "4.00"  # 50 x 16 / 200
  assert summ.epochs({**record, "config": {"data": {"batch_size": None}}}) == "—"
  assert summ.epochs({**record, "workdir": str(tmp_path / "none")}) == "—"
