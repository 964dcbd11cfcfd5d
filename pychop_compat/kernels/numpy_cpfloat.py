"""A fast CPU engine for CPFloat's deterministic modes, bit for bit equal to
:func:`pychop_compat.rules.cpfloat.round_cpfloat`.

As in :mod:`.numpy_fast`, *regular* elements (storage-normal, in the target's normal range
below its top binade) are rounded on their bit patterns (to nearest with subnormals: in the
FPU, everything below the top binade, ``_nearest_blocks``); the reference rounds the rest.
"""

from __future__ import annotations

from typing import Optional

import numpy as np

from ..spec import RoundingSpec
from ..random.sources import MATLAB_STREAM
from ..rules.cpfloat import ROUND_MODES, effective_format, round_cpfloat
from .numpy_fast import LAYOUTS, map_blocks, round_regular

__all__ = ["round_array"]


def round_array(x: np.ndarray, spec: RoundingSpec) -> np.ndarray:
    """CPFloat's rounding of ``x`` (float32/float64, any shape) by ``spec`` (modes other than
    5 and 6, no flips); a new array of x's shape and dtype."""
    mode = spec.round
    if mode not in ROUND_MODES:
        return x.copy()  # no rounding at all
    layout = LAYOUTS[x.dtype]
    u, p, bias, width = layout.utype, layout.p, layout.emax, layout.width  # (the bias is emax)
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
    xu, ou = flat.view(u), out.view(u)
    idx: Optional[np.ndarray]
    if regular_hi <= regular_lo or eff.encoding == "e8m0":  # E8M0: no sign, every element checked
        idx = np.arange(flat.size)
    else:
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
                                 spec.saturation, spec.infinity, MATLAB_STREAM,
                                 rules="correct" if spec.range_rules == "correct" else "cpfloat")
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
                round_regular(ub, ob, mode, d, t, low, keep, unit, half, u(width - 1), tmp[:j - i])
        return found

    return work


def _nearest_blocks(xu, ou, u, p: int, d: int, regular_lo: int, regular_hi: int, exp_mask, width: int,
                    signed_zeros: bool):
    """Work on a range of blocks (for :func:`map_blocks`): round to nearest with subnormals in the
    FPU, ``(x + S) - S`` as in :mod:`.numpy_fast` with ``e`` raised to ``emin`` below the normal
    range (the subnormal grid), for everything below the top binade; a zero keeps ``x``'s sign
    (unless not ``signed_zeros``).  Returns the indices of the top binade and above."""
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

