"""Numba kernels of the compiled CPU engine (imported only by :mod:`.compiled`, on first use).

One element at a time, in one pass over memory:

* a *regular* element (its exponent field in ``[LO, HI)``: finite, normal,
  below the format's top binade, above its subnormal range) loses the same
  ``d0`` low bits as every other; rounding is integer arithmetic on its bit
  pattern (:func:`_regular_bits`, :func:`_regular_stochastic`);
* every other element (zero, subnormal, chop's subnormal block, the top
  binade, Inf, NaN) takes :func:`_general`, chop.m's scaling with ``frexp``
  and ``ldexp`` in float64 followed by its overflow and underflow rules.

Constants come in three small arrays made once per (spec, dtype) by
:mod:`.compiled`: ``ip`` (int64: mode, t, emin, emins, explim, subnormal,
d0, carrier precision, carrier width), ``up`` (uint64 bit masks) and ``fp``
(float64: xmax, xboundary, the smallest kept magnitude, p, 2^-d0).  Bit
patterns of float32 inputs are widened to uint64, so one code path serves
both classes (the mask constants carry the width).

Every kernel is compiled with ``cache=True`` (no recompilation in a new
process) and without fastmath (it would break the exact rounding).
"""

from __future__ import annotations

import math

import numba
import numpy as np
from numba import prange

from .device_random import FLIP_BIT, FLIP_CHOICE, GOLDEN, MIX1, MIX2, ROUND  # noqa: F401

# Indices into the constant arrays (see module notes).
MODE, T, EMIN, EMINS, EXPLIM, KEEPSUB, D0, P, WIDTH = range(9)
LO, HI, INF, SIGN, MAG, LOW0, KEEP0, HALFM1, UNIT0 = range(9)
XMAX, XBOUNDARY, MIN_REP, PFLIP, FRAC_SCALE = range(5)

_U0 = np.uint64(0)
_U1 = np.uint64(1)
_G = np.uint64(GOLDEN)
_M1 = np.uint64(MIX1)
_M2 = np.uint64(MIX2)
_S30, _S27, _S31, _S12 = np.uint64(30), np.uint64(27), np.uint64(31), np.uint64(12)

_jit = dict(cache=True, nogil=True, error_model="numpy")
_inline = _jit  # small helpers: LLVM inlines them into the kernels


# --- the counter-based generator of device_random ----------------------------------------------


@numba.njit(**_inline)
def counter_uniform(key, j):
    """``((mix(key + j G) >> 12) + 1/2) 2^-52`` (uint64 arithmetic wraps modulo 2**64)."""
    z = key + j * _G
    z = (z ^ (z >> _S30)) * _M1
    z = (z ^ (z >> _S27)) * _M2
    z = z ^ (z >> _S31)
    return (np.float64(z >> _S12) + 0.5) * 2.0**-52


# --- one element --------------------------------------------------------------------------------


@numba.njit(**_inline)
def _exponent(v):
    """frexp's exponent minus one (x = 2^e * 1.f); -1 for zero, Inf and NaN, like NumPy's frexp."""
    if v == 0.0 or not math.isfinite(v):
        return -1
    return math.frexp(v)[1] - 1


@numba.njit(**_inline)
def _quantum(e, ip):
    """The exponent of the grid spacing of an element of exponent ``e``, and whether it is in
    chop's subnormal block."""
    if ip[EXPLIM] != 0 and ip[EMINS] <= e < ip[EMIN]:
        return ip[EMINS], True
    return e - ip[T] + 1, False


@numba.njit(**_inline)
def _to_class(c, single):
    """A float64 value as the input's class (float32 rounding for single, as NumPy's stores)."""
    if single:
        return np.float64(np.float32(c))
    return c


@numba.njit(**_inline)
def _limit(c, v, ip, fp):
    """chop.m's overflow and underflow rules (explim = 1) on the result ``c`` of the input ``v``."""
    mode = ip[MODE]
    xmax, xb = fp[XMAX], fp[XBOUNDARY]
    inf = np.inf
    if mode == 1 or mode == 6:
        if v >= xb:
            return inf
        if v <= -xb:
            return -inf
    elif mode == 2:
        if v > xmax:
            return inf
        if v < -xmax and v != -inf:
            return -xmax
    elif mode == 3:
        if v > xmax and v != inf:
            return xmax
        if v < -xmax:
            return -inf
    else:
        if v > xmax and v != inf:
            return xmax
        if v < -xmax and v != -inf:
            return -xmax
    min_rep = fp[MIN_REP]
    magnitude = abs(c)
    if not magnitude < min_rep:
        return c
    if mode == 1:
        half = min_rep / 2
        if magnitude > half or (magnitude == half and ip[KEEPSUB] == 0):
            return math.copysign(min_rep, c)
    elif mode == 2 and c > 0:
        return min_rep
    elif mode == 3 and c < 0:
        return -min_rep
    return 0.0


@numba.njit(**_inline)
def _needs_draw(v, ip):
    """``(subnormal block, draws)``: chop.m's block of ``v`` and whether its scaled value is
    not an integer (Inf and NaN too: their fraction inf - inf is NaN)."""
    e = _exponent(v)
    quantum, sub = _quantum(e, ip)
    if not math.isfinite(v):
        return sub, True
    y = math.ldexp(v, -quantum)
    return sub, y != math.floor(y)


@numba.njit(**_inline)
def _general(v, ip, fp, single, rnd, plus_zero, flip_shift):
    """chop of one value (float64 holding the input), any mode; the result as float64.

    ``rnd``: the element's number (stochastic modes, when it draws);
    ``plus_zero``: a zero comes back +0 (chop.m's stochastic branch when its block drew);
    ``flip_shift``: flip bit ``flip_shift + 1`` of the rounded integer (-1: no flip).
    """
    mode = ip[MODE]
    e = _exponent(v)
    quantum, sub = _quantum(e, ip)
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
    if ip[EXPLIM] != 0:
        c = _to_class(_limit(c, v, ip, fp), single)
    return c


@numba.njit(**_inline)
def _is_regular(b, up):
    field = (b & up[MAG]) & up[INF]
    return field >= up[LO] and field < up[HI]


@numba.njit(**_inline)
def _regular_bits(b, ip, up):
    """Deterministic rounding of a regular element's bit pattern (modes 1-4)."""
    d0 = ip[D0]
    if d0 == 0:
        return b
    mode = ip[MODE]
    if mode == 1:
        if d0 == ip[P] - 1:  # t = 1: the kept integer is the hidden bit, odd: ties go up
            return (b + up[HALFM1] + _U1) & up[KEEP0]
        return (b + ((b >> np.uint64(d0)) & _U1) + up[HALFM1]) & up[KEEP0]
    negative = (b & up[SIGN]) != _U0
    if mode == 2:
        return ((b + up[LOW0]) & up[KEEP0]) if not negative else (b & up[KEEP0])
    if mode == 3:
        return ((b + up[LOW0]) & up[KEEP0]) if negative else (b & up[KEEP0])
    return b & up[KEEP0]


@numba.njit(**_inline)
def _regular_stochastic(b, ip, up, fp, rnd):
    """Stochastic rounding (modes 5, 6) of a regular element's bit pattern with its number."""
    low = b & up[LOW0]
    kept = b & up[KEEP0]
    if low == _U0:
        return b
    if ip[MODE] == 5:
        go_up = rnd <= np.float64(low) * fp[FRAC_SCALE]
    else:
        go_up = rnd <= 0.5
    return kept + up[UNIT0] if go_up else kept


# --- deterministic modes --------------------------------------------------------------------------


@numba.njit(**_inline)
def _det_one(xf, xu, of, ou, i, ip, up, fp, single):
    b = np.uint64(xu[i])
    if _is_regular(b, up):
        ou[i] = _regular_bits(b, ip, up)
    else:
        of[i] = _general(np.float64(xf[i]), ip, fp, single, 2.0, False, -1)


@numba.njit(**_jit)
def det_serial(xf, xu, of, ou, ip, up, fp, single):
    for i in range(xf.size):
        _det_one(xf, xu, of, ou, i, ip, up, fp, single)


@numba.njit(parallel=True, **_jit)
def det_parallel(xf, xu, of, ou, ip, up, fp, single, chunk):
    n = xf.size
    for c in prange((n + chunk - 1) // chunk):
        for i in range(c * chunk, min(n, (c + 1) * chunk)):
            _det_one(xf, xu, of, ou, i, ip, up, fp, single)


# --- the counter-based generator: each element its own numbers ------------------------------------


@numba.njit(**_inline)
def _counter_one(xf, xu, of, ou, i, ip, up, fp, single, keys, offset):
    j = offset + np.uint64(i)
    mode = ip[MODE]
    rnd = 2.0
    if mode >= 5:
        rnd = _to_class(counter_uniform(keys[0], j), single)  # compared in the input's class
    if fp[PFLIP] < 0.0:  # no flips
        b = np.uint64(xu[i])
        if mode >= 5 and _is_regular(b, up):
            ou[i] = _regular_stochastic(b, ip, up, fp, rnd)
            return
        if mode < 5 and _is_regular(b, up):
            ou[i] = _regular_bits(b, ip, up)
            return
        of[i] = _general(np.float64(xf[i]), ip, fp, single, rnd, True, -1)
        return
    shift = -1
    if counter_uniform(keys[1], j) <= fp[PFLIP]:
        shift = np.int64(math.floor((ip[T] - 1) * counter_uniform(keys[2], j)))
    of[i] = _general(np.float64(xf[i]), ip, fp, single, rnd, True, shift)


@numba.njit(**_jit)
def counter_serial(xf, xu, of, ou, ip, up, fp, single, keys, offset):
    for i in range(xf.size):
        _counter_one(xf, xu, of, ou, i, ip, up, fp, single, keys, offset)


@numba.njit(parallel=True, **_jit)
def counter_parallel(xf, xu, of, ou, ip, up, fp, single, keys, offset, chunk):
    n = xf.size
    for c in prange((n + chunk - 1) // chunk):
        for i in range(c * chunk, min(n, (c + 1) * chunk)):
            _counter_one(xf, xu, of, ou, i, ip, up, fp, single, keys, offset)


# --- chop.m's draw order: count, draw in bulk (by the caller), round ---------------------------------


@numba.njit(**_inline)
def _classify(xf, xu, i, ip, up):
    """``(subnormal block, draws)`` of element ``i`` (see :func:`_needs_draw`)."""
    b = np.uint64(xu[i])
    if _is_regular(b, up):
        return False, (b & up[LOW0]) != _U0
    return _needs_draw(np.float64(xf[i]), ip)


@numba.njit(parallel=True, **_jit)
def count_draws(xf, xu, ip, up, chunk, stochastic):
    """Per chunk: draws of the normal block, draws of the subnormal block, elements of the
    subnormal block."""
    n = xf.size
    n_chunks = (n + chunk - 1) // chunk
    counts = np.zeros((n_chunks, 3), np.int64)
    for c in prange(n_chunks):
        k_normal = 0
        k_sub = 0
        n_sub = 0
        for i in range(c * chunk, min(n, (c + 1) * chunk)):
            sub, need = _classify(xf, xu, i, ip, up)
            if sub:
                n_sub += 1
                if need and stochastic:
                    k_sub += 1
            elif need and stochastic:
                k_normal += 1
        counts[c, 0] = k_normal
        counts[c, 1] = k_sub
        counts[c, 2] = n_sub
    return counts


@numba.njit(parallel=True, **_jit)
def round_drawn(xf, xu, of, ou, ip, up, fp, single, chunk, starts, rnd_normal, rnd_sub,
                plus_normal, plus_sub, flips, choice_normal, choice_sub, bits_normal, bits_sub):
    """Round with the numbers chop.m drew, in its order: element ``i`` of chunk ``c`` takes the
    next number of its block from the positions ``starts[c]`` (draws normal, draws subnormal,
    flip choices normal, flip choices subnormal, flipped bits normal, flipped bits subnormal)."""
    n = xf.size
    n_chunks = (n + chunk - 1) // chunk
    mode = ip[MODE]
    p = fp[PFLIP]
    for c in prange(n_chunks):
        q = starts[c].copy()
        for i in range(c * chunk, min(n, (c + 1) * chunk)):
            sub, need = _classify(xf, xu, i, ip, up)
            block = 1 if sub else 0
            rnd = 2.0
            if mode >= 5 and need:
                rnd = rnd_sub[q[1]] if sub else rnd_normal[q[0]]
                q[block] += 1
            shift = -1
            if flips:
                u = choice_sub[q[3]] if sub else choice_normal[q[2]]
                q[2 + block] += 1
                if u <= p:
                    shift = (bits_sub[q[5]] if sub else bits_normal[q[4]]) - 1
                    q[4 + block] += 1
            b = np.uint64(xu[i])
            if not flips and not sub and _is_regular(b, up):
                ou[i] = _regular_stochastic(b, ip, up, fp, rnd)
            else:
                plus = plus_sub if sub else plus_normal
                of[i] = _general(np.float64(xf[i]), ip, fp, single, rnd, plus, shift)
