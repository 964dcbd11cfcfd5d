"""A compiled (Numba) kernel for CPFloat's modes, bit for bit equal to
:func:`pychop_compat.rules.cpfloat.round_cpfloat` (imported only when used).

:mod:`.elementwise_cpfloat`'s arithmetic and constants in one pass.  Deterministic modes: a
branch-free loop per :data:`SUB_BLOCK` elements rounds everything below the top binade and
counts the others (also zeros, negatives and below xmin for E8M0), which :func:`_round_one`
rounds again with every rule.  Stochastic modes: one element at a time with the number the
caller gives it (:func:`round_stochastic`).  Chunks of :data:`CHUNK` elements go to Numba's
threads, each written by one thread.
"""

from __future__ import annotations

import math
from functools import lru_cache
from typing import Callable

import numba
import numpy as np
from numba import prange

from ..random.sources import RandomSources
from ..spec import RoundingSpec
from ..rules.cpfloat import ROUND_MODES, effective_format, flip_bits, limited_bit_sources
from .compiled import CHUNK, SERIAL_BELOW
from .elementwise_cpfloat import constants_for, cpfloat_constants
from .numba_kernels import INLINE_OPTIONS, JIT_OPTIONS, SUB_BLOCK, bit_view, counter_uniform, lock_kernel_caches
from .numpy_fast import in_memory_order

__all__ = ["round_array", "round_stochastic", "round_drawn", "handles", "SERIAL_BELOW", "CHUNK", "SUB_BLOCK"]


_U0 = np.uint64(0)
_U1 = np.uint64(1)

# Indices into the tuple of constants (all uint64), in _constants' order.
(D, DTOP, DMAX, HIDDEN, MAG, TOPBIT, TINY_LO, TINY_HALF, SPECIAL_MASK, SPECIAL_LO,
 SPECIAL_SPAN, XMAX, INF, NAN, SATURATION, INFINITY, ZERO_PLUS, E8M0, XMIN, XBND, BEYOND, INF_TO_XMAX) = range(22)

# The unsigned views of the storage formats.
_UNSIGNED = {"f": np.uint32, "d": np.uint64}


# --- constants of one (format, mode, switches, dtype) ---------------------------------------------

@lru_cache(maxsize=256)
def _constants(fmt, mode: int, subnormal: bool, explim: bool, saturation: bool, infinity: bool,
               char: str, rules: str = "cpfloat") -> np.ndarray:
    """The constants of :func:`.elementwise_cpfloat.cpfloat_constants` as the kernel's array."""
    c = cpfloat_constants(fmt, mode, subnormal, explim, saturation, infinity, char, rules)
    k = np.array([c.dropped, c.dropped_top, c.dropped_max, c.hidden, (1 << (c.width - 1)) - 1, c.width - 1,
                  c.tiny_lo, c.tiny_half, c.special_mask, c.special_lo, c.special_span, c.xmax, c.inf, c.nan,
                  int(c.saturation), int(c.infinity), int(c.zero_plus), int(c.e8m0), c.xmin, c.xbnd,
                  c.beyond_rule, int(c.inf_to_xmax)], np.uint64)
    k.setflags(write=False)
    return k


def _spec_constants(spec: RoundingSpec, char: str) -> np.ndarray:
    return _constants(spec.fmt, int(spec.round), bool(spec.keeps_subnormals), bool(spec.limits_exponent),
                      bool(spec.saturation), bool(spec.infinity), char,
                      "correct" if spec.range_rules == "correct" else "cpfloat")


# --- one element ------------------------------------------------------------------------------------

@numba.njit(**INLINE_OPTIONS)
def _dropped(m, k):
    """How many bits of the magnitude ``m`` the rounding drops (its binade's, within the format's
    range: at least D, at most DMAX)."""
    e = m >> k[DMAX]
    e = e if e > _U1 else _U1
    s = k[DTOP] - e if k[DTOP] > e else _U0
    s = s if s > k[D] else k[D]
    return s if s < k[DMAX] else k[DMAX]


@numba.njit(**INLINE_OPTIONS)
def _core(m, neg, k, mode):
    """The rounded magnitude of the finite magnitude ``m`` (sign ``neg``: 0 or 1), any range (a carry
    beyond the top binade gives Inf's pattern or above xmax); elementwise_cpfloat's arithmetic."""
    s = _dropped(m, k)
    low = (_U1 << s) - _U1
    keep = ~low
    if mode == 1:
        odd = ((m | k[HIDDEN]) >> s) & low & _U1  # the last kept bit; 0 when nothing is dropped
        r = (m + (low >> _U1) + odd) & keep
        up = m > k[TINY_HALF]  # the tie goes to the even 0
    elif mode == -1:
        r = (m + ((low + _U1) >> _U1)) & keep
        up = m >= k[TINY_HALF]
    elif mode == 0:
        r = (m + (low >> _U1)) & keep
        up = m > k[TINY_HALF]
    elif mode == 2:
        r = (m + (low if neg == _U0 else _U0)) & keep
        up = (m != _U0) & (neg == _U0)
    elif mode == 3:
        r = (m + (low if neg != _U0 else _U0)) & keep
        up = (m != _U0) & (neg != _U0)
    elif mode == 4:
        r = m & keep
        up = False
    else:  # 7, round to odd: with p - 1 bits dropped the kept significand is the hidden bit, odd
        unit = (_U1 << s) & ~k[HIDDEN]
        r = (m & keep) | (((m & low) + low) & unit)
        up = m != _U0
    tiny = (k[TINY_LO] if up else _U0)  # the smallest result
    return tiny if m < k[TINY_LO] else r


@numba.njit(**INLINE_OPTIONS)
def _signed(r, neg, k):
    """The pattern of magnitude ``r`` with the input's sign (a zero without it under ZERO_PLUS)."""
    plus = (r == _U0) & (k[ZERO_PLUS] != _U0)
    return r | ((_U0 if plus else neg) << k[TOPBIT])


@numba.njit(**INLINE_OPTIONS)
def _finish(r, neg, m, k):
    """The pattern of the rounded magnitude ``r`` of ``m``: the input's sign, then E8M0's rules."""
    out = _signed(r, neg, k)
    if k[E8M0] != _U0:  # no sign, no zero: only positive inputs give numbers
        if neg != _U0 or m == _U0:
            return k[NAN]
        if r == _U0:
            return k[XMIN]
    return out


@numba.njit(**INLINE_OPTIONS)
def _beyond_xmax(m, neg, k, mode):
    """The result's magnitude for an Inf input ``m``, or for ``m`` rounded past xmax: xmax with
    saturation, or where the mode rounds toward zero (an Inf input only without INFINITY, under
    INF_TO_XMAX: CPFloat's rules); else Inf under INFINITY, else NaN."""
    toward_zero = mode == 4 or mode == 7 or (mode == 2 and neg != _U0) or (mode == 3 and neg == _U0)
    inf_kept = m == k[INF] and (k[INFINITY] != _U0 or k[INF_TO_XMAX] == _U0)
    if k[SATURATION] != _U0 or (toward_zero and not inf_kept):
        return k[XMAX]
    return k[INF] if k[INFINITY] != _U0 else k[NAN]


@numba.njit(**JIT_OPTIONS)
def _round_one(b, k, mode):
    """CPFloat's rounding of one bit pattern ``b`` (widened to uint64), every rule."""
    m = b & k[MAG]
    neg = b >> k[TOPBIT]
    if m > k[INF]:
        return k[NAN]  # NaN in: the quiet NaN
    r = k[INF] if m == k[INF] else _core(m, neg, k, mode)
    if r > k[XMAX]:
        r = _beyond_xmax(m, neg, k, mode)
    return _finish(r, neg, m, k)


# --- the loops ---------------------------------------------------------------------------------------

@numba.njit(**INLINE_OPTIONS)
def _block_mode(xu, ou, first, last, k, mode):
    """The loop of one mode (``mode`` a constant where it is inlined, so LLVM folds the branches)."""
    special = 0
    mag, top, mask, lo, span = k[MAG], k[TOPBIT], k[SPECIAL_MASK], k[SPECIAL_LO], k[SPECIAL_SPAN]
    for i in range(first, last):
        b = np.uint64(xu[i])
        m = b & mag
        neg = b >> top
        ou[i] = _signed(_core(m, neg, k, mode), neg, k)
        special += ((b & mask) - lo) >= span
    return special


@numba.njit(**JIT_OPTIONS)
def _block(xu, ou, first, last, k, mode):
    """Round ``first:last`` branch-free (one loop per mode, each vectorised); how many special
    elements there are (the caller rounds them again)."""
    if mode == 1:
        return _block_mode(xu, ou, first, last, k, 1)
    if mode == -1:
        return _block_mode(xu, ou, first, last, k, -1)
    if mode == 0:
        return _block_mode(xu, ou, first, last, k, 0)
    if mode == 2:
        return _block_mode(xu, ou, first, last, k, 2)
    if mode == 3:
        return _block_mode(xu, ou, first, last, k, 3)
    if mode == 4:
        return _block_mode(xu, ou, first, last, k, 4)
    return _block_mode(xu, ou, first, last, k, 7)


@numba.njit(**JIT_OPTIONS)
def _fix_specials(xu, ou, first, last, k, mode):
    mask, lo, span = k[SPECIAL_MASK], k[SPECIAL_LO], k[SPECIAL_SPAN]
    for i in range(first, last):
        b = np.uint64(xu[i])
        if ((b & mask) - lo) >= span:
            ou[i] = _round_one(b, k, mode)


@numba.njit(**JIT_OPTIONS)
def _range(xu, ou, start, stop, k, mode):
    for first in range(start, stop, SUB_BLOCK):
        last = min(first + SUB_BLOCK, stop)
        if _block(xu, ou, np.uint64(first), np.uint64(last), k, mode):
            _fix_specials(xu, ou, np.uint64(first), np.uint64(last), k, mode)


@numba.njit(**JIT_OPTIONS)
def _tuple(k):
    return (k[0], k[1], k[2], k[3], k[4], k[5], k[6], k[7], k[8], k[9], k[10], k[11], k[12], k[13],
            k[14], k[15], k[16], k[17], k[18], k[19], k[20], k[21])


@numba.njit(**JIT_OPTIONS)
def round_serial(xu, ou, karray, mode):
    """Round the bit patterns ``xu`` into ``ou`` (same unsigned dtype) by one thread."""
    _range(xu, ou, 0, xu.size, _tuple(karray), mode)


@numba.njit(**JIT_OPTIONS)
def round_small(x, out, karray, mode):
    """:func:`round_serial` on a float64 or float32 vector, the bit views made here (small calls)."""
    _range(bit_view(x), bit_view(out), 0, x.size, _tuple(karray), mode)


@numba.njit(parallel=True, **JIT_OPTIONS)
def round_parallel(xu, ou, karray, mode, chunk):
    """As :func:`round_serial`, chunks of ``chunk`` elements shared out over Numba's threads."""
    k = _tuple(karray)
    n = xu.size
    for c in prange((n + chunk - 1) // chunk):
        _range(xu, ou, c * chunk, min(n, (c + 1) * chunk), k, mode)


# --- stochastic rounding (modes 5 and 6) with a number per element ----------------------------------

@numba.njit(**INLINE_OPTIONS)
def _round_stochastic(b, a, u, k, mode, scale_1, scale_2):
    """CPFloat's stochastic rounding of the pattern ``b`` (magnitude ``a`` in float64) with the
    number ``u``: up when the element is off the grid and ``u <= fraction`` (mode 5) or
    ``u <= 1/2`` (mode 6), CPFloat's rule beyond xmax under BEYOND (see round_cpfloat's notes on
    ``rules``); elementwise_cpfloat's arithmetic, one element at a time."""
    m = b & k[MAG]
    neg = b >> k[TOPBIT]
    if m > k[INF]:
        return k[NAN]  # NaN in: the quiet NaN
    if m == k[INF]:
        r = k[XMAX] if k[SATURATION] != _U0 else (k[INF] if k[INFINITY] != _U0 else k[NAN])
        if k[BEYOND] == np.uint64(6) and k[INFINITY] == _U0 and u > 0.5:
            r = k[XMAX]  # CPFloat's random bit 0
    else:
        s = _dropped(m, k)
        low = (_U1 << s) - _U1
        if m < k[TINY_LO]:  # below the smallest result: 0 or tiny_lo, the fraction |v| / tiny_lo
            fraction = a * scale_1 * scale_2  # two exact steps, the second rounds once (as ldexp)
            inexact = m != _U0
        else:
            fraction = np.float64(m & low) / np.float64(low + _U1)  # exact
            inexact = (m & low) != _U0
        up = inexact and u <= (fraction if mode == 5 else 0.5)
        if m < k[TINY_LO]:
            r = k[TINY_LO] if up else _U0
        else:
            r = (m & ~low) + (low + _U1) if up else m & ~low
        if k[BEYOND] != _U0 and m > k[XMAX]:  # mode 5: |x| >= xbnd, or u <= 2 r = (|x| - xmax) / (xbnd - xmax)
            over = (m >= k[XBND] or u <= 2.0 * fraction) if k[BEYOND] == np.uint64(5) else u <= 0.5
            r = k[INF] if over else k[XMAX]
        if r > k[XMAX]:
            r = k[XMAX] if k[SATURATION] != _U0 else (k[INF] if k[INFINITY] != _U0 else k[NAN])
    return _finish(r, neg, m, k)


@numba.njit(**JIT_OPTIONS)
def _round_laid_out(xf, xu, ou, first, last, k, mode, scale_1, scale_2, numbers):
    """Round ``first:last``, element ``first + j`` with ``numbers[j]``."""
    start = np.uint64(first)  # (unsigned indices: no checks for negative ones)
    for j in range(np.uint64(0), np.uint64(last - first)):
        ou[start + j] = _round_stochastic(np.uint64(xu[start + j]), abs(np.float64(xf[start + j])), numbers[j], k,
                                          mode, scale_1, scale_2)


@numba.njit(**JIT_OPTIONS)
def stochastic_serial(xf, xu, ou, u, karray, mode, scale_1, scale_2):
    """Round ``xf`` (bit patterns ``xu``) into ``ou`` with the numbers ``u``, by one thread."""
    _round_laid_out(xf, xu, ou, 0, xu.size, _tuple(karray), mode, scale_1, scale_2, u)


@numba.njit(parallel=True, **JIT_OPTIONS)
def stochastic_parallel(xf, xu, ou, u, karray, mode, scale_1, scale_2, chunk):
    """As :func:`stochastic_serial`, chunks of ``chunk`` elements shared out over Numba's threads."""
    k = _tuple(karray)
    n = xu.size
    for c in prange((n + chunk - 1) // chunk):
        first = c * chunk
        _round_laid_out(xf, xu, ou, first, min(n, first + chunk), k, mode, scale_1, scale_2, u[first:])


# --- stochastic rounding with the numbers drawn as CPFloat's rules draw them --------------------------

@numba.njit(**INLINE_OPTIONS)
def _draws(b, k):
    """Whether the pattern ``b`` takes a number: finite and off the grid; in CPFloat's mode 6 without
    saturation also beyond xmax and, without INFINITY, +-Inf (as in :func:`_round_stochastic`)."""
    m = b & k[MAG]
    if k[BEYOND] == np.uint64(6) and m > k[XMAX]:
        return m < k[INF] or (m == k[INF] and k[INFINITY] == _U0)
    if m >= k[INF]:
        return False
    if m < k[TINY_LO]:
        return m != _U0
    return (m & ((_U1 << _dropped(m, k)) - _U1)) != _U0


@numba.njit(**JIT_OPTIONS)
def count_draws(xu, karray, chunk):
    """How many elements of each chunk of ``chunk`` elements take a number (one thread: a
    counting pass costs less than a parallel launch)."""
    k = _tuple(karray)
    n = xu.size
    counts = np.zeros((n + chunk - 1) // chunk, np.int64)
    for c in range(counts.size):
        found = 0
        for i in range(c * chunk, min(n, (c + 1) * chunk)):
            found += _draws(np.uint64(xu[i]), k)
        counts[c] = found
    return counts


#: Elements whose numbers :func:`_drawn_range` lays out before rounding them.
DRAWN_BLOCK = 2048


@numba.njit(**JIT_OPTIONS)
def _lay_out_numbers(xu, first, last, k, u, counter_key, first_counter, limit, position, numbers):
    """``numbers[i - first]`` for the elements ``i`` of ``first:last``: the ``j``-th element that
    takes a number (``j`` from ``position``) takes ``u[j]``, or with ``u`` empty the counter's
    ``counter_uniform(counter_key, first_counter + j)``, limited to ``limit`` steps (> 0) as
    limited_bit_sources limits a draw; the others 2 (never up).  Returns the next ``j``."""
    from_counter = u.size == 0
    for i in range(first, last):
        number = 2.0
        if _draws(np.uint64(xu[i]), k):
            if from_counter:
                number = counter_uniform(counter_key, first_counter + np.uint64(position))
                if limit > 0.0:
                    number = (math.floor(number * limit) + 1.0) / limit  # exact: powers of two
            else:
                number = u[position]
            position += 1
        numbers[i - first] = number
    return position


@numba.njit(**JIT_OPTIONS)
def _drawn_range(xf, xu, ou, start, stop, k, mode, scale_1, scale_2, u, counter_key, first_counter, limit,
                 position):
    """Round ``start:stop`` with the numbers of :func:`_lay_out_numbers` (from ``position``), laid
    out a block at a time (a loop doing both measured several times slower)."""
    numbers = np.empty(DRAWN_BLOCK, np.float64)
    for first in range(start, stop, DRAWN_BLOCK):
        last = min(stop, first + DRAWN_BLOCK)
        position = _lay_out_numbers(xu, first, last, k, u, counter_key, first_counter, limit, position, numbers)
        _round_laid_out(xf, xu, ou, first, last, k, mode, scale_1, scale_2, numbers)


@numba.njit(**JIT_OPTIONS)
def drawn_serial(xf, xu, ou, karray, mode, scale_1, scale_2, u, counter_key, first_counter, limit):
    """Round ``xf`` (bit patterns ``xu``) into ``ou`` by one thread, the ``j``-th element that takes
    a number taking ``u[j]`` or the counter's (see :func:`_drawn_range`)."""
    _drawn_range(xf, xu, ou, 0, xu.size, _tuple(karray), mode, scale_1, scale_2, u, counter_key, first_counter,
                 limit, 0)


@numba.njit(parallel=True, **JIT_OPTIONS)
def drawn_parallel(xf, xu, ou, karray, mode, scale_1, scale_2, u, counter_key, first_counter, limit, chunk,
                   starts):
    """As :func:`drawn_serial`, chunk ``c`` of ``chunk`` elements from number ``starts[c]`` on."""
    k = _tuple(karray)
    n = xu.size
    for c in prange((n + chunk - 1) // chunk):
        _drawn_range(xf, xu, ou, c * chunk, min(n, (c + 1) * chunk), k, mode, scale_1, scale_2, u, counter_key,
                     first_counter, limit, starts[c])


# --- entry point ---------------------------------------------------------------------------------------

def handles(x: np.ndarray, spec: RoundingSpec) -> bool:
    """Whether :func:`round_array` (a deterministic mode or no rounding), :func:`round_stochastic`
    (modes 5 and 6) or, under CPFloat's rules, :func:`round_drawn` (also bit flips) rounds ``x``
    by ``spec``: float32/float64 in native byte order, bit flips under CPFloat's rules only."""
    return x.dtype.char in _UNSIGNED and x.dtype.isnative and (not spec.flips or spec.range_rules == "cpfloat")


def round_array(x: np.ndarray, spec: RoundingSpec) -> np.ndarray:
    """CPFloat's rounding of ``x`` (see :func:`handles`) by ``spec``; a new array of x's shape
    and dtype, bit for bit :func:`~pychop_compat.rules.cpfloat.round_cpfloat`'s result."""
    mode = int(spec.round)
    if mode in (5, 6):
        raise ValueError("round_array: the stochastic modes take their numbers: round_stochastic.")
    if mode not in ROUND_MODES:
        return x.copy()  # CPFloat's "no rounding": the input bit for bit, whatever the switches
    char = x.dtype.char
    k = _spec_constants(spec, char)
    out, x_flat, out_flat = in_memory_order(x)
    utype = _UNSIGNED[char]
    xu, ou = x_flat.view(utype), out_flat.view(utype)
    if xu.size < SERIAL_BELOW:
        round_serial(xu, ou, k, mode)
    else:
        round_parallel(xu, ou, k, mode, CHUNK)
    return out


def small_call(spec: RoundingSpec, dtype: np.dtype) -> Callable[[np.ndarray], np.ndarray]:
    """:func:`round_array` for ``spec`` on arrays of ``dtype`` below :data:`SERIAL_BELOW`
    elements, with the constants found once (the router keeps it per spec and dtype)."""
    mode = int(spec.round)
    if mode not in ROUND_MODES or mode in (5, 6):
        return lambda x: round_array(x, spec)
    k = _spec_constants(spec, dtype.char)

    def call(x: np.ndarray) -> np.ndarray:
        if not x.flags.c_contiguous:
            return round_array(x, spec)
        out = np.empty(x.shape, dtype)
        if x.ndim == 1:  # (round_small looked up here: tests spy)
            round_small(x, out, k, mode)
        else:
            round_small(x.reshape(-1), out.reshape(-1), k, mode)
        return out

    return call


def round_stochastic(x: np.ndarray, spec: RoundingSpec, u: np.ndarray) -> np.ndarray:
    """CPFloat's stochastic rounding (``spec.round`` 5 or 6) of the 1-D array ``x`` with the
    float64 number ``u[i]`` for element ``i`` (see :func:`handles`); a new array, bit for bit
    :func:`~pychop_compat.rules.cpfloat.round_cpfloat`'s result with these numbers."""
    mode = int(spec.round)
    if mode not in (5, 6) or x.ndim != 1 or u.shape != x.shape:
        raise ValueError("round_stochastic: modes 5 and 6, a 1-D array and one number per element.")
    char = x.dtype.char
    k = _spec_constants(spec, char)
    scale_1, scale_2 = _tiny_scales(spec, x.dtype)
    xc = np.ascontiguousarray(x)
    out = np.empty_like(xc)
    utype = _UNSIGNED[char]
    numbers = np.ascontiguousarray(u, dtype=np.float64)
    if xc.size < SERIAL_BELOW:
        stochastic_serial(xc, xc.view(utype), out.view(utype), numbers, k, mode, scale_1, scale_2)
    else:
        stochastic_parallel(xc, xc.view(utype), out.view(utype), numbers, k, mode, scale_1, scale_2, CHUNK)
    return out


def _tiny_scales(spec: RoundingSpec, dtype: np.dtype) -> tuple:
    """``2^-tiny_exponent`` in two factors (it may overflow alone): below the smallest result the
    fraction is ``|v|`` times both (:func:`_round_stochastic`)."""
    tiny_exponent = constants_for(spec, dtype.name).tiny_exponent
    first = min(-tiny_exponent, 1000)
    return math.ldexp(1.0, first), math.ldexp(1.0, -tiny_exponent - first)


_NO_NUMBERS = np.full(1, 2.0)


def round_drawn(x: np.ndarray, spec: RoundingSpec, sources: RandomSources) -> np.ndarray:
    """CPFloat's rules with random numbers (see :func:`handles`): stochastic rounding (modes 5
    and 6), then bit flips; a new array of x's shape and dtype, bit for bit
    :func:`~pychop_compat.rules.cpfloat.round_cpfloat` then
    :func:`~pychop_compat.rules.cpfloat.flip_bits` in column-major order, with the same numbers
    of ``sources`` (stochastic ones limited to ``spec.random_bits`` bits, if set): drawn in one
    call after a counting pass (the counter's made in the loop)."""
    mode = int(spec.round)
    xf = x.ravel(order="F")  # CPFloat's numbers go to the elements in column-major order
    if mode in (5, 6):
        out = _round_drawn(xf, spec, sources)
    else:
        out = round_array(xf, spec)
    if spec.flips and mode in ROUND_MODES:
        out = flip_bits(out, effective_format(spec.fmt, x.dtype, spec.limits_exponent), spec.flip_scope, spec.p,
                        sources)
    return out.reshape(x.shape, order="F")


def _round_drawn(xf: np.ndarray, spec: RoundingSpec, sources: RandomSources) -> np.ndarray:
    """Stochastic rounding of the column-major ``xf`` for :func:`round_drawn`."""
    mode = int(spec.round)
    char = xf.dtype.char
    k = _spec_constants(spec, char)
    scale_1, scale_2 = _tiny_scales(spec, xf.dtype)
    utype = _UNSIGNED[char]
    xu = xf.view(utype)
    out = np.empty_like(xf)
    counts = count_draws(xu, k, CHUNK)
    total = int(counts.sum())
    counter = sources.counter
    limit = 0.0
    if counter is not None and sources.stochastic == counter.stochastic:  # its ROUND stream, made here
        stream = counter.take(total)
        u, counter_key, first_counter = _FROM_COUNTER, np.uint64(stream.keys[0]), np.uint64(stream.offset)
        limit = math.ldexp(1.0, spec.random_bits) if spec.random_bits else 0.0
    else:
        drawn = limited_bit_sources(sources, spec.random_bits).stochastic if spec.random_bits else sources.stochastic
        u = np.asarray(drawn(total), np.float64).ravel() if total else _NO_NUMBERS
        counter_key = first_counter = np.uint64(0)
    if xf.size < SERIAL_BELOW:
        drawn_serial(xf, xu, out.view(utype), k, mode, scale_1, scale_2, u, counter_key, first_counter, limit)
    else:
        starts = np.zeros(counts.size, np.int64)
        np.cumsum(counts[:-1], out=starts[1:])
        drawn_parallel(xf, xu, out.view(utype), k, mode, scale_1, scale_2, u, counter_key, first_counter, limit,
                       CHUNK, starts)
    return out


#: ``u`` of :func:`drawn_serial` for the counter's numbers.
_FROM_COUNTER = np.zeros(0, np.float64)


lock_kernel_caches(globals())
