"""What every module of :mod:`pychop_compat.linalg` shares: precision names, rounders, operands."""

from __future__ import annotations

from typing import Any, Mapping, Optional, Union

import numpy as np

from ..matlab.api import Chop, chop_options
from ..matlab.options import Options, resolve
from ..spec import RoundingSpec
from .arrays import Arrays

__all__ = ["OptionsLike", "METHODS", "DOUBLE_NAMES", "DOUBLE_DOUBLE_NAMES", "BINARY128_NAMES", "chop_object",
           "extended_kind", "unit_roundoff", "Rounder", "float_operands", "check_lapack_rounding",
           "safe_two_norm"]

#: What linalg accepts as precision options: chop's options, a format name, or None.
OptionsLike = Union[None, str, Mapping[str, Any], Any]

#: Summation methods of ``matmul``.
METHODS = ("recursive", "fma", "pairwise", "blocked")
#: Names of IEEE double (no rounding of double data).
DOUBLE_NAMES = ("d", "double", "fp64")
#: Residual and preconditioner precision beyond double: double-double arithmetic (about 106 bits).
DOUBLE_DOUBLE_NAMES = ("q", "quad", "quadruple", "fp128", "dd", "double-double")
#: IEEE quadruple precision, every operation rounded exactly (mpmath).
BINARY128_NAMES = ("binary128",)


def chop_object(options: OptionsLike) -> Chop:
    """A stateless :class:`~pychop_compat.matlab.api.Chop` for ``options``: anything chop accepts,
    a format name, or None for the persistent chop options as they are now."""
    if options is None:
        options = chop_options()
    elif isinstance(options, str):
        options = {"format": options}
    return Chop(options)


def extended_kind(options: OptionsLike) -> Optional[str]:
    """``'dd'`` for a double-double name, ``'binary128'`` for IEEE quadruple, else None."""
    if isinstance(options, str):
        if options in DOUBLE_DOUBLE_NAMES:
            return "dd"
        if options in BINARY128_NAMES:
            return "binary128"
    return None


def unit_roundoff(options: OptionsLike) -> float:
    """Unit roundoff ``2**-t`` of the format named by ``options`` (``2**-106`` for double-double)."""
    if extended_kind(options) == "dd":
        return 2.0**-106
    t, _ = chop_object(options).options.params or (53, 1023)  # resolved options always have params
    return 2.0 ** -int(t)


class Rounder:
    """chop with fixed options, applied to arrays of one library (on that library's engine).

    Double format with subnormals and no bit flips on double data is the identity (chop returns
    double input unchanged), so it is short-circuited.  ``options``: as :func:`chop_object` reads
    them; ``arrays``: the library of the arrays it rounds."""

    def __init__(self, options: OptionsLike, arrays: Arrays) -> None:
        self.chop = chop_object(options)
        self.options: Options = self.chop.options
        o = self.options
        #: Whether double data is left as it is.
        self.identity_for_double = o.format in DOUBLE_NAMES and o.subnormal != 0 and not o.flip
        #: Whether rounding draws no random numbers (modes 1-4, no flips).
        self.deterministic = int(o.round or 1) <= 4 and not o.flip  # resolved: round is set
        self._double = arrays.xp.float64
        self._host = arrays.name == "numpy"

    def __call__(self, x: Any) -> Any:
        if self.identity_for_double and x.dtype == self._double:
            return x
        y = self.chop(x)
        return np.asarray(y) if self._host else y

    def kernel_spec(self, dtype_name: str) -> Optional[RoundingSpec]:
        """The rounding a compiled kernel (Numba, Triton) applies for this rounder to data of
        ``dtype_name`` (``'float32'`` or ``'float64'``), or None where none may: random draws,
        no rounding at all (a compiled rounding would turn -0 into +0), rules beyond chop.m."""
        if not self.deterministic or self.identity_for_double:
            return None
        spec = resolve(self.options, None, "single" if dtype_name == "float32" else "double").spec
        return None if spec.extended else spec


def check_lapack_rounding(options: Options, what: str, given: str, advice: str = "") -> None:
    """Refuse resolved ``options`` that LAPACK's single or double routines would ignore: they round
    to nearest, keep subnormals and the format's exponent range, and flip no bits.

    Raises
    ------
    ValueError
        Naming ``what`` (the factors), ``given`` (the options as the caller passed them) and
        ``advice`` (what to use instead, or nothing).
    """
    if int(options.round or 1) != 1 or options.subnormal == 0 or options.flip or options.explim == 0:
        raise ValueError(f"{what} are LAPACK's (round to nearest, with subnormals and the format's range, "
                         f"no bit flips): {given} would be ignored{advice}")


def float_operands(arrays: Arrays, *values: Any) -> list:
    """Copies of ``values`` on ``arrays``'s device, in single when all are single, else in double.

    Raises
    ------
    ValueError
        For complex input, with chop's message (simulated arithmetic is real).
    TypeError
        For a masked array (its mask would be dropped and the hidden values computed with) and for
        ``np.longdouble`` data (rounded to double first, then to the format: two roundings), as
        ``chop`` and chopped arrays refuse them.
    """
    for v in values:
        if isinstance(v, np.ma.MaskedArray):
            raise TypeError("linalg has no masks: fill the masked array first (x.filled(value)).")
    found = [arrays.asarray(v) for v in values]
    for v in found:
        if "complex" in str(v.dtype):
            raise ValueError("Chop requires a real input array.")
        if isinstance(v, np.ndarray) and v.dtype.kind == "f" and v.dtype.itemsize > 8:
            raise TypeError(f"linalg takes float64, float32 and float16 data (and integers), not {v.dtype}; "
                            "convert it explicitly (e.g. x.astype(numpy.float64)), which rounds it.")
    single = all(v.dtype == arrays.xp.float32 for v in found)
    return [arrays.float_copy(v, single) for v in found]


def safe_two_norm(a: np.ndarray, axis: Optional[int] = None) -> Any:
    """The 2-norm of a float NumPy array in its precision: over all entries (a float; the Frobenius
    norm of a matrix) when ``axis`` is None, or of each column of a matrix (an array) when ``axis=0``.

    NumPy's ``sqrt(sum(a_ij^2))`` (``np.linalg.norm(a, axis=axis)``) where that is finite and nonzero,
    or the entries are all zero or one is Inf or NaN; else, where the squares overflow or underflow,
    as MATLAB's ``norm`` and ``vecnorm`` give it without overflow: ``s ||a / s||_2`` with ``s`` the
    power of two at or above ``max |a_ij|`` (at most the format's largest power of two), so both
    scalings are exact (but for quotients below the normal range, whose squares do not count).

    Raises
    ------
    ValueError
        For an ``axis`` other than None and 0, or ``axis=0`` with ``a`` not a matrix.
    """
    if axis is not None and (axis != 0 or a.ndim != 2):
        raise ValueError(f"axis must be None, or 0 for a matrix, got axis={axis!r} for {a.ndim} dimensions")
    plain: Any = np.linalg.norm(a, axis=axis)
    largest = np.max(np.abs(a), axis=axis) if a.size else np.zeros_like(plain)
    redo = ((plain == 0) | np.isinf(plain)) & (largest > 0) & np.isfinite(largest)
    if not np.any(redo):
        return float(plain) if axis is None else plain
    # the power of two at or above max|a_ij|; 2**maxexp itself is not a number of the format
    scale = np.ldexp(np.ones_like(largest), np.minimum(np.frexp(largest)[1], np.finfo(a.dtype).maxexp - 1))
    if axis is None:
        return float(scale * np.linalg.norm(a / scale))
    plain[redo] = scale[redo] * np.linalg.norm(a[:, redo] / scale[redo], axis=0)
    return plain
