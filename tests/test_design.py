"""The design page tells the truth: its picture is the import contract, and the contract holds."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    tomllib = pytest.importorskip("tomli")


def _contract_layers() -> list:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    layers = next(c for c in config["contracts"] if c["type"] == "layers" and c.get("containers") is None)
    return [{name.strip() for name in layer.split("|")} for layer in layers["layers"]]


def _picture_layers() -> list:
    """The rooms of each band of the picture in docs/design.rst, as module names."""
    text = (ROOT / "docs" / "design.rst").read_text()
    picture = text.split(".. code-block:: text", 1)[1].split("\n\n", 2)[1]
    bands, current = [], set()
    for line in picture.splitlines():
        line = line.strip()
        if line.startswith("+"):
            if current:
                bands.append(current)
            current = set()
            continue
        for cell in line.strip("|").split("|"):
            first = cell.split()[0] if cell.split() else ""
            if re.fullmatch(r"__main__|\w+/|\w+\.py", first):
                current.add("pychop_compat." + first.rstrip("/").removesuffix(".py"))
    return bands


def test_the_design_picture_is_the_import_contract():
    assert _picture_layers() == _contract_layers()


@pytest.mark.skipif(shutil.which("lint-imports") is None, reason="import-linter not installed")
def test_the_import_contracts_hold():
    done = subprocess.run(["lint-imports"], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout[-4000:]
