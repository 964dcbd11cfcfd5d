"""Package conventions: PEP 561 marker, and type hints on every public function.

Public functions are those named in a public module's ``__all__`` (and the
public methods of classes named there).  ``NOT_YET_ANNOTATED`` lists the ones
still without complete hints; it may only shrink: the test fails when a name
on it gains its hints (remove it from the list) and when a new public function
lacks them.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from pathlib import Path

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
