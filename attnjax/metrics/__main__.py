"""``python -m attnjax.metrics``: see :mod:`attnjax.metrics.cli`."""

import sys

from attnjax.metrics.cli import main

sys.exit(main())
