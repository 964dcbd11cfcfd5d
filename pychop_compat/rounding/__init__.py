"""Rounding beyond chop.m: :func:`make_spec` builds a :class:`~pychop_compat.spec.RoundingSpec`
with the fields beyond chop.m, and :func:`round_to_format` rounds with it (the reference
algorithms are in :mod:`pychop_compat.rules.cpfloat`).
"""

from __future__ import annotations

import numbers
from typing import Any, Callable, Optional, Union

from ..formats import Format, catalogue_format
from ..spec import ROUND_NAMES, RoundingSpec, round_mode
from ..random.sources import sources_for

__all__ = ["make_spec", "round_to_format"]


def make_spec(fmt: Union[Format, str], round: int = 1, *, subnormal: Optional[bool] = None,
              explim: bool = True, saturation: Optional[bool] = None, infinity: Optional[bool] = None,
              rules: str = "cpfloat", random_bits: int = 0, flip: int = 0, p: float = 0.5) -> RoundingSpec:
    """A rounding spec for ``fmt`` (a :class:`~pychop_compat.Format` or a catalogue name).

    Parameters
    ----------
    fmt : Format or str
        The target format.
    round : int or str
        A name of :data:`~pychop_compat.spec.ROUND_NAMES` (``'nearest'``, ``'up'``, ...: codes 1 to 6)
        or CPFloat's codes: -1 nearest ties away, 0 nearest ties to zero, 1 nearest
        ties to even, 2 up, 3 down, 4 toward zero, 5/6 stochastic, 7 to odd;
        8 (and, with CPFloat's rules, any other code): no rounding.
    subnormal, saturation, infinity : bool, optional
        Default to the format's: subnormals if it has them, saturation if its
        overflow default is ``'saturate'``, infinity if it encodes Inf.
    explim : bool
        False: only the precision is reduced (see the two rule families in the docs).
    rules : {'cpfloat', 'chop'}
        CPFloat's range rules (correct rounding to the format: what ml_dtypes'
        and IEEE casts do in round to nearest) or chop.m's (modes 1-6 only).
    random_bits : int
        Stochastic rounding with this many random bits (1..24); 0: full draws.
    flip : int
        0 no soft errors, 1 a fraction bit, 2 any bit of the encoding (CPFloat's rules).
    p : float
        Probability of a soft error per element.
    """
    if isinstance(fmt, str):
        fmt = catalogue_format(fmt)
    if isinstance(round, str):
        round = round_mode(round)  # 'nearest', 'up', ...: the same codes 1-6 in CPFloat and chop
    elif isinstance(round, bool) or not (isinstance(round, numbers.Real) and float(round).is_integer()):
        raise ValueError(f"round must be an integer code or one of {', '.join(ROUND_NAMES)}, got {round!r}.")
    if rules not in ("cpfloat", "chop"):
        raise ValueError(f"rules must be 'cpfloat' or 'chop', got {rules!r}.")
    if rules == "chop" and not 1 <= round <= 6:
        raise ValueError(f"round = {round} needs rules='cpfloat' (chop's rules know modes 1-6).")
    if not (random_bits == 0 or 1 <= random_bits <= 24):
        raise ValueError(f"random_bits must be 0 (full draws) or 1..24, got {random_bits}.")
    if flip not in (0, 1, 2) or (flip == 2 and rules != "cpfloat"):
        raise ValueError(f"flip must be 0, 1 or (with rules='cpfloat') 2, got {flip}.")
    if flip and not 0 <= p <= 1:
        raise ValueError(f"p must be a probability in [0, 1], got {p}.")
    return RoundingSpec(
        fmt=fmt, subnormal=int(fmt.subnormals if subnormal is None else subnormal),
        round=int(round), flip=int(flip), p=float(p), explim=int(explim),
        saturation=fmt.overflow == "saturate" if saturation is None else bool(saturation),
        infinity=fmt.has_inf if infinity is None else bool(infinity),
        range_rules=rules, random_bits=int(random_bits),
        flip_scope="encoding" if flip == 2 else "fraction",
    )


def round_to_format(x: Any, fmt: Union[Format, str, RoundingSpec], round: int = 1, *,
                    randfunc: Optional[Callable[[int], Any]] = None, **kwargs: Any) -> Any:
    """Round ``x`` to ``fmt`` (see :func:`make_spec` for the keywords), keeping its type.

    ``x``: what :func:`~pychop_compat.chop` takes (a Python number, a NumPy array or
    scalar, anything NumPy converts, a torch tensor, a CuPy, JAX or Dask array, a pandas
    Series/DataFrame or an xarray DataArray); a new object of its type, dtype and device
    (with its labels) is returned, as from ``chop``; other types raise ``TypeError``.
    ``randfunc(n)``: n uniforms in [0, 1) (default MATLAB's stream).

    Examples
    --------
    >>> from pychop_compat.rounding import round_to_format
    >>> round_to_format([300.0, 500.0, 0.001], 'float8_e4m3fn').tolist()
    [288.0, nan, 0.001953125]
    >>> round_to_format([0.1, 0.3], 'float4_e2m1fn', 7).tolist()  # round to odd
    [0.5, 0.5]
    """
    spec = fmt if isinstance(fmt, RoundingSpec) else make_spec(fmt, round, **kwargs)
    sources = sources_for(randfunc)
    from ..engines import dispatch
    from ..libraries import array_library, unsupported_type_error

    if array_library(x) == "unsupported":
        raise unsupported_type_error(x, "round_to_format")
    return dispatch.round_array(x, spec, sources)  # (x's type kept, as chop keeps it)
