"""Mutation check: each single-line corruption of a paper's equation must make its tests fail.

Self-consistency tests (teacher forcing = incremental decoding, padding invariance, finite gradients...) pass for a
model that is consistently wrong. Each mutant below changes one equation of one paper in one line of ``attnjax/``
and names the tests that must notice. For each mutant the script copies ``attnjax/``, ``tests/``, ``tools/`` and
``experiments/`` (and ``setup.cfg``, for pytest's settings) to a fresh temporary directory, replaces the original text (which must occur
exactly once, else the mutant is reported "not applied": the code moved and the mutant needs updating), and runs

    python -m pytest -x -q -p no:cacheprovider <the mutant's tests>

there, with cwd and PYTHONPATH = the copy (so the copy's ``attnjax`` shadows the editable install) and
JAX_PLATFORMS=cpu. Outcomes: "killed" (the tests failed, or timed out), "survived" (they passed: the tests do not pin
that equation), "not applied", "tests missing" (a named test file does not exist yet), "baseline fails" (the tests
already fail on the unmodified code, so a "kill" would mean nothing: the mutant is not run), "error" (pytest could not
run the selection: usage error, nothing collected). The baseline runs each distinct selection once on an unmodified
copy before the mutants.

Usage (from the repository root):

    python -m tools.mutation_check                 # all mutants (make mutants)
    python -m tools.mutation_check NAME [NAME ...] # some of them
    python -m tools.mutation_check --list          # the mutants and their tests

Exit status: 0 if every mutant whose tests exist was killed; 1 if one survived, could not be applied, errored, or
its tests fail on the unmodified code (with ``--strict``, also if a mutant's tests are missing).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
COPIED_TREES = ("attnjax", "tests", "tools", "experiments")
COPIED_FILES = ("setup.cfg",)

TRANSFORMER_EQ = "tests/models/test_transformer_equations.py"
TRANSFORMER_LOGITS = f"{TRANSFORMER_EQ}::test_transformer_logits_equal_the_papers_equations"
TRANSFORMER_PAPER = f"{TRANSFORMER_LOGITS}[post_norm_sinusoidal]"
TRANSFORMER_PRE_NORM = f"{TRANSFORMER_LOGITS}[pre_norm_sinusoidal]"
TRANSFORMER_SHAW = f"{TRANSFORMER_LOGITS}[post_norm_shaw]"
CONVS2S_EQ = "tests/models/test_convs2s_equations.py"
CONVS2S_LOGITS = CONVS2S_EQ  # one test: logits and attention
LOSSES = "tests/training/test_losses_and_schedule.py"
RNN_TESTS = ("tests/models/test_rnn_equations.py", "tests/models/test_rnn_seq2seq.py")
DECODING_CONSTRAINTS = "tests/test_decoding_constraints.py"
COPY_EQ = "tests/models/test_copy_coverage_equations.py"
BERT_NUMPY = "tests/transfer/test_bert.py::test_an_imported_tiny_bert_equals_a_numpy_transcription_of_berts_forward_pass"
HF_EXPORT = "tests/transfer/test_hf_export.py"
MEAN_POOL = "tests/transfer/test_bert.py::test_mean_pooling_averages_the_real_tokens_and_normalises"
MLM_MASKING = "tests/data/test_mlm.py::test_masking_chooses_15_percent_of_the_real_tokens_and_replaces_them_80_10_10"
MLM_HEAD = "tests/training/test_mlm_training.py::test_the_mlm_head_is_tied_to_the_input_embeddings_and_equals_its_formula"
MLM_LOSS = "tests/training/test_mlm_training.py::test_the_loss_is_the_cross_entropy_at_the_masked_positions_only"
LM_TESTS = "tests/models/test_decoder_lm.py"
LM_SCALING_REPORT = "tests/report/test_lm_scaling.py::test_the_report_measures_the_three_laws_and_extrapolation_from_the_runs"
LM_FRONTIER = "tests/report/test_lm_scaling.py::test_the_frontier_keeps_each_point_below_every_point_of_less_compute"
LM_JOINT = "tests/report/test_lm_scaling.py::test_the_joint_law_recovers_kaplans_exponents_from_points_on_eq_1_5"
TOP_P = "tests/test_generation.py::test_top_p_samples_from_the_smallest_set_that_reaches_p"
TOP_K = "tests/test_generation.py::test_top_k_never_samples_outside_the_k_and_follows_the_renormalised_softmax"
SPAN_NULL_POINTERS = "tests/models/test_span_qa.py::test_span_loss_puts_the_cls_start_and_end_in_their_own_pointer_distributions"
SPAN_VERIFIER_LOSS = "tests/models/test_span_qa.py::test_span_loss_adds_the_verifiers_binary_cross_entropy"
SPAN_VERIFIER_STEP = ("tests/models/test_span_qa.py::"
                      "test_the_training_step_adds_the_verifier_to_the_loss_but_not_to_the_nll_and_skips_filler_rows")
SPAN_VERIFIER_SCORE = "tests/models/test_span_qa.py::test_the_verifier_reads_cls_and_adds_its_logit_to_the_null_score"


@dataclasses.dataclass(frozen=True)
class Mutant:
  name: str
  path: str  # relative to the repository root
  original: str  # must occur exactly once in the file
  replacement: str
  tests: tuple[str, ...]  # pytest files or node ids that must fail
  equation: str  # what the original line implements


MUTANTS = (
    Mutant("question-negatives-answer-swapped", "attnjax/data/squad.py",
           "and not any(q.question[a:b] in text for text in q.answer_texts)]",
           "]",
           ("tests/data/test_squad_protocols.py::"
            "test_question_negatives_swap_one_name_or_number_for_one_their_paragraph_lacks",),
           "an entity swap (SQuAD 2.0's unanswerable questions) never swaps what the answer holds"),
    Mutant("question-negatives-present-pick", "attnjax/data/squad.py",
           "if c != old and absent(q.context, c)), None)",
           "if c != old), None)",
           ("tests/data/test_squad_protocols.py::"
            "test_question_negatives_swap_one_name_or_number_for_one_their_paragraph_lacks",),
           "an entity or number swap puts in what the paragraph lacks"),
    Mutant("ema-decay-weights", "attnjax/training/steps.py",
           "(d * a + (1.0 - d) * p)",
           "((1.0 - d) * a + d * p)",
           ("tests/training/test_ema.py::test_the_average_is_the_papers_recursion_over_the_runs_parameters",),
           "the parameters' moving average (BiDAF): ema <- d * ema + (1 - d) * params"),
    Mutant("ema-warmup-offset", "attnjax/training/steps.py",
           "(1.0 + t) / (10.0 + t)",
           "(1.0 + t) / (9.0 + t)",
           ("tests/training/test_ema.py::test_the_warmed_up_decay_is_min_of_d_and_one_plus_t_over_ten_plus_t",),
           "the average's warmed-up decay: min(d, (1 + t) / (10 + t))"),
    Mutant("memory-attention-sqrt-dk", "attnjax/kernels/dot_product.py",
           "preferred_element_type=acc) * jnp.asarray(1.0 / math.sqrt(h),",
           "preferred_element_type=acc) * jnp.asarray(1.0 / h,",
           ("tests/kernels/test_dot_product.py::"
            "test_attention_over_a_projected_memory_in_its_head_major_layout_matches_numpy_transcription",
            TRANSFORMER_PAPER),
           "Vaswani eq. 1 over the cross-attention cache: softmax(Q K^T / sqrt(d_k)) V"),
    Mutant("squad2-null-per-pointer", "attnjax/models/span_qa.py",
           "null_end = outputs[\"no_answer_end_logit\"].astype(jnp.float32)[:, None]",
           "null_end = null_start",
           (SPAN_NULL_POINTERS,),
           "Devlin §4.3: start[CLS] extends the start distribution and end[CLS] the end distribution"),
    Mutant("squad2-verifier-bce-label", "attnjax/models/span_qa.py",
           "optax.sigmoid_binary_cross_entropy(verifier, impossible.astype(jnp.float32))",
           "optax.sigmoid_binary_cross_entropy(verifier, 1.0 - impossible.astype(jnp.float32))",
           (SPAN_VERIFIER_LOSS, SPAN_VERIFIER_STEP),
           "Retro-Reader's internal verifier: BCE of sigma(v) against 'unanswerable'"),
    Mutant("squad2-verifier-in-null-score", "attnjax/models/span_qa.py",
           "null = jnp.sum(null, axis=1)  # n = start[CLS] + end[CLS] (+ v)",
           "null = null[:, 0] + null[:, 1]",
           (SPAN_VERIFIER_SCORE,),
           "Retro-Reader's rear verification: no answer iff n + v > the best span's score"),
    Mutant("embedding-sqrt-dmodel", "attnjax/layers/embedding.py",
           "return x * jnp.asarray(math.sqrt(self.features), self.dtype) if self.scale else x",
           "return x",
           (TRANSFORMER_PAPER, TRANSFORMER_PRE_NORM),
           "Vaswani §3.4: embeddings multiplied by sqrt(d_model)"),
    Mutant("sinusoid-frequencies", "attnjax/kernels/positions.py",
           "freqs = jnp.exp(-math.log(max_timescale) * jnp.arange(0, dim, 2, dtype=dtype) / dim)",
           "freqs = jnp.exp(-math.log(max_timescale) * jnp.arange(0, dim, 2, dtype=dtype) / (dim // 2))",
           (TRANSFORMER_PAPER,),
           "Vaswani §3.5: PE(pos, 2i) = sin(pos / 10000^(2i/d_model))"),
    Mutant("attention-sqrt-dk", "attnjax/kernels/dot_product.py",
           "scale = 1.0 / math.sqrt(h) if scale is None else float(scale)",
           "scale = 1.0 / h if scale is None else float(scale)",
           (TRANSFORMER_PAPER,),
           "Vaswani eq. 1: softmax(Q K^T / sqrt(d_k)) V"),
    Mutant("decoder-causal-mask", "attnjax/models/transformer.py",
           "self.self_attention(h, segment_ids=self_segments, is_causal=cache is None, kv_cache=self_cache,",
           "self.self_attention(h, segment_ids=self_segments, is_causal=False, kv_cache=self_cache,",
           (TRANSFORMER_PAPER,),
           "Vaswani §3.2.3: decoder self-attention masks the positions j > i"),
    Mutant("cross-attention-padding-mask", "attnjax/models/transformer.py",
           "self.cross_attention(h, None if cross_cache is not None else encoded, segment_ids=cross_segments,",
           "self.cross_attention(h, None if cross_cache is not None else encoded, segment_ids=None,",
           (TRANSFORMER_PAPER,),
           "encoder-decoder attention over the real source tokens only"),
    Mutant("ffn-relu", "attnjax/models/transformer.py",
           '"relu": nn.relu,',
           '"relu": lambda x: x,',
           (TRANSFORMER_PAPER,),
           "Vaswani eq. 2: FFN(x) = max(0, x W1 + b1) W2 + b2"),
    Mutant("post-norm-layernorm", "attnjax/models/transformer.py",
           "return (out if self.pre_norm else norm(out)), *extra",
           "return out, *extra",
           (TRANSFORMER_PAPER,),
           "Vaswani §3.1: LayerNorm(x + Sublayer(x))"),
    Mutant("shaw-clipping", "attnjax/kernels/positions.py",
           "return (jnp.clip(rel, -max_distance, max_distance) + max_distance).astype(jnp.int32)",
           "return (rel + max_distance).astype(jnp.int32)",
           (TRANSFORMER_SHAW,),
           "Shaw §3.2: a_ij = w_clip(j - i, k), clip(x, k) = max(-k, min(k, x))"),
    Mutant("shaw-factored-value-sum", "attnjax/kernels/dot_product.py",
           "by_distance = by_distance.at[rows, ids.reshape(b * n * t, s)].add(probs.reshape(b * n * t, s))",
           "by_distance = by_distance.at[rows, ids.reshape(b * n * t, s)].set(probs.reshape(b * n * t, s))",
           ("tests/kernels/test_positions.py::test_the_factored_table_matches_shaw_equations_per_row_of_positions",),
           "Shaw eq. 3: z_i = sum_j a_ij (v_j + a^V_ij): every key at one clipped distance adds its weight"),
    Mutant("shaw-sqrt-dz", "attnjax/kernels/positions.py",
           "scale=1.0 / math.sqrt(h) if scale is None else float(scale), dropout_rate=dropout_rate,",
           "scale=1.0 / h if scale is None else float(scale), dropout_rate=dropout_rate,",
           (TRANSFORMER_SHAW,),
           "Shaw eq. 4: e_ij = x_i W^Q (x_j W^K + a^K_ij)^T / sqrt(d_z)"),
    Mutant("convs2s-residual-sqrt-half", "attnjax/models/convs2s.py",
           "return (x + residual) * jnp.asarray(SQRT_HALF, x.dtype)",
           "return x + residual",
           (CONVS2S_LOGITS,),
           "Gehring §3.4: sums of two branches scaled by sqrt(0.5)"),
    Mutant("convs2s-context-sqrt-m", "attnjax/models/convs2s.py",
           "context = context[:, :, 0, :] * jnp.sqrt(m)[:, None, None].astype(self.dtype)",
           "context = context[:, :, 0, :]",
           (CONVS2S_LOGITS,),
           "Gehring §3.4: the conditional input scaled by m sqrt(1/m)"),
    Mutant("convs2s-decoder-state-plus-g", "attnjax/models/convs2s.py",
           'd = WeightNormDense(self.embed_dim, dtype=self.dtype, name="in_proj")(h) + g.astype(self.dtype)',
           'd = WeightNormDense(self.embed_dim, dtype=self.dtype, name="in_proj")(h)',
           (CONVS2S_LOGITS,),
           "Gehring §3.3: d_i = W_d h_i + b_d + g_i"),
    Mutant("convs2s-values-plus-e", "attnjax/models/convs2s.py",
           "ze = jnp.where(mask[..., None], z + e, jnp.zeros((), z.dtype))",
           "ze = jnp.where(mask[..., None], z, jnp.zeros((), z.dtype))",
           (CONVS2S_LOGITS,),
           "Gehring §3.3: c_i = sum_j a_ij (z_j + e_j)"),
    Mutant("convs2s-glu-gate", "attnjax/models/convs2s.py",
           "return a * jax.nn.sigmoid(b)",
           "return a * jnp.tanh(b)",
           (CONVS2S_LOGITS,),
           "Gehring §3.2 / Dauphin et al.: v([A B]) = A ⊗ σ(B)"),
    Mutant("squad2-best-threshold-text-on-unanswerable", "attnjax/metrics/squad.py",
           "      current -= 1.0",
           "      current -= 0.0",
           ("tests/test_metrics.py::test_squad_v2_scores_and_best_thresholds_follow_the_official_rules",
            "tests/test_metrics.py::test_squad_v2_best_threshold_is_the_best_of_every_threshold_applied"),
           "SQuAD 2.0 best threshold: a text answer on an unanswerable question loses its 'no answer' point"),
    Mutant("squad2-best-threshold-ties", "attnjax/metrics/squad.py",
           "    if current > best:",
           "    if current >= best:",
           ("tests/test_metrics.py::test_squad_v2_best_threshold_is_the_best_of_every_threshold_applied",),
           "SQuAD 2.0 best threshold: a tie keeps the smaller threshold"),
    Mutant("label-smoothing-dropped", "attnjax/models/losses.py",
           "loss = (1.0 - label_smoothing) * nll + label_smoothing * (lse - mean_support)",
           "loss = nll",
           (f"{LOSSES}::test_label_smoothed_loss_matches_hand_computation_and_ignores_padding",),
           "Szegedy §7 / Vaswani §5.4: H(q, p) with q = (1 - eps) onehot(y) + eps u"),
    Mutant("label-smoothing-over-all-v", "attnjax/models/losses.py",
           "mean_support = jnp.sum(jnp.where(support, z, 0.0), axis=-1) / jnp.sum(support)",
           "mean_support = jnp.mean(z, axis=-1)",
           (f"{LOSSES}::test_label_smoothed_loss_matches_hand_computation_and_ignores_padding",),
           "Szegedy §7: u uniform over the K ids that can be targets (not PAD, BOS, table padding)"),
    Mutant("label-smoothing-gradient", "attnjax/models/losses.py",
           "- jnp.where(is_target, (1.0 - label_smoothing) * g_loss + g_nll, 0.0)",
           "- jnp.where(is_target, g_loss + g_nll, 0.0)",
           (f"{LOSSES}::test_fused_loss_gradients_equal_autodiff_of_log_softmax",),
           "the loss's hand-written VJP: d loss / dz = p - (1 - eps) onehot(y) - (eps / K) 1_support"),
    Mutant("noam-decay-rsqrt", "attnjax/training/optim.py",
           "return lr * d_model**-0.5 * jnp.minimum(step**-0.5, step * max(warmup, 1)**-1.5)",
           "return lr * d_model**-0.5 * jnp.minimum(step**-1.0, step * max(warmup, 1)**-1.5)",
           (f"{LOSSES}::test_rsqrt_schedule_is_vaswani_equation_3",),
           "Vaswani eq. 3: lrate = d_model^-0.5 min(step^-0.5, step warmup^-1.5)"),
    Mutant("noam-warmup-power", "attnjax/training/optim.py",
           "return lr * d_model**-0.5 * jnp.minimum(step**-0.5, step * max(warmup, 1)**-1.5)",
           "return lr * d_model**-0.5 * jnp.minimum(step**-0.5, step * max(warmup, 1)**-1.0)",
           (f"{LOSSES}::test_rsqrt_schedule_is_vaswani_equation_3",),
           "Vaswani eq. 3: the warm-up branch step warmup^-1.5"),
    Mutant("bert-pre-norm-final-norm", "attnjax/models/bert.py",
           "      x = self.final_norm(x)",
           "      x = x",
           ("tests/transfer/test_bert.py::test_a_pre_norm_encoder_is_the_numpy_transcription_with_each_norm_before_its_"
            "sublayer_and_one_at_the_end",),
           "Xiong et al. 2020: a pre-norm stack ends with a LayerNorm of the last layer's output"),
    Mutant("bert-pre-norm-layers", "attnjax/models/bert.py",
           "relu_dropout_rate=0.0, pre_norm=self.pre_norm, relative=None",
           "relu_dropout_rate=0.0, pre_norm=False, relative=None",
           ("tests/transfer/test_bert.py::test_a_pre_norm_encoder_is_the_numpy_transcription_with_each_norm_before_its_"
            "sublayer_and_one_at_the_end",),
           "Xiong et al. 2020: pre-norm sublayers x + f(LN(x))"),
    Mutant("budget-schedule-clock-of-this-process", "attnjax/training/loop.py",
           "extra = steps.step_arguments(exp.schedule, self.train_seconds() / (60 * limit) if limit else 0.0)",
           "extra = steps.step_arguments(exp.schedule, (_clock() - self.run_start) / (60 * limit) if limit else 0.0)",
           ("tests/training/test_budget_schedule.py::test_the_rate_reaches_zero_when_the_budget_ends_also_across_a_restart",),
           "the budget schedule's p: training seconds of the whole run, restarts included (Izsak et al. 2021)"),
    Mutant("budget-schedule-rate-not-applied", "attnjax/training/steps.py",
           "updates = jax.tree_util.tree_map(lambda u: (u * rate).astype(u.dtype), updates)",
           "updates = updates",
           ("tests/training/test_budget_schedule.py::test_a_budget_step_is_adamw_at_the_rate_of_that_moment",),
           "the budget schedule scales the rate-1 optimiser's update by lr(step, p)"),
    Mutant("budget-schedule-decay", "attnjax/training/optim.py",
           "return self.learning_rate * warm * jnp.maximum(1.0 - jnp.asarray(progress, jnp.float32), 0.0)",
           "return self.learning_rate * warm * jnp.maximum(1.0 - 0.5 * jnp.asarray(progress, jnp.float32), 0.0)",
           ("tests/training/test_budget_schedule.py::test_the_rate_is_the_warm_up_times_the_budget_left",),
           "lr(step, p) = lr min((step + 1) / warmup, 1) max(1 - p, 0): zero when the budget is spent"),
    Mutant("gnmt-length-penalty", "attnjax/decoding.py",
           "return (length if form == \"length\" else (5.0 + length) / 6.0) ** alpha",
           "return (length if form == \"length\" else length * length) ** alpha",
           ("tests/test_length_penalty_and_beam_scores.py",),
           "Wu et al. 2016 eq. 14: lp(Y) = ((5 + |Y|) / 6)^alpha"),
    # the same mutant against the beam-search test alone (the run above stops at the first failing penalty value)
    Mutant("gnmt-length-penalty-beam", "attnjax/decoding.py",
           "return (length if form == \"length\" else (5.0 + length) / 6.0) ** alpha",
           "return (length if form == \"length\" else length * length) ** alpha",
           ("tests/test_length_penalty_and_beam_scores.py::"
            "test_beam_search_finds_the_hand_computed_best_hypotheses_and_scores",),
           "Wu et al. 2016 eq. 14, through the beam's best hypotheses and scores s(Y) = log P(Y) / lp(Y)"),
    Mutant("luong-attentional-tanh", "attnjax/models/rnn_seq2seq.py",
           "features = jnp.tanh(self.w_c(jnp.concatenate([context.astype(self.dtype), top], axis=-1)))",
           "features = self.w_c(jnp.concatenate([context.astype(self.dtype), top], axis=-1))",
           RNN_TESTS,
           "Luong eq. 5: h~_t = tanh(W_c [c_t; h_t])"),
    Mutant("bahdanau-maxout", "attnjax/models/rnn_seq2seq.py",
           "features = jnp.max(t_tilde.reshape(batch, self.maxout_dim, 2), axis=-1)",
           "features = jnp.mean(t_tilde.reshape(batch, self.maxout_dim, 2), axis=-1)",
           RNN_TESTS,
           "Bahdanau App. A.2.2: t_i = [max(t~_{i,2j-1}, t~_{i,2j})]_j (maxout, pool 2)"),
    Mutant("ngram-block-incomplete-ngram", "attnjax/decoding.py",
           "complete = (starts + n - 1 < count)[None]  # [1, J]: all of it generated already",
           "complete = (starts + n - 1 <= count)[None]",
           (DECODING_CONSTRAINTS,),
           "no_repeat_ngram_size: only n-grams wholly generated can be repeated"),
    Mutant("ngram-block-wrong-prefix", "attnjax/decoding.py",
           "last = jax.lax.dynamic_slice_in_dim(generated, jnp.maximum(count - (n - 1), 0), n - 1, axis=1)  # [N, n-1]",
           "last = jax.lax.dynamic_slice_in_dim(generated, jnp.maximum(count - n, 0), n - 1, axis=1)",
           (DECODING_CONSTRAINTS,),
           "no_repeat_ngram_size: the next token completes the n-gram of the last n - 1 tokens"),
    Mutant("min-length-off-by-one", "attnjax/decoding.py",
           "logprobs = jnp.where(is_eos & (count < min_len) & ~ending[:, None], NEG_INF, logprobs)",
           "logprobs = jnp.where(is_eos & (count < min_len - 1) & ~ending[:, None], NEG_INF, logprobs)",
           (DECODING_CONSTRAINTS,),
           "min_len: EOS banned until min_len tokens precede it"),
    Mutant("coverage-loss-max", "attnjax/layers/copy.py",
           "return jnp.sum(jnp.minimum(attention.astype(jnp.float32), coverage.astype(jnp.float32)), axis=-1)",
           "return jnp.sum(jnp.maximum(attention.astype(jnp.float32), coverage.astype(jnp.float32)), axis=-1)",
           (COPY_EQ,),
           "See et al. eq. 12: covloss_t = sum_i min(a_i^t, c_i^t)"),
    Mutant("pointer-gate-swapped", "attnjax/layers/copy.py",
           "return jnp.log(p_gen * p_vocab + (1.0 - p_gen) * p_copy + _EPS)",
           "return jnp.log((1.0 - p_gen) * p_vocab + p_gen * p_copy + _EPS)",
           (COPY_EQ,),
           "See et al. eq. 9: P(w) = p_gen P_vocab(w) + (1 - p_gen) sum_{i: w_i = w} a_i^t"),
    Mutant("coverage-includes-current-step", "attnjax/models/rnn_seq2seq.py",
           'extras["coverage_loss"] = coverage_loss(weights, state["coverage"])  # eq. 12, c_i excludes step i',
           'extras["coverage_loss"] = coverage_loss(weights, state["coverage"] + weights)',
           (COPY_EQ,),
           "See et al. eq. 10: c^t = sum_{t' < t} a^t' (the current step's attention excluded)"),
    Mutant("coverage-not-in-scores", "attnjax/models/rnn_seq2seq.py",
           "keys_proj = keys_proj + (state[\"coverage\"][..., None] * self.w_coverage).astype(keys_proj.dtype)",
           "keys_proj = keys_proj",
           (COPY_EQ,),
           "See et al. eq. 11: e_i^t = v^T tanh(W_h h_i + W_s s_t + w_c c_i^t + b_attn)"),
    Mutant("transformer-copy-one-head", "attnjax/models/transformer.py",
           'logits = mix_log_probs(logits, p_gen, weights.mean(axis=1), memory["src_ids"])',
           'logits = mix_log_probs(logits, p_gen, weights[:, 0], memory["src_ids"])',
           ("tests/models/test_transformer.py::"
            "test_copy_mixes_the_plain_models_distribution_with_its_head_averaged_cross_attention",),
           "copy attention: the copy distribution is the last layer's cross-attention averaged over heads"),
    Mutant("bert-gelu-exact", "attnjax/models/transformer.py",
           '"gelu": lambda x: jax.nn.gelu(x, approximate=False),',
           '"gelu": lambda x: jax.nn.gelu(x, approximate=True),',
           (BERT_NUMPY,),
           "BERT: GELU(x) = x Φ(x), the exact (erf) form"),
    Mutant("bert-layernorm-epsilon", "attnjax/transfer/bert.py",
           'layer_norm_epsilon=config.get("layer_norm_eps", 1e-12),',
           'layer_norm_epsilon=1e-12,',
           (BERT_NUMPY,),
           "BERT: every LayerNorm with the checkpoint's epsilon"),
    Mutant("bert-embedding-layernorm", "attnjax/models/bert.py",
           "return self.embed_dropout(self.embed_norm(x), deterministic=deterministic)",
           "return self.embed_dropout(x, deterministic=deterministic)",
           (BERT_NUMPY,),
           "BERT: e = LayerNorm(E_word + E_pos + E_type)"),
    Mutant("bert-token-types", "attnjax/models/bert.py",
           "+ self.token_type_embeddings(token_type_ids))",
           "+ self.token_type_embeddings(jnp.zeros_like(token_type_ids)))",
           (BERT_NUMPY,),
           "BERT: segment (token type) embeddings added to the input"),
    Mutant("hf-sinusoid-layout", "attnjax/transfer/seq2seq.py",
           "return np.concatenate([np.arange(0, d, 2), np.arange(1, d, 2)])",
           "return np.arange(d)",
           (HF_EXPORT,),
           "Marian / Pegasus export: their sinusoid is every sine, then every cosine (ours interleaves)"),
    Mutant("hf-projection-transpose", "attnjax/transfer/seq2seq.py",
           "return value.T[inverse].reshape(value.shape[1], n, value.shape[0] // n)",
           "return value[inverse].reshape(value.shape[1], n, value.shape[0] // n)",
           (HF_EXPORT,),
           "Marian / Pegasus import: a torch Linear is [out, in], Flax's kernel [in, heads, head_dim]"),
    Mutant("gpt2-qkv-order", "attnjax/transfer/lm.py",
           'for j, name in enumerate(("query", "key", "value"))}',
           'for j, name in enumerate(("key", "query", "value"))}',
           (HF_EXPORT,),
           "GPT-2 import: c_attn holds the query, key and value projections in that order"),
    Mutant("mean-pool-over-real-tokens", "attnjax/models/bert.py",
           "summed = jnp.sum(hidden * mask, axis=1)",
           "summed = jnp.sum(hidden, axis=1)",
           (MEAN_POOL,),
           "sentence embedding: the mean of the last hidden states over the attention mask"),
    Mutant("mlm-mask-80-10-10", "attnjax/data/mlm.py",
           "randomise = chosen[(action >= 0.8) & (action < 0.9)]",
           "randomise = chosen[(action >= 0.8) & (action < 0.85)]",
           (MLM_MASKING,),
           "BERT §3.1: a chosen token becomes [MASK] 80% of the time, a random token 10%, itself 10%"),
    Mutant("mlm-15-percent", "attnjax/data/mlm.py",
           "n = min(max_predictions, max(1, int(round(len(where) * rate))))",
           "n = min(max_predictions, max(1, int(round(len(where) * 0.2))))",
           (MLM_MASKING,),
           "BERT §3.1: 15% of the tokens are chosen for prediction"),
    Mutant("mlm-loss-at-masked-positions", "attnjax/models/bert.py",
           "total = jnp.sum(nll * weights)\n  correct",
           "total = jnp.sum(nll)\n  correct",
           (MLM_LOSS,),
           "BERT: the MLM loss is taken at the masked positions only"),
    Mutant("mlm-head-tied", "attnjax/models/bert.py",
           "logits = self.bert.word_embeddings.attend(h.astype(self.dtype))",
           "logits = nn.Dense(self.vocab_size, use_bias=False, name=\"decoder\")(h)",
           (MLM_HEAD,),
           "BERT: the MLM output matrix is the input embedding matrix (tied)"),
    Mutant("lm-causal-mask", "attnjax/models/lm.py",
           "x, lambda h: self.self_attention(h, segment_ids=segments, is_causal=cache is None, kv_cache=cache,",
           "x, lambda h: self.self_attention(h, segment_ids=segments, is_causal=False, kv_cache=cache,",
           (f"{LM_TESTS}::test_no_position_sees_its_future",),
           "a language model's token t attends positions <= t only"),
    Mutant("lm-packing-isolation", "attnjax/models/lm.py",
           "segments = None if segment_ids is None else (segment_ids, segment_ids)",
           "segments = None",
           (f"{LM_TESTS}::test_packed_documents_are_each_scored_as_if_alone",),
           "packed documents attend only within themselves"),
    Mutant("lm-tied-output", "attnjax/models/lm.py",
           "logits = mapped_logits(self.embed.attend(self.final_norm(x)), self.mapped, self.vocab_size)",
           "logits = mapped_logits(self.final_norm(x) @ jax.random.normal(jax.random.PRNGKey(0), (self.d_model, "
           "self.embed.vocab_size)), self.mapped, self.vocab_size)",
           (f"{LM_TESTS}::test_the_output_matrix_is_the_embedding_matrix",),
           "GPT-2: the output projection is the transposed input embedding"),
    Mutant("lm-embedding-scale", "attnjax/models/lm.py",
           'scale=self.positional == "sinusoidal",',
           "scale=False,",
           (f"{LM_TESTS}::test_the_first_layer_reads_the_scaled_embeddings_plus_the_positions",),
           "Vaswani et al. §3.4: the embeddings are multiplied by sqrt(d_model) beside sinusoidal positions"),
    Mutant("lm-compute-6nd", "attnjax/report/lm_scaling.py",
           'laws["C"] += [{"x": 6.0 * n * s * tokens_per_step / PF_DAY,',
           'laws["C"] += [{"x": 2.0 * n * s * tokens_per_step / PF_DAY,',
           (LM_SCALING_REPORT,),
           "Kaplan et al.: training compute C = 6·N·D (forward and backward), in PF-days"),
    Mutant("lm-compute-frontier", "attnjax/report/lm_scaling.py",
           'if p["loss"] < lowest:',
           'if p["loss"] <= lowest:',
           (LM_FRONTIER,),
           "the compute-efficient frontier: the lowest loss reached with at most that compute"),
    Mutant("lm-joint-law-ratio", "attnjax/report/lm_scaling.py",
           "return alpha_d * np.logaddexp(alpha_n / alpha_d * (log_nc - log_n), log_dc - log_d)",
           "return alpha_d * np.logaddexp(alpha_n * (log_nc - log_n), log_dc - log_d)",
           (LM_JOINT,),
           "Kaplan et al. eq. (1.5): the model-size term is (N_c/N) to the power α_N/α_D inside the bracket"),
    Mutant("lm-joint-law-outer", "attnjax/report/lm_scaling.py",
           "return alpha_d * np.logaddexp(alpha_n / alpha_d * (log_nc - log_n), log_dc - log_d)",
           "return np.logaddexp(alpha_n * (log_nc - log_n), alpha_d * (log_dc - log_d))",
           (LM_JOINT,),
           "Kaplan et al. eq. (1.5): the bracket's sum is raised to α_D, not the two laws added"),
    Mutant("top-p-smallest-set", "attnjax/decoding.py",
           "keep_sorted = before < top_p",
           "keep_sorted = before + probs < top_p",
           (TOP_P,),
           "nucleus sampling: the smallest set of most probable tokens whose mass reaches p"),
    Mutant("top-k-threshold", "attnjax/decoding.py",
           "kth = jax.lax.top_k(logits, top_k)[0][..., -1:]",
           "kth = jax.lax.top_k(logits, top_k + 1)[0][..., -1:]",
           (TOP_K,),
           "top-k sampling: only the k most probable tokens"),
)


@dataclasses.dataclass
class Result:
  mutant: Mutant
  outcome: str
  seconds: float = 0.0
  detail: str = ""
  killed_by: str = ""  # the first failing test, from pytest's short summary


def _test_file(selection: str) -> Path:
  return ROOT / selection.split("::", 1)[0]


def _copy_tree(dest: Path) -> None:
  ignore = shutil.ignore_patterns("__pycache__", "*.pyc", ".pytest_cache")
  for name in COPIED_TREES:
    shutil.copytree(ROOT / name, dest / name, ignore=ignore)
  for name in COPIED_FILES:
    if (ROOT / name).exists():
      shutil.copy2(ROOT / name, dest / name)


def _env(workdir: Path) -> dict[str, str]:
  env = dict(os.environ)
  env.update(PYTHONPATH=str(workdir), JAX_PLATFORMS="cpu", PYTHONDONTWRITEBYTECODE="1")
  return env


def _pytest(workdir: Path, tests, timeout: float) -> tuple[int | None, str]:
  """(return code or None on timeout, combined output) of pytest on ``tests`` inside ``workdir``."""
  cmd = [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", *tests]
  try:
    proc = subprocess.run(cmd, cwd=workdir, env=_env(workdir), capture_output=True, text=True, timeout=timeout,
                          check=False)
  except subprocess.TimeoutExpired as e:
    out = (e.stdout or b"").decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
    return None, out
  return proc.returncode, proc.stdout + proc.stderr


def _check_import_location(workdir: Path) -> None:
  """The copy's attnjax must shadow the editable install, or every mutant would run against the real tree."""
  out = subprocess.run([sys.executable, "-c", "import attnjax, tests; print(attnjax.__file__); print(tests.__file__)"],
                       cwd=workdir, env=_env(workdir), capture_output=True, text=True, check=True).stdout.split()
  for path in out:
    if not Path(path).resolve().is_relative_to(workdir.resolve()):
      raise SystemExit(f"mutation_check: {path} is imported instead of the copy in {workdir}; check PYTHONPATH and "
                       f"the editable install")


def _apply(workdir: Path, mutant: Mutant) -> str | None:
  """Applies the mutant in ``workdir``; returns an error message if the original text is not there exactly once."""
  path = workdir / mutant.path
  if not path.exists():
    return f"{mutant.path} does not exist"
  text = path.read_text()
  count = text.count(mutant.original)
  if count != 1:
    return f"original text found {count} times in {mutant.path} (expected exactly once): {mutant.original!r}"
  path.write_text(text.replace(mutant.original, mutant.replacement))
  return None


def _baseline(mutants, timeout: float) -> dict[tuple[str, ...], str]:
  """Runs each distinct selection (whose files exist) once on the unmodified code; maps the failing ones to a report.

  A selection that already fails would "kill" its mutants for nothing: those mutants are reported "baseline fails"
  instead of being run, and the others still run (the tree is shared, and someone's test may be mid-change).
  """
  selections = list(dict.fromkeys(m.tests for m in mutants if all(_test_file(t).exists() for t in m.tests)))
  failures = {}
  if not selections:
    return failures
  with tempfile.TemporaryDirectory(prefix="mutants-baseline-") as tmp:
    workdir = Path(tmp)
    _copy_tree(workdir)
    _check_import_location(workdir)
    for tests in selections:
      start = time.monotonic()
      code, out = _pytest(workdir, tests, timeout)
      seconds = time.monotonic() - start
      status = "passes" if code == 0 else "FAILS"
      print(f"  baseline {status} ({seconds:.1f}s): {_short(tests)}", flush=True)
      if code != 0:
        failures[tests] = _tail(out)
  return failures


def _tail(text: str, lines: int = 25) -> str:
  return "\n".join("    " + line for line in text.strip().splitlines()[-lines:])


def run_mutant(mutant: Mutant, timeout: float, baseline_failures=None) -> Result:
  missing = [t for t in mutant.tests if not _test_file(t).exists()]
  with tempfile.TemporaryDirectory(prefix=f"mutant-{mutant.name}-") as tmp:
    workdir = Path(tmp)
    _copy_tree(workdir)
    error = _apply(workdir, mutant)
    if error:
      return Result(mutant, "not applied", detail=error)
    if missing:
      return Result(mutant, "tests missing", detail="missing: " + ", ".join(sorted({str(_test_file(t).relative_to(
          ROOT)) for t in missing})))
    if baseline_failures and mutant.tests in baseline_failures:
      return Result(mutant, "baseline fails", detail="the unmodified code fails these tests:\n"
                    + baseline_failures[mutant.tests])
    start = time.monotonic()
    code, out = _pytest(workdir, mutant.tests, timeout)
    seconds = time.monotonic() - start
  if code is None:
    return Result(mutant, "killed (timeout)", seconds)
  if code == 1:
    return Result(mutant, "killed", seconds, killed_by=_first_failure(out))
  if code == 0:
    return Result(mutant, "survived", seconds, detail=_tail(out))
  return Result(mutant, f"error (pytest exit {code})", seconds, detail=_tail(out))


def _first_failure(output: str) -> str:
  """The node id of the first ``FAILED``/``ERROR`` line of pytest's short summary (``-ra``, from setup.cfg)."""
  for line in output.splitlines():
    if line.startswith(("FAILED ", "ERROR ")):
      return _short([line.split()[1]])
  return "?"


def _short(tests) -> str:
  """A compact label for a selection: ``file.py``, ``file.py::test``, ``file.py[param, param]``."""
  labels = []
  for selection in tests:
    file, _, node = selection.partition("::")
    name, param = Path(file).name, ""
    if "[" in node:
      node, param = node[:-1].split("[", 1)
    if labels and param and labels[-1][0] == name and labels[-1][2]:
      labels[-1][2].append(param)  # parameters of one test: file[p1, p2]
    else:
      labels.append([name, node, [param] if param else []])
  return ", ".join(f"{name}[{', '.join(params)}]" if params else f"{name}::{node}" if node else name
                   for name, node, params in labels)


def print_table(results) -> None:
  rows = [(r.mutant.name, _short(r.mutant.tests), r.outcome, f"{r.seconds:.1f}" if r.seconds else "-",
           r.killed_by or "-") for r in results]
  header = ("mutant", "tests", "outcome", "seconds", "killed by")
  widths = [max(len(row[i]) for row in rows + [header]) for i in range(len(header))]
  line = lambda row: "  ".join(cell.rjust(w) if i == 3 else cell.ljust(w) for i, (cell, w) in
                               enumerate(zip(row, widths))).rstrip()
  print(line(header))
  print("  ".join("-" * w for w in widths))
  for row in rows:
    print(line(row))


def main(argv=None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
  parser.add_argument("names", nargs="*", help="mutants to run (default: all)")
  parser.add_argument("--list", action="store_true", help="list the mutants and exit")
  parser.add_argument("--no-baseline", action="store_true", help="skip the run on the unmodified code")
  parser.add_argument("--strict", action="store_true", help="missing tests count as a failure")
  parser.add_argument("--timeout", type=float, default=600.0, help="seconds per mutant (a timeout counts as killed)")
  args = parser.parse_args(argv)

  by_name = {m.name: m for m in MUTANTS}
  unknown = [n for n in args.names if n not in by_name]
  if unknown:
    parser.error(f"unknown mutants {unknown}; choose from {sorted(by_name)}")
  mutants = [by_name[n] for n in args.names] if args.names else list(MUTANTS)
  if args.list:
    for m in mutants:
      print(f"{m.name}: {m.path}: {m.equation}\n    {m.original!r}\n -> {m.replacement!r}\n    tests: "
            f"{', '.join(m.tests)}")
    return 0

  total = time.monotonic()
  baseline_failures = {} if args.no_baseline else _baseline(mutants, args.timeout)
  results = []
  for m in mutants:
    result = run_mutant(m, args.timeout, baseline_failures)
    print(f"  {m.name}: {result.outcome}" + (f" ({result.seconds:.1f}s)" if result.seconds else ""), flush=True)
    results.append(result)
  print()
  print_table(results)
  for r in results:
    if r.detail and not r.outcome.startswith("killed"):
      print(f"\n{r.mutant.name} ({r.outcome}): {r.mutant.equation}\n{r.detail}")
  failing = ("survived", "not applied", "baseline fails")
  bad = [r for r in results if r.outcome in failing or r.outcome.startswith("error")
         or (args.strict and r.outcome == "tests missing")]
  missing = [r for r in results if r.outcome == "tests missing"]
  killed = sum(r.outcome.startswith("killed") for r in results)
  print(f"\n{killed}/{len(results)} killed, {len(missing)} with tests missing, {len(bad)} failing the check; "
        f"{time.monotonic() - total:.0f}s in all")
  return 1 if bad else 0


if __name__ == "__main__":
  sys.exit(main())
