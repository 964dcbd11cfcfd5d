"""Package conventions: PEP 561 marker, type hints on every public function, mypy clean.

Public functions are those named in a public module's ``__all__`` (and the
public methods of classes named there).  ``NOT_YET_ANNOTATED`` lists the ones
still without complete hints; it may only shrink: the test fails when a name
on it gains its hints (remove it from the list) and when a new public function
lacks them.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import pkgutil
import re
import subprocess
import sys
from pathlib import Path

import pytest

import pychop_compat

NOT_YET_ANNOTATED: set = set()  # every public function is annotated; keep it so


def _public_functions():
    for info in pkgutil.walk_packages(pychop_compat.__path__, "pychop_compat."):
        if any(part.startswith("_") for part in info.name.split(".")[1:]):
            continue
        try:
            module = importlib.import_module(info.name)
        except ImportError:
            continue
        for name in getattr(module, "__all__", []):
            obj = getattr(module, name)
            if getattr(obj, "__module__", None) != module.__name__:
                continue  # re-exported: checked where it is defined
            if inspect.isfunction(obj):
                yield f"{module.__name__}.{name}", obj
            elif inspect.isclass(obj):
                for attr, member in vars(obj).items():
                    if inspect.isfunction(member) and (not attr.startswith("_") or attr == "__init__"):
                        yield f"{module.__name__}.{name}.{attr}", member


def _fully_annotated(func) -> bool:
    signature = inspect.signature(func)
    params_ok = all(p.annotation is not inspect.Parameter.empty
                    for name, p in signature.parameters.items() if name not in ("self", "cls"))
    return params_ok and (signature.return_annotation is not inspect.Signature.empty or func.__name__ == "__init__")


def test_py_typed_marker_ships():
    assert (Path(pychop_compat.__file__).parent / "py.typed").is_file()


def test_public_functions_have_type_hints():
    functions = dict(_public_functions())
    assert len(functions) > 40  # the walk found the package
    missing = sorted(name for name, func in functions.items()
                     if not _fully_annotated(func) and name not in NOT_YET_ANNOTATED)
    assert not missing, f"public functions without complete type hints: {missing}"
    now_annotated = sorted(name for name in NOT_YET_ANNOTATED if name in functions and _fully_annotated(functions[name]))
    assert not now_annotated, f"annotated now: remove from NOT_YET_ANNOTATED: {now_annotated}"


@pytest.mark.heavy  # (mypy without its cache: 45 s on a fresh clone)
def test_mypy_finds_no_errors_in_the_package():
    """``mypy -p pychop_compat`` with the committed configuration (pyproject.toml's [tool.mypy])."""
    if importlib.util.find_spec("mypy") is None:
        pytest.skip("mypy is not installed (it is in the test extra: pip install -e .[test])")
    root = Path(__file__).resolve().parents[1]
    assert (root / "pychop_compat" / "__init__.py").is_file()
    # From the source checkout, so that mypy checks these files (not an installed copy).
    result = subprocess.run([sys.executable, "-m", "mypy", "-p", "pychop_compat"], cwd=root,
                            capture_output=True, text=True)
    report = result.stdout + result.stderr
    files = sorted(set(re.findall(r"^(pychop_compat/\S+?\.py):\d+: error:", report, re.MULTILINE)))
    assert result.returncode == 0, f"mypy found errors in {len(files)} files {files}:\n{report[-6000:]}"
    assert "Success: no issues found" in report


#: Private modules other modules may import: the shim that keeps moved import paths working
#: (with a DeprecationWarning) and the version string.
SHARED_PRIVATE_MODULES = {"_moved", "_version"}


def _private_imports(path: Path) -> list:
    """``(line, imported name)`` for each import in ``path`` of a name with a leading underscore
    from another module of the package (imports inside functions included)."""
    import ast

    package = Path(pychop_compat.__file__).parent
    module_parts = list(path.relative_to(package.parent).with_suffix("").parts)
    if module_parts[-1] == "__init__":
        module_parts = module_parts[:-1]
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if not isinstance(node, ast.ImportFrom):
            continue
        if node.level:  # relative: resolve against this module's package
            base = module_parts[:len(module_parts) - node.level + (path.name == "__init__.py")]
            source = ".".join(base + ([node.module] if node.module else []))
        else:
            source = node.module or ""
        if not source.startswith("pychop_compat"):
            continue
        for alias in node.names:
            if alias.name.startswith("_") and alias.name not in SHARED_PRIVATE_MODULES \
                    and not source.endswith("." + alias.name) and alias.name != "__version__":
                found.append((f"{path.relative_to(package.parent)}:{node.lineno}", f"{source}.{alias.name}"))
    return found


def test_no_private_name_crosses_a_module():
    """No module imports a name with a leading underscore from another module of the package: a
    name another module needs is public (documented) or lives where it is used (issue 28)."""
    package = Path(pychop_compat.__file__).parent
    found = [hit for path in sorted(package.rglob("*.py")) for hit in _private_imports(path)]
    assert not found, found
