"""chop as a pure elementwise function, written once against an array namespace.

Each element's result depends only on its value and, in the random modes, on
its own numbers (one for stochastic rounding, two for a bit flip).  Written
with ``where`` instead of branches on data and with bit-pattern views instead
of ``frexp``, so that it runs unchanged under ``jax.jit`` and ``jax.vmap``
(and on NumPy arrays, which is how it is tested against the other engines).

The algorithm is chop.m's, as in :mod:`pychop_compat.rules.chop` and the
general path of :mod:`.torch_engine`: scale each element to an integer grid
(``t`` bits in the normal range, the grid of ``xmins`` in chop.m's subnormal
block) with two exact power-of-two factors built from bits, round, flip,
scale back (the second factor rounds once, as ``ldexp``), then chop.m's
overflow and underflow rules.  Every step is exact or a single IEEE rounding,
so no fused multiply-add or reassociation can change a result; the caller's
library must keep subnormal numbers (see :mod:`.jax_engine` for XLA).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from ..spec import FLIP_PRECISION_ERROR, RoundingSpec
from .device_plan import (CARRIERS, Carrier, Encoding, clamp_exponent, encoding_for,  # thresholds, shared
                          range_limits)  # with the device engines

__all__ = ["Namespace", "chop_elementwise", "encode_bits", "numpy_namespace"]

#: The error for bit flips with a precision below 2 (the same words on every engine).


@dataclass(frozen=True)
class Namespace:
    """What the algorithm needs from an array library: its functions and a bit cast.

    ``xp`` provides ``where, abs, floor, ceil, round, trunc, isfinite, copysign,
    left_shift, ones_like`` and the dtypes; ``bitcast(a, dtype)`` reinterprets
    the bits of ``a`` as ``dtype`` (same item size).
    """

    xp: Any
    bitcast: Callable[[Any, Any], Any]
    wide: bool = True  # 64-bit types exist (JAX: jax_enable_x64); else float32 input with t <= 24 only


def _carrier(v):
    return CARRIERS[str(v.dtype)]


def chop_elementwise(ns: Namespace, v: Any, spec: RoundingSpec, u_round: Any = None, u_choice: Any = None,
                     u_bit: Any = None) -> Any:
    """chop.m on every element of ``v`` (float32 or float64, any shape): a new array.

    Parameters
    ----------
    ns : Namespace
        The array library.
    v : array
        The values (never modified).
    spec : RoundingSpec
        The resolved options: chop.m's semantics, or chop's rules on a signed
        format of the catalogue (:func:`.device_plan.elementwise_covers`), whose
        encoding is applied last (:func:`encode_bits`).
    u_round : array, optional
        Modes 5 and 6: each element's number in [0, 1), same shape as ``v``,
        compared in ``v``'s precision (as chop.m compares in the input's class).
    u_choice, u_bit : array, optional
        With ``flip = 1``: the element's bit ``1 + floor((t - 1) u_bit)`` of the
        rounded integer is flipped when ``u_choice <= p`` (MATLAB's ``randi`` rule).

    Notes
    -----
    Integer arithmetic on the bit patterns does all the work that may meet a
    subnormal number (XLA on the CPU treats subnormal operands and results of
    float arithmetic and comparisons as zero): an element is
    ``m * 2^E0`` with an integer significand ``m``; chop.m's grid for it is
    ``2^g``; the rounded integer ``q`` and the result ``q * 2^g`` are built
    from integers, and the range rules compare bit patterns.  Float operations
    only touch normal numbers (integers converted to floats, the fraction
    ``rem * 2^-k`` of stochastic rounding, overflow thresholds).

    Every element is independent: unlike chop.m on a whole array, an element
    whose block drew no number is still handled as if it drew, so zeros come
    back as +0 in the random modes (the sign of zero is the one difference
    MATLAB comparisons ignore).
    """
    xp = ns.xp
    carrier = _carrier(v)
    int_dtype = xp.int64 if carrier.mant == 52 else xp.int32
    fmt, mode, t = spec.fmt, spec.round, spec.fmt.t
    if spec.flips and t < 2:
        raise ValueError(FLIP_PRECISION_ERROR)
    # The integers (significands shifted to chop.m's grid) need up to t + 2 bits.
    q_dtype = xp.int64 if ns.wide else xp.int32
    emin, emins = clamp_exponent(fmt.emin), clamp_exponent(fmt.emins)
    mant, bias, field = carrier.mant, carrier.bias, carrier.field

    bits = ns.bitcast(v, int_dtype)
    magnitude = bits & carrier.abs_mask
    negative = bits < 0
    biased = magnitude >> mant
    finite = biased != field
    # chop.m's exponent e (|v| = 2^e * 1.f), exact for the carrier's subnormals; -1 for 0, Inf, NaN.
    tiny = (biased == 0) & (magnitude != 0)
    lead = (ns.bitcast(magnitude.astype(v.dtype), int_dtype) >> mant) - bias
    e = xp.where(tiny, lead + (1 - bias - mant), biased - bias)
    e = xp.where((magnitude == 0) | ~finite, -1, e)
    # |v| = m * 2^E0 with the integer significand m (hidden bit included for normal numbers).
    m = xp.where(biased == 0, magnitude, (magnitude & ((1 << mant) - 1)) | (1 << mant)).astype(q_dtype)
    m = xp.where(finite, m, 0)
    e0 = xp.where(biased == 0, 1 - bias - mant, biased - bias - mant).astype(q_dtype)

    # chop.m's grid: t bits at the element's exponent, the grid of xmins in its subnormal block.
    sub = ((e < emin) & (e >= emins)) if spec.limits_exponent else None
    g = ((xp.where(sub, emin, e) if sub is not None else e) - (t - 1)).astype(q_dtype)
    k = g - e0  # bits dropped (k <= 0: the grid is finer than the element's spacing; nothing to round)
    k_down = xp.minimum(xp.maximum(k, 0), 60)  # m < 2**54, so 60 drops everything
    scaled = m << xp.maximum(-k, 0)
    q = scaled >> k_down
    rem = scaled - (q << k_down)
    inexact = rem != 0

    if mode == 1:
        half = xp.left_shift(xp.ones_like(k_down), xp.maximum(k_down - 1, 0))
        near = (k > 0) & (k <= 60)
        up = near & ((rem > half) | ((rem == half) & ((q & 1) == 1)))
    elif mode == 2:
        up = inexact & ~negative
    elif mode == 3:
        up = inexact & negative
    elif mode == 4:
        up = None
    else:
        if mode == 5:  # rem * 2^-k: exact, and normal (rem != 0 only where k <= mant + 1)
            k_fraction = xp.minimum(k_down, mant + 1)
            threshold = rem.astype(v.dtype) * _pow2(ns, -k_fraction.astype(int_dtype), carrier, v.dtype)
        else:
            threshold = 0.5
        up = inexact & (u_round.astype(v.dtype) <= threshold)
        negative = negative & (magnitude != 0)  # chop.m: where(y < 0, -r, r) turns -0 into +0
    if up is not None:
        q = q + up.astype(q_dtype)

    if spec.flips:
        shift = xp.floor(u_bit * (t - 1)).astype(q_dtype)
        shift = xp.where(shift > t - 2, t - 2, shift)  # u_bit < 1; guards a product rounded in float32
        chosen = (u_choice <= spec.p) & finite
        negative = negative & ~(chosen & (q == 0))  # chop.m: -0 * 2^s flipped is positive
        q = xp.where(chosen, q ^ xp.left_shift(xp.ones_like(shift), shift), q)

    # q * 2^g in the carrier: q rounded to the carrier's precision (via double, as chop.m converts),
    # then g added to its exponent field, or shifted into the subnormal range (rounding to even).
    wide_float = xp.float64 if ns.wide else v.dtype
    q_float = ns.bitcast(q.astype(wide_float).astype(v.dtype), int_dtype)
    q_biased = (q_float >> mant).astype(q_dtype)
    new_biased = q_biased + g
    normal_bits = (q_float.astype(q_dtype) + (g << mant)).astype(int_dtype)
    below = xp.maximum(1 - new_biased, 0)
    significand = ((q_float & ((1 << mant) - 1)) | (1 << mant)).astype(q_dtype)
    sub_bits = _shift_round_even(xp, significand, below).astype(int_dtype)
    out = xp.where(new_biased >= field, field << mant, xp.where(new_biased >= 1, normal_bits, sub_bits))
    out = xp.where(q == 0, 0, out)
    out = xp.where(finite, out, magnitude)  # Inf and NaN as they came
    out = out | xp.where(negative, carrier.sign_bit, 0).astype(int_dtype)
    if spec.limits_exponent:
        out = _apply_limits(ns, out, v, spec, carrier, range_limits(spec, carrier))
        encoding = encoding_for(spec, carrier)
        if encoding is not None:
            out = encode_bits(xp, out, bits, encoding, carrier)
    return ns.bitcast(out.astype(int_dtype), v.dtype)


def encode_bits(xp: Any, out: Any, v_bits: Any, encoding: Encoding, carrier: Carrier) -> Any:
    """A format's encoding on chop's results, as carrier bit patterns (any array library).

    ``out``: the patterns of chop's results; ``v_bits``: those of the inputs (signed
    integers of the carrier's width).  The rules of
    :func:`pychop_compat.rules.cpfloat.apply_encoding`: the round-to-nearest tie at the
    overflow threshold of an ``'fn'`` format goes to the even ``+-xmax``; +-Inf results
    become +-xmax with saturation, else NaN when the format has no infinity; ``'fnuz'``
    formats have no -0.  Bit patterns, not float comparisons: XLA on the CPU treats
    subnormal operands of float comparisons as zero.
    """
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


def _pow2(ns: Namespace, k, carrier, float_dtype):
    """2**k for integers k in the carrier's normal exponent range, exactly, from its bits."""
    return ns.bitcast(ns.xp.left_shift(k + carrier.bias, carrier.mant), float_dtype)


def _shift_round_even(xp, n, shift):
    """``n / 2**shift`` rounded to nearest, ties to even, for non-negative integers (shift >= 0)."""
    capped = xp.minimum(shift, 60)
    floor = n >> capped
    rem = n - (floor << capped)
    half = xp.left_shift(xp.ones_like(capped), xp.maximum(capped - 1, 0))
    up = (shift > 0) & (shift <= 60) & ((rem > half) | ((rem == half) & ((floor & 1) == 1)))
    return floor + up.astype(floor.dtype)


def _apply_limits(ns: Namespace, out, v, spec: RoundingSpec, carrier, lim):
    """chop.m's overflow rules (decided on the input ``v``), then its underflow rules, on the
    result's bit patterns ``out`` (magnitudes compare as their patterns, subnormals included)."""
    xp = ns.xp
    inf_bits, mode = carrier.field << carrier.mant, spec.round
    xmax_bits, sign = carrier.bits(lim.xmax_value), carrier.sign_bit
    inf, big = float("inf"), lim.xmax_gt  # normal thresholds: float comparisons are safe
    if mode in (1, 6):
        out = xp.where(v >= lim.xboundary_ge, inf_bits, out)
        out = xp.where(v <= -lim.xboundary_ge, inf_bits | sign, out)
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
    small = size < carrier.bits(lim.min_rep_lt)
    flushed = xp.where(small, 0, out)
    min_bits = carrier.bits(lim.min_rep_value)
    if mode == 1:
        if spec.keeps_subnormals:
            to_min = small & (size > carrier.bits(lim.half_gt))
        else:
            to_min = small & (size >= carrier.bits(lim.half_ge))
        target = xp.where(negative, min_bits | sign, min_bits)
    elif mode == 2:
        to_min, target = small & ~negative & (size != 0), min_bits
    elif mode == 3:
        to_min, target = small & negative & (size != 0), min_bits | sign
    else:
        return flushed
    return xp.where(to_min, target, flushed)


def numpy_namespace() -> Namespace:
    """The NumPy namespace (for tests and host fallbacks)."""
    import numpy as np

    return Namespace(np, lambda a, dtype: a.view(dtype))
