"""What the number formats share: the input read as float64 on the host (exact for every
float16/bfloat16/float32/float64 value), chop.m's integer rounding, the result given back in the
input's library, dtype, shape and device."""

from __future__ import annotations

import numbers
import operator
from typing import Any, Callable, Optional

import numpy as np

from ..libraries import array_library
from ..random.sources import MATLAB_STREAM, RandomSources, generator_sources, sources_for
from ..rules.chop import roundit_vector

#: Rounding modes of the number formats: chop's 1 (nearest, ties to even), 2 (up), 3 (down),
#: 4 (toward zero), 5 (stochastic, probability proportional to the distance), 6 (stochastic,
#: equal probabilities), and -1 (nearest, ties away from zero; CPFloat's code).
MODES = (-1, 1, 2, 3, 4, 5, 6)

# torch's dtypes that it casts float64 to through float32, and their formats (rounding to nearest, ties
# to even, as torch's cast).  float8_e8m0fnu is not among them: torch's cast to it rounds otherwise.
_ROUNDED_ONCE = {"float16": "half", "bfloat16": "bfloat16", "float8_e4m3fn": "float8_e4m3fn",
                 "float8_e5m2": "float8_e5m2", "float8_e4m3fnuz": "float8_e4m3fnuz",
                 "float8_e5m2fnuz": "float8_e5m2fnuz"}

# Below this magnitude a scaled value is replaced by a stand-in of the same sign: every mode
# rounds both to the same integer (stochastic draws are multiples of 2^-53, never this small).
_TINY = 2.0 ** -1000


def check_int(value: Any, name: str, low: Optional[int] = None, high: Optional[int] = None) -> int:
    """``value`` as an int within ``[low, high]``, else a ValueError naming ``name``."""
    try:
        number = operator.index(value)
    except TypeError:
        raise TypeError(f"{name} must be an integer, got {value!r}.") from None
    if (low is not None and number < low) or (high is not None and number > high):
        raise ValueError(f"{name} must be an integer in [{low}, {high}], got {number}.")
    return number


def check_mode(mode: Any) -> int:
    """A rounding mode of :data:`MODES`."""
    try:
        number = operator.index(mode)
    except TypeError:
        number = None
    if number not in MODES:
        raise ValueError(
            f"round must be one of {MODES}: 1 nearest (ties to even), 2 up, 3 down, 4 toward zero, "
            f"5 and 6 stochastic, -1 nearest (ties away from zero); got {mode!r}.")
    return number


def random_sources(rng: Any, randfunc: Optional[Callable]) -> RandomSources:
    """chop's draws: MATLAB's stream (``rng=None``), ``randfunc(n)``, or a NumPy Generator."""
    if rng is not None and not isinstance(rng, np.random.Generator):
        raise TypeError(f"rng must be None (MATLAB's stream) or a numpy.random.Generator, got {type(rng).__name__}.")
    return sources_for(randfunc, MATLAB_STREAM if rng is None else generator_sources(rng))


class HostArray:
    """The input as a float64 NumPy array, and how to give results back in its own type: NumPy
    arrays, scalars and sequences, torch tensors (any device, results detached) and CuPy arrays.
    Float dtypes are kept (NumPy and CuPy: float16, float32 and float64; wider floats raise TypeError);
    integer and bool input gives float64."""

    def __init__(self, x: Any):
        self.library = array_library(x)
        self.scalar = False
        if self.library not in ("numpy", "torch", "cupy"):  # never a silent change of type or device
            raise TypeError(f"The number formats take NumPy arrays, torch tensors and CuPy arrays, not "
                            f"{type(x).__module__}.{type(x).__name__}; convert it explicitly "
                            "(e.g. numpy.asarray(x)).")
        if self.library == "torch":
            if x.is_complex():
                raise TypeError("Complex tensors are not supported: the number formats are real.")
            self.dtype = x.dtype if x.is_floating_point() else None
            self.device = x.device
            self.values = x.detach().cpu().double().numpy()
            return
        if self.library == "cupy":
            import sys

            host = sys.modules["cupy"].asnumpy(x)
        else:
            if isinstance(x, np.ndarray) and type(x) is not np.ndarray and not isinstance(x, np.memmap):
                # A masked array or matrix would silently come back plain (and masked values
                # would set block scales): refuse rather than guess.
                raise TypeError(f"Cannot give back a {type(x).__module__}.{type(x).__name__} (an ndarray "
                                "subclass); pass numpy.asarray(x) to get a plain ndarray back.")
            host = x
            self.scalar = isinstance(x, numbers.Number) or isinstance(x, np.generic)
        arr = np.asarray(host)
        if arr.dtype.kind == "c":
            raise TypeError("Complex input is not supported: the number formats are real.")
        if arr.dtype.kind not in "biuf":
            raise TypeError(f"Expected real numbers, got an array of dtype {arr.dtype}.")
        if arr.dtype.kind == "f" and arr.dtype.type not in (np.float16, np.float32, np.float64):  # any byte order
            # A wider float (np.longdouble) would be rounded to float64 first: two roundings.
            raise TypeError(f"The number formats support float64, float32 and float16 arrays (and integers), not "
                            f"{arr.dtype}; convert it explicitly (e.g. x.astype(numpy.float64)), which rounds it.")
        self.dtype = arr.dtype if arr.dtype.kind == "f" else np.dtype(np.float64)
        self.values = arr.astype(np.float64)  # always a copy: the caller's array is never written

    def give_back(self, values: np.ndarray) -> Any:
        """Float results in the input's library, dtype, shape and device."""
        values = np.asarray(values)
        if self.library == "torch":
            import torch

            name = _ROUNDED_ONCE.get(str(self.dtype).replace("torch.", ""))
            if name is not None:
                # torch casts float64 to these through float32 (two roundings): round once here
                # (to nearest, ties to even, as torch rounds float32 to them), then the cast is exact.
                from ..rounding import round_to_format

                rounded = round_to_format(values, name)
                # Past the largest finite value the format's own rule gives NaN (e4m3fn, fnuz); there
                # torch's rule (e4m3fn saturates) decides, from a value past the threshold either way.
                values = np.where(np.isnan(rounded) & ~np.isnan(values), values, rounded)
            return self._in_library(values, self.dtype or torch.float64)
        return self._in_library(values.astype(self.dtype))

    def give_back_codes(self, codes: np.ndarray) -> Any:
        """Integer codes (int64) in the input's library and device."""
        if np.isnan(codes).any():
            raise ValueError("NaN input has no integer code; remove NaNs or ask for dequantized values.")
        return self._in_library(np.asarray(codes).astype(np.int64))

    def give_back_float64(self, values: np.ndarray) -> Any:
        """Side results (scales) as float64 in the input's library and device (NumPy: arrays)."""
        values = np.asarray(values, dtype=np.float64)
        return values if self.library == "numpy" else self._in_library(values)

    def _in_library(self, values: np.ndarray, torch_dtype: Any = None) -> Any:
        """A NumPy array in the input's library and device (NumPy: as it is; a scalar for scalar input;
        torch: a copy, converted to ``torch_dtype`` if given)."""
        if self.library == "torch":
            import torch

            return torch.from_numpy(np.array(values, order="C")).to(device=self.device, dtype=torch_dtype)
        if self.library == "cupy":
            import sys

            return sys.modules["cupy"].asarray(values)
        return values[()] if self.scalar else values


def shift(x: np.ndarray, exponent: Any) -> np.ndarray:
    """``x * 2^exponent`` exactly where the result is a normal double; a scaled value that
    would underflow is replaced by a same-signed stand-in that every mode rounds alike."""
    with np.errstate(over="ignore"):
        y = np.ldexp(x, exponent)
    lost = (np.abs(y) < _TINY) & (x != 0)
    if lost.any():
        y = np.where(lost, np.copysign(_TINY, x), y)
    return y


def round_integers(y: np.ndarray, mode: int, sources: RandomSources) -> np.ndarray:
    """Round ``y`` (float64, any shape) to integers by ``mode``, a new array: chop.m's ``roundit``
    for 1..6 (:func:`pychop_compat.rules.chop.roundit_vector`, numbers in column-major order), -1
    nearest with ties away from zero.  NaN and +-Inf stay."""
    if mode == -1:
        magnitude = np.abs(y)
        whole = np.floor(magnitude)
        with np.errstate(invalid="ignore"):
            up = (magnitude - whole) >= 0.5  # exact: the fraction of a double is a double
        return np.copysign(whole + up, y)
    flat = roundit_vector(y.ravel(order="F"), mode, sources)
    return flat.reshape(y.shape, order="F")


class Blocks:
    """``x`` cut into blocks of ``size`` consecutive elements along ``axis`` (``size=None``:
    the whole array is one block).  The last block of a row may be shorter."""

    def __init__(self, shape: tuple, axis: Optional[int], size: Optional[int]):
        self.shape = shape
        self.size = size
        if size is None:
            self.axis = None
            return
        ndim = max(len(shape), 1)
        axis = check_int(axis, "axis", -ndim, ndim - 1)
        self.axis = axis % ndim
        self.length = shape[self.axis] if shape else 1
        # A block longer than the axis holds the whole row, as one of the axis' length does: the
        # arrays below are sized by it.
        self.size = size = min(size, max(self.length, 1))
        self.count = -(-self.length // size) if self.length else 0

    def block_max(self, magnitude: np.ndarray) -> np.ndarray:
        """The largest of ``magnitude`` (>= 0, NaN propagating) in each block, shaped like
        the input with the axis replaced by the number of blocks."""
        if self.axis is None or self.size is None:  # (None together: one block)
            return np.max(magnitude, initial=0.0, keepdims=magnitude.ndim > 0).reshape((1,) * magnitude.ndim)
        moved = np.moveaxis(magnitude.reshape(self.shape or (1,)), self.axis, -1)
        pad = self.count * self.size - self.length
        padded = np.concatenate([moved, np.zeros(moved.shape[:-1] + (pad,))], axis=-1) if pad else moved
        blocked = padded.reshape(moved.shape[:-1] + (self.count, self.size))
        return np.moveaxis(np.max(blocked, axis=-1, initial=0.0), -1, self.axis)

    def spread(self, per_block: np.ndarray) -> np.ndarray:
        """A per-block array (as :meth:`block_max` returns) repeated over each block's elements."""
        if self.axis is None or self.size is None:  # (None together: one block)
            return np.broadcast_to(per_block.reshape(()), self.shape).copy()
        repeated = np.repeat(per_block, self.size, axis=self.axis)
        index = [slice(None)] * repeated.ndim
        index[self.axis] = slice(0, self.length)
        return repeated[tuple(index)].reshape(self.shape)
