"""The array libraries whose arrays a :class:`~pychop_compat.arithmetic.ChoppedArray` can hold.

One implementation of chopped arithmetic serves NumPy and CuPy: the
operations call NumPy's ufuncs and functions, which CuPy arrays take over
through ``__array_ufunc__`` and ``__array_function__`` (so results stay on
the array's device), and the few places that create arrays or round them ask
the data's :class:`DataNamespace` (its array module, its chop engine, the
way to the host and back).  CuPy is found through ``sys.modules``, never
imported here.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any, Callable, List, Optional

import numpy as np

from ..engines import array_library, dispatch

__all__ = ["DataNamespace", "NUMPY", "namespace_of", "register_namespace", "unregister_namespace",
           "is_device_array"]


@dataclass(frozen=True)
class DataNamespace:
    """How chopped arithmetic handles the arrays of one library.

    Attributes
    ----------
    name : str
        The library (``'numpy'``, ``'cupy'``).
    module : module-like
        Array creation and manipulation functions with NumPy's names and
        signatures (``empty``, ``full``, ``concatenate``, ``moveaxis``,
        ``transpose``, ``asarray``, ``broadcast_to``).
    array_type : type
        The arrays of the library.
    round : callable
        ``round(x, spec, sources)``: chop on the library's engine, same array type and device.
    to_host : callable
        A NumPy copy of an array.
    from_host : callable
        ``from_host(host_array, like)``: an array of the library on ``like``'s device.
    """

    name: str
    module: Any
    array_type: type
    round: Callable[[Any, Any, Any], Any]
    to_host: Callable[[Any], np.ndarray]
    from_host: Callable[[np.ndarray, Any], Any]

    @property
    def on_host(self) -> bool:
        """Whether the arrays are NumPy arrays in host memory."""
        return self.name == "numpy"

    def owns(self, value: Any) -> bool:
        """Whether ``value`` is an array of this library."""
        return isinstance(value, self.array_type)


#: NumPy: the NumPy chop engine, arrays already on the host.
NUMPY = DataNamespace("numpy", np, np.ndarray, dispatch.round_array, np.asarray, lambda host, like: host)

_registered: List[DataNamespace] = []
_cupy: List[DataNamespace] = []


def _cupy_namespace() -> DataNamespace:
    if not _cupy:
        cupy = sys.modules["cupy"]

        def from_host(host: np.ndarray, like: Any) -> Any:
            with like.device:
                return cupy.asarray(host)

        _cupy.append(DataNamespace("cupy", cupy, cupy.ndarray,
                                   lambda x, spec, sources: dispatch.round_array(x, spec, sources),
                                   cupy.asnumpy, from_host))
    return _cupy[0]


def register_namespace(namespace: DataNamespace) -> None:
    """Let chopped arrays hold the arrays of another library (checked before NumPy and CuPy).

    The library's arrays must follow NumPy's ``__array_ufunc__`` and
    ``__array_function__`` protocols for the functions chopped arrays call.
    """
    _registered.insert(0, namespace)


def unregister_namespace(namespace: DataNamespace) -> None:
    """Undo :func:`register_namespace`."""
    _registered.remove(namespace)


def namespace_of(value: Any) -> Optional[DataNamespace]:
    """The :class:`DataNamespace` of an array, or None for anything that is not an array."""
    if type(value) is np.ndarray:
        return NUMPY
    for namespace in _registered:
        if namespace.owns(value):
            return namespace
    if isinstance(value, np.ndarray):
        return NUMPY
    if array_library(value) == "cupy":
        return _cupy_namespace()
    return None


def is_device_array(value: Any) -> bool:
    """An array of a library other than NumPy that chopped arrays can hold (a CuPy array)."""
    if type(value) is np.ndarray:
        return False
    namespace = namespace_of(value)
    return namespace is not None and not namespace.on_host
