"""Tests of pychop_compat.linalg.

Expected values come from plain float64 arithmetic, NumPy/SciPy, exact
rational arithmetic (fractions, mpmath), the rounding-error bounds of
Higham's *Accuracy and Stability of Numerical Algorithms* (2nd ed.), or the
scalar loops written out below, which call chop on one number at a time.
"""

from __future__ import annotations

import math
import re
from fractions import Fraction
from types import SimpleNamespace

import mpmath
import numpy as np
import pytest
import scipy.linalg

import pychop_compat.linalg as linalg
from pychop_compat import Chop, Options, chop, chop_options, clear_chop
from pychop_compat.kernels.compiled import cpu_engine

# formats exercised by the bit-for-bit tests: fp16, bfloat16, fp8-e4m3, custom
FORMATS = [
    {"format": "h"},
    {"format": "h", "subnormal": 0},
    {"format": "b"},
    {"format": "q43"},
    {"format": "c", "params": [7, 6]},
]
MODES = [1, 2, 3, 4]


def fmt_id(o):
    return "-".join(f"{k}{v}" for k, v in o.items())


def scalar_rounder(options):
    ch = Chop(options)
    return lambda v: float(ch(float(v)))


def sample(rng, shape, spread=6):
    """Signed values over several binades (some overflow q43, some underflow fp16)."""
    return rng.standard_normal(shape) * 2.0 ** rng.integers(-spread, spread, shape)


# ---------------------------------------------------------------------------
# scalar references (one chop call per operation, plain Python loops)
# ---------------------------------------------------------------------------


def ref_inner(a, b, f, method="recursive", block=4, fsum=None):
    """Inner product of two rounded Python lists, rounding with f (sums with fsum)."""
    fsum = fsum or f
    if method == "fma":
        s = f(a[0] * b[0])
        for k in range(1, len(a)):
            s = f(s + a[k] * b[k])
        return s
    if method == "accumulate":  # products exact, every sum rounded with fsum
        s = fsum(a[0] * b[0])
        for k in range(1, len(a)):
            s = fsum(s + a[k] * b[k])
        return s
    p = [f(x * y) for x, y in zip(a, b)]
    if method == "recursive":
        s = p[0]
        for t in p[1:]:
            s = f(s + t)
        return s
    if method == "pairwise":  # Higham (4.3): sum adjacent pairs, carry an odd last term
        while len(p) > 1:
            q = [f(p[i] + p[i + 1]) for i in range(0, len(p) - 1, 2)]
            if len(p) % 2:
                q.append(p[-1])
            p = q
        return p[0]
    if method == "blocked":
        sums = []
        for i in range(0, len(p), block):
            s = p[i]
            for t in p[i + 1 : i + block]:
                s = f(s + t)
            sums.append(s)
        s = sums[0]
        for t in sums[1:]:
            s = f(s + t)
        return s
    raise ValueError(method)


def ref_matmul(A, B, options, method="recursive", block=4, accumulate=None):
    f = scalar_rounder(options)
    fsum = scalar_rounder(accumulate) if accumulate is not None else None
    m, n = A.shape
    p = B.shape[1]
    Ar = [[f(A[i, k]) for k in range(n)] for i in range(m)]
    Br = [[f(B[k, j]) for j in range(p)] for k in range(n)]
    C = np.empty((m, p))
    for i in range(m):
        for j in range(p):
            C[i, j] = ref_inner(Ar[i], [Br[k][j] for k in range(n)], f, method, block, fsum)
    return C


def ref_lu(A, options):
    f = scalar_rounder(options)
    n = A.shape[0]
    a = [[f(A[i, j]) for j in range(n)] for i in range(n)]
    perm = list(range(n))
    for k in range(n):
        piv = max(range(k, n), key=lambda i: abs(a[i][k]))  # first largest
        a[k], a[piv] = a[piv], a[k]
        perm[k], perm[piv] = perm[piv], perm[k]
        if a[k][k] == 0:
            continue
        for i in range(k + 1, n):
            a[i][k] = f(a[i][k] / a[k][k])
        for i in range(k + 1, n):
            for j in range(k + 1, n):
                a[i][j] = f(a[i][j] - f(a[i][k] * a[k][j]))
    a = np.array(a)
    return np.tril(a, -1) + np.eye(n), np.triu(a), np.array(perm)


def ref_solve(L, U, perm, b, options):
    """Column-oriented forward and back substitution, one rounding per operation."""
    f = scalar_rounder(options)
    n = len(b)
    c = [f(b[perm[i]]) for i in range(n)]
    for j in range(n - 1):
        for i in range(j + 1, n):
            c[i] = f(c[i] - f(L[i, j] * c[j]))
    for j in range(n - 1, -1, -1):
        c[j] = f(c[j] / U[j, j])
        for i in range(j):
            c[i] = f(c[i] - f(U[i, j] * c[j]))
    return np.array(c)


def same(x, y):
    """Equal elementwise, NaN equal to NaN (MATLAB isequal semantics)."""
    x, y = np.asarray(x), np.asarray(y)
    return x.shape == y.shape and bool(np.all((x == y) | (np.isnan(x) & np.isnan(y))))


# ---------------------------------------------------------------------------
# kernels: bit-for-bit
# ---------------------------------------------------------------------------


def test_matmul_double_is_plain_float64_recursive_summation():
    rng = np.random.default_rng(1)
    A, B = rng.standard_normal((7, 23)), rng.standard_normal((23, 5))
    C = linalg.matmul(A, B, {"format": "d"})
    assert C.dtype == np.float64
    for i in range(7):
        for j in range(5):
            s = A[i, 0] * B[0, j]
            for k in range(1, 23):
                s = s + A[i, k] * B[k, j]
            assert C[i, j] == s
    # and within rounding of NumPy's (differently ordered) product
    assert np.allclose(C, A @ B, rtol=0, atol=23 * 2.0**-52 * (np.abs(A) @ np.abs(B)).max())


def test_dot_double_is_plain_float64_recursive_summation_long():
    rng = np.random.default_rng(21)
    x, y = rng.standard_normal(3000), rng.standard_normal(3000)
    s = x[0] * y[0]
    for k in range(1, 3000):
        s = s + x[k] * y[k]
    assert linalg.dot(x, y, "d") == s
    assert linalg.dot(x, y, "d", method="fma") == s
    A = np.vstack([x, y])
    assert same(linalg.matvec(A, y, "d"), [s, linalg.dot(y, y, "d")])


@pytest.mark.parametrize("method", ["pairwise", "blocked", "fma"])
def test_matmul_double_other_methods(method):
    rng = np.random.default_rng(2)
    A, B = rng.standard_normal((3, 13)), rng.standard_normal((13, 4))
    C = linalg.matmul(A, B, "d", method=method, block_size=4)
    ident = lambda v: v  # noqa: E731  (double arithmetic rounds by itself)
    for i in range(3):
        for j in range(4):
            assert C[i, j] == ref_inner(list(A[i]), list(B[:, j]), ident, method, 4)


@pytest.mark.parametrize("options", FORMATS, ids=fmt_id)
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("method", ["recursive", "fma", "pairwise", "blocked"])
def test_matmul_matches_scalar_loop(options, mode, method):
    rng = np.random.default_rng(mode)
    A, B = sample(rng, (3, 11)), sample(rng, (11, 4))
    opts = dict(options, round=mode)
    C = linalg.matmul(A, B, opts, method=method, block_size=4)
    assert same(C, ref_matmul(A, B, opts, method, block=4))


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("method", ["recursive", "pairwise", "blocked"])
@pytest.mark.parametrize("pair", [("h", "s"), ("b", "s"), ("q43", "h"), ("q52", "b")])
def test_matmul_accumulate_matches_scalar_loop(pair, mode, method):
    rng = np.random.default_rng(10 + mode)
    A, B = sample(rng, (3, 9), 3), sample(rng, (9, 2), 3)
    fa, fb = {"format": pair[0], "round": mode}, {"format": pair[1], "round": mode}
    C = linalg.matmul(A, B, fa, accumulate=fb, method=method, block_size=4)
    if method == "recursive":
        ref = ref_matmul(A, B, fa, "accumulate", accumulate=fb)
    else:  # exact products, every sum rounded to B, a lone term rounded to B
        f, g = scalar_rounder(fa), scalar_rounder(fb)
        ref = np.empty((3, 2))
        for i in range(3):
            for j in range(2):
                a = [f(v) for v in A[i]]
                b = [f(v) for v in B[:, j]]
                p = [x * y for x, y in zip(a, b)]
                if method == "pairwise":
                    while len(p) > 1:
                        q = [g(p[k] + p[k + 1]) for k in range(0, len(p) - 1, 2)]
                        p = q + ([p[-1]] if len(p) % 2 else [])
                    ref[i, j] = p[0]
                else:
                    sums = []
                    for k in range(0, 9, 4):
                        s = g(p[k])
                        for t in p[k + 1 : k + 4]:
                            s = g(s + t)
                        sums.append(s)
                    s = sums[0]
                    for t in sums[1:]:
                        s = g(s + t)
                    ref[i, j] = s
    assert same(C, ref)


@pytest.mark.parametrize("mode", MODES)
def test_dot_and_matvec_match_scalar_loop(mode):
    rng = np.random.default_rng(20 + mode)
    opts = {"format": "b", "round": mode}
    A, x, y = sample(rng, (5, 17)), sample(rng, 17), sample(rng, 17)
    v = linalg.matvec(A, x, opts)
    assert v.shape == (5,)
    assert same(v, ref_matmul(A, x[:, None], opts)[:, 0])
    d = linalg.dot(x, y, opts)
    assert np.ndim(d) == 0
    assert same(d, ref_matmul(x[None, :], y[:, None], opts)[0, 0])


def test_matmul_known_values():
    # 4096 ones: fp16 recursive summation stagnates at 2048 (2048 + 1 is a
    # tie, rounded to even); the other orders are exact.
    x = np.ones(4096)
    assert linalg.dot(x, x, "h") == 2048
    assert linalg.dot(x, x, "h", method="fma") == 2048
    assert linalg.dot(x, x, "h", method="pairwise") == 4096
    assert linalg.dot(x, x, "h", method="blocked", block_size=32) == 4096
    assert linalg.dot(x, x, "h", accumulate="s") == 4096
    # bfloat16 stagnates at 256 (t = 8)
    assert linalg.dot(x, x, "b") == 256


def test_matmul_keeps_single_precision():
    rng = np.random.default_rng(3)
    A = rng.standard_normal((4, 6)).astype(np.float32)
    B = rng.standard_normal((6, 3)).astype(np.float32)
    C = linalg.matmul(A, B, "h")
    assert C.dtype == np.float32
    f = Chop(format="h")
    A, B = f(A), f(B)  # inputs are stored in the format first
    assert A.dtype == np.float32
    for i in range(4):
        for j in range(3):
            s = f(np.float32(A[i, 0] * B[0, j]))
            for k in range(1, 6):
                s = f(np.float32(s + f(np.float32(A[i, k] * B[k, j]))))
            assert C[i, j] == s


def test_matmul_shapes_and_errors():
    A = np.ones((3, 4))
    assert linalg.matmul(A, np.ones(4), "h").shape == (3,)
    assert linalg.matmul(np.ones(3), A, "h").shape == (4,)
    assert linalg.matmul(np.ones((3, 0)), np.ones((0, 2)), "h").shape == (3, 2)
    with pytest.raises(ValueError):
        linalg.matmul(A, A, "h")
    with pytest.raises(ValueError):
        linalg.matmul(A, A.T, "h", method="kahan")


# ---------------------------------------------------------------------------
# options handling
# ---------------------------------------------------------------------------


def test_options_spellings_agree_and_persistent_options_are_used_untouched():
    rng = np.random.default_rng(4)
    A, B = rng.standard_normal((4, 9)), rng.standard_normal((9, 3))
    want = ref_matmul(A, B, {"format": "b", "round": 2})
    for spec in ({"format": "b", "round": 2}, Options(format="b", round=2),
                 SimpleNamespace(format="b", round=2)):
        assert same(linalg.matmul(A, B, spec), want)
    clear_chop()
    try:
        chop(None, {"format": "b", "round": 2})
        before = chop_options()
        assert same(linalg.matmul(A, B), want)
        assert same(linalg.lu(A[:4, :4]).U, linalg.lu(A[:4, :4], {"format": "b", "round": 2}).U)
        after = chop_options()
        assert (after.format, after.round, after.subnormal) == (before.format, before.round, before.subnormal)
        assert chop(1 / 3) == chop(1 / 3, {"format": "b", "round": 2})
    finally:
        clear_chop()


def test_stochastic_rounding_reproducible_from_randfunc():
    rng = np.random.default_rng(5)
    A, B = rng.standard_normal((6, 40)), rng.standard_normal((40, 6))

    def opts(seed):
        g = np.random.default_rng(seed)
        return {"format": "h", "round": 5, "randfunc": lambda n: g.random(n)}

    C1 = linalg.matmul(A, B, opts(7))
    C2 = linalg.matmul(A, B, opts(7))
    C3 = linalg.matmul(A, B, opts(8))
    assert same(C1, C2)
    assert not same(C1, C3)


def test_persistent_stochastic_options_draw_like_chop_calls_in_documented_order():
    """options=None: the draws are those of calling chop(v) with the persistent
    options, in the documented order (inputs, then per k products and sums)."""
    from pychop_compat import rng

    g = np.random.default_rng(9)
    A, B = g.standard_normal((3, 6)), g.standard_normal((6, 4))
    clear_chop()
    try:
        chop(None, {"format": "b", "round": 5})
        rng(3)
        C = linalg.matmul(A, B)
        rng(3)
        Ar, Br = chop(A), chop(B)
        s = chop(Ar[:, :1] * Br[:1, :])
        for k in range(1, 6):
            s = chop(s + chop(Ar[:, k : k + 1] * Br[k : k + 1, :]))
        assert same(C, s)
        rng(4)
        assert not same(linalg.matmul(A, B), C)
    finally:
        clear_chop()


# ---------------------------------------------------------------------------
# kernels: error bounds (Higham, ch. 3-4)
# ---------------------------------------------------------------------------


def gamma(k, u):
    return k * u / (1 - k * u)


def exact_matmul(A, B):
    m, n = A.shape
    return [[sum(Fraction(A[i, k]) * Fraction(B[k, j]) for k in range(n)) for j in range(B.shape[1])]
            for i in range(m)]


@pytest.mark.parametrize("mode", [1, 2, 3, 4, 5, 6])
@pytest.mark.parametrize("method", ["recursive", "fma", "pairwise", "blocked", "accumulate"])
def test_matmul_error_bound(mode, method):
    """|C - AB| <= gamma_k |A||B| for fp16 data (rounded, magnitudes in [1/2, 2])."""
    rng = np.random.default_rng(30 + mode)
    n, b = 64, 8
    f = Chop(format="h")
    A = f(rng.uniform(0.5, 2, (6, n)) * rng.choice([-1, 1], (6, n)))
    B = f(rng.uniform(0.5, 2, (n, 5)) * rng.choice([-1, 1], (n, 5)))
    opts = {"format": "h", "round": mode}
    # per-operation relative error: 2^-11 for round to nearest (exact, as
    # 2t+2 <= 53); below one ulp, 2^-10, for the other modes, plus the
    # rounding of the double intermediate.
    u = 2.0**-11 if mode == 1 else 2.0**-10 + 2.0**-52
    if method == "accumulate":
        C = linalg.matmul(A, B, opts, accumulate={"format": "s", "round": mode})
        k, u = n, (2.0**-24 if mode == 1 else 2.0**-23 + 2.0**-52)
    else:
        C = linalg.matmul(A, B, opts, method=method, block_size=b)
        k = {"recursive": n, "fma": n, "pairwise": math.ceil(math.log2(n)) + 1,
             "blocked": b + math.ceil(n / b) - 1}[method]
    exact = exact_matmul(A, B)
    absprod = np.abs(A) @ np.abs(B)  # exact: small integers times 2^-20 fit in double
    for i in range(6):
        for j in range(5):
            err = abs(Fraction(C[i, j]) - exact[i][j])
            assert err <= Fraction(gamma(k, u)) * Fraction(absprod[i, j])


# ---------------------------------------------------------------------------
# LU and solve
# ---------------------------------------------------------------------------


def test_lu_double_matches_scipy():
    rng = np.random.default_rng(6)
    A = rng.standard_normal((30, 30))
    F = linalg.lu(A, "d")
    P, L, U = scipy.linalg.lu(A)  # A = P L U
    assert np.array_equal(F.P, P.T)
    assert np.array_equal(A[F.perm], P.T @ A)
    tol = 30 * 2.0**-53 * np.abs(L) @ np.abs(U)
    assert np.all(np.abs(F.L - L) <= 1e3 * tol.max())
    assert np.all(np.abs(F.U - U) <= 1e3 * tol.max())
    assert np.allclose(F.L @ F.U, A[F.perm], rtol=0, atol=tol.max())
    L2, U2, p2 = F  # unpacks
    assert L2 is F.L and U2 is F.U and p2 is F.perm
    assert F.info == 0


@pytest.mark.parametrize("options", FORMATS, ids=fmt_id)
@pytest.mark.parametrize("mode", MODES)
def test_lu_matches_scalar_loop(options, mode):
    rng = np.random.default_rng(40 + mode)
    A = sample(rng, (7, 7), 3)
    opts = dict(options, round=mode)
    F = linalg.lu(A, opts)
    L, U, perm = ref_lu(A, opts)
    assert np.array_equal(F.perm, perm)
    assert same(F.L, L) and same(F.U, U)


@pytest.mark.parametrize("options", FORMATS[:4], ids=fmt_id)
@pytest.mark.parametrize("mode", MODES)
def test_solve_matches_scalar_loop(options, mode):
    rng = np.random.default_rng(50 + mode)
    A = rng.standard_normal((8, 8)) + 4 * np.eye(8)
    b = rng.standard_normal(8)
    opts = dict(options, round=mode)
    F = linalg.lu(A, opts)
    want = ref_solve(F.L, F.U, F.perm, b, opts)
    assert same(linalg.solve(A, b, opts), want)
    assert same(linalg.solve(F, b, opts), want)
    assert same(linalg.solve((F.L, F.U, F.P), b, opts), want)  # MATLAB-style P
    assert same(linalg.solve((F.L, F.U, F.perm), b, opts), want)
    B2 = np.column_stack([b, 2 * b])
    X = linalg.solve(F, B2, opts)
    assert same(X[:, 0], want) and same(X[:, 1], ref_solve(F.L, F.U, F.perm, 2 * b, opts))


def test_solve_double_matches_scipy():
    rng = np.random.default_rng(7)
    A, b = rng.standard_normal((40, 40)), rng.standard_normal(40)
    x = linalg.solve(A, b, "d")
    xs = scipy.linalg.solve(A, b)
    kappa = np.linalg.cond(A, np.inf)
    assert np.linalg.norm(x - xs, np.inf) <= 100 * kappa * 2.0**-53 * np.linalg.norm(xs, np.inf)


def test_solve_of_a_single_matrix_and_a_double_b_is_double():
    # every operation is in single only when all array inputs are single: the LU of a float32 A ran in
    # single when b was float64 (errors 7e-8, not 1e-15). Oracle: NumPy's LU in double.
    rng = np.random.default_rng(0)
    A32, b = rng.standard_normal((6, 6)).astype(np.float32), rng.standard_normal(6)
    ref = np.linalg.solve(A32.astype(np.float64), b)
    kappa = np.linalg.cond(A32.astype(np.float64), np.inf)
    for rhs in (b, b[:, None]):
        x = linalg.solve(A32, rhs, "d")
        assert x.dtype == np.float64
        assert np.max(np.abs(x.ravel() - ref)) <= 100 * kappa * 2.0**-53 * np.max(np.abs(ref))


def test_lu_zero_pivot_info():
    A = np.array([[0.0, 1.0, 2.0], [0.0, 3.0, 4.0], [0.0, 5.0, 7.0]])
    with pytest.warns(linalg.SingularMatrixWarning):
        F = linalg.lu(A, "h")
    assert F.info == 1
    assert np.all(F.L[1:, 0] == 0)


def test_singular_warning_names_the_callers_line():
    # The warning was attributed to a line of the package (the ieee decorator), so Python's
    # default filter (once per line) showed only the first one of a session. Each call of each
    # public entry, from its own line of this file, must warn (S and 2 S are exactly singular).
    import warnings

    S = np.array([[1.0, 2.0], [2.0, 4.0]])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("default")
        linalg.lu(S, "h")
        linalg.lu(2 * S, "h")
        linalg.solve(S, np.ones(2), "h")
        linalg.solve(linalg.LUResult(np.eye(2), np.zeros((2, 2)), np.arange(2)), np.ones(2), "h")
        linalg.lu_ir(S, np.ones(2))
        linalg.lu(S, "s", method="lapack")
    found = [w for w in caught if issubclass(w.category, linalg.SingularMatrixWarning)]
    assert len(found) == 6
    assert {w.filename for w in found} == {__file__}
    assert len({w.lineno for w in found}) == 6


def test_lapack_lu_refuses_options_it_would_ignore():
    # LAPACK's getrf rounds to nearest with subnormals, the format's range and no flips: other
    # options were accepted and silently ignored (lu, and lu_ir/gmres_ir with lu_method='lapack')
    A = np.array([[4.0, 1.0], [1.0, 3.0]])
    ignored = [{"format": "s", "round": 2}, {"format": "s", "round": 5}, {"format": "s", "subnormal": 0},
               {"format": "s", "explim": 0}, {"format": "d", "flip": 1}]
    for o in ignored:
        with pytest.raises(ValueError, match="would be ignored"):
            linalg.lu(A, o, method="lapack")
        for solver in (linalg.lu_ir, linalg.gmres_ir):
            with pytest.raises(ValueError, match="would be ignored"):
                solver(A, np.ones(2), o, lu_method="lapack")
    for o in ("s", {"format": "d", "round": 1}):  # what LAPACK does is accepted
        assert linalg.lu(A, o, method="lapack").info == 0


def test_solve_refuses_b_that_is_not_a_vector_or_matrix():
    """A 0-d b failed with an IndexError inside, a 3-D b with a broadcasting error."""
    A = np.array([[2.0, 1.0], [1.0, 3.0]])
    for b in (np.array(1.0), np.ones((2, 1, 1))):
        message = rf"b must have shape \(n,\) or \(n, k\), got shape {re.escape(str(b.shape))}"
        with pytest.raises(ValueError, match=message):
            linalg.solve(A, b, "h")


def test_lu_and_lutx_chop_nan_pivot_rules():
    """As documented: lu takes the first NaN of a pivot column as pivot (numpy.argmax's rule, the
    ``i?amax`` rule Demmel et al. propose), lutx_chop skips NaN as MATLAB's ``max`` does; so on
    these fp16 matrices their row orders differ, while without NaN they agree."""
    for A, lu_perm, lutx_perm in [(np.array([[1.0, 2.0], [np.nan, 3.0]]), [1, 0], [0, 1]),
                                  (np.array([[np.nan, 2.0], [1.0, 3.0]]), [0, 1], [1, 0]),
                                  (np.array([[1.0, 2.0, 0.0], [np.nan, 3.0, 1.0], [5.0, 1.0, 1.0]]),
                                   [1, 0, 2], [2, 0, 1])]:
        for engine in ("numpy", "auto"):  # the NumPy steps and, where Numba is, the compiled kernel
            with cpu_engine(engine), pytest.warns(linalg.SingularMatrixWarning):
                F = linalg.lu(A, "h")
            assert F.perm.tolist() == lu_perm
        assert linalg.lutx_chop(A, "h")[2].tolist() == lutx_perm
    B = np.array([[1.0, 2.0, 0.0], [0.5, 3.0, 1.0], [5.0, 1.0, 1.0]])
    assert linalg.lu(B, "h").perm.tolist() == linalg.lutx_chop(B, "h")[2].tolist() == [2, 1, 0]


def exact_abs_matmul(X, Y):
    n = X.shape[1]
    return [[sum(abs(Fraction(X[i, k])) * abs(Fraction(Y[k, j])) for k in range(n))
             for j in range(Y.shape[1])] for i in range(X.shape[0])]


@pytest.mark.parametrize("fmt,mode", [("h", 1), ("b", 1), ("h", 2), ("h", 4)])
def test_lu_and_solve_backward_error_bounds(fmt, mode):
    """Higham Thm 9.3: P A + dA = L U, |dA| <= gamma_n |L||U|;
    Thm 9.4: (P A + dA) x = P b, |dA| <= gamma_3n |L||U|."""
    rng = np.random.default_rng(8)
    n = 12
    opts = {"format": fmt, "round": mode}
    f = Chop(opts)
    A = f(rng.standard_normal((n, n)))  # already in the format: no input rounding
    b = f(rng.standard_normal(n))
    F = linalg.lu(A, opts)
    x = linalg.solve(F, b, opts)
    t = f.options.params[0]
    u = 2.0**-t if mode == 1 else 2.0 ** (1 - t) + 2.0**-52
    LU = exact_matmul(F.L, F.U)
    absLU = exact_abs_matmul(F.L, F.U)
    PA = A[F.perm]
    for i in range(n):
        for j in range(n):
            assert abs(LU[i][j] - Fraction(PA[i, j])) <= Fraction(gamma(n, u)) * absLU[i][j]
    Pb = b[F.perm]
    for i in range(n):
        res = Fraction(Pb[i]) - sum(Fraction(PA[i, j]) * Fraction(x[j]) for j in range(n))
        bound = sum(absLU[i][j] * abs(Fraction(x[j])) for j in range(n))
        assert abs(res) <= Fraction(gamma(3 * n, u)) * bound


# ---------------------------------------------------------------------------
# iterative refinement
# ---------------------------------------------------------------------------


def mp_solve(A, b):
    """Exact solution of the double system, to 200 bits, rounded to double."""
    with mpmath.workprec(200):
        x = mpmath.lu_solve(mpmath.matrix(A.tolist()), mpmath.matrix(b.tolist()))
        return np.array([float(v) for v in x])


def rel_err(x, xt):
    return np.linalg.norm(x - xt, np.inf) / np.linalg.norm(xt, np.inf)


def test_randsvd_condition_number():
    for mode in (1, 2, 3, 4, 5):
        A = linalg.randsvd(15, 1e5, mode=mode, rng=mode)
        assert abs(np.linalg.cond(A) / 1e5 - 1) < 1e-6
        s = np.linalg.svd(A, compute_uv=False)
        assert abs(s[0] - 1) < 1e-12


def test_lu_ir_converges_for_well_conditioned_system():
    n = 30
    A = linalg.randsvd(n, 1e2, mode=3, rng=11)
    b = np.random.default_rng(11).standard_normal(n)
    xt = mp_solve(A, b)
    # stop='change': refine until the iterate stops changing in double
    res = linalg.lu_ir(A, b, "h", "d", "q", x_true=xt, stop="change")
    assert res.converged and res.status == "converged"
    assert rel_err(res.x, xt) <= 2.0**-52  # double accuracy (ur = u^2 simulated)
    assert res.backward_error[-1] <= 2.0**-53
    assert len(res.forward_error) == len(res.backward_error) == res.iterations + 1
    assert res.gmres_iterations == []
    # the first iterate has only fp16 accuracy, refinement improves it
    assert res.forward_error[0] > 1e-6
    # the LU factors are the fp16 factors of A
    F = linalg.lu(A, "h")
    assert same(res.factors.U, F.U)


def test_lu_ir_working_single_residual_double():
    n = 20
    A = linalg.randsvd(n, 10.0, mode=3, rng=12)
    b = np.random.default_rng(12).standard_normal(n)
    res = linalg.lu_ir(A, b, "b", "s", "d", max_iter=20, stop="change")
    assert res.converged
    As = Chop(format="s")(A)
    bs = Chop(format="s")(b)
    xt = mp_solve(As, bs)  # the problem as stored in single
    assert rel_err(res.x, xt) <= 10 * 2.0**-24
    assert np.all(Chop(format="s")(res.x) == res.x)  # iterates stored in single


def test_gmres_ir_converges_where_lu_ir_fails():
    n = 40
    A = linalg.randsvd(n, 1e7, mode=2, rng=13)
    b = np.random.default_rng(13).standard_normal(n)
    xt = mp_solve(A, b)
    assert np.linalg.cond(A, np.inf) * 2.0**-11 > 1e3  # far outside LU-IR's range
    lu_res = linalg.lu_ir(A, b, "h", "d", "q", x_true=xt)
    gm_res = linalg.gmres_ir(A, b, "h", "d", "q", x_true=xt, stop="change")
    assert not lu_res.converged
    assert lu_res.forward_error[-1] > 1e-2
    assert gm_res.converged
    assert rel_err(gm_res.x, xt) <= 2.0**-52
    assert len(gm_res.gmres_iterations) == gm_res.iterations
    assert all(1 <= k <= n for k in gm_res.gmres_iterations)
    assert gm_res.backward_error[-1] <= 2.0**-53


def test_gmres_ir_single_working_precision():
    n = 20
    A = linalg.randsvd(n, 1e4, mode=3, rng=14)
    b = np.random.default_rng(14).standard_normal(n)
    res = linalg.gmres_ir(A, b, "h", "s", "d", gmres_tol=1e-4, stop="change")
    s = Chop(format="s")
    xt = mp_solve(s(A), s(b))
    assert res.converged
    assert rel_err(res.x, xt) <= 1e3 * 2.0**-24
    assert "GMRES its" in res.table()


def test_gmres_ir_converges_on_scaled_well_conditioned_systems():
    # GMRES's ||z||_2 = sqrt(z . z) overflowed (s = 1e-160: z about 1e160) or underflowed (s = 1e200)
    # and GMRES stopped at once: 'stagnated', no GMRES iteration. The system is s B x = s B 1 with
    # B diagonally dominant (kappa small): MATLAB's norm does not overflow, and refinement converges
    # to x = 1 (up to the rounding of b) as at s = 1.
    B = np.random.default_rng(0).standard_normal((5, 5)) + 4 * np.eye(5)
    for s in (1e-160, 1e200):
        res = linalg.gmres_ir(s * B, s * B @ np.ones(5), "h", scaling="general", theta=0.1)
        assert res.status == "converged" and all(k > 0 for k in res.gmres_iterations)
        assert np.max(np.abs(res.x - 1)) <= 1e-14


def test_double_double_residual_of_entries_near_realmax():
    # Dekker's splitting of |a| >= 2**996 overflowed: NaN residuals, lu_ir/gmres_ir 'diverged' for
    # finite systems with entries near 1e300. Oracle: the exact residual (fractions) rounded once.
    from pychop_compat.linalg.extended import residual_dd

    A = np.array([[1e300, -3e299 * (1 + 2.0**-40)], [2.0**-30, 7e299]])
    x = np.array([1 + 2.0**-52, 3.0])
    b = np.array([1e299, -2e300])
    exact = [float(Fraction(b[i]) - sum(Fraction(A[i, j]) * Fraction(x[j]) for j in range(2))) for i in range(2)]
    assert residual_dd(linalg.arrays.HOST, A, x, b).tolist() == exact
    B = np.random.default_rng(0).standard_normal((5, 5)) + 4 * np.eye(5)
    for solver in (linalg.lu_ir, linalg.gmres_ir):
        res = solver(1e300 * B, 1e300 * B @ np.ones(5), "h", "d", "d", scaling="general", theta=0.1)
        assert res.status == "converged" and np.max(np.abs(res.x - 1)) <= 1e-14


def test_gmres_ir_with_double_double_at_entries_near_realmax():
    # Dekker's splitting in double-double (up='q') overflowed for entries from 2**996 on: NaN
    # preconditioned residuals, 'stagnated' with no GMRES iteration for B * 2**1000. Scaling by a power
    # of two is exact: x = 1 solves the system up to the rounding of b (kappa 1e3: ~1e-13).
    B = linalg.randsvd(8, 1e3, rng=0)
    A = B * 2.0**1000
    res = linalg.gmres_ir(A, A @ np.ones(8), "h", "d", "q", scaling="general")
    assert res.status == "converged" and all(k > 0 for k in res.gmres_iterations)
    assert np.max(np.abs(res.x - 1)) <= 1e3 * 8 * 2.0**-53


def test_frobenius_norm_and_cond_do_not_overflow_in_double():
    # sqrt(sum a_ij^2) overflowed (inf) or underflowed (0) although ||A||_F is a double; oracle:
    # exact sums of squares (fractions) and a 200-bit square root, rounded once, as MATLAB's norm.
    def exact_fro(M):
        q = sum(Fraction(v) ** 2 for v in np.ravel(M))
        with mpmath.workprec(200):
            return float(mpmath.sqrt(mpmath.mpf(q.numerator) / q.denominator))

    for M in (np.array([[1e200, 1e200]]), np.array([[1e-200, 1e-200]]), np.array([[3e160, 0.0], [4e160, 1e-300]])):
        assert linalg.norm(M, "fro") == pytest.approx(exact_fro(M), rel=4 * 2.0**-53) and exact_fro(M) > 0
    assert linalg.cond(np.diag([1e200, 1e200]), "fro") == pytest.approx(2.0, rel=1e-15)  # ||A||_F ||A^-1||_F
    assert linalg.cond(np.diag([1e-200, 1e-200]), "fro") == pytest.approx(2.0, rel=1e-15)
    A = np.array([[2.0, 1.0], [1.0, 3.0]])  # no overflow: NumPy's formula, as before
    assert linalg.norm(A, "fro") == np.sqrt(15.0) and linalg.cond(A, "fro") == np.linalg.cond(A, "fro")


def test_frobenius_norm_of_entries_at_or_above_2_to_the_1023():
    # the scaling 2**k at or above max|a_ij| was 2**1024 here, past double (math.ldexp raised
    # OverflowError); 2**1023 is as exact.  Oracle: 200-bit mpmath, rounded; a norm past the
    # largest double is Inf, as MATLAB's norm([1.7e308 1.7e308], 'fro').
    with mpmath.workprec(200):
        exact = float(mpmath.sqrt(2) * mpmath.mpf(1e308))
    assert linalg.norm(np.array([[1e308, 1e308]]), "fro") == pytest.approx(exact, rel=4 * 2.0**-53)
    assert linalg.norm(np.array([[1.7e308], [1.7e308]]), "fro") == np.inf
    assert linalg.cond(np.diag([1e308, 1e308]), "fro") == pytest.approx(2.0, rel=1e-15)  # ||A||_F ||A^-1||_F


def test_norm_of_a_row_is_its_vector_norm():
    # MATLAB's norm treats a 1 x n matrix as a vector: norm([1 2 3], 1) = 6, norm([1 2 3], Inf) = 3
    # (the matrix norms of the row, max column and max row sums, are 3 and 6), in every mode
    r = np.array([[1.0, 2.0, 3.0]])
    for precision in (None, "exact", "h"):
        assert linalg.norm(r, 1, precision) == 6.0 and linalg.norm(r, np.inf, precision) == 3.0
        assert linalg.norm(r.T, 1, precision) == 6.0 and linalg.norm(r.T, np.inf, precision) == 3.0
    assert linalg.norm(np.array([[1.0, 2.0], [3.0, 4.0]]), 1) == 6.0  # a matrix keeps its matrix norm


def test_cond_of_matrices_with_nan_or_inf_agrees_across_modes():
    # NaN: SVD did not converge (LinAlgError, mpmath's RuntimeError) for p = 2 and inf for 'h' with
    # p = 1. MATLAB: cond(A, 2) calls svd, which refuses NaN and Inf; for other p, norm(A, p) * ...
    # is NaN when A has a NaN (and Inf when it has an Inf, no NaN).
    N = np.array([[np.nan, 1.0], [2.0, 3.0]])
    I = np.array([[np.inf, 1.0], [2.0, 3.0]])
    for precision in (None, "exact", "h"):
        for M in (N, I):
            with pytest.raises(ValueError, match="NaN or Inf"):
                linalg.cond(M, 2, precision)
        for p in (1, np.inf, "fro"):
            assert math.isnan(linalg.cond(N, p, precision))
            assert linalg.cond(I, p, precision) == math.inf


def test_exact_cond_is_the_product_of_correctly_rounded_norms():
    # each entry of inv(A) was rounded to double before the norm's rational sum: 8.121568627450982;
    # ||A||_1 = 19 and ||inv(A)||_1 = 109/255 exactly (inv(A) = adj(A) / det(A), det(A) = -255)
    A = np.array([[7.0, 3.0, 0.0], [-4.0, -4.0, -9.0], [-8.0, -9.0, -6.0]])
    inv = [[Fraction(int(v), -255) for v in row] for row in [[-57, 18, -27], [48, -42, 63], [4, 39, -16]]]
    assert all(sum(Fraction(int(A[i, k])) * inv[k][j] for k in range(3)) == (i == j) for i in range(3)
               for j in range(3))
    norm1_inv = max(sum(abs(inv[i][j]) for i in range(3)) for j in range(3))
    assert norm1_inv == Fraction(109, 255)
    assert linalg.cond(A, 1, "exact") == 19.0 * float(norm1_inv) == 8.12156862745098
    norminf_inv = max(sum(abs(v) for v in row) for row in inv)
    assert linalg.cond(A, np.inf, "exact") == 23.0 * float(norminf_inv)  # ||A||_inf = 23


def test_cond_2_of_a_rectangular_matrix():
    # MATLAB's cond takes m x n matrices for p = 2: sigma_max / sigma_min of the min(m, n) values;
    # singular values of [[1, 0, 0], [0, 2, 0]] are 2 and 1; a rank-deficient one gives Inf
    R = np.array([[1.0, 0.0, 0.0], [0.0, 2.0, 0.0]])
    for precision in (None, "exact", "h"):
        assert linalg.cond(R, 2, precision) == linalg.cond(R.T, 2, precision) == 2.0
    assert linalg.cond(np.array([[1.0, 2.0, 3.0], [2.0, 4.0, 6.0]]), 2, "exact") == math.inf
    with pytest.raises(ValueError, match="square"):
        linalg.cond(R, 1)


def test_gallery_randsvd_full_bandwidth_and_method():
    # MATLAB reduces the bandwidth only when kl < n-1 or ku < n-1: kl = ku = 10 >= 3 is a full
    # matrix (was NotImplementedError); its singular values are mode 3's 10^(-i/3), i = 0..3.
    # method is 0 or 1 in MATLAB: 7 was accepted silently.
    A = linalg.gallery_randsvd(4, 10, 3, 10, 10, rng=0)
    want = [10.0 ** (-i / 3) for i in range(4)]
    np.testing.assert_allclose(np.linalg.svd(A, compute_uv=False), want, rtol=1e-13)
    assert np.array_equal(A, linalg.gallery_randsvd(4, 10, 3, rng=0))
    with pytest.raises(NotImplementedError, match="bandwidth"):
        linalg.gallery_randsvd(4, 10, 3, 2, 3)
    with pytest.raises(ValueError, match="method must be 0 or 1"):
        linalg.gallery_randsvd(4, 10, 3, method=7)
    assert linalg.gallery_randsvd(4, 10, 3, method=1, rng=0).shape == (4, 4)


def test_option_objects_are_read_as_chop_reads_them():
    # chop reads the option names of an object with attributes and, like for a dict, refuses
    # a field that is not an option (issue 18); the kernels must do the same, and agree with
    # the dict spelling.
    from types import SimpleNamespace

    A = np.array([[1 / 3, 2 / 3], [1 / 7, 5 / 7]])
    struct = SimpleNamespace(format="b", round=2)
    assert np.array_equal(linalg.matmul(A, A, struct), linalg.matmul(A, A, {"format": "b", "round": 2}))
    with pytest.raises(ValueError, match=r"Unknown chop option\(s\) \['note'\]"):
        linalg.matmul(A, A, SimpleNamespace(format="b", round=2, note="not an option"))
    assert np.array_equal(linalg.matmul(A, A, "b"), linalg.matmul(A, A, {"format": "b"}))


def test_negative_iteration_counts_are_refused():
    # max_iter = -1 gave status 'maxiter' with no iterate measured, gmres_maxit = -1 NumPy's
    # "negative dimensions"; 0 means no step (one backward error, of x_0)
    A, b = np.array([[4.0, 1.0], [1.0, 3.0]]), np.array([1.0, 2.0])
    for solver in (linalg.lu_ir, linalg.gmres_ir):
        with pytest.raises(ValueError, match="max_iter must be a nonnegative integer"):
            solver(A, b, max_iter=-1)
        assert len(solver(A, b, max_iter=0).backward_error) == 1
    with pytest.raises(ValueError, match="gmres_maxit must be a nonnegative integer"):
        linalg.gmres_ir(A, b, gmres_maxit=-1)
    assert all(k == 0 for k in linalg.gmres_ir(A, b, gmres_maxit=0).gmres_iterations)


def test_masked_and_longdouble_operands_are_refused_as_chop_refuses_them():
    # A masked array's mask would be dropped (np.asarray) and the hidden 1e6 computed with: Inf in
    # fp16, then NaN from Inf * 0.  np.longdouble data would be rounded to double first, then to the
    # format: x = 1 + 2^-11 + 2^-60 lies above the fp16 tie between 1 and 1 + 2^-10 (one rounding
    # gives 1 + 2^-10), but its double is the tie itself (which goes to 1).  chop refuses both kinds.
    masked = np.ma.array([[1.0, 1e6], [2.0, 3.0]], mask=[[0, 1], [0, 0]])
    long = np.array([[np.longdouble(1) + np.longdouble(2) ** -11 + np.longdouble(2) ** -60]])
    with pytest.raises(TypeError, match="not float128"):
        chop(long, {"format": "h"})
    calls = [lambda: linalg.matmul(masked, np.eye(2), "h"), lambda: linalg.lu(masked, "h"),
             lambda: linalg.solve(masked, np.ones(2), "h"), lambda: linalg.lu_ir(masked, np.ones(2))]
    for call in calls:
        with pytest.raises(TypeError, match="no masks"):
            call()
    if np.finfo(np.longdouble).nmant > 52:  # (where longdouble is wider than double)
        with pytest.raises(TypeError, match="not float128"):
            linalg.matmul(long, np.eye(1), "h")
    assert masked.mask[0, 1] and masked.data[0, 1] == 1e6  # the caller's array untouched


def test_block_size_must_be_a_positive_integer_not_truncated():
    # int(2.5) is 2: a fractional block size was run as another one without a word
    x, y = np.arange(1, 11.0) / 3, np.ones(10)
    for bad in (2.5, 2.9, 0, -1, True, "2"):
        with pytest.raises(ValueError, match="block_size must be a positive integer"):
            linalg.dot(x, y, "h", method="blocked", block_size=bad)
        with pytest.raises(ValueError, match="block_size must be a positive integer"):
            linalg.matmul(x[None, :], y[:, None], "h", method="blocked", block_size=bad)
    assert linalg.dot(x, y, "h", method="blocked", block_size=np.int64(2)) == \
        linalg.dot(x, y, "h", method="blocked", block_size=2)
