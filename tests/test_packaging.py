"""The install and test commands that the README and the docs give work as written.

pychop_compat is not on a package index yet, so every install command installs
from a checkout (``".[extra]"``, ``.``), every extra named exists in
``pyproject.toml``, the README's test commands are the ones CI runs
(``.ci/run``) and need only what the ``test`` extra installs, and the
documentation build needs only the ``docs`` extra.  The wheel itself is checked
in ``tests/test_package_data.py``.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

tomllib = pytest.importorskip("tomllib")  # Python >= 3.11
from packaging.requirements import Requirement  # noqa: E402  (packaging comes with pip and pytest)

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
EXTRAS: dict[str, list[str]] = PYPROJECT["project"]["optional-dependencies"]
CI_LINES = [line.strip() for line in (ROOT / ".ci" / "run").read_text().splitlines()
            if line.strip() and not line.lstrip().startswith("#")]

# Where a user reads an install command: the README, the docs, the package's own error messages,
# the examples and the benchmarks' README.
TEXTS = {path.relative_to(ROOT).as_posix(): path.read_text()
         for pattern in ("README.md", "docs/**/*.rst", "docs/**/*.md", "pychop_compat/**/*.py",
                         "examples/**/*.py", "benchmarks/README.md")
         for path in ROOT.glob(pattern) if "_build" not in path.parts}


def _names(requirements: list[str]) -> set[str]:
    return {re.sub(r"[-_.]+", "-", Requirement(r).name).lower() for r in requirements}


def _code_blocks(text: str) -> list[str]:
    """The lines of the README's fenced shell blocks (```bash or a bare fence), comments dropped."""
    lines, language = [], None
    for line in text.splitlines():
        if line.startswith("```"):
            language = None if language is not None else (line[3:].strip() or "sh")
            continue
        if language in ("bash", "sh"):
            line = line.split("  #", 1)[0].strip()
            if line and not line.startswith("#"):
                lines.append(line)
    return lines


def _commands(line: str) -> list[list[str]]:
    """``a && b`` as [[a's words], [b's words]]."""
    return [shlex.split(part) for part in line.split("&&")]


def _pip_installs() -> list[tuple[str, str]]:
    """Every ``pip install ...`` in the texts users read: (file, the command as written)."""
    found = []
    for name, text in TEXTS.items():
        for match in re.finditer(r"pip install[^`\n]*(?:\n[^`\n]*)?", text):
            found.append((name, match.group(0)))
    return found


def test_every_install_command_installs_from_a_checkout_and_names_declared_extras():
    installs = _pip_installs()
    assert len(installs) >= 8, installs  # the README's, the docs' and the error messages' commands were found
    for name, command in installs:
        # The package is not on an index: never `pip install pychop_compat` or "pychop_compat[extra]".
        assert not re.search(r"pip install\s+(-\S+\s+)*['\"]?pychop[-_]compat\b", command), (name, command)
        for extras in re.findall(r"\.\[([\w,\- ]+)\]", command):
            for extra in extras.split(","):
                assert extra.strip() in EXTRAS, f"{name}: {command!r} names extra {extra!r}, not in pyproject"
    # The extras the README lists in "Set up" are exactly the declared ones.
    setup = README[README.index("## Set up"):README.index("Run the demonstration")]
    listed = set(re.findall(r"`(\w+)`", setup.split("extras of", 1)[1].split(";", 1)[0]))
    assert listed == set(EXTRAS), (listed, set(EXTRAS))


def test_the_readme_test_command_is_what_ci_runs_and_the_test_extra_provides_it():
    lines = _code_blocks(README)
    (install_and_test,) = [line for line in lines if "pytest" in line and "pip install" in line]
    assert install_and_test in CI_LINES  # the README's command, verbatim, is .ci/run's first step
    install, pytest_run = _commands(install_and_test)
    assert install[:4] == ["python", "-m", "pip", "install"]
    requested = [word for word in install[4:] if not word.startswith("-")]
    assert requested[0] == ".[test,docs]" and all(Requirement(r) for r in requested[1:])
    assert pytest_run[:3] == ["python", "-m", "pytest"]
    test_extra = _names(EXTRAS["test"])
    # Every pytest command of the README and of CI: its plugins and markers are declared.
    markers = {m.split(":", 1)[0] for m in PYPROJECT["tool"]["pytest"]["ini_options"]["markers"]}
    runs = [c for line in lines + CI_LINES for c in _commands(line) if c[:3] == ["python", "-m", "pytest"]]
    assert len(runs) >= 5
    for run in runs:
        options = run[3:]
        if "-n" in options:
            assert "pytest-xdist" in test_extra, run
        if "-m" in options:
            assert options[options.index("-m") + 1] in markers, run
    assert "pytest" in test_extra
    # CI's other steps are installed by the test extra too.
    if "lint-imports" in CI_LINES:
        assert "import-linter" in test_extra
    assert "python -m pytest -n 2 -m slow" in CI_LINES and "python -m pytest -n 2 -m slow" in " ".join(lines)
    # The default run excludes the long profiles that the README says are excluded by default.
    addopts = PYPROJECT["tool"]["pytest"]["ini_options"]["addopts"]
    for marker in ("slow", "fuzz", "published"):
        assert f"not {marker}" in addopts


def test_the_readme_says_what_the_test_extra_installs():
    setup = README[README.index("## Set up"):README.index("The longer profiles")]
    for name in ("pytest-xdist", "Hypothesis", "import-linter", "mypy", "Numba", "JAX", "Dask", "distributed",
                 "pandas", "xarray", "ml_dtypes", "scikit-learn", "Triton"):
        assert name in setup, name
    assert {"pytest-xdist", "hypothesis", "import-linter", "mypy", "numba", "jax", "dask", "distributed", "pandas",
            "xarray", "ml-dtypes", "scikit-learn", "triton"} <= _names(EXTRAS["test"])
    # torch's CPU-only wheels: an optional, separate step from PyTorch's own index.
    assert "--index-url https://download.pytorch.org/whl/cpu" in setup
    assert "CPU build of torch so" not in setup


def test_the_docs_build_needs_only_the_docs_extra():
    lines = _code_blocks(README)
    (build,) = [line for line in lines if "sphinx" in line]
    install, sphinx = _commands(build)
    assert ".[docs]" in install and sphinx[:3] == ["python", "-m", "sphinx"]
    conf = (ROOT / "docs" / "conf.py").read_text()
    docs_extra = _names(EXTRAS["docs"])
    extensions = re.search(r"extensions = \[(.*?)\]", conf, flags=re.S).group(1)
    distributions = {"numpydoc": "numpydoc", "myst_parser": "myst-parser", "sphinx": "sphinx"}
    for extension in re.findall(r"\"([\w.]+)\"", extensions):
        assert distributions[extension.split(".")[0]] in docs_extra, extension
    theme = re.search(r'html_theme = "(\w+)"', conf).group(1)
    assert theme in docs_extra
    # Whatever else the package imports is mocked by autodoc where it is missing.
    mocked = re.search(r"OPTIONAL_DEPENDENCIES = \[(.*?)\]", conf, flags=re.S).group(1)
    for module in ("numba", "torch", "triton", "cupy", "jax", "dask", "distributed", "pandas", "xarray",
                   "ml_dtypes"):
        assert f'"{module}"' in mocked, module


def test_extras_and_metadata():
    project = PYPROJECT["project"]
    # `all`: every optional library of the CPU engines.
    assert _names(EXTRAS["fast"]) | _names(EXTRAS["torch"]) | _names(EXTRAS["jax"]) | _names(EXTRAS["dask"]) \
        <= _names(EXTRAS["all"])
    # A PEP 639 license expression with its file, and no License :: classifier beside it
    # (setuptools >= 77 refuses the pair).
    assert project["license"] == "BSD-2-Clause" and project["license-files"] == ["LICENSE"]
    assert (ROOT / "LICENSE").read_text().startswith("BSD 2-Clause License")
    assert not [c for c in project["classifiers"] if c.startswith("License ::")]
    build_requires = [Requirement(r) for r in PYPROJECT["build-system"]["requires"]]
    (setuptools_req,) = [r for r in build_requires if r.name == "setuptools"]
    assert not setuptools_req.specifier.contains("76.9")  # the license expression needs setuptools >= 77
    minimum = project["requires-python"].removeprefix(">=")
    versions = [c.rsplit(" ", 1)[1] for c in project["classifiers"]
                if re.fullmatch(r"Programming Language :: Python :: 3\.\d+", c)]
    assert versions and versions[0] == minimum
    assert "urls" not in project  # no project URLs until the project has a public home


def test_a_missing_optional_dependency_names_its_extra(monkeypatch):
    """``import pychop_compat.nn`` without torch and the compiled engine without Numba say which extra
    (of those in pyproject.toml) installs what is missing."""
    assert {"torch", "fast"} <= set(EXTRAS) and "torch" in _names(EXTRAS["torch"]) and "numba" in _names(EXTRAS["fast"])
    # torch made unimportable in a fresh interpreter (None in sys.modules: import raises ModuleNotFoundError)
    code = ("import sys; sys.modules['torch'] = None\n"
            "try:\n    import pychop_compat.nn\n"
            "except ModuleNotFoundError as e:\n    print(e.name); print(e)\n")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT,
                         env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert run.returncode == 0, run.stderr[-2000:]
    name, message = run.stdout.splitlines()
    assert name == "torch"
    assert "pychop_compat.nn needs torch" in message and 'pip install -e ".[torch]"' in message

    from pychop_compat.kernels import compiled

    monkeypatch.setattr(compiled, "_available", False)  # as without Numba
    with pytest.raises(ImportError, match=r'needs numba.*pip install -e "\.\[fast\]"'):
        compiled.set_cpu_engine("numba")
