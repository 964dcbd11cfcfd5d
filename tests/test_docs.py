"""The documentation builds offline with warnings as errors and every reference resolved,
its doctests pass, the API reference documents every public name, and wide tables are marked
to fit the page."""

from __future__ import annotations

import ast
import csv
import importlib
import importlib.util
import json
import os
import pkgutil
import re
import subprocess
import sys
import zlib
from pathlib import Path

import pytest
from filelock import FileLock

import pychop_compat

DOCS = Path(__file__).parent.parent / "docs"
WIDE = 5  # columns from which a table must carry ``:class: wide`` and ``:widths:`` (docs/_static/tables.css)


def _needs_sphinx():
    for name in ("sphinx", "numpydoc", "myst_parser", "furo"):
        pytest.importorskip(name)


# The build and the doctests take a worker for about a minute: they run in the slow profile, which
# CI runs after the default one (run them alone with ``pytest -m slow tests/test_docs.py``).  Only
# the build's own test is marked heavy (scheduled first): the others, run in collection order,
# find the build made instead of waiting for it on the other worker.
pytestmark = pytest.mark.slow


def _sphinx(builder, out, doctrees, *flags):
    _needs_sphinx()
    return subprocess.run(
        [sys.executable, "-m", "sphinx", "-W", *flags, "--keep-going", "-q", "-b", builder, "-d", str(doctrees),
         str(DOCS), str(out)],
        capture_output=True, text=True,
    )


@pytest.fixture(scope="session")
def html_build(tmp_path_factory):
    """The HTML build, its result, and the folder of its parsed documents (the doctest build
    reuses them).

    One build per run: under ``pytest -n`` the tests that use it may land on different workers
    (``--dist load``), so the first builds in the folder the run's workers share (the parent of
    each one's temporary folder) under a file lock, and the others read its record.
    """
    shared = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        shared = shared.parent  # (each worker's folder is popen-gw<N> in the run's own)
    out, doctrees, record = shared / "docs_html", shared / "docs_doctrees", shared / "docs_html.json"
    with FileLock(str(shared / "docs_html.lock")):
        if not record.exists():
            result = _sphinx("html", out, doctrees, "-n")
            record.write_text(json.dumps([result.returncode, result.stdout, result.stderr]))
        returncode, stdout, stderr = json.loads(record.read_text())
    return out, subprocess.CompletedProcess([], returncode, stdout, stderr), doctrees


@pytest.mark.heavy
def test_html_builds_without_warnings_and_every_reference_resolves(html_build):
    out, result, _ = html_build
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]
    assert (out / "index.html").is_file()


def test_doctests_in_the_docs_pass(html_build, tmp_path):
    # Sphinx reads the sources once: the doctest builder runs on the HTML build's parsed documents.
    result = _sphinx("doctest", tmp_path, html_build[2])
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
    out, result, _ = html_build
    assert result.returncode == 0
    documented = _documented_names(out / "objects.inv")
    short = {name.rsplit(".", 1)[-1] for name in documented}
    missing = [f"{module.__name__}.{name}" for module in _public_modules() for name in module.__all__
               if f"{module.__name__}.{name}" not in documented and name not in short]
    assert not missing, ("names missing from the API reference (a public module's page is generated from its "
                         f"__all__; an internal module's names go on its page in docs/api/internals/): {missing}")
    assert "pychop_compat.chop" in documented and "pychop_compat.validation.corpora.load_corpus" in documented


def _api_pages():
    """docs/api_pages.py, the one list of public module paths and the generator of their pages."""
    spec = importlib.util.spec_from_file_location("api_pages", DOCS / "api_pages.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _generated_entries(page: Path, module: str) -> list[str]:
    """The public paths a generated page names, in order: each documented (``.. autofunction:: path``,
    ``.. py:data:: name`` with ``:module:``, ...) or named with a cross-reference to its home (``* ``path``: see ...``)."""
    entries = []
    for line in page.read_text().splitlines():
        if line.startswith("   :module: "):  # .. py:data:: NAME with :module: MODULE
            entries[-1] = f"{line.split()[-1]}.{entries[-1]}"
            continue
        match = (re.match(r"\.\. (?:auto\w+|py:data):: (\S+)$", line)
                 or re.match(r"\* ``(\S+)``: see :\w+:`", line))
        if match and match.group(1) != module:
            entries.append(match.group(1))
    return entries


def test_generated_api_pages_name_exactly_each_public_modules_all(html_build):
    """One generated page per public module path, naming each name of its __all__ once, in order, at that
    path; a name with two public paths is documented in full at one home and the home is documented."""
    out, result, _ = html_build
    assert result.returncode == 0
    api_pages = _api_pages()
    pages = DOCS / api_pages.GENERATED
    assert sorted(page.stem for page in pages.glob("*.rst")) == sorted(api_pages.PUBLIC_MODULES)
    documented = _documented_names(out / "objects.inv")
    checked = 0
    for name in api_pages.PUBLIC_MODULES:
        try:
            module = importlib.import_module(name)
        except ImportError:  # an optional dependency is missing (torch for pychop_compat.nn)
            continue
        page = (pages / f"{name}.rst").read_text()
        assert _generated_entries(pages / f"{name}.rst", name) == [f"{name}.{item}" for item in module.__all__], name
        for item in module.__all__:
            cross_reference = re.search(rf"^\* ``{re.escape(name)}\.{item}``: see :\w+:`(\S+)`", page, flags=re.M)
            assert (cross_reference.group(1) if cross_reference else f"{name}.{item}") in documented, (name, item)
        checked += 1
    assert checked >= len(api_pages.PUBLIC_MODULES) - 1
    # one home: the package root documents what it re-exports, the other path names it
    formats = (pages / "pychop_compat.formats.rst").read_text()
    assert "* ``pychop_compat.formats.float_params``: see :func:`pychop_compat.float_params`." in formats
    assert "pychop_compat.formats.float_params" not in documented and "pychop_compat.float_params" in documented


def test_public_module_paths_are_those_of_the_design_page():
    """api_pages.PUBLIC_MODULES (the generated pages), docs/design.rst's "Public and internal module paths"
    and the package agree: the same paths in the same order, each a module that declares __all__."""
    section = (DOCS / "design.rst").read_text().split("Public and internal module paths\n", 1)[1]
    bullets = re.search(r"^\* .*?(?=\n\n)", section, flags=re.M | re.S).group(0)
    listed = tuple(re.findall(r"``(pychop_compat(?:\.\w+)*)``", bullets))
    assert listed == _api_pages().PUBLIC_MODULES
    for name in listed:
        spec = importlib.util.find_spec(name)
        assert spec is not None and spec.origin, name
        body = ast.parse(Path(spec.origin).read_text()).body
        targets = [target for node in body if isinstance(node, (ast.Assign, ast.AnnAssign))
                   for target in getattr(node, "targets", [getattr(node, "target", None)])]
        assert any(isinstance(target, ast.Name) and target.id == "__all__" for target in targets), \
            f"{name} declares no __all__"


def _tables(page: Path):
    """(line number, directive, options, number of columns) of each list-table and csv-table of a page."""
    lines = page.read_text().splitlines()
    for i, line in enumerate(lines):
        match = re.match(r"\s*\.\. (list-table|csv-table)::", line)
        if not match:
            continue
        options, j = {}, i + 1
        while j < len(lines) and re.match(r"\s+:[\w-]+:", lines[j]):
            key, _, value = lines[j].strip()[1:].partition(":")
            options[key] = value.strip()
            j += 1
        if match.group(1) == "list-table":
            while j < len(lines) and not lines[j].strip().startswith("* -"):
                j += 1
            columns = 1
            for text in lines[j + 1:]:
                if text.strip().startswith("* -") or (text.strip() and not text.startswith(" ")):
                    break
                columns += text.strip().startswith("- ")
        elif "file" in options:
            with (page.parent / options["file"]).open(newline="") as f:
                columns = len(next(csv.reader(f)))
        elif "header" in options:
            columns = len(next(csv.reader([options["header"]], skipinitialspace=True)))
        else:
            columns = len(next(csv.reader([lines[j + 1].strip()], skipinitialspace=True)))
        yield i + 1, match.group(1), options, columns


def test_wide_tables_carry_the_class_and_widths_that_make_them_fit():
    """A table of WIDE or more columns is cut off at the page's edge unless it takes the class ``wide``
    (docs/_static/tables.css: full width, wrapping cells) and one width per column."""
    found = 0
    problems = []
    for page in sorted(DOCS.rglob("*.rst")):
        for line, kind, options, columns in _tables(page):
            if columns < WIDE:
                continue
            found += 1
            widths = options.get("widths", "").split()
            if "wide" not in options.get("class", "").split() or len(widths) != columns:
                problems.append(f"{page.relative_to(DOCS)}:{line}: {kind} of {columns} columns has "
                                f":class: {options.get('class', '')!r} and :widths: {options.get('widths', '')!r}")
    assert found, "no wide table found: the check itself is broken"
    assert not problems, "\n".join(problems)
    assert "table.docutils.wide" in (DOCS / "_static" / "tables.css").read_text()
