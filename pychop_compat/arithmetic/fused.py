"""Fused multiply-add with one rounding: ``fma(a, b, c) = fl(a * b + c)``.

For a format of ``t <= 26`` bits the product of two of its numbers is exact
in double.  The sum ``s = a*b + c`` is formed in double with its exact error
``e`` (Knuth's TwoSum), and ``s`` is replaced by its neighbour towards
``e`` when ``e != 0`` and the last bit of ``s`` is even: that is the exact
value rounded to odd in 53 bits.  Rounding a round-to-odd value once more to
``t <= 51`` bits gives the exact value's rounding, in every deterministic
mode (Boldo and Melquiond, "Emulation of FMA and correctly rounded sums:
proved algorithms using rounding to odd", IEEE TC 57(4), 2008), so the one
chop call rounds ``a*b + c`` correctly.  With stochastic rounding the
probabilities are those of the round-to-odd double (within ``2^-52``
relative of the exact ones).
"""

from __future__ import annotations

from typing import Union

import numpy as np

from .array import ChoppedArray, ChoppedOperand, ChoppedScalar, arithmetic_of, chopped_result, stored_values

__all__ = ["fma"]


def _round_to_odd_sum(p: np.ndarray, c: np.ndarray) -> np.ndarray:
    """``p + c`` rounded to odd in double (``p``, ``c`` float64, finite sums exact in the result's sense)."""
    s = p + c
    bp = s - c
    e = (p - bp) + (c - (s - bp))  # TwoSum: s + e == p + c exactly (for finite s)
    bits = s.view(np.uint64)
    inexact = (e != 0) & np.isfinite(s) & ((bits & np.uint64(1)) == 0)
    if np.any(inexact):
        towards = np.where(e > 0, np.inf, -np.inf)
        s = np.where(inexact, np.nextafter(s, towards), s)
    return s


def fma(a: ChoppedOperand, b: ChoppedOperand, c: ChoppedOperand) -> Union[ChoppedArray, ChoppedScalar]:
    """Fused multiply-add ``a * b + c`` with a single rounding.

    Parameters
    ----------
    a, b, c : ChoppedArray, ChoppedScalar or array_like
        At least one chopped operand gives the format.  Plain operands are
        rounded to the format first (an fma unit reads its operands from the
        format's registers), in the order ``a, b, c``.

    Returns
    -------
    ChoppedArray or ChoppedScalar
        ``fl(a*b + c)``, broadcast.

    Raises
    ------
    ValueError
        For a format of more than 26 bits, or of an exponent range beyond ``emax = 511`` or
        ``emin - t + 1 = -537``: its products are not exact in double.

    Examples
    --------
    >>> from pychop_compat import chopped
    >>> from pychop_compat.arithmetic import fma
    >>> x = chopped(1 + 3 * 2.0**-10, 'h')    # fp16
    >>> float(fma(x, x, chopped(-1.0, 'h')))  # exact 6*2^-10 + 9*2^-20, one rounding
    0.00586700439453125
    >>> float(x * x - 1)                      # x*x rounded first loses 9*2^-20
    0.005859375
    """
    operands = (a, b, c)
    arith = arithmetic_of(operands)
    if arith is None:
        raise TypeError("fma needs at least one chopped NumPy array or chopped scalar (chopped torch tensors, "
                        "JAX and CuPy arrays are not supported)")
    fmt = arith.spec.fmt
    if arith.t > 26:
        raise ValueError(f"fma needs a format of at most 26 bits (products exact in double); "
                         f"{arith.describe()} has {arith.t}.")
    if 2 * fmt.emax + 2 > 1024 or 2 * (fmt.emin - fmt.t + 1) < -1074:
        raise ValueError(f"fma needs a format whose products neither overflow nor underflow double "
                         f"(emax <= 511, emin - t + 1 >= -537); {arith.describe()} has emin {fmt.emin}.")
    values = [np.asarray(stored_values(v, arith), dtype=np.float64) for v in operands]
    x, y, z = np.broadcast_arrays(*values)
    with np.errstate(all="ignore"):
        s = _round_to_odd_sum(x * y, z)
    scalars = all(not isinstance(v, (ChoppedArray, np.ndarray)) for v in operands)
    rounded = arith.round(np.asarray(s))
    single = all(v.dtype == np.float32 for v in operands if isinstance(v, ChoppedArray))
    if single and any(isinstance(v, ChoppedArray) for v in operands):
        rounded = rounded.astype(np.float32)
    return chopped_result(rounded, arith, scalars)
