"""The reference corpus ships inside the package: declared, built into the wheel, read from there.

``python -m pychop_compat validate`` must work after ``pip install`` from any
folder, so the corpus (``pychop_compat/data``) and ``py.typed`` must be
package data and the code must find them where the package is installed, not
in a source checkout.
"""

from __future__ import annotations

import fnmatch
import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest

import pychop_compat
from pychop_compat.validation.corpora import CORPORA, Corpus, corpus_path, load_corpus

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "pychop_compat"


def _package_data_patterns() -> list[str]:
    tomllib = pytest.importorskip("tomllib")  # Python >= 3.11
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    return config["tool"]["setuptools"]["package-data"]["pychop_compat"]


def test_every_data_file_is_declared_package_data():
    patterns = _package_data_patterns()
    files = [p.relative_to(PACKAGE).as_posix() for p in (PACKAGE / "data").rglob("*") if p.is_file()
             and "__pycache__" not in p.parts]
    files.append("py.typed")
    assert (PACKAGE / "py.typed").is_file()
    undeclared = [f for f in files if not any(fnmatch.fnmatch(f, pat) for pat in patterns)]
    assert not undeclared, f"not in [tool.setuptools.package-data]: {undeclared}"
    for name in CORPORA:  # every shipped corpus has its data, manifest and provenance
        for part in ("manifest.json", "arrays.npz", "README.md"):
            assert (PACKAGE / "data" / name / part).is_file(), (name, part)


def test_every_subpackage_is_declared():
    tomllib = pytest.importorskip("tomllib")
    declared = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    found = {".".join(p.parent.relative_to(ROOT).parts) for p in PACKAGE.rglob("__init__.py")
             if "__pycache__" not in p.parts}
    assert found == declared, f"[tool.setuptools] packages: missing {found - declared}, stale {declared - found}"


def test_corpus_is_read_from_the_package():
    folder = corpus_path("matlab_reference")
    assert folder == Path(pychop_compat.__file__).parent / "data" / "matlab_reference"
    corpus = load_corpus("matlab_reference")
    assert corpus.groups == ["chop", "matlab_native", "matlab_stream", "roundit", "float_params"]
    assert [len(corpus.cases(g)) for g in corpus.groups] == [744, 32, 120, 6, 20]


def test_corpus_loader_contract(tmp_path):
    corpus = load_corpus("matlab_reference")
    case = corpus.case("chop", "s_single_r6_s1_e1")
    # MATLAB classes and shapes are kept: single input stays float32, randfunc's column stays 640-by-1.
    assert case["x"].dtype == np.float32 and case["x"].shape == (32, 20)
    assert case["stream"].shape == (640, 1)
    # every access is a fresh copy: writing into one cannot change the corpus
    x = case["x"]
    x[...] = 0
    assert np.any(case["x"] != 0)
    with pytest.raises(KeyError, match="no case"):
        corpus.case("chop", "no-such-case")
    with pytest.raises(ValueError, match="unknown corpus 'cpfloat'.*matlab_reference"):
        corpus_path("cpfloat")
    with pytest.raises(FileNotFoundError, match="no manifest.json"):
        Corpus(tmp_path)
    (tmp_path / "manifest.json").write_text(json.dumps({"format_version": 99}))
    with pytest.raises(ValueError, match="format_version 99"):
        Corpus(tmp_path)


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    """The wheel built from a copy of the sources (so no build/ or egg-info lands in the checkout),
    offline: ``pip wheel --no-deps --no-build-isolation --no-index`` with the installed setuptools."""
    pytest.importorskip("setuptools")
    import importlib.util

    if importlib.util.find_spec("setuptools.command.bdist_wheel") is None and importlib.util.find_spec("wheel") is None:
        pytest.skip("building a wheel offline needs setuptools >= 70.1 or the wheel package")
    tmp_path = tmp_path_factory.mktemp("wheel")
    src = tmp_path / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy(ROOT / name, src / name)
    shutil.copytree(PACKAGE, src / "pychop_compat", ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
                            "--no-index", str(src), "-w", str(tmp_path / "dist")],
                           capture_output=True, text=True)
    assert built.returncode == 0, built.stderr[-3000:]
    (found,) = (tmp_path / "dist").glob("pychop_compat-*.whl")
    return found


@pytest.mark.slow  # builds a wheel and runs validate from it in a new venv (a packaging check): CI's slow step
def test_wheel_ships_the_corpus_and_validate_runs_from_it(wheel, tmp_path):
    """Unpack the wheel, run validate from an unrelated folder."""
    names = set(zipfile.ZipFile(wheel).namelist())
    for name in CORPORA:
        for part in ("manifest.json", "arrays.npz", "README.md"):
            assert f"pychop_compat/data/{name}/{part}" in names
    assert "pychop_compat/py.typed" in names

    installed = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(installed)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = {**os.environ, "PYTHONPATH": str(installed)}
    env.pop("PYCHOP_COMPAT_CORPUS", None)
    where = subprocess.run([sys.executable, "-c", "import pychop_compat.validation.corpora as c; "
                            "print(c.corpus_path('matlab_reference'))"],
                           capture_output=True, text=True, cwd=elsewhere, env=env)
    assert where.returncode == 0, where.stderr
    assert Path(where.stdout.strip()) == installed / "pychop_compat" / "data" / "matlab_reference"
    report = elsewhere / "v.json"
    run = subprocess.run([sys.executable, "-m", "pychop_compat", "validate", "--engines", "numpy",
                          "--no-oracle", "--no-progress", "--json", str(report)],
                         capture_output=True, text=True, cwd=elsewhere, env=env)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    assert "all cases agree" in run.stdout
    assert "| chop | numpy | 744 | 744 |" in run.stdout


# Imported in a fresh interpreter from the unpacked wheel, with the checkout off sys.path (and any
# editable install's finder removed): each module of the source tree by name.  A module whose
# optional dependency is not installed is reported, not failed.
_IMPORT_ALL = r"""
import importlib, json, sys
checkout, installed, names = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
sys.meta_path[:] = [f for f in sys.meta_path if "editable" not in getattr(f, "__module__", "").lower()
                    and "editable" not in type(f).__name__.lower()]
sys.path[:] = [p for p in sys.path if p not in ("", ".", checkout)]
OPTIONAL = {"numba", "llvmlite", "torch", "triton", "cupy", "cupyx", "jax", "jaxlib", "dask", "distributed",
            "pandas", "xarray", "ml_dtypes", "sklearn"}
result = {"imported": [], "missing_optional": {}, "failed": {}, "outside": []}
for name in names:
    try:
        module = importlib.import_module(name)
    except ModuleNotFoundError as error:
        if (error.name or "").split(".")[0] in OPTIONAL:
            result["missing_optional"][name] = error.name
            continue
        result["failed"][name] = repr(error)
        continue
    except Exception as error:
        result["failed"][name] = repr(error)
        continue
    result["imported"].append(name)
for name, module in sys.modules.items():
    if name.split(".")[0] == "pychop_compat" and getattr(module, "__file__", None):
        if not module.__file__.startswith(installed):
            result["outside"].append(f"{name}: {module.__file__}")
print(json.dumps(result))
"""


def _source_modules() -> list[str]:
    names = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if "__pycache__" in path.parts:
            continue
        parts = path.relative_to(ROOT).with_suffix("").parts
        names.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return names


@pytest.mark.slow  # builds a wheel (a packaging check): CI's slow step
def test_wheel_holds_every_module_and_data_file_and_imports_without_the_checkout(wheel, tmp_path):
    """The package list in pyproject.toml is explicit: a subpackage left out of it would be missing
    from the wheel while the editable install (and so every other test) still finds it."""
    names = set(zipfile.ZipFile(wheel).namelist())
    sources = {p.relative_to(ROOT).as_posix() for p in PACKAGE.rglob("*") if p.is_file()
               and "__pycache__" not in p.parts
               and (p.suffix == ".py" or p.name == "py.typed" or (PACKAGE / "data") in p.parents)}
    assert sources - names == set(), f"in the source tree, not in the wheel: {sorted(sources - names)}"
    assert {n for n in names if n.startswith("pychop_compat/")} - sources == set()
    assert any(n.startswith("pychop_compat/data/matlab_reference/") for n in names)
    assert any(n.startswith("pychop_compat/data/cpfloat_reference/") for n in names)
    (metadata,) = [n for n in names if n.endswith(".dist-info/METADATA")]
    text = zipfile.ZipFile(wheel).read(metadata).decode()
    assert "License-Expression: BSD-2-Clause" in text and "License-File: LICENSE" in text
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names)
    assert "Provides-Extra: all" in text

    installed = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(installed)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    modules = _source_modules()
    env = {**os.environ, "PYTHONPATH": str(installed)}
    run = subprocess.run([sys.executable, "-c", _IMPORT_ALL, str(ROOT), str(installed), json.dumps(modules)],
                         capture_output=True, text=True, cwd=elsewhere, env=env)
    assert run.returncode == 0, run.stderr[-3000:]
    result = json.loads(run.stdout.strip().splitlines()[-1])
    assert result["failed"] == {}
    assert result["outside"] == [], "imported from outside the unpacked wheel"
    assert sorted(result["imported"] + list(result["missing_optional"])) == sorted(modules)
    assert "pychop_compat" in result["imported"] and "pychop_compat.validation.corpora" in result["imported"]
