"""attnjax: attention mechanisms of the NLP literature and the models built from them, in JAX/Flax."""

__version__ = "0.1.0"
