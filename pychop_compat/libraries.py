"""Which array library owns an input: the one fact every floor of the package may ask.

The libraries (cupy, torch, jax, dask, pandas, xarray) are looked up in
``sys.modules`` only, so none is imported unless the caller already passed
one of its arrays.
"""

from __future__ import annotations

import abc
import numbers
import sys
from typing import Any

import numpy as np

__all__ = ["array_library", "unsupported_type_error", "ARRAY_LIKES", "ChoppedValue"]

#: Types :func:`pychop_compat.chop` converts with NumPy (documented array-likes).
ARRAY_LIKES = "NumPy arrays (and subclasses), NumPy scalars, Python real numbers, lists and tuples"


class ChoppedValue(abc.ABC):
    """A value of a per-operation simulation: :mod:`pychop_compat.arithmetic` registers its chopped
    types (arrays, scalars, tensors, JAX arrays) here, so that the rooms below it can refuse them
    by name without importing it."""


def _instance_of(x: Any, module: str, *names: str) -> bool:
    """``isinstance(x, module.name1.name2...)``, only when ``module`` is already imported."""
    obj: Any = sys.modules.get(module)
    for name in names:
        obj = getattr(obj, name, None)
    return obj is not None and isinstance(x, obj)


def array_library(x: Any) -> str:
    """The library that owns ``x``: ``'numpy'``, ``'torch'``, ``'cupy'``, ``'jax'``, ``'dask'``,
    ``'pandas'``, ``'xarray'``, or ``'unsupported'``.

    ``'numpy'`` covers what chop converts with NumPy (:data:`ARRAY_LIKES` and ``None``);
    anything else is refused rather than converted silently (:func:`unsupported_type_error`).
    """
    if isinstance(x, (np.ndarray, np.generic, numbers.Number, list, tuple)) or x is None:
        return "numpy"
    module = type(x).__module__.partition(".")[0]
    if module == "cupy" and _instance_of(x, "cupy", "ndarray"):
        return "cupy"
    if module == "torch" and _instance_of(x, "torch", "Tensor"):
        return "torch"
    if module in ("jax", "jaxlib") and _instance_of(x, "jax", "Array"):
        return "jax"
    if module == "dask" and _instance_of(x, "dask.array", "Array"):
        return "dask"
    if module == "pandas" and (_instance_of(x, "pandas", "Series") or _instance_of(x, "pandas", "DataFrame")):
        return "pandas"
    if module == "xarray" and _instance_of(x, "xarray", "DataArray"):
        return "xarray"
    return "unsupported"


def unsupported_type_error(x: Any, function: str = "chop", takes: str = "pandas Series/DataFrames and xarray "
                           "DataArrays") -> TypeError:
    """The error of ``function`` for an input of no supported library (never converted silently);
    ``takes``: the inputs it accepts beyond the array likes, tensors and CuPy, JAX and Dask arrays."""
    kind = f"{type(x).__module__}.{type(x).__qualname__}"
    hint = ""
    if isinstance(x, ChoppedValue):
        hint = (" It is a chopped value, whose operations round to its own arithmetic; pass its values "
                "(x.values, or x.value for a chopped scalar) to round them.")
    elif hasattr(x, "__dlpack__"):
        hint = (" It supports DLPack: pass numpy.from_dlpack(x) (host memory) or torch.from_dlpack(x) "
                "to choose where the result lives.")
    elif hasattr(x, "__array__"):
        hint = " Pass numpy.asarray(x) to round a NumPy copy of it."
    return TypeError(f"{function} does not support {kind} input: it takes {ARRAY_LIKES}, torch tensors, CuPy, "
                     f"JAX and Dask arrays{', ' + takes if takes else ''}.{hint}")
