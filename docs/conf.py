"""Sphinx configuration for pychop_compat.

Build (offline, warnings are errors)::

    python -m sphinx -W --keep-going -b html docs docs/_build/html
    python -m sphinx -W -b doctest docs docs/_build/doctest
"""

from __future__ import annotations

import importlib
import os
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, ROOT)

import pychop_compat  # noqa: E402

project = "pychop_compat"
author = "pychop_compat developers"
copyright = "pychop_compat developers"
version = release = pychop_compat.__version__

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.doctest",
    "numpydoc",
    "myst_parser",
]

source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build"]
templates_path: list[str] = []

# Offline build: no intersphinx, no remote images.
nitpicky = False

html_theme = "alabaster"
html_static_path: list[str] = []
html_theme_options = {"description": "Bit-exact Python port of MATLAB chop", "fixed_sidebar": False}

# autodoc
autodoc_member_order = "bysource"
autodoc_typehints = "none"  # types are given in the numpydoc sections
autodoc_default_options: dict = {}

# numpydoc
numpydoc_show_class_members = False  # members are listed by autodoc itself
numpydoc_class_members_toctree = False
numpydoc_xref_param_type = False
numpydoc_validation_checks: set[str] = set()  # validation is not part of this build

# myst (CHANGELOG.md is included from the repository root)
myst_heading_anchors = 2

# Optional parts of the package: their API pages are built only when they import.
def _importable(name: str) -> bool:
    try:
        importlib.import_module(name)
    except ImportError:
        return False
    return True


HAVE_LINALG = _importable("pychop_compat.linalg")
if not HAVE_LINALG:
    exclude_patterns.append("api/linalg.rst")
if not _importable("torch"):  # pychop_compat.nn and its page need torch
    exclude_patterns += ["api/nn.rst", "training.rst"]
if not _importable("pychop_compat.engines.cupy_engine"):
    exclude_patterns.append("api/engines_cupy.rst")

# doctest: every document starts from chop.m's initial state
# (no persistent options, MATLAB's default random stream).
doctest_global_setup = """
import numpy as np
import pychop_compat
from pychop_compat import *
try:
    from pychop_compat import linalg
    HAVE_LINALG = True
except ImportError:
    HAVE_LINALG = False
clear_chop()
_ = rng('default')
"""
doctest_global_cleanup = """
clear_chop()
_ = rng('default')
"""
