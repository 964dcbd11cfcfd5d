"""``ChoppedScalar``: one value in a format, for MATLAB-style scalar loops.

Arithmetic is Python's float arithmetic (IEEE double) followed by the
package's scalar rounding path, so ``a + b`` on two chopped scalars costs
one Python addition, one rounding and one small object, and gives the
numbers of ``chop(a + b)`` and of the same operation on one-element chopped
arrays.  Division by zero and invalid operations give Inf and NaN, as in
NumPy and MATLAB, rather than Python's exceptions.
"""

from __future__ import annotations

import math
import numbers
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:  # pragma: no cover
    from .context import Arithmetic

__all__ = ["ChoppedScalar"]

_new = object.__new__


def _ieee(op, a: float, b: float) -> float:
    """``a op b`` with NumPy's IEEE results where Python raises (x / 0, overflowing powers)."""
    with np.errstate(all="ignore"):
        return float(op(np.float64(a), np.float64(b)))


class ChoppedScalar:
    """A real number in a format; every operation on it rounds (create with :func:`chopped`).

    Operations with a chopped scalar, a Python or NumPy number give a
    chopped scalar; with an array, a chopped array.  The value is a Python
    float (``float(s)``, :attr:`value`); comparisons give plain booleans.
    """

    __slots__ = ("_v", "_arith")

    @staticmethod
    def _make(value: float, arith: "Arithmetic") -> "ChoppedScalar":
        obj = _new(ChoppedScalar)
        obj._v = value
        obj._arith = arith
        return obj

    @property
    def value(self) -> float:
        """The value, a plain Python float."""
        return self._v

    @property
    def arithmetic(self) -> "Arithmetic":
        """The simulated machine (format, rounding, operand rules)."""
        return self._arith

    shape = property(lambda self: (), doc="``()``.")
    ndim = property(lambda self: 0, doc="0.")
    size = property(lambda self: 1, doc="1.")
    dtype = property(lambda self: np.dtype(np.float64), doc="float64.")

    def __repr__(self) -> str:
        return f"chopped({self._v!r}, {self._arith.describe()})"

    def __float__(self) -> float:
        return self._v

    def __int__(self) -> int:
        return int(self._v)

    def __bool__(self) -> bool:
        return bool(self._v)

    def __hash__(self) -> int:
        return hash(self._v)

    def item(self) -> float:
        return self._v

    def __array__(self, dtype=None, copy=None):
        return np.array(self._v, dtype=dtype)

    # -- binary operations: the hot path ---------------------------------------------------

    def _other(self, other):
        """``(arithmetic, value)`` of a scalar operand, or ``(None, None)`` for anything else."""
        a = self._arith
        kind = type(other)
        if kind is ChoppedScalar:
            b = other._arith
            return (a if b is a else a.combine(b)), other._v
        if kind is float or kind is int or isinstance(other, (numbers.Real, np.floating, np.integer)) \
                and not isinstance(other, (bool, np.bool_, np.ndarray)):
            value = float(other)
            return a, (a.round_scalar(value) if a.strict else value)
        return None, None

    def _array_op(self, ufunc, other, reflected: bool):
        from .array import ChoppedArray, _apply_ufunc
        from .namespace import is_device_array

        if isinstance(other, ChoppedArray):
            return NotImplemented  # the array's reflected operator handles it
        if isinstance(other, (np.ndarray, list, tuple)) or is_device_array(other):
            inputs = (other, self) if reflected else (self, other)
            return _apply_ufunc(ufunc, "__call__", inputs, {})
        return NotImplemented

    def __add__(self, other):
        a = self._arith
        if type(other) is ChoppedScalar and other._arith is a:
            o = other._v
        elif type(other) is float and not a.strict:
            o = other
        else:
            a, o = self._other(other)
            if a is None:
                return self._array_op(np.add, other, False)
        r = _new(ChoppedScalar)
        r._v = a.round_scalar(self._v + o)
        r._arith = a
        return r

    def __radd__(self, other):
        a = self._arith
        if type(other) is ChoppedScalar and other._arith is a:
            o = other._v
        elif type(other) is float and not a.strict:
            o = other
        else:
            a, o = self._other(other)
            if a is None:
                return self._array_op(np.add, other, True)
        r = _new(ChoppedScalar)
        r._v = a.round_scalar(o + self._v)
        r._arith = a
        return r

    def __sub__(self, other):
        a = self._arith
        if type(other) is ChoppedScalar and other._arith is a:
            o = other._v
        elif type(other) is float and not a.strict:
            o = other
        else:
            a, o = self._other(other)
            if a is None:
                return self._array_op(np.subtract, other, False)
        r = _new(ChoppedScalar)
        r._v = a.round_scalar(self._v - o)
        r._arith = a
        return r

    def __rsub__(self, other):
        a = self._arith
        if type(other) is ChoppedScalar and other._arith is a:
            o = other._v
        elif type(other) is float and not a.strict:
            o = other
        else:
            a, o = self._other(other)
            if a is None:
                return self._array_op(np.subtract, other, True)
        r = _new(ChoppedScalar)
        r._v = a.round_scalar(o - self._v)
        r._arith = a
        return r

    def __mul__(self, other):
        a = self._arith
        if type(other) is ChoppedScalar and other._arith is a:
            o = other._v
        elif type(other) is float and not a.strict:
            o = other
        else:
            a, o = self._other(other)
            if a is None:
                return self._array_op(np.multiply, other, False)
        r = _new(ChoppedScalar)
        r._v = a.round_scalar(self._v * o)
        r._arith = a
        return r

    def __rmul__(self, other):
        a = self._arith
        if type(other) is ChoppedScalar and other._arith is a:
            o = other._v
        elif type(other) is float and not a.strict:
            o = other
        else:
            a, o = self._other(other)
            if a is None:
                return self._array_op(np.multiply, other, True)
        r = _new(ChoppedScalar)
        r._v = a.round_scalar(o * self._v)
        r._arith = a
        return r

    def __truediv__(self, other):
        a = self._arith
        if type(other) is ChoppedScalar and other._arith is a:
            o = other._v
        elif type(other) is float and not a.strict:
            o = other
        else:
            a, o = self._other(other)
            if a is None:
                return self._array_op(np.true_divide, other, False)
        try:
            q = self._v / o
        except ZeroDivisionError:
            q = _ieee(np.true_divide, self._v, o)
        r = _new(ChoppedScalar)
        r._v = a.round_scalar(q)
        r._arith = a
        return r

    def __rtruediv__(self, other):
        a, o = self._other(other)
        if a is None:
            return self._array_op(np.true_divide, other, True)
        try:
            q = o / self._v
        except ZeroDivisionError:
            q = _ieee(np.true_divide, o, self._v)
        return ChoppedScalar._make(a.round_scalar(q), a)

    def __pow__(self, other):
        a, o = self._other(other)
        if a is None:
            return self._array_op(np.power, other, False)
        return ChoppedScalar._make(a.round_scalar(_ieee(np.power, self._v, o)), a)

    def __rpow__(self, other):
        a, o = self._other(other)
        if a is None:
            return self._array_op(np.power, other, True)
        return ChoppedScalar._make(a.round_scalar(_ieee(np.power, o, self._v)), a)

    def _numpy_binary(self, ufunc, other, reflected: bool):
        a, o = self._other(other)
        if a is None:
            return self._array_op(ufunc, other, reflected)
        x, y = (o, self._v) if reflected else (self._v, o)
        return ChoppedScalar._make(a.round_scalar(_ieee(ufunc, x, y)), a)

    def __floordiv__(self, other):
        return self._numpy_binary(np.floor_divide, other, False)

    def __rfloordiv__(self, other):
        return self._numpy_binary(np.floor_divide, other, True)

    def __mod__(self, other):
        return self._numpy_binary(np.remainder, other, False)

    def __rmod__(self, other):
        return self._numpy_binary(np.remainder, other, True)

    def __neg__(self):
        return ChoppedScalar._make(-self._v, self._arith)

    def __pos__(self):
        return self

    def __abs__(self):
        return ChoppedScalar._make(abs(self._v), self._arith)

    def sqrt(self) -> "ChoppedScalar":
        """``fl(sqrt(x))`` (NaN for negative ``x``), the same as ``np.sqrt`` of it."""
        v = self._v
        root = math.sqrt(v) if v >= 0 else math.nan
        return ChoppedScalar._make(self._arith.round_scalar(root), self._arith)

    # -- comparisons: plain booleans -------------------------------------------------------------

    def _cmp_value(self, other):
        if isinstance(other, ChoppedScalar):
            return other._v
        return other

    def __lt__(self, other):
        return self._v < self._cmp_value(other)

    def __le__(self, other):
        return self._v <= self._cmp_value(other)

    def __gt__(self, other):
        return self._v > self._cmp_value(other)

    def __ge__(self, other):
        return self._v >= self._cmp_value(other)

    def __eq__(self, other):
        return self._v == self._cmp_value(other)

    def __ne__(self, other):
        return self._v != self._cmp_value(other)

    # -- NumPy protocols ---------------------------------------------------------------------------

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        from .array import _apply_ufunc

        return _apply_ufunc(ufunc, method, inputs, kwargs)

    def __array_function__(self, func, types, args, kwargs):
        from .array import ChoppedArray

        return ChoppedArray.__array_function__(None, func, types, args, kwargs)
