"""The base config every experiment starts from (see attnjax/config.py for what each key means)."""

from attnjax.config import base_config


def get_config():
  return base_config()
