"""The documentation builds offline with warnings as errors and every reference resolved,
its doctests pass, and the API reference documents every public name."""

from __future__ import annotations

import importlib
import pkgutil
import subprocess
import sys
import zlib
from pathlib import Path

import pytest

pytest.importorskip("sphinx")
pytest.importorskip("numpydoc")
pytest.importorskip("myst_parser")
pytest.importorskip("furo")

import pychop_compat  # noqa: E402

DOCS = Path(__file__).parent.parent / "docs"


def _sphinx(builder, out, *flags):
    return subprocess.run(
        [sys.executable, "-m", "sphinx", "-W", *flags, "--keep-going", "-q", "-b", builder, str(DOCS), str(out)],
        capture_output=True, text=True,
    )


@pytest.fixture(scope="module")
def html_build(tmp_path_factory):
    out = tmp_path_factory.mktemp("html")
    return out, _sphinx("html", out, "-n")


def test_html_builds_without_warnings_and_every_reference_resolves(html_build):
    out, result = html_build
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]
    assert (out / "index.html").is_file()


def test_doctests_in_the_docs_pass(tmp_path):
    result = _sphinx("doctest", tmp_path)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]
    # the builder really ran the examples (a failure would have been reported above)
    summary = (tmp_path / "output.txt").read_text()
    assert "0 failures in tests" in summary and "tests" in summary


def _documented_names(inventory: Path) -> set[str]:
    """Full names in Sphinx's objects.inv (format version 2: four header lines, then zlib text)."""
    raw = inventory.read_bytes()
    header_end = 0
    for _ in range(4):
        header_end = raw.index(b"\n", header_end) + 1
    lines = zlib.decompress(raw[header_end:]).decode().splitlines()
    return {line.split(" ", 1)[0] for line in lines if " py:" in line}


def _public_modules():
    for info in pkgutil.walk_packages(pychop_compat.__path__, "pychop_compat."):
        if any(part.startswith("_") for part in info.name.split(".")[1:]):
            continue
        try:
            module = importlib.import_module(info.name)
        except ImportError:  # an optional dependency is missing: its page is not built either
            continue
        if hasattr(module, "__all__"):
            yield module


def test_api_reference_documents_every_public_name(html_build):
    """Every name in a public module's __all__ is documented, under that module or where it is defined."""
    out, result = html_build
    assert result.returncode == 0
    documented = _documented_names(out / "objects.inv")
    short = {name.rsplit(".", 1)[-1] for name in documented}
    missing = [f"{module.__name__}.{name}" for module in _public_modules() for name in module.__all__
               if f"{module.__name__}.{name}" not in documented and name not in short]
    assert not missing, ("public names missing from the API reference (add them to a page in docs/api/): "
                         f"{missing}")
    assert "pychop_compat.chop" in documented and "pychop_compat.validation.corpora.load_corpus" in documented
