"""LU factorization with partial pivoting and triangular solves in simulated precision."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from ._common import (OptionsLike, _float_array, _ieee, _make_rounder)


@dataclass(frozen=True, eq=False)
class LUResult:
    """LU factorization ``P A = L U`` computed by :func:`lu`.

    Attributes
    ----------
    L : ndarray
        Unit lower triangular factor (``n x n``).
    U : ndarray
        Upper triangular factor.
    perm : ndarray of int
        Row permutation, 0-based: ``A[perm] = L @ U`` (up to rounding).
    info : int
        0 if all pivots are nonzero, else ``k`` where ``U[k-1, k-1]`` is the
        first zero pivot (LAPACK's convention); the factorization is then
        complete but ``U`` is singular.

    Notes
    -----
    ``L, U, perm = lu(A)`` unpacks.  ``P`` is MATLAB's permutation matrix
    (``[L, U, P] = lu(A)``, ``P A = L U``); :func:`scipy.linalg.lu` returns its
    transpose (``A = P L U``).
    """

    L: np.ndarray
    U: np.ndarray
    perm: np.ndarray
    info: int = 0

    @property
    def P(self) -> np.ndarray:
        """Permutation matrix with ``P @ A = L @ U``."""
        n = self.perm.size
        P = np.zeros((n, n))
        P[np.arange(n), self.perm] = 1.0
        return P

    def __iter__(self):
        return iter((self.L, self.U, self.perm))


@_ieee
def lu(A: ArrayLike, options: OptionsLike = None) -> LUResult:
    """LU factorization with partial pivoting in simulated precision.

    Right-looking Gaussian elimination (``kij`` form).  At step ``k`` the row
    with the first largest ``|a_ik|``, ``i >= k``, is swapped into row ``k``;
    then the multipliers ``l_ik = fl(a_ik / a_kk)`` and the Schur complement
    ``a_ij = fl(a_ij - fl(l_ik * a_kj))`` are formed for the whole trailing
    submatrix at once.

    Parameters
    ----------
    A : array_like
        Square matrix; it is first rounded to the format (stored in the
        working format of the factorization).
    options : chop options, str or None, optional
        Format and rounding (``None``: the persistent chop options).

    Returns
    -------
    LUResult
        ``L``, ``U``, ``perm`` (``A[perm] = L @ U``), ``P`` and ``info``.

    Notes
    -----
    Chop calls, in order: ``A``; then for each ``k``: the multipliers (a
    column), the products ``l_ik a_kj`` (the trailing block), the differences
    (the trailing block).  A zero pivot column is skipped, as in LAPACK.
    Backward error (Higham, Thm. 9.3, round to nearest): ``P A + dA = L U``
    with ``|dA| <= gamma_n |L||U|``.

    Examples
    --------
    >>> import numpy as np
    >>> from pychop_compat import linalg
    >>> L, U, perm = linalg.lu(np.array([[1., 2.], [3., 4.]]), 'h')
    >>> perm.tolist(), float(L[1, 0]), float(U[1, 1])
    ([1, 0], 0.333251953125, 0.6669921875)
    """
    a = _float_array(A)
    if a.ndim != 2 or a.shape[0] != a.shape[1]:
        raise ValueError("lu needs a square matrix")
    r = _make_rounder(options)
    a = np.array(r(a), copy=True)
    n = a.shape[0]
    perm = np.arange(n)
    info = 0
    for k in range(n):
        piv = k + int(np.argmax(np.abs(a[k:, k])))
        if piv != k:
            a[[k, piv]] = a[[piv, k]]
            perm[[k, piv]] = perm[[piv, k]]
        pivot = a[k, k]
        if pivot == 0:
            info = info or k + 1
            continue
        if k == n - 1:
            break
        l = r(a[k + 1 :, k] / pivot)
        a[k + 1 :, k] = l
        a[k + 1 :, k + 1 :] = r(a[k + 1 :, k + 1 :] - r(np.outer(l, a[k, k + 1 :])))
    L = np.tril(a, -1)
    L[np.diag_indices(n)] = 1.0
    return LUResult(L, np.triu(a), perm, info)


def _as_factors(F: Any) -> LUResult:
    if isinstance(F, LUResult):
        return F
    L, U, p = F
    p = np.asarray(p)
    if p.ndim == 2:  # MATLAB-style permutation matrix, P A = L U
        p = np.argmax(p, axis=1)
    return LUResult(np.asarray(L), np.asarray(U), p.astype(int))


@_ieee
def solve(A: Any, b: ArrayLike, options: OptionsLike = None) -> np.ndarray:
    """Solve ``A x = b`` by LU factorization and substitution in simulated precision.

    Parameters
    ----------
    A : array_like, LUResult or tuple (L, U, p)
        The matrix (factorized with :func:`lu` and ``options``) or its
        factors: an :class:`LUResult` or a tuple ``(L, U, p)`` with ``p`` a
        0-based permutation vector (``A[p] = L U``) or a permutation matrix
        (``P A = L U``).
    b : array_like
        Right-hand side(s), shape ``(n,)`` or ``(n, k)``.
    options : chop options, str or None, optional
        Format and rounding (``None``: the persistent chop options).  Given
        factors are used in this precision (they are rounded to it first).

    Returns
    -------
    ndarray
        The solution, shaped like ``b``.

    Notes
    -----
    Column-oriented substitution.  With ``c = fl(b[p])``, forward:
    for ``j = 1..n-1``, ``c_i = fl(c_i - fl(l_ij c_j))`` for all ``i > j``;
    backward: for ``j = n..1``, ``x_j = fl(c_j / u_jj)``, then
    ``c_i = fl(c_i - fl(u_ij x_j))`` for all ``i < j``.  Each row therefore
    subtracts its terms in increasing (forward) or decreasing (backward) ``j``.
    Chop calls, in order: those of :func:`lu` if ``A`` is a matrix; ``L``,
    ``U``, ``b[p]``; forward: per ``j`` the
    products then the differences; backward: per ``j`` the quotient, the
    products, the differences.  Backward error (Higham, Thm. 9.4, round to
    nearest): ``(P A + dA) x = P b``, ``|dA| <= gamma_{3n} |L||U|``.
    """
    F = A if isinstance(A, LUResult) or isinstance(A, tuple) else None
    r = _make_rounder(options)
    if F is None:
        F = lu(A, options)
    F = _as_factors(F)
    bb = _float_array(b, F.L, F.U)
    vec = bb.ndim == 1
    c = bb[:, None] if vec else bb
    n = F.perm.size
    if c.shape[0] != n:
        raise ValueError("b has the wrong number of rows")
    L = r(F.L.astype(c.dtype))
    U = r(F.U.astype(c.dtype))
    c = np.array(r(c[F.perm]), copy=True)
    for j in range(n - 1):
        c[j + 1 :] = r(c[j + 1 :] - r(L[j + 1 :, j : j + 1] * c[j : j + 1]))
    for j in range(n - 1, -1, -1):
        c[j] = r(c[j] / U[j, j])
        if j:
            c[:j] = r(c[:j] - r(U[:j, j : j + 1] * c[j : j + 1]))
    return c[:, 0] if vec else c
