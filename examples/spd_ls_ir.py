"""Cholesky and QR in fp16, CG-IR and least-squares GMRES-IR (Higham & Pranesh 2021; Carson,
Higham & Pranesh 2020).

1. ``chol_lp`` factorizes a symmetric positive definite matrix in simulated fp16, after the
   research codes' scaling to unit diagonal and squeeze (``spd_diag_scale``); the factor is
   good to fp16's accuracy, ``||R^T R - A_s|| / ||A_s||`` about ``2**-11``.
2. ``cg_ir`` refines the solution of ``A x = b`` to double precision, each correction computed
   by CG preconditioned by that factor (``gmres_ir(..., factorization='cholesky')`` does the
   same with GMRES).
3. ``house_qr_lp`` factorizes a tall matrix in fp16 (``Q^T Q = I`` to fp16's accuracy).
4. ``ls_ir`` solves the least-squares problem ``min ||b - A x||_2`` to double precision by
   GMRES-based refinement of the augmented system, preconditioned by the fp16 QR factors.

The matrices are made without random numbers.  Run ``python examples/spd_ls_ir.py``.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

try:
    import pychop_compat  # noqa: F401
except ImportError:  # running from a source checkout
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pychop_compat import linalg


def spd_problem(n: int = 20) -> tuple:
    """A graded Kac-Murdock-Szego matrix (entries from 1 to 10^(2(n-1)/5); exactly symmetric)."""
    i = np.arange(float(n))
    grade = 10.0 ** (i / 5)
    A = 0.6 ** np.abs(i[:, None] - i[None, :]) * grade[:, None] * grade[None, :]
    return np.triu(A) + np.triu(A, 1).T, np.cos(i + 1)


def ls_problem(m: int = 30, n: int = 8) -> tuple:
    """A tall matrix with graded columns, and a right-hand side not in its range."""
    k, j = np.arange(float(m))[:, None], np.arange(float(n))[None, :]
    return (np.cos(0.37 * (k + 1) * (j + 1)) + (k == j)) * 10.0 ** (-j / 2), np.sin(np.arange(float(m)) + 0.5)


def main(n: int = 20, m: int = 30, ncols: int = 8, verbose: bool = True) -> dict:
    """Run the four steps; returns their results by name."""
    A, b = spd_problem(n)
    scaled, d, mu = linalg.spd_diag_scale(A, 1, 0.1)
    R, flag = linalg.chol_lp(scaled, "h")
    cholesky_error = float(np.max(np.abs(R.T @ R - scaled)) / np.max(np.abs(scaled)))
    cg = linalg.cg_ir(A, b, "h", "d", "q", scaling="positive")
    gmres = linalg.gmres_ir(A, b, "h", "d", "q", factorization="cholesky", scaling="positive")
    A2, b2 = ls_problem(m, ncols)
    Q, R2 = linalg.house_qr_lp(A2, 0)
    orthogonality = float(np.max(np.abs(Q.T @ Q - np.eye(ncols))))
    ls = linalg.ls_ir(A2, b2, "h", "d", "q")
    if verbose:
        print(f"chol_lp in fp16 (flag {flag}): max|R'R - A_s| / max|A_s| = {cholesky_error:.1e}")
        print(f"CG-IR, kappa_inf(A) = {np.linalg.cond(A, np.inf):.1e}: CG iterations {cg.gmres_iterations}")
        print(cg.table())
        print(f"GMRES-IR with the same factor: {gmres.status} after {gmres.iterations} steps, "
              f"GMRES iterations {gmres.gmres_iterations}")
        print(f"house_qr_lp in fp16: max|Q'Q - I| = {orthogonality:.1e}")
        print(f"LS-IR, kappa_2(A) = {np.linalg.cond(A2):.1e}, alpha = {ls.alpha:.2e}:")
        print(ls.table())
    return {"A": A, "b": b, "R": R, "flag": flag, "cholesky_error": cholesky_error, "cg_ir": cg,
            "gmres_ir": gmres, "A_ls": A2, "b_ls": b2, "orthogonality": orthogonality, "ls_ir": ls}


if __name__ == "__main__":
    main()
