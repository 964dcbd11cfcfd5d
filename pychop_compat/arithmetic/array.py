"""Chopped NumPy values: ``ChoppedArray`` and ``ChoppedScalar``, every operation rounded.

A wrapper, not an ``ndarray`` subclass: a subclass is still an ndarray, so
every NumPy function without a special case (BLAS's ``@``, ``np.linalg.eig``,
scipy) would compute in double on it and hand back a subclass that looks
chopped.  The wrapper sees every ufunc (``__array_ufunc__``) and NumPy
function (``__array_function__``) and refuses what it does not round
(:class:`NotChoppedError`); ``np.asarray(c)`` leaves the simulation explicitly.
A :class:`ChoppedScalar` serves MATLAB-style scalar loops: one Python float
operation and one scalar rounding, the numbers of ``chop(a + b)``, with
NumPy's Inf and NaN where Python raises.  Arrays and scalars hand results to
each other, hence one module.
"""

from __future__ import annotations

import functools
import math
import numbers
import operator
from typing import Any, Callable, Iterator, List, Optional, Tuple, Union, cast

import numpy as np
from numpy.typing import ArrayLike, DTypeLike

from .. import linalg
from ..libraries import ChoppedValue
from . import reductions
from .context import Arithmetic, NotChoppedError, refuse_counter_in_linalg, refuse_masked
from .libraries import device_namespace, from_host, is_device_array, to_host
from .reductions import Axis

__all__ = ["ChoppedArray", "ChoppedScalar", "NotChoppedError"]

def wrap(data: np.ndarray, arith: Arithmetic) -> "ChoppedArray":
    """A chopped array holding ``data`` as it is: values already in ``arith``'s format, not rounded again.

    For the wrappers of other libraries (:mod:`.jax_array`, :mod:`.torch_tensor`) that run this
    module's code on host copies of their values.
    """
    obj = object.__new__(ChoppedArray)
    obj._data = data
    obj._arith = arith
    return obj


def chopped_result(data: np.ndarray, arith: Arithmetic, scalars: bool) -> Union["ChoppedArray", "ChoppedScalar"]:
    """The rounded result ``data`` of an operation as a chopped value.

    A 0-d float64 result of an operation on chopped scalars only (``scalars``)
    is a :class:`ChoppedScalar` (on the host: a device array's 0-d result
    stays a chopped array on its device); anything else a :class:`ChoppedArray`.
    """
    if scalars and data.ndim == 0 and data.dtype == np.float64 and type(data) is np.ndarray:
        return ChoppedScalar._make(float(data), arith)
    return wrap(data, arith)


# ufuncs whose result is one of the (chopped) operands, or its negation: nothing to round.
_EXACT = {np.negative, np.positive, np.absolute, np.fabs, np.maximum, np.minimum, np.fmax,
          np.fmin, np.copysign}


def arithmetic_of(values: Any) -> Optional[Arithmetic]:
    """The arithmetic of an operation on ``values`` (an iterable), None when none is chopped
    (a chopped scalar, or an array of a type of :class:`ChoppedOperators`).

    Raises
    ------
    FormatMismatchError
        When chopped operands have arithmetics that do not combine.
    """
    arith: Optional[Arithmetic] = None
    for v in values:
        if isinstance(v, (ChoppedOperators, ChoppedScalar)):
            arith = v._arith if arith is None else arith.combine(v._arith)
    return arith


def _operand(v, arith: Arithmetic):
    """An operand's values as they enter an operation in ``arith``."""
    if type(v) is ChoppedArray:
        return v._data
    if type(v) is ChoppedScalar:
        return v._v
    if isinstance(v, (float, int)) and not isinstance(v, bool):
        # A Python number stays "weak": float32 data stays float32, as in chop(a + 0.5) (strict: rounded first).
        return float(arith.enter(v)) if arith.strict else v
    return arith.enter(v)


def stored_values(v: Any, arith: Arithmetic) -> Any:
    """The values ``v`` as a chopped array of ``arith`` stores them: chopped ones of the same
    rounding as they are, plain ones and those of another format (met under a ``mismatch`` rule)
    rounded (:meth:`Arithmetic.store`)."""
    if isinstance(v, (ChoppedArray, ChoppedScalar)):
        data = v._data if isinstance(v, ChoppedArray) else np.float64(v._v)
        return data if v._arith.same_rounding(arith) else arith.store(data)
    return arith.store(v)


def plain_values(v: Any) -> Any:
    """Chopped arrays and scalars (also inside lists and tuples) as their plain values (not copied)."""
    if isinstance(v, ChoppedArray):
        return v._data
    if isinstance(v, ChoppedScalar):
        return v._v
    if isinstance(v, (list, tuple)):
        return type(v)(plain_values(e) for e in v)
    return v


def _is_array(v) -> bool:
    """A NumPy array or a device (CuPy) array."""
    return isinstance(v, np.ndarray) or is_device_array(v)


def _is_float(a) -> bool:
    return (isinstance(a, np.floating) or _is_array(a)) and a.dtype.kind == "f"


def _data(value):
    """An operation's result as an array: a device array as it is, anything else through NumPy."""
    return value if is_device_array(value) else np.asarray(value)


def _rewrap(value, arith: Arithmetic):
    """Float arrays from a data-movement function back as chopped arrays (values unchanged)."""
    if _is_array(value) and value.dtype.kind == "f":
        return wrap(value, arith)
    if isinstance(value, np.floating):
        return chopped_result(np.asarray(value), arith, True)
    if isinstance(value, (list, tuple)) and not hasattr(value, "_fields"):
        return type(value)(_rewrap(v, arith) for v in value)
    return value


# -- scalars ----------------------------------------------------------------------------------


_new = object.__new__


def _ieee(op, a: float, b: float) -> float:
    """``a op b`` with NumPy's IEEE results where Python raises (x / 0, overflowing powers)."""
    with np.errstate(all="ignore"):
        return float(op(np.float64(a), np.float64(b)))


#: The Python operators of the ufuncs of the chopped types' operators (for libraries without ufuncs).
OPERATORS: dict[Any, Callable[[Any, Any], Any]] = {
    np.add: operator.add, np.subtract: operator.sub, np.multiply: operator.mul, np.true_divide: operator.truediv,
    np.power: operator.pow, np.floor_divide: operator.floordiv, np.remainder: operator.mod,
    np.less: operator.lt, np.less_equal: operator.le, np.greater: operator.gt, np.greater_equal: operator.ge,
    np.equal: operator.eq, np.not_equal: operator.ne}
#: Those that are IEEE double's operations on Python floats (x / 0 aside).
_IEEE_IN_PYTHON = (np.add, np.subtract, np.multiply, np.true_divide)


#: The ufuncs of the arithmetic operators ``+ - * / ** // %``, in that order.
_ARITHMETIC_UFUNCS = (np.add, np.subtract, np.multiply, np.true_divide, np.power, np.floor_divide, np.remainder)


def _arithmetic_operators(make: Callable[[np.ufunc, bool], Callable[[Any, Any], Any]]
                          ) -> Tuple[Callable[[Any, Any], Any], ...]:
    """The operators ``make(ufunc, reflected)`` builds for :data:`_ARITHMETIC_UFUNCS`, each as written and
    reflected: ``__add__, __radd__, __sub__, __rsub__, ..., __mod__, __rmod__``."""
    return tuple(make(ufunc, reflected) for ufunc in _ARITHMETIC_UFUNCS for reflected in (False, True))


def _scalar_operator(ufunc: np.ufunc, reflected: bool) -> Callable[[Any, Any], Any]:
    """A :class:`ChoppedScalar` operator: one double operation, one scalar rounding.

    The hot path of scalar loops: an operand of the same arithmetic object or a
    plain float skips the operand rules; Python's float operator where it is
    IEEE's, NumPy's ``ufunc`` where Python raises (``x / 0``) or differs
    (powers, ``//``, ``%``).  Anything else that is not a scalar goes to the
    array code.
    """
    op = OPERATORS[ufunc] if ufunc in _IEEE_IN_PYTHON else functools.partial(_ieee, ufunc)
    # Reflected: the operands swapped once, here, not tested on every call (the hot path).
    python_op = (lambda u, v: op(v, u)) if reflected else op

    def scalar_operator(self: "ChoppedScalar", other: Any) -> Any:
        a = self._arith
        if type(other) is ChoppedScalar and other._arith is a:
            o = other._v
        elif type(other) is float and not a.strict:
            o = other
        else:
            a, o = self._other(other)
            if a is None:
                return self._array_op(ufunc, other, reflected)
        try:
            q = python_op(self._v, o)
        except ZeroDivisionError:
            q = _ieee(ufunc, o, self._v) if reflected else _ieee(ufunc, self._v, o)
        r = _new(ChoppedScalar)
        r._v = a.round_scalar(q)
        r._arith = a
        return r

    return scalar_operator


def _scalar_comparison(op: Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
    """A :class:`ChoppedScalar` comparison: ``op`` of the values, a plain boolean."""
    def scalar_comparison(self: "ChoppedScalar", other: Any) -> Any:
        return op(self._v, other._v if isinstance(other, ChoppedScalar) else other)

    return scalar_comparison


@ChoppedValue.register
class ChoppedScalar:
    """A real number in a format; every operation on it rounds (create with :func:`chopped`).

    Operations with a chopped scalar, a Python or NumPy number give a
    chopped scalar; with an array, a chopped array.  The value is a Python
    float (``float(s)``, :attr:`value`); comparisons give plain booleans.
    """

    __slots__ = ("_v", "_arith")
    _v: float
    _arith: Arithmetic

    @staticmethod
    def _make(value: float, arith: Arithmetic) -> "ChoppedScalar":
        obj = _new(ChoppedScalar)
        obj._v = value
        obj._arith = arith
        return obj

    @property
    def value(self) -> float:
        """The value, a plain Python float."""
        return self._v

    @property
    def arithmetic(self) -> Arithmetic:
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
                and not isinstance(other, (np.bool_, np.ndarray)):  # (a bool is the number 0 or 1, as in arrays)
            value = float(other)
            return a, (a.round_scalar(value) if a.strict else value)
        return None, None

    def _array_op(self, ufunc, other, reflected: bool):
        if isinstance(other, ChoppedArray):
            return NotImplemented  # the array's reflected operator handles it
        if isinstance(other, (np.ndarray, list, tuple)) or is_device_array(other):
            inputs = (other, self) if reflected else (self, other)
            return _apply_ufunc(ufunc, "__call__", inputs, {})
        return NotImplemented

    (__add__, __radd__, __sub__, __rsub__, __mul__, __rmul__, __truediv__, __rtruediv__, __pow__, __rpow__,
     __floordiv__, __rfloordiv__, __mod__, __rmod__) = _arithmetic_operators(_scalar_operator)

    def __divmod__(self, other):
        return np.divmod(self, other)  # (floor quotient and remainder, each rounded)

    def __rdivmod__(self, other):
        return np.divmod(other, self)

    # Python's number protocols that give plain values (they leave the simulation, as float() does)
    def __round__(self, ndigits: Optional[int] = None) -> Union[int, float]:
        return round(self._v, ndigits)

    def __trunc__(self) -> int:
        return math.trunc(self._v)

    def __format__(self, spec: str) -> str:
        return format(self._v, spec)

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

    __lt__, __le__, __gt__, __ge__, __eq__, __ne__ = (
        _scalar_comparison(op) for op in (operator.lt, operator.le, operator.gt, operator.ge, operator.eq, operator.ne))

    # -- NumPy protocols ---------------------------------------------------------------------------

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        return _apply_ufunc(ufunc, method, inputs, kwargs)

    def __array_function__(self, func, types, args, kwargs):
        result = wrap(np.array(self._v), self._arith).__array_function__(func, types, args, kwargs)
        if type(result) is ChoppedArray and not any(isinstance(v, ChoppedArray) or _is_array(v) for v in args):
            # a 0-d result of chopped scalars and numbers is a chopped scalar, as a ufunc's (np.round, np.clip ...)
            return chopped_result(np.asarray(result._data), result._arith, True)  # (np.clip gives a NumPy scalar)
        return result

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        # Makes torch hand an operation with a chopped tensor (s * t, t + s) to the tensor's __torch_function__,
        # which takes chopped scalars; torch refuses objects without one before any dispatch.
        return NotImplemented


# -- ufuncs ---------------------------------------------------------------------------------


_UFUNC_KWARGS_REFUSED = ("where", "dtype", "casting", "order", "subok", "signature", "initial")


def _apply_ufunc(ufunc, method, inputs, kwargs):
    for name in _UFUNC_KWARGS_REFUSED:
        if name in kwargs and not (name == "where" and kwargs[name] is True):
            raise NotChoppedError(f"np.{ufunc.__name__}(..., {name}=...) is not supported on chopped arrays.")
    out = kwargs.pop("out", None)
    arith = arithmetic_of(inputs)
    scalars = all(not isinstance(v, ChoppedArray) and not _is_array(v) for v in inputs)
    if method == "__call__" and ufunc is np.matmul:
        result = _matmul(*inputs)
    elif method in ("__call__", "outer"):
        if kwargs:
            raise NotChoppedError(f"np.{ufunc.__name__}: unsupported arguments {sorted(kwargs)}.")
        # exact only when every operand holds values of the result's format: one of another format (met
        # under a mismatch rule) is rounded as it would be by any other operation
        exact = ufunc in _EXACT and all(isinstance(v, (ChoppedArray, ChoppedScalar)) and v._arith.same_rounding(arith)
                                        for v in inputs)
        # ldexp's integer exponents stay integers (it has no float exponent loop; they are no values to round)
        exponent = (ufunc is np.ldexp and len(inputs) == 2 and not isinstance(inputs[1], (ChoppedArray, ChoppedScalar))
                    and np.asarray(inputs[1]).dtype.kind in "iu")
        given = inputs
        if scalars:  # NumPy scalars with a chopped scalar: in double, as its operators compute
            inputs = tuple(float(v) if isinstance(v, (np.floating, np.integer)) else v for v in inputs)
        args = [_operand(v, arith) for v in inputs]
        if exponent:
            args[1] = given[1]
        raw = getattr(ufunc, method)(*args)
        outputs = raw if ufunc.nout > 1 else (raw,)
        results = [chopped_result(_data(value) if exact else arith.round(_data(value)), arith, scalars)
                   if _is_float(value) else value for value in outputs]  # (several outputs: rounded in order)
        result = tuple(results) if ufunc.nout > 1 else results[0]
    elif method in ("reduce", "accumulate"):
        result = _ufunc_reduction(ufunc, method, inputs[0], arith, **kwargs)
    else:
        raise NotChoppedError(f"np.{ufunc.__name__}.{method} is not supported on chopped arrays.")
    return _write_out(result, out)


def _write_out(result, out):
    if out is None:
        return result
    outs = out if isinstance(out, tuple) else (out,)
    results = result if isinstance(result, tuple) else (result,)
    for target, value in zip(outs, results):
        if target is None:
            continue
        if isinstance(target, ChoppedArray):
            if isinstance(value, (ChoppedArray, ChoppedScalar)):
                target._arith.combine(value._arith)
                value = stored_values(value, target._arith)
            target._data[...] = plain_values(value)
        elif isinstance(value, (ChoppedArray, ChoppedScalar)):
            raise NotChoppedError("out= must be a chopped array for a chopped result "
                                  "(a plain out array would leave the simulation silently).")
        else:
            target[...] = value
    final = tuple(t if t is not None else r for t, r in zip(outs, results))
    return final if isinstance(result, tuple) else final[0]


def _ufunc_reduction(ufunc, method, x, arith, axis=0, keepdims=False):
    if not isinstance(x, ChoppedArray):
        raise NotChoppedError(f"np.{ufunc.__name__}.{method} needs a chopped array.")
    if ufunc in (np.add, np.multiply):
        if method == "reduce":
            return _reduce(x, ufunc.__name__, axis, keepdims)
        return _accumulate(x, ufunc.__name__, axis)
    if ufunc in (np.maximum, np.minimum, np.fmax, np.fmin):  # exact: one of the values
        kwargs = {"keepdims": keepdims} if method == "reduce" else {}
        return _rewrap(getattr(ufunc, method)(x._data, axis=axis, **kwargs), arith)
    if ufunc in (np.logical_and, np.logical_or, np.logical_xor):
        return getattr(ufunc, method)(x._data, axis=axis)
    raise NotChoppedError(f"np.{ufunc.__name__}.{method} is not implemented with per-operation "
                          "rounding on chopped arrays.")


# -- reductions and products ------------------------------------------------------------------


def _refuse(name: str, **given) -> None:
    for key, value in given.items():
        if value is not None and value is not np._NoValue:
            raise NotChoppedError(f"{name}(..., {key}=...) is not supported on chopped arrays.")


def _chopped_input(x, name: str) -> "ChoppedArray":
    if isinstance(x, ChoppedScalar):
        return wrap(np.array(x._v), x._arith)
    if not isinstance(x, ChoppedArray):
        raise NotChoppedError(f"{name} needs a chopped array")
    return x


def _reduce(x: "ChoppedArray", op: str, axis, keepdims=False):
    a = x._arith
    data = reductions.reduce(x._data, a.round, op, axis, method=a.method, block_size=a.block_size,
                             keepdims=bool(keepdims), scalar_rnd=a.round_scalar, draws=a.draws)
    return chopped_result(data, a, data.ndim == 0)


def _accumulate(x: "ChoppedArray", op: str, axis):
    a = x._arith
    return wrap(reductions.accumulate(x._data, a.round, op, axis, scalar_rnd=a.round_scalar), a)


def _sum(a: ChoppedOperand, axis: Axis = None, dtype: None = None, out: Optional[ChoppedArray] = None,
         keepdims: bool = False, initial: None = None, where: None = None) -> Union[ChoppedArray, ChoppedScalar]:
    _refuse("sum", dtype=dtype, initial=initial, where=where)
    return _write_out(_reduce(_chopped_input(a, "sum"), "add", axis, keepdims), out)


def _prod(a: ChoppedOperand, axis: Axis = None, dtype: None = None, out: Optional[ChoppedArray] = None,
          keepdims: bool = False, initial: None = None, where: None = None) -> Union[ChoppedArray, ChoppedScalar]:
    _refuse("prod", dtype=dtype, initial=initial, where=where)
    return _write_out(_reduce(_chopped_input(a, "prod"), "multiply", axis, keepdims), out)


def _cumsum(a: ChoppedOperand, axis: Optional[int] = None, dtype: None = None,
            out: Optional[ChoppedArray] = None) -> ChoppedArray:
    _refuse("cumsum", dtype=dtype)
    return _write_out(_accumulate(_chopped_input(a, "cumsum"), "add", axis), out)


def _cumprod(a: ChoppedOperand, axis: Optional[int] = None, dtype: None = None,
             out: Optional[ChoppedArray] = None) -> ChoppedArray:
    _refuse("cumprod", dtype=dtype)
    return _write_out(_accumulate(_chopped_input(a, "cumprod"), "multiply", axis), out)


def _count(x: "ChoppedArray", axis) -> int:
    if axis is None:
        return x.size
    axes = axis if isinstance(axis, (tuple, list)) else (axis,)
    return int(np.prod([x.shape[i] for i in axes]))


def _mean(a: ChoppedOperand, axis: Axis = None, dtype: None = None, out: Optional[ChoppedArray] = None,
          keepdims: bool = False, where: None = None) -> Union[ChoppedArray, ChoppedScalar]:
    """``fl(sum / n)``: the sum in the arithmetic's order, then one rounded division."""
    _refuse("mean", dtype=dtype, where=where)
    x = _chopped_input(a, "mean")
    total = _reduce(x, "add", axis, keepdims)
    return _write_out(total / _count(x, axis), out)


def _var(a: ChoppedOperand, axis: Axis = None, dtype: None = None, out: Optional[ChoppedArray] = None,
         ddof: float = 0, keepdims: bool = False, where: None = None, mean: None = None,
         correction: None = None) -> Union[ChoppedArray, ChoppedScalar]:
    """``m = mean(x)``; ``d = fl(x - m)``; ``fl(sum(fl(d * d)) / (n - ddof))``."""
    _refuse("var", dtype=dtype, where=where, mean=mean, correction=correction)
    x = _chopped_input(a, "var")
    m = _mean(x, axis, keepdims=True)
    d = x - m
    total = _reduce(d * d, "add", axis, keepdims)
    return _write_out(total / (_count(x, axis) - ddof), out)


def _std(a: ChoppedOperand, axis: Axis = None, dtype: None = None, out: Optional[ChoppedArray] = None,
         ddof: float = 0, keepdims: bool = False, where: None = None, mean: None = None,
         correction: None = None) -> Union[ChoppedArray, ChoppedScalar]:
    """``fl(sqrt(var))``."""
    _refuse("std", mean=mean, correction=correction)
    return _write_out(np.sqrt(_var(a, axis, dtype, None, ddof, keepdims, where)), out)


def _product_operands(a, b, name: str):
    arith = arithmetic_of((a, b))
    if arith is None:
        raise NotChoppedError(f"{name} needs a chopped operand")
    A, B = (v._data if isinstance(v, ChoppedArray) else
            v if is_device_array(v) else _product_operand(np.asarray(plain_values(refuse_masked(v)))) for v in (a, b))
    return A, B, arith


def _product_operand(v: np.ndarray) -> np.ndarray:
    """A plain operand of a matrix product: float32 stays float32 (single arithmetic, as for chopped float32
    data, and NumPy's float32 result), the rest float64."""
    return v if v.dtype == np.float32 else np.asarray(v, dtype=float)


def _kernel(A: np.ndarray, B: np.ndarray, arith: Arithmetic) -> np.ndarray:
    """linalg's chopped matmul (1-D or 2-D operands) in the arithmetic's order."""
    refuse_counter_in_linalg(arith, "a matrix product")
    device = next((v for v in (A, B) if is_device_array(v)), None)
    if device is not None:
        # linalg computes on the host today: a round trip, for deterministic rounding only (the
        # device's random numbers and linalg's host draws are different sources).
        if arith.draws:
            raise NotChoppedError("matrix products of chopped CuPy arrays with stochastic rounding or bit "
                                  "flips are not implemented (linalg draws on the host, CuPy arrays from "
                                  "the device's counter).")
        A, B = (to_host(v) if is_device_array(v) else v for v in (A, B))
    C = linalg.matmul(A, B, arith.given, **arith.product_settings)
    return C if device is None else from_host(np.asarray(C), device)


def _products(A: np.ndarray, B: np.ndarray, arith: Arithmetic) -> np.ndarray:
    """The matrix products ``A[i] @ B[i]`` of two stacks of matrices, one by one in order."""
    C = np.empty(A.shape[:2] + B.shape[2:], dtype=np.result_type(A, B))
    for i in range(A.shape[0]):
        C[i] = _kernel(A[i], B[i], arith)
    return C


def _matmul(a, b, out=None):
    """``a @ b`` by :func:`pychop_compat.linalg.matmul`; stacks of matrices one by one in C order."""
    A, B, arith = _product_operands(a, b, "matmul")
    if A.ndim == 0 or B.ndim == 0:
        raise ValueError("matmul: input operand does not have enough dimensions")
    if A.ndim <= 2 and B.ndim <= 2:
        C = _kernel(A, B, arith)
    elif is_device_array(A) or is_device_array(B):
        raise NotChoppedError("stacks of matrix products are not implemented for chopped CuPy arrays; "
                              "multiply the matrices one by one.")
    else:
        A2 = A if A.ndim > 1 else A[None, :]
        B2 = B if B.ndim > 1 else B[:, None]
        batch = np.broadcast_shapes(A2.shape[:-2], B2.shape[:-2])
        n = math.prod(batch)
        C = _products(np.broadcast_to(A2, batch + A2.shape[-2:]).reshape((n,) + A2.shape[-2:]),
                      np.broadcast_to(B2, batch + B2.shape[-2:]).reshape((n,) + B2.shape[-2:]), arith)
        C = C.reshape(batch + C.shape[1:])
        if A.ndim == 1:
            C = C[..., 0, :]
        if B.ndim == 1:
            C = C[..., 0]
    C = _data(C)
    return _write_out(chopped_result(C, arith, C.ndim == 0), out)


def _dot(a: ChoppedOperand, b: ChoppedOperand,
         out: Optional[ChoppedArray] = None) -> Union[ChoppedArray, ChoppedScalar]:
    A, B, arith = _product_operands(a, b, "dot")
    if A.ndim == 0 or B.ndim == 0:
        return _write_out(np.multiply(a, b), out)
    if A.ndim > 2 or B.ndim > 2:
        raise NotChoppedError("np.dot of arrays with more than 2 dimensions is not implemented on "
                              "chopped arrays; use np.matmul or np.einsum.")
    C = _data(_kernel(A, B, arith))
    return _write_out(chopped_result(C, arith, C.ndim == 0), out)


def _vdot(a, b):
    A, B, arith = _product_operands(a, b, "vdot")
    return chopped_result(_data(_kernel(A.ravel(), B.ravel(), arith)), arith, True)


def _inner(a, b):
    """``np.inner``: vectors, or the last axes of matrices, by linalg's kernels."""
    A, B, arith = _product_operands(a, b, "inner")
    if A.ndim > 2 or B.ndim > 2:
        raise NotChoppedError("np.inner of arrays with more than 2 dimensions is not implemented on "
                              "chopped arrays; use np.einsum.")
    if A.ndim <= 1 and B.ndim <= 1:
        return _dot(a, b)
    if B.ndim == 1:
        return _matmul(a, b)
    if A.ndim == 1:
        return _matmul(b, a)
    return _matmul(a, wrap(B.T, arith) if isinstance(b, ChoppedArray) else B.T)


def _outer(a, b, out=None):
    """Each product rounded once (a matrix product with one term)."""
    A, B, arith = _product_operands(a, b, "outer")
    if arith.strict:  # plain operands rounded as they enter, as in the elementwise operations
        A, B = (X if isinstance(v, (ChoppedArray, ChoppedScalar)) else arith.enter(X) for v, X in ((a, A), (b, B)))
    return _write_out(wrap(arith.round(np.multiply.outer(A.ravel(), B.ravel())), arith), out)


def _trace(a, offset=0, axis1=0, axis2=1, dtype=None, out=None):
    _refuse("trace", dtype=dtype)
    x = _chopped_input(a, "trace")
    d = wrap(np.diagonal(x._data, offset, axis1, axis2), x._arith)
    return _write_out(_reduce(d, "add", -1), out)


def _einsum(subscripts, *operands, out=None, optimize=False, **kwargs):
    """Contractions of one or two operands, each output element an inner product by linalg's kernels.

    Two operands: the indices shared with the output are batch indices, the
    shared ones absent from the output are summed over (in row-major order of
    their first appearance in the first operand), the others are free.  Each
    batch is one :func:`pychop_compat.linalg.matmul` of the operands
    transposed to ``(free_1, summed)`` and ``(summed, free_2)``; an outer
    product (nothing summed) rounds each product once.  One operand: its
    summed indices are reduced like :func:`numpy.sum`.
    """
    if kwargs:
        raise NotChoppedError(f"einsum: unsupported arguments {sorted(kwargs)}")
    if not isinstance(subscripts, str):
        raise NotChoppedError("einsum on chopped arrays needs the subscripts as a string")
    spec = subscripts.replace(" ", "")
    if "..." in spec:
        raise NotChoppedError("einsum with '...' is not implemented on chopped arrays")
    if "->" in spec:
        inputs, output = spec.split("->")
    else:
        inputs = spec
        letters = inputs.replace(",", "")
        output = "".join(sorted(c for c in set(letters) if letters.count(c) == 1))
    terms = inputs.split(",")
    if len(terms) != len(operands):
        raise ValueError("einsum: the number of subscripts and operands differ")
    arith = arithmetic_of(operands)
    if arith is None:
        raise NotChoppedError("einsum needs a chopped operand")
    datas = []
    for term, op in zip(terms, operands):
        data = np.asarray(stored_values(op, arith))
        if len(term) != data.ndim:
            raise ValueError(f"einsum: operand {term!r} has {data.ndim} dimensions")
        unique = "".join(dict.fromkeys(term))
        if unique != term:  # repeated index: a diagonal (no arithmetic)
            data = np.einsum(f"{term}->{unique}", data)
        datas.append((unique, data))
    if len(datas) == 1:
        (term, data), = datas
        summed = tuple(i for i, c in enumerate(term) if c not in output)
        kept = "".join(c for c in term if c in output)
        if summed:
            data = np.asarray(plain_values(_reduce(wrap(data, arith), "add", summed)))
        result = np.asarray(np.einsum(f"{kept}->{output}", data) if kept else data)
        return _write_out(chopped_result(result, arith, result.ndim == 0), out)
    if len(datas) != 2:
        raise NotChoppedError("einsum with more than two operands is not implemented on chopped "
                              "arrays (the order of the contractions would be a choice); contract "
                              "two at a time.")
    (ta, A), (tb, B) = datas
    for mine, theirs in ((ta, tb), (tb, ta)):
        for c in mine:
            if c not in theirs and c not in output:
                raise NotChoppedError(f"einsum: index {c!r} is summed over one operand only; "
                                      "sum it first with np.sum")
    batch = [c for c in output if c in ta and c in tb]
    summed = [c for c in ta if c in tb and c not in output]
    free_a = [c for c in ta if c not in tb]
    free_b = [c for c in tb if c not in ta]
    size = dict(zip(ta, A.shape))
    for c, n in zip(tb, B.shape):
        if size.setdefault(c, n) != n:
            raise ValueError(f"einsum: index {c!r} has sizes {size[c]} and {n}")
    At = np.transpose(A, [ta.index(c) for c in batch + free_a + summed])
    Bt = np.transpose(B, [tb.index(c) for c in batch + summed + free_b])
    nb, ma, mb, k = (math.prod(size[c] for c in letters) for letters in (batch, free_a, free_b, summed))
    A3 = At.reshape(nb, ma, k)
    B3 = Bt.reshape(nb, k, mb)
    C = _products(A3, B3, arith) if k else np.zeros((nb, ma, mb), dtype=np.result_type(A3, B3))
    letters = batch + free_a + free_b
    C = C.reshape(tuple(size[c] for c in letters))
    result = np.asarray(np.einsum(f"{''.join(letters)}->{output}", C) if letters else C.reshape(()))
    return _write_out(chopped_result(result, arith, result.ndim == 0), out)


# -- numpy.linalg ----------------------------------------------------------------------------


def _solve(a, b):
    """``np.linalg.solve``: :func:`pychop_compat.linalg.solve` (chopped LU, substitutions)."""
    arith = arithmetic_of((a, b))
    refuse_counter_in_linalg(arith, "np.linalg.solve")
    a, b = (np.asarray(plain_values(refuse_masked(v))) for v in (a, b))
    return wrap(linalg.solve(a, b, arith.given), arith)


def _norm(x, ord=None, axis=None, keepdims=False):
    """2-norm ``fl(sqrt(dot(v, v)))`` (Frobenius for matrices, elements in row-major order),
    1-norm ``sum(|v|)``, inf-norm ``max(|v|)``; vectors and whole arrays only."""
    x = _chopped_input(x, "norm")
    if axis is not None or keepdims:
        raise NotChoppedError("np.linalg.norm with axis or keepdims is not implemented on chopped arrays")
    v = x._data.ravel()
    arith = x._arith
    if ord is None or (ord == 2 and x.ndim == 1) or (ord == "fro" and x.ndim == 2):
        return np.sqrt(chopped_result(np.asarray(_kernel(v, v, arith)), arith, True))
    if x.ndim == 1 and ord == 1:
        return _reduce(wrap(np.abs(v), arith), "add", None)
    if x.ndim == 1 and ord == np.inf:
        return chopped_result(np.asarray(np.max(np.abs(v))), arith, True)
    raise NotChoppedError(f"np.linalg.norm(ord={ord!r}) on a {x.ndim}-d chopped array is not "
                          "implemented with per-operation rounding")


# -- data movement and functions whose values come from the operands ----------------------------


def _concatenate_like(func):
    def handler(arrays, *args, **kwargs):
        arith = arithmetic_of(arrays)
        out = kwargs.pop("out", None)
        _refuse(func.__name__, out=out)
        return wrap(func([stored_values(a, arith) for a in arrays], *args, **kwargs), arith)

    return handler


def _where(condition, *xy):
    if not xy:
        return np.where(plain_values(condition))
    arith = arithmetic_of(xy)
    if arith is None:  # a chopped condition between plain values: a plain result
        return np.where(plain_values(condition), *xy)
    x, y = (stored_values(v, arith) for v in xy)
    return wrap(np.where(plain_values(condition), x, y), arith)


def _clip(a, a_min=None, a_max=None, out=None, **kwargs):
    a_min = kwargs.pop("min", None) if a_min is None else a_min  # (NumPy 2.1's spellings min=, max=)
    a_max = kwargs.pop("max", None) if a_max is None else a_max
    arith = arithmetic_of((a, a_min, a_max, out))
    bounds = [None if v is None else stored_values(v, arith) for v in (a_min, a_max)]
    return _write_out(wrap(np.clip(stored_values(a, arith), *bounds, **kwargs), arith), out)


def _full_like(a, fill_value, *args, **kwargs):
    arith = arithmetic_of((a, fill_value))
    data = np.full_like(plain_values(a), plain_values(fill_value), *args, **kwargs)
    return wrap(arith.store(data), arith) if data.dtype.kind == "f" else data


def _insert(arr, obj, values, axis=None):
    arith = arithmetic_of((arr, values))
    return wrap(np.insert(stored_values(arr, arith), obj, stored_values(values, arith), axis), arith)


def _append(arr, values, axis=None):
    arith = arithmetic_of((arr, values))
    return wrap(np.append(stored_values(arr, arith), stored_values(values, arith), axis), arith)


def _round_elementwise(func):
    """Functions that are elementwise double computations: computed, then rounded once."""
    def handler(a, *args, **kwargs):
        x = _chopped_input(a, func.__name__)
        return wrap(x._arith.round(np.asarray(func(x._data, *args, **kwargs), dtype=x.dtype)), x._arith)

    return handler


_FUNCTIONS = {
    np.sum: _sum, np.prod: _prod, np.cumsum: _cumsum, np.cumprod: _cumprod,
    np.mean: _mean, np.var: _var, np.std: _std, np.dot: _dot, np.vdot: _vdot,
    np.inner: _inner, np.outer: _outer, np.matmul: _matmul, np.trace: _trace,
    np.einsum: _einsum, np.linalg.solve: _solve, np.linalg.norm: _norm,
    np.concatenate: _concatenate_like(np.concatenate), np.stack: _concatenate_like(np.stack),
    np.vstack: _concatenate_like(np.vstack), np.hstack: _concatenate_like(np.hstack),
    np.column_stack: _concatenate_like(np.column_stack), np.dstack: _concatenate_like(np.dstack),
    np.where: _where, np.clip: _clip, np.full_like: _full_like, np.insert: _insert,
    np.append: _append, np.round: _round_elementwise(np.round),
    np.around: _round_elementwise(np.around),
}

# Functions implemented for chopped arrays holding device (CuPy) arrays: the rest refuse them.
_ON_DEVICE = {np.sum, np.prod, np.cumsum, np.cumprod, np.mean, np.var, np.std, np.dot, np.vdot,
              np.matmul, np.outer, np.reshape, np.transpose, np.ravel, np.squeeze, np.expand_dims,
              np.moveaxis, np.swapaxes, np.copy, np.shape, np.ndim, np.size, np.max, np.min, np.amax,
              np.amin, np.argmax, np.argmin, np.any, np.all}

# Values move, nothing is computed: the result holds values of the operands.
#: Functions of :data:`_MOVES` that give back every argument's values (rounded as they enter).
_SPREADS = {np.broadcast_arrays, np.meshgrid, np.atleast_1d, np.atleast_2d, np.atleast_3d}


def _entered(value: Any, arith: Arithmetic) -> Any:
    """Plain float values rounded as a chopped array stores them; other values as they are."""
    if isinstance(value, (ChoppedArray, ChoppedScalar)) or np.asarray(value).dtype.kind != "f":
        return value
    return stored_values(value, arith)


_MOVES = {
    np.reshape, np.transpose, np.ravel, np.squeeze, np.expand_dims, np.flip, np.fliplr,
    np.flipud, np.roll, np.rot90, np.diag, np.diagonal, np.tril, np.triu, np.atleast_1d,
    np.atleast_2d, np.atleast_3d, np.broadcast_to, np.take, np.take_along_axis, np.sort,
    np.copy, np.moveaxis, np.swapaxes, np.repeat, np.tile, np.zeros_like, np.ones_like,
    np.empty_like, np.max, np.min, np.amax, np.amin, np.nanmax, np.nanmin, np.partition,
    np.split, np.array_split, np.hsplit, np.vsplit, np.real, np.unique, np.resize,
    np.delete, np.broadcast_arrays, np.meshgrid,
}

# Results are indices, booleans or shapes: plain.
_PLAIN = {
    np.shape, np.ndim, np.size, np.argmax, np.argmin, np.argsort, np.nonzero, np.flatnonzero,
    np.count_nonzero, np.isclose, np.allclose, np.array_equal, np.array_equiv, np.searchsorted,
    np.any, np.all, np.iscomplexobj, np.isrealobj, np.result_type, np.argwhere, np.nanargmax,
    np.nanargmin,
}


# -- arrays -----------------------------------------------------------------------------------


def _operator(ufunc: np.ufunc, reflected: bool) -> Callable[[Any, Any], Any]:
    """An arithmetic operator of :class:`ChoppedOperators`: ``self._binary(ufunc, other, reflected)``."""
    def binary_operator(self: "ChoppedOperators", other: Any) -> Any:
        return self._binary(ufunc, other, reflected)

    return binary_operator


def _inplace_operator(ufunc: np.ufunc) -> Callable[[Any, Any], Any]:
    """An in-place operator of :class:`ChoppedArray`: the operation, its values written into ``self``."""
    def inplace_operator(self: "ChoppedArray", other: Any) -> Any:
        return self._inplace(self._binary(ufunc, other))

    return inplace_operator


def _comparison(ufunc: np.ufunc) -> Callable[[Any, Any], Any]:
    """A comparison of :class:`ChoppedOperators`: ``self._compare(ufunc, other)``, plain booleans."""
    def comparison(self: "ChoppedOperators", other: Any) -> Any:
        return self._compare(ufunc, other)

    return comparison


def _stored_array_method(name: str, values: bool) -> Callable[..., Any]:
    """A :class:`ChoppedArray` method calling the stored array's method ``name``: a chopped array of
    its result when that holds the values (``values``: ``reshape``, ...), else its plain result
    (indices, booleans)."""
    def method(self: "ChoppedArray", *args: Any, **kwargs: Any) -> Any:
        result = getattr(self._data, name)(*args, **kwargs)
        return wrap(result, self._arith) if values else result

    method.__name__ = method.__qualname__ = name
    return method


@ChoppedValue.register
class ChoppedOperators:
    """What the chopped array types share (:class:`ChoppedArray`, :class:`~.jax_array.ChoppedJax`).

    Each arithmetic operator is one call of the type's ``_binary`` (the
    operation in the type's library, rounded), each comparison one call of its
    ``_compare`` (plain booleans), with NumPy's ufunc naming the operation;
    negation and ``abs`` come back through the type's ``_holding``.
    """

    __slots__ = ()
    _data: Any  # (slots of each type)
    _arith: Arithmetic

    def __len__(self) -> int:
        return len(self._data)

    def __iter__(self) -> Iterator[Any]:
        # (Python's fallback iteration indexes until IndexError, which a JAX array never raises:
        # its indexing clamps out-of-bounds indices, so iterating a chopped JAX array never ended.)
        for i in range(len(self._data)):
            yield cast(Any, self)[i]  # (each type's __getitem__)

    def __repr__(self) -> str:
        return f"chopped({self._data!r}, {self._arith.describe()})"

    def __neg__(self) -> Any:
        return self._holding(-self._data)

    def __abs__(self) -> Any:
        return self._holding(abs(self._data))

    def _holding(self, data: Any) -> Any:
        """A chopped array of this type and arithmetic holding ``data`` as it is (not rounded again)."""
        raise NotImplementedError

    def _binary(self, ufunc: np.ufunc, other: Any, reflected: bool = False) -> Any:
        raise NotImplementedError

    def _compare(self, ufunc: np.ufunc, other: Any) -> Any:
        raise NotImplementedError

    (__add__, __radd__, __sub__, __rsub__, __mul__, __rmul__, __truediv__, __rtruediv__, __pow__, __rpow__,
     __floordiv__, __rfloordiv__, __mod__, __rmod__) = _arithmetic_operators(_operator)
    __lt__, __le__, __gt__, __ge__, __eq__, __ne__ = (
        _comparison(u) for u in (np.less, np.less_equal, np.greater, np.greater_equal, np.equal, np.not_equal))
    __hash__ = None  # type: ignore[assignment]  # (elementwise ==, like ndarray: unhashable)

    def __bool__(self) -> bool:
        return bool(self._data)


class ChoppedArray(ChoppedOperators):
    """An array whose every arithmetic operation is rounded to a format.

    Create with :func:`chopped`.  Elementwise operations (``+ - * / **``,
    unary minus, ``abs``, every float ufunc) compute in double (single for
    float32 data) and round the result once with chop's semantics;
    reductions and products round after every addition and multiplication
    (see :doc:`/arithmetic`).  Comparisons and integer or boolean results are
    plain NumPy arrays.  ``np.asarray(c)`` and :attr:`values` give the plain
    values.

    Attributes
    ----------
    arithmetic : Arithmetic
        The format, rounding and operand rules.
    """

    __slots__ = ("_data", "_arith")
    _data: Any  # a NumPy array, or a device array of another library (see .libraries)
    __array_priority__ = 100

    # -- basics -------------------------------------------------------------------------

    def _holding(self, data: Any) -> "ChoppedArray":
        return wrap(data, self._arith)

    @property
    def arithmetic(self) -> Arithmetic:
        """The simulated machine: format, rounding, operand rules, reduction order."""
        return self._arith

    @property
    def values(self) -> np.ndarray:
        """A plain copy of the values (leaves the simulation; a CuPy array on its device for CuPy data)."""
        return self._data.copy()

    def to_numpy(self) -> np.ndarray:
        """A plain NumPy copy of the values (on the host)."""
        if is_device_array(self._data):
            return to_host(self._data)
        return self._data.copy()

    def __array__(self, dtype=None, copy=None):
        if is_device_array(self._data):
            raise TypeError("a chopped CuPy array is not converted to NumPy implicitly; use .to_numpy() "
                            "(or .values for the CuPy array).")
        if copy is False:
            raise ValueError("a chopped array cannot be viewed as a plain ndarray without a copy")
        return self._data.astype(dtype) if dtype is not None else self._data.copy()

    shape = property(lambda self: self._data.shape, doc="The shape.")
    ndim = property(lambda self: self._data.ndim, doc="Number of dimensions.")
    size = property(lambda self: self._data.size, doc="Number of elements.")
    dtype = property(lambda self: self._data.dtype, doc="dtype of the stored values (float64 or float32).")
    T = property(lambda self: wrap(self._data.T, self._arith), doc="The transpose.")

    def __repr__(self) -> str:
        if is_device_array(self._data):
            return super().__repr__()
        body = np.array2string(self._data, separator=", ", prefix="chopped(")
        return f"chopped({body}, {self._arith.describe()})"

    def __float__(self) -> float:
        return float(self._data)

    def __int__(self) -> int:
        return int(self._data)

    def __index__(self) -> int:
        raise TypeError("a chopped array cannot be used as an index")

    def item(self, *args: Union[int, Tuple[int, ...]]) -> float:
        """One element as a plain Python float."""
        return self._data.item(*args)

    def tolist(self) -> Union[float, List[Any]]:
        """The values as (nested) lists of plain Python floats."""
        return self._data.tolist()

    def using(self, **settings: Any) -> "ChoppedArray":
        """The same values with other ``strict``, ``mismatch``, ``method`` or ``block_size``.

        Examples
        --------
        >>> import numpy as np
        >>> x = chopped(np.ones(4096), 'h')
        >>> float(x.sum()), float(x.using(method='pairwise').sum())
        (2048.0, 4096.0)
        """
        return wrap(self._data, self._arith.with_settings(**settings))

    def astype(self, dtype: DTypeLike, copy: bool = True) -> Union["ChoppedArray", np.ndarray]:
        """float32/float64: a chopped array stored in that dtype; other dtypes: a plain array."""
        dtype = np.dtype(dtype)
        if dtype == np.float64 or dtype == np.float32:
            return wrap(self._arith.store(self._data.astype(dtype)), self._arith)
        return self._data.astype(dtype)

    def copy(self) -> "ChoppedArray":
        return wrap(self._data.copy(), self._arith)

    # -- indexing ---------------------------------------------------------------------------

    def __getitem__(self, key):
        value = self._data[plain_values(key)]
        if _is_array(value):
            return wrap(value, self._arith)
        if type(value) is np.float64:
            return ChoppedScalar._make(float(value), self._arith)
        return wrap(np.asarray(value), self._arith)

    def __setitem__(self, key, value) -> None:
        if isinstance(value, (ChoppedArray, ChoppedScalar)):
            self._arith.combine(value._arith)
        self._data[plain_values(key)] = stored_values(value, self._arith)

    # -- operators (the arithmetic ones from ChoppedOperators) --------------------------------

    def _binary(self, ufunc, other, reflected: bool = False):
        arith = self._arith
        kind = type(other)
        if kind is ChoppedArray or kind is ChoppedScalar:
            if other._arith is not arith:
                arith = arith.combine(other._arith) if not reflected else other._arith.combine(arith)
            o = other._data if kind is ChoppedArray else other._v
        elif isinstance(other, (np.ndarray, numbers.Number, list, tuple)) or is_device_array(other):
            o = _operand(other, arith)
        else:
            return NotImplemented
        a, b = (o, self._data) if reflected else (self._data, o)
        # one compiled call for a small + - * / (None where that does not apply)
        rounded = arith.round_combined(ufunc, a, b) if type(o) is np.ndarray else None
        result = _new(ChoppedArray)  # (wrap, inlined: a small array's operator is a loop's body)
        result._data = arith.round(ufunc(a, b)) if rounded is None else rounded
        result._arith = arith
        return result

    def __divmod__(self, other):
        return np.divmod(self, other)  # (floor quotient and remainder, each rounded, as for ChoppedScalar)

    def __rdivmod__(self, other):
        return np.divmod(other, self)

    def __pos__(self):
        return wrap(self._data.copy(), self._arith)

    def __abs__(self):
        return wrap(np.abs(self._data), self._arith)  # (a held device array answers NumPy's ufuncs only)

    def __matmul__(self, o):
        return np.matmul(self, o)

    def __rmatmul__(self, o):
        return np.matmul(o, self)

    def _inplace(self, result):
        if result is NotImplemented:
            return result
        self._data[...] = stored_values(result, self._arith)  # (a wider result: rounded to this format)
        return self

    # (+= -= *= /= **= //= %=)
    __iadd__, __isub__, __imul__, __itruediv__, __ipow__, __ifloordiv__, __imod__ = (
        _inplace_operator(u) for u in _ARITHMETIC_UFUNCS)

    def __imatmul__(self, o):
        return self._inplace(np.matmul(self, o))

    def _compare(self, ufunc, other):
        return ufunc(self._data, plain_values(other))

    # -- methods that NumPy code calls on arrays ----------------------------------------------

    # (the functions np.sum, ... call: the chopped array is their first argument)
    sum = _sum
    prod = _prod
    cumsum = _cumsum
    cumprod = _cumprod
    mean = _mean
    var = _var
    std = _std
    dot = _dot

    def max(self, *args: Any, **kwargs: Any) -> Union["ChoppedArray", ChoppedScalar]:
        return np.max(self, *args, **kwargs)

    def min(self, *args: Any, **kwargs: Any) -> Union["ChoppedArray", ChoppedScalar]:
        return np.min(self, *args, **kwargs)

    argmax = _stored_array_method("argmax", values=False)
    argmin = _stored_array_method("argmin", values=False)
    any = _stored_array_method("any", values=False)
    all = _stored_array_method("all", values=False)
    reshape = _stored_array_method("reshape", values=True)
    transpose = _stored_array_method("transpose", values=True)
    ravel = _stored_array_method("ravel", values=True)
    flatten = _stored_array_method("flatten", values=True)
    squeeze = _stored_array_method("squeeze", values=True)

    def fill(self, value: "ChoppedOperand") -> None:
        self[...] = value

    # -- NumPy protocols --------------------------------------------------------------------------

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        if (not kwargs and method == "__call__" and len(inputs) == 1 and ufunc.nout == 1
                and ufunc not in _EXACT and type(self._data) is np.ndarray and self._data.ndim):
            # np.sqrt(c), np.exp(c), ...: the general path's steps for one chopped operand (not 0-d:
            # a ufunc gives a NumPy scalar there), in a row
            data = ufunc(self._data)
            if data.dtype.kind == "f":
                result = _new(ChoppedArray)
                result._data = self._arith.round(data)
                result._arith = self._arith
                return result
            return data
        return _apply_ufunc(ufunc, method, inputs, kwargs)

    def __array_function__(self, func, types, args, kwargs):
        namespace = device_namespace(self._data)
        if namespace is not None and func not in _ON_DEVICE:
            raise NotChoppedError(f"{func.__module__}.{func.__name__} is not implemented for chopped "
                                  f"{namespace.name} arrays (elementwise operations, sums, products, dot "
                                  "and 2-D matmul are).")
        handler = _FUNCTIONS.get(func)
        if handler is not None:
            return handler(*args, **kwargs)
        if func in _MOVES:
            arith = cast(Arithmetic, arithmetic_of(_flatten_args(args, kwargs)))
            if func in _SPREADS:  # plain float data among the arguments come back chopped: round them
                args = tuple(_entered(a, arith) for a in args)
            if kwargs.get("initial") is not None:  # (np.max's initial= can be the result)
                kwargs = dict(kwargs, initial=_entered(kwargs["initial"], arith))
            return _rewrap(func(*plain_values(args), **plain_values(kwargs)), arith)
        if func in _PLAIN:
            return func(*plain_values(args), **plain_values(kwargs))
        name = f"{func.__module__}.{func.__name__}"
        raise NotChoppedError(
            f"{name} is not implemented for chopped arrays with per-operation rounding; it "
            "would compute in double.  Use np.asarray(x) to leave the simulation explicitly "
            "(and chopped(result, ...) to round the result once), or see "
            "pychop_compat.linalg for chopped linear algebra.")


#: An operand of chopped arithmetic: a chopped array or scalar, or plain values.
ChoppedOperand = Union[ChoppedArray, ChoppedScalar, ArrayLike]


def _flatten_args(args, kwargs):
    for v in list(args) + list(kwargs.values()):
        if isinstance(v, (list, tuple)):
            yield from _flatten_args(v, {})
        else:
            yield v
