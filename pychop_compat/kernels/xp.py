"""One array namespace for every library the kernels run on: array-api-compat, plus bit views.

The kernels written once against an array namespace (:mod:`.elementwise`,
:mod:`.elementwise_cpfloat`, and the chopped linear algebra and arithmetic
above them) take a :class:`Namespace`: the library's array API namespace as
array-api-compat gives it (NumPy, CuPy, torch and Dask wrapped to the
standard; ``jax.numpy`` as it is), plus what the standard lacks and these
kernels need:

* ``bitcast(a, dtype)``: the bits of ``a`` read as another dtype of the same
  width (NumPy's and CuPy's ``view``, torch's ``Tensor.view(dtype)``, JAX's
  ``lax.bitcast_convert_type``), for rounding on bit patterns;
* ``wide``: whether 64-bit types exist (JAX keeps them off unless
  ``jax_enable_x64`` is set).

Libraries are recognised through array-api-compat without importing any of
them here: an array of a library that was never imported cannot be passed.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any, Callable

__all__ = ["Namespace", "namespace_of", "library_namespace", "LIBRARIES"]

#: The array libraries a :class:`Namespace` exists for.
LIBRARIES = ("numpy", "torch", "cupy", "jax", "dask")


@dataclass(frozen=True)
class Namespace:
    """What a namespace-generic kernel needs from one array library.

    Attributes
    ----------
    name : str
        The library, one of :data:`LIBRARIES`.
    xp : module-like
        The library's array API namespace (array-api-compat's wrapper, or
        ``jax.numpy``).
    bitcast : callable
        ``bitcast(a, dtype)``: the bits of ``a`` as ``dtype`` (same item size).
    wide : bool
        Whether 64-bit integer and float types exist.
    """

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
    if name == "torch":
        import array_api_compat.torch as torch_namespace

        return Namespace(name, torch_namespace, _view)
    if name == "cupy":
        import array_api_compat.cupy as cupy_namespace

        return Namespace(name, cupy_namespace, _view)
    if name == "dask":
        import array_api_compat.dask.array as dask_namespace

        return Namespace(name, dask_namespace, _view)
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
