"""Looking inside trained models: tools that load a workdir's checkpoint and run it to draw what it attends to.

* :mod:`attnjax.analysis.attention_maps`: per-head cross-attention maps of a Transformer, and alignment error rates
  against gold alignments (``python -m attnjax.analysis.attention_maps``);
* :mod:`attnjax.analysis.copy_maps`: a pointer-generator's attention and generation probability over one summary
  (``python -m attnjax.analysis.copy_maps``).

:mod:`attnjax.report` turns records into pages and runs no model; these tools do.
"""
