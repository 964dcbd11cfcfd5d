"""Numba kernels of the compiled CPU engine (imported only by :mod:`.compiled`, on first use).

One pass over memory: a *regular* element (exponent field in ``[LO, HI)``) is
rounded by integer arithmetic on its bit pattern, as in :mod:`.numpy_fast`;
the others by :func:`_general` (chop.m's scaling in float64, its range rules,
the format's encoding).  Stochastic rounding also takes carrier-normal
elements below xmin by bit rules (:func:`_small_shift`).  Constants come as
arrays ``ip``, ``up``, ``fp`` from :mod:`.compiled`; float32 patterns are
widened to uint64.  No fastmath (it would break exact rounding).
"""

from __future__ import annotations

import contextlib
import math
import os
from collections.abc import Iterator
from typing import Any

import numba
import numpy as np
from numba import prange, types
from numba.core.caching import FunctionCache
from numba.core.dispatcher import Dispatcher
from numba.extending import intrinsic, overload

from . import numpy_fast
from ..random.counter import GOLDEN, MIX1, MIX2

# Indices into the tuple of constants (:func:`constants`).  Helpers take scalars and this tuple,
# never arrays: an array argument costs reference counting on every call.
MODE, T, EMIN, EMINS, EXPLIM, KEEPSUB, D0, P, WIDTH = range(9)
LO, HI, INF, SIGN, MAG, LOW0, KEEP0, HALFM1, UNIT0 = range(9, 18)
XMAX, XBOUNDARY, MIN_REP, PFLIP, FRAC_SCALE = range(18, 23)
# The encoding's 1/0 switches (compiled._encoding) and xboundary in the input's class.
TIE_TO_XMAX, SATURATE, INF_TO_NAN, NO_NEGATIVE_ZERO, FLIP_NAN, ENCODES, XBOUNDARY_CLASS = range(23, 30)

_U0 = np.uint64(0)
_U1 = np.uint64(1)
_G, _M1, _M2 = np.uint64(GOLDEN), np.uint64(MIX1), np.uint64(MIX2)
_S30, _S27, _S31, _S12 = np.uint64(30), np.uint64(27), np.uint64(31), np.uint64(12)
_ONE_EXPONENT = np.uint64(0x3FF0000000000000)  # the bits of 1.0

#: Numba's options for every kernel of the package: cached, GIL released, NumPy's error model.
JIT_OPTIONS: dict[str, Any] = dict(cache=True, nogil=True, error_model="numpy")
#: The same, inlined (small helpers on the hot path; the rare general path stays a plain call).
INLINE_OPTIONS: dict[str, Any] = dict(JIT_OPTIONS, inline="always")


@contextlib.contextmanager
def _cache_directory_locked(directory: str) -> Iterator[None]:
    """An exclusive lock on ``directory`` shared by every process (POSIX ``flock``; where there is
    none, or the lock file cannot be made, no lock: Numba's own behaviour)."""
    try:
        import fcntl

        os.makedirs(directory, exist_ok=True)
        handle = open(os.path.join(directory, "pychop_compat.lock"), "a")
    except (ImportError, OSError):
        yield
        return
    with handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


class _LockedFunctionCache(FunctionCache):
    """Numba's on-disk cache of one kernel, each save made under a lock of the cache directory."""

    def save_overload(self, sig: Any, data: Any) -> None:
        with _cache_directory_locked(self.cache_path):
            super().save_overload(sig, data)


def lock_kernel_caches(namespace: dict[str, Any]) -> None:
    """Make the on-disk cache of every kernel in ``namespace`` safe for processes compiling at once.

    Numba saves a new compilation by reading the function's index, numbering a file one past the
    numbers it read, and writing the index back: two processes that compile the same kernel for
    different signatures at once (a process pool on a fresh install, pytest-xdist's workers) can
    write both under one number, and a later load unboxes the wrong code ("can't unbox array from
    PyObject", seen in this package's CI; numba/numba#10128 reports the same race and proposes a
    file lock).  Each save here holds a lock of the cache directory, so the read, the numbering and
    the writes are one step; loads need none (Numba replaces files atomically, and an index entry
    whose file is not written yet reads as a miss).  Each module of kernels calls this on its
    globals once, after defining them and before anything compiles.

    Parameters
    ----------
    namespace : dict
        A module's globals; its Numba dispatchers with Numba's plain function cache get the locked one.
    """
    for value in namespace.values():
        # Numba keeps a dispatcher's cache in its attribute ``_cache`` (set by ``enable_caching``).
        # The same object, of the subclass that only adds the lock: building a new one would run
        # Numba's cache locator again for every kernel (23 ms of import for the 160 kernels).
        cache = getattr(value, "_cache", None)
        if isinstance(value, Dispatcher) and type(cache) is FunctionCache:
            cache.__class__ = _LockedFunctionCache


@numba.njit(**INLINE_OPTIONS)
def constants(ip, up, fp):
    """The constants of a rounding as one tuple of scalars (indices MODE ... XBOUNDARY_CLASS)."""
    return (ip[0], ip[1], ip[2], ip[3], ip[4], ip[5], ip[6], ip[7], ip[8],
            up[0], up[1], up[2], up[3], up[4], up[5], up[6], up[7], up[8],
            fp[0], fp[1], fp[2], fp[3], fp[4],
            ip[9], ip[10], ip[11], ip[12], ip[13], ip[14], fp[5])


# --- a float64's bit pattern and back (LLVM bitcasts; Numba has no scalar view) --------------------

def _bitcast(source: Any, target: Any, name: str) -> Any:
    def cast(typingctx, x):
        if x != source:
            return None

        def codegen(context, builder, signature, args):
            return builder.bitcast(args[0], context.get_value_type(target))

        return target(source), codegen

    cast.__name__ = cast.__qualname__ = name
    return intrinsic(cast)


#: The uint64 bit pattern of a float64, and back.
bits_of_double = _bitcast(types.float64, types.uint64, "bits_of_double")
double_of_bits = _bitcast(types.uint64, types.float64, "double_of_bits")


@numba.njit(**INLINE_OPTIONS)
def counter_uniform(key, j):
    """``((mix(key + j G) >> 12) + 1/2) 2^-52`` (uint64 arithmetic wraps modulo 2**64).

    The 52 bits become the fraction of a double in [1, 2); subtracting 1 is exact (Sterbenz), and so
    is adding 2^-53 (the result has 53 bits): the same number as from ``float(z >> 12)``, without
    x86's branchy conversion of an unsigned 64-bit integer, which kept the loops from vectorising
    (the counter's loop at n = 1000 took 1.5x to 2x as long: benchmarks/bench_small_calls.py)."""
    z = key + j * _G
    z = (z ^ (z >> _S30)) * _M1
    z = (z ^ (z >> _S27)) * _M2
    z = z ^ (z >> _S31)
    return (double_of_bits((z >> _S12) | _ONE_EXPONENT) - 1.0) + 2.0**-53


# --- one element --------------------------------------------------------------------------------

@numba.njit(**INLINE_OPTIONS)
def _exponent(v):
    """frexp's exponent minus one (x = 2^e * 1.f); -1 for zero, Inf and NaN, like NumPy's frexp."""
    if v == 0.0 or not math.isfinite(v):
        return -1
    return math.frexp(v)[1] - 1


@numba.njit(**INLINE_OPTIONS)
def _quantum(e, k):
    """The exponent of the grid spacing of an element of exponent ``e``, and whether it is in
    chop's subnormal block."""
    if k[EXPLIM] != 0 and k[EMINS] <= e < k[EMIN]:
        return k[EMINS], True
    return e - k[T] + 1, False


@numba.njit(**INLINE_OPTIONS)
def _to_class(c, single):
    """A float64 value as the input's class (float32 rounding for single, as NumPy's stores)."""
    if single:
        return np.float64(np.float32(c))
    return c


#: chop.m's overflow and underflow rules (explim = 1): the NumPy engine's, compiled.
_limit_value = numba.njit(**JIT_OPTIONS)(numpy_fast.limit_value)


@numba.njit(**JIT_OPTIONS)
def _encode(c, v, k):
    """The format's encoding on chop.m's result ``c`` of the input ``v`` (explim = 1), as
    :func:`pychop_compat.rules.cpfloat.apply_encoding` does it."""
    if k[FLIP_NAN] != 0 and math.isfinite(c) and abs(c) > k[XMAX]:
        return math.nan
    if math.isinf(c):
        if k[TIE_TO_XMAX] != 0 and abs(v) == k[XBOUNDARY_CLASS]:
            return math.copysign(k[XMAX], v)
        if k[SATURATE] != 0:
            return math.copysign(k[XMAX], c)
        if k[INF_TO_NAN] != 0:
            return math.nan
    elif c == 0.0 and k[NO_NEGATIVE_ZERO] != 0:
        return 0.0  # (a guard: chop.m's underflow rule already gives +0, never -0)
    return c


@numba.njit(**JIT_OPTIONS)
def e8m0_rules(xf, of, xmin):
    """E8M0's zero and sign rules on chop's results ``of`` of the inputs ``xf`` (in place): NaN
    where the input is not positive, ``xmin`` where a positive input gave 0, as
    :func:`pychop_compat.rules.cpfloat.apply_encoding` (a loop LLVM vectorises)."""
    smallest = of.dtype.type(xmin)
    nan = of.dtype.type(math.nan)
    for i in range(np.uint64(0), np.uint64(xf.size)):
        positive = xf[i] > 0
        c = of[i]
        of[i] = (smallest if c == 0 else c) if positive else nan


@numba.njit(**JIT_OPTIONS)
def _needs_draw(v, k):
    """``(subnormal block, draws)``: chop.m's block of ``v`` and whether its scaled value is
    not an integer (Inf and NaN too: their fraction inf - inf is NaN)."""
    e = _exponent(v)
    quantum, sub = _quantum(e, k)
    if not math.isfinite(v):
        return sub, True
    y = math.ldexp(v, -quantum)
    return sub, y != math.floor(y)


@numba.njit(**JIT_OPTIONS)
def _general(v, k, single, rnd, plus_zero, flip_shift):
    """chop of one value (float64 holding the input), any mode, as float64.  ``rnd``: its number;
    ``plus_zero``: a zero comes back +0 (its block drew); ``flip_shift``: flip bit ``flip_shift +
    1`` of the rounded integer (-1: none)."""
    mode = k[MODE]
    e = _exponent(v)
    quantum, sub = _quantum(e, k)
    y = math.ldexp(v, -quantum)  # exact: |y| < 2^t
    if y == 0.0 or not math.isfinite(y):
        r = y
        if y == 0.0 and plus_zero and mode >= 5:
            r = 0.0
    elif mode == 1:
        r = np.rint(y)
    elif mode == 2:
        r = np.ceil(y)
    elif mode == 3:
        r = np.floor(y)
    elif mode == 4:
        r = np.trunc(y)
    else:
        magnitude = abs(y)
        low = np.floor(magnitude)
        frac = magnitude - low
        if frac == 0.0:
            r = y
        else:
            threshold = frac if mode == 5 else 0.5
            r = math.copysign(low + 1.0 if rnd <= threshold else low, y)
    c = _to_class(math.ldexp(r, quantum), single)
    if flip_shift >= 0 and math.isfinite(c):
        z = math.ldexp(c, -quantum)
        magnitude_bits = np.int64(abs(z)) ^ (np.int64(1) << flip_shift)
        sign = -1.0 if z < 0 else 1.0  # chop.m's sign(z) + (z == 0)
        z = _to_class(sign * np.float64(magnitude_bits), single)
        c = _to_class(math.ldexp(z, quantum), single)
    if k[EXPLIM] != 0:
        c = _to_class(_limit_value(c, v, mode, k[XMAX], k[XBOUNDARY], k[MIN_REP], k[KEEPSUB] != 0), single)
        if k[ENCODES] != 0:  # only here: the bit-pattern loops never give Inf, -0 or beyond xmax
            c = _to_class(_encode(c, v, k), single)
    return c


@numba.njit(**INLINE_OPTIONS)
def _is_regular(b, k):
    field = (b & k[MAG]) & k[INF]
    return field >= k[LO] and field < k[HI]


@numba.njit(**INLINE_OPTIONS)
def _regular_bits(b, k):
    """Deterministic rounding of a regular element's bit pattern (modes 1-4)."""
    d0 = k[D0]
    if d0 == 0:
        return b
    mode = k[MODE]
    if mode == 1:
        if d0 == k[P] - 1:  # t = 1: the kept integer is the hidden bit, odd: ties go up
            return (b + k[HALFM1] + _U1) & k[KEEP0]
        return (b + ((b >> np.uint64(d0)) & _U1) + k[HALFM1]) & k[KEEP0]
    negative = (b & k[SIGN]) != _U0
    if mode == 2:
        return ((b + k[LOW0]) & k[KEEP0]) if not negative else (b & k[KEEP0])
    if mode == 3:
        return ((b + k[LOW0]) & k[KEEP0]) if negative else (b & k[KEEP0])
    return b & k[KEEP0]


@numba.njit(**INLINE_OPTIONS)
def _regular_stochastic(b, k, rnd):
    """Stochastic rounding (modes 5, 6) of a regular element's bit pattern (branch-free)."""
    low = b & k[LOW0]
    if low == _U0:
        threshold = -1.0  # nothing dropped: never up
    elif k[MODE] == 5:
        # low 2^-52 as the fraction of a double in [1, 2) less 1, then scaled by a power of two:
        # exact (low < 2^52), and unlike an integer's conversion it vectorises on x86 without AVX-512
        threshold = (double_of_bits(low | _ONE_EXPONENT) - 1.0) * (k[FRAC_SCALE] * 2.0**52)
    else:
        threshold = 0.5
    return (b & k[KEEP0]) + (k[UNIT0] if rnd <= threshold else _U0)


@numba.njit(**INLINE_OPTIONS)
def _small_shift(b, k):
    """``(d, sub)`` for a carrier-normal element below xmin (explim = 1): ``d0`` bits dropped on
    its own binade's grid, or ``p - t + emin - e`` (at least 0) in chop.m's subnormal block (``sub``); ``d = -1``
    for every other element (or a min_rep not normal in the carrier): the general path's."""
    bias = (np.int64(1) << (k[WIDTH] - k[P] - 1)) - 1
    e_field = np.int64((b & k[MAG]) >> np.uint64(k[P] - 1))
    e_min = k[EMIN] + bias
    e_rep = (k[EMINS] if k[KEEPSUB] != 0 else k[EMIN]) + bias
    if k[EXPLIM] == 0 or e_field < 1 or e_field >= e_min or e_rep < 1:
        return -1, False
    if e_field >= k[EMINS] + bias:
        # the block's grid is 2^emins: p - t (not d0, which is 0 for t > p) + emin - e bits, none if < 0
        d = max(k[P] - k[T] + e_min - e_field, 0)
        return (d, True) if d <= k[P] - 1 else (-1, False)
    return k[D0], False


@numba.njit(**INLINE_OPTIONS)
def _small_stochastic(b, k, d, rnd):
    """Stochastic rounding of an element of :func:`_small_shift` (``d >= 0``), then chop.m's
    underflow rule (+0 below min_rep).  Branch-free, so that the loops calling it vectorise."""
    shift = np.uint64(d)
    magnitude = b & k[MAG]
    low = magnitude & ((_U1 << shift) - _U1)
    scale = double_of_bits(np.uint64(1023 - d) << np.uint64(52))  # 2^-d
    threshold = np.float64(np.int64(low)) * scale if k[MODE] == 5 else 0.5  # exact: below 2^52
    up_ = np.uint64(low != _U0) & np.uint64(rnd <= threshold)
    rounded = (magnitude ^ low) + (up_ << shift)
    bias = (np.int64(1) << (k[WIDTH] - k[P] - 1)) - 1
    rep_bits = np.uint64((k[EMINS] if k[KEEPSUB] != 0 else k[EMIN]) + bias) << np.uint64(k[P] - 1)
    kept = _U0 - np.uint64(rounded >= rep_bits)  # all ones, or 0: +0
    return ((b & k[SIGN]) | rounded) & kept


@numba.njit(**INLINE_OPTIONS)
def _bit_rule_stochastic(b, k, rnd):
    """``(True, bits)`` by the bit rules of a regular or small element; ``(False, 0)`` for the
    general path."""
    if _is_regular(b, k):
        return True, _regular_stochastic(b, k, rnd)
    d, _ = _small_shift(b, k)
    if d >= 0:
        return True, _small_stochastic(b, k, d, rnd)
    return False, _U0


@numba.njit(**INLINE_OPTIONS)
def _wide_limits(k):
    """``(lo, span, wide)``: the magnitudes ``[lo, lo + span)`` that the stochastic loops round by
    bit rules; ``wide`` when all carrier-normal ones below the regular range are
    :func:`_small_shift`'s (then ``lo`` is the carrier's smallest normal)."""
    bias = (np.int64(1) << (k[WIDTH] - k[P] - 1)) - 1
    e_min = k[EMIN] + bias
    e_rep = (k[EMINS] if k[KEEPSUB] != 0 else k[EMIN]) + bias
    if k[EXPLIM] != 0 and e_min >= 1 and e_rep >= 1 and k[T] <= k[P]:
        lo = _U1 << np.uint64(k[P] - 1)
        return lo, k[HI] - lo, True
    return k[LO], k[HI] - k[LO], False


@numba.njit(**INLINE_OPTIONS)
def _wide_shift(b, k):
    """``(d, sub)`` of :func:`_small_shift` in :func:`_wide_limits`'s range (``d0``: regular)."""
    bias = (np.int64(1) << (k[WIDTH] - k[P] - 1)) - 1
    e_field = np.int64((b & k[MAG]) >> np.uint64(k[P] - 1))
    e_min = k[EMIN] + bias
    sub = (e_field >= k[EMINS] + bias) & (e_field < e_min)  # (no branch: a select)
    return k[D0] + np.int64(sub) * (e_min - e_field), sub


@numba.njit(**INLINE_OPTIONS)
def _count_outside(xu, first, last, lo, span, mag):
    """How many magnitudes of ``first:last`` are outside ``[lo, lo + span)``."""
    outside = 0
    for i in range(first, last):
        outside += ((np.uint64(xu[i]) & mag) - lo) >= span
    return outside


@numba.njit(**INLINE_OPTIONS)
def _small_draws(b, k, d):
    """Whether an element of :func:`_small_shift` draws a number (a nonzero dropped part)."""
    return (b & k[MAG] & ((_U1 << np.uint64(d)) - _U1)) != _U0


@numba.njit(**INLINE_OPTIONS)
def _count_specials(xu, first, last, k):
    """How many elements of ``first:last`` are not regular (a vectorisable loop)."""
    return _count_outside(xu, first, last, k[LO], k[HI] - k[LO], k[INF])


# --- deterministic modes --------------------------------------------------------------------------

#: Elements per sub-block: a sub-block with a special element is gone over again from L1.
SUB_BLOCK = 256


@numba.njit(**JIT_OPTIONS)
def _fix_specials(xf, xu, of, first, last, k, single, lo, span, mag):
    """The general path for the elements of ``first:last`` outside the loop's range."""
    for i in range(np.uint64(first), np.uint64(last)):
        if ((np.uint64(xu[i]) & mag) - lo) >= span:
            of[i] = _general(np.float64(xf[i]), k, single, 2.0, False, -1)


@numba.njit(**INLINE_OPTIONS)
def _det_constants(rp):
    """The deterministic loop's constants (``rp[5:]``, see :func:`det_serial`) as a tuple."""
    return (np.int64(rp[5]), np.int64(rp[6]), np.int64(rp[7]), rp[8], rp[9], rp[10], rp[11], rp[12],
            rp[13], rp[14], rp[15], rp[16], rp[17])


@numba.njit(**INLINE_OPTIONS)
def _det_block(xu, ou, first, last, c, mode):
    """Round ``first:last`` branch-free (one loop per mode); how many are outside the loops' range
    (the caller rounds them again)."""
    d0, dtop, dmax, lo, hidden, full, mag, pshift, top, small_lo, span, threshold, min_rep = c
    special = 0
    if mode == 1:
        for i in range(first, last):
            b = np.uint64(xu[i])
            m = b & mag
            shift = np.uint64(min(max(d0, dtop - np.int64(m >> pshift)), dmax))
            low = (_U1 << shift) - _U1
            tie = ((b | hidden) >> shift) & low & _U1  # the last kept bit (the hidden bit when d = p - 1)
            rounded = (b + (low >> _U1) + tie) & (full ^ low)
            below = ((b ^ m) | min_rep) if m > threshold else _U0
            ou[i] = rounded if m >= lo else below
            special += (m - small_lo) >= span
    elif mode == 4:
        for i in range(first, last):
            b = np.uint64(xu[i])
            m = b & mag
            shift = np.uint64(min(max(d0, dtop - np.int64(m >> pshift)), dmax))
            rounded = b & (full ^ ((_U1 << shift) - _U1))
            ou[i] = rounded if m >= lo else _U0
            special += (m - small_lo) >= span
    else:  # towards +inf (2) adds low to a positive value, towards -inf (3) to a negative one
        up = _U1 if mode == 2 else _U0
        for i in range(first, last):
            b = np.uint64(xu[i])
            m = b & mag
            shift = np.uint64(min(max(d0, dtop - np.int64(m >> pshift)), dmax))
            low = (_U1 << shift) - _U1
            away = _U0 - ((b >> top) ^ up)  # all ones when the sign bit differs from up
            rounded = (b + (low & away)) & (full ^ low)
            below = ((b ^ m) | min_rep) if (m > threshold) & (away != _U0) else _U0
            ou[i] = rounded if m >= lo else below
            special += (m - small_lo) >= span
    return special


# The deterministic loops.  An element of exponent field E drops d = min(max(d0, DTOP - E), p - 1)
# bits (more in chop.m's subnormal block) and rounds as (b + add) & ~low, low = 2^d - 1; below LO
# chop.m's underflow rule gives min_rep or +0 (compiled._small_rule).  Elements outside
# [SMALL_LO, SMALL_LO + SPAN) are rounded again by the general path.  Unsigned indices: signed
# ones make Numba check for negative indices, which stops LLVM from vectorising (5x slower).

@numba.njit(**INLINE_OPTIONS)
def _det_range(xf, xu, of, ou, start, stop, k, c, single):
    for begin in range(start, stop, SUB_BLOCK):
        first, last = np.uint64(begin), np.uint64(min(stop, begin + SUB_BLOCK))
        if _det_block(xu, ou, first, last, c, k[MODE]):
            _fix_specials(xf, xu, of, first, last, k, single, c[9], c[10], c[6])


@numba.njit(**JIT_OPTIONS)
def det_serial(xf, xu, of, ou, ip, up, fp, rp, single):
    _det_range(xf, xu, of, ou, 0, xf.size, constants(ip, up, fp), _det_constants(rp), single)


@numba.njit(parallel=True, **JIT_OPTIONS)
def det_parallel(xf, xu, of, ou, ip, up, fp, rp, single, chunk):
    k = constants(ip, up, fp)
    c = _det_constants(rp)
    n = xf.size
    for chunk_index in prange((n + chunk - 1) // chunk):
        _det_range(xf, xu, of, ou, chunk_index * chunk, min(n, (chunk_index + 1) * chunk), k, c, single)


# --- small calls: the serial loops with their constants packed in one array ------------------------
# Numba's dispatcher costs about 70 ns per argument, as much as rounding 10 elements: a small call
# passes the values, the result and one array of constants (ip, up, fp and rp as words, in that
# order: compiled.packed_constants), and the bit views are made here (Numba compiles one version
# per input class: a view's dtype is fixed when it compiles).


def bit_view(x):
    """``x``'s bit patterns: a uint32 view of float32 values, a uint64 view of float64 ones."""
    return x.view(np.uint32 if x.dtype == np.float32 else np.uint64)


@overload(bit_view, inline="always")
def _bit_view_compiled(x):
    unsigned = np.uint32 if x.dtype == types.float32 else np.uint64
    return lambda x: x.view(unsigned)


def is_single(x):
    """Whether ``x`` holds float32 values (a constant where Numba compiles)."""
    return x.dtype == np.float32


@overload(is_single, inline="always")
def _is_single_compiled(x):
    single = x.dtype == types.float32
    return lambda x: single


@numba.njit(**INLINE_OPTIONS)
def _unpacked(packed):
    """``(constants(ip, up, fp), rp)`` of a packed array of 48 words."""
    return constants(packed[:15].view(np.int64), packed[15:24], packed[24:30].view(np.float64)), packed[30:48]


@numba.njit(**JIT_OPTIONS)
def det_small(xf, of, packed):
    """:func:`det_serial` on a float64 or float32 vector, constants packed."""
    k, rp = _unpacked(packed)
    _det_range(xf, bit_view(xf), of, bit_view(of), 0, xf.size, k, _det_constants(rp), is_single(xf))


@numba.njit(**JIT_OPTIONS)
def det_combined(code, a, b, of, packed):
    """:func:`det_small` of ``a + b``, ``a - b``, ``a * b`` or ``a / b`` (``code`` 0 to 3, each
    computed in the vectors' class as NumPy's ufunc computes it): a chopped-array operation on a
    small array in one call instead of two.  Returns False, ``of`` unfinished, as soon as one
    result may raise a floating-point flag that NumPy reports (``np.errstate``): Inf or NaN
    (overflow, division by zero, invalid), or a product or quotient of nonzero operands below the
    smallest normal number (underflow; a sum or difference below it is exact); the caller then
    computes that operation with NumPy's ufunc."""
    computed = np.empty_like(a)
    tiny = 1.1754943508222875e-38 if is_single(a) else 2.2250738585072014e-308  # the smallest normal
    for i in range(a.size):
        if code == 0:
            r = a[i] + b[i]
        elif code == 1:
            r = a[i] - b[i]
        elif code == 2:
            r = a[i] * b[i]
        else:
            r = a[i] / b[i]
        if not math.isfinite(r) or (code >= 2 and abs(r) < tiny and a[i] != 0 and b[i] != 0):
            return False
        computed[i] = r
    k, rp = _unpacked(packed)
    _det_range(computed, bit_view(computed), of, bit_view(of), 0, computed.size, k, _det_constants(rp),
               is_single(computed))
    return True


# --- the counter-based generator: each element its own numbers ------------------------------------
# A branch-free loop per sub-block, a plain call for one holding other elements.  ``given``: the
# numbers given per element, or None for the counter's (a specialisation of its own).


@numba.njit(**INLINE_OPTIONS)
def _round_number(given, k0, j, i):
    """Element ``i``'s stochastic number: ``u_ROUND(j)`` of the counter, or ``given[i]``."""
    if given is None:
        return counter_uniform(k0, j)
    return given[i]


@numba.njit(**JIT_OPTIONS)
def _counter_general(xf, xu, of, ou, first, last, k, single, k0, k1, k2, offset, every, given):
    """The general path for the irregular elements of ``first:last`` (all when ``every``: flips);
    without ``every`` the small elements take their bit rule."""
    mode = k[MODE]
    for i in range(np.uint64(first), np.uint64(last)):
        b = np.uint64(xu[i])
        if not every and _is_regular(b, k):
            continue
        j = offset + i
        rnd = 2.0
        if mode >= 5:
            rnd = _to_class(_round_number(given, k0, j, i), single)  # compared in the input's class
            if not every:
                d, _ = _small_shift(b, k)
                if d >= 0:
                    ou[i] = _small_stochastic(b, k, d, rnd)
                    continue
        shift = -1
        if k[PFLIP] >= 0.0 and counter_uniform(k1, j) <= k[PFLIP]:
            shift = np.int64(math.floor((k[T] - 1) * counter_uniform(k2, j)))
        of[i] = _general(np.float64(xf[i]), k, single, rnd, True, shift)


@numba.njit(**INLINE_OPTIONS)
def _counter_range(xf, xu, of, ou, start, stop, k, single, k0, k1, k2, offset, given):
    wide_lo, wide_span, wide = _wide_limits(k)
    for begin in range(start, stop, SUB_BLOCK):
        first, last = np.uint64(begin), np.uint64(min(stop, begin + SUB_BLOCK))
        if k[PFLIP] >= 0.0:  # bit flips: every element takes the general path
            _counter_general(xf, xu, of, ou, first, last, k, single, k0, k1, k2, offset, True, given)
            continue
        if k[MODE] >= 5 and wide and _count_specials(xu, first, last, k):
            # Elements below xmin: their bit rule (_small_stochastic, which rounds regular ones too).
            for i in range(first, last):
                b = np.uint64(xu[i])
                d, _ = _wide_shift(b, k)
                ou[i] = _small_stochastic(b, k, d, _to_class(_round_number(given, k0, offset + i, i), single))
            if _count_outside(xu, first, last, wide_lo, wide_span, k[MAG]):
                _counter_general(xf, xu, of, ou, first, last, k, single, k0, k1, k2, offset, False, given)
            continue
        for i in range(first, last):  # (stochastic: deterministic modes come here with flips only)
            rnd = _to_class(_round_number(given, k0, offset + i, i), single)
            ou[i] = _regular_stochastic(np.uint64(xu[i]), k, rnd)
        if _count_specials(xu, first, last, k):
            _counter_general(xf, xu, of, ou, first, last, k, single, k0, k1, k2, offset, False, given)


@numba.njit(**JIT_OPTIONS)
def counter_serial(xf, xu, of, ou, ip, up, fp, single, keys, offset, given):
    k = constants(ip, up, fp)
    _counter_range(xf, xu, of, ou, 0, xf.size, k, single, keys[0], keys[1], keys[2], offset, given)


@numba.njit(parallel=True, **JIT_OPTIONS)
def counter_parallel(xf, xu, of, ou, ip, up, fp, single, keys, offset, chunk, given):
    k = constants(ip, up, fp)
    n = xf.size
    for c in prange((n + chunk - 1) // chunk):
        _counter_range(xf, xu, of, ou, c * chunk, min(n, (c + 1) * chunk), k, single,
                       keys[0], keys[1], keys[2], offset, given)


@numba.njit(**JIT_OPTIONS)
def counter_small(xf, of, packed, keys, offset):
    """:func:`counter_serial` on a float64 or float32 vector with the counter's numbers, constants
    packed (``offset``: a Python int in ``[-2**63, 2**63)``, the counter modulo 2**64: an int64 that
    ``np.uint64`` wraps back; a uint64 argument would not match the int64 compilation Numba reuses)."""
    k, _ = _unpacked(packed)
    _counter_range(xf, bit_view(xf), of, bit_view(of), 0, xf.size, k, is_single(xf), keys[0], keys[1], keys[2],
                   np.uint64(offset), None)


# --- chop.m's draw order: count, draw in bulk (by the caller), round ---------------------------------

@numba.njit(**INLINE_OPTIONS)
def _classify(b, v, k):
    """``(subnormal block, draws)`` of an element (see :func:`_needs_draw`)."""
    if _is_regular(b, k):
        return False, (b & k[LOW0]) != _U0
    d, sub = _small_shift(b, k)
    if d >= 0:
        return sub, _small_draws(b, k, d)
    return _needs_draw(v, k)


@numba.njit(**JIT_OPTIONS)
def _count_general(xf, xu, first, last, k, stochastic):
    k_normal = 0
    k_sub = 0
    n_sub = 0
    for i in range(np.uint64(first), np.uint64(last)):
        sub, need = _classify(np.uint64(xu[i]), np.float64(xf[i]), k)
        if sub:
            n_sub += 1
            if need and stochastic:
                k_sub += 1
        elif need and stochastic:
            k_normal += 1
    return k_normal, k_sub, n_sub


@numba.njit(**JIT_OPTIONS)
def count_draws(xf, xu, ip, up, fp, chunk, stochastic):
    """Per chunk: draws of the normal block, of the subnormal block, elements of the subnormal
    block.  One thread: cheaper than a parallel launch on a busy machine (measured)."""
    k = constants(ip, up, fp)
    n = xf.size
    n_chunks = (n + chunk - 1) // chunk
    counts = np.zeros((n_chunks, 3), np.int64)
    low0 = k[LOW0]
    for c in range(n_chunks):
        start = c * chunk
        stop = min(n, start + chunk)
        k_normal = 0
        k_sub = 0
        n_sub = 0
        for begin in range(start, stop, SUB_BLOCK):
            first, last = np.uint64(begin), np.uint64(min(stop, begin + SUB_BLOCK))
            if _count_specials(xu, first, last, k):
                a, b, d = _count_general(xf, xu, first, last, k, stochastic)
                k_normal += a
                k_sub += b
                n_sub += d
            elif stochastic:
                for i in range(first, last):
                    k_normal += (np.uint64(xu[i]) & low0) != _U0
        counts[c, 0] = k_normal
        counts[c, 1] = k_sub
        counts[c, 2] = n_sub
    return counts


@numba.njit(**JIT_OPTIONS)
def _round_drawn_general(xf, xu, of, ou, first, last, k, single, q, rnd_normal, rnd_sub, plus_normal,
                         plus_sub, flips, choice_normal, choice_sub, bits_normal, bits_sub):
    """Every element of ``first:last`` by the general path (without flips, regular and small ones
    by their bit rules); advances the positions ``q``."""
    mode = k[MODE]
    p = k[PFLIP]
    for i in range(np.uint64(first), np.uint64(last)):
        v = np.float64(xf[i])
        b = np.uint64(xu[i])
        sub, need = _classify(b, v, k)
        at = 1 if sub else 0  # q: draws, flip choices, flipped bits; each normal then subnormal
        rnd = 2.0
        if mode >= 5 and need:
            rnd = (rnd_sub if sub else rnd_normal)[q[at]]
            q[at] += 1
        if mode >= 5 and not flips:
            by_bits, bits = _bit_rule_stochastic(b, k, rnd)
            if by_bits:
                ou[i] = bits
                continue
        shift = -1
        if flips:
            u = (choice_sub if sub else choice_normal)[q[2 + at]]
            q[2 + at] += 1
            if u <= p:
                shift = (bits_sub if sub else bits_normal)[q[4 + at]] - 1
                q[4 + at] += 1
        of[i] = _general(v, k, single, rnd, plus_sub if sub else plus_normal, shift)


@numba.njit(**JIT_OPTIONS)
def _round_drawn_chunks(c0, c1, xf, xu, of, ou, k, single, chunk, starts, rnd_normal, rnd_sub,
                        plus_normal, plus_sub, flips, choice_normal, choice_sub, bits_normal, bits_sub):
    """Chunks ``c0:c1`` of :func:`round_drawn`."""
    n = xf.size
    low0, keep, unit, scale = k[LOW0], k[KEEP0], k[UNIT0], k[FRAC_SCALE]
    mode5 = k[MODE] == 5
    wide_lo, wide_span, wide = _wide_limits(k)
    for c in range(c0, c1):
        q = starts[c].copy()
        start = c * chunk
        stop = min(n, start + chunk)
        for begin in range(start, stop, SUB_BLOCK):
            first, last = np.uint64(begin), np.uint64(min(stop, begin + SUB_BLOCK))
            if not flips and wide and k[MODE] >= 5 and _count_specials(xu, first, last, k) \
                    and not _count_outside(xu, first, last, wide_lo, wide_span, k[MAG]):
                # Regular and small elements only: bit rules, each number from its block's cursor.
                normal_at, sub_at = q[0], q[1]
                for i in range(first, last):
                    b = np.uint64(xu[i])
                    d, sub = _wide_shift(b, k)
                    rnd = 2.0
                    if _small_draws(b, k, d):
                        if sub:
                            rnd = rnd_sub[sub_at]
                            sub_at += 1
                        else:
                            rnd = rnd_normal[normal_at]
                            normal_at += 1
                    ou[i] = _small_stochastic(b, k, d, rnd)
                q[0], q[1] = normal_at, sub_at
                continue
            if flips or _count_specials(xu, first, last, k):
                _round_drawn_general(xf, xu, of, ou, first, last, k, single, q, rnd_normal, rnd_sub,
                                     plus_normal, plus_sub, flips, choice_normal, choice_sub,
                                     bits_normal, bits_sub)
                continue
            # Unsigned positions (no negative-index checks); no dropped bits: no draw.
            position = np.uint64(q[0])
            for i in range(first, last):
                b = np.uint64(xu[i])
                low = b & low0
                up_ = False
                if low != _U0:
                    up_ = rnd_normal[position] <= (np.float64(np.int64(low)) * scale if mode5 else 0.5)
                    position += _U1
                ou[i] = (b & keep) + (unit if up_ else _U0)
            q[0] = np.int64(position)


@numba.njit(parallel=True, **JIT_OPTIONS)
def round_drawn(xf, xu, of, ou, ip, up, fp, single, chunk, starts, rnd_normal, rnd_sub,
                plus_normal, plus_sub, flips, choice_normal, choice_sub, bits_normal, bits_sub):
    """Round with the numbers chop.m drew, in its order: chunk ``c`` starts at the positions
    ``starts[c]`` (draws, flip choices, flipped bits; each normal then subnormal)."""
    k = constants(ip, up, fp)
    n_chunks = (xf.size + chunk - 1) // chunk
    for c in prange(n_chunks):
        _round_drawn_chunks(c, c + 1, xf, xu, of, ou, k, single, chunk, starts, rnd_normal, rnd_sub,
                            plus_normal, plus_sub, flips, choice_normal, choice_sub, bits_normal, bits_sub)


@numba.njit(**JIT_OPTIONS)
def round_drawn_serial(xf, xu, of, ou, ip, up, fp, single, chunk, starts, rnd_normal, rnd_sub,
                       plus_normal, plus_sub, flips, choice_normal, choice_sub, bits_normal, bits_sub):
    """:func:`round_drawn` on one thread (small arrays)."""
    k = constants(ip, up, fp)
    _round_drawn_chunks(0, (xf.size + chunk - 1) // chunk, xf, xu, of, ou, k, single, chunk, starts,
                        rnd_normal, rnd_sub, plus_normal, plus_sub, flips, choice_normal, choice_sub,
                        bits_normal, bits_sub)


# --- one float64 value, for the compiled linear algebra ----------------------------------------------

@numba.njit(**INLINE_OPTIONS)
def chop_double(v, k):
    """chop of one float64 value, modes 1-4 without flips, by the constants ``k`` of :func:`constants`."""
    b = bits_of_double(v)
    if _is_regular(b, k):
        return double_of_bits(_regular_bits(b, k))
    return _general(v, k, False, 2.0, False, -1)


@numba.njit(**INLINE_OPTIONS)
def fast_constants(ip, up, rp):
    """Constants of :func:`fast_bits` and :func:`irregular` (a tuple of scalars)."""
    return (rp[0], rp[1], rp[2], rp[3], rp[4], np.uint64(ip[D0]), np.uint64(ip[WIDTH] - 1),
            up[KEEP0 - 9], up[LO - 9], up[HI - 9] - up[LO - 9], up[INF - 9])


@numba.njit(**INLINE_OPTIONS)
def fast_bits(b, f):
    """The rounded bit pattern of ``b`` as if it were regular (modes 1-4; branch-free)."""
    sign = b >> f[6]
    add = (((b >> f[5]) & _U1) | f[0]) * f[1] + f[2] + ((sign - _U1) & f[3]) + ((_U0 - sign) & f[4])
    return (b + add) & f[7]


@numba.njit(**INLINE_OPTIONS)
def irregular(b, f):
    """1 when ``b`` is not regular (its rounding needs :func:`chop_double`), else 0."""
    return np.int64(((b & f[10]) - f[8]) >= f[9])


# --- MATLAB's stream drawn inside the kernel: mt19937ar, as rand draws it ----------------------------
# State: the 624 words ``key`` and the position ``pos`` of the next one (624: twist first);
# ``tempered``: the outputs.  A double is ``((a >> 5) 2^26 + (b >> 6)) 2^-53`` of two outputs.

_MT_N, _MT_M = 624, 397
_MT_UPPER, _MT_LOWER, _MT_MATRIX = np.uint64(0x80000000), np.uint64(0x7FFFFFFF), np.uint64(0x9908B0DF)
_MT_B, _MT_C = np.uint64(0x9D2C5680), np.uint64(0xEFC60000)
_S1, _S7, _S11, _S15, _S18 = np.uint64(1), np.uint64(7), np.uint64(11), np.uint64(15), np.uint64(18)
_S5, _S6, _U2 = np.uint64(5), np.uint64(6), np.uint64(2)


@numba.njit(**INLINE_OPTIONS)
def _mt_mix(upper_word, lower_word, far):
    y = (np.uint64(upper_word) & _MT_UPPER) | (np.uint64(lower_word) & _MT_LOWER)
    return np.uint64(far) ^ (y >> _S1) ^ ((_U0 - (y & _U1)) & _MT_MATRIX)


@numba.njit(**JIT_OPTIONS)
def _mt_temper(key, tempered):
    _mt_temper_words(key, tempered, 0, _MT_N)


@numba.njit(**JIT_OPTIONS)
def _mt_temper_words(key, tempered, first, last):
    """The outputs of words ``first:last`` of ``key`` (a small call tempers the words it reads)."""
    for i in range(first, last):
        tempered[i] = _mt_tempered(key[i])


@numba.njit(**INLINE_OPTIONS)
def _mt_tempered(word):
    """mt19937ar's output of one state word."""
    y = np.uint64(word)
    y ^= y >> _S11
    y ^= (y << _S7) & _MT_B
    y ^= (y << _S15) & _MT_C
    return y ^ (y >> _S18)


@numba.njit(**INLINE_OPTIONS)
def _mt_next_word(key, pos):
    """The next 32-bit output, tempered as it is read (no table of outputs: a call that draws a
    few numbers)."""
    p = pos[0]
    if p >= _MT_N:
        _mt_generate(key)
        p = 0
    pos[0] = p + 1
    return _mt_tempered(key[p])


@numba.njit(**INLINE_OPTIONS)
def _mt_next_double(key, pos):
    """The next double of the stream, by :func:`_mt_next_word`."""
    a = _mt_next_word(key, pos) >> _S5
    b = _mt_next_word(key, pos) >> _S6
    return (np.float64(a) * 67108864.0 + np.float64(b)) * 2.0**-53


@numba.njit(**JIT_OPTIONS)
def _mt_word(key, tempered, pos):
    """The next 32-bit output (advances ``pos[0]``)."""
    if pos[0] >= _MT_N:
        _mt_generate(key)
        _mt_temper(key, tempered)
        pos[0] = 0
    word = tempered[pos[0]]
    pos[0] += 1
    return word


@numba.njit(**INLINE_OPTIONS)
def _mt_double(key, tempered, pos):
    """The next double of the stream (two outputs)."""
    a = _mt_word(key, tempered, pos) >> _S5
    b = _mt_word(key, tempered, pos) >> _S6
    return (np.float64(a) * 67108864.0 + np.float64(b)) * 2.0**-53


@numba.njit(**JIT_OPTIONS)
def _mt_fill(key, tempered, pos, out, count, single):
    """The next ``count`` doubles of the stream into ``out[:count]`` (rounded to single: ``single``)."""
    done = 0
    while done < count:
        p = pos[0]
        if p >= _MT_N - 1:  # a double across a twist (or none left)
            out[done] = _to_class(_mt_double(key, tempered, pos), single)
            done += 1
            continue
        m = min(count - done, (_MT_N - p) // 2)
        # Unsigned indices, signed conversions (a, b < 2^27): a loop LLVM vectorises.
        first, start = np.uint64(p), np.uint64(done)
        for j in range(np.uint64(0), np.uint64(m)):
            a = np.int64(tempered[first + _U2 * j] >> _S5)
            b = np.int64(tempered[first + _U2 * j + _U1] >> _S6)
            out[start + j] = (np.float64(a) * 67108864.0 + np.float64(b)) * 2.0**-53
        if single:
            for j in range(np.uint64(0), np.uint64(m)):
                out[start + j] = np.float64(np.float32(out[start + j]))
        pos[0] = p + 2 * m
        done += m


@numba.njit(**JIT_OPTIONS)
def mt_uniform(key, pos, n):
    """``n`` doubles of the stream whose state is ``key, pos`` (advanced in place); for tests."""
    tempered = np.empty(_MT_N, np.uint64)
    _mt_temper(key, tempered)
    out = np.empty(n, np.float64)
    _mt_fill(key, tempered, pos, out, n, False)
    return out


#: round_stream's plans per sub-block: regular only, regular and small only, or general.
_PLAN_REGULAR, _PLAN_WIDE, _PLAN_GENERAL = 0, 1, 2
#: Sub-blocks whose numbers round_stream draws together (per cursor, 8 bytes a number: L1/L2).
STREAM_GROUP = 16
#: round_stream rounds the subnormal block last when it has < 1/DEFER_BELOW of the normal draws.
DEFER_BELOW = 512


@numba.njit(**JIT_OPTIONS)
def _mt_generate(key):
    """The next 624 words of ``key`` (mt19937ar's generation step), untempered."""
    for i in range(_MT_N - _MT_M):
        key[i] = np.uint32(_mt_mix(key[i], key[i + 1], key[i + _MT_M]) & np.uint64(0xFFFFFFFF))
    for i in range(_MT_N - _MT_M, _MT_N - 1):
        key[i] = np.uint32(_mt_mix(key[i], key[i + 1], key[i + _MT_M - _MT_N]) & np.uint64(0xFFFFFFFF))
    key[_MT_N - 1] = np.uint32(_mt_mix(key[_MT_N - 1], key[0], key[_MT_M - 1]) & np.uint64(0xFFFFFFFF))


@numba.njit(**JIT_OPTIONS)
def _mt_skip(key, pos, words):
    """Advance ``key, pos`` by ``words`` outputs without computing them (the caller tempers)."""
    while words > 0:
        if pos[0] >= _MT_N:
            _mt_generate(key)
            pos[0] = 0
        step = min(words, _MT_N - pos[0])
        pos[0] += step
        words -= step


@numba.njit(**JIT_OPTIONS)
def _stream_plan(xf, xu, k, plans, counts, flags):
    """round_stream's counting pass: per sub-block its plan and ``counts``; per element of a
    ``_PLAN_WIDE`` sub-block ``flags`` (1: draws, 2: subnormal block); returns the totals."""
    n = xf.size
    low0 = k[LOW0]
    wide_lo, wide_span, wide = _wide_limits(k)
    k_normal = 0
    k_sub = 0
    n_sub = 0
    for block in range((n + SUB_BLOCK - 1) // SUB_BLOCK):
        first = np.uint64(block * SUB_BLOCK)
        last = np.uint64(min(n, block * SUB_BLOCK + SUB_BLOCK))
        a = 0
        s = 0
        m = 0
        if not _count_specials(xu, first, last, k):
            plans[block] = _PLAN_REGULAR
            for i in range(first, last):
                a += (np.uint64(xu[i]) & low0) != _U0
        elif wide and not _count_outside(xu, first, last, wide_lo, wide_span, k[MAG]):
            plans[block] = _PLAN_WIDE
            # Branch-free (the blocks' elements are mixed at random: a branch mispredicts).
            for i in range(first, last):
                b = np.uint64(xu[i])
                d, sub = _wide_shift(b, k)
                draws = np.int64(_small_draws(b, k, d))
                s += draws & np.int64(sub)
                a += draws & np.int64(not sub)
                m += np.int64(sub)
                flags[i] = np.uint8(draws | (np.int64(sub) << 1))
        else:
            plans[block] = _PLAN_GENERAL
            a, s, m = _count_general(xf, xu, first, last, k, True)
        counts[block, 0] = a
        counts[block, 1] = s
        counts[block, 2] = m
        k_normal += a
        k_sub += s
        n_sub += m
    return k_normal, k_sub, n_sub


@numba.njit(**JIT_OPTIONS)
def round_stream(xf, xu, of, ou, ip, up, fp, single, key, pos):
    """Stochastic rounding (modes 5, 6, no flips) of ``xf`` (column-major) with MATLAB's stream,
    drawn as chop.m draws (normal block, then subnormal block).  After a counting pass a second
    cursor is set the normal block's count ahead (:func:`_mt_skip`), and one pass takes each
    element's number from its block's cursor (a tiny subnormal block: rounded last, from the one
    cursor).  Leaves ``key, pos`` after the last number; returns the two counts."""
    return _round_stream(xf, xu, of, ou, constants(ip, up, fp), single, key, pos)


#: stream_small_* rounds up to this many elements by :func:`_round_stream_few`.
STREAM_FEW = SUB_BLOCK


@numba.njit(**JIT_OPTIONS)
def stream_small(xf, of, packed, key, pos):
    """:func:`round_stream` on a float64 or float32 vector, constants packed (see :func:`det_small`)."""
    k, _ = _unpacked(packed)
    if xf.size <= STREAM_FEW:
        return _round_stream_few(xf, bit_view(xf), of, bit_view(of), k, is_single(xf), key, pos)
    return _round_stream(xf, bit_view(xf), of, bit_view(of), k, is_single(xf), key, pos)


@numba.njit(**INLINE_OPTIONS)
def _round_stream_few(xf, xu, of, ou, k, single, key, pos):
    """:func:`round_stream` for a few elements, with nothing allocated: a counting pass, then the
    normal block's elements in order with the numbers drawn as they come, then the subnormal
    block's (chop.m draws the subnormal block's numbers after all of the normal block's).  Each
    element by the rule of round_stream's sub-blocks (regular ones, or the general rule)."""
    n = xf.size
    k_normal = 0
    k_sub = 0
    for i in range(n):
        sub, need = _classify(np.uint64(xu[i]), np.float64(xf[i]), k)
        if need:
            if sub:
                k_sub += 1
            else:
                k_normal += 1
    for block in range(2):  # 0: the normal block, 1: the subnormal block
        in_sub = block == 1
        plus_zero = (k_sub if in_sub else k_normal) > 0  # chop.m's stochastic branch gives +0 when its block drew
        for i in range(n):
            b = np.uint64(xu[i])
            if _is_regular(b, k):  # (the usual element: in the normal block)
                if not in_sub:
                    draws = (b & k[LOW0]) != _U0
                    ou[i] = _regular_stochastic(b, k, _to_class(_mt_next_double(key, pos), single) if draws else 2.0)
                continue
            v = np.float64(xf[i])
            sub, need = _classify(b, v, k)
            if sub != in_sub:
                continue
            rnd = _to_class(_mt_next_double(key, pos), single) if need else 2.0
            by_bits, bits = _bit_rule_stochastic(b, k, rnd)
            if by_bits:
                ou[i] = bits
            else:
                of[i] = _general(v, k, single, rnd, plus_zero, -1)
    return k_normal, k_sub


@numba.njit(**INLINE_OPTIONS)
def _round_stream(xf, xu, of, ou, k, single, key, pos):
    n = xf.size
    n_blocks = (n + SUB_BLOCK - 1) // SUB_BLOCK
    plans = np.empty(n_blocks, np.int8)
    counts = np.empty((n_blocks, 3), np.int64)
    flags = np.empty(n, np.uint8)
    k_normal, k_sub, n_sub = _stream_plan(xf, xu, k, plans, counts, flags)
    plus_normal = k_normal > 0  # chop.m's stochastic branch gives +0 when its block drew
    plus_sub = k_sub > 0
    # Few elements in the subnormal block: rounded last, from the one cursor (a second cursor
    # costs two words' generation per number skipped).
    defer = k_sub > 0 and n_sub * DEFER_BELOW < k_normal
    # The normal block's cursor and the subnormal block's, k_normal numbers (two words each) ahead.
    # Only the words read before a twist are tempered here (a twist tempers all: _mt_word).
    tempered = np.empty(_MT_N, np.uint64)
    _mt_temper_words(key, tempered, pos[0], min(_MT_N, pos[0] + 2 * (k_normal + (k_sub if defer else 0))))
    two_cursors = k_sub > 0 and not defer
    key_sub = key.copy() if two_cursors else key
    pos_sub = pos.copy()
    tempered_sub = np.empty(_MT_N if two_cursors else 0, np.uint64)
    # (their indices, values and bits, kept while in the cache)
    deferred = np.empty(n_sub if defer else 0, np.int64)
    deferred_values = np.empty(n_sub if defer else 0, np.float64)
    deferred_bits = np.empty(n_sub if defer else 0, np.uint64)
    n_deferred = 0
    if two_cursors:
        _mt_skip(key_sub, pos_sub, 2 * k_normal)
        _mt_temper_words(key_sub, tempered_sub, pos_sub[0], min(_MT_N, pos_sub[0] + 2 * k_sub))
    # A group's numbers, drawn together: the normal block's, then the subnormal block's (each + 1:
    # read, unused, after the last element).
    group = min(STREAM_GROUP * SUB_BLOCK, n)
    pool = np.zeros(2 * group + 2, np.float64)
    numbers = pool[:group + 1]
    numbers_sub = pool[group + 1:]
    element_numbers = np.empty(SUB_BLOCK, np.float64)
    low0, keep, scale, d0 = k[LOW0], k[KEEP0], k[FRAC_SCALE], np.uint64(k[D0])
    mode5 = k[MODE] == 5
    for group_first in range(0, n_blocks, STREAM_GROUP):
        group_last = min(n_blocks, group_first + STREAM_GROUP)
        count = 0
        count_sub = 0
        for block in range(group_first, group_last):
            count += counts[block, 0]
            count_sub += counts[block, 1]
        _mt_fill(key, tempered, pos, numbers, count, single)
        if not defer:
            _mt_fill(key_sub, tempered_sub, pos_sub, numbers_sub, count_sub, single)
        # The next number of each block in the pool (unsigned: no negative-index checks).
        position = np.uint64(0)
        position_sub = np.uint64(group + 1)
        for block in range(group_first, group_last):
            first = np.uint64(block * SUB_BLOCK)
            last = np.uint64(min(n, block * SUB_BLOCK + SUB_BLOCK))
            plan = plans[block]
            if plan == _PLAN_WIDE:
                # Regular and small only: each element's number (a serial loop, no branch), then
                # the rounding (a loop LLVM vectorises).
                for j in range(last - first):
                    f = np.uint64(flags[first + j])
                    in_sub = f >> _U1
                    draws = f & _U1
                    element_numbers[j] = pool[position + in_sub * (position_sub - position)]
                    position_sub += draws & in_sub
                    position += draws & (in_sub ^ _U1)
                for j in range(last - first):
                    b = np.uint64(xu[first + j])
                    d, _ = _wide_shift(b, k)
                    ou[first + j] = _small_stochastic(b, k, d, element_numbers[j])
                if defer and counts[block, 2]:  # (their values above are rounded again at the end)
                    for j in range(last - first):
                        if flags[first + j] >> 1:  # (rare: a branch)
                            deferred[n_deferred] = np.int64(first + j)
                            deferred_values[n_deferred] = np.float64(xf[first + j])
                            deferred_bits[n_deferred] = np.uint64(xu[first + j])
                            n_deferred += 1
                continue
            if plan == _PLAN_GENERAL:
                for i in range(first, last):
                    v = np.float64(xf[i])
                    b = np.uint64(xu[i])
                    sub, need = _classify(b, v, k)
                    if sub and defer:
                        deferred[n_deferred] = np.int64(i)
                        deferred_values[n_deferred] = v
                        deferred_bits[n_deferred] = b
                        n_deferred += 1
                        continue
                    rnd = 2.0
                    if need:
                        if sub:
                            rnd = pool[position_sub]
                            position_sub += _U1
                        else:
                            rnd = pool[position]
                            position += _U1
                    by_bits, bits = _bit_rule_stochastic(b, k, rnd)
                    if by_bits:
                        ou[i] = bits
                    else:
                        of[i] = _general(v, k, single, rnd, plus_sub if sub else plus_normal, -1)
                continue
            # Regular elements only, branch-free (a branch would mispredict half the time).
            for i in range(first, last):
                b = np.uint64(xu[i])
                low = b & low0
                draws = np.uint64(low != _U0)
                up_ = np.uint64(numbers[position] <= (np.float64(np.int64(low)) * scale if mode5 else 0.5)) & draws
                position += draws
                ou[i] = (b & keep) + (up_ << d0)
    # The few elements of the subnormal block, with the numbers that follow the normal block's.
    for j in range(n_deferred):
        i = deferred[j]
        v = deferred_values[j]
        b = deferred_bits[j]
        _, need = _classify(b, v, k)
        rnd = 2.0
        if need:
            rnd = _to_class(_mt_double(key, tempered, pos), single)
        d, _ = _small_shift(b, k)
        if d >= 0:
            ou[i] = _small_stochastic(b, k, d, rnd)
        else:
            of[i] = _general(v, k, single, rnd, plus_sub, -1)
    if two_cursors:  # the stream's state: after the subnormal block's last number
        key[:] = key_sub
        pos[0] = pos_sub[0]
    return k_normal, k_sub


@numba.njit(**INLINE_OPTIONS)
def nearest_only(f):
    """Whether the constants ``f`` of :func:`fast_constants` are plain round to nearest (ties to
    even, bits dropped, not t = 1): then :func:`nearest_bits` gives the bits of :func:`fast_bits`."""
    return f[0] == _U0 and f[1] == _U1 and f[3] == _U0 and f[4] == _U0


@numba.njit(**INLINE_OPTIONS)
def nearest_bits(b, f):
    """:func:`fast_bits` for plain round to nearest (:func:`nearest_only`), in fewer operations (a
    loop that tests :func:`nearest_only` outside is split by LLVM into one loop per case)."""
    return (b + (((b >> f[5]) & _U1) + f[2])) & f[7]


lock_kernel_caches(globals())
