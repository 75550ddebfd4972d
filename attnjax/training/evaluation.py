"""Evaluation shared by the training loop and ``attnjax.evaluate``: validation loss, decoding or span prediction,
scoring."""

from __future__ import annotations

import functools

import numpy as np
from absl import logging
import jax
from jax.experimental import multihost_utils

from attnjax import metrics as metrics_lib
from attnjax.decoding import beam_search, greedy_search
from attnjax.data import squad
from attnjax.data.vocab import UNK_ID
from attnjax.models.interface import PAD_ID
from attnjax.training import steps


def _round_up(x: int, multiple: int) -> int:
  return -(-x // multiple) * multiple


def _to_host(x):
  return np.asarray(multihost_utils.process_allgather(x, tiled=True)) if jax.process_count() > 1 else np.asarray(x)


def decode(model, params, task, split: str, eval_cfg, max_src_len: int, *, limit: int | None = None,
           return_attention: bool = False):
  """Decodes ``split`` (its first ``limit`` examples) with the configured search.

  Returns ``(hypotheses, references, sources, attention)``: detokenised strings, and per example the cross-attention
  ``[generated, source]`` when ``return_attention`` (else None). Sources longer than ``max_src_len`` are skipped and
  counted in the log. Every batch has the same shape (one compilation): sources padded to ``max_src_len`` rounded
  up to 8, the last batch filled with empty rows.
  """
  pairs = task.splits[split][:limit] if limit else task.splits[split]
  encoded = [(task.src_vocab.encode(s), s, t) for s, t in pairs]
  kept = [e for e in encoded if 0 < len(e[0]) <= max_src_len]
  if len(kept) < len(encoded):
    logging.warning("decode: skipped %d of %d %s examples (empty or source longer than %d tokens)",
                    len(encoded) - len(kept), len(encoded), split, max_src_len)
  width = _round_up(max_src_len, 8)
  bs = eval_cfg.batch_size
  hyps, refs, sources, attention = [], [], [], []
  for start in range(0, len(kept), bs):
    chunk = kept[start:start + bs]
    src = np.full((bs, width), PAD_ID, np.int32)
    for i, (ids, _, _) in enumerate(chunk):
      src[i, :len(ids)] = ids
    src[len(chunk):, 0] = 3  # filler rows: one token, so that no row is empty (their output is dropped)
    common = dict(max_len_a=eval_cfg.max_len_a, max_len_b=eval_cfg.max_len_b, return_attention=return_attention)
    if eval_cfg.decode == "beam":
      result = beam_search(model, {"params": params}, src, beam_size=eval_cfg.beam_size, alpha=eval_cfg.alpha,
                           **common)
      tokens, attn = _to_host(result.tokens)[:, 0], result.attention
      attn = None if attn is None else _to_host(attn)[:, 0]
    else:
      result = greedy_search(model, {"params": params}, src, **common)
      tokens, attn = _to_host(result.tokens), None if result.attention is None else _to_host(result.attention)
    # ids of the padding rows added to the vocabulary (data.vocab_multiple) are no token: read them as UNK
    tokens = np.where(tokens < task.tgt_vocab.size, tokens, UNK_ID)
    for i, (ids, s, t) in enumerate(chunk):
      hyps.append(task.tgt_vocab.decode(tokens[i].tolist()))
      refs.append(t)
      sources.append(s)
      if attn is not None:
        n = int(np.sum(tokens[i] != PAD_ID))
        attention.append(attn[i, :n, :len(ids)])
  return hyps, refs, sources, (attention if return_attention else None)


@functools.partial(jax.jit, static_argnames=("model",))
def _best_spans(model, params, question, context):
  return model.decode_spans(model.apply({"params": params}, question, context))


def predict_spans(model, params, task, split: str, eval_cfg, *, limit: int | None = None):
  """Answers every question of ``split`` (its first ``limit``) with the model's best span or "no answer".

  Every batch has one shape (one compilation): questions padded to ``task.max_question_len`` and contexts to
  ``task.max_context_len`` (rounded up to 8), the last batch filled with empty rows. A question whose context has no
  token (or that the model answers with the null span) gets ``""``.

  Returns ``(predictions, examples)``: question id -> answer text cut from the original context, and the tokenized
  examples with their gold answers (:func:`attnjax.data.squad.gold_answers`).
  """
  examples = task.examples(split, train=False)
  examples = examples[:limit] if limit else examples
  bs = eval_cfg.batch_size
  q_width, c_width = _round_up(task.max_question_len, 8), _round_up(task.max_context_len, 8)
  spans = []
  for begin in range(0, len(examples), bs):
    chunk = examples[begin:begin + bs]
    question = np.full((bs, q_width), PAD_ID, np.int32)
    context = np.full((bs, c_width), PAD_ID, np.int32)
    for i, e in enumerate(chunk):
      question[i, :len(e.question_ids)] = e.question_ids
      context[i, :len(e.context_ids)] = e.context_ids
    start, end, _, is_null = (_to_host(x) for x in _best_spans(model, params, question, context))
    for i, e in enumerate(chunk):
      null = bool(is_null[i]) or not e.context_ids
      spans.append((squad.NO_ANSWER, squad.NO_ANSWER) if null else (int(start[i]), int(end[i])))
  return squad.predictions_from_spans(examples, spans), examples


def score_spans(predictions, examples, names, version: str) -> dict[str, float]:
  """SQuAD EM / F1 (official normalisation, max over gold answers; v2.0 adds the HasAns / NoAns breakdown)."""
  scores = metrics_lib.squad_scores(predictions, squad.gold_answers(examples), version=version)
  unknown = [name for name in names if name not in scores]
  if unknown:
    raise ValueError(f"unknown span metric(s) {unknown} (available: exact_match, f1)")
  extra = [k for k in scores if k.startswith(("HasAns", "NoAns")) and not k.endswith("total")]
  return {name: float(scores[name]) for name in list(names) + extra}


def score(hypotheses, references, names) -> tuple[dict[str, float], dict[str, str]]:
  """Metric values (percentages) and sacreBLEU / METEOR signatures for the names in ``names``."""
  values, signatures = {}, {}
  for name in names:
    if name == "exact_match":
      values[name] = 100.0 * float(np.mean([h == r for h, r in zip(hypotheses, references)]))
    elif name in ("bleu", "chrf", "ter", "meteor"):
      result = getattr(metrics_lib, name)(hypotheses, references)
      values[name], signatures[name] = float(result.score), result.signature
    elif name == "rouge":  # ROUGE-1/2/L/Lsum F1 with stemming, as the summarization papers report
      values.update(metrics_lib.rouge(hypotheses, [metrics_lib.split_sentences(r) for r in references]))
    else:
      raise ValueError(f"unknown decoding metric {name!r}")
  return values, signatures


def loss(eval_step, params, batches, mesh, rules) -> dict[str, float]:
  """Validation loss and NLL over ``batches`` (host-local numpy batches), weighted by the step's ``ntokens``: per
  target token for seq2seq, per question for extractive QA."""
  totals = {"loss_sum": 0.0, "nll_sum": 0.0, "ntokens": 0.0}
  for batch in batches:
    out = jax.device_get(eval_step(params, steps.global_batch(batch, mesh, rules)))
    for key in totals:
      totals[key] += float(out[key])
  n = max(totals["ntokens"], 1.0)
  return {"loss": totals["loss_sum"] / n, "nll": totals["nll_sum"] / n}
