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

__all__ = ["round_half_away", "int_divide", "sequential_sum", "sprintf", "chop_struct"]


def round_half_away(x: ArrayLike) -> Union[np.ndarray, float]:
    """MATLAB's ``round(x)``: to the nearest integer, halves away from zero.

    Python's ``round()`` and :func:`numpy.round` send halves to the even
    neighbour; ``floor(x + 0.5)`` is wrong for negative halves and for
    0.49999999999999994.  Here the fraction ``x - trunc(x)`` is formed exactly.

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

    The exact quotient rounded to nearest, halves away from zero
    (``int32(-7) / int32(2)`` is -4, where Python's ``//`` floors); results
    outside the class saturate; division by zero gives ``intmax``, ``intmin``
    or 0 by the dividend's sign.

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
        raise TypeError(f"int_divide needs integer arrays (MATLAB integer classes); got {a_arr.dtype} and "
                        f"{b_arr.dtype}")
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


def sequential_sum(x: ArrayLike, dim: Union[int, None] = None) -> Union[np.ndarray, float]:
    """MATLAB's ``sum(x)`` and ``sum(x, dim)`` in their order: left to right, one term at a time.

    ``s = 0; s = s + x(1); s = s + x(2); ...``: the order GNU Octave always uses and MATLAB
    gives on small vectors (its order on large arrays, which may be blocked or threaded, is
    not documented).  :func:`numpy.sum` adds in pairs (and, from 8 terms, in 8 interleaved
    partial sums), so its last bits can differ; the sum starting from ``+0``,
    ``sum([-0, -0])`` is ``+0``, as in Octave.

    Parameters
    ----------
    x : array_like
        Real numbers, 1-D (a vector) or 2-D; float32 is summed in float32, as MATLAB sums
        singles; other input in float64.
    dim : {None, 1, 2}, optional
        MATLAB's dimension: 1 sums each column, 2 each row; None (default) sums a 1-D array
        or a ``1 x n`` row, else the columns, as MATLAB's first non-singleton dimension.

    Returns
    -------
    numpy.ndarray or float
        A Python float for a vector; for a matrix the sums as a 1-D array.

    Examples
    --------
    >>> import numpy as np
    >>> from pychop_compat.matlab import sequential_sum
    >>> x = [1.0, 2.0**-53, 2.0**-53, 2.0**-53, 2.0**-53, 2.0**-53, 2.0**-53, 2.0**-53, 2.0**-53]
    >>> sequential_sum(x) == 1.0, float(np.sum(x)) == 1.0   # Octave and MATLAB: sum(x) == 1
    (True, False)
    >>> sequential_sum(np.array([[1.0, 2.0], [3.0, 4.0]])).tolist()
    [4.0, 6.0]
    """
    a = np.asarray(x)
    if a.dtype != np.float32:
        a = a.astype(np.float64)
    if a.ndim > 2:
        raise ValueError("sequential_sum takes a vector or a matrix")
    if a.ndim < 2:
        a = a.reshape(1, -1)
        dim = 2 if dim is None else dim
    elif dim is None:
        dim = 2 if a.shape[0] == 1 else 1
    if dim not in (1, 2):
        raise ValueError(f"dim must be 1 or 2, got {dim!r}")
    terms = a if dim == 1 else a.T
    total = np.zeros(terms.shape[1], dtype=a.dtype)
    for row in terms:
        total = total + row
    return float(total[0]) if np.asarray(x).ndim < 2 or total.size == 1 else total


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
    head, dot = f"%{flags}{width}", "" if precision is None else f".{precision}"
    if conversion == "s":
        if not isinstance(value, str):  # MATLAB prints a number given to %s in shortest form
            value = _shortest(value)
        return (head + dot + "s") % value
    if conversion == "c":
        return (head + "s") % (value if isinstance(value, str) else chr(int(value)))
    if isinstance(value, str):  # text given to a numeric conversion: MATLAB prints the text
        return (head + "s") % value
    number = float(value)
    if math.isinf(number) or math.isnan(number):
        text = _shortest(number)
        if "+" in flags and number > 0:
            text = "+" + text
        return ("%" + flags.replace("0", "").replace("+", "") + width + "s") % text
    if conversion in "diouxX":
        if number != int(number):  # not an integer: MATLAB switches to %e
            return (head + dot + "e") % number
        conversion = "d" if conversion in "iu" else conversion
        return (head + conversion) % int(number)
    return (head + dot + conversion) % number


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
    differs: the format is recycled over the values (arrays column-major) and
    stops before the first conversion without a value; Inf and NaN print as
    ``Inf``, ``-Inf``, ``NaN``; an integer conversion of a non-integer prints
    with ``%e``; backslash escapes in the format are interpreted.  MATLAB's
    ``fprintf(fmt, ...)`` is ``print(sprintf(fmt, ...), end='')``.

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

    :func:`pychop_compat.chop` refuses a misspelt field; chop.m ignored it, so
    a script that set ``options.precision = 'b'`` ran with fp16.
    ``chop_struct`` reproduces what such a script computed.

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
