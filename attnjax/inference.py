"""Inference from a trained model: sharded decoding and span prediction, and choosing and averaging checkpoints.

Decoding splits the rows of every batch across **all** devices of the mesh and, on several hosts, across processes:
each host builds only its block of rows, each device runs the whole beam (or greedy) search on its share inside
``shard_map`` (its own ``while_loop``, stopping when its own rows are done), and the results are gathered to every
host, of which process 0 alone writes files and scores. Parameters are replicated once per evaluation (decoding is
latency-bound and every device needs all of them); models too large for one device are outside what this does.

Sentences are sorted by length before batching (less padding, fewer compiled shapes: widths are powers of two) and
put back in their order afterwards. Nothing is dropped: a source longer than ``max_src_len`` tokens is truncated for
decoding and counted, an empty source gives an empty hypothesis, so there is exactly one output per input line.

A trained workdir's parameters for inference: :func:`attnjax.trained.load_workdir`.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any, Sequence

from absl import logging
import jax
import jax.numpy as jnp
from jax.experimental import multihost_utils
from jax.sharding import NamedSharding, PartitionSpec as P
import numpy as np

from attnjax.progress import Progress
from attnjax.tokens import round_up
from attnjax.data.vocab import UNK_ID
from attnjax.decoding import ATTNJAX, SearchRules, beam_search, greedy_search, sample_search
from attnjax.models.interface import PAD_ID
from attnjax.runtime import partitioning
from attnjax.runtime.checkpointing import Checkpointer

DECODES = ("beam", "greedy", "sample")
_FILLER_ID = UNK_ID  # filler rows hold one token, so that no row is empty (their output is dropped)


def _width(length: int, cap: int) -> int:
  """Padded source width: the next power of two >= ``length`` (at least 8), never above ``cap`` rounded up to 8."""
  return min(max(8, 1 << max(length - 1, 0).bit_length()), round_up(cap))


def replicate(tree, mesh):
  """``tree`` replicated on every device of ``mesh`` (one all-gather, instead of one per decoded batch)."""
  return jax.jit(lambda x: x, out_shardings=NamedSharding(mesh, P()))(tree)


def to_host(x) -> np.ndarray:
  """The whole of a (possibly multi-host) global array as NumPy on every process."""
  if jax.process_count() > 1:
    return np.asarray(multihost_utils.process_allgather(x, tiled=True))
  return np.asarray(x)


def broadcast_json(value: Any) -> Any:
  """``value`` (JSON-serialisable) of process 0 on every process: scores computed once, agreed by all."""
  if jax.process_count() == 1:
    return value
  data = np.frombuffer(json.dumps(value).encode("utf-8"), np.uint8) if jax.process_index() == 0 else np.zeros(0,
                                                                                                              np.uint8)
  size = int(multihost_utils.broadcast_one_to_all(np.int64(data.size)))
  buffer = np.zeros(size, np.uint8)
  buffer[:data.size] = data[:size]
  return json.loads(bytes(np.asarray(multihost_utils.broadcast_one_to_all(buffer))).decode("utf-8"))


class RowSharding:
  """Global batches whose rows are split over every device of ``mesh`` (and so over processes).

  ``rows(n)`` rounds a batch size up to a multiple of the device count; ``put(global_rows)`` turns a host array of the
  whole global batch into a sharded global array, each process passing only its block of rows.
  """

  def __init__(self, mesh):
    self.mesh = mesh
    self.spec = P(tuple(mesh.axis_names))
    self.sharding = NamedSharding(mesh, self.spec)

  def rows(self, n: int) -> int:
    return round_up(max(n, 1), self.mesh.size)

  def put(self, global_rows: np.ndarray):
    n = global_rows.shape[0]
    per_process = n // jax.process_count()
    local = global_rows[jax.process_index() * per_process:(jax.process_index() + 1) * per_process]
    return jax.make_array_from_process_local_data(self.sharding, local, global_rows.shape)


class Decoder:
  """Beam search, greedy search or sampling, sharded over every device of ``mesh`` (see the module docstring).

  ``decoder(params, src, rng=None)``: ``params`` replicated (:func:`replicate`), ``src`` a global ``[B, S]`` array
  from :meth:`RowSharding.put`; returns ``(tokens [B, n_best, L], scores [B, n_best], attention [B, n_best, L, S] or
  None)`` sharded the same way. With ``decode="sample"``, ``n_best`` is the number of samples a sentence gets and
  ``rng`` the key they are drawn from: the k-th sample of a sentence uses ``fold_in(rng, k)`` whatever its batch, so
  a sentence's samples depend only on the key (and the sentence).
  """

  def __init__(self, model, mesh, *, decode: str = "beam", beam_size: int = 4, alpha: float = 0.6,
               max_len_a: float = 1.5, max_len_b: int = 10, n_best: int = 1, return_attention: bool = False,
               vocab_size: int | None = None, min_len: int = 0, no_repeat_ngram_size: int = 0,
               rules: SearchRules = ATTNJAX, temperature: float = 1.0, top_k: int = 0, top_p: float = 1.0):
    if decode not in DECODES:
      raise ValueError(f"decode must be one of {', '.join(DECODES)}, got {decode!r}")
    if decode == "greedy" and n_best != 1:
      raise ValueError(f"greedy decoding gives one hypothesis per sentence, not n_best={n_best}")
    if n_best < 1:
      raise ValueError(f"n_best must be >= 1, got {n_best}")
    self.rows = RowSharding(mesh)
    self.decode, self.return_attention, self.n_best = decode, return_attention, n_best
    self.traced_shapes: list[tuple[int, ...]] = []  # the per-device src shapes compiled (each device's share)
    # vocab_size: the real target vocabulary; PAD, BOS and the padded ids past it are never emitted
    common = dict(max_len_a=max_len_a, max_len_b=max_len_b, return_attention=return_attention, vocab_size=vocab_size,
                  min_len=min_len, no_repeat_ngram_size=no_repeat_ngram_size, rules=rules)
    if decode == "sample":
      if not temperature > 0 or not 0 < top_p <= 1 or top_k < 0:
        raise ValueError(f"sampling needs temperature > 0, top_p in (0, 1] and top_k >= 0, got "
                         f"temperature={temperature}, top_p={top_p}, top_k={top_k}")

    def local(params, src, rng):  # one device's rows: the search never looks at another row
      self.traced_shapes.append(tuple(src.shape))
      variables = {"params": params}
      if decode == "beam":
        r = beam_search(model, variables, src, beam_size=beam_size, alpha=alpha, n_best=n_best, **common)
        out = (r.tokens, r.scores, r.attention)
      elif decode == "greedy":
        r = greedy_search(model, variables, src, **common)
        out = (r.tokens[:, None], r.scores[:, None], None if r.attention is None else r.attention[:, None])
      else:  # every sentence n_best times, the k-th copy drawing from fold_in(rng, k)
        rows = src.shape[0]
        keys = jax.vmap(jax.random.fold_in, in_axes=(None, 0))(rng, jnp.tile(jnp.arange(n_best), rows))
        r = sample_search(model, variables, jnp.repeat(src, n_best, axis=0), keys, temperature=temperature,
                          top_k=top_k, top_p=top_p, **common)
        unflat = lambda x: None if x is None else x.reshape((rows, n_best) + x.shape[1:])
        out = (unflat(r.tokens), unflat(r.scores), unflat(r.attention))
      return out if return_attention else out[:2]

    spec = self.rows.spec
    n_out = 3 if return_attention else 2
    self._fn = jax.jit(jax.shard_map(local, mesh=mesh, in_specs=(P(), spec, P()), out_specs=(spec,) * n_out,
                                     check_vma=False))
    self._local = jax.jit(local)  # a small batch's whole search on the first device (see one_device)
    self._params_one: tuple[Any, Any] | None = None  # (replicated params, the first device's copy of them)

  def __call__(self, params, src, rng=None):
    out = self._fn(params, src, jax.random.PRNGKey(0) if rng is None else rng)
    return out if self.return_attention else (*out, None)

  def one_device(self, sentences: int) -> bool:
    """Whether ``sentences`` decode on the mesh's first device alone: fewer sentences than devices, in one process.
    Split over the devices, such a batch would give some devices filler rows only and every step a synchronisation
    across devices; on a CPU host with a JAX device per core, one sentence decoded 1.3-1.5x slower split over two
    devices than on one (docs/benchmarks.md)."""
    return jax.process_count() == 1 and 1 < self.rows.mesh.size and sentences < self.rows.mesh.size

  def decode_rows(self, params, src: np.ndarray, rng=None, *, one_device: bool = False):
    """``(tokens, scores, attention or None)`` on the host for the host rows ``src`` (the whole global batch):
    split over the mesh, or (``one_device``) the whole search on the mesh's first device."""
    rng = jax.random.PRNGKey(0) if rng is None else rng
    if not one_device:
      out = self(params, self.rows.put(src), rng)
      return tuple(None if x is None else to_host(x) for x in out)
    device = self.rows.mesh.devices.flat[0]
    if self._params_one is None or self._params_one[0] is not params:  # the replicated copy already on that device
      on_device = lambda x: next(shard.data for shard in x.addressable_shards if shard.device == device)
      self._params_one = (params, jax.tree_util.tree_map(on_device, params))
    out = self._local(self._params_one[1], jax.device_put(src, device), jax.device_put(rng, device))
    out = out if self.return_attention else (*out, None)
    return tuple(None if x is None else np.asarray(x) for x in out)

  def lower(self, params, src, rng=None):
    return self._fn.lower(params, src, jax.random.PRNGKey(0) if rng is None else rng)


@dataclasses.dataclass
class Translations:
  """Outputs of :func:`translate_texts`, one entry per input text, in input order."""
  hypotheses: list[str]  # the best hypothesis
  nbest: list[list[tuple[str, float]]]  # (hypothesis, score) best first (samples: in the order drawn)
  attention: list[np.ndarray] | None  # [generated tokens incl. EOS, source tokens] of the best, on request
  truncated_sources: int  # sources cut to max_src_len tokens
  empty_sources: int  # sources with no token: decoded to ""


def translate_texts(decoder: Decoder, params, src_vocab, tgt_vocab, texts: Sequence[str], *, max_src_len: int,
                    batch_size: int, rng=None, log_progress: bool = True) -> Translations:
  """Decodes every text (see the module docstring); ``params`` replicated by :func:`replicate`; ``rng``: the key
  a sampling decoder draws from (:class:`Decoder`); ``log_progress``: log the progress of a long call.

  ``batch_size`` is the global number of sentences per step, rounded up to a multiple of the device count; a last
  batch with fewer sentences takes the next power of two rows instead (one sentence decodes as a batch of one, not
  of ``batch_size``), so that a few compiled shapes serve every call; a batch of fewer sentences than devices decodes
  on one device (:meth:`Decoder.one_device`).
  """
  encoded = [src_vocab.encode(t) for t in texts]
  truncated = sum(len(ids) > max_src_len for ids in encoded)
  if truncated:
    logging.warning("decoding: %d of %d sources are longer than data.max_src_len=%d tokens and are truncated to it",
                    truncated, len(texts), max_src_len)
  encoded = [ids[:max_src_len] for ids in encoded]
  order = sorted((i for i, ids in enumerate(encoded) if ids), key=lambda i: -len(encoded[i]))
  n_best = [[("", 0.0)] * decoder.n_best for _ in texts]
  attention = [np.zeros((0, len(ids)), np.float32) for ids in encoded] if decoder.return_attention else None
  full = decoder.rows.rows(batch_size)
  progress = Progress("decoding (longest first)", len(order), enabled=log_progress and jax.process_index() == 0)
  for begin in range(0, len(order), full):
    progress.update(begin)
    chunk = order[begin:begin + full]
    one_device = decoder.one_device(len(chunk))
    rows = 1 << max(len(chunk) - 1, 0).bit_length()
    rows = rows if one_device else min(full, decoder.rows.rows(rows))
    width = _width(len(encoded[chunk[0]]), max_src_len)
    src = np.full((rows, width), PAD_ID, np.int32)
    src[:, 0] = _FILLER_ID
    for row, i in enumerate(chunk):
      src[row, :len(encoded[i])] = encoded[i]
    tokens, scores, attn = decoder.decode_rows(params, src, rng, one_device=one_device)
    for row, i in enumerate(chunk):
      n_best[i] = [(tgt_vocab.decode(tokens[row, k].tolist()).replace("\n", " "), float(scores[row, k]))
                   for k in range(tokens.shape[1])]
      if attn is not None:
        length = int(np.sum(tokens[row, 0] != PAD_ID))
        attention[i] = attn[row, 0, :length, :len(encoded[i])]
  progress.update(len(order))
  return Translations([n[0][0] for n in n_best], n_best, attention, truncated,
                      sum(not ids for ids in encoded))


class SpanPredictor:
  """Span scores of every question or window, sharded over the devices like :class:`Decoder`.

  ``predictor(params, question, context)`` -> ``(start, end, span_score, null_score)``, each ``[B]``: the best
  non-null span and its score start_s + end_e (``SpanQA.decode_spans``' band search), and the model's no-answer score
  (-inf for a model without one), so that windows of one context can be compared (:func:`predict_spans`).
  """

  def __init__(self, model, mesh):
    from attnjax.models.span_qa import best_span  # pylint: disable=g-import-not-at-top
    self.rows = RowSharding(mesh)

    def local(params, question, context):
      outputs = model.apply({"params": params}, question, context)
      start, end, score, _ = best_span(outputs["start_logits"], outputs["end_logits"], outputs["context_mask"],
                                       max_answer_length=model.max_answer_length)
      null = outputs.get("no_answer_logit")
      null = jnp.full_like(score, -jnp.inf) if null is None else null.astype(score.dtype)
      return start, end, score, null

    spec = self.rows.spec
    self._fn = jax.jit(jax.shard_map(local, mesh=mesh, in_specs=(P(), spec, spec), out_specs=(spec,) * 4,
                                     check_vma=False))

  def __call__(self, params, question, context):
    return self._fn(params, question, context)


def predict_spans(predictor: SpanPredictor, params, examples, *, max_question_len: int, max_context_len: int,
                  batch_size: int, null_margins: bool = False) -> list:
  """``[(example, (start, end))]``, one per question in order of first appearance: the best span over the question's
  examples (one, or one per window of a long context: :func:`attnjax.data.squad_windows.best_across_windows`), or
  ``(NO_ANSWER, NO_ANSWER)`` when the model's no-answer score beats it. With ``null_margins``: ``[(example, (start,
  end), margin)]``, the best non-null span and how far the null score beats it
  (:func:`attnjax.data.squad_windows.spans_and_null_margins`), for a no-answer threshold chosen elsewhere."""
  from attnjax.data.squad_windows import best_across_windows, spans_and_null_margins  # pylint: disable=g-import-not-at-top
  rows = predictor.rows.rows(batch_size)
  q_width, c_width = round_up(max_question_len), round_up(max_context_len)
  outputs = [[], [], [], []]
  progress = Progress("predicting spans", len(examples), "windows", enabled=jax.process_index() == 0)
  for begin in range(0, len(examples), rows):
    progress.update(begin)
    chunk = examples[begin:begin + rows]
    question = np.full((rows, q_width), PAD_ID, np.int32)
    context = np.full((rows, c_width), PAD_ID, np.int32)
    for i, e in enumerate(chunk):
      question[i, :len(e.question_ids)] = e.question_ids
      context[i, :len(e.context_ids)] = e.context_ids
    out = predictor(params, predictor.rows.put(question), predictor.rows.put(context))
    for collected, x in zip(outputs, out):
      collected.append(to_host(x)[:len(chunk)])
  progress.update(len(examples))
  starts, ends, span_scores, null_scores = (np.concatenate(x) if x else np.zeros(0) for x in outputs)
  choose = spans_and_null_margins if null_margins else best_across_windows
  return choose(examples, starts, ends, span_scores, null_scores)


# ------------------------------------------------------------------------------------------------ from a workdir


def inference_mesh(config):
  """The config's mesh if it fits the devices here, else every device on the first axis (a checkpoint restores onto
  any mesh; decoding uses all devices either way)."""
  try:
    return partitioning.create_mesh(config.mesh.axes, config.mesh.shape)
  except ValueError as e:
    logging.warning("mesh.shape=%s does not fit the %d devices here (%s): decoding on a data-parallel mesh",
                    config.mesh.shape, jax.device_count(), e)
    return partitioning.create_mesh(config.mesh.axes, (-1,) + (1,) * (len(config.mesh.axes) - 1))


def choose_steps(checkpointer: Checkpointer, checkpoint: str, average_last: int | None) -> tuple[int, ...]:
  """The checkpoint steps to load: ``best`` / ``latest`` / a step number, or the last ``average_last`` steps."""
  available = checkpointer.steps()
  if not available:
    raise FileNotFoundError(f"no checkpoint in {checkpointer.directory}")
  if average_last:
    if average_last < 1:
      raise ValueError(f"--average_last must be positive, got {average_last}")
    if len(available) < average_last:
      raise ValueError(f"--average_last={average_last} needs {average_last} checkpoints but {checkpointer.directory} "
                       f"keeps {len(available)} ({available}): train with --config.train.keep_checkpoints="
                       f"{average_last} or more")
    return tuple(available[-average_last:])
  if checkpoint == "best":
    best = checkpointer.best_step()
    if best is None:
      logging.warning("no checkpoint was saved with a validation metric: using the latest")
      return (available[-1],)
    return (best,)
  if checkpoint == "latest":
    return (available[-1],)
  try:
    step = int(checkpoint)
  except ValueError:
    raise ValueError(f"--checkpoint must be 'best', 'latest' or a step number, got {checkpoint!r}") from None
  if step not in available:
    raise ValueError(f"--checkpoint={step}: no such step in {checkpointer.directory} (steps: {available})")
  return (step,)


def average_params(trees):
  """The element-wise mean of parameter trees (float32 accumulation), as Vaswani et al. averaged checkpoints."""
  total = jax.tree_util.tree_map(lambda x: x.astype(jnp.float32), trees[0])
  for tree in trees[1:]:
    total = jax.tree_util.tree_map(lambda a, b: a + b.astype(jnp.float32), total, tree)
  return jax.tree_util.tree_map(lambda a, ref: (a / len(trees)).astype(ref.dtype), total, trees[0])


def decoder_for(model, mesh, eval_cfg, *, vocab_size: int | None = None, n_best: int = 1,
                return_attention: bool = False) -> Decoder:
  """A :class:`Decoder` with the search settings of ``config.eval``; ``vocab_size`` the real target vocabulary's.
  ``eval.rules``, where a config has it (a Hugging Face checkpoint's: :func:`attnjax.trained.checkpoint_config`),
  are the :class:`attnjax.decoding.SearchRules`."""
  return Decoder(model, mesh, decode=eval_cfg.decode, beam_size=eval_cfg.beam_size, alpha=eval_cfg.alpha,
                 max_len_a=eval_cfg.max_len_a, max_len_b=eval_cfg.max_len_b, n_best=n_best,
                 return_attention=return_attention, vocab_size=vocab_size, min_len=eval_cfg.get("min_len", 0),
                 no_repeat_ngram_size=eval_cfg.get("no_repeat_ngram_size", 0),
                 rules=search_rules(eval_cfg.get("rules")))


def search_rules(rules) -> SearchRules:
  """``eval.rules`` (a dict or ConfigDict of :class:`attnjax.decoding.SearchRules` fields; a Hugging Face
  checkpoint's: :func:`attnjax.trained.checkpoint_config`) as SearchRules; None: attnjax's."""
  return ATTNJAX if rules is None else SearchRules(**(rules.to_dict() if hasattr(rules, "to_dict") else rules))
