"""Accurate residuals beyond double: double-double arithmetic."""

from __future__ import annotations

import math

import numpy as np

from ._common import _EXTENDED_NAMES, _is_extended, _make_rounder, _two_prod
from .kernels import matvec



def _two_sum(a, b):
    s = a + b
    bb = s - a
    return s, (a - (s - bb)) + (b - bb)


def _residual_dd(A: np.ndarray, x: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``b - A x`` in double-double (Ogita-Rump-Oishi Dot2), rounded to double.

    As accurate as evaluating in precision ``u**2`` (106 bits) and rounding
    to double; no overflow in the splitting is assumed (``|a| < 2**996``).
    """
    s = b.astype(np.float64, copy=True)
    c = np.zeros_like(s)
    for k in range(A.shape[1]):
        p, e = _two_prod(-A[:, k], x[k])
        s, e2 = _two_sum(s, p)
        c += e + e2
    return s + c


def _residual(A, x, b, ur) -> np.ndarray:
    if extended_kind(ur) == "binary128":
        arith = Binary128
        return arith.to_double(arith.sub(arith.from_double(b), ext_matvec(arith, A, x)))
    if _is_extended(ur):
        return _residual_dd(A, x, b)
    rr = _make_rounder(ur)
    return rr(rr(b) - matvec(A, x, ur))


def _norm_inf(v) -> float:
    return float(np.max(np.abs(v))) if np.size(v) else 0.0


def _pow2_scale(v) -> float:
    """The power of two at or below ``||v||_inf`` (exact scaling factor)."""
    nrm = _norm_inf(v)
    if nrm == 0 or not np.isfinite(nrm):
        return 1.0
    return math.ldexp(1.0, math.frexp(nrm)[1] - 1)


# ---------------------------------------------------------------------------
# Precisions beyond double for the preconditioned operator of GMRES-IR:
# double-double (``'q'``, ``'quad'``, ``'fp128'``, ``'dd'``) and IEEE binary128
# (``'binary128'``).  Each is a small arithmetic on vectors: exact conversion
# from double, ``+``, ``-``, ``* double``, ``/ double``, rounding to double.
# ---------------------------------------------------------------------------

DOUBLE_DOUBLE_NAMES = _EXTENDED_NAMES  # 'q', 'quad', 'quadruple', 'fp128', 'dd', 'double-double'
BINARY128_NAMES = ("binary128",)


def extended_kind(options) -> "str | None":
    """``'dd'`` for a double-double name, ``'binary128'`` for IEEE quadruple, else None."""
    if isinstance(options, str):
        if options in DOUBLE_DOUBLE_NAMES:
            return "dd"
        if options in BINARY128_NAMES:
            return "binary128"
    return None


def _quick_two_sum(a, b):
    s = a + b
    return s, b - (s - a)


class DoubleDouble:
    """Double-double vectors ``(hi, lo)``: about 106 bits (Dekker; Hida, Li & Bailey's QD)."""

    unit_roundoff = 2.0**-104  # a bound for the operations below (QD's accurate add)

    @staticmethod
    def from_double(x):
        x = np.asarray(x, dtype=np.float64)
        return (x.copy(), np.zeros_like(x))

    @staticmethod
    def add(a, b):
        s, e = _two_sum(a[0], b[0])
        t, f = _two_sum(a[1], b[1])
        s, e = _quick_two_sum(s, e + t)
        return _quick_two_sum(s, e + f)

    @staticmethod
    def neg(a):
        return (-a[0], -a[1])

    @classmethod
    def sub(cls, a, b):
        return cls.add(a, cls.neg(b))

    @staticmethod
    def mul_double(a, c):
        p, e = _two_prod(a[0], c)
        return _quick_two_sum(p, e + a[1] * c)

    @staticmethod
    def div_double(a, c):
        q1 = a[0] / c
        p, pe = _two_prod(q1, c)
        s, e = _two_sum(a[0], -p)
        q2 = (s + (e + a[1] - pe)) / c
        return _quick_two_sum(q1, q2)

    @staticmethod
    def take(a, index):
        return (a[0][index], a[1][index])

    @staticmethod
    def put(a, index, value):
        a[0][index], a[1][index] = value

    @staticmethod
    def to_double(a):
        return a[0] + a[1]


_B128_T = 113  # significand bits, hidden bit included
_B128_EMIN = -16382  # exponent of the smallest normal number
_B128_EMAX = 16383


def _binary128_op(func, a, b):
    """``func(a, b)`` (mpmath's fadd/fsub/fmul/fdiv) rounded to nearest-even binary128.

    Correct rounding with binary128's exponent range: results with a
    magnitude from ``2**-16382`` up are rounded to 113 bits; smaller ones to
    the subnormal grid ``2**-16494``; rounded results from ``2**16384`` up
    overflow to infinity.
    """
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


def _mp():
    import mpmath

    return mpmath


class Binary128:
    """IEEE binary128 vectors (NumPy object arrays of mpmath numbers), each operation
    rounded exactly to nearest-even binary128 (113 bits, exponent range and subnormals).

    Slow (Python-level arithmetic per element); the operations are vectorised
    over NumPy object arrays.
    """

    unit_roundoff = 2.0**-113

    @staticmethod
    def from_double(x):
        mp = _mp()
        x = np.asarray(x, dtype=np.float64)
        out = np.empty(x.shape, dtype=object)
        out.ravel()[:] = [mp.mpf(float(v)) for v in x.ravel()]
        return out

    @staticmethod
    def _binary(func, a, b):
        f = np.frompyfunc(lambda p, q: _binary128_op(func, p, q), 2, 1)
        return f(a, b)

    @classmethod
    def add(cls, a, b):
        return cls._binary(_mp().fadd, a, b)

    @classmethod
    def sub(cls, a, b):
        return cls._binary(_mp().fsub, a, b)

    @classmethod
    def mul_double(cls, a, c):
        return cls._binary(_mp().fmul, a, cls.from_double(c))

    @classmethod
    def div_double(cls, a, c):
        return cls._binary(_mp().fdiv, a, cls.from_double(c))

    @staticmethod
    def take(a, index):
        return a[index]

    @staticmethod
    def put(a, index, value):
        a[index] = value

    @staticmethod
    def to_double(a):
        from mpmath.libmp import to_float

        flat = [to_float(v._mpf_, rnd="n") for v in np.asarray(a).ravel()]
        return np.array(flat, dtype=np.float64).reshape(np.shape(a))


ARITHMETICS = {"dd": DoubleDouble, "binary128": Binary128}


def ext_matvec(arith, A: np.ndarray, v: np.ndarray):
    """``A v`` in the extended arithmetic, for double ``A`` and ``v`` (column by column)."""
    n, m = A.shape
    s = arith.from_double(np.zeros(n))
    for k in range(m):
        s = arith.add(s, arith.mul_double(arith.from_double(A[:, k]), np.full(n, v[k])))
    return s


def ext_lu_solve(arith, F, c):
    """Solve ``A z = c`` with the factors ``F`` (``P (mu R A S) = L U``) in the extended
    arithmetic, ``c`` an extended vector; column-oriented substitution as :func:`solve`."""
    n = F.perm.size
    L, U = np.asarray(F.L, np.float64), np.asarray(F.U, np.float64)
    sc = F.scaling
    if sc is not None:
        c = arith.mul_double(arith.mul_double(c, sc.row), np.full(n, sc.mu))
    c = arith.take(c, F.perm)
    for j in range(n - 1):
        cj = arith.take(c, np.full(n - j - 1, j))
        rest = arith.take(c, slice(j + 1, None))
        arith.put(c, slice(j + 1, None), arith.sub(rest, arith.mul_double(cj, L[j + 1 :, j])))
    for j in range(n - 1, -1, -1):
        cj = arith.div_double(arith.take(c, slice(j, j + 1)), U[j : j + 1, j])
        arith.put(c, slice(j, j + 1), cj)
        if j:
            cjv = arith.take(c, np.full(j, j))
            head = arith.take(c, slice(0, j))
            arith.put(c, slice(0, j), arith.sub(head, arith.mul_double(cjv, U[:j, j])))
    if sc is not None:
        c = arith.mul_double(c, sc.col)
    return c


# A fast path for double-double: the same operations, in the same order, as
# ext_matvec with DoubleDouble, with the products formed at once (tested equal
# bit for bit).


def dd_matvec(A: np.ndarray, v: np.ndarray):
    """``A v`` in double-double for double ``A``, ``v``: exact products, then the
    columns added in order ``k = 0, 1, ...`` with double-double additions."""
    n, m = A.shape
    P, E = _two_prod(A, np.broadcast_to(v, A.shape))
    h, lo = np.zeros(n), np.zeros(n)
    for k in range(m):
        h, lo = DoubleDouble.add((h, lo), _quick_two_sum(P[:, k], E[:, k]))
    return h, lo

