"""chop.m's rounding as a chain of elementwise torch operations (no Python branches on data).

This is the rounding of :func:`pychop_compat.chop` for one element, written
so that every step is an elementwise tensor operation whose shape and control
flow do not depend on the values: no ``.item()``, no ``any()``, no indexing
by masks.  ``torch.compile`` (Dynamo and Inductor) traces it into one graph,
and it runs unchanged on CPU and CUDA tensors.  It serves
:mod:`pychop_compat.nn`, where quantizers sit inside compiled training steps.

What it computes, for an element ``x`` of a float32 or float64 tensor and a
:class:`~pychop_compat.spec.RoundingSpec` without bit flips, with chop.m's
rules on any signed format of the catalogue (see :func:`supports`):

1. ``e``, the exponent of ``x`` (``x = 2^e * 1.f``), read from the bit pattern,
   exact for the carrier's subnormals; ``-1`` for 0, Inf and NaN (``frexp``'s rule);
2. chop.m's scale: ``t - 1 - e``, or ``t - 1 - emin`` in its subnormal block
   (``emins <= e < emin``, when the exponent range is on), applied as two
   exact power-of-two factors built from bits (``2^s`` alone can overflow);
3. roundit.m's rounding of the scaled value to an integer (modes 1 to 4; modes
   5 and 6 compare a uniform number per element, given as a tensor, with the
   fraction or with 1/2, in the input's precision, as chop.m does);
4. the scale undone (one rounding, as ``ldexp``) and chop.m's overflow and
   underflow rules (overflow decided on ``x``, underflow on the result);
5. the format's encoding (:func:`apply_encoding`: saturation, no infinity,
   no negative zero, the ``'fn'`` formats' even ``xmax`` at the overflow tie).

Round to nearest with the exponent range on (chop.m's formats from
``'q43'`` to ``'s'``, in a carrier of more precision) has two
shorter paths, both giving chop's values bit for bit:

* in eager mode, float32 values rounded to fp16 or bfloat16 take torch's
  hardware cast to that dtype and back (one correct rounding, chop.m's
  overflow threshold), then +0 where chop.m gives 0: zeros, and the band
  ``xmins/2 < |x| <= xmins/2 * (1 + 2^-t)`` where chop.m rounds twice (to
  ``t`` bits at the value's own exponent, then to 0) and the cast gives
  xmins.  Not under ``torch.compile``: Inductor does not emulate a cast down
  and back up by default (``emulate_precision_casts``) and would return the
  input unchanged;
* otherwise, integer operations on the carrier's bit pattern
  (``_round_nearest_bits``): about twenty operations that Inductor fuses
  into one vectorised loop.

Only multiplications (no additions after a product) touch floating-point
values, so a compiler that fuses multiply-add cannot change a result, and the
carrier's subnormals are never flushed by an operation: a flush would be
visible, and the tests compare compiled and eager results bit for bit on
subnormal inputs.

Given the same uniform number for every element, the results are those of
:func:`pychop_compat.chop` bit for bit, except for the sign of zero in one
case: with ``explim = 0`` and stochastic rounding, chop.m gives ``-0`` for
``-0`` when no element of its block needed a random number (a property of the
whole array, which an elementwise rule cannot see), and ``+0`` otherwise; here
it is always ``+0``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

import numpy as np

from ..spec import RoundingSpec
from .device_plan import CARRIERS, Encoding, elementwise_covers, encoding_for
from .elementwise import encode_bits

__all__ = ["ElementwisePlan", "supports", "round_elementwise", "round_stochastic_eager", "apply_overflow",
           "apply_underflow", "apply_encoding"]


def supports(spec: RoundingSpec) -> bool:
    """True when :func:`round_elementwise` computes chop's rounding for ``spec``.

    That is chop.m's rules (modes 1 to 6) on any format of the catalogue whose
    encoding is signed (the OCP/ML formats included, with their saturation and
    infinity switches: the encoding is applied elementwise after chop's range
    rules; :func:`pychop_compat.kernels.device_plan.elementwise_covers`).
    Left to :func:`pychop_compat.chop`: bit flips (random choices over whole
    blocks), CPFloat's range rules and modes, stochastic rounding with a
    limited number of random bits, and the unsigned E8M0 scale format.
    """
    return not spec.flips and 1 <= spec.round <= 6 and elementwise_covers(spec)


# --- thresholds: chop.m compares with doubles; exact comparisons in float32 ----------------

def _at_least(value: float, dtype: np.dtype) -> float:
    """The smallest ``dtype`` number >= value: ``x >= value`` iff ``x >= result``."""
    with np.errstate(over="ignore"):
        f = dtype.type(value)
    if float(f) < value:
        f = np.nextafter(f, dtype.type(np.inf))
    return float(f)


def _at_most(value: float, dtype: np.dtype) -> float:
    """The largest ``dtype`` number <= value: ``x > value`` iff ``x > result``."""
    with np.errstate(over="ignore"):
        f = dtype.type(value)
    if float(f) > value:
        f = np.nextafter(f, dtype.type(-np.inf))
    return float(f)


def _stored(value: float, dtype: np.dtype) -> float:
    """``value`` assigned into a ``dtype`` array (rounded to nearest)."""
    with np.errstate(over="ignore"):
        return float(dtype.type(value))


# (stored significand bits, exponent bias, all-ones exponent field) of each carrier
_LAYOUT = {"float64": (52, 1023, 0x7FF), "float32": (23, 127, 0xFF)}


@dataclass(frozen=True)
class ElementwisePlan:
    """Everything :func:`round_elementwise` needs, as Python numbers (constants to a compiler).

    Build it with :meth:`from_spec`; it is immutable and hashable.
    """

    carrier: str          # 'float32' or 'float64'
    mant: int
    bias: int
    field: int
    t: int
    emin: int
    emins: int
    mode: int
    limits: bool          # chop's exponent range (explim)
    keeps_subnormals: bool
    xboundary_ge: float   # x >= xboundary   <=> x >= xboundary_ge
    xmax_gt: float        # x > xmax         <=> x > xmax_gt
    xmax_value: float
    min_rep_lt: float     # |c| < min_rep    <=> |c| < min_rep_lt
    half_gt: float        # |c| > min_rep/2  <=> |c| > half_gt
    half_ge: float        # |c| >= min_rep/2 <=> |c| >= half_ge
    min_rep_value: float
    # 'float16' or 'bfloat16' when chop's rounding of this carrier (float32) is the hardware
    # cast to that dtype and back, up to the sign of zero; else None (see round_elementwise).
    cast: Optional[str] = None
    # |x| <= cast_to_zero: chop's result is +0 (only used with cast).
    cast_to_zero: float = 0.0
    # (xmax, xmins, and the largest carrier number that rounds to 0, as bit patterns) when
    # round to nearest is done on the bit pattern (see _round_nearest_bits); else None.
    nearest_bits: Optional[tuple] = None
    # The format's encoding, applied after chop's range rules (None: nothing to do).
    encoding: Optional[Encoding] = None
    # Constants of _round_stochastic_bits when it computes chop's stochastic rounding; else None.
    stochastic_bits: Optional[tuple] = None
    # The carrier's Inf pattern (field << mant) and implicit bit (1 << mant), precomputed: with
    # torch.compile(dynamic=True) Dynamo traces the plan's ints as symbols, and Inductor (torch
    # 2.13) prints a shift of symbols as a C++ int shift, which overflows for float64's 52.
    inf_pattern: int = 0
    lead_bit: int = 0

    @classmethod
    def from_spec(cls, spec: RoundingSpec, carrier: str) -> "ElementwisePlan":
        """The plan for rounding ``carrier`` ('float32' or 'float64') values by ``spec``.

        Raises
        ------
        ValueError
            If :func:`supports` is False for ``spec`` or the carrier is not float32/float64.
        """
        if not supports(spec):
            raise ValueError("round_elementwise does not support bit flips or extended specs; use chop.")
        if carrier not in _LAYOUT:
            raise ValueError(f"carrier must be 'float32' or 'float64', not {carrier!r}.")
        mant, bias, field = _LAYOUT[carrier]
        dt = np.dtype(carrier)
        fmt = spec.fmt
        # Exponents far outside every carrier's range act like +-2^30 (keeps int32 safe).
        clamp = lambda e: max(-(1 << 30), min(1 << 30, int(e)))  # noqa: E731
        min_rep = np.float64(fmt.xmins if spec.keeps_subnormals else fmt.xmin)
        half = float(min_rep / 2)  # in double, as chop.m
        return cls(
            carrier=carrier, mant=mant, bias=bias, field=field, t=fmt.t,
            emin=clamp(fmt.emin), emins=clamp(fmt.emins), mode=spec.round,
            limits=spec.limits_exponent, keeps_subnormals=spec.keeps_subnormals,
            xboundary_ge=_at_least(fmt.xboundary, dt), xmax_gt=_at_most(fmt.xmax, dt),
            xmax_value=_stored(fmt.xmax, dt), min_rep_lt=_at_least(float(min_rep), dt),
            half_gt=_at_most(half, dt), half_ge=_at_least(half, dt),
            min_rep_value=_stored(float(min_rep), dt),
            cast=_hardware_cast(spec, carrier),
            cast_to_zero=_at_most(float(min_rep) / 2 * (1 + 2.0 ** -fmt.t), dt),
            nearest_bits=_nearest_bits(spec, carrier),
            encoding=encoding_for(spec, CARRIERS[carrier]),
            stochastic_bits=_stochastic_bits(spec, carrier),
            inf_pattern=field << mant, lead_bit=1 << mant,
        )


# (t, emax) of the formats torch can cast float32 to in one correct rounding to nearest.
_CASTS = {(11, 15): "float16", (8, 127): "bfloat16"}


def _hardware_cast(spec: RoundingSpec, carrier: str) -> Optional[str]:
    """The torch dtype whose float32 cast rounds like chop's nearest mode with the full range.

    A float32 -> float16/bfloat16 cast rounds to nearest, ties to even, with
    gradual underflow and overflow to Inf at the same threshold as chop.m
    (xboundary); chop.m gives +0 where the cast keeps the sign of a zero.
    Only from float32: torch casts float64 through float32 (two roundings).
    """
    if carrier != "float32" or spec.round != 1 or not spec.limits_exponent or not spec.keeps_subnormals:
        return None
    return _CASTS.get((spec.fmt.t, spec.fmt.emax))


def _nearest_bits(spec: RoundingSpec, carrier: str) -> Optional[tuple]:
    """Constants of :func:`_round_nearest_bits` when it computes chop's rounding, else None.

    It does for round to nearest with the exponent range on (subnormals kept
    or not), a precision below the carrier's (at least one bit dropped) and
    an exponent range inside the carrier's (``emin`` >= the carrier's,
    ``emax`` <= the carrier's), where chop's largest number has an all-ones
    significand (chop.m's formats always): then chop's overflow threshold
    (xboundary) is where rounding to ``t`` bits with an unbounded exponent
    passes xmax.  The tuple: (xmax, the smallest number kept, the largest
    carrier number that rounds to 0, as carrier bit patterns; the largest
    number of dropped bits).
    """
    mant, bias, _ = _LAYOUT[carrier]
    fmt = spec.fmt
    if (spec.round != 1 or not spec.limits_exponent or not 2 <= fmt.t <= mant
            or fmt.emin < 1 - bias or fmt.emax > bias):
        return None
    if fmt.xmax != (2.0 - 2.0 ** (1 - fmt.t)) * 2.0 ** fmt.emax:
        return None
    dt = np.dtype(carrier)
    int_dt = np.int64 if carrier == "float64" else np.int32
    pattern = lambda v: int(np.array(v, dt).view(int_dt))  # noqa: E731
    normal_drop = mant + 1 - fmt.t
    if spec.keeps_subnormals:
        smallest = 2.0 ** (fmt.emin - fmt.t + 1)  # xmins, the quantum of the subnormal block
        # Below xmins chop.m rounds x to t bits at its own exponent, then gives xmins where
        # that is above xmins/2: x > xmins/2 * (1 + 2^-t) (the tie goes to the even xmins/2).
        to_zero = _at_most(smallest / 2 * (1 + 2.0 ** -fmt.t), dt)
        most_dropped = normal_drop + (fmt.emin + bias - 1)  # at the carrier's smallest exponent
    else:
        if fmt.t < 3:
            return None
        smallest = 2.0 ** fmt.emin  # xmin
        # Below xmin chop.m rounds x to the subnormal grid (multiples of xmins = 2^(emin-t+1)),
        # then gives xmin where that is at least xmin/2: x >= xmin/2 - xmins/2 (the tie goes
        # to the even xmin/2, 2^(t-2) steps, when t >= 3).
        threshold = smallest / 2 * (1 - 2.0 ** (1 - fmt.t))
        to_zero = _at_most(threshold, dt)
        if to_zero == threshold:  # a carrier number: the largest one below it
            to_zero = float(np.nextafter(dt.type(threshold), dt.type(0)))
        most_dropped = normal_drop
    return (pattern(fmt.xmax), pattern(smallest), pattern(to_zero), most_dropped)


def _round_nearest_bits(x: Any, plan: ElementwisePlan) -> Any:
    """Round to nearest, ties to even, on the carrier's bit pattern (integer operations only).

    Within a binade, and across the carrier's subnormals, the value of a float
    is linear in its bit pattern, and rounding it to a multiple of ``2^s``
    pattern units is rounding the value to ``t`` bits; a carry into the
    exponent field is the step to the next binade, and past the largest
    finite pattern it gives Inf.  ``s`` is the number of dropped bits:
    ``mant + 1 - t``, plus ``emin - e`` in the format's subnormal block.  Below
    the smallest number kept (xmins, or xmin without subnormals) the result
    is chosen directly, 0 or that number, by chop.m's rule (it rounds to
    ``t`` bits first, then compares with half that number).  Zeros come
    out +0, as chop.m's range rules make them; NaN stays NaN.  No floating-point
    operation touches a value: no compiler setting (fast math, flushing
    subnormals, fused multiply-add) can change a result, and Inductor fuses it
    into one loop.
    """
    import torch

    xmax_bits, smallest_bits, to_zero_bits, most_dropped = plan.nearest_bits
    int_dtype = _int_dtype(torch, plan)
    width = 64 if plan.carrier == "float64" else 32
    inf_bits = plan.inf_pattern
    bits = x.view(int_dtype)
    magnitude = bits & ((1 << (width - 1)) - 1)
    # Dropped bits: mant + 1 - t in the normal range, with subnormals one more per binade
    # below 2^emin; the carrier's subnormals (biased exponent 0) drop as many as its
    # smallest normals.  The clamp keeps shifts inside the word below the smallest
    # number kept, where the result is chosen below.
    top = (plan.emin + plan.bias) + (plan.mant + 1 - plan.t)
    s = torch.clamp(top - (magnitude >> plan.mant), plan.mant + 1 - plan.t, min(most_dropped, width - 2))
    unit = torch.ones_like(s) << s
    # Round to a multiple of 2^s, ties to even (NaN patterns may wrap: replaced at the end).
    # The parity is that of the significand's bit s, the implicit leading bit included: in
    # xmins's binade s = mant and the count of xmins is 1 (odd), whatever the exponent bits.
    odd = ((magnitude | plan.lead_bit) >> s) & 1
    r = (magnitude + ((unit >> 1) - 1) + odd) & -unit
    r = torch.where(r > xmax_bits, inf_bits, r)  # chop's overflow: past xmax after rounding
    r = torch.where(magnitude < smallest_bits, smallest_bits, r) | (bits & (-(1 << (width - 1))))
    r = torch.where(magnitude <= to_zero_bits, 0, r)  # +0, as chop.m's range rules give
    r = torch.where(magnitude > inf_bits, bits, r)  # NaN
    return r.view(x.dtype)


# Tests switch this off to compare _round_stochastic_bits with the scaling path below it.
_STOCHASTIC_ON_BITS = True


def _stochastic_bits(spec: RoundingSpec, carrier: str) -> Optional[tuple]:
    """Constants of :func:`_round_stochastic_bits` when it computes chop's rounding, else None.

    It does for stochastic rounding (modes 5, 6) with the exponent range on,
    ``2 <= t <= mant`` and the format's exponents inside the carrier's, such
    that ``2^(emins - 1)`` is at least the carrier's smallest subnormal.  The
    tuple holds carrier bit patterns: ``2^emin``, ``2^emins``, the smallest
    number kept (``min_rep_lt``), the overflow threshold (``xmax_gt`` in
    mode 5, ``xboundary_ge`` in mode 6) and its result (xmax or Inf).
    """
    mant, bias, field = _LAYOUT[carrier]
    fmt = spec.fmt
    if (spec.round < 5 or not spec.limits_exponent or not 2 <= fmt.t <= mant
            or fmt.emin < 1 - bias or fmt.emax > bias or fmt.emins - 1 < 1 - bias - mant):
        return None
    dt = np.dtype(carrier)
    int_dt = np.int64 if carrier == "float64" else np.int32
    pattern = lambda v: int(np.array(v, dt).view(int_dt))  # noqa: E731
    min_rep = float(fmt.xmins if spec.keeps_subnormals else fmt.xmin)
    if spec.round == 5:
        over, over_value = _at_most(fmt.xmax, dt), pattern(_stored(fmt.xmax, dt))
    else:
        over, over_value = _at_least(fmt.xboundary, dt), field << mant
    return (pattern(2.0 ** fmt.emin), pattern(2.0 ** fmt.emins), pattern(_at_least(min_rep, dt)),
            pattern(over), over_value)


def _round_stochastic_bits(x: Any, plan: ElementwisePlan, uniforms: Any) -> Any:
    """Stochastic rounding (modes 5, 6) on the carrier's bit pattern, chop's values.

    chop.m scales ``x`` by ``2^(t - 1 - e)`` (``e`` its exponent; ``emin``
    in the subnormal block ``emins <= e < emin``), rounds the scaled value to
    an integer (up when ``u <= fraction`` in mode 5, ``u <= 1/2`` in mode 6,
    never when the fraction is 0) and scales back.  On the bit pattern that
    is dropping ``s`` low bits: the fraction is their value over ``2^s``
    (exact as a float) and rounding up adds ``2^s`` (a carry into the
    exponent field is the next binade).  ``s`` is ``mant + 1 - t`` at or above
    ``2^emin``, ``mant + 1 - t + emin - e`` in the subnormal block, which is
    ``mant + 1 - t + emin + bias - max(E, 1)`` for the biased exponent ``E``
    (the carrier's subnormals included); just below ``2^emins`` (``e = emins - 1``)
    chop.m rounds at the value's own exponent (``mant + 1 - t``, or fewer bits
    for a carrier subnormal); further below, rounding at that grid too gives
    at most ``2^(emins - 1)``, under the smallest number kept, as chop.m's
    own grid does.  Then chop.m's rules: under the smallest number
    kept, +0; over the threshold, xmax (mode 5) or Inf (mode 6); Inf and NaN
    unchanged.
    """
    import torch

    sub_top, sub_low, min_rep, over, over_value = plan.stochastic_bits
    int_dtype = _int_dtype(torch, plan)
    width = 64 if plan.carrier == "float64" else 32
    inf_bits = plan.inf_pattern
    s_norm = plan.mant + 1 - plan.t
    bits = x.view(int_dtype)
    magnitude = bits & ((1 << (width - 1)) - 1)
    biased = torch.clamp_min(magnitude >> plan.mant, 1)
    s_sub = (s_norm + plan.emin + plan.bias) - biased  # the subnormal block: xmins's grid
    # e = emins - 1: the value's own t-bit grid, fewer pattern bits for a carrier subnormal
    # (its unit is 2^(1 - bias - mant)): s_norm + e + bias - 1 then.
    s_low = torch.where(magnitude >> plan.mant == 0,
                        torch.full_like(magnitude, s_norm + plan.emins + plan.bias - 2), s_norm)
    s = torch.where(magnitude >= sub_top, s_norm, torch.where(magnitude >= sub_low, s_sub, s_low))
    unit = torch.ones_like(s) << s
    dropped = magnitude & (unit - 1)
    u = uniforms.to(x.dtype)
    if plan.mode == 5:
        fraction = dropped.to(x.dtype) * ((plan.bias - s) << plan.mant).view(x.dtype)  # 2^-s, exact
        up = (dropped != 0) & (u <= fraction)
    else:
        up = (dropped != 0) & (u <= 0.5)
    r = (magnitude - dropped) + torch.where(up, unit, 0)
    r = torch.where(r < min_rep, 0, r | (bits & (-(1 << (width - 1)))))  # +0 under the smallest kept
    if plan.mode == 5:
        r = torch.where((magnitude > over) & (magnitude < inf_bits), over_value | (bits & (-(1 << (width - 1)))), r)
    else:
        r = torch.where(magnitude >= over, inf_bits | (bits & (-(1 << (width - 1)))), r)
    r = torch.where(magnitude >= inf_bits, bits, r)  # Inf, NaN
    return r.view(x.dtype)


def _int_dtype(torch, plan: ElementwisePlan):
    return torch.int64 if plan.carrier == "float64" else torch.int32


def _pow2(k, plan: ElementwisePlan, float_dtype):
    """2**k for integer tensors k in the carrier's normal range, from its bits (exact)."""
    return ((k + plan.bias) << plan.mant).view(float_dtype)


def _exponent(x, plan: ElementwisePlan):
    """e with |x| = 2^e * 1.f (exact for the carrier's subnormals); -1 for 0, Inf, NaN."""
    import torch

    int_dtype = _int_dtype(torch, plan)
    bits = 64 if plan.carrier == "float64" else 32
    magnitude = x.view(int_dtype) & ((1 << (bits - 1)) - 1)  # the sign bit cleared
    biased = magnitude >> plan.mant
    # A subnormal's leading bit: its significand converted (exactly) to a float.
    lead = ((magnitude.to(x.dtype).view(int_dtype) >> plan.mant) - plan.bias) + (1 - plan.bias - plan.mant)
    e = torch.where(biased == 0, lead, biased - plan.bias)
    special = (magnitude == 0) | (biased == plan.field)
    return torch.where(special, torch.full_like(e, -1), e)


def round_elementwise(x: Any, plan: ElementwisePlan, uniforms: Any = None) -> Any:
    """Round ``x`` (float32 or float64, the plan's carrier) as chop does: a new tensor.

    Parameters
    ----------
    x : torch.Tensor
        Values in the plan's carrier dtype, any shape and device.
    plan : ElementwisePlan
    uniforms : torch.Tensor, optional
        For stochastic rounding (modes 5 and 6): one number in [0, 1) per element
        (broadcastable to ``x``), converted to ``x``'s dtype before the
        comparison, as chop.m compares in the input's class.  Ignored otherwise.

    Returns
    -------
    torch.Tensor
        The rounded values, same shape, dtype and device.

    Raises
    ------
    ValueError
        For stochastic modes without ``uniforms``, or ``x`` not in the plan's carrier.
    """
    import torch

    if str(x.dtype).rpartition(".")[2] != plan.carrier:
        raise ValueError(f"round_elementwise: the plan is for {plan.carrier} tensors, got {x.dtype}.")
    mode = plan.mode
    if plan.cast is not None and not torch.compiler.is_compiling():
        # Eager only: Inductor does not emulate a cast down and back up (its
        # emulate_precision_casts is off by default) and would return x unchanged.
        # First +0 where chop.m gives 0: its range rules make zeros +0, and in the band
        # xmins/2 < |x| <= xmins/2 * (1 + 2^-t) its double rounding gives 0 (the cast, xmins).
        # hardshrink is one pass (x where |x| > lambd, else +0; NaN kept) and the cast of
        # every other element is nonzero.
        kept = torch.nn.functional.hardshrink(x, plan.cast_to_zero)
        return apply_encoding(kept.to(getattr(torch, plan.cast)).to(x.dtype), x, plan)
    if plan.nearest_bits is not None:
        return apply_encoding(_round_nearest_bits(x, plan), x, plan)
    if mode >= 5 and uniforms is None:
        raise ValueError("Stochastic rounding (round = 5 or 6) needs a tensor of uniform numbers.")
    if plan.stochastic_bits is not None and _STOCHASTIC_ON_BITS:
        return apply_encoding(_round_stochastic_bits(x, plan, uniforms), x, plan)
    e = _exponent(x, plan)
    if plan.limits:
        in_sub = (e < plan.emin) & (e >= plan.emins)
        s = (plan.t - 1) - torch.where(in_sub, torch.full_like(e, plan.emin), e)
    else:
        s = (plan.t - 1) - e
    s1 = s >> 1
    s2 = s - s1
    y = x * _pow2(s1, plan, x.dtype) * _pow2(s2, plan, x.dtype)

    if mode == 1:
        r = torch.round(y)  # half to even
    elif mode == 2:
        r = torch.ceil(y)
    elif mode == 3:
        r = torch.floor(y)
    elif mode == 4:
        r = torch.trunc(y)
    else:
        magnitude = y.abs()
        low = torch.floor(magnitude)
        fraction = magnitude - low  # exact; NaN for Inf and NaN, which draw too (chop.m)
        u = uniforms.to(x.dtype)
        up = (fraction != 0) & (u <= (fraction if mode == 5 else 0.5))
        rounded = torch.where(up, torch.ceil(magnitude), low)
        r = torch.where(y < 0, -rounded, rounded)

    # Back to x's scale: the first factor keeps the value normal (exact), the second rounds once.
    c = r * _pow2(-s1, plan, x.dtype) * _pow2(-s2, plan, x.dtype)
    if plan.limits:
        c = apply_underflow(apply_overflow(c, x, plan.mode, plan), plan.mode, plan, plan.keeps_subnormals)
    return apply_encoding(c, x, plan)


def apply_encoding(c: Any, x: Any, plan: ElementwisePlan) -> Any:
    """The format's encoding on chop's results ``c`` of the inputs ``x`` (elementwise).

    :func:`pychop_compat.kernels.elementwise.encode_bits` on the bit patterns:
    in an ``'fn'`` format the round-to-nearest tie at chop's overflow threshold
    goes to the even ``xmax``; +-Inf results become +-xmax with saturation,
    else NaN when the format has no infinity; ``'fnuz'`` formats have no -0.
    """
    import torch

    if plan.encoding is None:
        return c
    int_dtype = _int_dtype(torch, plan)
    bits = encode_bits(torch, c.view(int_dtype), x.view(int_dtype), plan.encoding, CARRIERS[plan.carrier])
    return bits.view(c.dtype)


def apply_overflow(c: Any, x: Any, mode: int, limits: Any) -> Any:
    """chop.m's overflow rules on torch tensors, decided on the input ``x``.

    ``c`` is the rounded ``x`` in rounding mode ``mode``; ``limits`` is any
    object with the float attributes ``xboundary_ge``, ``xmax_gt`` and
    ``xmax_value`` (an :class:`ElementwisePlan`, or the torch engine's limits),
    so the eager engine and this elementwise path share one rule.
    """
    import torch

    inf = float("inf")
    if mode in (1, 6):
        c = torch.where(x >= limits.xboundary_ge, inf, c)
        return torch.where(x <= -limits.xboundary_ge, -inf, c)
    if mode == 2:
        c = torch.where(x > limits.xmax_gt, inf, c)
        return torch.where((x < -limits.xmax_gt) & (x != -inf), -limits.xmax_value, c)
    if mode == 3:
        c = torch.where((x > limits.xmax_gt) & (x != inf), limits.xmax_value, c)
        return torch.where(x < -limits.xmax_gt, -inf, c)
    c = torch.where((x > limits.xmax_gt) & (x != inf), limits.xmax_value, c)
    return torch.where((x < -limits.xmax_gt) & (x != -inf), -limits.xmax_value, c)


def apply_underflow(c: Any, mode: int, limits: Any, keeps_subnormals: bool) -> Any:
    """chop.m's underflow rules on torch tensors, decided on the rounded value ``c``.

    ``limits`` has the float attributes ``min_rep_lt``, ``min_rep_value``,
    ``half_gt`` and ``half_ge`` (see :func:`apply_overflow`).
    """
    import torch

    magnitude = c.abs()
    small = magnitude < limits.min_rep_lt
    if mode == 1:
        to_min = small & (magnitude > limits.half_gt if keeps_subnormals else magnitude >= limits.half_ge)
        # A tensor, not two scalars: torch.where(cond, scalar, scalar) is float32.
        target = torch.full_like(c, limits.min_rep_value).copysign_(c)
    elif mode == 2:
        to_min, target = small & (c > 0), limits.min_rep_value
    elif mode == 3:
        to_min, target = small & (c < 0), -limits.min_rep_value
    else:
        return torch.where(small, 0.0, c)
    return torch.where(to_min, target, torch.where(small, 0.0, c))


def _regular_range(plan: ElementwisePlan):
    """(low, high): carrier bit patterns of magnitudes whose rounding is a plain t-bit
    rounding of the significand, untouched by chop's range rules (xmin <= |x| <= xmax,
    normal in the carrier)."""
    dt = np.dtype(plan.carrier)
    int_dt = np.int64 if plan.carrier == "float64" else np.int32
    low = 1 << plan.mant  # the carrier's smallest normal number
    high = (plan.field << plan.mant) - 1  # its largest finite number
    if plan.limits:
        xmin = _at_least(2.0 ** plan.emin if plan.emin >= -1074 else 0.0, dt)  # the format's
        low = max(low, int(np.array(xmin, dt).view(int_dt)))
        high = min(high, int(np.array(plan.xmax_gt, dt).view(int_dt)))
    return low, high


# Elements per piece of round_stochastic_eager on the CPU: the piece's twenty or so passes
# stay in the L2 cache.  Measured under load (one and two threads, n = 1e5 and 1e6):
# 65536 as fast as 32768 or faster, 131072 up to twice slower.
_EAGER_PIECE = 65536


def round_stochastic_eager(x: Any, plan: ElementwisePlan, uniforms: Any) -> Any:
    """Stochastic rounding (modes 5, 6) of ``x`` as :func:`round_elementwise`, faster in eager mode.

    Elements in the format's normal range round on their bit patterns: with
    ``s`` dropped bits, ``d`` their value and ``u`` the element's number (in
    ``x``'s dtype), mode 5 rounds up when ``u <= d / 2^s`` and ``d != 0``,
    that is when ``d >= w`` for the integer ``w = max(ceil(u 2^s), 1)``
    (exact: ``u 2^s`` is a power-of-two scaling); mode 6 when ``u <= 1/2``
    and ``d != 0``, that is ``d >= w`` with ``w = 1`` when ``ceil(2u) <= 1``
    and ``w = 2^s + 1`` (never) otherwise.  ``d >= w`` is read from the sign
    of ``d - w``.  So the loop is integer and float arithmetic only: on the
    CPU torch's comparisons, which make bool tensors, cost several times
    more.  A number that is NaN or above 1 never rounds up, one below 0
    always does (where ``d != 0``), as in :func:`round_elementwise`.  The
    other elements (below xmin, above xmax, the carrier's subnormals, Inf,
    NaN) are gathered and take :func:`round_elementwise`.  The gathering
    depends on the data: for eager mode only (``torch.compile`` traces
    :func:`round_elementwise` instead).
    """
    import torch

    if plan.mode < 5:
        raise ValueError("round_stochastic_eager is for round = 5 or 6.")
    int_dtype = _int_dtype(torch, plan)
    width = 64 if plan.carrier == "float64" else 32
    flat = x.reshape(-1)
    u = uniforms.expand(x.shape).reshape(-1).to(x.dtype)
    shift = max(plan.mant - plan.t + 1, 0)
    mask = (1 << shift) - 1
    low, high = _regular_range(plan)
    abs_mask = (1 << (width - 1)) - 1
    out = torch.empty_like(flat)
    irregular = torch.empty(flat.shape, dtype=torch.bool, device=flat.device)
    # On the CPU, pieces that stay in the cache; elsewhere, one piece.
    piece = _EAGER_PIECE if flat.device.type == "cpu" else max(flat.numel(), 1)
    for begin in range(0, flat.numel(), piece):
        part = slice(begin, begin + piece)
        bits = flat[part].view(int_dtype)
        if plan.mode == 5:
            # (nan_to_num_ first: clamp keeps a NaN)
            w = torch.mul(u[part], 2.0 ** shift).ceil_().nan_to_num_(2.0 ** shift).clamp_(1.0, 2.0 ** shift)
            w = w.to(int_dtype)
        else:
            c = torch.mul(u[part], 2.0).ceil_().nan_to_num_(2.0).clamp_(0.0, 2.0).to(int_dtype)
            w = c.bitwise_right_shift_(1).bitwise_left_shift_(shift).add_(1)
        # step: 2^s where d >= w (the sign of d - w is 0), else 0 (d, w in [0, 2^s + 1]).
        step = (bits & mask).sub_(w).bitwise_right_shift_(width - 1).add_(1).bitwise_left_shift_(shift)
        torch.add(bits & ~mask, step, out=out[part].view(int_dtype))
        # Irregular: the magnitude outside [low, high], read from the sign of either difference.
        magnitude = bits & abs_mask
        outside = (magnitude - low).bitwise_or_(magnitude.neg_().add_(high)).bitwise_right_shift_(width - 1)
        irregular[part] = outside.to(torch.bool)
    if irregular.device.type == "cpu":  # torch.nonzero is about ten times slower on the CPU
        others = torch.from_numpy(np.flatnonzero(irregular.numpy()))
    else:
        others = torch.nonzero(irregular).view(-1)
    if others.numel():
        out[others] = round_elementwise(flat[others], plan, u[others])
    return out.view(x.shape)
