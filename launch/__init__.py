"""Launching experiments: python -m launch.launch (see launch/launch.py)."""
