"""The rounding request every kernel consumes: :class:`RoundingSpec`.

A spec is resolved, checked data (a :class:`~pychop_compat.Format`, a mode and
its switches): no option parsing, no MATLAB policy, no random numbers (they
travel beside it, :mod:`pychop_compat.random.sources`).
"""

from __future__ import annotations

import functools
import numbers
from dataclasses import dataclass

from .formats import Format

__all__ = ["RoundingSpec", "RANGE_RULES", "FLIP_SCOPES", "FLIP_PRECISION_ERROR", "ROUND_NAMES", "round_mode"]

#: Names of chop's rounding modes (``options.round``), accepted wherever a mode is a keyword
#: argument ``round=`` outside chop.m's own options.
ROUND_NAMES = {"nearest": 1, "up": 2, "down": 3, "zero": 4, "stochastic": 5, "stochastic_equal": 6}


def round_mode(value: object) -> int:
    """chop's mode 1 to 6 for a name of :data:`ROUND_NAMES` or an integer from 1 to 6.

    Raises
    ------
    ValueError
        For anything else (a bool, a float, another name or number).
    """
    if isinstance(value, str) and value in ROUND_NAMES:
        return ROUND_NAMES[value]
    if isinstance(value, numbers.Integral) and not isinstance(value, bool) and 1 <= int(value) <= 6:
        return int(value)  # Python and NumPy integers
    raise ValueError(f"Unknown rounding mode {value!r}; allowed: {', '.join(ROUND_NAMES)} or chop's "
                     "options.round 1..6.")


#: The three rounding rules: ``'chop'`` (chop.m's algorithm, which rounds a second time below
#: the smallest subnormal), ``'cpfloat'`` (CPFloat's rules: one correct rounding, one number
#: per inexact element) and ``'correct'`` (CPFloat's rounding in modes 1-6 with chop.m's draws).
RANGE_RULES = ("chop", "correct", "cpfloat")
#: Which bit a soft error flips: one of the significand's fraction bits (chop.m), or
#: any bit of the format's encoding (CPFloat's ``flip = 2``).
FLIP_SCOPES = ("fraction", "encoding")

#: The error for bit flips in a format with fewer than two significand bits (every engine raises it).
FLIP_PRECISION_ERROR = "Bit flips need a precision t >= 2 (a bit below the leading one)."


@dataclass(frozen=True)
class RoundingSpec:
    """What to round to and how: the input of every kernel.

    Parameters
    ----------
    fmt : Format
        The target format.
    subnormal : int
        1 to keep the format's subnormal numbers, 0 to flush them.
    round : int
        chop's modes 1 to 6 (nearest even, up, down, toward zero, the two
        stochastic modes); with CPFloat's range rules also -1 (nearest, ties
        away), 0 (nearest, ties to zero), 7 (to odd) and 8 (no rounding).
    flip : int
        1 to flip, with probability ``p``, one random bit of each result.
    p : float
        Probability of a bit flip.
    explim : int
        0 to ignore the format's exponent range (precision only).
    saturation : bool
        Results beyond the largest finite number become +-xmax.
    infinity : bool
        Whether results may be +-Inf (False: NaN, or +-xmax with saturation).
    range_rules : {'chop', 'correct', 'cpfloat'}
        chop.m's algorithm, one correct rounding with chop's modes and draws, or
        CPFloat's rules (see :data:`RANGE_RULES`).
    random_bits : int
        Stochastic rounding with this many random bits (0: full draws).
    flip_scope : {'fraction', 'encoding'}
        Which bits a flip may hit.
    """

    fmt: Format
    subnormal: int = 1
    round: int = 1
    flip: int = 0
    p: float = 0.5
    explim: int = 1
    saturation: bool = False
    infinity: bool = True
    range_rules: str = "chop"
    random_bits: int = 0
    flip_scope: str = "fraction"

    @functools.cached_property  # asked on every call of chop
    def extended(self) -> bool:
        """Whether the spec uses anything beyond chop.m's semantics (modes outside 1..6,
        saturation, no infinity, other range rules or formats, limited random bits, flips of
        any encoding bit)."""
        return (not 1 <= self.round <= 6 or bool(self.saturation) or not self.infinity
                or self.range_rules != "chop" or not self.fmt.is_chop_compatible
                or self.random_bits != 0 or self.flip_scope != "fraction")

    @functools.cached_property
    def cpfloat_rules(self) -> bool:
        """Whether CPFloat's rules compute this spec bit for bit, numbers and all:
        ``range_rules = 'cpfloat'``, or ``'correct'`` without random numbers (the two differ
        only in where stochastic rounding and bit flips draw)."""
        return self.range_rules == "cpfloat" or (self.range_rules == "correct" and not self.draws)

    @property
    def keeps_subnormals(self) -> bool:
        """Whether subnormal results are kept (``subnormal = 1``)."""
        return self.subnormal != 0

    @property
    def min_rep(self) -> float:
        """chop.m's smallest magnitude under its underflow rule: xmins with subnormals, else xmin."""
        return self.fmt.xmins if self.keeps_subnormals else self.fmt.xmin

    @property
    def limits_exponent(self) -> bool:
        """Whether the format's exponent range applies (``explim = 1``)."""
        return bool(self.explim)

    @functools.cached_property  # asked on every call that draws
    def flips(self) -> bool:
        """Whether bits are flipped (``flip != 0``)."""
        return bool(self.flip)

    @functools.cached_property
    def stochastic(self) -> bool:
        """Stochastic rounding: modes 5 and 6 (CPFloat's codes 7 and up are deterministic)."""
        return self.round in (5, 6)

    @functools.cached_property
    def draws(self) -> bool:
        """Whether rounding draws random numbers: stochastic rounding or bit flips."""
        return self.stochastic or self.flips
