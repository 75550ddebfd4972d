"""Sequence-to-sequence models of the seed papers behind one interface (see :mod:`attnjax.models.interface`)."""
