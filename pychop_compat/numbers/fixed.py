"""Fixed point: ``wl``-bit two's complement integers ``k`` read as ``k * 2^-fl``."""

from __future__ import annotations

from typing import Any, Callable, Optional

import numpy as np

from ._common import HostArray, check_int, check_mode, random_sources, round_integers, shift

__all__ = ["fixed_point", "fixed_point_range"]

OVERFLOW_RULES = ("saturate", "wrap")


def fixed_point_range(wl: int, signed: bool = True) -> tuple[int, int]:
    """The integer codes of a ``wl``-bit word: ``(-2^(wl-1), 2^(wl-1) - 1)`` signed, ``(0, 2^wl - 1)`` unsigned.

    >>> from pychop_compat.numbers import fixed_point_range
    >>> fixed_point_range(8), fixed_point_range(8, signed=False)
    ((-128, 127), (0, 255))
    """
    wl = check_int(wl, "wl", 1, 53)
    return (-(1 << (wl - 1)), (1 << (wl - 1)) - 1) if signed else (0, (1 << wl) - 1)


def fixed_point(x: Any, wl: int, fl: int, *, signed: bool = True, overflow: str = "saturate",
                round: int = 1, rng: Optional[np.random.Generator] = None,
                randfunc: Optional[Callable[[int], Any]] = None, return_codes: bool = False) -> Any:
    """Round ``x`` to fixed point with word length ``wl`` and fraction length ``fl``.

    The representable numbers are ``k * 2^-fl`` for the integers ``k`` of a
    ``wl``-bit word (:func:`fixed_point_range`; two's complement when signed).
    ``x * 2^fl`` (exact) is rounded to an integer by chop's ``roundit``, then
    brought into the word's range.

    Parameters
    ----------
    x : array_like, torch.Tensor or cupy.ndarray
        Real values; never modified.
    wl : int
        Word length in bits, sign bit included (1..53).
    fl : int
        Fraction length: bits after the binary point.  Any integer with ``return_codes=True``;
        for values, ``wl - 1024 <= fl <= 1074``, where every ``k * 2^-fl`` is a double (beyond,
        they would underflow or overflow: ValueError).
    signed : bool
        Two's complement (default) or unsigned words.
    overflow : {'saturate', 'wrap'}
        Beyond the range: the nearest end (``+-Inf`` too), or the integer
        modulo ``2^wl`` (``+-Inf`` gives NaN).  NaN stays NaN.
    round : int
        A rounding mode of :doc:`/numbers` (1 nearest, ties to even; 2 up; 3 down; 4 toward
        zero; 5, 6 stochastic; -1 nearest, ties away from zero).
    rng, randfunc : optional
        Stochastic rounding's numbers: a NumPy ``Generator``, or ``randfunc(n)``;
        default MATLAB's stream (chop's column-major order, see :func:`~pychop_compat.rng`).
    return_codes : bool
        Return the integer codes ``k`` (int64) instead of the values ``k * 2^-fl``.

    Returns
    -------
    same type as ``x``
        Values (dtype kept; integer input gives float64) or int64 codes, with
        the shape and device of ``x``.  Torch results are detached.

    Raises
    ------
    ValueError
        With ``return_codes=True``, for NaN input, and for +-Inf input under
        ``overflow='wrap'`` (no integer code); for values, ``fl`` outside
        ``[wl - 1024, 1074]``.

    Notes
    -----
    The codes are exact; the values ``k * 2^-fl`` are exact in float64 and then
    cast to the dtype of ``x``, which rounds them where that dtype cannot hold
    them: a finite input can give +-Inf, or a value outside the word's range.
    ``fixed_point(np.float16([65504]), 8, -10)`` gives ``[inf]`` (the code 64
    times ``2^10`` is 65536, beyond float16), and
    ``fixed_point(np.float32([3e9]), 32, 0)`` gives 2147483648.0 although the
    code is ``2^31 - 1`` = 2147483647.  Pass float64 input (or ask for the codes)
    where this matters.

    Examples
    --------
    >>> fixed_point([0.3, -0.3, 1.0, 2.5], wl=4, fl=2)
    array([ 0.25, -0.25,  1.  ,  1.75])
    >>> fixed_point([2.5], 4, 2, overflow='wrap'), fixed_point([0.3], 4, 2, return_codes=True)
    (array([-1.5]), array([1]))
    """
    wl = check_int(wl, "wl", 1, 53)
    fl = check_int(fl, "fl")
    mode = check_mode(round)
    if overflow not in OVERFLOW_RULES:
        raise ValueError(f"overflow must be one of {OVERFLOW_RULES}, got {overflow!r}.")
    if not return_codes and not wl - 1024 <= fl <= 1074:
        # 2^-fl below 2^-1074 loses the codes' low bits, 2^(wl-1-fl) at 2^1024 overflows: not k * 2^-fl.
        raise ValueError(f"fl must be an integer in [{wl - 1024}, 1074] for wl={wl} (the values k * 2^-fl are "
                         f"doubles there), got {fl}; pass return_codes=True for the codes.")
    host = HostArray(x)
    codes = fixed_point_codes(host.values, wl, fl, bool(signed), overflow, mode, random_sources(rng, randfunc))
    if return_codes:
        if overflow == "wrap" and np.isinf(host.values).any():  # (wrapped to NaN above: not a NaN input)
            raise ValueError("+-Inf input has no integer code under overflow='wrap'; remove +-Inf, use "
                             "overflow='saturate' or ask for values.")
        return host.give_back_codes(codes)
    return host.give_back(np.ldexp(codes, -fl))


def fixed_point_codes(values: np.ndarray, wl: int, fl: int, signed: bool, overflow: str, mode: int,
                      sources: Any) -> np.ndarray:
    """The integer codes (float64, exact) of float64 ``values``; the computation of :func:`fixed_point`."""
    low, high = fixed_point_range(wl, signed)
    # Beyond +-2200, x * 2^fl is +-Inf or below 2^-1000 for every finite non-zero x, as at +-2200: the
    # same codes, and ldexp's exponent stays a C int.
    k = round_integers(shift(values, min(max(fl, -2200), 2200)), mode, sources)
    if overflow == "saturate":
        return np.clip(k, low, high)  # NaN stays NaN; +-Inf go to the ends
    with np.errstate(invalid="ignore"):
        # A finite value scaled beyond the doubles is a multiple of 2^971, so of 2^wl: code 0.  fmod
        # is exact, and so is moving a remainder above the top code down by 2^wl (two's complement);
        # (k - low) would round where the spacing of the doubles near k exceeds |low|.
        r = np.mod(np.where(np.isinf(k) & np.isfinite(values), 0.0, k), float(1 << wl))
        return np.where(r > high, r - float(1 << wl), r)
