"""Numba loops of chop.m's rules before 2020-05-14 (``chop_at``; imported only by :mod:`.compiled`).

One element at a time, as :func:`pychop_compat.matlab.history.chop_vector_at` computes a
deterministic mode without bit flips: the exponent ``floor(log2(|x|))`` (frexp's, one larger
where NumPy's log2 rounds up to the next power of two: a table per exponent, see
:func:`pychop_compat.kernels.compiled.log2_thresholds`), chop.m's subnormal block, the scaling
and rounding to integers, then the range rules of the date.  A module of its own so that the
cache of :mod:`.numba_kernels` stays valid.  The arithmetic is float64's: every step is exact
there for float32 inputs too (scaling by powers of two, rounding to integers), and the one
inexact step, the final scaling, rounds once into the input's class, as NumPy's ldexp does.
"""

from __future__ import annotations

import math

import numba
import numpy as np
from numba import prange

from .numba_kernels import JIT_OPTIONS, INLINE_OPTIONS, bits_of_double, double_of_bits

# Indices into the integer parameters (compiled.old_rules_parameters).
T, EMIN, EMINS, MODE, LIMITS, KEEPSUB, BLOCK, BY_MODE, K_LOWEST = range(9)
# Indices into the float parameters.
XMAX, XBOUNDARY, XMINS, NAN = range(4)

_EXPONENT_MASK = np.uint64(0x7FF)
_SHIFT = np.uint64(52)


@numba.njit(**INLINE_OPTIONS)
def exponent_at(a, thresholds, k_lowest):
    """``floor(log2(a))`` as NumPy computes it in the input's class, for a finite ``a > 0``:
    frexp's exponent ``k`` (``2^k <= a < 2^(k+1)``), plus one from the table's threshold of
    ``k`` up (where NumPy's log2 rounds up to ``k + 1``)."""
    field = np.int64((bits_of_double(a) >> _SHIFT) & _EXPONENT_MASK)
    k = field - 1023 if field else math.frexp(a)[1] - 1
    return k + (a >= thresholds[k - k_lowest])


@numba.njit(**INLINE_OPTIONS)
def _times_power_of_two(v, n):
    """``v * 2^n`` rounded once (exact unless it overflows or underflows), as ldexp."""
    if -1022 <= n <= 1023:
        return v * double_of_bits(np.uint64(n + 1023) << _SHIFT)
    return math.ldexp(v, n)


@numba.njit(**INLINE_OPTIONS)
def _in_subnormal_block(e, ip):
    return ip[LIMITS] != 0 and ip[EMINS] <= e < ip[EMIN]


@numba.njit(**INLINE_OPTIONS)
def _rounded(v, e, ip, block_floor):
    """chop.m's rounding of the finite ``v != 0`` with exponent ``e``; whether it lay in the
    subnormal block (chop.m's ``pow2(roundit(pow2(x, t - 1 - e)), e - (t - 1))``)."""
    sub = _in_subnormal_block(e, ip)
    precision = ip[T] - (ip[EMIN] - e) if sub else ip[T]
    y = _times_power_of_two(v, precision - 1 - e)
    mode = ip[MODE]
    # (NumPy's functions, which return floats: math.ceil's integer would lose ceil(-0.5) = -0)
    if mode == 1:
        r = np.rint(y)
    elif mode == 2:
        r = np.ceil(y)
    elif mode == 3:
        r = np.floor(y)
    elif ip[BLOCK] != 0:  # a whole block: floor when every element of it is > 0, else ceil
        r = np.floor(y) if block_floor[1 if sub else 0] else np.ceil(y)
    else:  # (the mask rule equals trunc on the finite values it meets here)
        r = np.trunc(y)
    return _times_power_of_two(r, e - (precision - 1)), sub


@numba.njit(**INLINE_OPTIONS)
def _overflow(v, c, ip, fp):
    """The overflow rule: +-Inf at the rounding boundary in every mode, or (2020-05-13) by mode."""
    if ip[BY_MODE] == 0 or ip[MODE] == 1:
        if v >= fp[XBOUNDARY]:
            return math.inf
        if v <= -fp[XBOUNDARY]:
            return -math.inf
        return c
    mode, xmax = ip[MODE], fp[XMAX]
    if v > xmax:
        return math.inf if mode == 2 else (xmax if v != math.inf else c)
    if v < -xmax:
        return -math.inf if mode == 3 else (-xmax if v != -math.inf else c)
    return c


@numba.njit(**INLINE_OPTIONS)
def old_element(v, ip, fp, thresholds, block_floor):
    """chop.m's result for ``v`` (float64, the input's value) under the old rules."""
    if v != v:
        return v  # (NaN stays NaN, its payload kept)
    a = abs(v)
    if a == 0.0 or a == math.inf:
        c = fp[NAN]  # pow2(0, Inf) and pow2(Inf, -Inf): NaN (NumPy's own NaN of 0 * Inf)
        sub = False
    else:
        c, sub = _rounded(v, exponent_at(a, thresholds, ip[K_LOWEST]), ip, block_floor)
    if ip[LIMITS] == 0:
        return c
    if sub and ip[KEEPSUB] == 0:
        c = 0.0  # the whole subnormal block flushed
    c = _overflow(v, c, ip, fp)
    if a < fp[XMINS]:
        c = 0.0
    return c


@numba.njit(**INLINE_OPTIONS)
def _block_signs(xf, first, last, ip, thresholds):
    """Whether every element of the normal block, and of the subnormal block, of
    ``xf[first:last]`` is > 0 (the scaled values chop.m compared with 0; 0, Inf and NaN scale
    to NaN): as counts of elements that are not."""
    not_positive = np.zeros(2, np.int64)
    for i in range(first, last):
        v = np.float64(xf[i])
        a = abs(v)
        sub = False
        if 0.0 < a < math.inf:
            sub = _in_subnormal_block(exponent_at(a, thresholds, ip[K_LOWEST]), ip)
        if not (0.0 < v < math.inf):
            not_positive[1 if sub else 0] += 1
    return not_positive


@numba.njit(**JIT_OPTIONS)
def old_serial(xf, of, ip, fp, thresholds):
    """chop.m's old rules on ``xf`` into ``of`` (1-D, float32 or float64), one thread."""
    block_floor = np.ones(2, np.bool_)
    if ip[MODE] == 4 and ip[BLOCK] != 0:
        block_floor = _block_signs(xf, 0, xf.size, ip, thresholds) == 0
    for i in range(xf.size):
        of[i] = old_element(np.float64(xf[i]), ip, fp, thresholds, block_floor)


@numba.njit(parallel=True, **JIT_OPTIONS)
def old_parallel(xf, of, ip, fp, thresholds, chunk):
    """:func:`old_serial` in chunks of ``chunk`` elements on Numba's threads."""
    n = xf.size
    chunks = (n + chunk - 1) // chunk
    block_floor = np.ones(2, np.bool_)
    if ip[MODE] == 4 and ip[BLOCK] != 0:
        counts = np.zeros((chunks, 2), np.int64)
        for j in prange(chunks):
            counts[j] = _block_signs(xf, j * chunk, min(n, (j + 1) * chunk), ip, thresholds)
        block_floor = counts.sum(axis=0) == 0
    for j in prange(chunks):
        for i in range(j * chunk, min(n, (j + 1) * chunk)):
            of[i] = old_element(np.float64(xf[i]), ip, fp, thresholds, block_floor)
