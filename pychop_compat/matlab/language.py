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
from fractions import Fraction
from types import SimpleNamespace
from typing import Any, Union

import numpy as np
from numpy.typing import ArrayLike

from .options import CHOP_M_OPTION_NAMES

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
    or 0 by the dividend's sign.  An integer class combined with a double
    gives the integer class, the double used as it is: ``int32(7) / 2.5`` is
    ``round(2.8) = 3`` and ``300 / int8(2)`` is ``int8(127)``; NaN gives 0.

    Parameters
    ----------
    a, b : array_like
        Broadcastable arrays or scalars: NumPy integer arrays or scalars of one
        dtype, or one of them a double (MATLAB's class of literals): a Python
        int or float, a list of them, or a float or bool array.

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
    >>> int_divide(np.int32(7), 2.5), int_divide(300, np.int8(2))
    (array(3, dtype=int32), array(127, dtype=int8))
    """
    a_arr, b_arr = np.asarray(a), np.asarray(b)
    # A NumPy integer array or scalar has an integer class; Python numbers and lists are MATLAB doubles.
    classes = [arr.dtype for x, arr in ((a, a_arr), (b, b_arr))
               if isinstance(x, (np.ndarray, np.generic)) and np.issubdtype(arr.dtype, np.integer)]
    if not classes and all(np.issubdtype(arr.dtype, np.integer) for arr in (a_arr, b_arr)):
        classes = [a_arr.dtype]  # Python ints on both sides: the first one's NumPy dtype, as before
    if not classes:
        raise TypeError(f"int_divide needs integer arrays (MATLAB integer classes); got {a_arr.dtype} and "
                        f"{b_arr.dtype}")
    if len(set(classes)) > 1:
        raise TypeError(f"int_divide: integer dtypes differ ({a_arr.dtype} and {b_arr.dtype}); "
                        "MATLAB requires both operands of the same integer class")
    for arr in (a_arr, b_arr):
        if arr.dtype.kind not in "biuf":
            raise TypeError(f"int_divide takes real numbers; got {arr.dtype}")
    dtype = classes[0]
    info = np.iinfo(dtype)
    # Python ints and floats: exact for every width, int64 and uint64 included.
    num, den = np.broadcast_arrays(a_arr.astype(object), b_arr.astype(object))
    out = np.empty(num.shape, dtype=dtype)
    flat_out = out.reshape(-1)
    for i, (p, q) in enumerate(zip(num.reshape(-1), den.reshape(-1))):
        flat_out[i] = min(max(_rounded_quotient(p, q, info), info.min), info.max)
    return out


def _rounded_quotient(p: Union[int, float], q: Union[int, float], info: np.iinfo) -> int:
    """p / q rounded half away from zero, in exact arithmetic; the IEEE result's sign where it is infinite."""
    if math.isnan(p) or math.isnan(q) or (math.isinf(p) and math.isinf(q)):
        return 0  # NaN converts to 0 in an integer class
    if q == 0 or math.isinf(p):
        if p == 0:
            return 0
        positive = (p > 0) == (math.copysign(1.0, q) > 0)  # 5 / -0.0 is -Inf
        return info.max if positive else info.min
    if math.isinf(q):
        return 0
    if isinstance(p, float) or isinstance(q, float):
        exact = Fraction(p) / Fraction(q)  # a double's exact value: no rounding before the final one
        p, q = exact.numerator, exact.denominator
    p, q = int(p), int(q)
    quotient, remainder = divmod(abs(p), abs(q))
    if 2 * remainder >= abs(q):
        quotient += 1
    return quotient if (p >= 0) == (q > 0) else -quotient


# C's '%.d' is precision 0; the length modifiers l and h (MATLAB's '%ld' for 64-bit integers) change nothing here
_CONVERSION = re.compile(r"%(?P<flags>[-+ 0#]*)(?P<width>\d+|\*)?(?:\.(?P<precision>\d*|\*))?"
                         r"(?:(?P<subtype>[bt])(?=[ouxX])|[lh](?=[diouxX]))?(?P<conversion>[diouxXfFeEgGcs%])")
# the values MATLAB prints with an integer conversion; others, negative ones for %o %u %x %X included, get %e
# as MATLAB's doc says ("a conversion that does not fit the data") and MATLAB prints; Octave differs here:
# sprintf('%x', -1) is '-1' there, and it saturates sprintf('%d', 2^63) to 9223372036854775807
_INTEGER_RANGE = {"d": (-(2**63), 2**63 - 1), "i": (-(2**63), 2**63 - 1)}
_UNSIGNED_RANGE = (0, 2**64 - 1)
# \xN (hex, every digit that follows) and \N (octal, 1 to 3 digits), as MATLAB's formatSpec documents
_ESCAPE = re.compile(r"\\(x[0-9a-fA-F]+|[0-7]{1,3}|.)")
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
        A 1-D array is the ``1 x n`` row it stands for: ``dim=1`` returns its terms.

    Returns
    -------
    numpy.ndarray or float
        A Python float where the sum is one number; else the sums as a 1-D array.

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
    return float(total[0]) if total.size == 1 else total


class _Values:
    """sprintf's values in MATLAB's order: each argument column by column, a char array as its characters."""

    def __init__(self, args: tuple) -> None:
        self.args: list[tuple[bool, list]] = []
        for arg in args:
            if isinstance(arg, str):
                self._add(True, list(arg))
                continue
            numbers: list = []
            for element in np.asarray(arg).ravel(order="F").tolist():
                if isinstance(element, str):  # an array of strings: each one a char array
                    self._add(False, numbers)
                    self._add(True, list(element))
                    numbers = []
                else:
                    numbers.append(element)
            self._add(False, numbers)
        self.arg, self.element = 0, 0

    def _add(self, is_text: bool, elements: list) -> None:
        if elements:  # an empty argument gives no value
            self.args.append((is_text, elements))

    def exhausted(self) -> bool:
        return self.arg >= len(self.args)

    def next(self, conversion: str) -> Any:
        """The value for ``conversion``: %s takes the rest of a char array, or a run of character codes."""
        is_text, elements = self.args[self.arg]
        start, end = self.element, self.element + 1
        value: Any = elements[start]
        if is_text and conversion == "s":
            end = len(elements)
            value = "".join(elements[start:])
        elif is_text and conversion != "c":  # text given to a numeric conversion: its character codes
            value = ord(value)
        elif not is_text and conversion == "s":
            while end < len(elements) and _is_char_code(elements[end]):
                end += 1
            if _is_char_code(value):
                value = "".join(chr(int(code)) for code in elements[start:end])
            else:
                end = start + 1
        self.element = end
        if end >= len(elements):
            self.arg, self.element = self.arg + 1, 0
        return value


def _is_char_code(value: Any) -> bool:
    """Whether MATLAB's %c and %s print ``value`` as a character: an integer code of its char, 0 to 65535."""
    try:
        return float(value).is_integer() and 0 <= value <= 65535
    except (TypeError, OverflowError):
        return False


def _c_integer(flags: str, width: str, precision: Union[str, None], conversion: str, n: int) -> str:
    """C's printf of the integer ``n`` where Python's ``%`` differs: ``%#o`` is ``010`` (not ``0o10``), ``%#x``
    of 0 is ``0``, ``%.0d`` of 0 prints no digit, the 0 flag is ignored with a precision, + and space only sign
    ``%d`` and ``%i``."""
    digits = format(abs(n), "d" if conversion in "diu" else conversion)
    if precision is not None:
        digits = ("" if n == 0 and int(precision) == 0 else digits).rjust(int(precision), "0")
    if "#" in flags and conversion == "o" and not digits.startswith("0"):
        digits = "0" + digits
    sign = ""
    if conversion in "di":
        sign = "-" if n < 0 else "+" if "+" in flags else " " if " " in flags else ""
    elif "#" in flags and conversion in "xX" and n != 0:
        sign = "0" + conversion
    size = int(width or 0)
    if "-" in flags:
        return (sign + digits).ljust(size)
    if "0" in flags and precision is None:
        return sign + digits.rjust(size - len(sign), "0")
    return (sign + digits).rjust(size)


def _format_one(spec: re.Match, value: Any) -> str:
    flags, width, precision, conversion = spec["flags"], spec["width"] or "", spec["precision"], spec["conversion"]
    if precision == "":
        precision = "0"
    head, dot = f"%{flags}{width}", "" if precision is None else f".{precision}"
    if conversion in "sc":
        if isinstance(value, str):
            return (head + (dot if conversion == "s" else "") + "s") % value
        if _is_char_code(value):
            return (head + "s") % chr(int(value))
        # MATLAB's fprintf: a conversion that does not fit the data, such as text for a number, becomes %e
        conversion = "e"
    if spec["subtype"]:  # %bx, %tx, ...: the bits of the double (b) or single (t) value, as an integer
        with np.errstate(over="ignore"):  # single(1e300) is Inf, as in MATLAB
            bits = np.float64(value).view(np.uint64) if spec["subtype"] == "b" else np.float32(value).view(np.uint32)
        return _c_integer(flags, width, precision, conversion, int(bits))
    if isinstance(value, (int, np.integer)) and conversion in "diouxX":
        # an integer prints its own digits: a double has only 53 bits of int64's and uint64's
        low, high = _INTEGER_RANGE.get(conversion, _UNSIGNED_RANGE)
        if low <= value <= high:
            return _c_integer(flags, width, precision, conversion, int(value))
        return (head + dot + "e") % float(value)
    number = float(value)
    if math.isinf(number) or math.isnan(number):
        text = _shortest(number)
        if "+" in flags and not number < 0:  # +Inf and +NaN, as in Octave (NaN has no sign to print)
            text = "+" + text
        return ("%" + flags.replace("0", "").replace("+", "") + width + "s") % text
    if conversion in "diouxX":
        low, high = _INTEGER_RANGE.get(conversion, _UNSIGNED_RANGE)
        # not an integer, or one the conversion cannot hold (a negative one for %o %u %x %X): MATLAB uses %e
        if number != int(number) or not low <= int(number) <= high:
            return (head + dot + "e") % number
        return _c_integer(flags, width, precision, conversion, int(number))
    return (head + dot + conversion) % number


def _escape(match: re.Match) -> str:
    code = match.group(1)
    if code[0] in "01234567" or (code[0] == "x" and len(code) > 1):  # a bare \x stays as it is
        value = int(code[1:], 16) if code[0] == "x" else int(code, 8)
        if value > 0x10FFFF:
            raise ValueError(f"sprintf: the escape \\{code} in the format is not a character code")
        return chr(value)
    return _ESCAPES.get(code, "\\" + code)


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
    with flags, width and precision, and the subtypes ``%bx %bo %bu`` and
    ``%tx %to %tu``, the bits of the value as a double or a single) behave as
    in MATLAB where Python's ``%`` differs: the format is recycled over the
    values (arrays column-major) and stops before the first conversion
    without a value; integers print all their digits, with C's flags
    (``%#o`` of 8 is ``010``, ``%.0d`` of 0 prints no digit, ``+`` and space
    sign only ``%d`` and ``%i``); Inf and NaN print as ``Inf``, ``-Inf``,
    ``NaN``; a conversion that does not fit the value (an integer conversion
    of a non-integer, of a negative value for ``%o %u %x %X``, of a value
    beyond int64 for ``%d %i`` or beyond uint64 for the others; ``%s`` or
    ``%c`` of a number that is no character code) prints with ``%e``, as
    MATLAB's does (GNU Octave prints these in a shorter form); the length
    modifiers ``l`` and ``h`` (``%ld``) are accepted; backslash escapes in the format
    (``\\n``, ``\\xN`` hex, ``\\N`` octal, ...) are interpreted.  MATLAB's
    ``fprintf(fmt, ...)`` is ``print(sprintf(fmt, ...), end='')``.

    A str is a MATLAB char array: ``%s`` prints the rest of it, ``%c`` one
    character, a numeric conversion one character's code (``sprintf('%d',
    'ab')`` is ``'9798'``).  A number given to ``%c``, or a run of them given
    to ``%s``, that are character codes (integers 0 to 65535) print as those
    characters (``sprintf('%s', [72, 105])`` is ``'Hi'``).

    Parameters
    ----------
    fmt : str
        The format.
    *args : scalars, arrays or str
        The values; an empty argument gives none.

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
    fmt = _ESCAPE.sub(_escape, fmt)
    values = _Values(args)
    matches = list(_CONVERSION.finditer(fmt))
    if any(m["width"] == "*" or m["precision"] == "*" for m in matches):
        raise ValueError("sprintf: '*' widths are not supported; write the width into the format")
    takes_values = any(m["conversion"] != "%" for m in matches)
    out: list[str] = []
    while True:
        last = 0
        for match in matches:
            out.append(fmt[last:match.start()])
            last = match.end()
            if match["conversion"] == "%":
                out.append("%")
            elif not values.exhausted():
                out.append(_format_one(match, values.next(match["conversion"])))
            else:  # no value left: stop before this conversion
                return "".join(out)
        out.append(fmt[last:])
        if not takes_values or values.exhausted():
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
        Warn (:class:`UserWarning`) naming every ignored field (``rules``,
        which only :func:`pychop_compat.chop` reads, included).

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
    known = {k: v for k, v in fields.items() if k in CHOP_M_OPTION_NAMES}
    ignored = [k for k in fields if k not in CHOP_M_OPTION_NAMES]
    if ignored and warn:
        missing = [name for name in CHOP_M_OPTION_NAMES if name not in known]
        warnings.warn(f"chop.m ignores the field(s) {', '.join(map(repr, ignored))} (it reads only "
                      f"{', '.join(CHOP_M_OPTION_NAMES)}); the defaults apply to {', '.join(missing)}",
                      UserWarning, stacklevel=2)
    return SimpleNamespace(**known)
