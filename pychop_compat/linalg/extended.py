"""Precisions beyond double for iterative refinement: double-double arithmetic (:class:`DoubleDouble`,
on any array library) and IEEE binary128 (:class:`Binary128`, mpmath, on the host), with one
interface that :func:`ext_matvec` and :func:`ext_lu_solve` are written against; :func:`residual_dd`
is the Dot2 residual of the backward errors."""

from __future__ import annotations

import functools
import math
from typing import Any, Union

import numpy as np

from .arrays import HOST, Arrays, Window

__all__ = ["two_sum", "quick_two_sum", "two_prod", "DoubleDouble", "Binary128", "binary128_op", "arithmetic",
           "ext_matvec", "ext_lu_solve", "residual_dd"]

_SPLITTER = 134217729.0  # 2**27 + 1 (Dekker's splitting of a double)
_SPLIT_LIMIT = 2.0**996  # _SPLITTER * a overflows from about 2**997 on
_PRODUCT_LIMIT = 2.0**1023  # ah * bh may round past the largest double
_SPLIT_DOWN, _SPLIT_UP = 2.0**-28, 2.0**28


def two_sum(a: Any, b: Any) -> tuple:
    """Knuth's TwoSum: ``(s, e)`` with ``s = fl(a + b)`` and ``s + e = a + b`` exactly."""
    s = a + b
    bb = s - a
    return s, (a - (s - bb)) + (b - bb)


def quick_two_sum(a: Any, b: Any) -> tuple:
    """Dekker's FastTwoSum: ``(s, e)`` with ``s + e = a + b`` exactly when ``|a| >= |b|``."""
    s = a + b
    return s, b - (s - a)


def two_prod(a: Any, b: Any, arrays: Arrays = HOST) -> tuple:
    """Dekker's TwoProduct: ``(p, e)`` with ``p = fl(a*b)`` and ``p + e = a*b`` exactly for doubles
    (no fma), unless ``p`` overflows or the partial products underflow; ``arrays``: the library of
    ``a`` and ``b``.

    The splitting ``(2**27 + 1) a`` overflows from ``|a| = 2**996`` on, and ``ah bh`` may when
    ``|p| >= 2**1023``: there ``e`` is computed for ``2**-28 a`` (or ``2**-28 b``) and scaled back,
    exact; elsewhere every operation is Dekker's, bit for bit (before, ``e`` was NaN or Inf there)."""
    p = a * b
    # a scaled operand keeps at least 2**968 (or p at least 2**995): the scaled error stays normal
    big_b = abs(b) >= _SPLIT_LIMIT
    big_a = (abs(a) >= _SPLIT_LIMIT) | ((abs(p) >= _PRODUCT_LIMIT) & ~big_b)
    a = arrays.where(big_a, a * _SPLIT_DOWN, a)
    b = arrays.where(big_b, b * _SPLIT_DOWN, b)
    ps = a * b
    ca, cb = _SPLITTER * a, _SPLITTER * b
    ah = ca - (ca - a)
    bh = cb - (cb - b)
    al, bl = a - ah, b - bh
    e = al * bl - (((ps - ah * bh) - al * bh) - ah * bl)
    e = arrays.where(big_a, e * _SPLIT_UP, e)
    return p, arrays.where(big_b, e * _SPLIT_UP, e)


class DoubleDouble:
    """Double-double vectors ``(hi, lo)`` of one array library (default NumPy): about 106 bits
    (Dekker; Hida, Li & Bailey's QD), over double's whole range (:func:`two_prod` scales large
    operands)."""

    def __init__(self, arrays: Arrays = HOST) -> None:
        self.arrays = arrays

    def from_double(self, x: Any) -> Any:
        x = self.arrays.float_copy(x, False)
        return (x, self.arrays.zeros(x.shape, x.dtype))

    def to_double(self, a: Any) -> Any:
        return a[0] + a[1]

    def add(self, a: Any, b: Any) -> Any:
        s, e = two_sum(a[0], b[0])
        t, f = two_sum(a[1], b[1])
        s, e = quick_two_sum(s, e + t)
        return quick_two_sum(s, e + f)

    def sub(self, a: Any, b: Any) -> Any:
        return self.add(a, (-b[0], -b[1]))

    def mul_double(self, a: Any, c: Any) -> Any:
        p, e = two_prod(a[0], c, self.arrays)
        return quick_two_sum(p, e + a[1] * c)

    def div_double(self, a: Any, c: Any) -> Any:
        q1 = self.arrays.divide(a[0], c)
        p, pe = two_prod(q1, c, self.arrays)
        s, e = two_sum(a[0], -p)
        q2 = self.arrays.divide(s + (e + a[1] - pe), c)
        return quick_two_sum(q1, q2)

    def exact_products(self, A: Any, v: Any) -> Any:
        """``A * v[None, :]`` exactly, elementwise."""
        return quick_two_sum(*two_prod(A, v[None, :], self.arrays))

    def take(self, a: Any, index: Any) -> Any:
        return (a[0][index], a[1][index])

    def put(self, a: Any, index: Any, value: Any) -> Any:
        return (self.arrays.put(a[0], index, value[0]), self.arrays.put(a[1], index, value[1]))

    def where(self, mask: Any, a: Any, b: Any) -> Any:
        return (self.arrays.where(mask, a[0], b[0]), self.arrays.where(mask, a[1], b[1]))


_B128_T = 113  # significand bits, hidden bit included
_B128_EMIN = -16382  # exponent of the smallest normal number
_B128_EMAX = 16383


def binary128_op(func: Any, a: Any, b: Any) -> Any:
    """``func(a, b)`` (mpmath's fadd/fsub/fmul/fdiv) rounded to nearest-even binary128: 113 bits
    from ``2**-16382`` up, the subnormal grid ``2**-16494`` below, overflow from ``2**16384``."""
    import mpmath

    y = func(a, b, prec=_B128_T, rounding="n")
    if not mpmath.isfinite(y) or y == 0:
        return y
    e = int(mpmath.frexp(y)[1]) - 1  # y = 2**e * 1.f
    if e > _B128_EMAX:
        return mpmath.inf if y > 0 else -mpmath.inf
    if e >= _B128_EMIN:
        return y
    # Subnormal range: the exponent of the exact result, then one rounding on its grid.
    probe = func(a, b, prec=_B128_T + 64, rounding="d")  # truncation never rounds up a binade
    e = int(mpmath.frexp(probe)[1]) - 1
    bits = _B128_T - (_B128_EMIN - e)
    if bits >= 1:
        return func(a, b, prec=bits, rounding="n")
    smallest = mpmath.ldexp(1, _B128_EMIN - _B128_T + 1)
    if bits < 0:  # below half the smallest subnormal
        return mpmath.mpf(0)
    # The exact result lies in [smallest / 2, smallest): a tie only at smallest / 2 exactly.
    if func is mpmath.fdiv:
        tie = mpmath.fmul(abs(b), smallest / 2, exact=True) == abs(a)
    else:
        tie = abs(func(a, b, exact=True)) == smallest / 2
    if tie:
        return mpmath.mpf(0)  # ties to even: 0 has an even significand
    return smallest if probe > 0 else -smallest


def _mpf_to_double(value: tuple) -> float:
    """mpmath's ``(sign, man, exp, bc)`` (``man 2**exp``) rounded once to the nearest double.

    mpmath's ``to_float`` rounds to 53 bits, then ``ldexp`` again to the subnormal grid ``2**-1074``:
    a value just above a midpoint of that grid became the midpoint, then rounded to even.  Below
    ``2**-1022`` the integer ``man 2**(exp + 1074)`` is rounded instead, exactly."""
    from mpmath.libmp import to_float

    sign, man, exp, bc = value
    if not man or exp + bc - 1 >= -1022:  # zero, Inf, NaN or normal: one rounding to 53 bits
        return float(to_float(value, rnd="n"))
    shift = -1074 - exp
    q = man >> shift if shift > 0 else man << -shift
    if shift > 0:
        rest, half = man & ((1 << shift) - 1), 1 << (shift - 1)
        q += rest > half or (rest == half and q & 1)
    return math.copysign(math.ldexp(q, -1074), -1.0 if sign else 1.0)


class Binary128:
    """IEEE binary128 vectors (NumPy object arrays of mpmath numbers, on the host), each operation
    rounded exactly to nearest-even binary128 (113 bits, exponent range and subnormals); slow."""

    arrays = HOST

    def from_double(self, x: Any) -> Any:
        import mpmath

        x = np.asarray(x, dtype=np.float64)
        out = np.empty(x.shape, dtype=object)
        out.ravel()[:] = [mpmath.mpf(float(v)) for v in x.ravel()]
        return out

    def to_double(self, a: Any) -> Any:
        """The nearest doubles (ties to even), each rounded once, also in double's subnormal range."""
        flat = [_mpf_to_double(v._mpf_) for v in np.asarray(a).ravel()]
        return np.array(flat, dtype=np.float64).reshape(np.shape(a))

    def _binary(self, name: str, a: Any, b: Any) -> np.ndarray:
        import mpmath

        func = getattr(mpmath, name)
        return np.frompyfunc(lambda p, q: binary128_op(func, p, q), 2, 1)(a, b)

    add = functools.partialmethod(_binary, "fadd")
    sub = functools.partialmethod(_binary, "fsub")

    def mul_double(self, a: Any, c: Any) -> Any:
        return self._binary("fmul", a, self.from_double(c))

    def div_double(self, a: Any, c: Any) -> Any:
        return self._binary("fdiv", a, self.from_double(c))

    def exact_products(self, A: Any, v: Any) -> Any:
        """``A * v[None, :]``, each product rounded to binary128 (exact for doubles)."""
        return self.mul_double(self.from_double(A), np.broadcast_to(v, A.shape))

    def take(self, a: Any, index: Any) -> Any:
        return a[index]

    def put(self, a: Any, index: Any, value: Any) -> Any:
        a[index] = value
        return a

    def where(self, mask: Any, a: Any, b: Any) -> Any:
        return np.where(mask, a, b)


#: An extended arithmetic; its vectors are ``(hi, lo)`` pairs (double-double) or object arrays.
Arithmetic = Union[DoubleDouble, Binary128]


def arithmetic(kind: str, arrays: Arrays = HOST) -> Arithmetic:
    """The arithmetic ``kind`` (``'dd'`` or ``'binary128'``, see
    :func:`~pychop_compat.linalg.common.extended_kind`) on ``arrays``'s library."""
    return DoubleDouble(arrays) if kind == "dd" else Binary128()


def ext_matvec(arith: Arithmetic, A: Any, v: Any) -> Any:
    """``A v`` in the extended arithmetic for double ``A`` and ``v``: the exact products, then
    the columns added in order ``k = 0, 1, ...``."""
    n, m = A.shape
    products = arith.exact_products(A, v)
    s = arith.from_double(arith.arrays.zeros((n,), A.dtype))
    for k in range(m):
        s = arith.add(s, arith.take(products, (slice(None), k)))
    return s


def ext_lu_solve(arith: Arithmetic, F: Any, c: Any) -> Any:
    """Solve ``A z = c`` with the factors ``F`` (``P (mu R A S) = L U``) in the extended
    arithmetic, ``c`` an extended vector: the column-oriented substitution of
    :func:`~pychop_compat.linalg.solve`, nothing rounded (on JAX with fixed shapes)."""
    n = F.perm.shape[0]
    L, U = F.L, F.U
    sc = F.scaling
    if sc is not None:
        c = arith.mul_double(arith.mul_double(c, sc.row), np.full(n, sc.mu))
    c = arith.take(c, F.perm)
    rows = Window(arith.arrays, n, arith.arrays.fixed_shapes)
    for j in range(n - 1):
        below = rows.tail(j + 1)
        c = rows.set_tail(c, j + 1, arith.sub(arith.take(c, below),
                                              arith.mul_double(arith.take(c, slice(j, j + 1)), L[below, j])), arith)
    for j in range(n - 1, -1, -1):
        c = rows.set_row(c, j, arith.div_double(arith.take(c, slice(j, j + 1)), U[j:j + 1, j]), arith)
        if j:
            above = rows.head(j)
            c = rows.set_head(c, j, arith.sub(arith.take(c, above),
                                              arith.mul_double(arith.take(c, slice(j, j + 1)), U[above, j])), arith)
    if sc is not None:
        c = arith.mul_double(c, sc.col)
    return c


def _split_shift(arrays: Arrays, v: Any) -> int:
    """``k`` such that ``max |v| / 2**k < 2**996`` (Dekker's splitting does not overflow), 0 when
    it holds already or ``max |v|`` is not finite."""
    largest = arrays.max_abs(v)
    return max(math.frexp(largest)[1] - 996, 0) if math.isfinite(largest) else 0


def residual_dd(arrays: Arrays, A: Any, x: Any, b: Any) -> Any:
    """``b - A x`` in double-double (Ogita-Rump-Oishi Dot2), rounded to double: as accurate as
    106 bits and one rounding; the products at once, the columns added in order ``k = 0, 1, ...``.

    Where an entry of ``A`` or ``x`` reaches ``2**996``, ``A``, ``x`` and ``b`` are scaled by powers
    of two first (``2**-k A``, ``2**-m x``, ``2**-(k+m) b``; the products and sums of such entries
    stay further from overflow) and the residual scaled back, the same bits as unscaled arithmetic
    without overflow except where a scaled entry falls below double's normal range (below
    ``2**-1022`` after division by at most ``2**56``)."""
    ka, kx = _split_shift(arrays, A), _split_shift(arrays, x)
    if ka or kx:
        r = residual_dd(arrays, A * 2.0**-ka, x * 2.0**-kx, b * 2.0**-(ka + kx))
        return r * 2.0**(ka + kx)
    s = b
    c = arrays.zeros(b.shape, b.dtype)
    P, E = two_prod(-A, x[None, :], arrays)
    for k in range(A.shape[1]):
        s, e2 = two_sum(s, P[:, k])
        c = c + (E[:, k] + e2)
    return s + c
