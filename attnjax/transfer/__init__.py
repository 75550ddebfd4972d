"""Models trained elsewhere, brought in: Hugging Face BERT checkpoints (:mod:`attnjax.transfer.bert`) and the
sentence embeddings and semantic-similarity scoring built on them (:mod:`attnjax.transfer.sentence`)."""

# What attnjax.export writes beside a Hugging Face directory it exported: the workdir, checkpoint and step it came
# from. A report credits a reader fine-tuned from the directory to that run, and does not take the directory for one.
PROVENANCE_FILE = "attnjax_export.json"
