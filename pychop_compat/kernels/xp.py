"""One array namespace for every library the kernels run on: array-api-compat plus ``bitcast``
and ``wide`` (docs/design.rst, "One array namespace").  No library is imported here.
"""

from __future__ import annotations

import functools
import importlib
from dataclasses import dataclass
from typing import Any, Callable

__all__ = ["Namespace", "namespace_of", "library_namespace", "LIBRARIES"]

#: The array libraries a :class:`Namespace` exists for.
LIBRARIES = ("numpy", "torch", "cupy", "jax", "dask")


@dataclass(frozen=True)
class Namespace:
    """What a namespace-generic kernel needs from one array library: its ``name`` (one of
    :data:`LIBRARIES`), ``xp`` (its array API namespace), ``bitcast(a, dtype)`` and ``wide``."""

    name: str
    xp: Any
    bitcast: Callable[[Any, Any], Any]
    wide: bool = True


def _view(a: Any, dtype: Any) -> Any:
    return a.view(dtype)


def _jax_bitcast(a: Any, dtype: Any) -> Any:
    import jax

    return jax.lax.bitcast_convert_type(a, dtype)


@functools.lru_cache(maxsize=None)
def _cached(name: str, wide: bool) -> Namespace:
    import array_api_compat

    if name == "numpy":
        import numpy

        return Namespace(name, array_api_compat.array_namespace(numpy.empty(0)), _view)
    if name == "jax":
        import jax.numpy

        return Namespace(name, jax.numpy, _jax_bitcast, wide)
    wrapped = {"torch": "array_api_compat.torch", "cupy": "array_api_compat.cupy", "dask": "array_api_compat.dask.array"}
    if name in wrapped:
        return Namespace(name, importlib.import_module(wrapped[name]), _view)
    raise ValueError(f"No array namespace for {name!r}; known: {', '.join(LIBRARIES)}.")


def library_namespace(name: str) -> Namespace:
    """The :class:`Namespace` of the library ``name`` (one of :data:`LIBRARIES`)."""
    wide = True
    if name == "jax":
        import jax

        wide = bool(jax.config.read("jax_enable_x64"))
    return _cached(name, wide)


def namespace_of(x: Any) -> Namespace:
    """The :class:`Namespace` of the array ``x`` (a NumPy, torch, CuPy, JAX or Dask array).

    Raises
    ------
    TypeError
        For an object of no supported array library.
    """
    import array_api_compat

    for name, test in (("numpy", array_api_compat.is_numpy_array), ("torch", array_api_compat.is_torch_array),
                       ("cupy", array_api_compat.is_cupy_array), ("jax", array_api_compat.is_jax_array),
                       ("dask", array_api_compat.is_dask_array)):
        if test(x):
            return library_namespace(name)
    raise TypeError(f"No array namespace for {type(x).__module__}.{type(x).__qualname__}.")
