"""The array libraries a :class:`~pychop_compat.arithmetic.ChoppedArray` holds: what kernels.xp does not say.

A chopped array is NumPy code; it also serves the arrays of a library whose
``__array_ufunc__``/``__array_function__`` answer NumPy's calls with its own
arrays on their device (:data:`UFUNC_PROTOCOL_LIBRARIES`: CuPy), a fact the
array API standard does not record.  The rest (an array's library and
namespace, copies to the host and back) comes from array-api-compat.  This
is arithmetic's door to the engines (``round_array``, and ``route`` for NumPy
arrays; :mod:`.jax_array` also calls ``round_jax``).  A test's stand-in device library is held inside
``with holding(array_type, namespace, rounder)``.
"""

from __future__ import annotations

import contextlib
from typing import Any, Callable, Iterator, List, Optional, Tuple

import array_api_compat
import numpy as np

from ..engines import dispatch
from ..kernels.xp import Namespace, library_namespace
from ..random.sources import RandomSources
from ..spec import RoundingSpec

__all__ = ["UFUNC_PROTOCOL_LIBRARIES", "holding", "is_device_array"]

#: The libraries whose arrays a chopped array holds: NumPy's ufuncs and functions reach them
#: through ``__array_ufunc__``/``__array_function__`` and give back arrays of the same library
#: on the same device (a fact the array API standard does not record).
UFUNC_PROTOCOL_LIBRARIES = ("numpy", "cupy")

#: ``round(x, spec, sources)``: chop's rule on an array of one library, same type and device.
Rounder = Callable[[Any, RoundingSpec, RandomSources], Any]

_held: List[Tuple[type, Namespace, Rounder]] = []
#: ``(library, array-api-compat's test for its arrays)`` of the device libraries above.
_DEVICE_TESTS = tuple((name, getattr(array_api_compat, f"is_{name}_array")) for name in UFUNC_PROTOCOL_LIBRARIES
                      if name != "numpy")


@contextlib.contextmanager
def holding(array_type: type, namespace: Namespace, rounder: Rounder) -> Iterator[None]:
    """Let chopped arrays hold arrays of ``array_type`` inside the ``with`` block.

    Parameters
    ----------
    array_type : type
        The arrays of the library.  They must follow NumPy's
        ``__array_ufunc__`` and ``__array_function__`` protocols for the
        functions chopped arrays call, and array-api-compat's ``to_device(x,
        'cpu')`` and ``device(x)`` (``x.to_device``, ``x.device``).
    namespace : Namespace
        Its namespace: ``namespace.xp`` has the array creations of
        :mod:`.reductions` under NumPy's names (``empty``, ``full``,
        ``concatenate``, ``moveaxis``, ``transpose``, ``asarray`` with
        ``device=``).
    rounder : callable
        ``rounder(x, spec, sources)``: chop's rule on one of its arrays, on its device.
    """
    entry = (array_type, namespace, rounder)
    _held.insert(0, entry)
    try:
        yield
    finally:
        _held.remove(entry)


def device_namespace(value: Any) -> Optional[Namespace]:
    """The namespace of a device array a chopped array can hold (a CuPy array); None for
    anything else, NumPy arrays included."""
    if isinstance(value, np.ndarray):
        return None
    for array_type, namespace, _ in _held:
        if isinstance(value, array_type):
            return namespace
    for name, test in _DEVICE_TESTS:
        if test(value):
            return library_namespace(name)
    return None


def is_device_array(value: Any) -> bool:
    """Whether ``value`` is a device array a chopped array can hold (a CuPy array)."""
    return device_namespace(value) is not None


def to_host(x: Any) -> np.ndarray:
    """A NumPy copy of the device array ``x``."""
    return np.asarray(array_api_compat.to_device(x, "cpu"))


def from_host(host: np.ndarray, like: Any) -> Any:
    """``host`` as an array of the library of ``like`` (a device array), on its device."""
    namespace = device_namespace(like)
    if namespace is None:
        raise TypeError(f"{type(like).__name__} is not a device array chopped arrays hold")
    return namespace.xp.asarray(host, device=array_api_compat.device(like))


def host_rounder(spec: RoundingSpec, sources: RandomSources) -> dispatch.PreparedRounding:
    """chop's rule by ``spec`` on non-empty float32/float64 NumPy arrays in native byte order:
    :class:`~pychop_compat.engines.dispatch.PreparedRounding`, which finds the router's kernel
    for small arrays once per dtype and CPU-engine setting."""
    return dispatch.PreparedRounding(spec, sources)


def round_array(x: Any, spec: RoundingSpec, sources: RandomSources) -> Any:
    """Round ``x`` (float values of NumPy or of a library with an engine) by ``spec``.

    Arithmetic's one call into the engines: the NumPy engine for NumPy arrays
    and scalars, the array's own engine (its type and device kept) for the others.
    """
    if not isinstance(x, np.ndarray):
        for array_type, _, rounder in _held:
            if isinstance(x, array_type):
                return rounder(x, spec, sources)
    return dispatch.round_array(x, spec, sources)
