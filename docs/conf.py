"""Sphinx configuration of the attnjax docs: MyST Markdown pages, and an API reference generated from the docstrings.

    make docs        # builds docs/_build/html offline, warnings as errors
"""

import os
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, ROOT)
os.environ.setdefault("JAX_PLATFORMS", "cpu")  # importing the modules for autodoc needs no accelerator

project = "attnjax"
author = "the attnjax authors"
copyright = "2026, the attnjax authors"  # pylint: disable=redefined-builtin

extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.napoleon",
    "sphinx.ext.mathjax",
]
source_suffix = {".md": "markdown", ".rst": "restructuredtext"}
root_doc = "index"
exclude_patterns = ["_build", "**/.ipynb_checkpoints"]

myst_enable_extensions = ["dollarmath", "colon_fence"]
myst_heading_anchors = 3

autosummary_generate = True
autodoc_default_options = {"members": True, "undoc-members": False, "show-inheritance": False}
autodoc_typehints = "description"
autodoc_member_order = "bysource"
autodoc_mock_imports = ["tensorflow"]
napoleon_google_docstring = True
napoleon_numpy_docstring = False
napoleon_use_ivar = True  # a module's "Attributes:" are its dataclass fields, which autodoc documents once already
# Parameter names that are also attribute names elsewhere (``scores``) make ambiguous cross-references; not links.
suppress_warnings = ["ref.python"]

html_theme = "furo"
html_title = "attnjax"
