"""Squeezing a matrix into the range of a low-precision format (Higham, Pranesh and Zounon 2019):
``A_s = mu * R A S``, see :doc:`/linalg`, "Scaling for low-precision factorization"."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import numpy as np
from numpy.typing import ArrayLike

__all__ = ["Scaling", "scale_diag_2side", "scale_diag_2side_symm", "squeeze"]


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


def scale_diag_2side(A: ArrayLike, tol: float = 1e-4, max_iter: int = 100) -> Scaling:
    """Two-sided row and column equilibration (Higham, Pranesh & Zounon, Alg. 2.5).

    Ruiz's iteration ``A <- R_k A S_k``, ``R_k = diag(||row_i||_inf)^{-1/2}``,
    ``S_k = diag(||col_j||_inf)^{-1/2}``, in double, until every row and column
    norm is within ``tol`` of 1, or ``max_iter`` sweeps.

    Returns
    -------
    Scaling
        ``row``, ``col`` with ``R A S`` equilibrated, and ``mu = 1``.
    """
    a = _finite_square(A)
    n = a.shape[0]
    row, col = np.ones(n), np.ones(n)
    with np.errstate(all="ignore"):
        for _ in range(max_iter):
            rn = np.max(np.abs(a), axis=1) if n else np.zeros(0)
            cn = np.max(np.abs(a), axis=0) if n else np.zeros(0)
            if np.all(np.abs(1 - rn[rn > 0]) <= tol) and np.all(np.abs(1 - cn[cn > 0]) <= tol):
                break
            r, s = _safe_inv_sqrt(rn), _safe_inv_sqrt(cn)
            a = (r[:, None] * a) * s[None, :]
            row, col = row * r, col * s
    return Scaling(row, col)


def scale_diag_2side_symm(A: ArrayLike, tol: float = 1e-4, max_iter: int = 100) -> Scaling:
    """Symmetry-preserving equilibration ``D A D`` (Knight, Ruiz & Ucar; HPZ Alg. 2.6).

    ``A <- D_k A D_k``, ``D_k = diag(||col_j||_inf)^{-1/2}``, until every column
    norm is within ``tol`` of 1, or ``max_iter`` sweeps.

    Returns
    -------
    Scaling
        ``row = col = D`` and ``mu = 1``.
    """
    a = _finite_square(A)
    n = a.shape[0]
    d = np.ones(n)
    with np.errstate(all="ignore"):
        for _ in range(max_iter):
            cn = np.max(np.abs(a), axis=0) if n else np.zeros(0)
            if np.all(np.abs(1 - cn[cn > 0]) <= tol):
                break
            s = _safe_inv_sqrt(cn)
            a = (s[:, None] * a) * s[None, :]
            d = d * s
    return Scaling(d, d.copy())


def squeeze(A: ArrayLike, xmax: float, theta: float = 0.1,
            scaling: Optional[Scaling] = None) -> Scaling:
    """Add the factor ``mu = theta * xmax / beta`` to ``scaling`` (HPZ Alg. 2.1/2.2).

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
    theta = float(theta)
    if not 0 < theta <= 1:
        raise ValueError(f"theta must be in (0, 1], got {theta!r}")
    a = _finite_square(A)
    n = a.shape[0]
    base = scaling if scaling is not None else Scaling(np.ones(n), np.ones(n))
    with np.errstate(all="ignore"):
        beta = float(np.max(np.abs(base.apply(a)))) if a.size else 0.0
    mu = theta * float(xmax) / beta if np.isfinite(beta) and beta > 0 else 1.0
    return Scaling(base.row, base.col, mu)
