"""The format model: a binary floating-point format as data.

A :class:`Format` holds the primary parameters only (``t``, ``emin..emax``, subnormals, the
Inf/NaN encoding, the default overflow, its names); ``xmin``, ``xmax`` and the rest are derived.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Optional

__all__ = ["Format", "ENCODINGS", "OVERFLOWS"]

#: How a format encodes Inf and NaN (and zero):
#:
#: * ``'ieee'``: IEEE 754, +-Inf and NaNs in the all-ones exponent field (chop's formats).
#: * ``'fn'``: finite + NaN, no Inf; the all-ones exponent field holds numbers, except the
#:   single pattern with all-ones significand, which is NaN (``float8_e4m3fn``).
#: * ``'fnuz'``: finite, NaN, unsigned zero; no Inf, no -0; the pattern of -0 is the one NaN
#:   (``float8_e4m3fnuz``, ``float8_e5m2fnuz``).
#: * ``'finite'``: no Inf and no NaN at all (``float6_e2m3fn``, ``float6_e3m2fn``, ``float4_e2m1fn``).
#: * ``'e8m0'``: exponent only (OCP MX scale ``float8_e8m0fnu``), unsigned, no zero, no Inf,
#:   all-ones is NaN.
ENCODINGS = ("ieee", "fn", "fnuz", "finite", "e8m0")

#: What a result beyond the largest finite number becomes by default.
OVERFLOWS = ("inf", "nan", "saturate")

_DEFAULT_OVERFLOW = {"ieee": "inf", "fn": "nan", "fnuz": "nan", "finite": "saturate", "e8m0": "nan"}


def _pow2(e: int) -> float:
    """2**e as a double, saturating to inf or 0 like MATLAB's ``2^e``."""
    if e > 1023:
        return math.inf
    if e < -1074:
        return 0.0
    return math.ldexp(1.0, e)


@dataclass(frozen=True, init=False)
class Format:
    """A binary floating-point format.

    Parameters
    ----------
    t : int
        Number of bits in the significand, including the hidden bit.
    emax : int
        Exponent of the largest binade.
    names : tuple of str, optional
        Names the format is known by (the first is its primary spelling).
        Not compared: two formats with the same numbers are equal.
    emin : int, optional
        Exponent of the smallest positive normal number; ``1 - emax`` (IEEE's
        bias, as chop.m assumes) when omitted.
    subnormals : bool, optional
        Whether the format has subnormal numbers (default True).
    encoding : str, optional
        How Inf and NaN are encoded, one of :data:`ENCODINGS` (default ``'ieee'``).
    overflow : str, optional
        What overflow gives by default: ``'inf'``, ``'nan'`` or ``'saturate'``
        (default: ``'inf'`` for IEEE, ``'saturate'`` without NaN, else ``'nan'``).

    Examples
    --------
    >>> Format(11, 15).xmax
    65504.0
    >>> Format(4, 8, ("float8_e4m3fn",), emin=-6, encoding="fn").xmax
    448.0
    """

    t: int
    emax: int
    names: tuple[str, ...] = field(compare=False)
    emin: int
    subnormals: bool
    encoding: str
    overflow: str

    # A hand-written __init__ (not the generated one) so that the optional arguments can be
    # None while the stored fields are always filled in: equal formats compare equal.
    def __init__(self, t: int, emax: int, names: tuple[str, ...] = (), emin: Optional[int] = None,
                 subnormals: bool = True, encoding: str = "ieee", overflow: Optional[str] = None) -> None:
        if encoding not in ENCODINGS:
            raise ValueError(f"Format encoding must be one of {ENCODINGS}, got {encoding!r}.")
        if overflow is None:
            overflow = _DEFAULT_OVERFLOW[encoding]
        elif overflow not in OVERFLOWS:
            raise ValueError(f"Format overflow must be one of {OVERFLOWS}, got {overflow!r}.")
        stored = {"t": t, "emax": emax, "names": names, "emin": 1 - emax if emin is None else emin,
                  "subnormals": subnormals, "encoding": encoding, "overflow": overflow}
        for name, value in stored.items():
            object.__setattr__(self, name, value)

    # --- names and capabilities -----------------------------------------------------------

    @property
    def name(self) -> str:
        """The primary name (``'custom'`` for an unnamed format)."""
        return self.names[0] if self.names else "custom"

    @property
    def has_inf(self) -> bool:
        """Whether +-Inf are representable."""
        return self.encoding == "ieee"

    @property
    def has_nan(self) -> bool:
        """Whether a NaN is representable."""
        return self.encoding != "finite"

    @property
    def has_negative_zero(self) -> bool:
        """Whether -0 is representable (not in fnuz formats, nor in E8M0, which has no zero)."""
        return self.encoding in ("ieee", "fn", "finite")

    @property
    def is_signed(self) -> bool:
        """Whether negative numbers are representable (all but E8M0)."""
        return self.encoding != "e8m0"

    @property
    def is_chop_compatible(self) -> bool:
        """Whether chop.m's own semantics cover this format: IEEE encoding, ``emin = 1 - emax``."""
        return self.encoding == "ieee" and self.emin == 1 - self.emax and self.subnormals

    # --- derived values --------------------------------------------------------------------

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
        """Smallest positive subnormal number (``xmin`` when the format has none)."""
        return _pow2(self.emins) if self.subnormals else self.xmin

    @property
    def top_significand(self) -> int:
        """Largest integer significand of the top binade (``2^t - 1``; one less for ``'fn'``,
        whose all-ones pattern is NaN)."""
        top = (1 << self.t) - 1
        return top - 1 if self.encoding == "fn" and self.t >= 2 else top

    @property
    def xmax(self) -> float:
        """Largest finite number: ``2^emax * (2 - 2^(1-t))`` (one step less for ``'fn'``)."""
        return self.top_significand * _pow2(self.emax - self.t + 1) if self.emax <= 1023 else math.inf

    @property
    def xboundary(self) -> float:
        """Round-to-nearest overflow threshold: ``xmax`` plus half a unit in its last place
        (``2^emax * (2 - 2^-t)`` for IEEE, IEEE 754-2019, 7.4)."""
        return (2 * self.top_significand + 1) * _pow2(self.emax - self.t) if self.emax <= 1023 else math.inf

    @property
    def unit_roundoff(self) -> float:
        """Unit roundoff ``u = 2^-t``."""
        return _pow2(-self.t)

    @property
    def params(self) -> list[int]:
        """``[t, emax]``, as chop.m returns it in ``options.params``."""
        return [self.t, self.emax]

    @property
    def bits(self) -> int:
        """Storage width: sign, exponent field and trailing significand."""
        levels = self.emax - self.emin + 2  # normal binades, plus the subnormal/zero field
        if self.encoding == "ieee":
            levels += 1  # the all-ones field of Inf and NaN
        return int(self.is_signed) + (levels - 1).bit_length() + self.t - 1
