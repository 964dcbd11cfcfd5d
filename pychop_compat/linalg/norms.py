"""MATLAB's ``norm(A, p)`` and ``cond(A, p)`` for ``p = 1, 2, inf, 'fro'``.

``precision``: ``None`` or ``'d'`` (default), double as MATLAB computes it
(NumPy/LAPACK); ``'exact'``, the exact value correctly rounded to double (sums
in rational arithmetic, square roots, the 2-norm and ``cond``'s inverse in
200-bit mpmath; slow beyond ``n`` of about 100); chop options or a format
name, simulated: ``A`` stored in the format, every sum rounded (recursive, by
:func:`~pychop_compat.linalg.matvec` / :func:`~pychop_compat.linalg.dot`), the
square root rounded, the 2-norm the stored ``A``'s largest singular value in
double, rounded; ``cond`` inverts with chopped LU.
"""

from __future__ import annotations

import math
import warnings
from fractions import Fraction
from typing import Union

import numpy as np
from numpy.typing import ArrayLike

from .arrays import HOST, arrays_for, ieee
from .common import DOUBLE_NAMES, OptionsLike, Rounder, float_operands
from .errors import SingularMatrixWarning
from .lu import solve
from .products import dot, matvec

__all__ = ["norm", "cond"]

NormOrder = Union[int, float, str]
_EXACT_PREC = 200


def _order(p: NormOrder):
    if isinstance(p, str):
        if p in ("fro", "inf", "Inf"):
            return "fro" if p == "fro" else np.inf
    elif p in (1, 2) or p == np.inf:
        return np.inf if p == np.inf else int(p)
    raise ValueError(f"p must be 1, 2, inf or 'fro', got {p!r}")


def _nonfinite_norm(a: np.ndarray) -> float:
    """The norm of a matrix with an Inf or NaN entry: NaN if one is NaN, else Inf (MATLAB's ``norm``;
    LAPACK's SVD fails on NaN and gives NaN for Inf, so the 2-norm cannot be left to it)."""
    return float(np.nan) if np.any(np.isnan(a)) else float(np.inf)


def _exact_norm(a: np.ndarray, p) -> float:
    if a.size == 0:
        return 0.0
    if not np.all(np.isfinite(a)):
        return _nonfinite_norm(a)
    if p in (1, np.inf):  # the largest column (1) or row (inf) sum
        return float(max(sum((abs(Fraction(v)) for v in line), Fraction(0)) for line in (a.T if p == 1 else a)))
    import mpmath

    with mpmath.workprec(_EXACT_PREC):
        if p == "fro":
            q = sum((Fraction(v) ** 2 for v in a.ravel()), Fraction(0))
            return float(mpmath.sqrt(mpmath.mpf(q.numerator) / q.denominator))
        return float(max(mpmath.svd_r(mpmath.matrix(a.tolist()), compute_uv=False)))


def _chopped_norm(a: np.ndarray, p, options: OptionsLike) -> float:
    r = Rounder(options, HOST)
    stored = r(a)
    if stored.size == 0:
        return 0.0
    if p in (1, np.inf):  # the largest column (1) or row (inf) sum
        lines = np.abs(stored).T if p == 1 else np.abs(stored)
        return float(np.max(matvec(lines, np.ones(lines.shape[1], stored.dtype), options)))
    if p == "fro":
        v = stored.ravel(order="F")
        return float(r(np.sqrt(np.asarray(dot(v, v, options)))))
    if not np.all(np.isfinite(stored)):
        return _nonfinite_norm(stored)
    return float(r(np.asarray(np.linalg.norm(stored.astype(np.float64), 2))))


def _on_host(A: ArrayLike) -> ArrayLike:
    """A torch, CuPy or JAX array's values on the host (a tensor that requires grad detached: the
    result is a float, outside any autograd graph, as the other linalg results); others as they are."""
    arrays = arrays_for(A)
    return A if arrays is HOST else arrays.to_host(A)


@ieee
def norm(A: ArrayLike, p: NormOrder = 2, precision: OptionsLike = None) -> float:
    """MATLAB's ``norm(A, p)`` for ``p = 1, 2, inf, 'fro'``.

    Source: MATLAB's documentation of ``norm``; checked on hand-computed and exactly
    computed values, not against MATLAB's or Octave's outputs.

    Parameters
    ----------
    A : array_like
        A matrix (a vector is treated as a column).
    p : {1, 2, inf, 'fro'}, optional
        The norm (default 2, as MATLAB).
    precision : None, 'd', 'exact' or chop options, optional
        How it is computed (see the module notes); default double.

    Returns
    -------
    float
        NaN when ``A`` (chopped: the stored ``A``) has a NaN entry, else Inf when it has an
        Inf entry, for every ``p``, as MATLAB's ``norm``.

    Examples
    --------
    >>> import numpy as np
    >>> from pychop_compat import linalg
    >>> A = np.array([[1.0, -2.0], [3.0, 4.0]])
    >>> linalg.norm(A, 1), linalg.norm(A, np.inf), linalg.norm(A, 'fro', 'exact')
    (6.0, 7.0, 5.477225575051661)
    """
    order = _order(p)
    (a,) = float_operands(HOST, _on_host(A))
    if a.ndim == 1:
        a = a[:, None]  # a vector: MATLAB's vector norms agree with these on a column
    if a.ndim != 2:
        raise ValueError("norm needs a vector or a matrix")
    if precision is None or precision in DOUBLE_NAMES:
        if a.size == 0:
            return 0.0
        if order == 2 and not np.all(np.isfinite(a)):
            return _nonfinite_norm(a)
        return float(np.linalg.norm(a.astype(np.float64), order))
    if isinstance(precision, str) and precision == "exact":
        return _exact_norm(a.astype(np.float64), order)
    return _chopped_norm(a, order, precision)


def _exactly_singular(a: np.ndarray) -> bool:
    """Whether the square matrix ``a`` of finite doubles is singular, decided exactly on the integer
    matrix ``2^k a``: nonsingular if it is modulo the prime ``2^31 - 1`` (NumPy, fast), else by
    fraction-free (Bareiss) elimination with row exchanges."""
    entries = [[Fraction(v) for v in row] for row in a.tolist()]
    scale = max(v.denominator for row in entries for v in row)  # powers of two: the largest is their lcm
    m = [[int(v * scale) for v in row] for row in entries]
    n, prime = len(m), 2**31 - 1
    r = np.array([[v % prime for v in row] for row in m], dtype=np.int64)
    for k in range(n):  # products of residues < 2^31 fit in int64
        rows = np.flatnonzero(r[k:, k])
        if rows.size == 0:
            break
        r[[k, k + rows[0]]] = r[[k + rows[0], k]]
        r[k] = r[k] * pow(int(r[k, k]), -1, prime) % prime
        r[k + 1:] = (r[k + 1:] - np.outer(r[k + 1:, k], r[k]) % prime) % prime
    else:
        return False  # det(2^k a) is nonzero modulo the prime, hence nonzero
    previous = 1
    for k in range(n):
        pivot = next((i for i in range(k, n) if m[i][k]), None)
        if pivot is None:
            return True
        m[k], m[pivot] = m[pivot], m[k]
        for i in range(k + 1, n):
            for j in range(k + 1, n):  # exact: Bareiss's division leaves no remainder
                m[i][j] = (m[i][j] * m[k][k] - m[i][k] * m[k][j]) // previous
        previous = m[k][k]
    return False


@ieee
def cond(A: ArrayLike, p: NormOrder = 2, precision: OptionsLike = None) -> float:
    """MATLAB's ``cond(A, p)``: ``norm(A, p) * norm(inv(A), p)``; for ``p = 2`` the ratio
    of the largest to the smallest singular value.

    Source: MATLAB's documentation of ``cond``; checked as :func:`norm` is.

    Parameters
    ----------
    A : array_like
        Square matrix.
    p : {1, 2, inf, 'fro'}, optional
        The norm (default 2).
    precision : None, 'd', 'exact' or chop options, optional
        As for :func:`norm`; with ``'exact'`` only the last step (the product of
        two rounded norms) is rounded again; chopped: the product rounded.

    Returns
    -------
    float
        ``inf`` for a singular matrix.

    Examples
    --------
    >>> import numpy as np
    >>> from pychop_compat import linalg
    >>> linalg.cond(np.array([[2.0, 0.0], [0.0, 0.5]]), 1)
    4.0
    """
    order = _order(p)
    (a,) = float_operands(HOST, _on_host(A))
    if a.ndim != 2 or a.shape[0] != a.shape[1]:
        raise ValueError("cond needs a square matrix")
    if a.size == 0:
        return 0.0
    if precision is None or precision in DOUBLE_NAMES:
        return float(np.linalg.cond(a.astype(np.float64), order))
    if isinstance(precision, str) and precision == "exact":
        import mpmath

        a64 = a.astype(np.float64)
        if np.all(np.isfinite(a64)) and _exactly_singular(a64):
            return math.inf  # 200 bits may leave a rounding-sized sigma_min or pivot where the exact one is 0
        with mpmath.workprec(_EXACT_PREC):
            if order == 2:
                s = mpmath.svd_r(mpmath.matrix(a64.tolist()), compute_uv=False)
                return float(max(s) / min(s)) if min(s) != 0 else math.inf
            try:
                inv = np.array(mpmath.inverse(mpmath.matrix(a64.tolist())).tolist(), dtype=np.float64)
            except ZeroDivisionError:
                return math.inf
        return _exact_norm(a64, order) * _exact_norm(inv, order)
    r = Rounder(precision, HOST)
    stored = r(a)
    if order == 2:
        s = np.linalg.svd(stored.astype(np.float64), compute_uv=False)
        return float(r(np.asarray(s[0] / s[-1]))) if s[-1] else math.inf
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SingularMatrixWarning)
        inv = solve(stored, np.eye(a.shape[0], dtype=stored.dtype), precision)
    if not np.all(np.isfinite(inv)):
        return math.inf
    return float(r(np.asarray(_chopped_norm(stored, order, precision) * _chopped_norm(inv, order, precision))))
