"""Integer quantization: codes ``q = round(x / scale) + zero_point`` clipped to a ``bits``-bit range.

The quotient ``x / scale`` is rounded as exact rational arithmetic would (``exact_quotient``).
"""

from __future__ import annotations

import operator
from typing import Any, Callable, Optional, Union

import numpy as np

from ._common import HostArray, check_int, check_mode, random_sources, round_integers, shift
from .fixed import fixed_point_range

__all__ = ["int_quantize", "int_range"]

_VELTKAMP = 134217729.0  # 2^27 + 1: splits a double into two halves of at most 26 bits


def int_range(bits: int, signed: bool = True) -> tuple[int, int]:
    """The codes of a ``bits``-bit integer: ``(-2^(bits-1), 2^(bits-1) - 1)`` or ``(0, 2^bits - 1)``.

    >>> from pychop_compat.numbers import int_range
    >>> int_range(4), int_range(4, signed=False)
    ((-8, 7), (0, 15))
    """
    return fixed_point_range(check_int(bits, "bits", 2, 16), signed)


def _reduce(values: np.ndarray, axis: Optional[Union[int, tuple]], function) -> np.ndarray:
    """``function`` (max or min) over every axis but the channel axes, keeping dims (per tensor:
    all axes), with 0 as the initial value (empty input; callers include 0 in the range anyway)."""
    over: Optional[tuple] = None
    if axis is not None:
        ndim = values.ndim
        if isinstance(axis, (tuple, list)):
            axes = tuple(axis)
        else:  # any integer (np.int64 too, as check_int takes it)
            try:
                axes = (operator.index(axis),)
            except TypeError:
                raise TypeError(f"axis must be an integer or a tuple of integers, got {axis!r}.") from None
        kept = {check_int(a, "axis", -ndim, ndim - 1) % ndim for a in axes}  # 0-d: no axis, [0, -1] is empty
        over = tuple(a for a in range(ndim) if a not in kept)
    return function(values, axis=over, keepdims=True, initial=0.0)


def _exact_side(x: np.ndarray, m: np.ndarray, s_hi: np.ndarray, s_lo: np.ndarray) -> np.ndarray:
    """The sign of ``x - m * s``, exactly, for ``s = s_hi + s_lo`` in [1, 2) split into 26-bit
    halves and ``|m| < 2^20`` with at most 21 significant bits: ``m * s_hi``, ``m * s_lo`` and
    (Sterbenz, where it matters) ``x - m * s_hi`` are exact."""
    return np.sign((x - m * s_hi) - m * s_lo)


def exact_quotient(x: np.ndarray, scale: np.ndarray, low: Union[float, np.ndarray],
                   high: Union[float, np.ndarray]) -> np.ndarray:
    """``x / scale`` as a double on the same side of every integer and half-integer as the exact
    quotient, and within one ulp of it; quotients outside ``(low, high)`` are clipped to it
    (``low``, ``high``: integers bounding the codes of interest, ``|.| < 2^19``, scalars or
    arrays broadcasting with ``x``)."""
    exponent = np.frexp(scale)[1]
    s = np.ldexp(scale, -exponent + 1)  # exact: in [1, 2)
    v = shift(x, -exponent + 1)  # the same quotient; underflow replaced by a same-signed stand-in
    with np.errstate(invalid="ignore", over="ignore"):
        y = np.clip(v / s, low, high)
        inside = (y > low) & (y < high)
        if not inside.any():
            return y
        split = _VELTKAMP * s
        s_hi = split - (split - s)
        s_lo = s - s_hi
        n = np.floor(np.where(inside, y, 0.0))
        vi = np.where(inside, v, 0.0)
        # Division rounds monotonically, so floor(y) is floor(q) or one more.
        n = n - (_exact_side(vi, n, s_hi, s_lo) < 0)
        at_integer = _exact_side(vi, n, s_hi, s_lo) == 0
        half = _exact_side(vi, n + 0.5, s_hi, s_lo)
        below = np.clip(y, np.nextafter(n, np.inf), np.nextafter(n + 0.5, -np.inf))
        above = np.clip(y, np.nextafter(n + 0.5, np.inf), np.nextafter(n + 1, -np.inf))
        fixed = np.where(at_integer, n, np.where(half == 0, n + 0.5, np.where(half < 0, below, above)))
        return np.where(inside, fixed, y)


def int_quantize(x: Any, bits: int, *, signed: bool = True, symmetric: bool = True,
                 axis: Optional[Union[int, tuple[int, ...]]] = None, scale: Any = None, zero_point: Any = None,
                 round: int = 1, rng: Optional[np.random.Generator] = None,
                 randfunc: Optional[Callable[[int], Any]] = None, return_codes: bool = False) -> Any:
    """Quantize ``x`` to ``bits``-bit integers with a scale (and zero point).

    Codes ``q = clip(round(x / scale) + zero_point, qmin, qmax)`` with ``[qmin, qmax]``
    from :func:`int_range`; the dequantized values are ``(q - zero_point) * scale``.
    ``x / scale`` is rounded to an integer exactly (as exact rational arithmetic
    would), by chop's integer rounding.

    Parameters
    ----------
    x : array_like, torch.Tensor or cupy.ndarray
        Real values; never modified.  The scale is computed from the finite values.
    bits : int
        Width of the integers, 2..16.
    signed : bool
        Signed (two's complement range) or unsigned codes.
    symmetric : bool
        True: ``scale = max|x| / (2^(bits-1) - 1)``, zero point 0 (signed) or
        ``2^(bits-1)`` (unsigned).  False (affine): ``[min(x, 0), max(x, 0)]``
        maps onto ``[qmin, qmax]``, ``scale = (hi - lo) / (qmax - qmin)``,
        ``zero_point = qmin - rint(lo / scale)`` clipped to the codes.  The scale
        is the quotient rounded to nearest, except below ``2^-1022`` (subnormal),
        where it is rounded up: the nearest double there can lie far below the
        quotient (``190 * 2^-1074 / 127`` rounds to ``2^-1074``), and ``max|x| /
        scale`` would pass the codes.  So a subnormal scale keeps ``max|x| /
        scale <= 2^(bits-1) - 1`` (affine: ``(hi - lo) / scale <= qmax - qmin``),
        and a non-zero range whose quotient is below ``2^-1074`` gets ``2^-1074``.
        A zero range gives scale 1.
    axis : int or tuple of int, optional
        Per-channel: one scale (and zero point) per index along these axes,
        computed over the others.  None (default): one for the whole tensor.
    scale : float or array_like, optional
        Given scale(s) (positive, finite; broadcastable against ``x``).
    zero_point : int or array_like, optional
        Given zero point(s); default as above (with a given scale, an asymmetric
        quantizer computes it from the data).
    round, rng, randfunc : optional
        Rounding of ``x / scale`` and its random numbers, as for :func:`~pychop_compat.fixed_point`.
    return_codes : bool
        Return ``(codes, scale, zero_point)`` (int64 codes, float64 scales, int64 zero
        points, shaped to broadcast against ``x``) instead of the dequantized values.

    Returns
    -------
    same type as ``x``, or a tuple
        Dequantized values, computed in float64, given back in the dtype (integer
        input: float64), shape and device of ``x``; NaN stays NaN and +-Inf clip
        to the end codes.  ``(q - zero_point) * scale`` is rounded to double, so a
        directed mode can move a code by one when re-quantizing the result.

    Notes
    -----
    The dequantized values are computed in float64 and then cast to the dtype of ``x``,
    which rounds them where that dtype cannot hold them: a finite input can give +-Inf.
    ``int_quantize(np.float16([65504, -65504]), 8, symmetric=False)`` gives
    ``[65248, -inf]``: the scale is 131008 / 255 and the zero point 0, so the code
    -128 reads -65760.88, beyond float16.  Pass float64 input (or ask for the codes)
    where this matters.

    Examples
    --------
    >>> int_quantize([-1.0, 0.1, 0.5, 1.0], bits=4)
    array([-1.        ,  0.14285714,  0.57142857,  1.        ])
    >>> codes, scale, zp = int_quantize([0.0, 1.0, 3.0], bits=2, signed=False, symmetric=False,
    ...                                 return_codes=True)
    >>> codes.tolist(), scale.tolist(), zp.tolist()
    ([0, 1, 3], [1.0], [0])
    """
    qmin, qmax = int_range(bits, bool(signed))
    mode = check_mode(round)
    host = HostArray(x)
    values = host.values
    finite = np.where(np.isfinite(values), values, 0.0)
    if scale is None:
        count = float((1 << (bits - 1)) - 1) if symmetric else float(qmax - qmin)  # the scale's divisor
        if symmetric:
            spread = _reduce(np.abs(finite), axis, np.max)
            s = spread / count
        else:
            lo = np.minimum(_reduce(finite, axis, np.min), 0.0)
            hi = np.maximum(_reduce(finite, axis, np.max), 0.0)
            with np.errstate(over="ignore"):
                spread = hi - lo
                s = spread / count
            # hi - lo beyond the doubles: the same rounded quotient from the halves (exact scalings).
            s = np.where(np.isinf(s), 2.0 * ((hi / 2 - lo / 2) / count), s)
        # Below 2^-1022 the quotient is rounded on the subnormals' fixed grid (relative error up to 1/2,
        # not 2^-53): rounded down, spread / scale could pass the codes by half their span, clipping the
        # largest values (190 * 2^-1074 at 8 bits: scale 2^-1074, code 190 clipped to 127).  There the
        # next double up (2^-1074 for 0) is taken, at or above the exact quotient; normal scales stay.
        coarse = (s < 2.0 ** -1022) & (spread > 0)
        if coarse.any():
            s = np.where(coarse, np.maximum(s, 2.0 ** -1074), s)
            ratio = exact_quotient(np.where(coarse, spread, 0.0), np.where(coarse, s, 1.0), count - 1, count + 1)
            s = np.where(coarse & (ratio > count), np.nextafter(s, np.inf), s)
        s = np.where(s > 0, s, 1.0)
    else:
        s = np.asarray(scale, dtype=np.float64)
        if not (np.isfinite(s).all() and (s > 0).all()):
            raise ValueError(f"scale must be positive and finite, got {scale!r}.")
    if zero_point is not None:
        zp = np.asarray(zero_point)
        if zp.dtype.kind not in "iu" or (zp < qmin).any() or (zp > qmax).any():
            raise ValueError(f"zero_point must be integers in [{qmin}, {qmax}], got {zero_point!r}.")
        zp = zp.astype(np.float64)
    elif symmetric:
        zp = np.zeros_like(s) if signed else np.full_like(s, float(1 << (bits - 1)))
    else:
        lo = np.minimum(_reduce(finite, axis, np.min), 0.0)
        # rint of the exactly-sided quotient: the zero point of exact arithmetic (ties to even).
        zp = np.clip(qmin - np.rint(exact_quotient(lo, s, -2.0 ** 19, 2.0 ** 19)), qmin, qmax)
    s, zp = np.broadcast_arrays(s, zp)
    s_full = np.broadcast_to(s, values.shape)
    zp_full = np.broadcast_to(zp, values.shape)
    # Quotients beyond the codes by more than one are clipped first: they clip in the end anyway.
    low, high = float(qmin) - zp_full - 2, float(qmax) - zp_full + 2
    y = exact_quotient(values, s_full, low, high)
    if mode in (5, 6):
        # chop draws a number for each quotient that is not an integer (and for +-Inf), in column-major
        # order, also where the code clips: a clipped one gets a fraction beyond the window (either
        # rounding still clips).  fmod is exact, so x is a multiple of the scale iff it gives 0.
        with np.errstate(invalid="ignore"):
            drawing = ((y <= low) | (y >= high)) & (np.fmod(values, s_full) != 0)  # Inf: fmod is NaN
        y = np.where(drawing, y + np.where(y <= low, -0.5, 0.5), y)
    codes = np.clip(round_integers(y, mode, random_sources(rng, randfunc)) + zp_full, qmin, qmax)
    if return_codes:
        return host.give_back_codes(codes), host.give_back_float64(np.array(s)), \
            host.give_back_codes(np.array(zp))
    return host.give_back((codes - zp_full) * s_full)
