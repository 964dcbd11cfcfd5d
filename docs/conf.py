"""Sphinx configuration for pychop_compat.

Build (offline, warnings are errors, every cross-reference must resolve)::

    python -m sphinx -W -n --keep-going -b html docs docs/_build/html
    python -m sphinx -W -b doctest docs docs/_build/doctest

``tests/test_docs.py`` runs both in CI.  The figures in ``docs/figures/*.png``
are made by the scripts beside them (``python docs/figures/make_all.py``);
the build only includes them.  The public API pages (``docs/api/generated/``) are
written by ``api_pages.py`` when the build starts.
"""

from __future__ import annotations

import importlib
import os
import sys

from docutils import nodes

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import api_pages  # noqa: E402
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

# Offline build: no intersphinx, no remote images.  Every reference to this
# package must resolve (-n); names of other libraries (NumPy, SciPy, torch, ...)
# and private helpers (``_name``, deliberately undocumented) render as code.
nitpicky = True
nitpick_ignore_regex = [
    (r"py:.*", r"(numpy|np|scipy|torch|cupy|jax|dask|ml_dtypes|mpmath|matplotlib|types|typing|"
               r"collections|pathlib|fractions|os|json|argparse)(\..*)?"),
    (r"py:.*", r"(.*\.)?_[A-Za-z]\w*"),
    # chop's eight options, documented in the Attributes section of Options (no targets of their own)
    (r"py:attr", r"(format|subnormal|round|flip|p|explim|randfunc|params)"),
    # builtin types named in numpydoc parameter sections
    (r"py:(class|obj)", r"(int|float|str|bool|bytes|list|tuple|dict|callable|None|optional|array_like|"
                        r"ndarray|path-like|sequence|iterable|object)"),
]

html_theme = "furo"
html_title = f"pychop_compat {release}"
html_static_path = ["_static"]
html_css_files = ["tables.css"]  # wide tables wrap or scroll inside the content column
html_theme_options: dict = {}

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

# Optional dependencies.  The build needs only the ``docs`` extra: an optional
# library that is not installed (numba for the compiled kernels, torch for
# pychop_compat.nn, ...) is replaced by autodoc's mock while autodoc imports
# the modules, so every API page is built either way.  An installed library is
# never mocked.  The doctest builder runs the examples that need torch only
# where torch is installed (``:skipif: not HAVE_TORCH``).
OPTIONAL_DEPENDENCIES = ["numba", "llvmlite", "torch", "triton", "cupy", "cupyx", "cupy_backends",
                         "jax", "jaxlib", "dask", "distributed", "pandas", "xarray", "ml_dtypes",
                         "sklearn"]


def _importable(name: str) -> bool:
    try:
        importlib.import_module(name)
    except Exception:  # not installed, or installed but broken (a CUDA library without CUDA)
        return False
    return True


autodoc_mock_imports = [name for name in OPTIONAL_DEPENDENCIES if not _importable(name)]


def _resolve_short_names(app, env, node, contnode):
    """Resolve ``:func:`seed_device``` written in another module's docstring when exactly one
    documented object of this package has that name and a type the role names (Sphinx looks only in
    the current module)."""
    if node.get("refdomain") != "py" or node["reftype"] in ("attr", "meth"):
        return None  # attributes and methods are looked up in their class only
    target = node["reftarget"].lstrip(".~")
    if target.startswith("_") or ".__" in target:
        return None
    domain = env.get_domain("py")
    suffix = "." + target
    types = domain.objtypes_for_role(node["reftype"]) or ()
    matches = [name for name, entry in domain.objects.items()
               if name.startswith("pychop_compat.") and name.endswith(suffix)
               and not entry.aliased and entry.objtype in types]  # aliased: autodoc's :canonical: path
    if len(matches) != 1:
        return None
    return domain.resolve_xref(env, node["refdoc"], app.builder, node["reftype"], matches[0], node, contnode)


def _torch_examples_need_torch(app, doctree):
    """Where torch is not installed, the doctest builder skips the docstring examples that use it
    (``>>>`` paragraphs have no ``:skipif:`` of their own; the pages' directives have one)."""
    if "torch" in autodoc_mock_imports:
        for node in doctree.findall(nodes.doctest_block):
            if "torch" in node.astext():
                node["skipif"] = "True"


def _write_api_pages(app):
    """The public API pages, docs/api/generated/*.rst, from api_pages.PUBLIC_MODULES and each one's __all__."""
    api_pages.write_pages(app.srcdir, autodoc_mock_imports)


def setup(app):
    app.connect("builder-inited", _write_api_pages)
    app.connect("missing-reference", api_pages.resolve_moved_reference)
    app.connect("missing-reference", _resolve_short_names)
    app.connect("doctree-read", _torch_examples_need_torch)


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
try:
    import torch
    HAVE_TORCH = True
except ImportError:
    HAVE_TORCH = False
clear_chop()
_ = rng('default')
"""
doctest_global_cleanup = """
clear_chop()
_ = rng('default')
"""
