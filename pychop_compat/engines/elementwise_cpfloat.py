"""CPFloat's deterministic rounding as a pure elementwise function on bit patterns, written once
against an array namespace (NumPy, CuPy, JAX, torch).

The rules are those of :func:`pychop_compat.rounding.extended.round_cpfloat`
(CPFloat's modes -1, 0, 1, 2, 3, 4, 7 and "no rounding"; its ``subnormal``,
``explim``, ``saturation`` and ``infinity`` switches; its sign-of-zero rule;
the encodings of the catalogue's formats, E8M0 included) and the arithmetic
that of the compiled kernel :mod:`.numba_cpfloat`, which shares
:func:`cpfloat_constants` with this module.  A float32 or float64 magnitude
viewed as an integer is its exponent field followed by its significand, so
rounding to a grid of ``2^s`` storage ulps is ``(m + add) & ~(2^s - 1)``, a
carry moving to the next binade by itself; ``s`` is ``p - t`` in the target's
normal range and grows below it (the subnormal grid); what lies below the
smallest result rounds to ``0`` or that result.  Every step is integer
arithmetic, a comparison of integers or a ``where``: no float operation
touches a value, so neither XLA on the CPU (which treats subnormal operands as
zero) nor a GPU kernel compiled with flush-to-zero can change a result, and
no Python branch depends on data, so the function traces under ``jax.jit``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np

from ..formats import Format
from ..options import ChopSpec
from ..rounding.extended import ROUND_MODES, effective_format
from .device_plan import CARRIERS
from .elementwise import Namespace

__all__ = ["CpfloatConstants", "cpfloat_constants", "cpfloat_covers", "round_cpfloat_elementwise"]

# (significand bits p, exponent bias, largest exponent) of the storage formats, by dtype character.
_STORAGE = {"f": (24, 127, 127), "d": (53, 1023, 1023)}


@dataclass(frozen=True)
class CpfloatConstants:
    """The integers that CPFloat's rounding of one (format, mode, switches, storage) needs.

    Bit patterns are those of the storage format (float32 or float64) read as
    unsigned integers.  An element of magnitude pattern ``m`` and exponent
    field ``E`` drops ``s = min(max(dropped_top - max(E, 1), dropped), dropped_max)``
    bits; magnitudes below ``tiny_lo`` round to ``0`` or ``tiny_result``
    (``tiny_half`` decides); the special range is where
    ``((b & special_mask) - special_lo) mod 2^width >= special_span``.
    """

    width: int          # storage bits: 32 or 64
    dropped: int        # p - t: the bits dropped in the target's normal range
    dropped_top: int    # dropped + emin + bias: gives the bits dropped below the normal range
    dropped_max: int    # p - 1: beyond this everything is tiny
    hidden: int         # the hidden bit's place value, 2^(p - 1)
    tiny_lo: int        # the smallest result (xmins with subnormals, else xmin)
    tiny_half: int      # half of it: the threshold between 0 and tiny_lo
    tiny_result: int    # what a tiny magnitude rounds up to
    special_mask: int   # see the class notes
    special_lo: int
    special_span: int
    xmax: int           # the largest finite magnitude of the effective format
    inf: int
    nan: int            # the quiet NaN CPFloat returns
    saturation: bool
    infinity: bool
    zero_plus: bool     # zero results are +0 (CPFloat's directed modes off its fast path; fnuz)
    e8m0: bool          # no sign and no zero: only positive inputs give numbers
    xmin: int           # 2^emin (E8M0's smallest number)


@lru_cache(maxsize=512)
def cpfloat_constants(fmt: Format, mode: int, subnormal: bool, explim: bool, saturation: bool,
                      infinity: bool, char: str) -> CpfloatConstants:
    """The :class:`CpfloatConstants` of ``fmt`` in mode ``mode`` with CPFloat's switches, for
    storage ``char`` (``'f'``: float32, ``'d'``: float64)."""
    p, bias, storage_emax = _STORAGE[char]
    ftype = np.float32 if char == "f" else np.float64
    utype = np.uint32 if char == "f" else np.uint64
    width = 8 * np.dtype(ftype).itemsize
    eff = effective_format(fmt, np.dtype(ftype), explim)
    t, emin = eff.t, eff.emin

    def bits(value: float) -> int:
        return int(np.array(value, ftype).view(utype))

    xmin = bits(eff.xmin)  # 2^emin, a storage normal number (emin is at least the storage's)
    if subnormal:
        tiny_lo = bits(math.ldexp(1.0, emin - t + 1))  # xmins
        # xmins / 2 lies below the storage's smallest subnormal only when xmins is that one;
        # then the sole tiny magnitude is 0, and any positive threshold decides it.
        tiny_half = max(bits(math.ldexp(1.0, emin - t)), 1)
    else:
        tiny_lo = xmin
        tiny_half = bits(math.ldexp(1.0, emin - 1))
    # CPFloat's sign-of-zero rule (see round_cpfloat): off its fast path the directed modes
    # up and down give +0; the fnuz formats have no -0.
    fast_path = eff.emax == storage_emax and not saturation and infinity
    zero_plus = (mode in (2, 3) and not fast_path) or eff.encoding == "fnuz"
    e8m0 = eff.encoding == "e8m0"
    top_lo = bits(math.ldexp(1.0, eff.emax))  # 2^emax: the target's top binade starts there
    # Regular patterns b: lo <= (b & mask) < lo + span, the magnitudes below the top binade; for
    # E8M0 only the positive ones from tiny_lo up (no sign, no zero).
    special = ((1 << width) - 1, tiny_lo, top_lo - tiny_lo) if e8m0 else ((1 << (width - 1)) - 1, 0, top_lo)
    return CpfloatConstants(
        width=width, dropped=p - t, dropped_top=p - t + emin + bias, dropped_max=p - 1, hidden=1 << (p - 1),
        tiny_lo=tiny_lo, tiny_half=tiny_half, tiny_result=tiny_lo, special_mask=special[0],
        special_lo=special[1], special_span=special[2], xmax=bits(eff.xmax), inf=bits(math.inf),
        nan=bits(math.nan), saturation=bool(saturation), infinity=bool(infinity), zero_plus=zero_plus,
        e8m0=e8m0, xmin=xmin)


def cpfloat_covers(spec: ChopSpec) -> bool:
    """Whether :func:`round_cpfloat_elementwise` computes ``spec``: CPFloat's rules
    (``range_rules='cpfloat'``) in a deterministic mode or "no rounding", without bit flips."""
    return (getattr(spec, "range_rules", "chop") == "cpfloat" and spec.round not in (5, 6)
            and not spec.flips)


def _dtype_name(v: Any) -> str:
    return str(v.dtype).rpartition(".")[2]  # torch spells 'torch.float32'


def round_cpfloat_elementwise(ns: Namespace, v: Any, spec: ChopSpec) -> Any:
    """CPFloat's rounding of every element of ``v`` (float32 or float64, any shape): a new array.

    Parameters
    ----------
    ns : Namespace
        The array library; ``ns.xp`` needs ``where``, ``ones_like`` and the
        integer dtypes, its arrays the bitwise and shift operators.
    v : array
        The values in storage format (never modified).
    spec : ChopSpec
        CPFloat's rules in a deterministic mode (see :func:`cpfloat_covers`).

    Returns
    -------
    array
        Same shape and dtype as ``v``, bit for bit
        :func:`pychop_compat.rounding.extended.round_cpfloat`'s result.

    Raises
    ------
    ValueError
        ``spec`` is not covered (stochastic modes, bit flips, chop's rules).
    """
    if not cpfloat_covers(spec):
        raise ValueError("round_cpfloat_elementwise: CPFloat's rules in a deterministic mode without flips "
                         "only (stochastic modes and flips draw numbers in column-major order on the host).")
    xp = ns.xp
    name = _dtype_name(v)
    if name not in CARRIERS:
        raise TypeError(f"CPFloat's rounding needs float32 or float64 storage, not {name}.")
    carrier = CARRIERS[name]
    int_dtype = xp.int64 if carrier.mant == 52 else xp.int32
    bits = ns.bitcast(v, int_dtype)
    mode = int(spec.round)
    if mode not in ROUND_MODES:  # "no rounding": the input bit for bit, whatever the switches
        return ns.bitcast(bits | 0, v.dtype)  # (| 0: a new array, never a view of v)
    k = cpfloat_constants(spec.fmt, mode, bool(spec.keeps_subnormals), bool(spec.limits_exponent),
                          bool(spec.saturation), bool(spec.infinity), "d" if carrier.mant == 52 else "f")

    magnitude = bits & carrier.abs_mask
    negative = bits < 0
    is_nan, is_inf = magnitude > k.inf, magnitude == k.inf
    m = xp.where(magnitude >= k.inf, 0, magnitude)  # Inf and NaN are settled below; no overflow in m + add
    field = m >> carrier.mant
    e = xp.where(field > 1, field, 1)  # storage subnormals sit at the exponent of field 1
    s = k.dropped_top - e
    s = xp.where(s < k.dropped, k.dropped, s)
    s = xp.where(s > k.dropped_max, k.dropped_max, s)
    low = (xp.ones_like(m) << s) - 1
    keep = ~low
    if mode == 1:
        odd = ((m | k.hidden) >> s) & low & 1  # the last kept bit; 0 when nothing is dropped
        r = (m + (low >> 1) + odd) & keep
        up = m > k.tiny_half  # the tie goes to the even 0
    elif mode == -1:
        r = (m + ((low + 1) >> 1)) & keep
        up = m >= k.tiny_half
    elif mode == 0:
        r = (m + (low >> 1)) & keep
        up = m > k.tiny_half
    elif mode == 2:
        r = (m + xp.where(negative, 0, low)) & keep
        up = (m != 0) & ~negative
    elif mode == 3:
        r = (m + xp.where(negative, low, 0)) & keep
        up = (m != 0) & negative
    elif mode == 4:
        r = m & keep
        up = None
    else:  # 7, round to odd: with p - 1 bits dropped the kept significand is the hidden bit, odd
        unit = (xp.ones_like(m) << s) & ~k.hidden
        r = (m & keep) | (((m & low) + low) & unit)
        up = m != 0
    # (where(condition, constant, array) throughout: the array keeps the storage's integer type)
    tiny = m < k.tiny_lo
    r = xp.where(tiny, 0, r)
    if up is not None:
        r = xp.where(tiny & up, k.tiny_result, r)

    # Overflow (a carry beyond xmax) and Inf inputs; the directed modes that round toward zero
    # there give xmax.
    if mode in (4, 7):
        toward_zero = negative | ~negative
    elif mode == 2:
        toward_zero = negative
    elif mode == 3:
        toward_zero = ~negative
    else:
        toward_zero = negative & ~negative
    over = r > k.xmax
    if k.saturation:
        r = xp.where(over | is_inf, k.xmax, r)
    else:
        r = xp.where(over & ~toward_zero, k.inf if k.infinity else k.nan, r)
        r = xp.where(over & toward_zero, k.xmax, r)
        if k.infinity:
            r = xp.where(is_inf, k.inf, r)
        else:
            r = xp.where(is_inf & toward_zero, k.xmax, r)
            r = xp.where(is_inf & ~toward_zero, k.nan, r)
    signed = (negative & (r != 0)) if k.zero_plus else negative
    out = xp.where(signed, r | carrier.sign_bit, r)
    out = xp.where(is_nan, k.nan, out)  # NaN in: the quiet NaN
    if k.e8m0:  # no sign, no zero: only positive inputs give numbers
        out = xp.where(r == 0, k.xmin, out)
        out = xp.where(negative | (magnitude == 0) | is_nan, k.nan, out)
    return ns.bitcast(out, v.dtype)

