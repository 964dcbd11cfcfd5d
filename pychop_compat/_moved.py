"""Old import paths of modules and names that moved in 0.2.0, kept working for one release.

An old module path (:data:`MOVED`) imports the new home, registers it under the
old name too and warns once (:class:`DeprecationWarning`); a name that moved to
another module (:data:`MOVED_NAMES`) is found by the old module's ``__getattr__``
(:func:`attribute_getter`), which imports its new home only when asked, so no
module imports upwards.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
import warnings
from types import ModuleType
from typing import Any, Callable, Optional, Sequence

#: Old module path -> new module path.
MOVED = {
    "pychop_compat.api": "pychop_compat.matlab.api",
    "pychop_compat.options": "pychop_compat.matlab.options",
    "pychop_compat.history": "pychop_compat.matlab.history",
    "pychop_compat.matlab_random": "pychop_compat.random.matlab_stream",
    "pychop_compat.randomness": "pychop_compat.random.sources",
    "pychop_compat.engines.device_random": "pychop_compat.random.counter",
    "pychop_compat.engines.counter_host": "pychop_compat.random.counter",
    "pychop_compat.random.counter_host": "pychop_compat.random.counter",
    "pychop_compat.reference": "pychop_compat.rules.chop",
    "pychop_compat.rounding.extended": "pychop_compat.rules.cpfloat",
    "pychop_compat.engines.elementwise": "pychop_compat.kernels.elementwise",
    "pychop_compat.engines.elementwise_cpfloat": "pychop_compat.kernels.elementwise_cpfloat",
    "pychop_compat.engines.numpy_fast": "pychop_compat.kernels.numpy_fast",
    "pychop_compat.engines.numpy_cpfloat": "pychop_compat.kernels.numpy_cpfloat",
    "pychop_compat.engines.numba_kernels": "pychop_compat.kernels.numba_kernels",
    "pychop_compat.engines.numba_cpfloat": "pychop_compat.kernels.numba_cpfloat",
    "pychop_compat.engines.compiled": "pychop_compat.kernels.compiled",
    "pychop_compat.engines.cuda": "pychop_compat.kernels.cuda",
    "pychop_compat.engines.triton_kernel": "pychop_compat.kernels.triton_kernel",
    "pychop_compat.engines.device_plan": "pychop_compat.kernels.device_plan",
    "pychop_compat.linalg.compiled_kernels": "pychop_compat.kernels.numba_linalg",
    "pychop_compat.linalg.compiled_lu": "pychop_compat.kernels.numba_lu",
    "pychop_compat.linalg.triton_matmul": "pychop_compat.kernels.triton_matmul",
    "pychop_compat.oracle": "pychop_compat.validation.oracle",
    "pychop_compat.corpora": "pychop_compat.validation.corpora",
    "pychop_compat.gpu_check": "pychop_compat.validation.gpu_check",
    "pychop_compat.arithmetic.scalar": "pychop_compat.arithmetic.array",
}


#: Old module -> {name: "new.module:name"}, names that moved to another module.
MOVED_NAMES = {
    "pychop_compat.engines.jax_engine": {"chop_jax": "pychop_compat.matlab.api:chop_jax"},
}


def attribute_getter(module: str) -> Callable[[str], Any]:
    """A module ``__getattr__`` (PEP 562) for ``module``'s names in :data:`MOVED_NAMES`: the name
    from its new home, with a :class:`DeprecationWarning`; ``AttributeError`` for other names."""
    moved = MOVED_NAMES.get(module, {})

    def __getattr__(name: str) -> Any:
        target = moved.get(name)
        if target is None:
            raise AttributeError(f"module {module!r} has no attribute {name!r}")
        new_module, _, new_name = target.partition(":")
        warnings.warn(f"{module}.{name} moved to {new_module}.{new_name}; the old spelling stops working in a "
                      "later release.", DeprecationWarning, stacklevel=2)
        return getattr(importlib.import_module(new_module), new_name)

    return __getattr__


class _MovedModuleLoader(importlib.abc.Loader):
    def __init__(self, new: str) -> None:
        self.new = new

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        warnings.warn(f"{spec.name} moved to {self.new}; the old path stops working in a later release.",
                      DeprecationWarning, stacklevel=2)
        return importlib.import_module(self.new)

    def exec_module(self, module: ModuleType) -> None:
        """Nothing to run: the module is the new home, already imported."""


class MovedModuleFinder(importlib.abc.MetaPathFinder):
    """Finds the old paths of :data:`MOVED` (installed on ``sys.meta_path`` by the package)."""

    def find_spec(self, fullname: str, path: Optional[Sequence[str]] = None,
                  target: Optional[ModuleType] = None) -> Optional[importlib.machinery.ModuleSpec]:
        new = MOVED.get(fullname)
        if new is None:
            return None
        return importlib.machinery.ModuleSpec(fullname, _MovedModuleLoader(new))


def install() -> None:
    """Put the finder on ``sys.meta_path`` (once)."""
    if not any(isinstance(finder, MovedModuleFinder) for finder in sys.meta_path):
        sys.meta_path.append(MovedModuleFinder())
