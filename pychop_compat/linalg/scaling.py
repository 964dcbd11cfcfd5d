"""Squeezing a matrix into the range of a low-precision format (Higham, Pranesh and Zounon 2019):
``A_s = mu * R A S``, see :doc:`/linalg`, "Scaling for low-precision factorization".

The package's iterated equilibrations are :func:`ruiz_equilibrate` and
:func:`ruiz_equilibrate_symmetric`; :func:`scale_diag_2side` and
:func:`scale_diag_2side_symm` are the research codes' functions of those names, step by step."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Tuple

import numpy as np
from numpy.typing import ArrayLike

from .arrays import host_computed

__all__ = ["Scaling", "ruiz_equilibrate", "ruiz_equilibrate_symmetric", "scale_diag_2side", "scale_diag_2side_symm",
           "spd_diag_scale", "squeeze"]


@dataclass(frozen=True, eq=False)
class Scaling:
    """The scaling ``A_s = mu * diag(row) @ A @ diag(col)`` applied before a factorization: positive
    diagonal vectors ``row``, ``col`` (ones when not scaled) and the squeeze factor ``mu`` (1 when
    not squeezed)."""

    row: np.ndarray
    col: np.ndarray
    mu: float = 1.0

    def apply(self, A: np.ndarray) -> np.ndarray:
        """``mu * R A S`` in double (the entries of ``R A S`` first, then the factor ``mu``)."""
        return self.mu * ((self.row[:, None] * A) * self.col[None, :])


def _finite_square(A: ArrayLike) -> np.ndarray:
    a = np.asarray(A, dtype=np.float64)
    if a.ndim != 2 or a.shape[0] != a.shape[1]:
        raise ValueError("scaling needs a square matrix")
    return a


def _safe_inv_sqrt(norms: np.ndarray) -> np.ndarray:
    """``1 / sqrt(norms)``, with 1 for zero or non-finite norms (nothing to scale there)."""
    out = np.ones_like(norms)
    ok = np.isfinite(norms) & (norms > 0)
    out[ok] = 1.0 / np.sqrt(norms[ok])
    return out


def ruiz_equilibrate(A: ArrayLike, tol: float = 1e-4, max_iter: int = 100) -> Scaling:
    """Two-sided row and column equilibration (Ruiz's iteration; Higham, Pranesh & Zounon, Alg. 2.5).

    Called ``scale_diag_2side`` up to version 0.3, a name now given to the research code's
    one-pass scaling (:func:`scale_diag_2side`); ``lu(..., scaling='general')`` uses this one.

    Ruiz's iteration ``A <- R_k A S_k``, ``R_k = diag(||row_i||_inf)^{-1/2}``,
    ``S_k = diag(||col_j||_inf)^{-1/2}``, in double, until every row and column
    norm is within ``tol`` of 1, or ``max_iter`` sweeps.

    Parameters
    ----------
    A : array_like
        Real square matrix.
    tol : float, optional
        Stop when every row and column maximum is within ``tol`` of 1 (default ``1e-4``).
    max_iter : int, optional
        Largest number of sweeps (default 100).

    Returns
    -------
    Scaling
        ``row``, ``col`` with ``R A S`` equilibrated, and ``mu = 1``.
    """
    return _ruiz(A, tol, max_iter, symmetric=False)


def ruiz_equilibrate_symmetric(A: ArrayLike, tol: float = 1e-4, max_iter: int = 100) -> Scaling:
    """Symmetry-preserving equilibration ``D A D`` (Knight, Ruiz & Ucar; HPZ Alg. 2.6).

    Called ``scale_diag_2side_symm`` up to version 0.3, a name now given to the research code's
    scaling (:func:`scale_diag_2side_symm`, separate row and column factors);
    ``lu(..., scaling='symmetric')`` uses this one.

    ``A <- D_k A D_k``, ``D_k = diag(||col_j||_inf)^{-1/2}``, until every column
    norm is within ``tol`` of 1, or ``max_iter`` sweeps.

    Parameters
    ----------
    A : array_like
        Real square matrix.
    tol : float, optional
        Stop when every column maximum is within ``tol`` of 1 (default ``1e-4``).
    max_iter : int, optional
        Largest number of sweeps (default 100).

    Returns
    -------
    Scaling
        ``row = col = D`` and ``mu = 1``.
    """
    return _ruiz(A, tol, max_iter, symmetric=True)


def _ruiz(A: ArrayLike, tol: float, max_iter: int, symmetric: bool) -> Scaling:
    """Ruiz's iteration; ``symmetric``: the column norms scale the rows too (``D A D``)."""
    a = _finite_square(A)
    n = a.shape[0]
    row, col = np.ones(n), np.ones(n)
    with np.errstate(all="ignore"):
        for _ in range(max_iter):
            cn = np.max(np.abs(a), axis=0) if n else np.zeros(0)
            rn = cn if symmetric else (np.max(np.abs(a), axis=1) if n else np.zeros(0))
            if np.all(np.abs(1 - rn[rn > 0]) <= tol) and np.all(np.abs(1 - cn[cn > 0]) <= tol):
                break
            r, s = _safe_inv_sqrt(rn), _safe_inv_sqrt(cn)
            a = (r[:, None] * a) * s[None, :]
            row, col = row * r, col * s
    return Scaling(row, col)


def _max_abs_ignoring_nan(a: np.ndarray, axis: int) -> np.ndarray:
    """MATLAB's ``max(abs(a), [], dim)``: NaN only where a whole row or column is NaN; empty for an
    empty ``a`` (``fmax`` has no identity to reduce over no entries)."""
    if not a.size:
        return np.zeros(a.shape[1 - axis])
    return np.fmax.reduce(np.abs(a), axis=axis)


@host_computed
def scale_diag_2side(A: ArrayLike) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The research code's ``scale_diag_2side``: one row pass, then one column pass.

    ``d1 = 1 ./ max(abs(A), [], 2)``, ``B = diag(d1) A``, ``d2 = 1 ./ max(abs(B), [], 1)``,
    ``B = B diag(d2)``: every row and column of ``B`` has largest entry 1 in magnitude.  The
    algorithm of ``scaling_algorithms/scale_diag_2side.m`` in
    github.com/SrikaraPranesh/Multi_precision_NLA_kernels (commit fb3a2d7, 2021-02-16), in
    double, bit for bit as GNU Octave runs it (``tests/data/research_linalg``).  The package's
    iterated equilibration, called by this name up to version 0.3, is :func:`ruiz_equilibrate`.

    Parameters
    ----------
    A : array_like
        Real square matrix with finite entries.  A zero row or column gives an infinite
        factor and NaN entries, as in the research code; a 0 x 0 one, empty results (as Octave).

    Returns
    -------
    B : ndarray
        The scaled matrix ``diag(d1) A diag(d2)``, rounded after each product as the code does.
    d1, d2 : ndarray
        The diagonals of the code's ``D1`` and ``D2`` (``np.diag(d1)`` is ``D1``).

    Notes
    -----
    Products with ``diag(d)`` are taken entrywise, as Octave does; MATLAB's full products agree
    for finite ``A`` up to the sign of zero entries.
    """
    a = _finite_square(A)
    with np.errstate(all="ignore"):
        d1 = 1.0 / _max_abs_ignoring_nan(a, 1)
        B = d1[:, None] * a
        d2 = 1.0 / _max_abs_ignoring_nan(B, 0)
        B = B * d2[None, :]
    return B, d1, d2


@host_computed
def scale_diag_2side_symm(A: ArrayLike, tol: float = 1e-4) -> Tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """The research code's ``scale_diag_2side_symm``: up to 10 sweeps of row and column scaling.

    Sweep ``k``: ``r = max(abs(A), [], 2)``, ``c = max(abs(A), [], 1)``,
    ``A <- diag(1 ./ sqrt(r)) A diag(1 ./ sqrt(c))``, the products ``d1 <- d1 ./ sqrt(r)``,
    ``d2 <- d2 ./ sqrt(c)``; stop after the sweep when ``max |[r, c] - 1| < tol`` (the maxima
    before the sweep), else after 10 sweeps.  Despite the name, the row and column factors are
    separate, so a symmetric ``A`` stays symmetric only up to rounding.  The algorithm of
    ``scaling_algorithms/scale_diag_2side_symm.m`` in
    github.com/SrikaraPranesh/Multi_precision_NLA_kernels (commit fb3a2d7, 2021-02-16;
    Knight, Ruiz & Ucar, SIMAX 35, 2014), in double, bit for bit as GNU Octave runs it
    (``tests/data/research_linalg``); it is the scaling of that repository's
    ``gmresir3_ctest.m``.  The ``D A D`` equilibration called by this name up to version 0.3 is
    :func:`ruiz_equilibrate_symmetric`.

    Parameters
    ----------
    A : array_like
        Real square matrix with finite entries (a zero row or column gives NaN, as in the code; a
        0 x 0 one, empty results and ``its = 1``, as Octave runs the code).
    tol : float, optional
        Convergence tolerance (default ``1e-4``, the code's).  The code's third argument,
        printing, is not provided.

    Returns
    -------
    B : ndarray
        The scaled matrix.
    d1, d2 : ndarray
        The diagonals of the code's ``D1`` and ``D2``: ``B`` is ``diag(d1) A diag(d2)`` up to rounding.
    its : int
        The number of sweeps (1 to 10).

    Examples
    --------
    >>> import numpy as np
    >>> from pychop_compat import linalg
    >>> B, d1, d2, its = linalg.scale_diag_2side_symm(np.array([[4e6, 2.0], [2.0, 1e-4]]))
    >>> float(np.max(np.abs(B))), its          # 1 to within tol
    (1.0000000000000002, 4)
    """
    a = _finite_square(A)
    n = a.shape[0]
    d1, d2 = np.ones(n), np.ones(n)
    with np.errstate(all="ignore"):
        for its in range(1, 11):
            row_max, col_max = _max_abs_ignoring_nan(a, 1), _max_abs_ignoring_nan(a, 0)
            row_root, col_root = np.sqrt(row_max), np.sqrt(col_max)
            a = ((1.0 / row_root)[:, None] * a) * (1.0 / col_root)[None, :]
            d1, d2 = d1 / row_root, d2 / col_root
            if np.max(np.abs(np.concatenate([row_max, col_max]) - 1), initial=0.0) < tol:
                break
    return a, d1, d2, its


@host_computed
def spd_diag_scale(A: ArrayLike, flag: int = 0, theta: Optional[float] = None
                   ) -> Tuple[np.ndarray, np.ndarray, float]:
    """The research code's ``spd_diag_scale``: ``D A D`` with ``D = diag(1 ./ sqrt(diag(A)))``,
    then optionally the squeeze into fp16's range.

    ``U = D triu(A, 1) D``, ``A <- U + U' + D diag(diag(A)) D`` (so the result is symmetric to
    the last bit and has unit diagonal up to rounding); with ``flag = 1``,
    ``mu = (theta * xmax) / max |a_ij|`` with fp16's ``xmax = 65504`` and ``A <- mu A``.  The
    algorithm of ``scaling_algorithms/spd_diag_scale.m`` in
    github.com/SrikaraPranesh/Multi_precision_NLA_kernels (commit fb3a2d7, 2021-02-16; Higham,
    Pranesh & Zounon 2019, Alg. 2.3, for SPD matrices), in double, bit for bit as GNU Octave runs
    it (``tests/data/research_linalg``).

    Parameters
    ----------
    A : array_like
        Real symmetric matrix (exactly) with a positive diagonal.
    flag : {0, 1}, optional
        1 to squeeze (default 0, the code's).
    theta : float, optional
        The squeeze's fraction of ``xmax``; needed when ``flag = 1``.

    Returns
    -------
    B : ndarray
        The scaled (and squeezed) matrix.
    d : ndarray
        The diagonal of the code's ``D`` (``1 ./ sqrt(diag(A))``).
    mu : float
        The squeeze factor (1 when ``flag = 0``, and for an empty ``A``, where the code's ``mu`` is empty).

    Raises
    ------
    ValueError
        The code's errors: ``'Input matrix is not symmetric'``, ``'matrix might not be positive
        definite'`` (a diagonal entry ``<= 0``); ``theta`` missing with ``flag = 1``; ``flag``
        not 0 or 1.
    """
    if flag not in (0, 1):  # the code's other flags do not exist: refuse rather than not squeeze
        raise ValueError(f"flag must be 0 or 1, got {flag!r}")
    a = _finite_square(A)
    with np.errstate(invalid="ignore"):
        if np.any(a - a.T != 0):
            raise ValueError("Input matrix is not symmetric")
    diagonal = np.diag(a).copy()
    if diagonal.size and np.fmin.reduce(diagonal) <= 0:
        raise ValueError("matrix might not be positive definite")
    with np.errstate(all="ignore"):
        d = 1.0 / np.sqrt(diagonal)
        upper = (d[:, None] * np.triu(a, 1)) * d[None, :]
        B = upper + upper.T + np.diag((d * diagonal) * d)
        mu = 1.0
        if flag == 1:
            if theta is None:
                raise ValueError("spd_diag_scale needs theta with flag = 1")
            if B.size:  # an empty A has nothing to squeeze (the code's mu is then empty): mu stays 1
                mu = float(theta) * 65504.0 / float(np.max(np.abs(B)))
                B = mu * B
    return B, d, mu


def checked_theta(theta: float) -> float:
    """``theta`` as a float, refused unless in (0, 1] (the squeeze's fraction of ``xmax``, for
    :func:`squeeze` and the Cholesky factorization of the refinements)."""
    theta = float(theta)
    if not 0 < theta <= 1:
        raise ValueError(f"theta must be in (0, 1], got {theta!r}")
    return theta


def squeeze(A: ArrayLike, xmax: float, theta: float = 0.1,
            scaling: Optional[Scaling] = None) -> Scaling:
    """Add the factor ``mu = theta * xmax / beta`` to ``scaling`` (HPZ Alg. 2.1/2.2).

    Source: the paper (Higham, Pranesh & Zounon, SIAM J. Sci. Comput. 41(4), 2019); the
    research code ``spd_diag_scale.m`` forms ``mu`` the same way (:func:`spd_diag_scale`),
    ``gmresir3_ctest.m`` uses ``theta * xmax`` alone (its scaled matrix has maximum 1).

    Parameters
    ----------
    A : array_like
        The matrix (unscaled).
    xmax : float
        Largest finite number of the target format.
    theta : float, optional
        In (0, 1]: the largest entry of the squeezed matrix (default 0.1, the paper's).
    scaling : Scaling, optional
        A diagonal scaling computed before (default: none).

    Returns
    -------
    Scaling
        ``row``, ``col`` of ``scaling`` and ``mu`` (1 for a zero or non-finite matrix).
    """
    theta = checked_theta(theta)
    a = _finite_square(A)
    n = a.shape[0]
    base = scaling if scaling is not None else Scaling(np.ones(n), np.ones(n))
    with np.errstate(all="ignore"):
        beta = float(np.max(np.abs(base.apply(a)))) if a.size else 0.0
    mu = theta * float(xmax) / beta if np.isfinite(beta) and beta > 0 else 1.0
    return Scaling(base.row, base.col, mu)
