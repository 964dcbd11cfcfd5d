"""GMRES-IR and LU-IR (``linalg.gmres_ir``, ``linalg.lu_ir``) against GNU Octave runs of the research
codes ``gmresir3.m`` and ``sir3.m``.

``tests/data/research_ir/oracle.json`` holds Octave runs of ``gmresir3.m`` and ``sir3.m`` of
github.com/SrikaraPranesh/Multi_precision_NLA_kernels (commit fb3a2d7) with ``chop.m`` of
github.com/higham/chop (commit 906c31e), double arithmetic in place of the Advanpix toolbox
(``precr = 2``: the package's ``ur='d'``), and the GMRES iterations of each step recorded by a
wrapper of ``GMRES/gmres_dd.m``; its README says how it was made.  Each code was run with
``iter_max = 0, 1, 2, ...`` until it reported convergence, so ``outputs['x'][k]`` is the code's
iterate after ``k`` steps.

Octave's products and solves are BLAS's and LAPACK's, whose order of operations is not chop's,
so iterates are compared to their accuracy, ``2 n kappa_inf(A) u`` (``_accuracy``), not bit
for bit; counts (refinement steps, GMRES iterations) are compared exactly.  Where the
codes depart from the package (``docs/linalg.rst``, "Research codes by name"), the tests run the
package as the code does or assert the difference as it is.  No Octave is needed here.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from pychop_compat import Chop, linalg
from pychop_compat.linalg import refinement
from pychop_compat.linalg.arrays import HOST

ORACLE = json.loads((Path(__file__).parent / "data" / "research_ir" / "oracle.json").read_text())
U_D = 2.0**-53
#: gmresir3's precf (1 fp16, 3 single by LAPACK) and sir3's (0 half, 1 single by LAPACK)
#: as (uf, lu_method).  gmresir3's precf = 2 (bfloat16) factorizes in fp16: see below.
GMRESIR3_PRECF = {1: ("h", "chopped"), 3: ("s", "lapack")}
SIR3_PRECF = {0: ("h", "chopped"), 1: ("s", "lapack")}


def _problem(case: str) -> tuple:
    entry = ORACLE["cases"][case]
    return np.array(entry["A"]), np.array(entry["b"])


def _runs(code: str, precfs) -> list:
    return [pytest.param(r, id=f"{r['case']}-precf{r['precf']}") for r in ORACLE["runs"]
            if r["code"] == code and r["precf"] in precfs]


def _relative_difference(x: np.ndarray, y: np.ndarray) -> float:
    return float(np.max(np.abs(x - y)) / np.max(np.abs(y)))


def _accuracy(A: np.ndarray, u: float = U_D) -> float:
    """``2 n kappa_inf(A) u``: two solutions with normwise backward errors at most ``n u`` are each
    within about ``kappa(A) n u`` of ``A^{-1} b``; one step from the same iterate, done with two orders
    of operations, differs by a residual error of order ``n u |A| |x|``, amplified by ``kappa(A)``."""
    return 2 * len(A) * np.linalg.cond(A, np.inf) * u


def _nbe(A: np.ndarray, b: np.ndarray, x: np.ndarray) -> float:
    """The normwise backward error as the package measures it (double-double residual)."""
    return refinement._errors(HOST, A, b, x, float(np.max(np.sum(np.abs(A), axis=1))), float(np.max(np.abs(b))),
                              np.abs(A))[0]


def test_oracle_provenance():
    prov = ORACLE["provenance"]
    assert "fb3a2d7d0d8a1cd5b0e09e7b4801996b4f5de2bc" in prov["research"]
    assert "906c31e653ad610effb2402f567b2dab69518176" in prov["chop"] and prov["octave"].startswith("GNU Octave")
    assert {r["code"] for r in ORACLE["runs"]} == {"gmresir3", "sir3"}
    for run in ORACLE["runs"]:
        # the last run converged; those before it stopped at iter_max (Inf)
        assert np.isfinite(run["outputs"]["iters"][-1]) and np.all(np.isinf(run["outputs"]["iters"][:-1]))


# --- GMRES-IR: gmresir3(A, b, precf, 2, 2, iter_max, 1e-6, scale, 0), scale.flag = 0 ------------------

#: The counts that differ (package, code): the package's x_0 is solved with the fp16 factors in
#: fp16 (the papers' algorithm), gmresir3's in double (``x = U\(L\(P*b))`` with the fp16 factors
#: stored as doubles), so the first correction starts from a larger residual and GMRES takes one
#: iteration more; from the same iterate the counts agree (test_gmres_ir_steps_from_the_codes_iterates).
GMRES_COUNT_DIFFERENCES = {("row_graded", 1): ([3, 3], [2, 3]), ("cosine", 1): ([3, 3], [2, 3]),
                           ("hilbert6", 1): ([5, 6], [4, 6])}


@pytest.mark.parametrize("run", _runs("gmresir3", GMRESIR3_PRECF))
def test_gmres_ir_agrees_with_octave_gmresir3(run):
    A, b = _problem(run["case"])
    uf, method = GMRESIR3_PRECF[run["precf"]]
    out = run["outputs"]
    X, steps, its = np.array(out["x"]), int(out["iters"][-1]) - 1, [int(v) for v in out["its"]]
    assert out["totals"][-1] == sum(its)  # the wrapper saw every GMRES call of the converged run
    res = linalg.gmres_ir(A, b, uf, "d", "d", lu_method=method, gmres_tol=1e-6, max_iter=10)
    assert res.status == "converged" and res.iterations == steps  # gmresir3's iter_o counts x_0
    ours, theirs = GMRES_COUNT_DIFFERENCES.get((run["case"], run["precf"]), (its, its))
    assert theirs == its and res.gmres_iterations == ours
    assert _relative_difference(res.x, X[steps]) <= _accuracy(A)
    x0 = linalg.gmres_ir(A, b, uf, "d", "d", lu_method=method, max_iter=0).x
    F = res.factors
    if uf == "s":
        # single factors: both solve for x_0 in single, to the same bits
        assert np.array_equal(x0, X[0])
    else:
        # fp16 factors: gmresir3's x_0 is the double solve with the package's (lutx_chop's) factors
        import scipy.linalg

        y = scipy.linalg.solve_triangular(F.L, b[F.perm], lower=True, unit_diagonal=True)
        assert _relative_difference(scipy.linalg.solve_triangular(F.U, y), X[0]) <= _accuracy(A)
        assert _relative_difference(x0, X[0]) > 1e3 * _accuracy(A)


@pytest.mark.parametrize("run", _runs("gmresir3", GMRESIR3_PRECF))
def test_gmres_ir_steps_from_the_codes_iterates(run):
    """Each GMRES-IR step of the package from gmresir3's iterate ``x_k``: residual in double, scaled
    by ``||r||_inf``, GMRES with the package's factors as preconditioner applied in double (gmres_dd),
    correction added in double.  The iterations equal gmres_dd's at every step, and ``x_{k+1}`` the
    code's to its accuracy."""
    A, b = _problem(run["case"])
    uf, method = GMRESIR3_PRECF[run["precf"]]
    out = run["outputs"]
    X = np.array(out["x"])
    F = linalg.lu(A, uf, method=method)
    operator = refinement._factor_preconditioner(HOST, A, F, "d", "d")
    for k, its in enumerate(out["its"]):
        r = refinement._residual(HOST, A, X[k], b, "d")
        s = float(np.max(np.abs(r)))
        d, count = refinement._gmres(HOST, r / s, "d", 1e-6, None, operator)
        assert count == int(its), k
        assert _relative_difference(X[k] + s * d, X[k + 1]) <= _accuracy(A), k


def test_gmresir3_bfloat16_code_path_factorizes_in_fp16():
    """gmresir3's precf = 2 (bfloat16) calls ``lutx_chop(Ah)`` without a format, and lutx_chop's
    default is fp16 (``if nargin<2, format = 'h'; end``): its run equals the fp16 run bit for bit,
    and is not what ``gmres_ir(uf='b')`` computes."""
    by_precf = {r["precf"]: r["outputs"] for r in ORACLE["runs"] if r["code"] == "gmresir3" and r["case"] == "cosine"}
    assert by_precf[2] == by_precf[1]
    A, b = _problem("cosine")
    half = linalg.gmres_ir(A, b, "h", "d", "d", max_iter=0).x
    bfloat = linalg.gmres_ir(A, b, "b", "d", "d", max_iter=0).x
    assert not np.array_equal(half, bfloat)


# --- LU-IR: sir3(A, b, precf, 2, 2, iter_max, 0) -------------------------------------------------------

#: sir3 tests ``nbe <= n u`` with ``u = eps('double') = 2**-52``; the package's ``n u`` is ``n 2**-53``.
SIR3_TOL = 2.0**-52
#: The one step count that differs (package, code): see test_sir3_takes_one_step_less_by_its_residual_scaling.
SIR3_STEP_DIFFERENCES = {("row_graded", 1): (2, 1)}


@pytest.mark.parametrize("run", _runs("sir3", SIR3_PRECF))
def test_lu_ir_agrees_with_octave_sir3(run):
    A, b = _problem(run["case"])
    uf, method = SIR3_PRECF[run["precf"]]
    if uf == "h":
        A = Chop("h")(A)  # sir3 overwrites A with chop(A) when precf = 0 and refines that system
    out = run["outputs"]
    X, steps = np.array(out["x"]), int(out["iters"][-1])  # sir3's iter1: the steps done
    tol = len(b) * SIR3_TOL
    res = linalg.lu_ir(A, b, uf, "d", "d", lu_method=method, tol=tol, max_iter=12)
    ours, theirs = SIR3_STEP_DIFFERENCES.get((run["case"], run["precf"]), (steps, steps))
    assert res.status == "converged" and theirs == steps and res.iterations == ours
    # x_0: fp16 substitutions (trisol, lp_matvec) or LAPACK's single ones, the package's to the bit
    assert np.array_equal(linalg.lu_ir(A, b, uf, "d", "d", lu_method=method, max_iter=0).x, X[0])
    assert _relative_difference(res.x, X[steps]) <= _accuracy(A, SIR3_TOL)


@pytest.mark.parametrize("run", _runs("sir3", SIR3_PRECF))
def test_sir3_steps_are_solves_with_the_factors(run):
    """sir3's step from its ``x_k``: ``rd1 = r / ||r||_inf`` (residual in double) solved with the
    factors in double when they are fp16 (``U\\(L\\(P*double(rd1)))``, the factors stored as doubles)
    and in single when they are LAPACK's single ones (Octave's mixed arithmetic is single),
    ``x + ||r|| d`` in double.  ``linalg.solve`` with the package's factors does the same."""
    A, b = _problem(run["case"])
    uf, method = SIR3_PRECF[run["precf"]]
    if uf == "h":
        A = Chop("h")(A)
    X, steps = np.array(run["outputs"]["x"]), int(run["outputs"]["iters"][-1])
    F = linalg.lu(A, uf, method=method)
    for k in range(steps):
        r = b - A @ X[k]
        s = float(np.max(np.abs(r)))
        d = linalg.solve(F, r / s, "d" if uf == "h" else "s")
        assert _relative_difference(X[k] + s * d, X[k + 1]) <= _accuracy(A, SIR3_TOL), k


def test_sir3_takes_one_step_less_by_its_residual_scaling():
    """row_graded with single LAPACK factors: sir3 converges after one step, lu_ir after two.
    lu_ir scales the residual by the power of two at or below ``||r||_inf`` before the single
    solve, sir3 by ``||r||_inf`` itself; from the same (bit-equal) ``x_0`` the two single solves
    round differently, and ``x_1``'s backward error lands on either side of ``n 2**-52``."""
    A, b = _problem("row_graded")
    run = next(r for r in ORACLE["runs"] if r["code"] == "sir3" and r["case"] == "row_graded")
    X = np.array(run["outputs"]["x"])
    tol = len(b) * SIR3_TOL
    one = linalg.lu_ir(A, b, "s", "d", "d", lu_method="lapack", max_iter=1, tol=tol)
    assert not np.array_equal(one.x, X[1]) and _nbe(A, b, one.x) > tol
    assert _nbe(A, b, X[1]) <= tol
    F, r = one.factors, b - A @ X[0]
    for scale, passes in ((float(np.max(np.abs(r))), True), (2.0 ** np.floor(np.log2(np.max(np.abs(r)))), False)):
        x1 = X[0] + scale * linalg.solve(F, r / scale, "s")
        assert (_nbe(A, b, x1) <= tol) is passes


def test_sir3_refines_the_fp16_rounded_matrix():
    """With precf = 0 sir3 sets ``A = chop(A)`` before lutx_chop and keeps that ``A`` for the
    residuals: it converges to ``chop(A)^{-1} b``, not to ``A^{-1} b`` (lu_ir refines ``A``)."""
    for case in ("toeplitz_flipped", "cosine"):
        A, b = _problem(case)
        run = next(r for r in ORACLE["runs"] if r["code"] == "sir3" and r["case"] == case and r["precf"] == 0)
        x = np.array(run["outputs"]["x"][-1])
        Ah = Chop("h")(A)
        assert _relative_difference(x, np.linalg.solve(Ah, b)) <= _accuracy(Ah, SIR3_TOL)
        res = linalg.lu_ir(A, b, "h", "d", "d")
        assert res.converged and _relative_difference(res.x, x) > 1e3 * _accuracy(A)
        assert _relative_difference(res.x, np.linalg.solve(A, b)) <= _accuracy(A)


def test_factors_are_those_of_a_stored_in_the_working_precision():
    """gmresir3 and sir3 set ``A = single(A)`` (precw = 1) before they factorize ``chop(A)``; the
    package factorized the double ``A``.  ``1 + 2^-11 + 2^-40`` is 1 + 2^-11 in single, a tie that
    fp16 rounds to 1 (NumPy's casts), where the double rounds up to 1 + 2^-10."""
    A = np.diag([1 + 2.0**-11 + 2.0**-40, 2.0, 3.0])
    b = np.ones(3)
    U = np.float16(np.float32(A)).astype(np.float64)  # diagonal: U is A rounded, L = I
    assert U[0, 0] == 1.0
    for res in (linalg.lu_ir(A, b, "h", "s", "d"), linalg.gmres_ir(A, b, "h", "s", "d")):
        assert np.array_equal(res.factors.U, U)
    # in double, A is stored as it is: the factor is A rounded to fp16 once
    assert linalg.lu_ir(A, b, "h", "d", "d").factors.U[0, 0] == float(np.float16(A[0, 0])) == 1 + 2.0**-10
