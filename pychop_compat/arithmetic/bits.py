"""Bit patterns of a format: :func:`encode` values, :func:`decode` codes.

The layout is IEEE 754's interchange layout for a binary format with ``t``
significand bits (hidden bit included) and largest exponent ``emax``: a sign
bit, ``w`` exponent bits with bias ``emax`` (so ``emax = 2^(w-1) - 1``) and
``t - 1`` fraction bits; exponent field 0 holds zero and the subnormal
numbers, the all-ones field Inf (fraction 0) and NaN.  This is the layout of
every chop format (``q43`` is ml_dtypes' ``float8_e4m3``, ``q52`` is
``float8_e5m2``, ``b`` bfloat16, ``h`` binary16, ``s`` binary32, ``d``
binary64) and of a custom ``[t, emax]`` whose ``emax + 1`` is a power of two.
Codes are unsigned integers of the smallest width holding ``1 + w + t - 1``
bits, in the low bits.
"""

from __future__ import annotations

from typing import Tuple, Union

import numpy as np
from numpy.typing import ArrayLike

from .array import ChoppedArray, ChoppedScalar, plain_values
from .context import Arithmetic, OptionsLike

__all__ = ["encode", "decode", "bit_layout"]


def _arithmetic(options, x=None) -> Arithmetic:
    if options is None and isinstance(x, (ChoppedArray, ChoppedScalar)):
        return x.arithmetic
    if isinstance(options, Arithmetic):
        return options
    if options is None:
        raise TypeError("give the format: encode(x, options) (x is not a chopped array)")
    return Arithmetic(options)


def bit_layout(options: Union[OptionsLike, Arithmetic]) -> Tuple[int, int, int]:
    """``(sign_bits, exponent_bits, fraction_bits)`` of a format (anything chop accepts).

    Raises
    ------
    ValueError
        When the format has no IEEE interchange layout (``emax + 1`` not a power of two).
    """
    arith = _arithmetic(options)
    t, emax = arith.t, arith.emax
    w = (emax + 1).bit_length()  # emax = 2^(w-1) - 1
    if (1 << (w - 1)) - 1 != emax:
        raise ValueError(f"{arith.describe()} has no IEEE bit layout: emax + 1 = {emax + 1} is not a "
                         "power of two.")
    if not arith.spec.fmt.has_inf:
        raise ValueError(f"{arith.describe()}: encoding without IEEE Inf/NaN is not implemented.")
    return 1, w, t - 1


def encode(x: Union[ArrayLike, ChoppedArray, ChoppedScalar],
           options: Union[OptionsLike, Arithmetic] = None) -> np.ndarray:
    """The bit patterns of values of a format.

    Parameters
    ----------
    x : array_like, ChoppedArray or ChoppedScalar
        Values representable in the format (e.g. a chopped array); nothing is
        rounded.  NaN is encoded as the quiet NaN with only the top fraction
        bit set; ``-0.0`` has the sign bit set.
    options : chop options, str or Arithmetic, optional
        The format (default: that of a chopped ``x``).

    Returns
    -------
    ndarray of unsigned integers
        The codes, shaped like ``x``: uint8 for formats of up to 8 bits,
        uint16, uint32 or uint64 above.

    Raises
    ------
    ValueError
        If a value is not representable in the format (naming the first).

    Examples
    --------
    >>> from pychop_compat.arithmetic import encode, decode
    >>> [hex(c) for c in encode([1.0, -2.0, 65504.0, float('inf')], 'h')]
    ['0x3c00', '0xc000', '0x7bff', '0x7c00']
    >>> decode(encode([0.1015625], 'q43'), 'q43')
    array([0.1015625])
    """
    arith = _arithmetic(options, x)
    _, w, f = bit_layout(arith)
    t, emax = f + 1, arith.emax
    emin = 1 - emax
    v = np.asarray(plain_values(x), dtype=np.float64)
    sign = np.signbit(v).astype(np.uint64)
    a = np.abs(v)
    mant, e = np.frexp(a)  # a = mant * 2^e, 0.5 <= mant < 1
    unbiased = e.astype(np.int64) - 1
    normal = np.isfinite(a) & (a != 0) & (unbiased >= emin)
    sub = np.isfinite(a) & (a != 0) & ~normal
    with np.errstate(all="ignore"):
        sig = np.ldexp(mant, t)  # t-bit integer significand for normal numbers
        exp_field = np.where(normal, unbiased + emax, 0)
        frac = np.where(normal, sig - 2.0 ** f, np.where(sub, np.ldexp(a, f - emin), 0.0))
    bad = (normal & ((frac != np.floor(frac)) | (exp_field > 2 * emax))) | \
          (sub & ((frac != np.floor(frac)) | (frac >= 2.0 ** f)))
    if np.any(bad):
        first = v[bad].ravel()[0]
        raise ValueError(f"{first!r} is not representable in {arith.describe()}: round it first "
                         "(e.g. chopped(x, options)).")
    top = (1 << w) - 1
    exp_field = np.where(np.isfinite(a), exp_field, top).astype(np.uint64)
    # (a 0-bit fraction has no NaN apart from Inf)
    frac_bits = np.where(np.isnan(a), 1 << (f - 1) if f else 0, np.where(np.isfinite(a), frac, 0))
    code = (sign << np.uint64(w + f)) | (exp_field << np.uint64(f)) | frac_bits.astype(np.uint64)
    code = np.where(np.isnan(a), code & ~(np.uint64(1) << np.uint64(w + f)), code)
    return code.astype(np.min_scalar_type((1 << (1 + w + f)) - 1))  # uint8, uint16, uint32 or uint64


def decode(codes: ArrayLike, options: Union[OptionsLike, Arithmetic]) -> np.ndarray:
    """The values (float64) of bit patterns of a format; the inverse of :func:`encode`.

    Parameters
    ----------
    codes : array_like of non-negative integers
        Bit patterns in the low ``1 + w + t - 1`` bits.
    options : chop options, str or Arithmetic
        The format.  Subnormal codes decode to subnormal numbers even if the
        options flush subnormals (that is what the bits mean).

    Returns
    -------
    ndarray of float64
        The values (exact: every value of a format of at most 53 bits and
        ``emax <= 1023`` is a double).

    Examples
    --------
    >>> decode([0x3c00, 0x0001, 0x7e00], 'h').tolist()
    [1.0, 5.960464477539063e-08, nan]
    """
    arith = _arithmetic(options)
    _, w, f = bit_layout(arith)
    emax = arith.emax
    c = np.asarray(codes)
    if c.dtype.kind not in "ui" or (c.size and (c.min() < 0 or int(c.max()) >> (1 + w + f))):
        raise ValueError(f"codes must be integers in [0, 2^{1 + w + f}) for {arith.describe()}")
    c = c.astype(np.uint64)
    frac = (c & np.uint64((1 << f) - 1)).astype(np.float64)
    exp_field = ((c >> np.uint64(f)) & np.uint64((1 << w) - 1)).astype(np.int64)
    negative = ((c >> np.uint64(w + f)) & np.uint64(1)).astype(bool)
    top = (1 << w) - 1
    with np.errstate(all="ignore"):
        normal = np.ldexp(frac + 2.0 ** f, exp_field - emax - f)
        subnormal = np.ldexp(frac, 1 - emax - f)
        special = np.where(frac == 0, np.inf, np.nan)
    value = np.where(exp_field == 0, subnormal, np.where(exp_field == top, special, normal))
    return np.where(negative, -value, value)
