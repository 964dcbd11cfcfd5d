"""A fast CPU engine for CPFloat's deterministic modes, bit for bit equal to
:func:`pychop_compat.rules.cpfloat.round_cpfloat`.

As in :mod:`.numpy_fast`, a positive float viewed as an unsigned integer is
its exponent field followed by its significand, so rounding to ``t`` bits is
integer arithmetic on the low ``d = p - t`` bits, a carry moving to the next
binade by itself.  *Regular* elements (storage-normal inputs in the target's
normal range below its top binade) all lose the same ``d`` bits and can
neither overflow nor underflow: a few whole-array integer operations round
them.  The rest (zeros, the subnormal range and below, the top binade and
above, Inf, NaN) are gathered and rounded by the reference, which owns every
range rule.  Round to nearest with subnormals goes further: the FPU rounds
every element below the top binade, subnormal range included (see
``_nearest_blocks``), and only the top binade and above are gathered.
Large arrays are split over threads as :mod:`.numpy_fast` splits them.
"""

from __future__ import annotations

from typing import Optional

import numpy as np

from ..spec import RoundingSpec
from ..random.sources import MATLAB_STREAM
from ..rules.cpfloat import ROUND_MODES, effective_format, round_cpfloat
from .numpy_fast import map_blocks

__all__ = ["round_array"]

# (unsigned view, significand bits p, exponent bias) of the storage formats.
_LAYOUT = {np.dtype(np.float32): (np.uint32, 24, 127), np.dtype(np.float64): (np.uint64, 53, 1023)}
def round_array(x: np.ndarray, spec: RoundingSpec) -> np.ndarray:
    """CPFloat's rounding of ``x`` (float32/float64, any shape) by ``spec`` (modes other than
    5 and 6, no flips); a new array of x's shape and dtype."""
    mode = spec.round
    if mode not in ROUND_MODES:
        return x.copy()  # no rounding at all
    u_type, p, bias = _LAYOUT[x.dtype]
    eff = effective_format(spec.fmt, x.dtype, spec.limits_exponent)
    d = p - eff.t
    flat = np.ascontiguousarray(x).reshape(-1)
    out = np.empty_like(flat)
    if flat.size == 0:
        return out.reshape(x.shape)
    # Exponent fields of the regular range [2^emin, 2^emax): from the target's smallest normal
    # (at least the storage's) up to, not including, the target's top binade.
    regular_lo = max(eff.emin, 1 - bias) + bias
    regular_hi = eff.emax + bias
    u = u_type
    xu, ou = flat.view(u), out.view(u)
    idx: Optional[np.ndarray]
    if regular_hi <= regular_lo or eff.encoding == "e8m0":  # E8M0: no sign, every element checked
        idx = np.arange(flat.size)
    else:
        width = 8 * x.dtype.itemsize
        exp_mask = u(((1 << (width - p)) - 1) << (p - 1))
        if (mode == 1 and d >= 2 and spec.keeps_subnormals and eff.encoding in ("ieee", "fn", "finite", "fnuz")
                and eff.emax - 1 + d <= bias):
            blocks = _nearest_blocks(xu, ou, u, p, d, regular_lo, regular_hi, exp_mask, width,
                                     eff.encoding != "fnuz")
        else:
            blocks = _integer_blocks(xu, ou, u, p, d, eff.t, mode, regular_lo, regular_hi, exp_mask, width)
        parts = [part for found in map_blocks(blocks, flat.size) for part in found]
        idx = np.concatenate(parts) if parts else None
    if idx is not None and idx.size:
        out[idx] = round_cpfloat(flat[idx], spec.fmt, mode, spec.keeps_subnormals, spec.limits_exponent,
                                 spec.saturation, spec.infinity, MATLAB_STREAM)
    return out.reshape(x.shape)


def _integer_blocks(xu, ou, u, p: int, d: int, t: int, mode: int, regular_lo: int, regular_hi: int,
                    exp_mask, width: int):
    """Work on a range of blocks (for :func:`map_blocks`): the regular elements by integer
    arithmetic on ``d`` dropped bits; returns the indices of the special ones."""
    low = u((1 << d) - 1)
    keep = ~low
    unit = u(1 << d)
    half = u(1 << (d - 1)) if d else u(0)
    lo_field, span = u(regular_lo << (p - 1)), u((regular_hi - regular_lo) << (p - 1))

    def work(start: int, stop: int, block: int) -> list:
        found = []
        field = np.empty(min(block, stop - start), u)
        tmp = np.empty_like(field)
        for i in range(start, stop, block):
            j = min(i + block, stop)
            ub, ob, f = xu[i:j], ou[i:j], field[:j - i]
            # Regular: lo <= exponent field < hi, one unsigned comparison (below lo wraps around);
            # two reductions settle the common block without special elements.
            np.bitwise_and(ub, exp_mask, out=f)
            f -= lo_field
            if np.maximum.reduce(f) >= span:
                found.append(np.flatnonzero(f >= span) + i)
            if d == 0:
                np.copyto(ob, ub)  # the storage's precision: nothing to round
            else:
                _round_regular(ub, ob, mode, d, t, low, keep, unit, half, u(width - 1), tmp[:j - i])
        return found

    return work


def _nearest_blocks(xu, ou, u, p: int, d: int, regular_lo: int, regular_hi: int, exp_mask, width: int,
                    signed_zeros: bool):
    """Work on a range of blocks (for :func:`map_blocks`): round to nearest, ties to even, with
    subnormals, in the FPU.  ``(x + S) - S`` with ``S = 1.5 * 2^(e + d)`` rounds ``x`` to the
    grid ``2^(e - t + 1)`` (``d >= 2`` keeps ``x + S`` in ``S``'s binade); raising ``e`` to
    ``emin`` below the normal range gives the subnormal grid, so every element below the top
    binade (zeros, subnormals and what underflows included) is rounded this way.  A zero result
    takes ``x``'s sign (CPFloat keeps it; ``signed_zeros`` False: +0).  The top binade and
    above (overflow, Inf, NaN) are special: their indices are returned."""
    ftype = np.float32 if width == 32 else np.float64
    floor = u(regular_lo << (p - 1))  # exponent field of 2^emin
    hi = u(regular_hi << (p - 1))  # exponent field of 2^emax: the top binade starts there
    s_off = u((d << (p - 1)) | (1 << (p - 2)))  # from 2^e's field to 1.5 * 2^(e + d)'s
    sign = u(1 << (width - 1))
    # Results round to zero only from |x| <= xmins / 2, whose fields are at most that one's.
    zero_field = u(max(regular_lo - (p - d), 0) << (p - 1))  # 2^(emin - t) = xmins / 2

    def work(start: int, stop: int, block: int) -> list:
        found = []
        big = np.empty(min(block, stop - start), u)
        for i in range(start, stop, block):
            j = min(i + block, stop)
            ub, ob, s = xu[i:j], ou[i:j], big[:j - i]
            np.bitwise_and(ub, exp_mask, out=s)
            if np.maximum.reduce(s) >= hi:
                found.append(np.flatnonzero(s >= hi) + i)
            zeros_possible = signed_zeros and np.minimum.reduce(s) <= zero_field
            np.maximum(s, floor, out=s)
            s += s_off
            sf, of = s.view(ftype), ob.view(ftype)
            np.add(ub.view(ftype), sf, out=of)
            np.subtract(of, sf, out=of)
            if zeros_possible:
                np.bitwise_and(ub, sign, out=s)
                ob |= s
        return found

    return work


def _round_regular(ub, ob, mode: int, d: int, t: int, low, keep, unit, half, top, tmp) -> None:
    """Round the bit patterns ``ub`` into ``ob`` as if all were regular (sign bit untouched;
    ``tmp``: a scratch array like ``ub``)."""
    u = ub.dtype.type
    if mode == 1:
        if t == 1:
            np.add(ub, half, out=ob)  # the kept significand is the hidden bit, odd: ties go up
        else:
            np.right_shift(ub, u(d), out=ob)
            ob &= u(1)
            ob += half - u(1)  # half an ulp minus one, plus the last kept bit: ties to even
            ob += ub
    elif mode == -1:
        np.add(ub, half, out=ob)  # ties away from zero
    elif mode == 0:
        np.add(ub, half - u(1), out=ob)  # ties toward zero
    elif mode in (2, 3):
        np.right_shift(ub, top, out=ob)  # 1 for negative
        if mode == 2:
            ob -= u(1)  # all ones for positive: they go up; negative ones are cut
            ob &= low
        else:
            ob *= low  # ulp - 1 for negative
        ob += ub
    elif mode == 7 and t > 1:
        # Round to odd: cut, then set the last kept bit when anything was cut.  The dropped
        # bits plus (ulp - 1) carry into the last kept bit exactly when they are not all zero.
        np.bitwise_and(ub, low, out=tmp)
        tmp += low
        tmp &= unit
        np.bitwise_and(ub, keep, out=ob)
        ob |= tmp
        return
    else:  # toward zero (and round to odd with t = 1: the significand 1 is odd already)
        np.bitwise_and(ub, keep, out=ob)
        return
    ob &= keep
