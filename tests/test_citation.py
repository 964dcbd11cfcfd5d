"""CITATION.cff: valid Citation File Format 1.2.0, version in step with the package."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest

import pychop_compat

CITATION = Path(__file__).resolve().parent.parent / "CITATION.cff"


def _text() -> str:
    return CITATION.read_text(encoding="utf-8")


def _top_level_scalar(text: str, key: str) -> str:
    """A top-level ``key: value`` of a YAML file, without a YAML library (quotes stripped)."""
    match = re.search(rf"^{re.escape(key)}:[ \t]*(?P<value>\S.*?)[ \t]*$", text, re.MULTILINE)
    assert match, f"{key} missing from CITATION.cff"
    return match.group("value").strip("'\"")


def _yaml(text: str) -> dict:
    yaml = pytest.importorskip("yaml")
    return yaml.safe_load(text)


def test_citation_file_exists():
    assert CITATION.is_file()


def test_cff_version_and_package_version_without_yaml():
    text = _text()
    assert _top_level_scalar(text, "cff-version") == "1.2.0"
    assert _top_level_scalar(text, "version") == pychop_compat.__version__


def test_parses_as_yaml():
    data = _yaml(_text())
    assert isinstance(data, dict)
    assert str(data["cff-version"]) == "1.2.0"
    assert str(data["version"]) == pychop_compat.__version__
    assert data["title"] == "pychop_compat"
    assert data["type"] == "software"
    assert data["license"] == "BSD-2-Clause"
    assert data["authors"] == [{"name": "pychop_compat developers"}]


def test_references_cite_the_sources():
    data = _yaml(_text())
    dois = {ref.get("doi") for ref in data.get("references", [])}
    assert {
        "10.1137/19M1251308",  # Higham & Pranesh 2019, chop
        "10.1098/rsos.211631",  # Croci et al. 2022, stochastic rounding
        "10.1137/17M1140819",  # Carson & Higham 2018, iterative refinement
        "10.1145/272991.272995",  # Matsumoto & Nishimura 1998, Mersenne Twister
    } <= dois


@pytest.mark.skipif(importlib.util.find_spec("cffconvert") is None, reason="cffconvert not installed")
def test_validates_with_cffconvert():
    from cffconvert.citation import Citation

    Citation(_text()).validate()  # raises on a schema violation


def test_preferred_citation_is_this_version_of_the_software():
    data = _yaml(_text())
    preferred = data["preferred-citation"]
    assert preferred["type"] == "software"
    assert str(preferred["version"]) == pychop_compat.__version__
    assert preferred["authors"] == data["authors"]
    assert "10.1137/19M1251308" in preferred["notes"]  # and the chop paper with it
