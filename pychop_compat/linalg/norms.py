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
from .common import DOUBLE_NAMES, OptionsLike, Rounder, float_operands, safe_two_norm
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


def _exact_fraction_norm(rows: list, p) -> float:
    """The norm ``p`` (1, inf or 'fro') of a matrix of Fractions (a list of rows), correctly rounded."""
    if p in (1, np.inf):  # the largest column (1) or row (inf) sum
        lines = list(zip(*rows)) if p == 1 else rows
        return float(max(sum((abs(v) for v in line), Fraction(0)) for line in lines))
    import mpmath

    q = sum((v * v for row in rows for v in row), Fraction(0))
    with mpmath.workprec(_EXACT_PREC):
        return float(mpmath.sqrt(mpmath.mpf(q.numerator) / q.denominator))


def _exact_norm(a: np.ndarray, p) -> float:
    if a.size == 0:
        return 0.0
    if not np.all(np.isfinite(a)):
        return _nonfinite_norm(a)
    if p in (1, np.inf, "fro"):
        return _exact_fraction_norm([[Fraction(v) for v in row] for row in a.tolist()], p)
    import mpmath

    with mpmath.workprec(_EXACT_PREC):
        return float(max(mpmath.svd_r(mpmath.matrix(a.tolist()), compute_uv=False)))


def _exact_inverse(a: np.ndarray) -> list:
    """The inverse of the nonsingular square matrix ``a`` of doubles, exactly (Gauss-Jordan elimination
    in Fractions), as a list of rows."""
    n = a.shape[0]
    m = [[Fraction(v) for v in row] + [Fraction(int(i == j)) for j in range(n)] for i, row in enumerate(a.tolist())]
    for k in range(n):
        pivot = next(i for i in range(k, n) if m[i][k])
        m[k], m[pivot] = m[pivot], m[k]
        m[k] = [v / m[k][k] for v in m[k]]
        for i in range(n):
            if i != k and m[i][k]:
                factor = m[i][k]
                m[i] = [v - factor * w for v, w in zip(m[i], m[k])]
    return [row[n:] for row in m]


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
        A matrix or a vector: a 1-D array, a ``1 x n`` row or an ``n x 1`` column
        gets the vector norm, as MATLAB's ``norm`` (``norm([1 2 3], 1)`` is 6,
        ``norm([1 2 3], Inf)`` is 3: the matrix norms of the row are 3 and 6).
    p : {1, 2, inf, 'fro'}, optional
        The norm (default 2, as MATLAB).
    precision : None, 'd', 'exact' or chop options, optional
        How it is computed (see the module notes); default double.

    Returns
    -------
    float
        NaN when ``A`` (chopped: the stored ``A``) has a NaN entry, else Inf when it has an
        Inf entry, for every ``p``, as MATLAB's ``norm``.  In double, ``'fro'`` is NumPy's
        ``sqrt(sum(a_ij^2))`` unless that overflows or underflows (Inf or 0 for a finite nonzero
        ``A``): then it is computed on ``A / s``, ``s`` a power of two, as MATLAB's does without
        overflow.

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
    if a.shape[0] == 1 and order in (1, np.inf):
        a = a.T  # a row is a vector to MATLAB's norm (2 and 'fro': the same on the row)
    if precision is None or precision in DOUBLE_NAMES:
        if a.size == 0:
            return 0.0
        if order == 2 and not np.all(np.isfinite(a)):
            return _nonfinite_norm(a)
        if order == "fro":
            return safe_two_norm(a.astype(np.float64))
        return float(np.linalg.norm(a.astype(np.float64), order))
    if isinstance(precision, str) and precision == "exact":
        return _exact_norm(a.astype(np.float64), order)
    return _chopped_norm(a, order, precision)


def _exactly_singular(a: np.ndarray) -> bool:
    """Whether the matrix ``a`` of finite doubles is rank deficient (singular, if square), decided
    exactly on the integer matrix ``2^k a`` (transposed if wide): of full column rank if it is modulo
    the prime ``2^31 - 1`` (NumPy, fast), else by fraction-free (Bareiss) elimination with row
    exchanges."""
    if a.shape[0] < a.shape[1]:
        a = a.T
    entries = [[Fraction(v) for v in row] for row in a.tolist()]
    scale = max(v.denominator for row in entries for v in row)  # powers of two: the largest is their lcm
    m = [[int(v * scale) for v in row] for row in entries]
    n, prime = a.shape[1], 2**31 - 1
    rows_m = a.shape[0]
    r = np.array([[v % prime for v in row] for row in m], dtype=np.int64)
    for k in range(n):  # products of residues < 2^31 fit in int64
        rows = np.flatnonzero(r[k:, k])
        if rows.size == 0:
            break
        r[[k, k + rows[0]]] = r[[k + rows[0], k]]
        r[k] = r[k] * pow(int(r[k, k]), -1, prime) % prime
        r[k + 1:] = (r[k + 1:] - np.outer(r[k + 1:, k], r[k]) % prime) % prime
    else:
        return False  # full column rank modulo the prime (a nonzero minor), hence full rank
    previous = 1
    for k in range(n):
        pivot = next((i for i in range(k, rows_m) if m[i][k]), None)
        if pivot is None:
            return True
        m[k], m[pivot] = m[pivot], m[k]
        for i in range(k + 1, rows_m):
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
        Square matrix; for ``p = 2`` any ``m x n`` matrix (the ratio of its largest to its
        smallest of ``min(m, n)`` singular values, as MATLAB's ``cond``).
    p : {1, 2, inf, 'fro'}, optional
        The norm (default 2).
    precision : None, 'd', 'exact' or chop options, optional
        As for :func:`norm`; with ``'exact'`` the two norms are the exact ones (``inv(A)``
        in rational arithmetic) correctly rounded, and their product rounded:
        ``fl(fl(||A||) fl(||A^-1||))``; chopped: the product rounded.  For ``p = 2`` the
        ratio is MATLAB's ``s(1)/s(end)`` in every mode, rounded once: ``'exact'`` rounds
        the ratio of the 200-bit singular values (``cond(diag([10, 3]), 2, 'exact')`` is
        ``fl(10/3)``, not ``fl(10 fl(1/3))``), chopped rounds the double ratio.

    Returns
    -------
    float
        ``inf`` for a singular (for ``p = 2``: rank-deficient) matrix.  For ``p = 1, inf,
        'fro'`` a matrix with a NaN entry (chopped: the stored ``A``) gives NaN, as MATLAB's
        ``norm(A, p)`` is then NaN; one with Inf entries and no NaN gives Inf (MATLAB's
        ``Inf * norm(inv(A), p)`` depends on what its ``inv`` makes of an Inf, and is NaN
        where that inverse is zero or NaN; Inf here, as NumPy's ``cond``, in every mode).

    Raises
    ------
    ValueError
        For ``p = 2`` when ``A`` (chopped: the stored ``A``) has a NaN or Inf entry, in every
        mode, as MATLAB's ``svd`` refuses it ("Input to SVD must not contain NaN or Inf");
        for a non-square matrix with ``p`` other than 2.

    Examples
    --------
    >>> import numpy as np
    >>> from pychop_compat import linalg
    >>> linalg.cond(np.array([[2.0, 0.0], [0.0, 0.5]]), 1)
    4.0
    """
    order = _order(p)
    (a,) = float_operands(HOST, _on_host(A))
    if a.ndim != 2 or (order != 2 and a.shape[0] != a.shape[1]):
        raise ValueError("cond needs a square matrix (or any matrix for p = 2)")
    if a.size == 0:
        return 0.0
    exact = isinstance(precision, str) and precision == "exact"
    r = None if exact or precision is None or precision in DOUBLE_NAMES else Rounder(precision, HOST)
    stored = a.astype(np.float64) if r is None else r(a)
    if not np.all(np.isfinite(stored)):
        if order == 2:
            raise ValueError("cond(A, 2): A has a NaN or Inf entry (MATLAB's svd refuses it: "
                             "'Input to SVD must not contain NaN or Inf').")
        return _nonfinite_norm(stored)  # norm(A, p) is NaN or Inf, and so is the product
    if exact:
        import mpmath

        if _exactly_singular(stored):
            return math.inf  # 200 bits may leave a rounding-sized sigma_min or pivot where the exact one is 0
        if order == 2:
            with mpmath.workprec(_EXACT_PREC):
                s = mpmath.svd_r(mpmath.matrix(stored.tolist()), compute_uv=False)
                return float(max(s) / min(s)) if min(s) != 0 else math.inf
        return _exact_norm(stored, order) * _exact_fraction_norm(_exact_inverse(stored), order)
    if r is None:  # double
        c = float(np.linalg.cond(stored, order))
        if order == "fro" and (c == 0 or math.isinf(c)):  # the sum of squares may have overflowed
            try:
                inv = np.linalg.inv(stored)
            except np.linalg.LinAlgError:
                return math.inf
            c = safe_two_norm(stored) * safe_two_norm(inv)
            return math.inf if math.isnan(c) else c  # NumPy's cond reads NaN as singular
        return c
    if order == 2:
        sv = np.linalg.svd(stored.astype(np.float64), compute_uv=False)
        return float(r(np.asarray(sv[0] / sv[-1]))) if sv[-1] else math.inf
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SingularMatrixWarning)
        inv = solve(stored, np.eye(a.shape[0], dtype=stored.dtype), precision)
    if not np.all(np.isfinite(inv)):
        return math.inf
    return float(r(np.asarray(_chopped_norm(stored, order, precision) * _chopped_norm(inv, order, precision))))
