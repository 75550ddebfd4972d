"""attnjax: attention mechanisms of the NLP literature and the models built from them, in JAX/Flax."""

__version__ = "0.1.0"


def __getattr__(name):
  """``attnjax.load``: :func:`attnjax.serving.load`, imported on first use (``import attnjax`` stays light)."""
  if name == "load":
    from attnjax.serving import load  # pylint: disable=g-import-not-at-top
    return load
  raise AttributeError(f"module 'attnjax' has no attribute {name!r}")
