"""Models trained elsewhere, brought in: Hugging Face BERT checkpoints (:mod:`attnjax.transfer.bert`) and the
sentence embeddings and semantic-similarity scoring built on them (:mod:`attnjax.transfer.sentence`)."""
