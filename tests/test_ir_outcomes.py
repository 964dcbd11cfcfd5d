"""Honest outcomes of iterative refinement (issue 20, item 1) and linalg's input
checks (issue 18: complex input, SingularMatrixWarning).

Expected values are mathematics stated here: a singular matrix has no LU
factors with nonzero pivots, fp16's largest finite number is 65504, the
exact solution of a system with b = 0 is 0, and backward errors are
recomputed independently with exact rational residuals (fractions).
"""

from __future__ import annotations

import math
import warnings
from fractions import Fraction

import numpy as np
import pytest

import pychop_compat
import pychop_compat.linalg as linalg
from pychop_compat.linalg import refinement
from pychop_compat.linalg.arrays import HOST

SOLVERS = [linalg.lu_ir, linalg.gmres_ir]
U_D = 2.0**-53


def exact_backward_error(A, x, b):
    """||b - A x||_inf / (||A||_inf ||x||_inf + ||b||_inf) with an exact residual."""
    n = len(b)
    r = [abs(Fraction(b[i]) - sum(Fraction(A[i, j]) * Fraction(x[j]) for j in range(n)))
         for i in range(n)]
    normA = max(sum(abs(Fraction(v)) for v in row) for row in A)
    denom = normA * max(abs(Fraction(v)) for v in x) + max(abs(Fraction(v)) for v in b)
    return float(max(r) / denom) if denom else (0.0 if max(r) == 0 else math.inf)


def exact_componentwise_error(A, x, b):
    """max_i |b - A x|_i / (|A||x| + |b|)_i with exact rational arithmetic (0/0 read as 0)."""
    n = len(b)
    worst = Fraction(0)
    for i in range(n):
        r = abs(Fraction(b[i]) - sum(Fraction(A[i, j]) * Fraction(x[j]) for j in range(n)))
        if r:
            denominator = sum(abs(Fraction(A[i, j]) * Fraction(x[j])) for j in range(n)) + abs(Fraction(b[i]))
            worst = max(worst, r / denominator)
    return float(worst)


def quiet(func, *args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", linalg.SingularMatrixWarning)
        return func(*args, **kwargs)


@pytest.mark.parametrize("solver", SOLVERS)
@pytest.mark.parametrize("stop", ["backward", "all", "change"])
def test_singular_matrix_is_reported_not_converged(solver, stop):
    A = np.array([[1.0, 2.0], [2.0, 4.0]])
    with pytest.warns(linalg.SingularMatrixWarning):
        res = solver(A, np.array([1.0, 1.0]), stop=stop)
    assert not res.converged
    assert res.status == "singular"
    assert np.all(np.isnan(res.x))  # no iterate is offered as a solution
    assert res.factors.info == 2  # U[1, 1] = 0 exactly: 4 - 2 * 2


@pytest.mark.parametrize("solver", SOLVERS)
@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_non_finite_matrix_entries(solver, bad):
    A = np.array([[4.0, 1.0], [1.0, bad]])
    res = quiet(solver, A, np.array([1.0, 2.0]))
    assert not res.converged and res.status == "singular"


@pytest.mark.parametrize("solver", SOLVERS)
def test_fp16_entries_that_overflow(solver):
    # 1e5 > 65504 = xmax of fp16: rounded to Inf in the factorization.
    A = np.array([[1e5, 1.0], [1.0, 1.0]])
    res = quiet(solver, A, np.array([1.0, 2.0]), "h")
    assert not res.converged and res.status == "singular"


@pytest.mark.parametrize("solver", SOLVERS)
def test_fp16_factor_growth_that_overflows(solver):
    # entries representable in fp16, but u22 = -6e4 - 6e4 = -1.2e5 overflows
    A = np.array([[1.0, 6e4], [1.0, -6e4]])
    F = quiet(linalg.lu, A, "h")
    assert np.isinf(F.U[1, 1])
    res = quiet(solver, A, np.array([1.0, 2.0]), "h")
    assert not res.converged and res.status == "singular"
    # in single the same matrix is harmless, and the solution is found
    ok = solver(A, np.array([1.0, 2.0]), "s")
    assert ok.converged
    assert exact_backward_error(A, ok.x, np.array([1.0, 2.0])) <= 2 * U_D


@pytest.mark.parametrize("solver", SOLVERS)
@pytest.mark.parametrize("stop", ["backward", "all", "change"])
def test_zero_right_hand_side(solver, stop):
    A = np.array([[2.0, 1.0], [1.0, 3.0]])
    res = solver(A, np.zeros(2), stop=stop)
    assert res.converged and res.status == "converged"
    assert np.array_equal(res.x, np.zeros(2))  # the exact solution
    assert res.backward_error[-1] == 0.0


@pytest.mark.parametrize("solver", SOLVERS)
def test_one_by_one_system(solver):
    res = solver(np.array([[3.0]]), np.array([1.0]), stop="all")
    assert res.converged
    assert res.x[0] == 1 / 3  # correctly rounded: forward error <= u


@pytest.mark.parametrize("solver", SOLVERS)
def test_empty_system(solver):
    res = solver(np.zeros((0, 0)), np.zeros(0))
    assert res.converged and res.x.shape == (0,)


@pytest.mark.parametrize("solver", SOLVERS)
def test_nan_right_hand_side_is_not_converged(solver):
    res = solver(np.array([[2.0, 1.0], [1.0, 3.0]]), np.array([1.0, np.nan]))
    assert not res.converged
    assert res.status == "diverged"


@pytest.mark.parametrize("kappa", [1e1, 1e3, 1e6, 1e9])
@pytest.mark.parametrize("solver", SOLVERS)
def test_converged_means_the_backward_error_criterion_holds(kappa, solver):
    n = 8
    A = linalg.randsvd(n, kappa, mode=2, rng=int(math.log10(kappa)))
    b = np.random.default_rng(5).standard_normal(n)
    res = quiet(solver, A, b, "h", max_iter=6)
    assert res.status in linalg.refinement.STATUSES
    assert res.converged == (res.status == "converged")
    if res.converged:
        assert exact_backward_error(A, res.x, b) <= n * U_D
    elif res.status == "singular":
        assert np.all(np.isnan(res.x))
    else:
        assert exact_backward_error(A, res.x, b) > 0  # not an exact solution either


def test_lu_ir_far_outside_its_range_does_not_claim_convergence():
    n = 20
    A = linalg.randsvd(n, 1e10, mode=2, rng=3)
    b = np.random.default_rng(3).standard_normal(n)
    res = quiet(linalg.lu_ir, A, b, "h")
    assert not res.converged
    assert res.status in ("diverged", "stagnated", "maxiter", "singular")


def test_change_rule_needs_a_small_backward_error_too():
    # stop='change' with a huge tolerance: the first step "stops changing"
    # at once, but the fp16-accurate iterate is not backward stable in double.
    n = 10
    A = linalg.randsvd(n, 1e3, mode=3, rng=4)
    b = np.random.default_rng(4).standard_normal(n)
    res = linalg.lu_ir(A, b, "h", stop="change", tol=1.0)
    assert res.status == "stagnated" and not res.converged
    assert exact_backward_error(A, res.x, b) > n * U_D


def test_stop_all_checks_forward_error_against_given_solution():
    n = 10
    A = linalg.randsvd(n, 1e4, mode=3, rng=6)
    xt = np.random.default_rng(6).standard_normal(n)
    b = A @ xt  # x_true below is then the exact solution of (A, fl(A xt)) only approximately
    x_exact = np.array([float(v) for v in _mp_solve(A, b)])
    res = linalg.gmres_ir(A, b, "h", x_true=x_exact, stop="all")
    assert res.converged
    assert np.max(np.abs(res.x - x_exact)) / np.max(np.abs(x_exact)) <= U_D
    assert res.componentwise_error[-1] <= U_D


def _mp_solve(A, b):
    import mpmath

    with mpmath.workprec(200):
        return mpmath.lu_solve(mpmath.matrix(A.tolist()), mpmath.matrix(b.tolist()))


# A NaN error must not pass stop='all' (Python's max dropped a NaN that was not its first argument).
E25 = 2.0**-25
#: Exactly singular in double (det = (1 + 2e + e^2) - (1 + e)^2 = 0, checked below), yet its fp32
#: factors are not: no reference solution exists, so the forward errors are NaN.
SINGULAR_IN_DOUBLE = np.array([[1.0, 1 + E25], [1 + E25, 1 + 2 * E25 + E25 * E25]])


def _exact_det2(A):
    return Fraction(A[0, 0]) * Fraction(A[1, 1]) - Fraction(A[0, 1]) * Fraction(A[1, 0])


@pytest.mark.parametrize("solver", SOLVERS + [linalg.cg_ir])
def test_stop_all_nan_forward_error_is_not_converged(solver):
    """x_true with a NaN: the forward error is NaN, so 'all three errors <= u' cannot hold."""
    A = np.array([[2.0, 1.0], [1.0, 3.0]])
    res = solver(A, A @ np.ones(2), stop="all", x_true=np.array([np.nan, 1.0]))
    assert all(math.isnan(e) for e in res.forward_error)
    assert not res.converged and res.status in ("stagnated", "maxiter")


@pytest.mark.parametrize("solver", SOLVERS)
def test_stop_all_without_reference_solution_is_not_converged(solver):
    A = SINGULAR_IN_DOUBLE
    assert _exact_det2(A) == 0
    res = quiet(solver, A, A @ np.ones(2), uf="s", stop="all")
    assert res.status != "singular" and all(math.isnan(e) for e in res.forward_error)
    assert not res.converged and res.status in ("stagnated", "maxiter")


def test_ls_ir_stop_all_without_reference_solution_is_not_converged():
    """Rank-deficient A (its 2 x 2 block singular in double, third row a copy of the first) and b not
    in its range: the augmented system has no unique solution, so no forward error can be measured."""
    A = np.vstack([SINGULAR_IN_DOUBLE, SINGULAR_IN_DOUBLE[:1]])
    assert _exact_det2(A[:2]) == 0
    res = quiet(linalg.ls_ir, A, np.array([1.0, 2.0, 3.0]), uf="s", stop="all")
    assert all(math.isnan(e) for e in res.forward_error)
    assert not res.converged and res.status in ("stagnated", "maxiter")


@pytest.mark.parametrize("solver", SOLVERS)
def test_stop_all_empty_system_still_converges(solver):
    """An empty x has no forward error (it reads NaN); its zero backward errors decide."""
    res = solver(np.zeros((0, 0)), np.zeros(0), stop="all")
    assert res.converged and res.x.shape == (0,)


@pytest.mark.parametrize("solver", SOLVERS + [linalg.cg_ir])
@pytest.mark.parametrize("x_true", [np.ones((2, 1)), np.ones(1), np.ones(3)], ids=["column", "short", "long"])
def test_x_true_shape_is_checked(solver, x_true):
    """A column x_true broadcast against x to 2 x 2 and gave a wrong forward error; a short one too."""
    A = np.array([[2.0, 1.0], [1.0, 3.0]])
    with pytest.raises(ValueError, match="x_true"):
        solver(A, A @ np.ones(2), x_true=x_true)


def test_stop_option_is_checked():
    with pytest.raises(ValueError, match="stop"):
        linalg.lu_ir(np.eye(2), np.ones(2), stop="forward")


# ---------------------------------------------------------------------------
# issue 18: complex input and singular factorizations
# ---------------------------------------------------------------------------

COMPLEX_CALLS = [
    lambda Z: linalg.matmul(Z, np.eye(2), "h"),
    lambda Z: linalg.matvec(Z, np.ones(2), "h"),
    lambda Z: linalg.dot(Z[0], np.ones(2), "h"),
    lambda Z: linalg.lu(Z, "h"),
    lambda Z: linalg.solve(Z, np.ones(2), "h"),
    lambda Z: linalg.solve(np.eye(2), Z[0], "h"),
    lambda Z: linalg.lu_ir(Z, np.ones(2)),
    lambda Z: linalg.gmres_ir(np.eye(2), Z[0]),
]


@pytest.mark.parametrize("call", COMPLEX_CALLS)
def test_complex_input_rejected_like_chop(call):
    Z = np.array([[1 + 1j, 2], [3, 4]])
    with pytest.raises(ValueError) as chop_error:
        pychop_compat.chop(Z, {"format": "h"})
    with pytest.raises(ValueError) as linalg_error:
        call(Z)
    assert str(linalg_error.value) == str(chop_error.value) == "Chop requires a real input array."


def test_singular_matrix_warning_is_public_and_a_runtime_warning():
    assert issubclass(pychop_compat.SingularMatrixWarning, RuntimeWarning)
    assert pychop_compat.SingularMatrixWarning is linalg.SingularMatrixWarning


def test_solve_warns_on_singular_and_non_finite_factors():
    A = np.array([[1.0, 2.0], [2.0, 4.0]])
    with pytest.warns(linalg.SingularMatrixWarning):
        x = linalg.solve(A, np.array([1.0, 1.0]), "h")
    assert not np.all(np.isfinite(x))
    with pytest.warns(linalg.SingularMatrixWarning):  # given factors with a zero pivot
        linalg.solve((np.eye(2), np.array([[1.0, 1.0], [0.0, 0.0]]), np.arange(2)), np.ones(2), "d")
    with pytest.warns(linalg.SingularMatrixWarning):  # NaN entry
        linalg.lu(np.array([[1.0, np.nan], [0.0, 1.0]]), "h")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a regular matrix warns nothing
        linalg.solve(np.array([[2.0, 1.0], [1.0, 3.0]]), np.ones(2), "h")


@pytest.mark.parametrize("solver", SOLVERS)
def test_infinity_norm_of_a_past_realmax_does_not_hide_the_backward_error(solver):
    """Every entry finite, ||A||_inf = 2.3e308 past realmax: it was summed to Inf, every iterate had
    backward error ||r|| / Inf = 0, and x_0 'converged' with no step.  Now the backward errors are the
    exact ones (fractions) to rounding; x_0's is about 3.5e-9 > n u, so it cannot stop there."""
    A = np.array([[1e308, 1e308, 0.3e308], [1.0, -1.0, 0.7], [0.2, 0.5, 3.0]])
    b = A @ np.array([0.3, 0.2, 0.1])
    first = quiet(solver, A, b, "h", scaling="general", max_iter=0)
    assert first.backward_error[0] == pytest.approx(exact_backward_error(A, first.x, b), rel=1e-12)
    assert first.backward_error[0] > 3 * U_D and not first.converged
    res = quiet(solver, A, b, "h", scaling="general")
    assert res.backward_error[-1] == pytest.approx(exact_backward_error(A, res.x, b), rel=1e-12)
    assert res.converged == (exact_backward_error(A, res.x, b) <= 3 * U_D)
    if solver is linalg.lu_ir:
        assert res.converged and res.iterations >= 1


def test_zero_iterate_with_an_overflowing_norm_of_a_is_measured():
    """x_0 overflows (a_12 x_2 = -2e308 in the solve), so the refinement starts from x = 0, whose
    backward error ||b|| / (||A|| 0 + ||b||) is 1: 0 Inf made it NaN and the status 'diverged' on a
    problem whose solution [1, -4/3] has a finite residual.  Now it converges (exact residual)."""
    A = np.array([[1.5e308, 1.5e308], [1.0, 2.0]])
    b = np.array([-0.5e308, 1.0 - 8 / 3])
    res = linalg.lu_ir(A, b, "d", "d", "q")
    assert res.backward_error[0] == 1.0
    assert res.converged and exact_backward_error(A, res.x, b) <= 2 * U_D


def test_componentwise_error_of_a_row_whose_abs_a_abs_x_overflows():
    """(|A||x|)_1 = 2.1625e308 is past realmax with each product finite: that row's ratio was
    |r_1| / Inf = 0, and the componentwise backward error 0 where it is about 0.016 (fractions);
    rows 2 and 3 have zero residuals.  The normwise error, with ||A||_inf = 2.3e308, too."""
    A = np.array([[1.2e308, -1.1e308, 0.0], [1.0, 1.0, 1.0], [0.0, 1.0, 3.0]])
    x, b = np.array([1.0, 0.875, 0.25]), np.array([0.2e308, 2.125, 1.625])
    normA, shift = refinement._inf_norm(np.abs(A))
    nbe, cbe = refinement._errors(HOST, A, b, x, normA, float(np.max(np.abs(b))), np.abs(A), None, shift)
    assert cbe == pytest.approx(exact_componentwise_error(A, x, b), rel=1e-14) and cbe > 0.01
    assert nbe == pytest.approx(exact_backward_error(A, x, b), rel=1e-14)
