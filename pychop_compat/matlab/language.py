"""MATLAB-language behaviour that has no one-line NumPy equivalent, for porting scripts.

Each function names the MATLAB function or operator it reproduces.  Where a
NumPy one-liner does the job (``A.ravel(order='F')`` for ``A(:)``,
``x[-1]`` for ``x(end)``, ``np.fmod`` for ``rem``) the migration guide
(:doc:`/migration`) gives it instead.
"""

from __future__ import annotations

import math
import re
import warnings
from collections.abc import Mapping
from types import SimpleNamespace
from typing import Any, Union

import numpy as np
from numpy.typing import ArrayLike

from .options import CHOP_M_OPTION_NAMES, OPTION_NAMES

__all__ = ["round_half_away", "int_divide", "sprintf", "chop_struct"]


def round_half_away(x: ArrayLike) -> Union[np.ndarray, float]:
    """MATLAB's ``round(x)``: to the nearest integer, halves away from zero.

    Python's ``round()`` and :func:`numpy.round` send halves to the even
    neighbour (``round(2.5) == 2``), MATLAB's ``round(2.5)`` is 3 and
    ``round(-2.5)`` is -3.  The usual rewrite ``floor(x + 0.5)`` is wrong
    twice: for negative halves, and for 0.49999999999999994 (the double just
    below 1/2), where ``x + 0.5`` rounds up to 1.  Here the fraction
    ``x - trunc(x)`` is formed exactly and compared with 1/2.

    Parameters
    ----------
    x : array_like
        Real numbers (float16, float32 or float64 keep their dtype; integers
        are returned unchanged as float64).

    Returns
    -------
    numpy.ndarray or float
        Same shape; a Python float for a scalar input.  Inf, NaN and values of
        magnitude 2^52 or more (already integers) are returned unchanged.

    Examples
    --------
    >>> from pychop_compat.matlab import round_half_away
    >>> round_half_away([2.5, -2.5, 0.5, 1.5, 0.49999999999999994])
    array([ 3., -3.,  1.,  2.,  0.])
    >>> round(2.5), round_half_away(2.5)
    (2, 3.0)
    """
    a = np.asarray(x)
    if not np.issubdtype(a.dtype, np.floating):
        a = a.astype(np.float64)
    whole = np.trunc(a)
    with np.errstate(invalid="ignore"):  # inf - inf: NaN, and the where() keeps whole = inf
        # exact: for |a| >= 1, a/2 <= trunc(a) <= a (Sterbenz); for |a| < 1, trunc(a) = 0
        fraction = np.abs(a - whole)
        out = np.where(fraction >= 0.5, whole + np.sign(a), whole)
    out = out.astype(a.dtype, copy=False)
    return float(out) if out.ndim == 0 else out


def int_divide(a: ArrayLike, b: ArrayLike) -> np.ndarray:
    """MATLAB's ``a ./ b`` (and ``a / b``) for integer classes: round half away, saturate.

    In MATLAB ``int32(7) / int32(2)`` is 4 and ``int32(-7) / int32(2)`` is -4
    (the exact quotient rounded to nearest, halves away from zero); results
    outside the class saturate (``int8(-128) / int8(-1)`` is 127); and
    division by zero gives ``intmax`` for a positive dividend, ``intmin`` for
    a negative one and 0 for 0.  Python's ``7 // 2`` is 3 and ``-7 // 2`` is
    -4 (floor), MATLAB's ``idivide(int32(-7), int32(2))`` is -3 (towards zero,
    ``np.fix`` of the quotient), and NumPy's integer ``/`` returns float64.

    Parameters
    ----------
    a, b : array_like
        Integer arrays or scalars of one NumPy integer dtype (or one of them a
        Python int), broadcastable against each other.

    Returns
    -------
    numpy.ndarray
        The quotient in the integer dtype of the inputs, computed exactly.

    Raises
    ------
    TypeError
        When neither input has an integer dtype, or their dtypes differ (MATLAB
        also refuses to mix integer classes).

    Examples
    --------
    >>> import numpy as np
    >>> from pychop_compat.matlab import int_divide
    >>> int_divide(np.int32([7, -7, 5, 0]), np.int32([2, 2, 0, 0]))
    array([         4,         -4, 2147483647,          0], dtype=int32)
    """
    a_arr, b_arr = np.asarray(a), np.asarray(b)
    kinds = [arr.dtype for arr in (a_arr, b_arr) if np.issubdtype(arr.dtype, np.integer)]
    if not kinds:
        raise TypeError(f"int_divide needs integer arrays (MATLAB integer classes); got {a_arr.dtype} and {b_arr.dtype}")
    dtype = kinds[0]
    for arr in (a_arr, b_arr):
        if np.issubdtype(arr.dtype, np.integer) and arr.dtype != dtype and arr.ndim > 0:
            raise TypeError(f"int_divide: integer dtypes differ ({a_arr.dtype} and {b_arr.dtype}); "
                            "MATLAB requires both operands of the same integer class")
    info = np.iinfo(dtype)
    # Python integers: exact for every width, int64 and uint64 included.
    num, den = np.broadcast_arrays(a_arr.astype(object), b_arr.astype(object))
    out = np.empty(num.shape, dtype=dtype)
    flat_out = out.reshape(-1)
    for i, (p, q) in enumerate(zip(num.reshape(-1), den.reshape(-1))):
        p, q = int(p), int(q)
        if q == 0:
            value = info.max if p > 0 else (info.min if p < 0 else 0)
        else:
            quotient, remainder = divmod(abs(p), abs(q))
            if 2 * remainder >= abs(q):
                quotient += 1
            value = quotient if (p >= 0) == (q > 0) else -quotient
        flat_out[i] = min(max(value, info.min), info.max)
    return out


_CONVERSION = re.compile(r"%(?P<flags>[-+ 0#]*)(?P<width>\d+|\*)?(?:\.(?P<precision>\d+|\*))?"
                         r"(?P<conversion>[diouxXfFeEgGcs%])")
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "\\": "\\", "a": "\a", "b": "\b", "f": "\f", "v": "\v"}


def _flatten(args) -> list:
    """The values of ``args`` in MATLAB's order: each argument column by column, strings whole."""
    values: list = []
    for arg in args:
        if isinstance(arg, str):
            values.append(arg)
        else:
            values.extend(np.asarray(arg).ravel(order="F").tolist())
    return values


def _format_one(spec: re.Match, value: Any) -> str:
    flags, width, precision, conversion = spec["flags"], spec["width"] or "", spec["precision"], spec["conversion"]
    head = f"%{flags}{width}"
    if conversion == "s":
        if not isinstance(value, str):  # MATLAB prints a number given to %s in shortest form
            value = _shortest(value)
        return (head + (f".{precision}" if precision else "") + "s") % value
    if conversion == "c":
        return (head + "s") % (value if isinstance(value, str) else chr(int(value)))
    if isinstance(value, str):  # text given to a numeric conversion: MATLAB prints the text
        return (head + "s") % value
    number = float(value)
    if math.isinf(number) or math.isnan(number):
        text = "NaN" if math.isnan(number) else ("Inf" if number > 0 else "-Inf")
        if "+" in flags and number > 0:
            text = "+" + text
        return ("%" + flags.replace("0", "").replace("+", "") + width + "s") % text
    if conversion in "diouxX":
        if number != int(number):  # not an integer: MATLAB switches to %e
            return (head + (f".{precision}" if precision else "") + "e") % number
        conversion = "d" if conversion in "iu" else conversion
        return (head + conversion) % int(number)
    return (head + (f".{precision}" if precision is not None else "") + conversion) % number


def _shortest(value) -> str:
    number = float(value)
    if math.isnan(number):
        return "NaN"
    if math.isinf(number):
        return "Inf" if number > 0 else "-Inf"
    return f"{number:g}" if number != int(number) else str(int(number))


def sprintf(fmt: str, *args: Any) -> str:
    """MATLAB's ``sprintf(fmt, A, ...)``: the format applied to every value, recycled, column-major.

    The common conversions (``%d %i %u %o %x %X %f %e %g %E %G %c %s %%``
    with flags, width and precision) behave as in MATLAB where Python's ``%``
    operator differs:

    * the format is applied again and again until every value is used, taking
      the values of each array argument in column-major order
      (``sprintf('%d %d\\n', [1 2; 3 4])`` is ``'1 3\\n2 4\\n'``), and output
      stops before the first conversion that has no value left;
    * Inf, -Inf and NaN print as ``Inf``, ``-Inf`` and ``NaN`` (Python prints
      ``inf`` and ``nan``) in every numeric conversion;
    * an integer conversion given a value that is not an integer prints it
      with ``%e`` (``sprintf('%d', pi)`` is ``'3.141593e+00'``);
    * backslash escapes in the format (``\\n``, ``\\t``, ``\\\\``) are
      interpreted, so a format copied from MATLAB into a raw string works.

    MATLAB's ``fprintf(fmt, ...)`` is ``print(sprintf(fmt, ...), end='')``.

    Parameters
    ----------
    fmt : str
        The format.
    *args : scalars, arrays or str
        The values.

    Returns
    -------
    str

    Examples
    --------
    >>> import numpy as np
    >>> from pychop_compat.matlab import sprintf
    >>> sprintf('%d %d\\n', np.array([[1, 2], [3, 4]]))
    '1 3\\n2 4\\n'
    >>> sprintf('%g, ', [np.inf, -np.inf, np.nan])
    'Inf, -Inf, NaN, '
    >>> '%g' % np.inf
    'inf'
    """
    fmt = re.sub(r"\\(.)", lambda m: _ESCAPES.get(m.group(1), "\\" + m.group(1)), fmt)
    values = _flatten(args)
    matches = list(_CONVERSION.finditer(fmt))
    if any(m["width"] == "*" or m["precision"] == "*" for m in matches):
        raise ValueError("sprintf: '*' widths are not supported; write the width into the format")
    takes_values = any(m["conversion"] != "%" for m in matches)
    out: list[str] = []
    position = 0
    while True:
        last = 0
        for match in matches:
            out.append(fmt[last:match.start()])
            last = match.end()
            if match["conversion"] == "%":
                out.append("%")
            elif position < len(values):
                out.append(_format_one(match, values[position]))
                position += 1
            else:  # no value left: stop before this conversion
                return "".join(out)
        out.append(fmt[last:])
        if not takes_values or position >= len(values):
            return "".join(out)


def chop_struct(fields: Mapping[str, Any], *, warn: bool = True) -> SimpleNamespace:
    """Options read the way chop.m reads a MATLAB struct: fields it does not know are ignored.

    A dict passed to :func:`pychop_compat.chop` must hold only chop's eight
    option names, so a misspelt or invented field raises.  chop.m instead
    ignores such fields without a word: a script that set
    ``options.precision = 'b'`` (no version of chop.m ever read
    ``precision``) ran with the default format, fp16.  ``chop_struct``
    reproduces what such a script computed, and says which fields were
    dropped.

    Parameters
    ----------
    fields : mapping
        The struct's fields.
    warn : bool
        Warn (:class:`UserWarning`) naming every ignored field.

    Returns
    -------
    types.SimpleNamespace
        The fields chop.m reads (``format``, ``subnormal``, ``round``,
        ``flip``, ``p``, ``explim``, ``randfunc``, ``params``), for ``chop``.

    Examples
    --------
    >>> import warnings
    >>> from pychop_compat import chop
    >>> from pychop_compat.matlab import chop_struct
    >>> with warnings.catch_warnings():
    ...     warnings.simplefilter("ignore")
    ...     opts = chop_struct({'precision': 'b', 'round': 1})
    >>> chop(1/3, opts)    # fp16, the default format, as in MATLAB
    0.333251953125
    >>> chop(1/3, {'format': 'b', 'round': 1})    # what the author meant
    0.333984375
    """
    known = {k: v for k, v in fields.items() if k in OPTION_NAMES}
    ignored = [k for k in fields if k not in OPTION_NAMES]
    if ignored and warn:
        missing = [name for name in CHOP_M_OPTION_NAMES if name not in known]
        warnings.warn(f"chop.m ignores the field(s) {', '.join(map(repr, ignored))} (it reads only "
                      f"{', '.join(CHOP_M_OPTION_NAMES)}); the defaults apply to {', '.join(missing)}",
                      UserWarning, stacklevel=2)
    return SimpleNamespace(**known)
