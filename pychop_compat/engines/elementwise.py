"""chop as a pure elementwise function, written once against an array namespace.

Each element's result depends only on its value and, in the random modes, on
its own numbers (one for stochastic rounding, two for a bit flip).  Written
with ``where`` instead of branches on data and with bit-pattern views instead
of ``frexp``, so that it runs unchanged under ``jax.jit`` and ``jax.vmap``
(and on NumPy arrays, which is how it is tested against the other engines).

The algorithm is chop.m's, as in :mod:`pychop_compat.reference` and the
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
from typing import Any, Callable, Optional

from ..options import ChopSpec
from .torch_engine import _CARRIERS, _clamp_exponent, _limits  # thresholds, shared with the device engines

__all__ = ["Namespace", "chop_elementwise", "FLIP_PRECISION_ERROR"]

FLIP_PRECISION_ERROR = "Bit flips need a precision t >= 2 (a bit below the leading one)."


@dataclass(frozen=True)
class Namespace:
    """What the algorithm needs from an array library: its functions and a bit cast.

    ``xp`` provides ``where, abs, floor, ceil, round, trunc, isfinite, copysign,
    left_shift, ones_like`` and the dtypes; ``bitcast(a, dtype)`` reinterprets
    the bits of ``a`` as ``dtype`` (same item size).
    """

    xp: Any
    bitcast: Callable[[Any, Any], Any]


def _carrier(v):
    return _CARRIERS[str(v.dtype)]


def chop_elementwise(ns: Namespace, v, spec: ChopSpec, u_round=None, u_choice=None, u_bit=None):
    """chop.m on every element of ``v`` (float32 or float64, any shape): a new array.

    Parameters
    ----------
    ns : Namespace
        The array library.
    v : array
        The values (never modified).
    spec : ChopSpec
        The resolved options (chop.m's semantics; not ``extended`` ones).
    u_round : array, optional
        Modes 5 and 6: each element's number in (0, 1), same shape as ``v``,
        compared in ``v``'s precision (as chop.m compares in the input's class).
    u_choice, u_bit : array, optional
        With ``flip = 1``: the element's bit ``1 + floor((t - 1) u_bit)`` of the
        rounded integer is flipped when ``u_choice <= p`` (MATLAB's ``randi`` rule).

    Notes
    -----
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
    emin, emins = _clamp_exponent(fmt.emin), _clamp_exponent(fmt.emins)

    def pow2(k):  # 2**k for k in the carrier's normal exponent range, exactly, from its bits
        return ns.bitcast(xp.left_shift(k + carrier.bias, carrier.mant), v.dtype)

    # The exponent e with |v| = 2^e * 1.f, exact for the carrier's subnormals; -1 for 0, Inf, NaN.
    bits = ns.bitcast(v, int_dtype)
    magnitude = bits & carrier.abs_mask
    biased = magnitude >> carrier.mant
    tiny = (biased == 0) & (magnitude != 0)
    lead = (ns.bitcast(magnitude.astype(v.dtype), int_dtype) >> carrier.mant) - carrier.bias
    e = xp.where(tiny, lead + (1 - carrier.bias - carrier.mant), biased - carrier.bias)
    e = xp.where((magnitude == 0) | (biased == carrier.field), -1, e)

    sub = ((e < emin) & (e >= emins)) if spec.limits_exponent else None
    s = (t - 1) - (xp.where(sub, emin, e) if sub is not None else e)
    s1 = s >> 1
    s2 = s - s1
    y = v * pow2(s1) * pow2(s2)

    if mode == 1:
        r = xp.round(y)  # half to even
    elif mode == 2:
        r = xp.ceil(y)
    elif mode == 3:
        r = xp.floor(y)
    elif mode == 4:
        r = xp.trunc(y)
    else:
        size = xp.abs(y)
        below = xp.floor(size)
        fraction = size - below
        threshold = fraction if mode == 5 else 0.5
        up = (fraction != 0) & (u_round.astype(v.dtype) <= threshold)
        rounded = xp.where(up, xp.ceil(size), below)
        r = xp.where(y < 0, -rounded, rounded)

    if spec.flips:
        # The scaled integers reach 2**t (t <= 53): int64 even for float32 input.
        shift = xp.floor(u_bit * (t - 1)).astype(xp.int64)
        shift = xp.where(shift > t - 2, t - 2, shift)  # u_bit < 1; guards a rounded product in float32
        chosen = (u_choice <= spec.p) & xp.isfinite(r)
        flipped = xp.where(chosen, xp.abs(r), 0).astype(xp.int64) ^ xp.left_shift(xp.ones_like(shift), shift)
        flipped = flipped.astype(xp.float64).astype(v.dtype)  # as the other engines: via double
        r = xp.where(chosen, xp.where(r < 0, -flipped, flipped), r)

    c = r * pow2(-s1) * pow2(-s2)
    if spec.limits_exponent:
        c = _apply_limits(xp, c, v, spec, _limits(spec, carrier))
    return c


def _apply_limits(xp, c, v, spec: ChopSpec, lim):
    """chop.m's overflow rules (decided on the input ``v``), then its underflow rules (on ``c``)."""
    inf, mode = float("inf"), spec.round
    if mode in (1, 6):
        c = xp.where(v >= lim.xboundary_ge, inf, c)
        c = xp.where(v <= -lim.xboundary_ge, -inf, c)
    elif mode == 2:
        c = xp.where(v > lim.xmax_gt, inf, c)
        c = xp.where((v < -lim.xmax_gt) & (v != -inf), -lim.xmax_value, c)
    elif mode == 3:
        c = xp.where((v > lim.xmax_gt) & (v != inf), lim.xmax_value, c)
        c = xp.where(v < -lim.xmax_gt, -inf, c)
    else:
        c = xp.where((v > lim.xmax_gt) & (v != inf), lim.xmax_value, c)
        c = xp.where((v < -lim.xmax_gt) & (v != -inf), -lim.xmax_value, c)

    size = xp.abs(c)
    small = size < lim.min_rep_lt
    flushed = xp.where(small, 0.0, c)
    if mode == 1:
        to_min = small & ((size > lim.half_gt) if spec.keeps_subnormals else (size >= lim.half_ge))
        target = xp.copysign(xp.full_like(c, lim.min_rep_value), c)
    elif mode == 2:
        to_min, target = small & (c > 0), lim.min_rep_value
    elif mode == 3:
        to_min, target = small & (c < 0), -lim.min_rep_value
    else:
        return flushed
    return xp.where(to_min, target, flushed)


def numpy_namespace() -> Namespace:
    """The NumPy namespace (for tests and host fallbacks)."""
    import numpy as np

    return Namespace(np, lambda a, dtype: a.view(dtype))


def counter_numbers(xp, keys, offset, index, uint64):
    """``u_s(offset + index)`` of :mod:`.device_random` for each key, as float64 arrays.

    ``index`` holds row-major element indices as unsigned 64-bit integers;
    ``offset`` may be a traced scalar.  Unsigned arithmetic wraps modulo
    2**64 as the definition's does, and the right shifts are logical.
    """
    from .device_random import GOLDEN, MIX1, MIX2

    j = index + xp.asarray(offset, dtype=uint64)
    numbers = []
    for key in keys:
        z = j * xp.asarray(GOLDEN, dtype=uint64) + xp.asarray(key, dtype=uint64)
        z = (z ^ (z >> 30)) * xp.asarray(MIX1, dtype=uint64)
        z = (z ^ (z >> 27)) * xp.asarray(MIX2, dtype=uint64)
        z = z ^ (z >> 31)
        numbers.append(((z >> 12).astype(xp.float64) + 0.5) * 2.0**-52)
    return numbers
