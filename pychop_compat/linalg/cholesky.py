"""Cholesky factorization in simulated low precision, as the research codes run it."""

from __future__ import annotations

from typing import Tuple

import numpy as np
from numpy.typing import ArrayLike

from .arrays import HOST, host_computed
from .common import Rounder

__all__ = ["chol_lp"]


@host_computed
def chol_lp(A: ArrayLike, format: str = "h") -> Tuple[np.ndarray, int]:
    """The research codes' ``chol_lp``: Cholesky factorization in fp16 or bfloat16.

    ``A`` is rounded to the format; for ``k = 1 .. n``: if ``a_kk <= 0`` the factorization
    fails (``flag = 1``); else ``a_kk = chop(sqrt(a_kk))``, the row ``a_kj = chop(a_kj / a_kk)``,
    ``j > k``, and the whole trailing block ``a_ij = chop(a_ij - chop(a_ki a_kj))``, ``i, j > k``.
    The algorithm of ``chol_lp.m`` in github.com/SrikaraPranesh/Multi_precision_NLA_kernels
    (commit fb3a2d7, 2021-02-16; Higham & Pranesh, "Exploiting lower precision arithmetic in
    solving symmetric positive definite linear systems and least squares problems", SISC 2021),
    bit for bit as GNU Octave runs it with ``chop.m`` of github.com/higham/chop (commit 906c31e)
    (``tests/data/research_linalg``).

    Parameters
    ----------
    A : array_like
        Real symmetric matrix (exactly: ``A - A.T`` must be zero, NaN included).
    format : {'h', 'b'}, optional
        fp16 (default) or bfloat16, rounded to nearest with chop's other defaults.

    Returns
    -------
    R : ndarray
        Upper triangular with ``R.T @ R = A`` up to rounding; all zeros when the factorization fails.
    flag : int
        0 on success, 1 when a pivot ``a_kk <= 0`` appeared (``A`` is not positive definite in
        the format).  A NaN pivot does not stop the code, so NaN entries give ``flag = 0``.

    Raises
    ------
    ValueError
        ``'Input matrix is not symmetric'`` (checked first) or ``'unsupported low precision
        format'``, the code's messages.

    Examples
    --------
    >>> import numpy as np
    >>> from pychop_compat import linalg
    >>> R, flag = linalg.chol_lp(np.array([[4., 2.], [2., 3.]]))
    >>> R.tolist(), flag
    ([[2.0, 1.0], [0.0, 1.4140625]], 0)
    >>> linalg.chol_lp(np.array([[1., 2.], [2., 1.]]))[1]
    1
    """
    a = np.array(A, dtype=np.float64)
    if a.ndim != 2 or a.shape[0] != a.shape[1]:
        raise ValueError("chol_lp needs a square matrix")
    with np.errstate(invalid="ignore"):
        if np.any(a - a.T != 0):
            raise ValueError("Input matrix is not symmetric")
    if format not in ("h", "b"):
        raise ValueError("unsupported low precision format")
    return cholesky_rounded(a, Rounder({"format": format, "round": 1}, HOST))


def cholesky_rounded(A: np.ndarray, rounded: Rounder) -> Tuple[np.ndarray, int]:
    """The steps of :func:`chol_lp` with every result rounded by ``rounded`` (any chop options):
    the factorization of the refinements, whose ``uf`` may round otherwise than to nearest.

    Parameters
    ----------
    A : ndarray
        Real symmetric double matrix, not checked (:func:`chol_lp` checks it).
    rounded : Rounder
        The rounding of ``A`` and of each operation's result.

    Returns
    -------
    R, flag
        As :func:`chol_lp`'s.
    """
    a = rounded(A)
    n = a.shape[0]
    from ..kernels import compiled

    spec = rounded.kernel_spec("float64") if n else None
    if spec is not None and compiled.wanted():  # the same roundings, compiled
        from ..kernels.numba_lu import cholesky

        a = np.ascontiguousarray(a)
        if cholesky(a, compiled.rounding_constants(spec, np.float64)):
            return np.zeros((n, n)), 1
        return np.triu(a), 0
    for k in range(n):
        if a[k, k] <= 0:
            return np.zeros((n, n)), 1
        a[k, k] = rounded(np.sqrt(a[k, k:k + 1]))[0]
        rest = slice(k + 1, n)
        with np.errstate(all="ignore"):  # Inf and NaN propagate, as in the code
            a[k, rest] = rounded(a[k, rest] / a[k, k])
            a[rest, rest] = rounded(a[rest, rest] - rounded(np.outer(a[k, rest], a[k, rest])))
    return np.triu(a), 0
