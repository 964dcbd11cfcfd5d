"""One array namespace for every library the kernels run on: array-api-compat plus ``bitcast``
and ``wide`` (docs/design.rst, "One array namespace").  No library is imported here.
"""

from __future__ import annotations

import functools
import importlib
from dataclasses import dataclass
from typing import Any, Callable

__all__ = ["Namespace", "namespace_of", "library_namespace", "exact_float32", "exact_float64", "LIBRARIES"]

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


def exact_float32(ns: Namespace, w: Any) -> Any:
    """float64 ``w`` rounded to float32 as IEEE conversion rounds (to nearest, ties to even), on
    any library: results below float32's normal range are written as subnormal bit patterns,
    since the conversions of XLA and of CuPy (whose kernels are compiled with flush-to-zero)
    turn them into zeros (CuPy's, measured on an H200)."""
    xp = ns.xp
    magnitude = xp.abs(w)
    tiny = magnitude < 2.0**-126
    # units of 2**-149, rounded once (exact scaling; 2**23 units is the smallest normal's pattern)
    significand = xp.astype(xp.round(xp.where(tiny, magnitude * 2.0**149, 0.0)), xp.int32)
    subnormal = ns.bitcast(xp.where(xp.signbit(w), significand | -(2**31), significand), xp.float32)
    return xp.where(tiny, subnormal, xp.astype(w, xp.float32))


def exact_float64(ns: Namespace, x: Any) -> Any:
    """float32 ``x`` as float64, exactly, on any library: float32 subnormals are rebuilt from their
    bits (significand times 2**-149, normal in float64), since the conversions of XLA and of
    CuPy (compiled with flush-to-zero) read them as zeros."""
    xp = ns.xp
    bits = ns.bitcast(x, xp.int32)
    magnitude = xp.astype(bits & 0x7FFFFF, xp.float64) * 2.0**-149
    subnormal = xp.where(bits < 0, -magnitude, magnitude)
    return xp.where((bits & 0x7F800000) == 0, subnormal, xp.astype(x, xp.float64))
