"""The public part of the API reference, generated from one list.

``PUBLIC_MODULES`` is the one list of public module paths; each module's ``__all__`` says what it
exports, in order.  ``docs/conf.py`` calls :func:`write_pages` when the build starts: it writes one
page per public module into ``docs/api/generated/`` (git-ignored: every build writes them again,
so they cannot fall behind the code), documenting each name of ``__all__`` once, at that path.

A name exported by two public paths (``pychop_compat.float_params`` and
``pychop_compat.formats.float_params``) is documented at one home, the package root where it
exports the name, else the exporting module where the name is defined, and named at the other
with a one-line cross-reference.  :func:`resolve_moved_reference` lets a reference to where a
public name is defined (``pychop_compat.formats.catalogue.lookup_format``) resolve to its home.

The list lives here, beside ``conf.py``, not in the package: only the documentation and its tests
read it (``tests/test_docs.py`` checks it against ``docs/design.rst``, "Public and internal module
paths"); the package has no use for it at run time.  Hand-written prose about a module's internals
goes in ``docs/api/internals/<module path>.rst``; the generated page links to it.
"""

from __future__ import annotations

import importlib
import inspect
import os
import sys
from pathlib import Path

PUBLIC_MODULES = (
    "pychop_compat",
    "pychop_compat.matlab",
    "pychop_compat.formats",
    "pychop_compat.rounding",
    "pychop_compat.numbers",
    "pychop_compat.nn",
    "pychop_compat.linalg",
    "pychop_compat.hardware",
    "pychop_compat.arithmetic",
    "pychop_compat.arithmetic.jax_array",
    "pychop_compat.random",
    "pychop_compat.engines",
    "pychop_compat.spec",
    "pychop_compat.validation",
)

GENERATED = "api/generated"  # relative to docs/
INTERNALS = "api/internals"

# Data without a ``#:`` comment where it is assigned.
DESCRIPTIONS = {"pychop_compat.__version__": "The package version, a string."}

_ROLES = {"module": "mod", "class": "class", "exception": "exc", "function": "func", "data": "data"}


def exports(mock_imports=()) -> dict[str, list[tuple[str, object]]]:
    """Each public module's ``__all__``, in order, with the objects (optional libraries mocked as autodoc does)."""
    from sphinx.ext.autodoc.mock import mock

    with mock(list(mock_imports)):
        modules = {path: importlib.import_module(path) for path in PUBLIC_MODULES}
    return {path: [(name, getattr(module, name)) for name in module.__all__] for path, module in modules.items()}


def _kind(obj) -> str:
    if inspect.ismodule(obj):
        return "module"
    if inspect.isclass(obj):
        return "exception" if issubclass(obj, BaseException) else "class"
    return "function" if callable(obj) else "data"


def _comment(name: str, obj, first: str) -> tuple[str, list[str]] | None:
    """(module, lines) of the ``#:`` comment of data ``name``, looked for where it is assigned."""
    from sphinx.pycode import ModuleAnalyzer

    candidates = [first] + sorted(m for m in sys.modules if m.startswith("pychop_compat.") and m != first)
    for module in candidates:
        if getattr(sys.modules.get(module), name, None) is not obj:
            continue
        try:
            docs = ModuleAnalyzer.for_module(module).find_attr_docs()
        except Exception:  # no source
            continue
        if ("", name) in docs:
            lines = list(docs["", name])
            while lines and not lines[-1]:
                lines.pop()
            return module, lines
    return None


def _defined_in(module: str, name: str, obj) -> str:
    kind = _kind(obj)
    if kind == "module":
        return obj.__name__
    if kind in ("class", "exception", "function"):
        return getattr(obj, "__module__", None) or module
    found = _comment(name, obj, module)
    return found[0] if found else module


def homes(exported) -> dict[str, str]:
    """{public path: the path where it is documented in full} for every name of every ``__all__``: the package
    root where it exports the name, else the exporting module where it is defined, else the first exporter;
    a public module exported by name is documented on its own page."""
    exporters: dict[tuple[str, int], list[str]] = {}
    for module, names in exported.items():
        for name, obj in names:
            exporters.setdefault((name, id(obj)), []).append(module)
    result = {}
    for module, names in exported.items():
        for name, obj in names:
            if inspect.ismodule(obj) and obj.__name__ in PUBLIC_MODULES:
                result[f"{module}.{name}"] = obj.__name__  # a public module has a page of its own
                continue
            candidates = exporters[name, id(obj)]
            defined = _defined_in(module, name, obj)
            owners = [m for m in candidates if defined == m or defined.startswith(m + ".")]
            home = "pychop_compat" if "pychop_compat" in candidates else max(owners or candidates[:1], key=len)
            result[f"{module}.{name}"] = f"{home}.{name}"
    return result


def page(module: str, names, home: dict[str, str], srcdir: Path) -> str:
    """The reStructuredText of ``module``'s page."""
    title = f"``{module}``"
    lines = [title, "=" * len(title), "", f".. automodule:: {module}", "   :no-members:", ""]
    if not names:
        lines += [f"``{module}`` exports no names of its own.", ""]
    for name, obj in names:
        path, kind = f"{module}.{name}", _kind(obj)
        if home[path] != path or (kind == "module" and obj.__name__ in PUBLIC_MODULES):  # documented elsewhere
            lines += [f"* ``{path}``: see :{_ROLES[kind]}:`{home[path]}`.", ""]
        elif kind == "module":
            lines += [f".. automodule:: {path}", "   :members:", "", f".. py:currentmodule:: {module}", ""]
        elif kind in ("class", "exception"):
            lines += [f".. auto{kind}:: {path}", "   :members:", ""]
        elif kind == "function":
            lines += [f".. autofunction:: {path}", ""]
        else:
            found = _comment(name, obj, module)
            text = found[1] if found else [DESCRIPTIONS[path]]
            value = repr(obj)
            lines += [f".. py:data:: {name}", f"   :module: {module}"]
            lines += [f"   :value: {value}"] if len(value) <= 60 else []
            lines += [""] + [f"   {line}".rstrip() for line in text] + [""]
    if (srcdir / INTERNALS / f"{module}.rst").is_file():
        lines += [f"Internals (not public API): :doc:`/{INTERNALS}/{module}`.", ""]
    return "\n".join(lines)


def write_pages(srcdir, mock_imports=()) -> list[Path]:
    """Write ``docs/api/generated/<module>.rst`` for each public module (a file only where it changed,
    so that Sphinx rereads only those) and remove pages of modules no longer listed."""
    srcdir = Path(srcdir)
    folder = srcdir / GENERATED
    folder.mkdir(parents=True, exist_ok=True)
    exported = exports(mock_imports)
    home = homes(exported)
    written = []
    for module, names in exported.items():
        target = folder / f"{module}.rst"
        text = page(module, names, home, srcdir)
        if not target.is_file() or target.read_text() != text:
            partial = target.with_suffix(f".{os.getpid()}.tmp")  # atomic: two builds may run at once
            partial.write_text(text)
            partial.replace(target)
        written.append(target)
    for stale in set(folder.glob("*.rst")) - set(written):
        stale.unlink()
    _MOVED.clear()
    _MOVED.update(_moved_paths(exported, home))
    return written


def _moved_paths(exported, home) -> dict[str, str]:
    """{path: home} for the other public paths of a name and the implementation path where it is defined."""
    moved = {path: target for path, target in home.items() if path != target}
    for module, names in exported.items():
        for name, obj in names:
            path = f"{module}.{name}"
            if home[path] == path and _kind(obj) != "module":
                qualname = name if _kind(obj) == "data" else getattr(obj, "__qualname__", name)
                moved.setdefault(f"{_defined_in(module, name, obj)}.{qualname}", path)
    return {old: new for old, new in moved.items() if old != new}


_MOVED: dict[str, str] = {}  # filled by write_pages


def resolve_moved_reference(app, env, node, contnode):
    """``missing-reference``: resolve ``pychop_compat.formats.catalogue.lookup_format`` (where a public
    name is defined) or ``pychop_compat.formats.float_params`` (its other public path), and their members,
    to the name's home."""
    if node.get("refdomain") != "py":
        return None
    target = node["reftarget"].lstrip(".~")
    for old, new in _MOVED.items():
        if target == old or target.startswith(old + "."):
            return env.get_domain("py").resolve_xref(env, node["refdoc"], app.builder, node["reftype"],
                                                     new + target[len(old):], node, contnode)
    return None
