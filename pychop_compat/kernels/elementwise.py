"""chop's rule as one elementwise function, written once against an array namespace.

:func:`chop_elementwise` rounds what does not live in host memory (torch, CuPy, JAX, Dask,
:mod:`pychop_compat.nn`'s quantizers under ``torch.compile``) by chop.m's algorithm, each
element with its own numbers (:class:`ElementDraws`), no Python branch on data; integer
arithmetic on the bit patterns wherever a subnormal may appear (docs/engines.rst, "JAX arrays").
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any, Optional

import numpy as np

from ..random.counter import CounterStream, uniform
from ..random.sources import RandomSources, host_draw_plan
from ..spec import FLIP_PRECISION_ERROR, RoundingSpec
from .device_plan import (CARRIERS, Carrier, Encoding, at_most, clamp_exponent, elementwise_covers, encoding_for,
                          range_limits)
from .xp import Namespace

__all__ = ["ElementwisePlan", "plan_for", "ElementDraws", "chop_elementwise", "draw_needs", "counter_draws",
           "host_draws", "flip_mask", "encode_bits", "carrier_name"]


def carrier_name(v: Any) -> str:
    """The dtype name of an array of any library (``'float32'``; torch spells ``'torch.float32'``)."""
    return str(v.dtype).rpartition(".")[2]


@dataclass(frozen=True)
class ElementwisePlan:
    """chop's rule for one spec and one carrier, as Python numbers (hashable: a compiler sees
    constants and traces no NumPy code).  Build it with :meth:`from_spec`."""

    carrier: str          # 'float32' or 'float64'
    mode: int
    t: int
    p: float
    emin: int             # clamped to +-2^30 (int32 stays safe)
    emins: int
    limits: bool          # chop's exponent range (explim)
    keeps_subnormals: bool
    flips: bool
    xboundary_ge: float   # x >= xboundary   <=> x >= xboundary_ge (normal: a safe float comparison)
    xmax_gt: float        # x > xmax         <=> x > xmax_gt
    xmax_bits: int        # xmax stored in the carrier, as bits
    min_rep_lt_bits: int  # |c| < min_rep    <=> |c|'s bits < min_rep_lt_bits
    half_gt_bits: int     # |c| > min_rep/2  <=> |c|'s bits > half_gt_bits
    half_ge_bits: int     # |c| >= min_rep/2 <=> |c|'s bits >= half_ge_bits
    min_rep_bits: int     # min_rep stored in the carrier, as bits
    encoding: Optional[Encoding] = None  # the format's encoding (None: nothing to do)
    nearest: Optional[tuple] = None  # constants of the fast form of round to nearest (_nearest_on_bits)
    stochastic_bits: Optional[tuple] = None  # constants of the fast form of stochastic rounding

    @classmethod
    def from_spec(cls, spec: RoundingSpec, carrier: str) -> "ElementwisePlan":
        """The plan for rounding ``carrier`` (``'float32'`` or ``'float64'``) values by ``spec``.

        Raises
        ------
        ValueError
            For a spec :func:`~.device_plan.elementwise_covers` refuses, a carrier other
            than float32/float64, or bit flips with ``t < 2``.
        """
        if not elementwise_covers(spec):
            raise ValueError("chop_elementwise does not cover this spec (extended with bit flips, CPFloat's "
                             "rules, limited random bits or E8M0); chop rounds it on the host.")
        if carrier not in CARRIERS:
            raise ValueError(f"carrier must be 'float32' or 'float64', not {carrier!r}.")
        if spec.flips and spec.fmt.t < 2:
            raise ValueError(FLIP_PRECISION_ERROR)
        c = CARRIERS[carrier]
        lim = range_limits(spec, c)
        return cls(carrier=carrier, mode=int(spec.round), t=int(spec.fmt.t), p=float(spec.p),
                   emin=clamp_exponent(spec.fmt.emin), emins=clamp_exponent(spec.fmt.emins),
                   limits=spec.limits_exponent, keeps_subnormals=spec.keeps_subnormals, flips=spec.flips,
                   xboundary_ge=lim.xboundary_ge, xmax_gt=lim.xmax_gt, xmax_bits=c.bits(lim.xmax_value),
                   min_rep_lt_bits=c.bits(lim.min_rep_lt), half_gt_bits=c.bits(lim.half_gt),
                   half_ge_bits=c.bits(lim.half_ge), min_rep_bits=c.bits(lim.min_rep_value),
                   encoding=encoding_for(spec, c), nearest=_nearest_constants(spec, c),
                   stochastic_bits=_stochastic_constants(spec, c))

    @property
    def stochastic(self) -> bool:
        """Stochastic rounding (modes 5 and 6)."""
        return self.mode >= 5


@functools.lru_cache(maxsize=512)
def plan_for(spec: RoundingSpec, carrier: str) -> ElementwisePlan:
    """:meth:`ElementwisePlan.from_spec`, cached."""
    return ElementwisePlan.from_spec(spec, carrier)


@dataclass(frozen=True)
class ElementDraws:
    """Each element's random numbers for :func:`chop_elementwise` (broadcastable to the values).

    ``u_round``: modes 5 and 6, compared in the values' precision.  ``flip``: the bit XORed into
    the rounded integer (``2**(bit - 1)``; 0: none; :func:`flip_mask`).  ``block_drew``: (normal
    block drew, subnormal block drew); chop.m returns a block that drew nothing as it came
    (zeros keep their sign).  Both True for numbers made per element.
    """

    u_round: Any = None
    flip: Any = None
    block_drew: tuple = (True, True)


_NO_DRAWS = ElementDraws()  # (enough for modes 1 to 4 without flips)


def _as(xp: Any, a: Any, dtype: Any) -> Any:
    """``a`` as ``dtype``, not copied when it is one already (a copy costs a pass in compiled code)."""
    return a if a.dtype == dtype else xp.astype(a, dtype)


@dataclass(frozen=True)
class _Grid:
    """An array's bit patterns on chop.m's grid (see :func:`_grid`)."""

    bits: Any       # the input's bit patterns (signed integers of the carrier's width)
    magnitude: Any  # |v|'s bits
    biased: Any     # its exponent field
    negative: Any
    finite: Any
    sub: Any        # in chop.m's subnormal block (None without the exponent range)
    g: Any          # chop.m's grid: multiples of 2^g
    k: Any          # pattern bits below the grid (<= 0: the grid is finer than the element's spacing)
    dropped: Any    # k clamped to [0, width - 2]
    low: Any        # the pattern's bits below the grid: the dropped part, in units of the last bit


def _grid(ns: Namespace, v: Any, plan: ElementwisePlan, carrier: Carrier) -> _Grid:
    xp = ns.xp
    int_dtype = xp.int64 if carrier.mant == 52 else xp.int32
    mant, bias, field = carrier.mant, carrier.bias, carrier.field
    bits = ns.bitcast(v, int_dtype)
    magnitude = bits & carrier.abs_mask
    biased = magnitude >> mant
    finite = biased != field
    # chop.m's exponent e (|v| = 2^e * 1.f), exact for the carrier's subnormals (their leading
    # bit read from their significand converted exactly to a float); -1 for 0, Inf, NaN.
    tiny = (biased == 0) & (magnitude != 0)
    lead = (ns.bitcast(xp.astype(magnitude, v.dtype), int_dtype) >> mant) - bias
    e = xp.where(tiny, lead + (1 - bias - mant), biased - bias)
    e = xp.where((magnitude == 0) | ~finite, -1, e)
    # chop.m's grid: t bits at the element's exponent, the grid of xmins in its subnormal block;
    # the pattern's last bit is worth 2^(E - bias - mant) (E >= 1: the carrier's subnormals too).
    sub = ((e < plan.emin) & (e >= plan.emins)) if plan.limits else None
    g = (xp.where(sub, plan.emin, e) if sub is not None else e) - (plan.t - 1)
    k = g - (xp.where(biased == 0, 1, biased) - (bias + mant))
    # Finite nonzero elements have k <= mant; the cap keeps the shifts of the others (0, Inf,
    # NaN, whose dropped bits are 0) inside the integers' width.
    cap = 62 if mant == 52 else 30
    dropped = xp.where(k < 0, 0, xp.where(k > cap, cap, k))
    low = magnitude & ((xp.ones_like(dropped) << dropped) - 1)
    return _Grid(bits, magnitude, biased, bits < 0, finite, sub, g, k, dropped, low)


def draw_needs(ns: Namespace, v: Any, plan: ElementwisePlan) -> tuple:
    """``(need, sub)``: which elements chop.m gives a stochastic number (Inf and NaN too), and
    which lie in its subnormal block (None without the exponent range)."""
    carrier = CARRIERS[carrier_name(v)]
    grid = _grid(ns, v, plan, carrier)
    return (grid.low != 0) | ~grid.finite, grid.sub


def chop_elementwise(ns: Namespace, v: Any, plan: Any, draws: Optional[ElementDraws] = None) -> Any:
    """chop.m on every element of ``v`` (float32 or float64, any shape): a new array.

    Parameters
    ----------
    ns : Namespace
        The array library (:func:`.xp.namespace_of`).
    v : array
        The values (never modified).
    plan : ElementwisePlan or RoundingSpec
        The rounding (a spec is turned into its cached plan): chop.m's semantics, or
        chop's rules on a signed format of the catalogue, whose encoding is applied last.
    draws : ElementDraws, optional
        The elements' random numbers (modes 5 and 6, bit flips).

    Returns
    -------
    array
        Same shape, dtype and library as ``v``; bit for bit chop.m's result with the
        same numbers.

    Raises
    ------
    ValueError
        ``v``'s dtype is not the plan's carrier, or numbers are missing.

    Notes
    -----
    On the bit pattern, chop.m's rounding to the grid ``2^g`` drops the ``k`` pattern bits
    below it (their value over ``2^k`` is the scaled value's fraction, exactly) and rounding
    up adds ``2^k``; a carry is the step to the next binade (past the largest finite number,
    Inf).  With flips the result is rebuilt from the integer on the grid (:func:`_flipped`).
    """
    xp = ns.xp
    name = carrier_name(v)
    if isinstance(plan, RoundingSpec):
        plan = plan_for(plan, name)
    if name != plan.carrier:
        raise ValueError(f"chop_elementwise: the plan is for {plan.carrier} values, got {name}.")
    carrier = CARRIERS[name]
    int_dtype = xp.int64 if carrier.mant == 52 else xp.int32
    mode = plan.mode
    if draws is None:
        draws = _NO_DRAWS
    if (mode >= 5 and draws.u_round is None) or (plan.flips and draws.flip is None):
        raise ValueError("chop_elementwise: stochastic rounding and bit flips need the elements' numbers.")
    nearest, stochastic_bits = plan.nearest, plan.stochastic_bits
    if nearest is not None or stochastic_bits is not None:
        # The fast forms: the range rules folded into thresholds, a third of the operations.
        # Measured under torch.compile (n = 1e6 float32, ns per element, benchmarks/bench_nn.py):
        # fp16 round to nearest 0.6 against 3.4 for the general form, stochastic 1.0 against 1.7.
        if nearest is not None:
            out, bits = _nearest_on_bits(ns, v, plan, carrier, nearest)
        else:
            out, bits = _stochastic_on_bits(ns, v, plan, carrier, stochastic_bits, draws.u_round)
        if plan.encoding is not None:
            out = encode_bits(xp, out, bits, plan.encoding, carrier)
        return ns.bitcast(_as(xp, out, int_dtype), v.dtype)
    grid = _grid(ns, v, plan, carrier)
    low, dropped, negative = grid.low, grid.dropped, grid.negative
    inexact = low != 0

    if mode == 1:  # ties to the even integer on the grid: the parity of its last kept bit
        half = (xp.ones_like(dropped) << dropped) >> 1
        odd = ((grid.magnitude | (1 << carrier.mant)) >> dropped) & 1  # the hidden bit when k = mant
        up = inexact & ((low > half) | ((low == half) & (odd == 1)))
    elif mode == 2:
        up = inexact & ~negative
    elif mode == 3:
        up = inexact & negative
    elif mode == 4:
        up = None
    else:
        if mode == 5:  # the fraction low * 2^-k: exact, and normal (low != 0 only where k <= mant)
            threshold = xp.astype(low, v.dtype) * ns.bitcast((carrier.bias - dropped) << carrier.mant, v.dtype)
        else:
            threshold = 0.5
        up = inexact & (_as(xp, draws.u_round, v.dtype) <= threshold)
        # chop.m: where(y < 0, -r, r) turns -0 into +0, in a block that drew numbers; a block
        # that drew none is returned as it came.
        quiet = _quiet_blocks(grid.sub, draws.block_drew)
        if quiet is None:
            negative = negative & (grid.magnitude != 0)
        elif quiet is not True:
            negative = negative & ((grid.magnitude != 0) | quiet)

    if plan.flips:
        out, negative = _flipped(ns, v, plan, carrier, grid, up, negative, draws.flip)
    else:
        out = grid.magnitude - low
        if up is not None:
            out = out + (xp.astype(up, int_dtype) << dropped)
    out = out | (xp.astype(negative, int_dtype) << (63 if carrier.mant == 52 else 31))  # the sign bit
    if plan.limits:
        out = _apply_limits(xp, out, v, plan, carrier)
        if plan.encoding is not None:
            out = encode_bits(xp, out, grid.bits, plan.encoding, carrier)
    return ns.bitcast(_as(xp, out, int_dtype), v.dtype)


def _flipped(ns: Namespace, v: Any, plan: ElementwisePlan, carrier: Carrier, grid: _Grid, up: Any,
             negative: Any, flip: Any) -> tuple:
    """``(magnitudes, negative)`` with bit flips: the integer ``q`` on chop.m's grid, flipped,
    and ``q * 2^g`` rebuilt in the carrier (via double, as chop.m converts; ties to even)."""
    xp = ns.xp
    int_dtype = xp.int64 if carrier.mant == 52 else xp.int32
    q_dtype = xp.int32 if not ns.wide or (carrier.mant == 23 and plan.t <= 24) else xp.int64  # t + 1 bits
    mant, field = carrier.mant, carrier.field
    cap = 29 if q_dtype == xp.int32 else 60
    magnitude, biased, k = grid.magnitude, grid.biased, xp.astype(grid.k, q_dtype)
    # |v| = m * 2^(the last bit's exponent), the hidden bit included for normal numbers.
    m = xp.astype(xp.where(biased == 0, magnitude, (magnitude & ((1 << mant) - 1)) | (1 << mant)), q_dtype)
    m = xp.where(grid.finite, m, 0)
    q = xp.where(k < 0, m << xp.where(-k > cap, cap, -k), m >> xp.astype(grid.dropped, q_dtype))
    if up is not None:
        q = q + xp.astype(up, q_dtype)
    flip = xp.astype(flip, q_dtype)
    chosen = (flip != 0) & grid.finite
    negative = negative & ~(chosen & (q == 0))  # chop.m: -0 * 2^s flipped is positive
    q = xp.where(chosen, q ^ flip, q)
    g = xp.astype(grid.g, q_dtype)
    wide_float = xp.float64 if ns.wide and q_dtype == xp.int64 else v.dtype
    q_float = ns.bitcast(xp.astype(xp.astype(q, wide_float), v.dtype), int_dtype)
    q_biased = xp.astype(q_float >> mant, q_dtype)
    new_biased = q_biased + g
    normal_bits = xp.astype(xp.astype(q_float, q_dtype) + (g << mant), int_dtype)
    below = xp.where(new_biased < 1, 1 - new_biased, 0)
    significand = xp.astype((q_float & ((1 << mant) - 1)) | (1 << mant), q_dtype)
    sub_bits = xp.astype(_shift_round_even(xp, significand, below), int_dtype)
    out = xp.where(new_biased >= field, field << mant, xp.where(new_biased >= 1, normal_bits, sub_bits))
    out = xp.where(q == 0, 0, out)
    return xp.where(grid.finite, out, magnitude), negative  # Inf and NaN as they came


def _quiet_blocks(sub: Any, block_drew: tuple) -> Any:
    """The elements of blocks that drew nothing: None (all drew), True (none), or a boolean array."""
    normal_drew, sub_drew = block_drew
    if sub is None or normal_drew == sub_drew:
        return None if normal_drew else True
    return sub if normal_drew else ~sub


def _shift_round_even(xp: Any, n: Any, shift: Any) -> Any:
    """``n / 2**shift`` rounded to nearest, ties to even, for non-negative integers (shift >= 0)."""
    cap = 29 if n.dtype == xp.int32 else 60  # n < 2**(mant + 1): a cap shift drops all of it
    capped = xp.where(shift > cap, cap, shift)
    floor = n >> capped
    rem = n - (floor << capped)
    half = xp.ones_like(capped) << xp.where(capped > 0, capped - 1, 0)
    up = (shift > 0) & ((rem > half) | ((rem == half) & ((floor & 1) == 1)))
    return floor + xp.astype(up, floor.dtype)


def _apply_limits(xp: Any, out: Any, v: Any, plan: ElementwisePlan, carrier: Carrier) -> Any:
    """chop.m's overflow rules (on the input ``v``), then its underflow rules, on the bit patterns ``out``."""
    inf_bits, mode = carrier.field << carrier.mant, plan.mode
    xmax_bits, sign = plan.xmax_bits, carrier.sign_bit
    inf, big = float("inf"), plan.xmax_gt  # normal thresholds: float comparisons are safe
    if mode in (1, 6):
        out = xp.where(v >= plan.xboundary_ge, inf_bits, out)
        out = xp.where(v <= -plan.xboundary_ge, inf_bits | sign, out)
    elif mode == 2:
        out = xp.where(v > big, inf_bits, out)
        out = xp.where((v < -big) & (v != -inf), xmax_bits | sign, out)
    elif mode == 3:
        out = xp.where((v > big) & (v != inf), xmax_bits, out)
        out = xp.where(v < -big, inf_bits | sign, out)
    else:
        out = xp.where((v > big) & (v != inf), xmax_bits, out)
        out = xp.where((v < -big) & (v != -inf), xmax_bits | sign, out)

    size = out & carrier.abs_mask
    negative = out < 0
    small = size < plan.min_rep_lt_bits
    flushed = xp.where(small, 0, out)
    min_bits = plan.min_rep_bits
    if mode == 1:
        if plan.keeps_subnormals:
            to_min = small & (size > plan.half_gt_bits)
        else:
            to_min = small & (size >= plan.half_ge_bits)
        target = (out & sign) | min_bits
    elif mode == 2:
        to_min, target = small & ~negative & (size != 0), min_bits
    elif mode == 3:
        to_min, target = small & negative & (size != 0), min_bits | sign
    else:
        return flushed
    return xp.where(to_min, target, flushed)


def encode_bits(xp: Any, out: Any, v_bits: Any, encoding: Encoding, carrier: Carrier) -> Any:
    """A format's encoding (:func:`pychop_compat.rules.cpfloat.apply_encoding`) on chop's results
    ``out`` given ``v_bits``, the inputs', as bit patterns (XLA flushes subnormal operands)."""
    abs_mask, sign = carrier.abs_mask, carrier.sign_bit
    inf_bits = carrier.field << carrier.mant
    if encoding.tie_bits >= 0:
        out = xp.where((v_bits & abs_mask) == encoding.tie_bits, (v_bits & sign) | encoding.xmax_bits, out)
    infinite = (out & abs_mask) == inf_bits
    if encoding.saturate:
        out = xp.where(infinite, (out & sign) | encoding.xmax_bits, out)
    elif encoding.no_inf:
        out = xp.where(infinite, inf_bits | (1 << (carrier.mant - 1)), out)  # a quiet NaN
    if encoding.no_negative_zero:
        out = xp.where((out & abs_mask) == 0, 0, out)
    return out


# --- the two fast forms (measured; see chop_elementwise) ---------------------------------------

def _nearest_constants(spec: RoundingSpec, carrier: Carrier) -> Optional[tuple]:
    """Constants of :func:`_nearest_on_bits` where it gives chop's rounding (round to nearest,
    explim, ``2 <= t <= mant``, the carrier's exponents, an all-ones xmax significand), else None:
    xmax, the smallest kept, the largest number rounding to 0 (bit patterns), the most bits dropped."""
    fmt, mant, bias, dt = spec.fmt, carrier.mant, carrier.bias, carrier.np_float
    if (spec.round != 1 or spec.flips or not spec.limits_exponent or not 2 <= fmt.t <= mant
            or fmt.emin < 1 - bias or fmt.emax > bias or fmt.xmax != (2.0 - 2.0 ** (1 - fmt.t)) * 2.0 ** fmt.emax):
        return None
    normal_drop = mant + 1 - fmt.t
    if spec.keeps_subnormals:
        smallest = 2.0 ** (fmt.emin - fmt.t + 1)  # xmins, the quantum of the subnormal block
        # Below xmins chop.m rounds x to t bits at its own exponent, then gives xmins where
        # that is above xmins/2: x > xmins/2 * (1 + 2^-t) (the tie goes to the even xmins/2).
        to_zero = at_most(smallest / 2 * (1 + 2.0 ** -fmt.t), dt)
        most_dropped = normal_drop + (fmt.emin + bias - 1)  # at the carrier's smallest exponent
    else:
        if fmt.t < 3:
            return None
        smallest = 2.0 ** fmt.emin  # xmin
        # Below xmin chop.m rounds x to the subnormal grid (multiples of xmins = 2^(emin-t+1)),
        # then gives xmin where that is at least xmin/2: x >= xmin/2 - xmins/2 (the tie goes
        # to the even xmin/2, 2^(t-2) steps, when t >= 3).
        threshold = smallest / 2 * (1 - 2.0 ** (1 - fmt.t))
        to_zero = at_most(threshold, dt)
        if to_zero == threshold:  # a carrier number: the largest one below it
            to_zero = float(np.nextafter(dt.type(threshold), dt.type(0)))
        most_dropped = normal_drop
    return (carrier.bits(fmt.xmax), carrier.bits(smallest), carrier.bits(to_zero), most_dropped)


def _stochastic_constants(spec: RoundingSpec, carrier: Carrier) -> Optional[tuple]:
    """Constants of :func:`_stochastic_on_bits` where it gives chop's rounding (modes 5, 6, no flips,
    explim, ``2 <= t <= mant``, ``2^(emins - 1)`` in the carrier), else None: the bit patterns of
    ``2^emin``, ``2^emins``, the smallest kept, the overflow threshold and its result."""
    fmt, mant, bias, dt = spec.fmt, carrier.mant, carrier.bias, carrier.np_float
    if (spec.round < 5 or spec.flips or not spec.limits_exponent or not 2 <= fmt.t <= mant
            or fmt.emin < 1 - bias or fmt.emax > bias or fmt.emins - 1 < 1 - bias - mant):
        return None
    lim = range_limits(spec, carrier)
    if spec.round == 5:
        over, over_value = carrier.bits(lim.xmax_gt), carrier.bits(lim.xmax_value)
    else:
        over, over_value = carrier.bits(lim.xboundary_ge), carrier.field << mant
    return (carrier.bits(2.0 ** fmt.emin), carrier.bits(2.0 ** fmt.emins), carrier.bits(lim.min_rep_lt),
            over, over_value)


def _nearest_on_bits(ns: Namespace, v: Any, plan: ElementwisePlan, carrier: Carrier, constants: tuple) -> Any:
    """Round to nearest on the bit pattern, the range rules folded into thresholds
    (:func:`_nearest_constants`): the general form's result in a third of its operations.
    Rounding the pattern to a multiple of ``2^s`` is rounding to ``t`` bits (``s = mant + 1 -
    t``, one more per binade of chop.m's subnormal block); below the smallest kept number the
    result is 0 or that number, by chop.m's rule."""
    xp = ns.xp
    xmax_bits, smallest_bits, to_zero_bits, most_dropped = constants
    mant, sign, inf_bits = carrier.mant, carrier.sign_bit, carrier.field << carrier.mant
    bits = ns.bitcast(v, xp.int64 if mant == 52 else xp.int32)
    magnitude = bits & carrier.abs_mask
    low, high = mant + 1 - plan.t, min(most_dropped, (62 if mant == 52 else 30))
    s = (plan.emin + carrier.bias + mant + 1 - plan.t) - (magnitude >> mant)
    # (minimum and maximum of arrays: a scalar bound is not in the standard, and xp.clip breaks Dynamo's graph)
    s = xp.maximum(xp.minimum(s, xp.full_like(s, high)), xp.full_like(s, low))
    unit = xp.ones_like(s) << s
    odd = ((magnitude | (1 << mant)) >> s) & 1  # the hidden bit when s = mant (xmins's binade)
    r = (magnitude + ((unit >> 1) - 1) + odd) & -unit  # (NaN patterns may wrap: replaced below)
    r = xp.where(r > xmax_bits, inf_bits, r)  # chop's overflow: past xmax after rounding
    r = xp.where(magnitude < smallest_bits, smallest_bits, r) | (bits & sign)
    r = xp.where(magnitude <= to_zero_bits, 0, r)  # +0, as chop.m's range rules give
    return xp.where(magnitude > inf_bits, bits, r), bits  # NaN as it came


def _stochastic_on_bits(ns: Namespace, v: Any, plan: ElementwisePlan, carrier: Carrier, constants: tuple,
                        u: Any) -> Any:
    """Stochastic rounding on the bit pattern, the range rules folded into thresholds
    (:func:`_stochastic_constants`).  Bits dropped: ``s = mant + 1 - t`` from ``2^emin``, ``s +
    emin + bias - max(E, 1)`` in chop.m's subnormal block, the value's own grid below ``2^emins``
    (which rounds to at most ``2^(emins - 1)``, under the smallest kept, as chop.m's grid does)."""
    xp = ns.xp
    sub_top, sub_low, min_rep, over, over_value = constants
    mant, bias, sign, inf_bits = carrier.mant, carrier.bias, carrier.sign_bit, carrier.field << carrier.mant
    s_norm = mant + 1 - plan.t
    bits = ns.bitcast(v, xp.int64 if mant == 52 else xp.int32)
    magnitude = bits & carrier.abs_mask
    field = magnitude >> mant
    s_sub = (s_norm + plan.emin + bias) - xp.where(field < 1, 1, field)  # the subnormal block: xmins's grid
    # e = emins - 1: the value's own t-bit grid, fewer pattern bits for a carrier subnormal, at
    # most mant of them (past that a carry would leave the subnormals: every such result is 0).
    s_carrier_sub = min(max(s_norm + plan.emins + bias - 2, 0), mant)
    s_low = xp.where(field == 0, xp.full_like(field, s_carrier_sub), s_norm)
    s = xp.where(magnitude >= sub_top, s_norm, xp.where(magnitude >= sub_low, s_sub, s_low))
    unit = xp.ones_like(s) << s
    dropped = magnitude & (unit - 1)
    u = _as(xp, u, v.dtype)
    if plan.mode == 5:
        fraction = xp.astype(dropped, v.dtype) * ns.bitcast((bias - s) << mant, v.dtype)  # 2^-s, exact
        up = (dropped != 0) & (u <= fraction)
    else:
        up = (dropped != 0) & (u <= 0.5)
    r = (magnitude - dropped) + xp.where(up, unit, 0)
    r = xp.where(r < min_rep, 0, r | (bits & sign))  # +0 under the smallest kept
    if plan.mode == 5:
        r = xp.where((magnitude > over) & (magnitude < inf_bits), over_value | (bits & sign), r)
    else:
        r = xp.where(magnitude >= over, inf_bits | (bits & sign), r)
    return xp.where(magnitude >= inf_bits, bits, r), bits  # Inf, NaN


# --- the elements' random numbers: one function per source ---------------------------------------

def flip_mask(xp: Any, u_choice: Any, u_bit: Any, p: float, t: int, dtype: Any = None) -> Any:
    """The bit flips of two uniform numbers per element: bit ``1 + floor((t - 1) u_bit)`` (as
    ``2**(bit - 1)``, integers of ``dtype``, int64 by default) where ``u_choice <= p``, else 0.
    (The clamp to ``t - 1`` guards a product rounded in float32.)"""
    shift = xp.astype(xp.floor(u_bit * (t - 1)), xp.int64 if dtype is None else dtype)
    shift = xp.where(shift > t - 2, t - 2, shift)
    return xp.where(u_choice <= p, xp.ones_like(shift) << shift, 0)


def counter_draws(ns: Namespace, plan: ElementwisePlan, stream: CounterStream, index: Any) -> ElementDraws:
    """The counter's numbers: element ``index[i]`` (row-major) gets ``u_s(stream.offset + index[i])``."""
    xp = ns.xp
    keys, offset = stream.keys, stream.offset
    u_round = uniform(xp, keys[0], offset, index) if plan.stochastic else None
    flip = None
    if plan.flips:
        flip = flip_mask(xp, uniform(xp, keys[1], offset, index), uniform(xp, keys[2], offset, index),
                         plan.p, plan.t)
    return ElementDraws(u_round, flip)


def host_draws(ns: Namespace, v: Any, plan: ElementwisePlan, spec: RoundingSpec,
               sources: RandomSources) -> ElementDraws:
    """Numbers drawn by the host in chop.m's order (:func:`~pychop_compat.random.sources.host_draw_plan`)
    for the 1-D array ``v`` in column-major order, scattered into per-element arrays on its device."""
    import array_api_compat

    xp = ns.xp
    device = array_api_compat.device(v)
    n = int(v.shape[0])
    need, sub = draw_needs(ns, v, plan)
    n_sub = _count(xp, sub) if sub is not None else 0
    normal = ~sub if sub is not None else None
    counts = (0, 0)
    if plan.stochastic:
        counts = (_count(xp, need & normal) if normal is not None else _count(xp, need),
                  _count(xp, need & sub) if sub is not None else 0)
    blocks = host_draw_plan(spec, sources, (n - n_sub, n_sub), counts)

    def scatter(values: list, masks: tuple, dtype: Any) -> Any:
        out = xp.zeros(n, dtype=dtype, device=device)
        for block_values, mask in zip(values, masks):
            if block_values is not None and block_values.size:
                on_device = xp.asarray(block_values, device=device)
                if mask is None:
                    out = on_device
                else:
                    out[mask] = on_device  # (boolean-mask assignment keeps the order)
        return out

    u_round = flip = None
    if plan.stochastic:
        masks = (need if normal is None else need & normal, None if sub is None else need & sub)
        u_round = scatter([b[0] for b in blocks], masks, xp.float64)
    if plan.flips:
        flip = scatter([b[1] for b in blocks], (normal, sub), xp.int64)
    return ElementDraws(u_round, flip, (counts[0] > 0, counts[1] > 0) if plan.stochastic else (True, True))


def _count(xp: Any, mask: Any) -> int:
    return int(xp.sum(xp.astype(mask, xp.int64)))
