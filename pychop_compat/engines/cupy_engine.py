"""The CuPy adapter: what chop needs to know about ``cupy.ndarray``, and no rounding.

It maps CuPy's dtypes onto float32/float64 (float16 computed in float32,
integers and bool as float64) and moves arrays to the host and back; the
router picks the kernel.  CuPy is imported lazily.  :func:`seed_device`,
:func:`matlab_stream_on_device` and :func:`kernel_source` are re-exported for
old imports.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..kernels.cuda import chop_device_array, kernel_source
from ..random.counter import seed_device
from ..random.sources import matlab_stream_on_device

__all__ = ["working_array", "to_host", "from_host", "contiguous", "device_key", "seed_device",
           "matlab_stream_on_device", "kernel_source", "chop_device_array"]


def _cupy() -> Any:
    import cupy

    return cupy


def working_array(x: Any) -> tuple:
    """``(array to compute on, dtype to give back or None)``: float32/float64, chop's classes.

    Raises
    ------
    ValueError
        For complex input (chop.m's first check).
    TypeError
        For other unsupported dtypes.
    """
    if x.dtype.kind == "c":
        raise ValueError("Chop requires a real input array.")
    if x.dtype in (np.float64, np.float32):
        return x, None
    if x.dtype == np.float16:
        return x.astype(np.float32), x.dtype  # no MATLAB class is half
    if x.dtype.kind in "biu":
        return x.astype(np.float64), None
    raise TypeError(f"chop supports float64, float32 and float16 arrays (and integers), not {x.dtype}.")


def to_host(x: Any) -> np.ndarray:
    """A copy of the array in host memory."""
    return np.asarray(_cupy().asnumpy(x))


def from_host(array: np.ndarray, like: Any) -> Any:
    """A NumPy result as a new C-contiguous array on ``like``'s device."""
    with like.device:
        return _cupy().asarray(np.array(array, order="C"))


def contiguous(x: Any) -> Any:
    """``x`` as a CuPy array in C order (not ``ascontiguousarray``, which makes a 0-d array 1-d)."""
    x = _cupy().asarray(x)
    return x if x.flags.c_contiguous else x.copy(order="C")


def device_key(x: Any) -> str:
    """The counter of :mod:`~pychop_compat.random.counter` that an array's device uses."""
    return f"cuda:{x.device.id}"
