"""What every device kernel derives from a spec: carriers, limits, encodings.

The namespace kernel (:mod:`.elementwise`), the CUDA and Triton kernels and
the router read these: the carriers' bit layouts (:class:`Carrier`), chop.m's
thresholds as exact comparisons in a carrier (:func:`range_limits`), and the
elements rounding on the bit pattern handles alone (:func:`regular_range`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

import numpy as np

from ..spec import RoundingSpec

__all__ = ["Carrier", "CARRIERS", "carrier_for", "clamp_exponent", "at_least", "at_most", "as_dtype",
           "Encoding", "encoding_for", "elementwise_covers", "Limits", "range_limits", "RegularRange", "regular_range",
           "SubnormalBlock", "subnormal_block", "zero_keeps_sign"]

# --- thresholds: chop.m compares with doubles; make the comparisons exact in float32 --------

def at_least(value: float, dtype: Any) -> float:
    """The smallest ``dtype`` number >= value, so that ``x >= value`` iff ``x >= result``."""
    with np.errstate(over="ignore"):
        f = dtype.type(value)
    if float(f) < value:
        f = np.nextafter(f, dtype.type(np.inf))
    return float(f)


def at_most(value: float, dtype: Any) -> float:
    """The largest ``dtype`` number <= value, so that ``x > value`` iff ``x > result``."""
    with np.errstate(over="ignore"):
        f = dtype.type(value)
    if float(f) > value:
        f = np.nextafter(f, dtype.type(-np.inf))
    return float(f)


def as_dtype(value: float, dtype: Any) -> float:
    """``value`` stored into a ``dtype`` array (rounded to nearest, as NumPy's assignment)."""
    with np.errstate(over="ignore"):
        return float(dtype.type(value))


@dataclass(frozen=True)
class Carrier:
    """Bit layout and chop's thresholds for one floating dtype (float32 or float64)."""

    np_float: np.dtype
    np_int: np.dtype
    mant: int        # stored significand bits
    bias: int
    field: int       # all-ones exponent field (Inf, NaN)
    abs_mask: int
    sign_bit: int

    def bits(self, value: float) -> int:
        return int(np.array(value, dtype=self.np_float).view(self.np_int))

    @property
    def min_normal_bits(self) -> int:
        return 1 << self.mant

    @property
    def max_finite_bits(self) -> int:
        return (self.field << self.mant) - 1


#: The carriers by dtype name: bit layouts of float32 and float64.
CARRIERS = {
    "float64": Carrier(np.dtype(np.float64), np.dtype(np.int64), 52, 1023, 0x7FF,
                        0x7FFF_FFFF_FFFF_FFFF, -(1 << 63)),
    "float32": Carrier(np.dtype(np.float32), np.dtype(np.int32), 23, 127, 0xFF,
                        0x7FFF_FFFF, -(1 << 31)),
}


def clamp_exponent(e: int) -> int:
    """Format exponents far outside every carrier's range act like +-2^30 (keeps int32 safe)."""
    return max(-(1 << 30), min(1 << 30, int(e)))


@dataclass(frozen=True)
class Limits:
    """chop.m's range thresholds as exact comparisons and assignable values in one dtype."""

    xboundary_ge: float   # x >= xboundary   <=> x >= xboundary_ge
    xmax_gt: float        # x > xmax         <=> x > xmax_gt
    xmax_value: float     # xmax stored in the dtype
    min_rep_lt: float     # |c| < min_rep    <=> |c| < min_rep_lt
    half_gt: float        # |c| > min_rep/2  <=> |c| > half_gt
    half_ge: float        # |c| >= min_rep/2 <=> |c| >= half_ge
    min_rep_value: float  # min_rep stored in the dtype


def range_limits(spec: RoundingSpec, carrier: Carrier) -> Limits:
    """chop.m's range thresholds for ``spec`` as exact comparisons and stored values in ``carrier``."""
    fmt, dt = spec.fmt, carrier.np_float
    min_rep = np.float64(spec.min_rep)
    half = float(min_rep / 2)  # in double, as chop.m (xmins/2 of 'd' is 0)
    return Limits(
        xboundary_ge=at_least(fmt.xboundary, dt), xmax_gt=at_most(fmt.xmax, dt),
        xmax_value=as_dtype(fmt.xmax, dt), min_rep_lt=at_least(float(min_rep), dt),
        half_gt=at_most(half, dt), half_ge=at_least(half, dt),
        min_rep_value=as_dtype(float(min_rep), dt),
    )


def zero_keeps_sign(spec: RoundingSpec) -> bool:
    """Whether chop.m returns ``-0`` for ``-0`` in a deterministic mode: unless its underflow rule
    applies, which writes ``+0`` over every magnitude below a positive (in double) min_rep."""
    return not (spec.limits_exponent and np.float64(spec.min_rep) > 0)


@dataclass(frozen=True)
class Encoding:
    """A format's encoding on chop's results as bit patterns (:func:`.elementwise.encode_bits`);
    ``tie_bits``: ``|x|`` at the overflow threshold, which an ``'fn'`` format rounds to ``xmax``."""

    tie_bits: int
    xmax_bits: int
    saturate: bool
    no_inf: bool
    no_negative_zero: bool


def elementwise_covers(spec: RoundingSpec) -> bool:
    """Whether :mod:`.elementwise` computes ``spec``: chop.m's semantics, or chop's rules on a signed
    format of the catalogue without bit flips (not CPFloat's rules, limited random bits, E8M0)."""
    if not spec.extended:
        return True
    return (not spec.flips and 1 <= spec.round <= 6 and spec.range_rules == "chop" and spec.random_bits == 0
            and spec.flip_scope == "fraction" and spec.fmt.encoding != "e8m0")


def encoding_for(spec: RoundingSpec, carrier: Carrier) -> Optional[Encoding]:
    """The :class:`Encoding` of ``spec``'s format in ``carrier``; None when it changes nothing
    (IEEE formats without saturation, or explim off), as :func:`.rules.cpfloat.apply_encoding`."""
    fmt = spec.fmt
    if not spec.limits_exponent:
        return None
    saturate, no_inf = bool(spec.saturation), not spec.infinity
    if fmt.encoding == "ieee" and not saturate and not no_inf:
        return None
    tie = -1
    if fmt.encoding == "fn" and spec.round == 1 and as_dtype(fmt.xboundary, carrier.np_float) == fmt.xboundary:
        tie = carrier.bits(fmt.xboundary)
    return Encoding(tie, carrier.bits(as_dtype(fmt.xmax, carrier.np_float)), saturate, no_inf,
                    fmt.encoding == "fnuz")


def carrier_for(dtype_name: str) -> Carrier:
    """The :class:`Carrier` of ``'float32'`` or ``'float64'``."""
    return CARRIERS[dtype_name]


@dataclass(frozen=True)
class RegularRange:
    """The elements that rounding on the bit pattern handles alone: finite normal inputs with
    magnitude bits in ``[low, high]`` lose the same ``shift`` bits (a carry moves to the next
    binade) and meet no range rule of chop.m."""

    shift: int  # significand bits dropped by rounding to t bits (0: nothing to round)
    low: int    # smallest regular magnitude, as bits
    high: int   # largest regular magnitude, as bits


def regular_range(spec: RoundingSpec, carrier: Carrier) -> RegularRange:
    """The :class:`RegularRange` of ``spec`` on ``carrier``: every finite normal number with
    explim off, else from xmin to below xboundary (round to nearest) or to xmax."""
    fmt, dt = spec.fmt, carrier.np_float
    shift = max(carrier.mant - fmt.t + 1, 0)
    low, high = carrier.min_normal_bits, carrier.max_finite_bits
    if spec.limits_exponent:
        low = max(low, carrier.bits(at_least(fmt.xmin, dt)))
        if spec.round == 1:
            high = min(high, carrier.bits(at_least(fmt.xboundary, dt)) - 1)
        else:
            high = min(high, carrier.bits(at_most(fmt.xmax, dt)))
    return RegularRange(shift, low, high)


@dataclass(frozen=True)
class SubnormalBlock:
    """chop.m's rules below xmin (modes 1-4, ``subnormal = 1``) on the bit pattern: in ``[xmins,
    xmin)`` an element of exponent field ``E`` drops ``shift + max(emin_field - max(E, 1), 0)``
    bits; below xmins round to nearest gives xmins exactly above ``2^(emins-1) * (1 + 2^-t)``
    (chop.m rounds to ``t`` bits first, a tie going to xmins/2), the directed modes by the sign."""

    xmins: int       # xmins as bits: the block's lowest magnitude
    tiny_cut: int    # 2^(emins-1) * (1 + 2^-t) as bits: round to nearest gives xmins above it
    emin_field: int  # emin + bias: the carrier exponent field of xmin


def subnormal_block(spec: RoundingSpec, carrier: Carrier) -> Optional[SubnormalBlock]:
    """The :class:`SubnormalBlock` of ``spec`` on ``carrier``, or None where these bit rules do not
    hold (no limits, subnormals flushed, ``t < 2``, ``emin`` or the thresholds beyond the carrier)."""
    fmt = spec.fmt
    if not (spec.limits_exponent and spec.keeps_subnormals) or fmt.t < 2:
        return None
    emins = fmt.emin - fmt.t + 1
    if fmt.emin < 1 - carrier.bias or emins - 1 - fmt.t < 1 - carrier.bias - carrier.mant:
        return None
    cut = np.ldexp(np.float64(1.0) + np.ldexp(1.0, -fmt.t), emins - 1)
    return SubnormalBlock(carrier.bits(np.ldexp(1.0, emins)), carrier.bits(cut), fmt.emin + carrier.bias)
