"""Floating-point format definitions.

A format is data: the precision ``t`` (significand bits, hidden bit included)
and the largest exponent ``emax``.  Everything else (``emin``, ``xmin``,
``xmax``, unit roundoff, ...) is derived from those two numbers, as in
chop.m and float_params.m, where ``emin = 1 - emax`` (IEEE-style exponent
bias).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

__all__ = ["Format", "lookup_format", "custom_format", "float_params", "CHOP_FORMAT_NAMES"]


def _pow2(e: int) -> float:
    """2**e as a double, saturating to inf or 0 like MATLAB's ``2^e``."""
    if e > 1023:
        return math.inf
    if e < -1074:
        return 0.0
    return math.ldexp(1.0, e)


@dataclass(frozen=True)
class Format:
    """A binary floating-point format with ``t`` significand bits and maximum exponent ``emax``.

    Parameters
    ----------
    t : int
        Number of bits in the significand, including the hidden bit.
    emax : int
        Largest exponent; the smallest normal exponent is ``1 - emax``.
    names : tuple of str
        Names the format is known by (first is the primary spelling).
    """

    t: int
    emax: int
    names: tuple[str, ...] = field(default=(), compare=False)

    @property
    def name(self) -> str:
        return self.names[0] if self.names else "custom"

    @property
    def emin(self) -> int:
        """Exponent of the smallest positive normal number."""
        return 1 - self.emax

    @property
    def emins(self) -> int:
        """Exponent of the smallest positive subnormal number."""
        return self.emin + 1 - self.t

    @property
    def xmin(self) -> float:
        """Smallest positive normal number."""
        return _pow2(self.emin)

    @property
    def xmins(self) -> float:
        """Smallest positive subnormal number."""
        return _pow2(self.emins)

    @property
    def xmax(self) -> float:
        """Largest finite number, ``2^emax * (2 - 2^(1-t))``."""
        return _pow2(self.emax) * (2.0 - _pow2(1 - self.t))

    @property
    def xboundary(self) -> float:
        """Round-to-nearest overflow threshold, ``2^emax * (2 - 2^-t)`` (IEEE 754-2019, 7.4)."""
        return _pow2(self.emax) * (2.0 - _pow2(-self.t))

    @property
    def unit_roundoff(self) -> float:
        """Unit roundoff ``u = 2^-t``."""
        return _pow2(-self.t)

    @property
    def params(self) -> list[int]:
        """``[t, emax]``, as chop.m returns it in ``options.params``."""
        return [self.t, self.emax]


def _builtin(t: int, emax: int, *names: str) -> Format:
    return Format(t, emax, names)


# The formats chop.m knows, with its spellings.
_CHOP_FORMATS = (
    _builtin(4, 7, "q43", "fp8-e4m3"),
    _builtin(3, 15, "q52", "fp8-e5m2"),
    _builtin(8, 127, "b", "bfloat16"),
    _builtin(11, 15, "h", "half", "fp16"),
    _builtin(24, 127, "s", "single", "fp32"),
    _builtin(53, 1023, "d", "double", "fp64"),
)
# float_params.m knows two more.
_EXTRA_PARAM_FORMATS = (
    _builtin(11, 127, "t", "tf32"),
    _builtin(113, 16383, "q", "quadruple", "fp128"),
)

_BY_NAME: dict[str, Format] = {n: f for f in _CHOP_FORMATS for n in f.names}
_PARAMS_BY_NAME: dict[str, Format] = {
    n: f for f in _CHOP_FORMATS + _EXTRA_PARAM_FORMATS for n in f.names
}
CUSTOM_NAMES = ("c", "custom")
CHOP_FORMAT_NAMES: tuple[str, ...] = tuple(_BY_NAME) + CUSTOM_NAMES


def lookup_format(name: str) -> Format:
    """The built-in chop format called ``name`` (case-sensitive, as in MATLAB).

    Raises
    ------
    ValueError
        If ``name`` is not one of chop's built-in format names.
    """
    try:
        return _BY_NAME[name]
    except (KeyError, TypeError):
        raise ValueError(
            f"Unrecognized format {name!r}. Allowed: {', '.join(map(repr, CHOP_FORMAT_NAMES))}."
        ) from None


def custom_format(t: int, emax: int) -> Format:
    """A custom format ``[t, emax]`` (chop's ``format = 'c'``)."""
    return Format(int(t), int(emax), ("c",))


def float_params(prec: str = "d"):
    """Parameters of a floating-point arithmetic, as MATLAB's ``float_params``.

    Parameters
    ----------
    prec : str, optional
        One of ``'q43'``/``'fp8-e4m3'``, ``'q52'``/``'fp8-e5m2'``, ``'b'``/``'bfloat16'``,
        ``'h'``/``'half'``/``'fp16'``, ``'t'``/``'tf32'``, ``'s'``/``'single'``/``'fp32'``,
        ``'d'``/``'double'``/``'fp64'`` (default), ``'q'``/``'quadruple'``/``'fp128'``.

    Returns
    -------
    u, xmins, xmin, xmax : float
        Unit roundoff, smallest positive subnormal, smallest positive normal and
        largest finite number (as doubles: ``inf``/``0`` where out of double's range,
        as in MATLAB).
    p, emins, emin, emax : int
        Precision (hidden bit included), exponents of ``xmins``, ``xmin`` and ``xmax``.

    Examples
    --------
    >>> u, xmins, xmin, xmax, p, emins, emin, emax = float_params('h')
    >>> u, xmax, p, emin
    (0.00048828125, 65504.0, 11, -14)
    """
    try:
        f = _PARAMS_BY_NAME[prec]
    except (KeyError, TypeError):
        raise ValueError(
            f"Unrecognized precision {prec!r}. Allowed: {', '.join(map(repr, _PARAMS_BY_NAME))}."
        ) from None
    return f.unit_roundoff, f.xmins, f.xmin, f.xmax, f.t, f.emins, f.emin, f.emax
