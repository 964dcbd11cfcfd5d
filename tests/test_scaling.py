"""Two-sided diagonal scaling and the theta * xmax squeeze (Higham, Pranesh &
Zounon, Squeezing a matrix into half precision, SIAM J. Sci. Comput. 41(4),
A2536-A2551, 2019) as options of lu, lu_ir and gmres_ir.

Expected values: fp16's xmax = 65504 (NumPy float16), exact rational
residuals, and the equilibration property stated in the paper (every row and
column of R A S has infinity norm 1 up to the tolerance).
"""

from __future__ import annotations

import warnings
from fractions import Fraction

import numpy as np
import pytest

import pychop_compat.linalg as linalg

XMAX_H = float(np.finfo(np.float16).max)
U_D = 2.0**-53


def badly_scaled(n, seed):
    r = np.random.default_rng(seed)
    B = r.standard_normal((n, n)) + n * np.eye(n)  # well conditioned core
    d1 = 10.0 ** r.uniform(-6, 8, n)
    d2 = 10.0 ** r.uniform(-4, 6, n)
    return (d1[:, None] * B) * d2[None, :], r.standard_normal(n)


def exact_nbe(A, x, b):
    n = len(b)
    r = [abs(Fraction(b[i]) - sum(Fraction(A[i, j]) * Fraction(x[j]) for j in range(n))) for i in range(n)]
    normA = max(sum(abs(Fraction(v)) for v in row) for row in A)
    return float(max(r) / (normA * max(abs(Fraction(v)) for v in x) + max(abs(Fraction(v)) for v in b)))


def test_matrix_overflowing_fp16_factorizes_after_scaling_and_lu_ir_converges():
    n = 12
    A, b = badly_scaled(n, 1)
    assert np.max(np.abs(A)) > XMAX_H  # entries overflow fp16
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", linalg.SingularMatrixWarning)
        plain = linalg.lu_ir(A, b, "h")
    assert plain.status == "singular" and not plain.converged
    for scaling in ("general", "g"):
        res = linalg.lu_ir(A, b, "h", scaling=scaling, theta=0.1)
        assert res.converged, res.table()
        assert exact_nbe(A, res.x, b) <= n * U_D
    gm = linalg.gmres_ir(A, b, "h", scaling="general", theta=0.1)
    assert gm.converged and exact_nbe(A, gm.x, b) <= n * U_D


def test_scaled_factors_are_factors_of_the_scaled_matrix():
    A, _ = badly_scaled(10, 2)
    F = linalg.lu(A, "h", scaling="general", theta=0.1)
    sc = F.scaling
    As = sc.mu * ((sc.row[:, None] * A) * sc.col[None, :])
    assert np.isclose(np.max(np.abs(As)), 0.1 * XMAX_H, rtol=1e-12)  # the squeeze
    assert np.all(np.isfinite(F.L)) and np.all(np.isfinite(F.U)) and F.info == 0
    # P As = L U up to fp16 rounding errors (Higham Thm 9.3 bound, loosely)
    R = As[F.perm] - F.L @ F.U
    assert np.max(np.abs(R)) <= 10 * 10 * 2.0**-11 * np.max(np.abs(F.L) @ np.abs(F.U))
    # the factors act as factors of A through solve (unscaled): the error of x = S y
    # is small in the scaled variable y = S^{-1} x (kappa(As) u_f, normwise)
    x = linalg.solve(F, A @ np.ones(10), "d")
    y_err = (x - 1) / sc.col
    assert np.max(np.abs(y_err)) <= 0.1 * np.max(np.abs(1 / sc.col))


def test_general_equilibration_property():
    A, _ = badly_scaled(15, 3)
    sc = linalg.ruiz_equilibrate(A)
    S = (sc.row[:, None] * A) * sc.col[None, :]
    assert np.all(np.abs(np.max(np.abs(S), axis=1) - 1) <= 1e-4)
    assert np.all(np.abs(np.max(np.abs(S), axis=0) - 1) <= 1e-4)
    assert sc.mu == 1.0


def test_symmetric_scaling_keeps_symmetry_and_spd_lu_ir_converges():
    r = np.random.default_rng(4)
    n = 10
    d = 10.0 ** r.uniform(-3, 6, n)
    B = r.standard_normal((n, n))
    A = d[:, None] * (B @ B.T + n * np.eye(n)) * d[None, :]
    sc = linalg.ruiz_equilibrate_symmetric(A)
    assert np.array_equal(sc.row, sc.col)
    S = (sc.row[:, None] * A) * sc.col[None, :]
    assert np.array_equal(S, S.T) or np.max(np.abs(S - S.T)) <= 4 * U_D
    assert np.all(np.abs(np.max(np.abs(S), axis=0) - 1) <= 1e-4)
    b = r.standard_normal(n)
    res = linalg.lu_ir(A, b, "h", scaling="symmetric", theta=0.1)
    assert res.converged and exact_nbe(A, res.x, b) <= n * U_D


def test_squeeze_alone():
    # all entries near 1e6: beyond fp16's range, but the matrix is well scaled
    r = np.random.default_rng(5)
    n = 8
    A = 1e6 * (np.eye(n) * n + r.uniform(-1, 1, (n, n)))
    b = r.standard_normal(n)
    res = linalg.gmres_ir(A, b, "h", theta=0.5)
    assert res.factors.scaling.mu == pytest.approx(0.5 * XMAX_H / np.max(np.abs(A)), rel=1e-15)
    assert res.converged and exact_nbe(A, res.x, b) <= n * U_D


def test_scaling_options_are_checked():
    with pytest.raises(ValueError, match="scaling"):
        linalg.lu(np.eye(2), "h", scaling="rows")
    with pytest.raises(ValueError, match="theta"):
        linalg.lu(np.eye(2), "h", theta=1.5)
    # no scaling requested: no Scaling attached, the factors are today's
    F = linalg.lu(np.array([[2.0, 1.0], [1.0, 3.0]]), "h")
    assert F.scaling is None


def test_spd_diag_scale_refuses_undocumented_flags():
    """spd_diag_scale.m squeezes for flag == 1 only; another flag was taken silently as 0."""
    S = np.array([[4.0, 1.0], [1.0, 9.0]])
    for flag in (2, -1, 0.5):
        with pytest.raises(ValueError, match="flag must be 0 or 1"):
            linalg.spd_diag_scale(S, flag, 0.1)
    # D = diag(1/2, 1/3) (exact square roots): D S D = [[1, 1/6], [1/6, 1]], mu = 0.1 * xmax / 1
    B, d, mu = linalg.spd_diag_scale(S, 1, 0.1)
    assert d.tolist() == [0.5, 1.0 / 3.0] and mu == 0.1 * XMAX_H


def test_research_scalings_of_an_empty_matrix():
    """NumPy's 'zero-size array to reduction operation fmax' before.  The code under GNU Octave
    returns empty B, D1, D2, and scale_diag_2side_symm its = 1: its first sweep's test
    norm([row_max' col_max] - 1, inf) < tol reads the norm of an empty vector, 0."""
    B, d1, d2 = linalg.scale_diag_2side(np.zeros((0, 0)))
    assert B.shape == (0, 0) and d1.shape == (0,) and d2.shape == (0,)
    B, d1, d2, its = linalg.scale_diag_2side_symm(np.zeros((0, 0)))
    assert B.shape == (0, 0) and d1.shape == (0,) and d2.shape == (0,) and its == 1
