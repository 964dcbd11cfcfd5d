"""Rounding beyond chop.m, in readable reference form, on 1-D arrays in MATLAB's column-major
element order (the order of the random numbers); every function returns new arrays.

The three ``range_rules`` (docs/formats.rst, "Rounding"): ``'chop'``, chop.m's algorithm
(:mod:`pychop_compat.rules.chop`) then :func:`apply_encoding`; ``'correct'``,
:func:`round_correct`; ``'cpfloat'``, :func:`round_cpfloat`, CPFloat's documented semantics.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Optional

import numpy as np

from ..formats import Format
from ..random.sources import RandomSources

__all__ = ["ROUND_MODES", "NO_ROUNDING", "limited_bit_sources", "apply_encoding", "round_cpfloat", "round_correct",
           "chop_blocks", "block_numbers", "effective_format", "correct_spec", "flip_bits"]

#: Rounding modes, CPFloat's codes (1..6 are chop's): -1 nearest ties away, 0 nearest ties
#: to zero, 1 nearest ties to even, 2 up, 3 down, 4 toward zero, 5 stochastic (probability
#: proportional to the distance), 6 stochastic (equal probabilities), 7 round to odd.
ROUND_MODES = (-1, 0, 1, 2, 3, 4, 5, 6, 7)
#: CPFloat's code for "no rounding" (any other code outside ROUND_MODES behaves the same).
NO_ROUNDING = 8

# Storage formats: (precision, emin, emax) of float32 and float64.
_STORAGE = {np.dtype(np.float32): (24, -126, 127), np.dtype(np.float64): (53, -1022, 1023)}


def limited_bit_sources(sources: RandomSources, bits: int) -> RandomSources:
    """Sources whose stochastic draws carry only ``bits`` random bits.

    Hardware stochastic rounding adds ``bits`` random bits to the ``bits``
    bits below the last kept one and truncates: it rounds up with probability
    ``floor(f 2^bits) / 2^bits`` for a dropped fraction ``f``.  With
    ``U = floor(u 2^bits)`` from a uniform ``u``, that is ``U < floor(f 2^bits)``,
    which equals chop's test ``u' <= f`` for ``u' = (U + 1) / 2^bits``: so the
    draws are replaced by ``u'`` and every rounding rule stays chop's.
    """
    scale = math.ldexp(1.0, bits)
    stochastic = sources.stochastic

    def draw(n: int) -> np.ndarray:
        u = np.asarray(stochastic(n), dtype=np.float64).ravel()
        return (np.floor(u * scale) + 1.0) / scale  # exact: scalings by powers of two

    return RandomSources(draw, sources.flip_uniform, sources.flip_randi)


# --- chop's range rules on formats without Inf, with one NaN, without -0 ------------------------


def apply_encoding(c: np.ndarray, x: np.ndarray, fmt: Format, mode: int, saturation: bool,
                   infinity: bool, flips: bool = False) -> None:
    """Map chop.m's results ``c`` (in place; ``x``: the inputs) onto ``fmt``'s encoding.

    * A round-to-nearest tie at the overflow threshold goes to the even
      neighbour: for ``'fn'`` formats that is ``xmax`` (its significand ends in
      0), where chop's IEEE rule (``|x| >= xboundary`` overflows) assumes an odd ``xmax``.
    * +-Inf results become +-xmax with ``saturation``, else NaN without ``infinity``.
    * No -0 (``'fnuz'``): zeros become +0.  E8M0 has no zero and no sign:
      zero, negative and NaN inputs give NaN; positive results that chop flushed
      to zero give the smallest number (as ml_dtypes' cast does).
    * With ``flips``: a flipped fraction bit can give a pattern beyond ``xmax``,
      which in an ``'fn'`` format is the NaN pattern: NaN.
    """
    if c.ndim == 0:
        apply_encoding(c.reshape(1), x.reshape(1), fmt, mode, saturation, infinity, flips)  # views
        return
    if flips and fmt.encoding == "fn":
        c[np.isfinite(c) & (np.abs(c) > fmt.xmax)] = np.nan
    infinite = np.nonzero(np.isinf(c))  # few: chop's overflow results (and Inf inputs)
    if infinite[0].size:
        ci, xi = c[infinite], x[infinite]
        if fmt.encoding == "fn" and mode == 1:
            # chop's rule sends |x| >= xboundary to Inf; the tie itself goes to the even xmax.
            tie = np.abs(xi) == fmt.xboundary
            ci[tie] = np.copysign(fmt.xmax, xi[tie])
        still = np.isinf(ci)
        if saturation:
            ci[still] = np.copysign(fmt.xmax, ci[still])
        elif not infinity:
            ci[still] = np.nan
        c[infinite] = ci
    _zero_and_sign_rules(c, x, fmt)


def _zero_and_sign_rules(c: np.ndarray, x: np.ndarray, fmt: Format) -> None:
    """No -0 in ``'fnuz'`` formats; E8M0's rules (see :func:`apply_encoding`), in place on ``c``."""
    if fmt.encoding == "fnuz":
        c[c == 0] = 0.0
    elif fmt.encoding == "e8m0":
        c[(c == 0) & (x > 0)] = fmt.xmin
        c[~(x > 0)] = np.nan


# --- CPFloat's semantics ------------------------------------------------------------------------


def effective_format(fmt: Format, dtype: Any, explim: bool) -> Format:
    """The format CPFloat rounds to for storage ``dtype``.

    The precision is at most the storage's; with ``explim`` the exponent range
    is the format's, clamped to the storage's; without it, the storage's range
    (and IEEE encoding: the format's range and special values are not used).
    """
    p_s, emin_s, emax_s = _STORAGE[np.dtype(dtype)]
    t = min(fmt.t, p_s)
    if explim:
        return Format(t, min(fmt.emax, emax_s), fmt.names, emin=max(fmt.emin, emin_s),
                      subnormals=fmt.subnormals, encoding=fmt.encoding, overflow=fmt.overflow)
    return Format(t, emax_s, fmt.names, emin=emin_s)


def correct_spec(spec: Any, dtype: Any) -> Any:
    """The spec by which correct rounding (``range_rules = 'correct'``) rounds storage ``dtype``
    (float32, float64, or their names; other names: float32, whose range a narrower carrier is
    computed in): ``spec`` itself, except E8M0 with ``explim = 0``.

    docs/formats.rst widens the format to the storage's exponent range keeping its encoding;
    for E8M0 (no sign, no zero) that is E8M0 with the storage's ``emin`` and ``emax`` (negative,
    zero and NaN inputs give NaN, results flushed to zero its smallest number ``2^emin``),
    rounded as a format with ``explim = 1``.  :func:`effective_format` without ``explim``
    drops the encoding, as CPFloat's rules do (only the precision is reduced).
    """
    if spec.fmt.encoding != "e8m0" or spec.range_rules != "correct" or spec.limits_exponent:
        return spec
    name = dtype if isinstance(dtype, str) else np.dtype(dtype).name
    _, emin_s, emax_s = _STORAGE[np.dtype(np.float64 if name == "float64" else np.float32)]
    fmt = spec.fmt
    wide = Format(fmt.t, emax_s, fmt.names, emin=emin_s, subnormals=fmt.subnormals, encoding=fmt.encoding,
                  overflow=fmt.overflow)
    return dataclasses.replace(spec, fmt=wide, explim=1)


def round_cpfloat(x: np.ndarray, fmt: Format, mode: int, subnormal: bool, explim: bool,
                  saturation: bool, infinity: bool, sources: RandomSources,
                  u: Optional[np.ndarray] = None, rules: str = "cpfloat") -> np.ndarray:
    """CPFloat's rounding of the 1-D float32/float64 array ``x`` (a new array).

    Parameters
    ----------
    x : numpy.ndarray
        Values in storage format (float32 or float64), column-major order.
    fmt : Format
        The target format (``t``, ``emin``, ``emax``; its encoding gives ``xmax``).
    mode : int
        A code of :data:`ROUND_MODES`; any other code returns ``x`` unchanged.
    subnormal, explim, saturation, infinity : bool
        CPFloat's switches (see the module notes and ``docs/formats.rst``).
    sources : RandomSources
        ``stochastic(k)`` is called once, for the ``k`` inexact finite elements
        in order (modes 5 and 6 only), unless ``u`` is given; in mode 6 without
        saturation (CPFloat's rules) also for the exact finite elements beyond
        ``xmax`` and, without ``infinity``, for +-Inf.
    u : numpy.ndarray, optional
        Modes 5 and 6: a number in [0, 1) for each element of ``x`` instead.
    rules : {'cpfloat', 'correct'}
        Stochastic rounding beyond ``xmax`` without saturation: CPFloat's rule
        (``'cpfloat'``), or the rounded value decides (``'correct'``, chop's
        options: :func:`round_correct`).  CPFloat's rule (``cpfloat_template.h``,
        ``RS_PROP_SCALAR`` and ``RS_EQUI_SCALAR``): mode 5 overflows when
        ``|x| >= xbnd`` (``xboundary``, ``xmax`` plus half its ulp) and for
        ``xmax < |x| < xbnd`` when ``u <= (|x| - xmax) / (xbnd - xmax)``, else
        gives ``xmax``; mode 6 overflows when ``u <= 1/2``, else gives ``xmax``,
        for every finite ``|x| > xmax`` and, without ``infinity``, for +-Inf
        (+-Inf or NaN, with the input's sign).

    Raises
    ------
    ValueError
        ``rules`` is neither ``'cpfloat'`` nor ``'correct'``.
    """
    if rules not in ("cpfloat", "correct"):
        raise ValueError(f"rules must be 'cpfloat' or 'correct', got {rules!r}.")
    if mode not in ROUND_MODES:
        return x.copy()  # "no rounding": the input bit for bit, whatever the switches
    storage_emax = _STORAGE[x.dtype][2]
    eff = effective_format(fmt, x.dtype, explim)
    t, emin, xmax = eff.t, eff.emin, eff.xmax

    with np.errstate(over="ignore", invalid="ignore"):
        v = x.astype(np.float64)  # exact; every step below is exact in double
        a = np.abs(v)
        negative = np.signbit(v)
        finite = np.isfinite(v)
        e = np.frexp(a)[1] - 1  # a = 2^e * 1.f
        # The grid: the binade's for normal numbers; below xmin, the subnormal grid, or
        # without subnormals the grid {0, xmin} (so "round to 0 or xmin by the mode").
        q = np.where(a >= eff.xmin, e - t + 1, emin - t + 1 if subnormal else emin)
        # |x| = M 2^E0 with an integer M < 2^53; y = |x| / 2^q = M / 2^shift, split exactly into
        # its integer part f and the dropped bits (a float y could underflow: with float64
        # storage and a grid above 2^0, |x| / 2^q may lie below the smallest subnormal).
        significand, exponent = np.frexp(np.where(finite, a, 0.0))
        big_m = np.ldexp(significand, 53).astype(np.int64)
        shift = q - (exponent - 53)
        down = np.clip(shift, 0, 62)
        f_int = np.where(shift >= 63, 0, (big_m >> down) << np.clip(-shift, 0, 62))
        dropped = np.where(shift > 0, big_m - (f_int << down), 0)
        inexact = dropped != 0
        r = np.ldexp(dropped.astype(np.float64), -np.maximum(shift, 0))  # the dropped fraction, in [0, 1)
        f = f_int.astype(np.float64)
        odd = (f_int & 1) == 1
        # CPFloat's overflow rule (see the notes on ``rules``), source: src/cpfloat_template.h of
        # CPFloat at commit 3583976: mode 5 keeps one more bit beyond xmax, so that only |x| >= xbnd,
        # or a carry from xmax < |x| < xbnd with probability (|x| - xmax) / (xbnd - xmax), overflows;
        # mode 6 takes one random bit for every |x| > xmax (+-Inf too unless Inf is the overflow value).
        beyond_rule = mode in (5, 6) and rules == "cpfloat" and not saturation
        beyond = finite & (a > xmax)
        overflows = np.zeros(a.shape, bool)  # (CPFloat's rule: which |x| > xmax, and +-Inf in mode 6, overflow)
        if mode == -1:
            up = r >= 0.5
        elif mode == 0:
            up = r > 0.5
        elif mode == 1:
            up = (r > 0.5) | ((r == 0.5) & odd)
        elif mode == 2:
            up = inexact & ~negative
        elif mode == 3:
            up = inexact & negative
        elif mode == 4:
            up = np.zeros(a.shape, bool)
        elif mode == 7:
            up = inexact & ~odd  # truncate, then make the last bit 1
        else:
            if u is None:
                takes = inexact & finite
                if beyond_rule and mode == 6:
                    takes |= beyond | (np.isinf(v) & (not infinity))
                need = np.flatnonzero(takes)
                u = np.full(a.shape, 2.0)
                if need.size:
                    u[need] = np.asarray(sources.stochastic(need.size), np.float64).ravel()
            up = inexact & (u <= (r if mode == 5 else 0.5))
            if beyond_rule and mode == 5:  # (|x| - xmax) / (xbnd - xmax) is exact (an exact difference
                # over a power of two): twice the dropped fraction r where xmax < |x| < xbnd
                overflows = (a >= eff.xboundary) | (u <= (a - xmax) / (eff.xboundary - xmax))
            elif beyond_rule:
                overflows = u <= 0.5
        m = f + up
        c = np.ldexp(m, q)
        if beyond_rule:
            c[beyond] = np.where(overflows[beyond], np.inf, xmax)

        # Overflow: the rounded magnitude beyond xmax; Inf where the mode rounds away from zero,
        # else xmax (RZ and round to odd both signs, RU negative values, RD positive ones).
        over = finite & (c > xmax)
        if mode in (2, 3):
            toward_zero = negative if mode == 2 else ~negative
        else:
            toward_zero = np.full(a.shape, mode in (4, 7))
        if saturation:
            c[over | ~finite] = xmax
        else:
            c[over & toward_zero] = xmax
            c[over & ~toward_zero] = np.inf
            infinite_in = np.isinf(v)
            c[infinite_in] = np.inf
            if not infinity:
                # What would be +-Inf is NaN, except (CPFloat's rules) +-Inf inputs that the mode maps
                # toward zero: those give +-xmax; so does CPFloat's mode 6 with its random bit 0 (u > 1/2).
                # Correct rounding keeps an Inf input Inf, then the format's encoding: NaN.
                if rules == "cpfloat":
                    c[infinite_in & toward_zero] = xmax
                if mode == 6 and beyond_rule:
                    c[infinite_in & ~overflows] = xmax
                c[np.isinf(c)] = np.nan
        c = np.where(negative, -c, c)
        c[np.isnan(v)] = np.nan
        # Sign of zero: kept, except that off CPFloat's fast path (effective emax below the
        # storage's, or saturation, or infinity off) directed modes 2 and 3 give +0.
        fast_path = eff.emax == storage_emax and not saturation and infinity
        if mode in (2, 3) and not fast_path:
            c[c == 0] = 0.0
        _zero_and_sign_rules(c, v, eff)
    return c.astype(x.dtype)


def flip_bits(c: np.ndarray, fmt: Format, scope: str, p: float, sources: RandomSources) -> np.ndarray:
    """Soft errors: with probability ``p``, flip one bit of each rounded value (a new array).

    ``scope = 'fraction'`` picks one of the ``t - 1`` trailing significand bits;
    ``'encoding'`` one of all ``fmt.bits`` bits of the format's encoding (sign,
    exponent field, trailing significand; IEEE layout with ``emin`` at field 1).
    Choices come from ``sources.flip_uniform(n)`` (one per element) and the
    bits from ``sources.flip_randi(k, chosen)``, in element order.
    """
    out = c.copy()
    chosen = np.flatnonzero(np.asarray(sources.flip_uniform(c.size), np.float64).ravel() <= p)
    if chosen.size == 0:
        return out
    t = fmt.t
    width = t - 1 if scope == "fraction" else fmt.bits
    if width < 1:
        raise ValueError(f"No bit to flip in a format with t = {t}.")
    bit = np.asarray(sources.flip_randi(width, chosen.size), np.int64).ravel() - 1
    v = c[chosen].astype(np.float64)
    ok = np.isfinite(v)
    v, idx, bit = v[ok], chosen[ok], bit[ok]
    sign = np.signbit(v).astype(np.int64)
    a = np.abs(v)
    e = np.frexp(a)[1] - 1
    normal = a >= fmt.xmin
    field = np.where(normal, e - fmt.emin + 1, 0)
    significand = np.ldexp(a, -np.where(normal, e, fmt.emin) + t - 1).astype(np.int64)
    fraction = significand & ((1 << (t - 1)) - 1)
    exp_bits = fmt.bits - int(fmt.is_signed) - (t - 1)
    in_fraction = bit < t - 1
    fraction = np.where(in_fraction, fraction ^ (np.int64(1) << np.minimum(bit, 62)), fraction)
    in_field = ~in_fraction & (bit < t - 1 + exp_bits)
    field = np.where(in_field, field ^ (np.int64(1) << np.clip(bit - (t - 1), 0, 62)), field)
    sign = np.where(~in_fraction & ~in_field, sign ^ 1, sign)
    top_field = (1 << exp_bits) - 1
    with np.errstate(over="ignore"):
        magnitude = np.where(
            field == 0,
            np.ldexp(fraction.astype(np.float64), fmt.emin - t + 1),
            np.ldexp((fraction + (1 << (t - 1))).astype(np.float64), field + fmt.emin - 1 - t + 1),
        )
    if fmt.encoding == "ieee":
        magnitude = np.where(field == top_field, np.where(fraction == 0, np.inf, np.nan), magnitude)
    elif fmt.encoding == "fn":
        magnitude = np.where((field == top_field) & (fraction == (1 << (t - 1)) - 1), np.nan, magnitude)
    out[idx] = np.where(sign == 1, -magnitude, magnitude)
    return out


def chop_blocks(x: np.ndarray, spec: Any) -> tuple:
    """chop.m's blocks of the column-major values ``x`` (index arrays, in the order chop.m rounds
    them): the elements outside its subnormal block ``emins <= e < emin`` and those inside it;
    one block with ``explim = 0``."""
    if not spec.limits_exponent:
        return (np.arange(x.size),)
    e = np.frexp(np.abs(x))[1] - 1
    in_block = (e < spec.fmt.emin) & (e >= spec.fmt.emins)
    return (np.flatnonzero(~in_block), np.flatnonzero(in_block))


def block_numbers(values: np.ndarray, truncated: np.ndarray, sources: RandomSources) -> np.ndarray:
    """Stochastic rounding's numbers for one of chop.m's blocks: one per element, drawn when some
    element needs one (``truncated``, its rounding toward zero, differs, or it is not finite),
    compared in the input's precision; 2 (no element rounds up) when none does: nothing is drawn."""
    if (~np.isfinite(values) | (truncated != values)).any():
        drawn = np.asarray(sources.stochastic(values.size), np.float64).ravel()
        return drawn.astype(values.dtype).astype(np.float64)
    return np.full(values.size, 2.0)


def round_correct(x: np.ndarray, spec: Any, sources: RandomSources, u: Optional[np.ndarray] = None) -> np.ndarray:
    """One correct rounding under chop's options (``spec.range_rules = 'correct'``), a new array.

    The rounding is :func:`round_cpfloat`'s in chop's modes 1-6, by :func:`correct_spec`'s
    spec (E8M0 with ``explim = 0`` keeps its encoding); the random numbers are drawn as
    chop.m draws them.  chop.m rounds two blocks in turn, the elements
    outside its subnormal block (``emins <= e < emin``, ``x = 2^e * 1.f``) and those
    inside it (one block with ``explim = 0``); for each, stochastic rounding draws one
    number per element of the block when some element of it needs one (inexact or not
    finite), compared in the input's precision, and then bit flips draw one number per
    element and a bit for each chosen one (:func:`flip_bits`, a trailing significand
    bit of the format's encoding).

    Parameters
    ----------
    x : numpy.ndarray
        float32 or float64 values, column-major order (1-D).
    spec : RoundingSpec
        With ``range_rules = 'correct'``.
    sources : RandomSources
        Where the numbers come from, in the order above.
    u : numpy.ndarray, optional
        Stochastic rounding with a number given for each element instead (numbers
        made per element; bit flips still draw from ``sources``).
    """
    spec = correct_spec(spec, x.dtype)

    def round_block(values: np.ndarray, numbers: Optional[np.ndarray]) -> np.ndarray:
        return round_cpfloat(values, spec.fmt, spec.round, spec.keeps_subnormals, spec.limits_exponent,
                             spec.saturation, spec.infinity, sources, numbers, rules="correct")

    if u is not None:
        u = u.astype(x.dtype).astype(np.float64)  # chop.m compares in the input's class
    if not spec.draws or (u is not None and not spec.flips):
        return round_block(x, u)
    out = x.copy()
    target = effective_format(spec.fmt, x.dtype, spec.limits_exponent)
    for index in chop_blocks(x, spec):
        if index.size == 0:
            continue
        values = x[index]
        numbers = None
        if spec.stochastic:
            if u is not None:
                numbers = u[index]
            else:
                truncated = round_cpfloat(values, spec.fmt, 4, spec.keeps_subnormals, spec.limits_exponent,
                                          spec.saturation, spec.infinity, sources)
                numbers = block_numbers(values, truncated, sources)
        rounded = round_block(values, numbers)
        if spec.flips:
            rounded = flip_bits(rounded, target, "fraction", spec.p, sources)
        out[index] = rounded
    return out
