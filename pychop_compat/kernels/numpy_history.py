"""chop.m's rules before 2020-05-14 (``chop_at``, route ``'old rules'``) on the NumPy engine.

What ``chop_vector_at`` (:mod:`pychop_compat.matlab.history`) computes for a deterministic
mode (1-4) without bit flips, at the speed of today's NumPy engine.  The old rules differ from
today's chop only (a) in the exponent, ``floor(log2(|x|))`` in the class of ``x``, which is
frexp's plus one for significands just below a power of two (where NumPy's ``log2`` rounds
up: :func:`~pychop_compat.kernels.compiled.log2_thresholds`), and (b) on elements outside the
regular range (zeros, infinities, NaN, chop's subnormal block and below, the overflow range),
where the range rules of the date apply.  So :func:`~pychop_compat.kernels.numpy_fast.chop_array`
rounds every element as today's chop does, with every element below its regular range and
every significand in the band where ``log2`` may round up among its special elements (a bit
test on the fraction field, in its block loop), and those few are rounded again by the
step-by-step rules the caller gives (``chop_vector_at``; they are elementwise in these modes).
In round to nearest the band is left out where both exponents round it alike (to the next power
of two: every threshold less than half a unit of ``t`` bits below its power of two).
Not here: stochastic rounding (modes 5, 6), bit flips and the ``explim = 0`` bug on matrices
(2019-07-11 to 2020-04-30), which the caller computes step by step, and mode 4's truncation of
a whole block (before 2020-05-01), which the caller computes as mode 2 or 3 by the signs of the
blocks (``history.ChopAt``).
"""

from __future__ import annotations

import math
from functools import lru_cache
from typing import Any, Callable, Optional

import numpy as np

from ..random.sources import RandomSources
from ..spec import RoundingSpec
from . import numpy_fast
from .compiled import log2_thresholds

__all__ = ["old_exponent_band", "round_old_rules", "regular_float", "keep_nans"]

_UINT = {"d": np.uint64, "f": np.uint32}


@lru_cache(maxsize=64)
def old_exponent_band(char: str, t: int, mode: int) -> Optional[int]:
    """The fraction field (the stored significand bits of the class ``char``, ``'f'`` or ``'d'``,
    as an unsigned integer) from which a normal number's result under chop.m's old exponent
    ``floor(log2(|x|))`` may differ from its result under frexp's, rounding to ``t`` bits in
    ``mode``: the smallest fraction field of any threshold of :func:`log2_thresholds` (the
    numbers from which ``log2`` rounds up to the next power of two).  ``2^(p-1)``, beyond every
    fraction field, where none differs: in round to nearest when every threshold lies less than
    ``2^-(t+1)`` (relative) below its power of two, as both exponents then round every number
    from the threshold up to that power (the directed modes differ there: a coarser grid).
    None when :func:`log2_thresholds` is None (the step-by-step rules then apply).
    """
    thresholds = log2_thresholds(char)
    if thresholds is None:
        return None
    dtype = np.dtype(char)
    info = np.finfo(dtype)
    fraction_bits = int(info.nmant)
    lowest = int(info.minexp) - fraction_bits  # the exponent of thresholds[0]
    k = np.arange(lowest, lowest + thresholds.size)
    used = np.isfinite(thresholds) & (k >= int(info.minexp))  # (normal numbers: a fraction field of their own)
    if not used.any():
        return 1 << fraction_bits
    values = thresholds[used]
    if mode == 1:
        below = 1.0 - np.ldexp(values, -(k[used] + 1))  # exact: values / 2^(k+1) lies in [1/2, 1)
        if float(below.max()) < math.ldexp(1.0, -(t + 1)):
            return 1 << fraction_bits
    fractions = values.astype(dtype).view(_UINT[char]) & _UINT[char]((1 << fraction_bits) - 1)
    return int(fractions.min())


def round_old_rules(spec: RoundingSpec, dtype: Any, limits: bool, sources: RandomSources,
                    step_by_step: Callable[[np.ndarray], np.ndarray]) -> Optional[Callable[[Any], Any]]:
    """chop.m's deterministic rounding (modes 1-4, no flips) with its rules before 2020-05-14 on
    the NumPy engine, as a function of ``x`` (a float32 or float64 ndarray of ``dtype``, any
    shape and layout: a new array; Python floats: :func:`regular_float` first).

    ``limits``: whether the exponent range applies (must be ``spec``'s: the regular range is
    today's chop's); ``sources``: passed to the NumPy engine (never drawn from);
    ``step_by_step(v)``: the old rules of the date on a 1-D array ``v`` (``chop_vector_at``),
    elementwise (no truncation by blocks), called on the special elements only.  None where
    this does not apply: a random, flipping or extended spec, ``limits`` not ``spec``'s, or
    :func:`log2_thresholds` None.
    """
    char = np.dtype(dtype).char
    if char not in _UINT or not _deterministic(spec, limits):
        return None
    band = old_exponent_band(char, spec.fmt.t, spec.round)
    table = _regular_table(char, spec.fmt.emin, spec.fmt.emax, limits)
    if band is None or table is None:
        return None
    info = np.finfo(np.dtype(char))
    special_fraction = band if band < 1 << int(info.nmant) else None
    offset, frexp = _table_offset(char), math.frexp

    def finish(c: np.ndarray, xs: np.ndarray) -> None:
        if xs.size:
            c[...] = step_by_step(xs.reshape(-1)).reshape(c.shape)
            nan = np.isnan(xs)
            if nan.any():  # a NaN: itself, quieted (see keep_nans)
                c[nan] = keep_nans(xs[nan])

    def old_rules(x: np.ndarray) -> np.ndarray:
        if x.size == 1:  # (chop_array's finish_special would see it whatever it is)
            magnitude = abs(x.item())
            if 0.0 < magnitude < table[frexp(magnitude)[1] + offset]:
                return numpy_fast.chop_array(x, spec, sources)  # regular: today's rules are the old ones
        return numpy_fast.chop_array(x, spec, sources, finish_special=finish, small_special=True,
                                     special_fraction=special_fraction)

    return old_rules


def regular_float(spec: RoundingSpec, limits: bool, sources: RandomSources) -> Optional[Callable[[float], Any]]:
    """chop.m's deterministic rounding (modes 1-4, no flips) with its rules before 2020-05-14 on
    a Python float where they are today's chop's, as a function of the float: today's scalar
    kernel (:func:`~pychop_compat.kernels.numpy_fast.chop_scalar`, as ``chop``'s) for a normal
    number whose frexp exponent lies in the regular range (``emin <= e < emax`` with ``limits``;
    with subnormals kept, chop's subnormal block ``emins <= e < emin`` too) and that lies below
    its exponent's threshold of :func:`log2_thresholds` (``log2`` does not round it up); with
    ``limits``, +0 below ``xmins`` (the old tiny-number rule, zeros included) and, without
    subnormals, in chop's subnormal block (flushed whole); None for the others (the caller
    applies the old rules; a single element is a block of its own, so mode 4's truncation by
    blocks is truncation there).  None where this does not apply (as :func:`round_old_rules`).
    """
    fmt = spec.fmt
    table = _regular_table("d", fmt.emin, fmt.emax, limits) if _deterministic(spec, limits) else None
    if table is None:
        return None
    block = _regular_table("d", fmt.emins, fmt.emin, True) if limits else None  # chop's subnormal block
    if block is not None and spec.keeps_subnormals:  # rounded as today's chop rounds it
        table = tuple(max(a, b) for a, b in zip(table, block))
    # +0 below xmins (chop.m's old tiny-number rule, 0 included) and, without subnormals, for
    # chop's subnormal block (below its thresholds: log2 does not lift them to emin)
    tiny = fmt.xmins if limits else 0.0
    flushed = None if spec.keeps_subnormals else block
    today, frexp = numpy_fast.scalar_kernel(spec, sources), math.frexp
    offset = _table_offset("d")

    def regular(x: float) -> Optional[float]:
        magnitude = abs(x)
        index = frexp(magnitude)[1] + offset
        if 0.0 < magnitude < table[index]:
            return today(x)
        if magnitude < tiny or (flushed is not None and magnitude < flushed[index]):
            return 0.0
        return None

    return regular


def _table_offset(char: str) -> int:
    """What :func:`_regular_table`'s index adds to frexp's exponent: ``p - 1 - minexp``."""
    info = np.finfo(np.dtype(char))
    return int(info.nmant) - int(info.minexp)


@lru_cache(maxsize=64)
def _regular_table(char: str, emin: int, emax: int, limits: bool) -> Optional[tuple]:
    """By frexp's exponent ``e + 1`` of a number of the class ``char`` plus ``p - 1 - minexp`` (the
    smallest subnormal's exponent, negated): the threshold of :func:`log2_thresholds` for the
    exponents ``e`` of normal numbers in the regular range (``emin <= e < emax`` with
    ``limits``), 0 outside it (no magnitude is below 0); a number ``0 < |x| <`` its entry is
    rounded alike by the old rules and today's.  None with :func:`log2_thresholds` None."""
    thresholds = log2_thresholds(char)
    if thresholds is None:
        return None
    info = np.finfo(np.dtype(char))
    lowest, normal, top = int(info.minexp) - int(info.nmant), int(info.minexp), int(info.maxexp)
    low, high = (max(emin, normal), emax) if limits else (normal, top)
    e = np.arange(lowest - 1, top)  # (frexp's exponents of 0, Inf and NaN: 0, e = -1)
    inside = (e >= low) & (e < high)
    return tuple(np.where(inside, thresholds[np.clip(e - lowest, 0, None)], 0.0).tolist())


def keep_nans(xs: np.ndarray) -> np.ndarray:
    """chop.m's old rules' result of the NaN elements ``xs``: themselves, quieted (sign and
    payload kept).  The step-by-step rules multiply each NaN by ``2^NaN`` (its exponent), and
    NumPy's multiplication of two NaNs keeps the first one in its scalar loop, either one in its
    SIMD loops by the element's position; so the step-by-step rules on a vector of a few special
    elements keep the input's NaN, as this does, and as the compiled loops do
    (``numba_history.special_element``).  (One NaN operand: ``x + 0`` is that NaN, quieted.)"""
    return np.add(xs, xs.dtype.type(0))


def _deterministic(spec: RoundingSpec, limits: bool) -> bool:
    """Whether ``spec`` is one of chop.m's deterministic ones (modes 1-4, no flips, not extended)
    whose exponent range is ``limits``."""
    return (not spec.draws and not spec.flips and spec.round in (1, 2, 3, 4) and not getattr(spec, "extended", False)
            and limits == spec.limits_exponent)
