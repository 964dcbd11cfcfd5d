"""The NumPy adapter: NumPy arrays, NumPy scalars, Python numbers, lists and ndarray kinds.

It turns what chop accepts into the float32/float64 ndarrays the host kernels
round (:func:`as_float_array`), and gives results back as what came in
(:func:`on_array_kind` for masked arrays, ``np.matrix`` and ``np.memmap``).
"""

from __future__ import annotations

import numbers
from typing import Any, Callable, Optional

import numpy as np

__all__ = ["as_float_array", "on_array_kind"]


def as_float_array(x: Any) -> tuple:
    """``(array, restore)``: a float32/float64 ndarray to compute on, and how to give a result
    back (``None``: as it is).

    Raises
    ------
    ValueError
        For an object array holding complex numbers.
    TypeError
        For other dtypes, and object arrays of non-numbers.
    """
    restore: Optional[Callable[[np.ndarray], Any]]
    if isinstance(x, np.ndarray):
        arr = x
        restore = None
    elif isinstance(x, np.generic):
        arr = np.asarray(x)
        restore = lambda out: out[()]  # noqa: E731  (a NumPy scalar of the result's dtype)
    elif isinstance(x, numbers.Real):
        arr = np.asarray(float(x))
        restore = lambda out: float(out)  # noqa: E731
    else:
        arr = np.asarray(x)
        restore = None
    dtype = arr.dtype
    if dtype.kind == "f" and not dtype.isnative:  # byte-swapped data: the result is native, as NumPy's
        arr = arr.astype(dtype.newbyteorder("="))
        dtype = arr.dtype
    if dtype == np.float64 or dtype == np.float32:
        return arr, restore
    if dtype == np.float16:
        # No MATLAB class is half precision: compute in single, give back half.
        base = restore or (lambda out: out)
        return arr.astype(np.float32), lambda out: base(out.astype(np.float16))
    if dtype.kind in "biu":
        return arr.astype(np.float64), restore
    if dtype == object:
        return _object_array_as_float(arr), restore
    raise TypeError(f"chop supports float64, float32 and float16 arrays (and integers), not {dtype}.")


def _object_array_as_float(arr: np.ndarray) -> np.ndarray:
    """An object array of real numbers as float64; anything else (``'1.5'``, ``None``) is refused."""
    for value in arr.flat:
        if not isinstance(value, (numbers.Real, np.bool_)):
            if isinstance(value, (numbers.Complex, np.complexfloating)):
                raise ValueError("Chop requires a real input array.")
            raise TypeError("chop supports float64, float32 and float16 arrays (and integers), not an "
                            f"object array holding {type(value).__name__}.")
    return arr.astype(np.float64)


def on_array_kind(x: np.ndarray, compute: Callable[[np.ndarray], np.ndarray], by_position: bool = False) -> Any:
    """``compute`` (a function of a plain ndarray) applied to ``x``, given back as ``x``'s kind.

    A masked array comes back masked with the same mask: only its unmasked
    elements are computed on, in column-major order (MATLAB's
    ``c(~m) = chop(x(~m))``), and masked elements keep their values.  An
    ``np.matrix`` comes back as a matrix, a ``np.memmap`` as an ndarray (as
    from NumPy's own arithmetic).

    Parameters
    ----------
    x : numpy.ndarray
        A masked array, an ``np.matrix`` or an ``np.memmap``.
    compute : callable
        A function of a plain ndarray, giving a new ndarray of its shape.
    by_position : bool
        Compute a masked array's whole data instead, in its shape (each element's numbers
        are then those of its position: ``Chop(rng=<int>)``), masked elements still keeping
        their values.

    Raises
    ------
    TypeError
        For other ndarray subclasses.
    """
    if isinstance(x, np.ma.MaskedArray):
        data = np.ma.getdata(x)
        mask = np.ma.getmaskarray(x)
        if by_position and mask.any():
            computed = compute(data)
            out = np.where(mask, data.astype(computed.dtype), computed)
        elif not mask.any():
            out = compute(data)
        else:
            keep = ~mask.reshape(-1, order="F")
            computed = compute(data.reshape(-1, order="F")[keep])
            out = data.astype(computed.dtype, order="F", copy=True)
            flat = out.reshape(-1, order="F")  # a view: out is Fortran-ordered
            flat[keep] = computed
        result = x.astype(out.dtype)  # a copy with x's mask, fill value and hardness
        np.ma.getdata(result)[...] = out
        return result
    if isinstance(x, np.matrix):
        return compute(np.asarray(x)).view(np.matrix)
    if isinstance(x, np.memmap):
        return compute(np.asarray(x))
    raise TypeError(
        f"chop cannot give back a {type(x).__module__}.{type(x).__name__} (an ndarray subclass it does "
        "not know); pass numpy.asarray(x) to get a plain ndarray back."
    )
