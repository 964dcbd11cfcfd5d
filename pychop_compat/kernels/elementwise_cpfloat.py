"""CPFloat's rounding (:func:`pychop_compat.rules.cpfloat.round_cpfloat`) as a pure elementwise
function on bit patterns, written once against an array namespace (NumPy, CuPy, JAX, torch).

Integer operations and ``where`` only, on the bit-pattern picture of docs/engines.rst ("The
NumPy engine"): nothing for flush-to-zero to change, no Python branch on data (it traces
under ``jax.jit``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Optional

import numpy as np

from ..formats import Format
from ..spec import RoundingSpec
from ..random.sources import RandomSources
from ..rules.cpfloat import ROUND_MODES, effective_format, limited_bit_sources
from .device_plan import CARRIERS
from .elementwise import Namespace, carrier_name

__all__ = ["CpfloatConstants", "cpfloat_constants", "constants_for", "cpfloat_covers", "cpfloat_inexact",
           "host_numbers", "round_cpfloat_elementwise"]


@dataclass(frozen=True)
class CpfloatConstants:
    """The integers that CPFloat's rounding of one (format, mode, switches, storage) needs, as
    unsigned storage bit patterns.  An element of exponent field ``E`` drops ``s =
    min(max(dropped_top - max(E, 1), dropped), dropped_max)`` bits; below ``tiny_lo`` it rounds to
    ``0`` or ``tiny_lo``; special: ``((b & special_mask) - special_lo) mod 2^width >= special_span``.
    """

    width: int          # storage bits: 32 or 64
    dropped: int        # p - t: the bits dropped in the target's normal range
    dropped_top: int    # dropped + emin + bias: gives the bits dropped below the normal range
    dropped_max: int    # p - 1: beyond this everything is tiny
    hidden: int         # the hidden bit's place value, 2^(p - 1)
    tiny_lo: int        # the smallest result (xmins with subnormals, else xmin)
    tiny_half: int      # half of it: the threshold between 0 and tiny_lo
    tiny_exponent: int  # log2 of tiny_lo (the grid of tiny magnitudes in stochastic rounding)
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
    xbnd: int           # xmax plus half its ulp (the format's xboundary; xmax when no bit is dropped)
    beyond_rule: int    # 5 or 6: CPFloat's stochastic rounding beyond xmax (rules.cpfloat.round_cpfloat's
                        # notes on ``rules``) in that mode; 0: the rounded value decides
    inf_to_xmax: bool   # CPFloat's rules without infinity: an Inf input the mode rounds toward zero gives xmax
                        # (correct rounding: Inf, then the encoding)


@lru_cache(maxsize=512)
def cpfloat_constants(fmt: Format, mode: int, subnormal: bool, explim: bool, saturation: bool,
                      infinity: bool, char: str, rules: str = "cpfloat") -> CpfloatConstants:
    """The :class:`CpfloatConstants` of ``fmt`` in mode ``mode`` with CPFloat's switches, for
    storage ``char`` (``'f'``: float32, ``'d'``: float64), under ``rules`` (``'cpfloat'``, or
    ``'correct'``: see :func:`pychop_compat.rules.cpfloat.round_cpfloat`)."""
    carrier = CARRIERS["float32" if char == "f" else "float64"]
    p, bias, bits = carrier.mant + 1, carrier.bias, carrier.bits  # (the bias is the largest exponent)
    width = 8 * carrier.np_float.itemsize
    eff = effective_format(fmt, carrier.np_float, explim)
    t, emin = eff.t, eff.emin
    xmin = bits(eff.xmin)  # 2^emin, a storage normal number (emin is at least the storage's)
    tiny_exponent = emin - t + 1 if subnormal else emin
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
    fast_path = eff.emax == bias and not saturation and infinity
    zero_plus = (mode in (2, 3) and not fast_path) or eff.encoding == "fnuz"
    e8m0 = eff.encoding == "e8m0"
    top_lo = bits(math.ldexp(1.0, eff.emax))  # 2^emax: the target's top binade starts there
    # Regular patterns b: lo <= (b & mask) < lo + span, the magnitudes below the top binade; for
    # E8M0 only the positive ones from tiny_lo up (no sign, no zero).
    special = ((1 << width) - 1, tiny_lo, top_lo - tiny_lo) if e8m0 else ((1 << (width - 1)) - 1, 0, top_lo)
    xmax = bits(eff.xmax)
    # xbnd = xmax + ulp(xmax) / 2: xmax lies in a storage-normal binade, where p - t bits are dropped
    xbnd = xmax + (1 << (p - t - 1)) if p > t else xmax
    beyond_rule = mode if mode in (5, 6) and rules == "cpfloat" and not saturation else 0
    return CpfloatConstants(
        width=width, dropped=p - t, dropped_top=p - t + emin + bias, dropped_max=p - 1, hidden=1 << (p - 1),
        tiny_lo=tiny_lo, tiny_half=tiny_half, tiny_exponent=tiny_exponent,
        special_mask=special[0], special_lo=special[1], special_span=special[2], xmax=xmax,
        inf=bits(math.inf), nan=bits(math.nan), saturation=bool(saturation), infinity=bool(infinity),
        zero_plus=zero_plus, e8m0=e8m0, xmin=xmin, xbnd=xbnd, beyond_rule=beyond_rule, inf_to_xmax=rules == "cpfloat")


def cpfloat_covers(spec: RoundingSpec, stochastic: bool = False) -> bool:
    """Whether :func:`round_cpfloat_elementwise` computes ``spec``: CPFloat's rules or
    ``range_rules='correct'``, no flips, deterministic (``stochastic=False``) or modes 5 and 6
    (``stochastic=True``: the caller gives the numbers, see :func:`cpfloat_inexact`)."""
    if spec.range_rules not in ("cpfloat", "correct") or spec.flips:
        return False
    return (spec.round in (5, 6)) == stochastic


def _cast(a: Any, dtype: Any) -> Any:
    """``a`` converted to ``dtype`` (torch tensors have ``to``, the others ``astype``)."""
    astype = getattr(a, "astype", None)
    return astype(dtype) if astype is not None else a.to(dtype)


@dataclass(frozen=True)
class _Split:
    """An array's bit patterns taken apart for CPFloat's rounding (see :func:`_split`)."""

    carrier: Any
    k: CpfloatConstants
    magnitude: Any  # |v|'s pattern
    negative: Any
    is_nan: Any
    is_inf: Any
    m: Any          # the magnitude, 0 for Inf and NaN (so that m + add cannot overflow)
    s: Any          # the bits dropped
    low: Any        # 2^s - 1
    tiny: Any       # below the smallest result: rounds to 0 or k.tiny_lo


def _storage_bits(ns: Namespace, v: Any) -> tuple:
    """``(carrier, bit patterns)`` of the float32 or float64 array ``v`` (signed integers)."""
    name = carrier_name(v)
    if name not in CARRIERS:
        raise TypeError(f"CPFloat's rounding needs float32 or float64 storage, not {name}.")
    carrier = CARRIERS[name]
    return carrier, ns.bitcast(v, ns.xp.int64 if carrier.mant == 52 else ns.xp.int32)


def constants_for(spec: RoundingSpec, carrier_name: str) -> "CpfloatConstants":
    """:func:`cpfloat_constants` of ``spec`` in the carrier ``'float32'`` or ``'float64'`` (for
    callers that compute it outside traced code)."""
    return cpfloat_constants(spec.fmt, int(spec.round), bool(spec.keeps_subnormals), bool(spec.limits_exponent),
                             bool(spec.saturation), bool(spec.infinity), "d" if carrier_name == "float64" else "f",
                             "correct" if spec.range_rules == "correct" else "cpfloat")


def _split(ns: Namespace, v: Any, spec: RoundingSpec, k: "Optional[CpfloatConstants]" = None) -> _Split:
    xp = ns.xp
    carrier, bits = _storage_bits(ns, v)
    if k is None:
        k = constants_for(spec, "float64" if carrier.mant == 52 else "float32")
    magnitude = bits & carrier.abs_mask
    m = xp.where(magnitude >= k.inf, 0, magnitude)
    field = m >> carrier.mant
    e = xp.where(field > 1, field, 1)  # storage subnormals sit at the exponent of field 1
    s = k.dropped_top - e
    s = xp.where(s < k.dropped, k.dropped, s)
    s = xp.where(s > k.dropped_max, k.dropped_max, s)
    low = (xp.ones_like(m) << s) - 1
    return _Split(carrier, k, magnitude, bits < 0, magnitude > k.inf, magnitude == k.inf, m, s, low,
                  m < k.tiny_lo)


def _fraction(ns: Namespace, parts: _Split) -> Any:
    """The dropped fraction in [0, 1) of every finite element, in float64, as the reference
    computes it: the dropped bits over ``2^s``, or ``|v| / tiny_lo`` for tiny magnitudes.  The
    latter is built from integers, ``M 2^(E0 - T)`` with both power-of-two factors normal and the
    partial product exact, so that no subnormal enters a float operation (XLA on the CPU flushes
    float64 and float32 subnormal operands to zero); only the last product rounds, as ldexp."""
    xp, c, k = ns.xp, parts.carrier, parts.k
    kept_off = _cast(parts.m & parts.low, xp.float64) / _cast(parts.low + 1, xp.float64)  # exact
    field = parts.m >> c.mant  # |v| = M 2^E0 exactly, M < 2^53 and E0 from the bits
    significand = xp.where(field == 0, parts.m, (parts.m & ((1 << c.mant) - 1)) | (1 << c.mant))
    e0 = _cast(xp.where(field == 0, 1, field), xp.int64) - (c.bias + c.mant)
    wide = CARRIERS["float64"]
    # d = E0 - T < 0 for tiny magnitudes (the others might overflow: they take kept_off); the
    # first factor keeps M 2^d1 >= 2^-1022 exact, the second is 2^d2 >= 2^(-52 - T), normal unless
    # T > 970; then, d2 < -1022 (raised to -1022 here), the product rounds to 0 either way.
    d = xp.where(parts.tiny, e0 - k.tiny_exponent, 0)
    d1 = xp.where(d < 1 - wide.bias, 1 - wide.bias, d)
    d2 = xp.where(d - d1 < 1 - wide.bias, 1 - wide.bias, d - d1)
    scaled = _cast(significand, xp.float64) * ns.bitcast((d1 + wide.bias) << wide.mant, xp.float64)
    tiny_fraction = scaled * ns.bitcast((d2 + wide.bias) << wide.mant, xp.float64)
    return xp.where(parts.tiny, tiny_fraction, kept_off)


def cpfloat_inexact(ns: Namespace, v: Any, spec: RoundingSpec) -> Any:
    """Which elements of ``v`` take a random number in CPFloat's stochastic rounding (finite, off
    the grid; in mode 6 without saturation also beyond xmax, and +-Inf without ``infinity``: see
    :func:`pychop_compat.rules.cpfloat.round_cpfloat`); the caller gives them one draw's numbers in
    column-major order, as the reference."""
    if not cpfloat_covers(spec, stochastic=True):
        raise ValueError("cpfloat_inexact: CPFloat's rules in stochastic rounding (round = 5 or 6) only.")
    parts = _split(ns, v, spec)
    takes = _inexact(ns, parts)
    if parts.k.beyond_rule == 6:  # CPFloat's random bit beyond xmax (and for +-Inf unless Inf is the overflow)
        takes = takes | (parts.m > parts.k.xmax)
        if not parts.k.infinity:
            takes = takes | parts.is_inf
    return takes


def _inexact(ns: Namespace, parts: _Split) -> Any:
    """Off the grid, by the bits: a nonzero tiny magnitude, or nonzero dropped bits."""
    return ns.xp.where(parts.tiny, parts.m != 0, (parts.m & parts.low) != 0)


def host_numbers(sources: RandomSources, spec: RoundingSpec, count: int) -> np.ndarray:
    """The ``count`` numbers of CPFloat's stochastic rounding, drawn once from ``sources`` (with
    ``spec.random_bits`` bits when limited) as the NumPy engine draws them: float64, 1-D."""
    if spec.random_bits:
        sources = limited_bit_sources(sources, spec.random_bits)
    return np.asarray(sources.stochastic(count), np.float64).ravel()


def round_cpfloat_elementwise(ns: Namespace, v: Any, spec: RoundingSpec, u_round: Any = None,
                              constants: "Optional[CpfloatConstants]" = None) -> Any:
    """CPFloat's rounding of every element of ``v`` (float32 or float64, any shape): a new array.

    Parameters
    ----------
    ns : Namespace
        The array library.
    v : array
        The values in storage format (never modified).
    spec : RoundingSpec
        CPFloat's rules without bit flips (see :func:`cpfloat_covers`).
    u_round : array, optional
        Modes 5 and 6: float64 numbers of ``v``'s shape (elements without one may hold any
        value >= 1); rounded to float32 first with ``range_rules='correct'`` and float32 values.
    constants : CpfloatConstants, optional
        :func:`constants_for` the spec and ``v``'s dtype, computed beforehand (traced code).

    Returns
    -------
    array
        Same shape and dtype as ``v``, bit for bit
        :func:`pychop_compat.rules.cpfloat.round_cpfloat`'s result (with the same numbers).

    Raises
    ------
    ValueError
        ``spec`` is not covered (bit flips, chop's rules), or ``u_round`` is missing in a
        stochastic mode.
    """
    stochastic = spec.round in (5, 6)
    if not cpfloat_covers(spec, stochastic):
        raise ValueError("round_cpfloat_elementwise: CPFloat's rules without bit flips only (flips draw "
                         "numbers in column-major order on the host).")
    if stochastic and u_round is None:
        raise ValueError("round_cpfloat_elementwise: stochastic rounding (round = 5 or 6) needs u_round.")
    xp = ns.xp
    if stochastic and spec.range_rules == "correct" and carrier_name(v) == "float32":
        # chop's draws are compared in the input's precision, as chop.m compares (rules.cpfloat.round_correct)
        u_round = _cast(_cast(u_round, xp.float32), xp.float64)
    mode = int(spec.round)
    if mode not in ROUND_MODES:  # "no rounding": the input bit for bit, whatever the switches
        return ns.bitcast(_storage_bits(ns, v)[1] | 0, v.dtype)  # (| 0: a new array, never a view of v)
    parts = _split(ns, v, spec, constants)
    k, m, s, low, negative = parts.k, parts.m, parts.s, parts.low, parts.negative
    keep = ~low
    # (where(condition, constant, array) throughout: the array keeps the storage's integer type)
    beyond = None
    if stochastic:
        fraction = _fraction(ns, parts)
        up = _inexact(ns, parts) & (u_round <= (fraction if mode == 5 else 0.5))
        r = xp.where(up, (m & keep) + (low + 1), m & keep)
        if k.beyond_rule:  # CPFloat's rule beyond xmax: overflow (Inf's pattern here) or xmax
            beyond = u_round <= 0.5  # mode 6; mode 5: |x| >= xbnd, or u <= 2 r = (|x| - xmax) / (xbnd - xmax)
            if mode == 5:
                beyond = (m >= k.xbnd) | (u_round <= 2 * fraction)
            r = xp.where((m > k.xmax) & beyond, k.inf, r)
            r = xp.where((m > k.xmax) & ~beyond, k.xmax, r)
    else:
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
    r = xp.where(parts.tiny, 0, r)
    if up is not None:
        r = xp.where(parts.tiny & up, k.tiny_lo, r)

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
    over, is_inf = r > k.xmax, parts.is_inf
    if k.saturation:
        r = xp.where(over | is_inf, k.xmax, r)
    else:
        r = xp.where(over & ~toward_zero, k.inf if k.infinity else k.nan, r)
        r = xp.where(over & toward_zero, k.xmax, r)
        if k.infinity:
            r = xp.where(is_inf, k.inf, r)
        else:
            if k.inf_to_xmax:
                r = xp.where(is_inf & toward_zero, k.xmax, r)
                r = xp.where(is_inf & ~toward_zero, k.nan, r)
            else:
                r = xp.where(is_inf, k.nan, r)
            if beyond is not None and mode == 6:  # CPFloat's random bit 0 (u > 1/2): xmax
                r = xp.where(is_inf & ~beyond, k.xmax, r)
    signed = (negative & (r != 0)) if k.zero_plus else negative
    out = xp.where(signed, r | parts.carrier.sign_bit, r)
    out = xp.where(parts.is_nan, k.nan, out)  # NaN in: the quiet NaN
    if k.e8m0:  # no sign, no zero: only positive inputs give numbers
        out = xp.where(r == 0, k.xmin, out)
        out = xp.where(negative | (parts.magnitude == 0) | parts.is_nan, k.nan, out)
    return ns.bitcast(out, v.dtype)
