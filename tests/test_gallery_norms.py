"""MATLAB's test matrices and norms: gallery_randsvd, norm, cond; and the
reliable path for MATLAB's random inputs (save -v7, scipy.io.loadmat).

Expected values: MATLAB's definitions of randsvd's singular values (written
out below from its documentation), exact rational arithmetic (fractions), and
hand-computed norms of small matrices.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
import scipy.io

import pychop_compat.linalg as linalg
from pychop_compat import Chop
from pychop_compat.linalg.gallery import _singular_values


def expected_sigma(p, kappa, mode):
    if mode == 1:
        return np.r_[1.0, np.full(p - 1, 1 / kappa)]
    if mode == 2:
        return np.r_[np.ones(p - 1), 1 / kappa]
    if mode == 3:
        return np.array([kappa ** (-i / (p - 1)) for i in range(p)])
    if mode == 4:
        return np.array([1 - i / (p - 1) * (1 - 1 / kappa) for i in range(p)])
    raise AssertionError


@pytest.mark.parametrize("mode", [1, 2, 3, 4])
def test_randsvd_singular_values_are_matlabs(mode):
    n, kappa = 12, 1e6
    A = linalg.gallery_randsvd(n, kappa, mode, rng=mode)
    s = np.linalg.svd(A, compute_uv=False)
    np.testing.assert_allclose(s, np.sort(expected_sigma(n, kappa, mode))[::-1], rtol=1e-9, atol=1e-15)
    np.testing.assert_allclose(_singular_values(n, kappa, mode, None), expected_sigma(n, kappa, mode), rtol=1e-14)
    assert _singular_values(n, kappa, -mode, None).tolist() == _singular_values(n, kappa, mode, None)[::-1].tolist()


def test_randsvd_mode_5_and_defaults():
    A = linalg.gallery_randsvd(30, 1e8, 5, rng=1)
    s = np.linalg.svd(A, compute_uv=False)
    assert np.all(s <= 1 + 1e-12) and np.all(s >= 1e-8 * (1 - 1e-9))
    assert np.linalg.cond(A) <= 1e8 * (1 + 1e-6)  # MATLAB: cond(A) <= kappa in mode 5
    B = linalg.gallery_randsvd(10, rng=2)  # kappa = sqrt(1/eps) = 2**26, mode 3
    assert abs(np.linalg.cond(B) / 2**26 - 1) < 1e-6


def test_randsvd_shapes_classes_and_positive_definite():
    assert linalg.gallery_randsvd((4, 7), 10.0, rng=0).shape == (4, 7)
    v = linalg.gallery_randsvd((5, 1), 10.0, rng=0)
    assert v.shape == (5, 1) and abs(np.linalg.norm(v) - 1) < 1e-15
    assert linalg.gallery_randsvd(5, 10.0, classname="single", rng=0).dtype == np.float32
    P = linalg.gallery_randsvd(8, -1e3, 3, rng=3)
    assert np.array_equal(P, P.T)
    ev = np.linalg.eigvalsh(P)
    np.testing.assert_allclose(np.sort(ev), np.sort(expected_sigma(8, 1e3, 3)), rtol=1e-9)
    for bad in (dict(mode=6), dict(mode=0), dict(kappa=0.5), dict(classname="int8")):
        with pytest.raises(ValueError):
            linalg.gallery_randsvd(4, **{"kappa": 10.0, **bad})
    with pytest.raises(NotImplementedError):
        linalg.gallery_randsvd(6, 10.0, 3, 1, 1)


@pytest.mark.parametrize("kappa", [-100.0, math.nan, 0.5, 0.0])
def test_randsvd_refuses_kappa_below_one(kappa):
    """A condition number is at least 1: randsvd gave NaN matrices (kappa < 0, NaN) or cond 2 for
    kappa = 0.5 where gallery_randsvd refuses |kappa| < 1 and NaN."""
    with pytest.raises(ValueError, match="kappa"):
        linalg.randsvd(4, kappa, rng=0)
    if not kappa < 0:  # gallery_randsvd reads kappa < 0 as positive definite with cond -kappa
        with pytest.raises(ValueError, match="kappa"):
            linalg.gallery_randsvd(4, kappa, rng=0)
    assert abs(np.linalg.cond(linalg.randsvd(4, 1.0, rng=0)) - 1) < 1e-12  # kappa = 1: orthogonal


def _exact_det(A):
    """Determinant by Gaussian elimination in rationals (Fraction)."""
    M = [[Fraction(v) for v in row] for row in A.tolist()]
    n, det = len(M), Fraction(1)
    for k in range(n):
        p = next((i for i in range(k, n) if M[i][k]), None)
        if p is None:
            return Fraction(0)
        if p != k:
            M[k], M[p], det = M[p], M[k], -det
        det *= M[k][k]
        for i in range(k + 1, n):
            f = M[i][k] / M[k][k]
            M[i] = [a - f * c for a, c in zip(M[i], M[k])]
    return det


E25 = 2.0**-25
SINGULAR = [
    np.array([[1.0, 2.0], [2.0, 4.0]]),
    np.array([[1.0, 1 + E25], [1 + E25, 1 + 2 * E25 + E25 * E25]]),  # (1 + e)^2 exact in double
    np.array([[0.1, 0.75, 3.0], [2.0**-30, 2.5, 0.125], [0.1 + 2.0**-30, 0.75 + 2.5, 3.0 + 0.125]]),  # rows 1 + 2
]


@pytest.mark.parametrize("p", [1, 2, np.inf, "fro"])
@pytest.mark.parametrize("A", SINGULAR, ids=["rank1", "square", "sum"])
def test_exact_cond_of_a_singular_matrix_is_inf(A, p):
    """cond(A, p, 'exact') is inf for a singular matrix: the 200-bit SVD left sigma_min ~ 1e-60."""
    assert _exact_det(A) == 0
    assert linalg.cond(A, p, "exact") == math.inf


def test_exact_cond_of_nearly_singular_matrices_is_finite():
    """Regular matrices stay regular: det(diag(2^31 - 1, 1)) is 0 modulo 2^31 - 1 but not 0."""
    D = np.diag([2.0**31 - 1, 1.0])
    assert linalg.cond(D, 2, "exact") == linalg.cond(D, 1, "exact") == 2.0**31 - 1
    N = np.array([[1.0, 1.0], [1.0, 1.0 + 2.0**-52]])
    assert _exact_det(N) == Fraction(1, 2**52)
    assert math.isfinite(linalg.cond(N, 2, "exact")) and linalg.cond(N, 1, "exact") > 1e16


A2 = np.array([[1.0, 2.0], [3.0, 4.0]])


def test_norms_of_a_small_matrix():
    assert linalg.norm(A2, 1) == 6.0 and linalg.norm(A2, np.inf) == 7.0 and linalg.norm(A2, "inf") == 7.0
    assert linalg.norm(A2, "fro", "exact") == math.sqrt(30)  # sqrt correctly rounded
    assert linalg.norm(np.array([[3.0, 0.0], [4.0, 0.0]]), 2, "exact") == 5.0
    assert linalg.norm(np.array([[3.0, 0.0], [4.0, 0.0]])) == pytest.approx(5.0, rel=1e-15)
    # inv(A2) = [[-2, 1], [1.5, -0.5]]
    assert linalg.cond(A2, 1, "exact") == 21.0
    assert linalg.cond(A2, np.inf, "exact") == 21.0
    assert linalg.cond(A2, "fro", "exact") == pytest.approx(15.0, rel=1e-15)
    assert linalg.cond(A2, 1) == pytest.approx(21.0, rel=1e-14)
    assert linalg.cond(np.diag([2.0, 0.5]), 2, "exact") == 4.0
    assert linalg.cond(np.array([[1.0, 2.0], [2.0, 4.0]]), 1, "exact") == math.inf
    with pytest.raises(ValueError, match="p must be"):
        linalg.norm(A2, 3)


def test_exact_cond_2_is_the_ratio_of_singular_values_rounded_once():
    # the docstring promised fl(fl(||A||_2) fl(||A^-1||_2)) = fl(10 fl(1/3)) = 3.333333333333333 for
    # diag(10, 3); p = 2 is MATLAB's s(1)/s(end), rounded once: fl(10/3) (fractions). [[1, 1], [0, 1]]
    # has singular values phi and 1/phi: the ratio phi^2 = (3 + sqrt(5)) / 2 (mpmath, 300 bits).
    import mpmath

    D = np.diag([10.0, 3.0])
    assert linalg.cond(D, 2, "exact") == float(Fraction(10, 3)) != float(10 * Fraction(1 / 3))
    assert linalg.cond(D, 1, "exact") == float(10 * Fraction(1 / 3))  # p = 1: the product of the norms
    with mpmath.workprec(300):
        assert linalg.cond(np.array([[1.0, 1.0], [0.0, 1.0]]), 2, "exact") == float((3 + mpmath.sqrt(5)) / 2)


def test_exact_norms_are_correctly_rounded():
    r = np.random.default_rng(0)
    A = r.standard_normal((7, 5)) * 2.0 ** r.integers(-20, 20, (7, 5))
    col = max(sum(abs(Fraction(v)) for v in A[:, j]) for j in range(5))
    row = max(sum(abs(Fraction(v)) for v in A[i]) for i in range(7))
    assert linalg.norm(A, 1, "exact") == float(col)
    assert linalg.norm(A, np.inf, "exact") == float(row)


@pytest.mark.parametrize("fmt", ["h", "b"])
def test_chopped_norms_match_scalar_loops(fmt):
    ch = Chop(format=fmt)
    f = lambda v: float(ch(float(v)))  # noqa: E731
    r = np.random.default_rng(1)
    A = r.standard_normal((6, 4))
    S = ch(A)
    cols = []
    for j in range(4):
        s = abs(S[0, j])
        for i in range(1, 6):
            s = f(s + abs(S[i, j]))
        cols.append(s)
    assert linalg.norm(A, 1, fmt) == max(cols)
    rows = []
    for i in range(6):
        s = abs(S[i, 0])
        for j in range(1, 4):
            s = f(s + abs(S[i, j]))
        rows.append(s)
    assert linalg.norm(A, np.inf, fmt) == max(rows)
    v = S.ravel(order="F")
    s = f(v[0] * v[0])
    for t in v[1:]:
        s = f(s + f(t * t))
    assert linalg.norm(A, "fro", fmt) == f(math.sqrt(s))
    # an fp16-exact inverse: diag(2, 0.5), cond_1 = 4 in every precision
    assert linalg.cond(np.diag([2.0, 0.5]), 1, fmt) == 4.0


@pytest.mark.parametrize("precision", [None, "d", "h", "exact"])
def test_norms_of_matrices_with_nan_or_inf(precision):
    """MATLAB's norm: NaN when an entry is NaN, else Inf when one is Inf, for every p; the 2-norm
    raised LAPACK's "SVD did not converge" on NaN and gave NaN on Inf."""
    for p in (1, 2, np.inf, "fro"):
        assert math.isnan(linalg.norm(np.array([[np.nan, 1.0], [1.0, 1.0]]), p, precision))
        assert math.isnan(linalg.norm(np.array([[np.inf, 1.0], [np.nan, 1.0]]), p, precision))
        assert linalg.norm(np.array([[np.inf, 1.0]]), p, precision) == math.inf
        assert linalg.norm(np.array([[1.0, -np.inf], [2.0, 3.0]]), p, precision) == math.inf
    if precision == "h":  # chopped: the norm of the stored A, whose 1e6 is Inf in fp16 (NumPy's cast)
        with np.errstate(over="ignore"):
            assert np.float16(1e6) == math.inf
        assert linalg.norm(np.array([[1e6, 1.0], [1.0, 1.0]]), 2, "h") == math.inf


def test_matlab_inputs_through_a_mat_file(tmp_path):
    # MATLAB: A = gallery('randsvd', n, kappa, mode); b = randn(n, 1); save('in.mat', 'A', 'b', '-v7')
    # Python: scipy.io.loadmat reads the same doubles.  Here scipy writes the v7
    # (compressed level-5) file that MATLAB's save -v7 writes.
    A = linalg.gallery_randsvd(6, 1e4, 2, rng=5)
    b = np.array([0.5377, 1.8339, -2.2588, 0.8622, 0.3188, -1.3077])[:, None]
    path = tmp_path / "in.mat"
    scipy.io.savemat(path, {"A": A, "b": b}, do_compression=True, format="5")
    data = scipy.io.loadmat(path)
    assert data["A"].dtype == np.float64 and data["A"].shape == (6, 6)
    assert np.array_equal(data["A"], A) and np.array_equal(data["b"], b)
    x = linalg.gmres_ir(data["A"], data["b"].ravel(), "h")
    assert x.converged
