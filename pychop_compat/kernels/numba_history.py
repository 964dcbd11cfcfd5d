"""Numba loops of chop.m's rules before 2020-05-14 (``chop_at``; imported only by :mod:`.compiled`).

What :func:`pychop_compat.matlab.history.chop_vector_at` computes for a deterministic mode
without bit flips: the exponent ``floor(log2(|x|))`` (frexp's, one larger where NumPy's log2
rounds up to the next power of two: a threshold per exponent,
:func:`pychop_compat.kernels.compiled.log2_thresholds`), chop.m's subnormal block, the scaling
and rounding to integers, then the range rules of the date.  A branch-free loop rounds each
block of elements as if every one were regular (frexp's exponent, t bits, no range rule); a
block holding others is looked at again and those are rounded one by one (:func:`_general`).
Stochastic rounding (modes 5 and 6, no flips): :func:`old_stochastic`, one element at a time,
with MATLAB's stream drawn in chop.m's order.  A module of its own so that the cache of
:mod:`.numba_kernels` stays valid.  The arithmetic
is float64's: every step is exact there for float32 inputs too (scaling by powers of two,
rounding to integers), and the one inexact step, the final scaling, rounds once into the
input's class, as NumPy's ldexp does.
"""

from __future__ import annotations

import math

import numba
import numpy as np
from numba import prange

from .numba_kernels import (INLINE_OPTIONS, JIT_OPTIONS, bits_of_double, double_of_bits, is_single,
                            lock_kernel_caches, mt_uniform)

# The constants of a call, one tuple of scalars (helpers never take arrays: an array argument
# costs reference counting on every call): compiled.round_old_rules's integer parameters, then
# its float ones.  The fast loops' range: float64 exponent fields in [LO_FIELD, LO_FIELD + SPAN),
# significands below FRACTION_BAND (where log2 cannot round up), magnitudes below OVER.
T, EMIN, EMINS, MODE, LIMITS, KEEPSUB, BLOCK, BY_MODE, K_LOWEST, LO_FIELD, SPAN, FRACTION_BAND = range(12)
XMAX, XBOUNDARY, XMINS, NAN, OVER = range(12, 17)

_EXPONENT_MASK = np.uint64(0x7FF)
_SHIFT = np.uint64(52)
_U0, _U1, _SIGN = np.uint64(0), np.uint64(1), np.uint64(1 << 63)
_QUIET = np.uint64(1 << 51)  # (a NaN's quiet bit)


@numba.njit(**INLINE_OPTIONS)
def _constants(ip, fp):
    return (ip[0], ip[1], ip[2], ip[3], ip[4], ip[5], ip[6], ip[7], ip[8], np.uint64(ip[9]), np.uint64(ip[10]),
            np.uint64(ip[11]), fp[0], fp[1], fp[2], fp[3], fp[4])


@numba.njit(**INLINE_OPTIONS)
def frexp_exponent(a):
    """``k`` with ``2^k <= a < 2^(k+1)`` for a finite ``a > 0`` (float64)."""
    field = np.int64((bits_of_double(a) >> _SHIFT) & _EXPONENT_MASK)
    return field - 1023 if field else math.frexp(a)[1] - 1


@numba.njit(**INLINE_OPTIONS)
def exponent_at(a, thresholds, k_lowest):
    """``floor(log2(a))`` as NumPy computes it in the input's class, for a finite ``a > 0``:
    frexp's exponent ``k``, plus one from the table's threshold of ``k`` up (where NumPy's
    log2 rounds up to ``k + 1``)."""
    k = frexp_exponent(a)
    return k + (a >= thresholds[k - k_lowest])


@numba.njit(**INLINE_OPTIONS)
def _times_power_of_two(v, n):
    """``v * 2^n`` rounded once (exact unless it overflows or underflows), as ldexp."""
    if -1022 <= n <= 1023:
        return v * double_of_bits(np.uint64(n + 1023) << _SHIFT)
    return math.ldexp(v, n)


@numba.njit(**INLINE_OPTIONS)
def _in_subnormal_block(e, c):
    return c[LIMITS] != 0 and c[EMINS] <= e < c[EMIN]


@numba.njit(**INLINE_OPTIONS)
def _scaled(v, e, c):
    """chop.m's scaled value ``pow2(v, precision - 1 - e)`` of the finite ``v != 0`` with
    exponent ``e``, the precision of its block and whether that is the subnormal block."""
    sub = _in_subnormal_block(e, c)
    precision = c[T] - (c[EMIN] - e) if sub else c[T]
    return _times_power_of_two(v, precision - 1 - e), precision, sub


@numba.njit(**INLINE_OPTIONS)
def _rounded(v, e, c, floor_normal, floor_sub):
    """chop.m's rounding of the finite ``v != 0`` with exponent ``e``; whether it lay in the
    subnormal block (chop.m's ``pow2(roundit(pow2(x, t - 1 - e)), e - (t - 1))``)."""
    y, precision, sub = _scaled(v, e, c)
    rounding = c[MODE]
    if rounding == 4 and c[BLOCK] != 0:  # a whole block: floor when every element of it is > 0, else ceil
        rounding = 3 if (floor_sub if sub else floor_normal) else 2
    # (the mask rule of 2020-05-01 equals trunc on the finite values it meets here)
    return _times_power_of_two(to_integer(y, rounding), e - (precision - 1)), sub


@numba.njit(**INLINE_OPTIONS)
def to_integer(y, rounding):
    """roundit's deterministic modes: 1 to nearest (ties to even), 2 up, 3 down, 4 towards zero
    (NumPy's functions, which return floats: math.ceil's integer would lose ceil(-0.5) = -0)."""
    if rounding == 1:
        return np.rint(y)
    if rounding == 2:
        return np.ceil(y)
    return np.floor(y) if rounding == 3 else np.trunc(y)


@numba.njit(**INLINE_OPTIONS)
def _overflow(v, r, c):
    """The overflow rule: +-Inf at the rounding boundary in every mode, or (2020-05-13) by mode."""
    if c[BY_MODE] == 0 or c[MODE] == 1:
        if v >= c[XBOUNDARY]:
            return math.inf
        if v <= -c[XBOUNDARY]:
            return -math.inf
        return r
    mode, xmax = c[MODE], c[XMAX]
    if v > xmax:
        return math.inf if mode == 2 else (xmax if v != math.inf else r)
    if v < -xmax:
        return -math.inf if mode == 3 else (-xmax if v != -math.inf else r)
    return r


@numba.njit(**INLINE_OPTIONS)
def _limited(v, a, r, sub, c):
    """The range rules of the date on chop.m's rounded ``r`` of ``v`` (``a = |v|``)."""
    if c[LIMITS] == 0:
        return r
    if sub and c[KEEPSUB] == 0:
        r = 0.0  # the whole subnormal block flushed
    r = _overflow(v, r, c)
    if a < c[XMINS]:
        r = 0.0
    return r


@numba.njit(**INLINE_OPTIONS)
def finite_element(v, e, c, floor_normal, floor_sub):
    """chop.m's result for the finite ``v != 0`` (float64, the input's value) of exponent ``e``
    under the old rules."""
    r, sub = _rounded(v, e, c, floor_normal, floor_sub)
    return _limited(v, abs(v), r, sub, c)


@numba.njit(**INLINE_OPTIONS)
def special_element(v, c):
    """chop.m's result for ``v`` = +-0, +-Inf or NaN under the old rules: NaN from the scaling
    (``pow2(0, Inf)``, ``pow2(Inf, -Inf)``: NumPy's own NaN of 0 * Inf), then the range rules."""
    if v != v:  # NaN stays NaN, its payload kept; a signalling one quiets, as in chop.m's arithmetic
        return double_of_bits(bits_of_double(v) | _QUIET)  # (LLVM may fold v + 0.0 to v)
    return _limited(v, abs(v), c[NAN], False, c)


@numba.njit(**INLINE_OPTIONS)
def _block_signs(xf, first, last, c, thresholds):
    """How many elements of the normal and of the subnormal block of ``xf[first:last]`` are not
    > 0 (chop.m compared the scaled values with 0; 0, Inf and NaN scale to NaN, which are in
    the normal block)."""
    not_positive = candidates = _U0
    below_emin = 2.0 ** c[EMIN]
    # On the bit patterns b (unsigned comparisons: LLVM vectorises the counts): 0 < v < Inf is
    # 1 <= b < Inf's pattern; -2^emin < v < 0 is the sign bit with a magnitude in (0, 2^emin).
    last_positive = bits_of_double(math.inf) - _U1
    first_negative = _SIGN | _U1
    negatives = bits_of_double(below_emin) - _U1
    for i in range(np.uint64(first), np.uint64(last)):
        b = bits_of_double(np.float64(xf[i]))
        not_positive += np.uint64((b - _U1) >= last_positive)
        candidates += np.uint64((b - first_negative) < negatives)  # (exponent below emin: perhaps in the block)
    sub = 0
    if candidates and c[LIMITS] != 0:
        for i in range(np.uint64(first), np.uint64(last)):
            v = np.float64(xf[i])
            if (bits_of_double(v) - first_negative) < negatives:
                sub += _in_subnormal_block(exponent_at(-v, thresholds, c[K_LOWEST]), c)
    return np.int64(not_positive) - sub, sub


@numba.njit(**INLINE_OPTIONS)
def _general(v, c, thresholds, floor_normal, floor_sub):
    """Any element: chop.m's old rules step by step."""
    a = abs(v)
    # (statements, not a conditional expression: Numba compiles that one 5 times slower)
    if 0.0 < a < math.inf:
        return finite_element(v, exponent_at(a, thresholds, c[K_LOWEST]), c, floor_normal, floor_sub)
    return special_element(v, c)


_FRACTION_MASK = np.uint64((1 << 52) - 1)
_BIAS = np.uint64(1023)


@numba.njit(**INLINE_OPTIONS)
def _outside(b, a, c):
    """Whether the element of float64 bit pattern ``b`` and magnitude ``a`` is outside the fast
    loop's range (the general path rounds it)."""
    field = (b >> _SHIFT) & _EXPONENT_MASK
    return ((field - c[LO_FIELD]) >= c[SPAN]) | ((b & _FRACTION_MASK) >= c[FRACTION_BAND]) | (a >= c[OVER])


@numba.njit(**INLINE_OPTIONS)
def _fast_block(xf, of, first, last, c, rounding):
    """Round ``first:last`` branch-free by ``rounding`` (1 nearest, 2 up, 3 down, 4 towards zero)
    as if every element had the exponent of its frexp, t bits and no range rule; how many are
    outside the range where that is chop.m's old rule (the caller rounds them again)."""
    outside = 0
    t1 = np.uint64(c[T] - 1)
    for i in range(first, last):
        v = np.float64(xf[i])
        b = bits_of_double(v)
        field = (b >> _SHIFT) & _EXPONENT_MASK
        up = double_of_bits((_BIAS + _BIAS + t1 - field) << _SHIFT)  # 2^(t - 1 - k), k = field - 1023
        down = double_of_bits((field - t1) << _SHIFT)  # 2^(k - (t - 1))
        of[i] = to_integer(v * up, rounding) * down
        outside += _outside(b, abs(v), c)
    return outside


#: Elements per block of the fast loops (a block holding other elements is looked at again).
SUB_BLOCK = 256


@numba.njit(**INLINE_OPTIONS)
def _old_range(xf, of, first, last, c, thresholds, floor_normal, floor_sub):
    rounding = c[MODE]
    if rounding == 4 and c[BLOCK] != 0:
        rounding = 4 if floor_normal else 2  # (floor of positive values, ceil of any: trunc, round up)
    for begin in range(first, last, SUB_BLOCK):
        # (unsigned indices: signed ones make Numba check for negative ones, which stops vectorising)
        low, high = np.uint64(begin), np.uint64(min(last, begin + SUB_BLOCK))
        if _fast_block(xf, of, low, high, c, rounding):
            for i in range(low, high):
                v = np.float64(xf[i])
                if _outside(bits_of_double(v), abs(v), c):
                    of[i] = _general(v, c, thresholds, floor_normal, floor_sub)


@numba.njit(**JIT_OPTIONS)
def old_serial(xf, of, ip, fp, thresholds):
    """chop.m's old rules on ``xf`` into ``of`` (1-D, float32 or float64), one thread."""
    c = _constants(ip, fp)
    floor_normal = floor_sub = True
    if c[MODE] == 4 and c[BLOCK] != 0:
        normal, sub = _block_signs(xf, 0, xf.size, c, thresholds)
        floor_normal, floor_sub = normal == 0, sub == 0
    _old_range(xf, of, 0, xf.size, c, thresholds, floor_normal, floor_sub)


@numba.njit(parallel=True, **JIT_OPTIONS)
def old_parallel(xf, of, ip, fp, thresholds, chunk):
    """:func:`old_serial` in chunks of ``chunk`` elements on Numba's threads."""
    c = _constants(ip, fp)
    n = xf.size
    chunks = (n + chunk - 1) // chunk
    floor_normal = floor_sub = True
    if c[MODE] == 4 and c[BLOCK] != 0:
        counts = np.zeros((chunks, 2), np.int64)
        for j in prange(chunks):
            counts[j, 0], counts[j, 1] = _block_signs(xf, j * chunk, min(n, (j + 1) * chunk), c, thresholds)
        floor_normal, floor_sub = counts[:, 0].sum() == 0, counts[:, 1].sum() == 0
    for j in prange(chunks):
        _old_range(xf, of, j * chunk, min(n, (j + 1) * chunk), c, thresholds, floor_normal, floor_sub)


@numba.njit(**JIT_OPTIONS)
def old_scalar(v, packed):
    """chop.m's old rules on one float64 ``v`` (a block of its own for mode 4's truncation);
    ``packed``: the integer parameters, the float ones and the thresholds in one float64 array
    (Numba's dispatcher costs about 70 ns per argument)."""
    positive = 0.0 < v < math.inf
    count = FRACTION_BAND + 1
    ip = packed[:count].astype(np.int64)
    return _general(v, _constants(ip, packed[count:OVER + 1]), packed[OVER + 1:], positive, positive)


# --- Stochastic rounding (modes 5 and 6, no flips), drawing MATLAB's stream ---------------------


@numba.njit(**INLINE_OPTIONS)
def _scaled_at(v, a, c, thresholds):
    """:func:`_scaled` of the finite ``v != 0`` (``a = |v|``) with chop.m's exponent; the exponent."""
    e = exponent_at(a, thresholds, c[K_LOWEST])
    y, precision, sub = _scaled(v, e, c)
    return y, e, precision, sub


@numba.njit(**INLINE_OPTIONS)
def _up_or_down(magnitude, low, rnd, half):
    """roundit's stochastic rounding of the non-integer ``magnitude`` (``low`` its floor) with
    the number ``rnd``: up (``low + 1``, the ceiling) when ``rnd`` is at most the fraction (mode
    5) or 1/2 (mode 6 ``half``).  Branch-free: the comparison goes either way at random."""
    return low + np.float64(rnd <= (0.5 if half else magnitude - low))


@numba.njit(**JIT_OPTIONS)
def old_stochastic(xf, of, ip, fp, thresholds, key, pos):
    """chop.m's stochastic rounding (modes 5 and 6, no flips) with its rules before 2020-05-14 on
    ``xf`` (1-D, float32 or float64, MATLAB's element order) into ``of``, drawing MATLAB's
    stream (state ``key, pos``, advanced in place) as chop.m did: one ``rand`` call for the
    elements of the normal block whose scaled value is not an integer (0, +-Inf and NaN scale
    to NaN, which draws), in order, then one for the subnormal block's (none for a block that
    draws nothing).  A counting pass, the numbers of both calls drawn at once (the stream is
    one sequence), then one pass with a cursor per block.  Returns the two counts, or ``(-1,
    -1)`` with nothing drawn or written where a result would be NaN (from 0, +-Inf or a NaN:
    the sign chop.m's ``mysign(y) .* y`` gives it in NumPy depends on NumPy's loops, so the
    caller rounds those calls step by step)."""
    c = _constants(ip, fp)
    n = xf.size
    k_normal = k_sub = 0
    # In the fast loops' range (_outside) an element is in the normal block with frexp's
    # exponent, and draws when a fraction bit below its t - 1 leading ones is set: counted
    # branch-free, a block holding others looked at again.
    below_t = (_U1 << np.uint64(53 - c[T])) - _U1
    for begin in range(0, n, SUB_BLOCK):
        low, high = np.uint64(begin), np.uint64(min(n, begin + SUB_BLOCK))
        outside = drawing = _U0
        for i in range(low, high):
            v = np.float64(xf[i])
            b = bits_of_double(v)
            other = np.uint64(_outside(b, abs(v), c))
            outside += other
            drawing += np.uint64((b & below_t) != _U0) & (other ^ _U1)
        k_normal += np.int64(drawing)
        if outside:
            for i in range(low, high):
                v = np.float64(xf[i])
                a = abs(v)
                if not _outside(bits_of_double(v), a, c):
                    continue
                if 0.0 < a < math.inf:
                    y, _, _, sub = _scaled_at(v, a, c, thresholds)
                    draws = y != np.floor(y)
                    k_sub += np.int64(draws and sub)
                    k_normal += np.int64(draws and not sub)
                else:
                    r = special_element(v, c)
                    if r != r:
                        return -1, -1  # (a NaN result: declined before drawing)
                    k_normal += 1  # (in the normal block: their exponents are outside the subnormal block's)
    numbers = mt_uniform(key, pos, k_normal + k_sub)
    if is_single(xf):  # (MATLAB compares single input's draws in single)
        for j in range(numbers.size):
            numbers[j] = np.float64(np.float32(numbers[j]))
    at_normal, at_sub = 0, k_normal  # the next number of the normal block, of the subnormal block
    half = c[MODE] == 6
    t1 = np.uint64(c[T] - 1)
    for i in range(n):
        v = np.float64(xf[i])
        b = bits_of_double(v)
        a = abs(v)
        if not _outside(b, a, c):  # (the usual element: frexp's exponent, no range rule; see _fast_block)
            field = (b >> _SHIFT) & _EXPONENT_MASK
            y = v * double_of_bits((_BIAS + _BIAS + t1 - field) << _SHIFT)
            magnitude = abs(y)
            low = np.floor(magnitude)
            if magnitude != low:
                magnitude = _up_or_down(magnitude, low, numbers[at_normal], half)
                at_normal += 1
            of[i] = math.copysign(magnitude, y) * double_of_bits((field - t1) << _SHIFT)
            continue
        if not 0.0 < a < math.inf:
            at_normal += 1
            of[i] = special_element(v, c)  # (+-0 or +-Inf: no NaN comes here)
            continue
        y, e, precision, sub = _scaled_at(v, a, c, thresholds)
        magnitude = abs(y)
        low = np.floor(magnitude)
        if magnitude != low:
            magnitude = _up_or_down(magnitude, low, numbers[at_sub if sub else at_normal], half)
            at_sub += np.int64(sub)
            at_normal += np.int64(not sub)
        r = _times_power_of_two(math.copysign(magnitude, y), e - (precision - 1))
        of[i] = _limited(v, a, r, sub, c)
    return k_normal, k_sub


lock_kernel_caches(globals())
