"""GMRES-IR as gmresir3.m runs it, checked against an independent implementation.

The reference implementation below is written from the published description
(Carson & Higham, SIAM J. Sci. Comput. 40(2), 2018, Alg. 4.1/4.2, and the
gmresir3.m code description in Higham, Pranesh & Zounon, SIAM J. Sci.
Comput. 41(4), 2019): LU factors in fp16 (here with NumPy's float16
arithmetic, a hardware oracle), x_0 from the factors, then until the normwise
backward error is at most n u: residual in extra precision, scaled to unit
norm, left-preconditioned GMRES (x_0 = 0, MGS Arnoldi, Givens rotations,
relative preconditioned residual <= gtol) in double with the preconditioned
operator applied in 113-bit arithmetic (mpmath), update in double.
"""

from __future__ import annotations

import math
import warnings
from fractions import Fraction

import mpmath
import numpy as np
import pytest

import pychop_compat.linalg as linalg
from pychop_compat.linalg.common import extended_kind
from pychop_compat.linalg.extended import Binary128, DoubleDouble, binary128_op, ext_lu_solve

U_D = 2.0**-53


def make_matrix(n, kappa, mode, seed):
    """A = Q1 diag(sigma) Q2^T with Haar-like Q from NumPy's QR (sigma as MATLAB's randsvd)."""
    r = np.random.default_rng(seed)
    Q1, _ = np.linalg.qr(r.standard_normal((n, n)))
    Q2, _ = np.linalg.qr(r.standard_normal((n, n)))
    if mode == 2:
        sigma = np.r_[np.ones(n - 1), 1 / kappa]
    else:
        sigma = kappa ** (-np.arange(n) / (n - 1))
    return (Q1 * sigma) @ Q2.T, r.standard_normal(n)


def fp16_lu(A):
    """Partial pivoting LU with every operation in NumPy float16."""
    a = A.astype(np.float16)
    n = a.shape[0]
    perm = np.arange(n)
    with np.errstate(all="ignore"):
        for k in range(n - 1):
            p = k + int(np.argmax(np.abs(a[k:, k])))
            a[[k, p]] = a[[p, k]]
            perm[[k, p]] = perm[[p, k]]
            if a[k, k] == 0:
                continue
            a[k + 1:, k] = a[k + 1:, k] / a[k, k]
            a[k + 1:, k + 1:] = a[k + 1:, k + 1:] - (a[k + 1:, k:k + 1] * a[k:k + 1, k + 1:])
    L = np.tril(a, -1).astype(np.float64) + np.eye(n)
    return L, np.triu(a).astype(np.float64), perm


def exact_residual(A, x, b):
    """b - A x correctly rounded to double (exact products, math.fsum)."""
    return np.array([math.fsum([b[i]] + [-float(Fraction(A[i, j]) * Fraction(x[j])) for j in range(len(b))]
                               + [-(float(Fraction(A[i, j]) * Fraction(x[j]) - Fraction(float(Fraction(A[i, j]) * Fraction(x[j]))))) for j in range(len(b))])
                     for i in range(len(b))])


def backward_error(A, x, b):
    r = exact_residual(A, x, b)
    return np.max(np.abs(r)) / (np.max(np.sum(np.abs(A), axis=1)) * np.max(np.abs(x)) + np.max(np.abs(b)))


def apply_preconditioned(A, L, U, perm, v, with_A):
    """U^{-1} L^{-1} P (A v) (or of v) in 113-bit arithmetic, rounded to double."""
    n = len(v)
    with mpmath.workprec(113):
        w = [mpmath.mpf(float(t)) for t in v]
        if with_A:
            w = [mpmath.fsum(mpmath.mpf(A[i, j]) * w[j] for j in range(n)) for i in range(n)]
        w = [w[p] for p in perm]
        for i in range(n):  # forward, unit lower
            w[i] = w[i] - mpmath.fsum(mpmath.mpf(L[i, j]) * w[j] for j in range(i))
        for i in range(n - 1, -1, -1):
            w[i] = (w[i] - mpmath.fsum(mpmath.mpf(U[i, j]) * w[j] for j in range(i + 1, n))) / U[i, i]
        return np.array([float(t) for t in w])


def reference_gmres(A, L, U, perm, r, gtol):
    n = len(r)
    z = apply_preconditioned(A, L, U, perm, r, False)
    beta = np.linalg.norm(z)
    V = np.zeros((n, n + 1))
    H = np.zeros((n + 1, n))
    cs, sn, g = np.zeros(n), np.zeros(n), np.zeros(n + 1)
    g[0] = beta
    V[:, 0] = z / beta
    k = 0
    for j in range(n):
        w = apply_preconditioned(A, L, U, perm, V[:, j], True)
        for i in range(j + 1):
            H[i, j] = w @ V[:, i]
            w = w - H[i, j] * V[:, i]
        H[j + 1, j] = np.linalg.norm(w)
        if H[j + 1, j]:
            V[:, j + 1] = w / H[j + 1, j]
        for i in range(j):
            H[i, j], H[i + 1, j] = cs[i] * H[i, j] + sn[i] * H[i + 1, j], -sn[i] * H[i, j] + cs[i] * H[i + 1, j]
        rho = math.hypot(H[j, j], H[j + 1, j])
        cs[j], sn[j] = H[j, j] / rho, H[j + 1, j] / rho
        H[j, j], H[j + 1, j] = rho, 0.0
        g[j + 1] = -sn[j] * g[j]
        g[j] = cs[j] * g[j]
        k = j + 1
        if abs(g[j + 1]) <= gtol * beta:
            break
    y = np.linalg.solve(np.triu(H[:k, :k]), g[:k])
    return V[:, :k] @ y, k


def reference_gmres_ir(A, b, gtol=1e-6, max_iter=10):
    n = len(b)
    L, U, perm = fp16_lu(A)
    import scipy.linalg as sl
    x = sl.solve_triangular(U, sl.solve_triangular(L, b[perm], lower=True, unit_diagonal=True))
    its = []
    for _ in range(max_iter + 1):
        if backward_error(A, x, b) <= n * U_D:
            return x, its, "converged"
        if len(its) == max_iter:
            return x, its, "maxiter"
        r = exact_residual(A, x, b)
        s = np.max(np.abs(r))
        d, k = reference_gmres(A, L, U, perm, r / s, gtol)
        its.append(k)
        x = x + s * d
    return x, its, "maxiter"


@pytest.mark.parametrize("kappa,mode,seed", [(1e2, 3, 1), (1e5, 2, 2), (1e6, 3, 3), (1e8, 2, 4)])
def test_gmres_ir_matches_independent_implementation(kappa, mode, seed):
    n = 16
    A, b = make_matrix(n, kappa, mode, seed)
    L, U, perm = fp16_lu(A)
    F = linalg.lu(A, "h")
    # the chopped fp16 LU is NumPy's float16 elimination, bit for bit
    assert np.array_equal(F.L, L) and np.array_equal(F.U, U) and np.array_equal(F.perm, perm)
    x_ref, its_ref, status_ref = reference_gmres_ir(A, b)
    for up in ("binary128", "q"):
        res = linalg.gmres_ir(A, b, "h", "d", "q", up=up)
        assert res.status == status_ref == "converged"
        assert res.iterations == len(its_ref)
        assert all(abs(a - c) <= 1 for a, c in zip(res.gmres_iterations, its_ref))
        assert backward_error(A, res.x, b) <= n * U_D
        # the two iterates agree to the accuracy the problem allows
        assert np.max(np.abs(res.x - x_ref)) <= 10 * kappa * n * U_D * np.max(np.abs(x_ref))


def test_default_up_is_ur_and_old_names_mean_double_double():
    A, b = make_matrix(12, 1e6, 3, 5)
    base = linalg.gmres_ir(A, b, "h", "d", "q")
    for name in ("q", "quad", "fp128", "dd"):
        assert extended_kind(name) == "dd"
        same = linalg.gmres_ir(A, b, "h", "d", "q", up=name)
        assert np.array_equal(same.x, base.x) and same.gmres_iterations == base.gmres_iterations
    assert extended_kind("binary128") == "binary128"
    assert extended_kind("d") is None


def test_residual_scaled_to_unit_norm(monkeypatch):
    from pychop_compat.linalg import refinement

    seen = []
    real = refinement._gmres

    def spy(arrays, r, *args):
        seen.append(float(np.max(np.abs(r))))
        return real(arrays, r, *args)

    monkeypatch.setattr(refinement, "_gmres", spy)
    A, b = make_matrix(10, 1e4, 2, 6)
    res = linalg.gmres_ir(A, b * 2.0**-600, "h", "d", "q", theta=0.1)
    assert res.converged and len(seen) == res.iterations >= 1
    assert all(v == 1.0 for v in seen)  # r / ||r||_inf: the largest entry is exactly +-1


def test_lapack_single_factorization_option():
    import scipy.linalg

    A, b = make_matrix(12, 1e6, 3, 7)
    F = linalg.lu(A, "s", method="lapack")
    P, L, U = scipy.linalg.lu(A.astype(np.float32))  # getrf in single, another wrapper
    assert np.array_equal(F.L, L.astype(np.float64)) and np.array_equal(F.U, U.astype(np.float64))
    assert np.array_equal(A[F.perm], (P.T @ A))
    res = linalg.gmres_ir(A, b, "s", "d", "q", lu_method="lapack")
    assert res.converged and backward_error(A, res.x, b) <= 12 * U_D
    chopped = linalg.gmres_ir(A, b, "s", "d", "q")
    assert chopped.converged
    with pytest.raises(ValueError, match="lapack"):
        linalg.lu(A, "h", method="lapack")


def test_binary128_rounding_is_exact():
    one = mpmath.mpf(1)
    two = mpmath.mpf(2)
    # ties to even at 113 bits, and just above a tie
    assert binary128_op(mpmath.fadd, one, two**-113) == 1
    with mpmath.workprec(200):
        above = binary128_op(mpmath.fadd, one, two**-113 + two**-150)
        assert above == 1 + two**-112
        assert binary128_op(mpmath.fadd, one + two**-112, two**-113) == 1 + two**-111
    # overflow beyond (2 - 2**-112) * 2**16383 and the subnormal grid 2**-16494
    assert binary128_op(mpmath.fmul, two**16000, two**384) == mpmath.inf
    assert binary128_op(mpmath.fmul, two**-10000, 3 * two**-6496) == two**-16494  # 0.75 ulp -> 1
    assert binary128_op(mpmath.fmul, two**-10000, two**-6495) == 0  # exactly half: to even (0)
    third = Binary128().div_double(Binary128().from_double([1.0]), np.array([3.0]))[0]
    with mpmath.workprec(400):
        assert abs(third - one / 3) <= two**-115  # half an ulp of 1/3 (ulp 2**-114)


def test_binary128_to_double_rounds_once_in_the_subnormal_range():
    # mpmath's to_float rounded to 53 bits (2**-1075 + 2**-1180 became the tie 2**-1075), then ldexp
    # rounded the tie to even: 0. Oracle: Python's float(Fraction), correctly rounded.
    two = mpmath.mpf(2)
    cases = [(mpmath.fadd, two**-1075, two**-1180), (mpmath.fsub, 3 * two**-1076, two**-1180),
             (mpmath.fsub, -(two**-1075), two**-1180), (mpmath.fadd, two**-1075, 0),
             (mpmath.fadd, 3 * two**-1075, 0), (mpmath.fadd, two**-1030, two**-1140)]
    values = np.empty(len(cases), dtype=object)
    values[:] = [binary128_op(f, a, b) for f, a, b in cases]
    exact = [int(mpmath.sign(v)) * Fraction(int(v.man)) * Fraction(2) ** int(v.exp) for v in values]
    want = [float(v) for v in exact]
    got = Binary128().to_double(values)
    assert got.tolist() == want and [math.copysign(1, g) for g in got] == [math.copysign(1, w) for w in want]
    assert want[:5] == [2.0**-1074, 2.0**-1074, -(2.0**-1074), 0.0, 2.0**-1073]  # ties 2**-1075: to even


def test_double_double_is_exact_up_to_double_range():
    # Dekker's splitting (2**27 + 1) a overflowed from |a| = 2**996 on, and ah bh when p neared the
    # largest double: NaN. Oracle: exact products (fractions); a double times a double is a
    # double-double exactly, and so is the quotient by 0.5.
    dd = DoubleDouble()

    def exact(pair):
        return [Fraction(h) + Fraction(l) for h, l in zip(*pair)]

    big = np.array([2.0**1000, 1e300, np.finfo(float).max, 2.0**996 - 2.0**943, 2.0**995])
    c = np.array([0.5, 1 / 3, 1 / 3, 2.0**28 - 2.0**-25, 3.0])
    got = dd.mul_double((big, np.zeros(5)), c)
    assert exact(got) == [Fraction(a) * Fraction(b) for a, b in zip(big, c)]
    divisors = np.array([0.5, 0.5, 2.0])
    assert exact(dd.div_double((big[:3], np.zeros(3)), divisors)) == [Fraction(a) / Fraction(d)
                                                                       for a, d in zip(big, divisors)]
    from pychop_compat.linalg.extended import ext_matvec

    A = np.array([[2.0**1000, 1.0], [3.0, 2.0**1000]])
    v = np.array([1.0, 2.0**-1000])
    assert exact(ext_matvec(dd, A, v)) == [Fraction(2) ** 1000 + Fraction(2) ** -1000, Fraction(4)]


@pytest.mark.parametrize("arith", [DoubleDouble(), Binary128()], ids=["dd", "binary128"])
def test_extended_lu_solve_is_accurate(arith):
    A, b = make_matrix(8, 1e3, 3, 8)
    F = linalg.lu(A, "h")
    got = arith.to_double(ext_lu_solve(arith, F, arith.from_double(b)))
    # exact solution of the factored system (P^T L U) z = b, rounded to double
    with mpmath.workprec(300):
        LU = mpmath.matrix(F.L.tolist()) * mpmath.matrix(F.U.tolist())
        z = mpmath.lu_solve(LU, mpmath.matrix(b[F.perm].tolist()))
        exact = np.array([float(v) for v in z])
    assert np.max(np.abs(got - exact) / np.abs(exact)) <= 2 * U_D


def test_stop_all_without_x_true_uses_an_extended_solution():
    A, b = make_matrix(10, 1e5, 3, 9)
    res = linalg.gmres_ir(A, b, "h", "d", "q", stop="all")
    with mpmath.workprec(200):
        x = np.array([float(v) for v in mpmath.lu_solve(mpmath.matrix(A.tolist()), mpmath.matrix(b.tolist()))])
    assert res.converged
    assert np.max(np.abs(res.x - x)) <= U_D * np.max(np.abs(x)) * 1.01
    assert len(res.forward_error) == len(res.backward_error)


@pytest.mark.parametrize("arith", [DoubleDouble(), Binary128()], ids=["dd", "binary128"])
def test_extended_matvec_is_accurate(arith):
    from pychop_compat.linalg.extended import ext_matvec

    A, v = make_matrix(9, 1e3, 3, 10)
    got = ext_matvec(arith, A, v)
    hi_lo = got if isinstance(got, tuple) else (got, np.zeros(9, dtype=object))
    with mpmath.workprec(300):
        exact = [mpmath.fsum(mpmath.mpf(A[i, j]) * mpmath.mpf(v[j]) for j in range(9)) for i in range(9)]
        assert all(abs((mpmath.mpf(hi_lo[0][i]) + mpmath.mpf(hi_lo[1][i])) - exact[i]) <= abs(exact[i]) * 2.0**-100
                   for i in range(9))


def test_binary128_residual_precision():
    A, b = make_matrix(6, 1e4, 3, 11)
    res = linalg.lu_ir(A, b, "s", "d", "binary128")
    assert res.converged
    x = res.x
    from pychop_compat.linalg import refinement
    from pychop_compat.linalg.arrays import HOST

    r = refinement._residual(HOST, A, x, b, "binary128")
    with mpmath.workprec(300):
        exact = [mpmath.mpf(b[i]) - mpmath.fsum(mpmath.mpf(A[i, j]) * mpmath.mpf(x[j]) for j in range(6))
                 for i in range(6)]
    # binary128 sums of exact products, rounded to double: within a few binary128 ulps
    # of the largest term (|a_ij x_j| <= ~10) plus half a double ulp of the result
    for ri, ei in zip(r, exact):
        assert abs(mpmath.mpf(ri) - ei) <= abs(ei) * 2.0**-53 + 2.0**-105
