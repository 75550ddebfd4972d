"""The seed study's models as the papers trained them: what an experiment file applies to ``base_config()`` after
``use_task(...)``, so that each cell of the study (``experiments/<task>/<model>.py``) is a few lines.

Every recipe states the paper's setting and where ours differs. Common differences, said once: every task uses a
SentencePiece vocabulary trained on its training split (the papers used word vocabularies of 80k-160k words or BPE);
batches are token-based (``data.max_tokens`` = rows · padded length per global batch) unless a paper batched by
sentences; the compute dtype follows the target (bfloat16 on TPU/GPU, as MaxText and the Flax examples train).
"""

from __future__ import annotations

import ml_collections

# Parameter counts the seed table reports next to its numbers (printed beside ours by python -m attnjax.compile).
SEED_PARAMS = {"lstm_seq2seq": 65e6, "lstm_attention": 72e6, "transformer": 58e6}


def _model(config, **fields) -> None:
  config.model = ml_collections.ConfigDict(fields)


def _steps(config, steps: int, *, eval_every: int = 5000, keep: int = 5) -> None:
  t = config.train
  t.steps, t.eval_every, t.checkpoint_every, t.keep_checkpoints = steps, eval_every, min(eval_every, 5000), keep
  t.log_every = 100


def transformer(config, preset: str = "base", *, dropout: float | None = None, steps: int | None = None,
                vocab_size: int = 32000) -> None:
  """Vaswani et al. 2017 (Table 3, §5): base N=6, d_model 512, d_ff 2048, h 8, P_drop 0.1, 100k steps; big d_model
  1024, d_ff 4096, h 16, P_drop 0.3 (0.1 for en-fr), 300k steps. Adam(0.9, 0.98, 1e-9), warmup 4000, label
  smoothing 0.1, ~25k source + 25k target tokens per batch, shared source/target vocabulary and tied embeddings,
  beam 4 with α 0.6. The paper averaged the last 5 (base) or 20 (big) checkpoints: keep them and evaluate with
  ``--average_last``."""
  from attnjax.models.transformer import PRESETS  # pylint: disable=g-import-not-at-top
  big = preset == "big"
  # the preset's fields spelled out, so that every one is a key the command line can override
  # (--config.model.num_heads=16), as the ablation sweeps do
  _model(config, name="transformer", **PRESETS[preset], attention_dropout_rate=0.0, relu_dropout_rate=0.0,
         pre_norm=False, positional="sinusoidal", max_relative_distance=16, shared_vocab=True,
         share_source_embeddings=True, tie_decoder_embeddings=True, max_length=256, dtype="float32")
  if dropout is not None:
    config.model.dropout_rate = dropout
  d = config.data
  d.vocab_size, d.joint_vocab = vocab_size, True
  d.max_src_len = d.max_tgt_len = 256
  d.max_tokens = 25_000  # target tokens per batch, padding included
  d.bucket_boundaries = (16, 24, 32, 48, 64, 96, 128, 192)
  t = config.train
  t.schedule, t.learning_rate, t.warmup_steps, t.label_smoothing, t.grad_clip_norm = "rsqrt", 1.0, 4000, 0.1, 0.0
  _steps(config, steps or (300_000 if big else 100_000), keep=20 if big else 5)
  e = config.eval
  e.decode, e.beam_size, e.alpha, e.max_len_a, e.max_len_b, e.batch_size = "beam", 4, 0.6, 1.0, 50, 128


def sutskever(config, *, vocab_size: int = 32000, epoch_steps: int = 35_000) -> None:
  """Sutskever et al. 2014: 4-layer LSTMs of 1000 cells, 1000-dim embeddings, the source reversed, no attention,
  plain SGD at 0.7 halved every half epoch after 5 epochs (7.5 in all), batches of 128 sentences, gradients clipped
  to norm 5, uniform init in [-0.08, 0.08]. ``epoch_steps``: batches of 128 per epoch (WMT14 en-de 4.5M pairs: 35k;
  the paper's 12M-pair en-fr subset: 94k). Ours: Glorot/orthogonal init (Flax's), a 32k SentencePiece vocabulary
  (the paper: 160k source / 80k target words, which is most of its 384M parameters)."""
  _model(config, name="rnn_seq2seq", cell="lstm", attention=None, embed_dim=1000, hidden_dim=1000, num_layers=4,
         reverse_source=True, dropout_rate=0.0, dtype="float32")
  _rnn_data(config, vocab_size, batch_size=128)
  _sgd(config, lr=0.7, steps=int(7.5 * epoch_steps), decay_start=5 * epoch_steps, decay_every=epoch_steps // 2,
       clip=5.0)


def rnnsearch(config, *, vocab_size: int = 32000) -> None:
  """Bahdanau et al. 2015 (RNNsearch): a bidirectional encoder of 1000 units each way, a 1000-unit decoder, 620-dim
  embeddings, additive attention, a maxout readout of 500 units, Adadelta (ε 1e-6, ρ 0.95), batches of 80 sentences,
  gradients clipped to norm 1. Ours: LSTM cells where the paper used GRUs (``model.cell="gru"`` is the paper's
  reset-before GRU, Bahdanau et al. appendix A.1.1)."""
  _model(config, name="rnn_seq2seq", cell="lstm", attention="bahdanau", embed_dim=620, hidden_dim=1000,
         maxout_dim=500, num_layers=1, dropout_rate=0.0, dtype="float32")
  _rnn_data(config, vocab_size, batch_size=80)
  t = config.train
  t.optimizer, t.schedule, t.learning_rate, t.warmup_steps, t.grad_clip_norm, t.label_smoothing = (
      "adadelta", "constant", 1.0, 0, 1.0, 0.0)
  _steps(config, 350_000)


def luong(config, score: str = "general", *, vocab_size: int = 32000, epoch_steps: int = 35_000) -> None:
  """Luong et al. 2015: 4-layer LSTMs of 1000 cells, 1000-dim embeddings, global attention with the ``score``
  (dot, general or concat; "general" was their best global one), input feeding, dropout 0.2, the source reversed,
  SGD at 1.0 for 12 epochs halved every epoch after the 8th, batches of 128, gradients clipped to norm 5."""
  _model(config, name="rnn_seq2seq", cell="lstm", attention=f"luong_{score}", embed_dim=1000, hidden_dim=1000,
         num_layers=4, input_feeding=True, reverse_source=True, dropout_rate=0.2, dtype="float32")
  _rnn_data(config, vocab_size, batch_size=128)
  _sgd(config, lr=1.0, steps=12 * epoch_steps, decay_start=8 * epoch_steps, decay_every=epoch_steps, clip=5.0)


def convs2s(config, *, vocab_size: int = 40000, dropout: float = 0.2) -> None:
  """Gehring et al. 2017, WMT14 en-de: 15 encoder and 15 decoder layers, kernel width 3, 512-dim embeddings,
  dropout 0.2 (0.1 en-fr), Nesterov's accelerated gradient at 0.25 with momentum 0.99, gradients clipped to norm
  0.1, batches of ~4,000 tokens on each of 8 GPUs. Ours: every layer 512 wide (the paper widens the last layers to
  768, 1024 and 2048 units), so it has fewer parameters than their 216M."""
  _model(config, name="convs2s", embed_dim=512, hidden_dim=512, encoder_layers=15, decoder_layers=15,
         kernel_width=3, dropout_rate=dropout, max_length=256, dtype="float32")
  d = config.data
  d.vocab_size, d.joint_vocab = vocab_size, True
  d.max_src_len = d.max_tgt_len = 175
  d.max_tokens = 32_000
  d.bucket_boundaries = (16, 24, 32, 48, 64, 96, 128)
  t = config.train
  t.optimizer, t.momentum, t.nesterov = "sgd", 0.99, True
  t.schedule, t.learning_rate, t.warmup_steps, t.grad_clip_norm, t.label_smoothing = "constant", 0.25, 0, 0.1, 0.0
  _steps(config, 300_000)
  config.eval.beam_size, config.eval.alpha = 5, 0.0


def summarization(config, model: str, *, max_src_len: int = 400, max_tgt_len: int = 100,
                  vocab_size: int = 50000) -> None:
  """The summarization baselines, sources truncated to ``max_src_len`` tokens and summaries to ``max_tgt_len`` (See
  et al. 2017 on CNN/DailyMail: 400 / 100; Narayan et al. 2018 on XSum: 400 / 90).

  * ``lstm_seq2seq``: no attention: a unidirectional 256-unit LSTM encoder and decoder, 128-dim embeddings.
  * ``lstm_attention``: See et al.'s baseline: a bidirectional 256-unit LSTM encoder with additive attention,
    128-dim embeddings, a 50k vocabulary, Adagrad at 0.15 (accumulator 0.1), batches of 16, gradients clipped to 2.
  * ``transformer``: Liu & Lapata 2019's TransformerAbs: 6+6 layers, d_model 512, 8 heads, d_ff 2048, dropout 0.1,
    beam 5 with a length penalty.
  """
  d = config.data
  d.vocab_size, d.joint_vocab = vocab_size, True
  d.max_src_len, d.max_tgt_len = max_src_len, max_tgt_len + 1
  if model == "transformer":
    transformer(config, "base", steps=200_000, vocab_size=vocab_size)
    d.max_src_len, d.max_tgt_len = max_src_len, max_tgt_len + 1
    config.model.max_length = max(max_src_len, max_tgt_len + 1)
    d.max_tokens = 16 * (max_src_len + max_tgt_len)
    d.bucket_boundaries = (128, 256)
  else:
    attention = None if model == "lstm_seq2seq" else "bahdanau"
    _model(config, name="rnn_seq2seq", cell="lstm", attention=attention, embed_dim=128, hidden_dim=256,
           num_layers=1, dropout_rate=0.0, dtype="float32")
    d.max_tokens, d.batch_size = None, 16
    d.bucket_boundaries = (128, 256)
    t = config.train
    t.optimizer, t.schedule, t.learning_rate, t.warmup_steps, t.grad_clip_norm, t.label_smoothing = (
        "adagrad", "constant", 0.15, 0, 2.0, 0.0)
    _steps(config, 230_000)
  e = config.eval
  e.beam_size, e.alpha, e.max_len_a, e.max_len_b = 4, 0.6, 0.0, max_tgt_len


def reader(config, encoder: str, *, version2: bool) -> None:
  """SQuAD readers trained from scratch: ``bilstm`` is BiDAF-style (Seo et al. 2017: 100-dim LSTMs, dropout 0.2,
  Adadelta at 0.5, 12 epochs of batches of 60); ``transformer`` a QANet-sized self-attention encoder (Yu et al. 2018:
  d 128, 8 heads; ours has no convolutions), 4 layers, Adam 1e-3 with warmup. Contexts up to 400 tokens."""
  d = config.data
  d.vocab_size, d.max_question_len, d.max_context_len = 32000, 64, 400
  d.max_tokens, d.bucket_boundaries = 60 * 408, (128, 256)
  d.doc_stride = 128  # longer contexts are read in windows of 400 tokens every 128 (as BERT reads SQuAD)
  if encoder == "bilstm":
    _model(config, name="span_qa", encoder="bilstm", d_model=100, num_layers=1, dropout_rate=0.2,
           allow_no_answer=version2, max_answer_length=30, dtype="float32")
  else:
    _model(config, name="span_qa", encoder="transformer", d_model=128, num_heads=8, num_layers=4, d_ff=512,
           dropout_rate=0.1, max_length=480, positional="learned", allow_no_answer=version2, max_answer_length=30,
           dtype="float32")
  t = config.train
  t.schedule, t.learning_rate, t.warmup_steps, t.label_smoothing = "constant", 1e-3, 1000, 0.0
  _steps(config, 20_000, eval_every=2000)
  config.eval.batch_size = 64


def _rnn_data(config, vocab_size: int, *, batch_size: int) -> None:
  d = config.data
  d.vocab_size, d.joint_vocab = vocab_size, True
  d.max_src_len = d.max_tgt_len = 80  # Luong et al. and Sutskever et al. filtered sentences over 50 words
  d.max_tokens, d.batch_size = None, batch_size
  d.bucket_boundaries = (16, 24, 32, 48, 64)
  config.eval.beam_size, config.eval.alpha, config.eval.max_len_b = 12, 0.0, 20


def _sgd(config, *, lr: float, steps: int, decay_start: int, decay_every: int, clip: float) -> None:
  t = config.train
  t.optimizer, t.schedule, t.learning_rate, t.warmup_steps = "sgd", "halving", lr, 0
  t.decay_start, t.decay_every, t.grad_clip_norm, t.label_smoothing = decay_start, decay_every, clip, 0.0
  _steps(config, steps)


def cpu_study(config, model: str, *, minutes: float = 30.0) -> None:
  """The seed study's baselines at CPU scale (the data: :func:`multi30k_cpu`, :func:`manythings_cpu`):
  every arm the same wall-clock budget (``train.time_limit_minutes``) on 2 CPU cores, the same data, vocabulary
  (joint 8k SentencePiece), token batches (4,096 target tokens), label smoothing 0.1 and evaluation (beam 4, α 0.6,
  the best checkpoint by validation BLEU), sized and regularised for the small-data regime rather than as the papers
  trained on WMT. Scored with BLEU, chrF, TER and METEOR (in the target language):

  * ``lstm_seq2seq``: Sutskever et al., 2 layers of 256, the source reversed, no attention;
  * ``lstm_bahdanau``: bidirectional encoder, additive attention; ``lstm_luong_{dot,general,concat}``: Luong's
    scores with input feeding, 2 layers of 256;
  * ``convs2s``: 6 + 6 layers of 256, kernel width 3;
  * ``transformer``: 3 + 3 layers, d_model 256, 4 heads, d_ff 1024, pre-norm (experiments/multi30k/transformer_small).

  The recurrent and convolutional models train with Adam at 1e-3 (a short warm-up, gradients clipped to 1), where the
  papers used SGD, Adadelta or Nesterov at WMT scale; the Transformer keeps the paper's schedule."""
  if model == "transformer":
    transformer(config, "base", vocab_size=8000)
    config.model.update(num_encoder_layers=3, num_decoder_layers=3, d_model=256, num_heads=4, d_ff=1024,
                        dropout_rate=0.3, attention_dropout_rate=0.1, pre_norm=True)
    # 400, not the 800 of the first run: the warmup sweep of experiments/multi30k/transformer.py, on validation BLEU
    config.train.warmup_steps = 400
  elif model.startswith("lstm_"):
    attention = {"lstm_seq2seq": None, "lstm_bahdanau": "bahdanau"}.get(model, model[len("lstm_"):])
    if attention not in (None, "bahdanau", "luong_dot", "luong_general", "luong_concat"):
      raise ValueError(f"cpu_study: unknown model {model!r}")
    _model(config, name="rnn_seq2seq", cell="lstm", attention=attention, embed_dim=256, hidden_dim=256,
           num_layers=1 if attention == "bahdanau" else 2, bidirectional_encoder=attention == "bahdanau",
           reverse_source=attention is None, input_feeding=bool(attention and attention.startswith("luong")),
           dropout_rate=0.3, dtype="float32")
  elif model == "convs2s":
    _model(config, name="convs2s", embed_dim=256, hidden_dim=256, encoder_layers=6, decoder_layers=6,
           kernel_width=3, dropout_rate=0.2, max_length=256, dtype="float32")
  else:
    raise ValueError(f"cpu_study: unknown model {model!r}")
  d = config.data
  d.vocab_size, d.joint_vocab = 8000, True
  d.max_src_len = d.max_tgt_len = 64
  d.max_tokens, d.batch_size = 4096, None
  d.bucket_boundaries = (16, 24, 32, 48)
  t = config.train
  if model != "transformer":
    t.optimizer, t.schedule, t.learning_rate, t.warmup_steps, t.grad_clip_norm = "adam", "constant", 1e-3, 200, 1.0
  t.label_smoothing = 0.1
  t.steps, t.time_limit_minutes = 100_000, minutes  # the budget, not the step count, ends every arm
  t.eval_every = t.checkpoint_every = 500
  t.keep_checkpoints, t.best_metric, t.log_every = 3, "bleu", 100
  e = config.eval
  e.split, e.decode, e.beam_size, e.alpha, e.max_len_a, e.max_len_b = "validation", "beam", 4, 0.6, 1.5, 10
  e.num_decode_examples, e.batch_size = 500, 64
  e.metrics = ("bleu", "chrf", "ter", "meteor")  # the study reports METEOR too, stemmed in the target language


def multi30k_cpu(config, model: str, *, minutes: float = 30.0) -> None:
  """:func:`cpu_study` on the offline Multi30k task 1 copy (``use_task(config, "multi30k_en_de")`` first), with its
  2017 test sets as extra splits (``attnjax.evaluate --split=test2017`` / ``test_mscoco``)."""
  cpu_study(config, model, minutes=minutes)
  d = config.data
  d.dir = "../shared/data/multi30k"
  with d.splits.unlocked():
    d.splits.update(test2017="test_2017_flickr", test_mscoco="test_2017_mscoco")


def manythings_cpu(config, model: str, *, minutes: float = 30.0) -> None:
  """:func:`cpu_study` on the offline Tatoeba/manythings English→French pairs (``use_task(config,
  "manythings_en_fr")`` first): 142,787 pairs, 5% each held out for validation and test by source sentence."""
  cpu_study(config, model, minutes=minutes)
  config.data.dir = "../shared/data/manythings_eng_fra"


# The arms of the summarization study at CPU scale (model name -> model fields beyond the family's defaults)
CNNDM_ARMS = ("lstm_seq2seq", "lstm_bahdanau", "lstm_pointer_generator", "lstm_coverage", "transformer",
              "transformer_copy")


def cnndm_cpu(config, model: str, *, minutes: float = 90.0) -> None:
  """Summarization on the offline CNN/DailyMail subset (``use_task(config, "cnn_dailymail_subset")`` first) at CPU
  scale: every arm the same wall-clock budget on 2 cores, the same data, joint 16k SentencePiece vocabulary, batches and
  decoding. See et al. (2017)'s setting: articles cut to their first 400 tokens and summaries to 100 for training
  (``data.truncate``); decoding reads the cut article and ROUGE scores the full reference; beam 4 ranked by the
  length-normalised score (α = 1), at least 35 and at most 100 tokens, no n-gram blocking (so that the repetition
  coverage removes stays visible; ``--eval no_repeat_ngram_size=3`` turns it on). Lengths count SentencePiece pieces
  where See et al. count words: about 1.2 pieces a word on this text, so 400 pieces are about 330 words.

  * ``lstm_seq2seq``: no attention, a unidirectional LSTM encoder and decoder of 256;
  * ``lstm_bahdanau``: See et al.'s baseline, a bidirectional LSTM encoder of 256 per direction, additive attention,
    128-dim embeddings; ``lstm_pointer_generator`` adds the copy mechanism; ``lstm_coverage`` adds coverage (λ = 1)
    for a final phase, as See et al. did (coverage from the first step "interfered with the main objective"): it
    starts from the pointer-generator arm's newest checkpoint trained at most 85 of its 90 minutes (its sibling in
    the launcher's layout, ``train.init_from``) and trains to the same 90 minutes in all;
  * ``transformer``: 3 + 3 layers, d_model 256, 4 heads, d_ff 1024, pre-norm; ``transformer_copy`` adds copy
    attention.

  The LSTMs train with Adam at 1e-3 (See et al.: Adagrad at 0.15 for 230k steps, out of reach here), gradients
  clipped to 2; the Transformer with its warm-up schedule. The checkpoint kept as best is chosen by ROUGE-Lsum on 200
  validation articles; ``attnjax.evaluate`` then scores all of validation and test."""
  if model not in CNNDM_ARMS:
    raise ValueError(f"cnndm_cpu: unknown model {model!r}; the arms are {CNNDM_ARMS}")
  if model.startswith("transformer"):
    transformer(config, "base", vocab_size=16000)
    config.model.update(num_encoder_layers=3, num_decoder_layers=3, d_model=256, num_heads=4, d_ff=1024,
                        dropout_rate=0.1, pre_norm=True, max_length=512, copy=model == "transformer_copy")
    config.train.warmup_steps = 1000
  else:
    attention = None if model == "lstm_seq2seq" else "bahdanau"
    _model(config, name="rnn_seq2seq", cell="lstm", attention=attention, embed_dim=128, hidden_dim=256,
           num_layers=1, bidirectional_encoder=attention is not None, attention_dim=256 if attention else None,
           maxout_dim=None, dropout_rate=0.0, copy=model in ("lstm_pointer_generator", "lstm_coverage"),
           coverage=model == "lstm_coverage", dtype="float32")
    t = config.train
    t.optimizer, t.schedule, t.learning_rate, t.warmup_steps, t.grad_clip_norm = "adam", "constant", 1e-3, 200, 2.0
    if model == "lstm_coverage":  # the final phase of the pointer-generator run (see attnjax/training/warm_start.py)
      t.init_from, t.init_at_minutes = "../../../lstm_pointer_generator/single/default", minutes - 5.0
  d = config.data
  d.dir = "../shared/data/cnn_dailymail"
  d.vocab_size, d.joint_vocab = 16000, True
  d.max_src_len, d.max_tgt_len, d.truncate = 400, 101, True  # 100 summary tokens + EOS
  d.max_tokens, d.batch_size, d.bucket_boundaries = None, 16, (200,)
  t = config.train
  t.label_smoothing = 0.0
  t.steps, t.time_limit_minutes = 1_000_000, minutes  # the budget, not the step count, ends every arm
  # a checkpoint every ~4 minutes, the last 5 kept: the coverage phase finds one close to its start
  t.eval_every, t.checkpoint_every, t.log_every = 1000, 100, 50
  t.keep_checkpoints, t.best_metric = 5, "rougeLsum"  # summary-level ROUGE-L: what pyrouge reports as ROUGE-L
  e = config.eval
  # α = 1: GNMT's ((5 + |Y|) / 6)^α, close to See et al.'s ranking by log P / |Y|
  e.split, e.decode, e.beam_size, e.alpha = "validation", "beam", 4, 1.0
  e.max_len_a, e.max_len_b, e.min_len, e.no_repeat_ngram_size = 0.0, 100, 35, 0
  e.num_decode_examples, e.batch_size, e.loss_batches = 200, 32, 20  # a sample: decoding is most of an eval
  e.metrics = ("rouge",)
