"""The catalogue of named formats: chop's, IEEE's, and today's ML formats.

chop.m's spellings stay the primary names of its formats; the OCP/ML formats use ml_dtypes'
names.  Names are case-sensitive, as in MATLAB; the bare ``'E4M3'``, which names three
different formats, is refused (:data:`AMBIGUOUS_NAMES`; see :doc:`/formats`).
"""

from __future__ import annotations

from typing import Optional

from .model import Format

__all__ = ["CATALOGUE", "CHOP_FORMAT_NAMES", "CUSTOM_NAMES", "AMBIGUOUS_NAMES", "lookup_format", "catalogue_format",
           "custom_format", "float_params", "known_names"]


def _f(t: int, emax: int, *names: str, **kw) -> Format:
    return Format(t, emax, names, **kw)


#: Every named format, in the order of the docs' table.
CATALOGUE: tuple[Format, ...] = (
    # chop.m's formats with its spellings first; further spellings after them.
    _f(4, 7, "q43", "fp8-e4m3", "float8_e4m3"),
    _f(3, 15, "q52", "fp8-e5m2", "float8_e5m2", "E5M2"),
    _f(8, 127, "b", "bfloat16", "bf16"),
    _f(11, 15, "h", "half", "fp16", "binary16", "float16"),
    _f(11, 127, "t", "tf32", "TensorFloat-32"),
    _f(24, 127, "s", "single", "fp32", "binary32", "float32"),
    _f(53, 1023, "d", "double", "fp64", "binary64", "float64"),
    _f(113, 16383, "q", "quadruple", "fp128", "binary128"),
    # OCP 8-bit (OFP8), the fnuz variants, OCP MX element types and the MX scale type.
    _f(4, 8, "float8_e4m3fn", emin=-6, encoding="fn"),
    _f(4, 7, "float8_e4m3fnuz", emin=-7, encoding="fnuz"),
    _f(3, 15, "float8_e5m2fnuz", emin=-15, encoding="fnuz"),
    _f(5, 3, "float8_e3m4"),
    _f(4, 2, "float6_e2m3fn", emin=0, encoding="finite"),
    _f(3, 4, "float6_e3m2fn", emin=-2, encoding="finite"),
    _f(2, 2, "float4_e2m1fn", emin=0, encoding="finite"),
    _f(1, 127, "float8_e8m0fnu", emin=-127, subnormals=False, encoding="e8m0"),
)

# chop.m's own names (options.format of chop.m, in its order).
_CHOP_NAMES = ("q43", "fp8-e4m3", "q52", "fp8-e5m2", "b", "bfloat16", "h", "half", "fp16",
               "s", "single", "fp32", "d", "double", "fp64")
#: The format names that select a custom ``[t, emax]`` format (chop.m's ``'c'``).
CUSTOM_NAMES = ("c", "custom")
#: The format names chop.m itself accepts (custom included).
CHOP_FORMAT_NAMES: tuple[str, ...] = _CHOP_NAMES + CUSTOM_NAMES

_BY_NAME: dict[str, Format] = {n: f for f in CATALOGUE for n in f.names}

#: Names that mean different formats in different libraries: refused, with an explanation.
AMBIGUOUS_NAMES = {
    "E4M3": ("'E4M3' names three different formats: chop's 'q43'/'fp8-e4m3' ([t, emax] = [4, 7], "
             "largest 240), OCP's 'float8_e4m3fn' (largest 448, no Inf) and CPFloat's 'E4M3' "
             "([4, -6, 8], largest 480; use pychop_compat.cpfloat). Name the one you mean."),
}


def known_names() -> tuple[str, ...]:
    """Every name :func:`catalogue_format` accepts."""
    return tuple(_BY_NAME)


def catalogue_format(name: str) -> Format:
    """The catalogue's format called ``name`` (any spelling; case-sensitive).

    Raises
    ------
    ValueError
        For an ambiguous or unknown name; the message lists the known names.
    """
    if isinstance(name, str) and name in AMBIGUOUS_NAMES:
        raise ValueError(AMBIGUOUS_NAMES[name])
    try:
        return _BY_NAME[name]
    except (KeyError, TypeError):
        raise ValueError(
            f"Unrecognized format {name!r}. Known formats: {', '.join(map(repr, known_names()))}, "
            f"or {' / '.join(map(repr, CUSTOM_NAMES))} with params."
        ) from None


def lookup_format(name: str) -> Format:
    """The named format ``name`` for chop: chop.m's names and the catalogue's.

    Raises
    ------
    ValueError
        For formats with more precision than double (``'q'``), ambiguous and unknown names.
    """
    fmt = catalogue_format(name)
    if fmt.t > 53:
        raise ValueError(f"Format {name!r} has more precision than double; chop cannot round to it.")
    return fmt


def custom_format(t: int, emax: int, emin: Optional[int] = None) -> Format:
    """A custom format ``[t, emax]`` (chop's ``format = 'c'``), or ``[t, emin, emax]``."""
    return Format(int(t), int(emax), ("c",), emin=None if emin is None else int(emin))


def float_params(prec: str = "d") -> tuple[float, float, float, float, int, int, int, int]:
    """Parameters of a floating-point arithmetic, as MATLAB's ``float_params``.

    Parameters
    ----------
    prec : str, optional
        Any name of the catalogue (:func:`known_names`): chop's (default ``'d'``),
        ``'t'``/``'tf32'``, ``'q'``/``'quadruple'`` and the OCP/ML formats.

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
    >>> float_params('float8_e4m3fn')[3]
    448.0
    """
    try:
        f = catalogue_format(prec)
    except ValueError:
        if isinstance(prec, str) and prec in AMBIGUOUS_NAMES:
            raise
        raise ValueError(f"Unrecognized precision {prec!r}. Allowed: {', '.join(map(repr, known_names()))}.") from None
    emins = f.emins if f.subnormals else f.emin
    return f.unit_roundoff, f.xmins, f.xmin, f.xmax, f.t, emins, f.emin, f.emax
