"""Names that moved to another module in 0.2.0, kept working for one release.

A moved name (:data:`MOVED_NAMES`) is found by the old module's ``__getattr__``
(:func:`attribute_getter`), which imports its new home only when asked, so no
module imports upwards.
"""

from __future__ import annotations

import importlib
import warnings
from typing import Any, Callable

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
