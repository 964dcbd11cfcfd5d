"""The documentation builds offline with warnings as errors, and its doctests pass."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("sphinx")
pytest.importorskip("numpydoc")
pytest.importorskip("myst_parser")

DOCS = Path(__file__).parent.parent / "docs"


@pytest.mark.parametrize("builder", ["html", "doctest"])
def test_sphinx_build(builder, tmp_path):
    out = subprocess.run(
        [sys.executable, "-m", "sphinx", "-W", "--keep-going", "-q", "-b", builder, str(DOCS), str(tmp_path)],
        capture_output=True, text=True,
    )
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-4000:]
