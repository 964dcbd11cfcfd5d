"""CG-IR, GMRES-IR with a Cholesky preconditioner and least-squares GMRES-IR (``linalg.cg_ir``,
``linalg.gmres_ir(factorization='cholesky')``, ``linalg.ls_ir``).

``tests/data/research_spd_ls/oracle.json`` holds GNU Octave runs of ``cgir3.m`` and
``gmreslsir3.m`` of github.com/SrikaraPranesh/Multi_precision_NLA_kernels (commit fb3a2d7) with
``chop.m`` of github.com/higham/chop (commit 906c31e) and double arithmetic in place of the
Advanpix toolbox; its README says how it was made.  Octave's products and solves are BLAS's and
LAPACK's, so the runs are compared to the accuracy of their iterates, not bit for bit; the inner
iteration counts are compared exactly.  No Octave is needed here.
"""

from __future__ import annotations

import functools
import json
import re
import warnings
from fractions import Fraction
from pathlib import Path

import mpmath
import numpy as np
import pytest

from pychop_compat import chop, linalg
from pychop_compat.linalg import refinement
from pychop_compat.linalg.arrays import HOST
from pychop_compat.linalg.common import Rounder, safe_two_norm

ORACLE = json.loads((Path(__file__).parent / "data" / "research_spd_ls" / "oracle.json").read_text())
U_D = 2.0**-53


def _problem(kind: str, case: str) -> tuple:
    entry = ORACLE[kind][case]
    return np.array(entry["A"]), np.array(entry["b"])


def _runs(code: str) -> list:
    return [pytest.param(r, id=f"{r['case']}-{i}") for i, r in enumerate(ORACLE["runs"]) if r["code"] == code]


def _relative_difference(x: np.ndarray, y: np.ndarray) -> float:
    return float(np.max(np.abs(x - y)) / np.max(np.abs(y)))


def spd_matrix(n: int = 10) -> tuple:
    """A graded KMS matrix (kappa_inf about 2e6, entries up to 1e6) and a right-hand side."""
    i = np.arange(float(n))
    grade = 10.0 ** (i / 3)
    A = 0.5 ** np.abs(i[:, None] - i[None, :]) * grade[:, None] * grade[None, :]
    return np.triu(A) + np.triu(A, 1).T, np.cos(i + 1)


def ls_problem() -> tuple:
    k, j = np.arange(12.0)[:, None], np.arange(5.0)[None, :]
    return np.cos((k + 1) * (j + 1) * 0.7) + 0.1 * np.sin(k + j), np.sin(np.arange(12.0) + 0.5)


def test_oracle_provenance():
    assert "fb3a2d7d0d8a1cd5b0e09e7b4801996b4f5de2bc" in ORACLE["provenance"]["research"]
    assert {r["code"] for r in ORACLE["runs"]} == {"cgir3", "gmreslsir3"}


@pytest.mark.parametrize("run", _runs("cgir3"))
def test_cg_ir_agrees_with_octave_cgir3(run):
    A, b = _problem("spd", run["case"])
    precf, flag, pert = re.search(r"cgir3\(A, b, (\d), .*'flag', (\d).*'pert', (\d+)", run["call"]).groups()
    res = linalg.cg_ir(A, b, "h" if precf == "1" else "b", "d", "d", scaling="p" if flag == "1" else None,
                       perturbation=float(pert), cg_tol=1e-6, max_iter=10)
    out = run["outputs"]
    steps, cg_its = int(out["iter"][0]) - 1, int(out["pcg_its"][0])  # cgir3 counts x_0 as its iteration 1
    assert res.status == "converged" and res.backward_error[-1] <= len(b) * U_D
    # cgir3 rounds x_0 to uf after each triangular solve, cg_ir keeps it in u (scaled) or uf:
    # the runs may take one step more or less, and then different CG counts
    assert abs(res.iterations - steps) <= 1
    if res.iterations == steps:
        assert sum(res.gmres_iterations) == cg_its
    # two solutions with backward errors below n u differ by at most about kappa(A) n u
    kappa = np.linalg.cond(A, np.inf)
    assert _relative_difference(res.x, np.array(out["x"])) <= 2 * kappa * U_D


@pytest.mark.parametrize("run", _runs("gmreslsir3"))
def test_ls_ir_agrees_with_octave_gmreslsir3(run):
    A, b = _problem("ls", run["case"])
    steps = int(re.search(r"gmreslsir3\(A, b, 0, 2, 4, (\d+),", run["call"]).group(1))
    res = linalg.ls_ir(A, b, "h", "d", "d", max_iter=steps, tol=0.0)  # tol 0: every step is done
    out = run["outputs"]
    assert res.status == "maxiter" and res.iterations == steps
    assert res.gmres_iterations == [int(v) for v in out["its"]]
    assert _relative_difference(res.x, np.array(out["x"])) <= 10 * np.linalg.cond(A) * U_D


def test_cg_ir_converges_with_the_code_precisions():
    A, b = spd_matrix()
    for ur in ("q", "d"):
        res = linalg.cg_ir(A, b, "h", "d", ur, scaling="positive")
        assert res.converged and res.backward_error[-1] <= len(b) * U_D
        assert len(res.gmres_iterations) == res.iterations >= 1
    scaling = res.factors.scaling
    assert np.array_equal(scaling.row, 1 / np.sqrt(np.diag(A))) and scaling.mu == 0.1 * 65504


def test_cg_stop_test_norm_does_not_underflow_in_fp16():
    """CG's ||r_k||_2 was fl(sqrt(fl(r_k . r_k))) in u: in fp16 the squares of r_1 ~ -2**-13 below
    underflow to 0, so CG stopped after one step although ||r_1|| / ||rhs|| ~ 1e-4 > cg_tol = 1e-6.
    MATLAB's norm (pcg_*.m) does not underflow, as GMRES's norm here: CG takes its second step.
    A = diag(1, 3), M^-1 = 64 I (scaling, so that r' z does not underflow), every operation in fp16;
    exact solution (mathematics): [1, 2**-14 / 3], here to one fp16 subnormal spacing 2**-24."""
    def h(v):
        return np.asarray(chop(np.asarray(v, dtype=np.float64), {"format": "h"}))

    rhs = np.array([1.0, 2.0**-14])
    d, its = refinement._pcg(HOST, rhs, "h", 1e-6, None, lambda p: h(np.array([1.0, 3.0]) * p),
                             lambda r: h(64.0 * r))
    assert its == 2 and d[0] == 1.0 and abs(d[1] - 2.0**-14 / 3) <= 2.0**-24


def test_gmres_and_cg_norm_of_entries_at_or_above_2_to_the_1023():
    """The scaling 2**k at or above max|v| of GMRES's and CG's overflow-safe norm was 2**1024 here,
    past double (math.ldexp raised OverflowError); 2**1023 is as exact.  Oracle: 200-bit mpmath."""
    with mpmath.workprec(200):
        exact = float(mpmath.sqrt(2) * mpmath.mpf(1e308))
    got = float(refinement._nrm2(HOST, np.array([1e308, -1e308]), "d", Rounder("d", HOST)))
    assert got == pytest.approx(exact, rel=4 * U_D)


def test_cg_ir_stop_all_and_binary128():
    A, b = spd_matrix(6)
    res = linalg.cg_ir(A, b, "h", "d", "q", scaling="p", stop="all")
    assert res.converged and res.forward_error[-1] <= U_D
    quad = linalg.cg_ir(A, b, "h", "d", "binary128", scaling="p")
    assert quad.converged


def test_gmres_ir_with_cholesky_factors():
    A, b = spd_matrix()
    res = linalg.gmres_ir(A, b, "h", "d", "q", factorization="cholesky", scaling="p")
    cg = linalg.cg_ir(A, b, "h", "d", "q", scaling="p")
    assert res.converged and res.backward_error[-1] <= len(b) * U_D
    assert np.array_equal(res.factors.L, cg.factors.L) and np.array_equal(res.factors.U, cg.factors.U)
    # the factors are chol_lp's R as L = R^T diag(R)^-1, U = diag(R) R
    R, flag = linalg.chol_lp(linalg.spd_diag_scale(A, 1, 0.1)[0])
    assert flag == 0 and np.array_equal(res.factors.U, np.diag(R)[:, None] * R)
    # the LU preconditioner's results are those of the default factorization
    assert np.array_equal(linalg.gmres_ir(A, b, factorization="lu", theta=0.1).x, linalg.gmres_ir(A, b, theta=0.1).x)


def test_cholesky_outcomes_and_errors():
    A, b = spd_matrix()
    # unscaled, the entries overflow fp16: the factor has Inf entries, no iterate
    res = linalg.cg_ir(A, b, "h")
    assert res.status == "singular" and not res.converged and np.all(np.isnan(res.x))
    indefinite = np.array([[1.0, 2.0], [2.0, 1.0]])
    assert linalg.cg_ir(indefinite, np.ones(2)).status == "singular"
    assert linalg.gmres_ir(indefinite, np.ones(2), factorization="cholesky").status == "singular"
    with pytest.raises(ValueError, match="not symmetric"):
        linalg.cg_ir(np.array([[2.0, 1.0], [0.0, 2.0]]), np.ones(2))
    with pytest.raises(ValueError, match="scaling must be None or 'positive'"):
        linalg.cg_ir(A, b, scaling="general")
    with pytest.raises(ValueError, match="fp16 or bfloat16"):
        linalg.cg_ir(A, b, "s")
    with pytest.raises(ValueError, match="factorization must be"):
        linalg.gmres_ir(A, b, factorization="qr")
    with pytest.raises(ValueError, match="lu_method"):
        linalg.gmres_ir(A, b, factorization="cholesky", lu_method="lapack")
    # perturbation belongs to the Cholesky factorization: refused, not ignored, with the LU one
    with pytest.raises(ValueError, match="perturbation is for factorization='cholesky'"):
        linalg.gmres_ir(A, b, perturbation=1e6)
    # theta is checked as lu checks it, (0, 1]
    for theta in (5.0, 0.0, -0.1):
        with pytest.raises(ValueError, match=r"theta must be in \(0, 1\]"):
            linalg.cg_ir(A, b, scaling="p", theta=theta)
        with pytest.raises(ValueError, match=r"theta must be in \(0, 1\]"):
            linalg.gmres_ir(A, b, factorization="cholesky", scaling="p", theta=theta)


def test_ls_ir_solves_least_squares():
    A, b = ls_problem()
    res = linalg.ls_ir(A, b)
    assert isinstance(res, linalg.LSIRResult) and res.converged
    x = np.linalg.lstsq(A, b, rcond=None)[0]
    assert _relative_difference(res.x, x) <= 10 * np.linalg.cond(A) * U_D
    assert np.max(np.abs(res.r - (b - A @ res.x))) <= 1e-14
    assert res.Q.shape == (12, 5) and res.R.shape == (5, 5)
    assert res.alpha == 2**-0.5 * np.min(np.linalg.svd(res.R, compute_uv=False))
    assert "status: converged" in res.table()
    for uf in ("s", "d"):
        assert linalg.ls_ir(A, b, uf).converged
    every = linalg.ls_ir(A, b, stop="all")
    assert every.converged and every.forward_error[-1] <= U_D
    assert linalg.ls_ir(A.tolist(), b.tolist()).x.tolist() == res.x.tolist()


def test_ls_ir_preconditioner_precisions():
    A, b = ls_problem()
    default = linalg.ls_ir(A, b)  # up = ur = 'q', as gmreslsir3 with precr = 4
    assert np.array_equal(default.x, linalg.ls_ir(A, b, up="q").x)
    for up in ("d", "binary128", "s"):
        res = linalg.ls_ir(A, b, up=up)
        assert res.converged and _relative_difference(res.x, default.x) <= 10 * np.linalg.cond(A) * U_D


def test_ls_ir_outcomes_and_errors():
    A, b = ls_problem()
    A[:, 2] = 0.0
    with pytest.warns(linalg.SingularMatrixWarning, match="rank deficient"):
        assert linalg.ls_ir(A, b).status == "singular"
    with pytest.raises(ValueError, match="m >= n"):
        linalg.ls_ir(A.T, b[:5])
    with pytest.raises(ValueError, match="fp16, single or double"):
        linalg.ls_ir(*ls_problem(), "b")


def test_ls_ir_says_when_the_minimiser_is_not_unique():
    """A repeated column: rank n - 1, so x + t (e_1 - e_2) minimises ||b - A x|| for every t; the
    backward-error status alone would not tell (the research code does not check the rank)."""
    A, b = ls_problem()
    A[:, 1] = A[:, 0]
    assert np.linalg.matrix_rank(A) == A.shape[1] - 1
    with pytest.warns(linalg.SingularMatrixWarning, match="not unique") as caught:
        linalg.ls_ir(A, b)
    assert caught[0].filename == __file__  # the caller's line, not the package's decorator
    with warnings.catch_warnings():
        warnings.simplefilter("error", linalg.SingularMatrixWarning)
        assert linalg.ls_ir(*ls_problem()).converged  # full rank: no warning


def test_example_claims():
    import importlib.util

    path = Path(__file__).resolve().parents[1] / "examples" / "spd_ls_ir.py"
    spec = importlib.util.spec_from_file_location("spd_ls_ir_example", path)
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    out = example.main(n=12, m=20, ncols=5, verbose=False)
    assert out["flag"] == 0 and out["cholesky_error"] <= 4 * 2.0**-11
    assert out["orthogonality"] <= 16 * 2.0**-11
    cg, gmres, ls = out["cg_ir"], out["gmres_ir"], out["ls_ir"]
    assert cg.converged and gmres.converged and "CG its" in cg.table()
    assert ls.converged and ls.backward_error[-1] <= (20 + 5) * U_D
    x = np.linalg.lstsq(out["A_ls"], out["b_ls"], rcond=None)[0]
    assert _relative_difference(ls.x, x) <= 10 * np.linalg.cond(out["A_ls"]) * U_D


def test_torch_input_is_computed_on_the_host():
    torch = pytest.importorskip("torch")
    A, b = ls_problem()
    res = linalg.ls_ir(torch.tensor(A), torch.tensor(b))
    assert isinstance(res.x, torch.Tensor) and isinstance(res.r, torch.Tensor)
    assert np.array_equal(res.x.numpy(), linalg.ls_ir(A, b).x)
    S, c = spd_matrix()
    cg = linalg.cg_ir(torch.tensor(S), torch.tensor(c), scaling="p")
    assert isinstance(cg.x, torch.Tensor) and np.array_equal(cg.x.numpy(), linalg.cg_ir(S, c, scaling="p").x)


@pytest.mark.parametrize("A, b", [(np.ones((2, 3)), np.ones(2)), (np.ones((0, 0)), np.ones(0)),
                                  (np.ones((3, 0)), np.ones(3)), (np.ones((3, 2)), np.ones(2))])
def test_ls_ir_refuses_shapes_it_cannot_solve(A, b):
    """Wide, empty and mismatched systems get the clear error (an empty one reached a NumPy
    reduction's message before)."""
    with pytest.raises(ValueError, match="m >= n >= 1"):
        linalg.ls_ir(A, b)


def _chol_by_chop(A: np.ndarray, o: dict) -> np.ndarray:
    """chol_lp's documented steps, each result rounded by ``chop(., o)``: the oracle of the factor."""
    a = chop(np.array(A, dtype=float), o)
    n = len(a)
    for k in range(n):
        assert a[k, k] > 0
        a[k, k] = chop(np.sqrt(a[k, k:k + 1]), o)[0]
        j = slice(k + 1, n)
        a[k, j] = chop(a[k, j] / a[k, k], o)
        a[j, j] = chop(a[j, j] - chop(np.outer(a[k, j], a[k, j]), o), o)
    return np.triu(a)


def _house_qr_by_chop(A: np.ndarray, o: dict) -> np.ndarray:
    """house_qr_lp's documented steps (economy R), each result rounded by ``chop(., o)``."""
    c = functools.partial(chop, options=o)
    R = np.array(A, dtype=float)
    m, n = R.shape
    for j in range(n):
        x = R[j:, j].copy()
        nx = np.max(np.abs(x))
        x1, square = c(x / nx), np.zeros(1)
        for xi in x1:
            square = c(square + c(np.array([xi * xi])))
        nu = c(nx * c(np.sqrt(square)))[0]
        u = c(x / nu)
        u[0] = c(np.array([u[0] + (1.0 if u[0] >= 0 else -1.0)]))[0]  # sign(0) taken as 1
        u = c(u / np.sqrt(abs(u[0])))
        X = R[j:, j:]
        uc, Xc, row = c(u), c(X), np.zeros(X.shape[1])
        for i in range(len(u)):
            row = c(row + c(uc[i] * Xc[i]))
        R[j:, j:] = c(X - c(np.outer(u, row)))
        R[j + 1:, j] = 0.0
    return R[:n, :n]


@pytest.mark.parametrize("options", [{"format": "h", "round": 2}, {"format": "h", "round": 3},
                                     {"format": "b", "round": 4, "subnormal": 1}])
def test_cholesky_factor_rounds_with_all_of_ufs_options(options):
    """The factor rounded to nearest whatever uf's rounding mode (chol_lp's 'h'/'b' only) while the
    x_0 solve honoured the mode: the factor is now chol_lp's steps rounded with all the options."""
    i = np.arange(6.0)
    A, b = 0.5 ** abs(i[:, None] - i) + np.pi * np.eye(6), np.cos(i + 1)
    R = _chol_by_chop(A, options)
    for res in (linalg.cg_ir(A, b, options, max_iter=0),
                linalg.gmres_ir(A, b, options, factorization="cholesky", max_iter=0)):
        assert np.array_equal(res.factors.U, np.diag(R)[:, None] * R)


def test_ls_ir_factor_rounds_with_all_of_ufs_options():
    """fp16 QR factors rounded to nearest whatever uf's options; single and double ones (LAPACK)
    cannot honour other options: refused, not ignored."""
    A, b = ls_problem()
    o = {"format": "h", "round": 2}
    d = 1.0 / np.linalg.norm(A, axis=0)
    mu = 0.1 * 65504.0
    R = ((1.0 / mu) * _house_qr_by_chop(chop(mu * A * d, o), o)) * (1.0 / d)
    assert np.array_equal(linalg.ls_ir(A, b, o, max_iter=0).R, R)
    for uf in ({"format": "s", "round": 3}, {"format": "d", "subnormal": 0}, {"format": "s", "flip": 1}):
        with pytest.raises(ValueError, match="would be ignored"):
            linalg.ls_ir(A, b, uf)


@pytest.mark.parametrize("theta", [0.0, float("nan"), 2.0, -0.1])
def test_ls_ir_refuses_theta_outside_0_1(theta):
    """theta = 0 raised a ZeroDivisionError and nan, 2, -0.1 were taken: ls_ir checks it as cg_ir does."""
    with pytest.raises(ValueError, match=r"theta must be in \(0, 1\]"):
        linalg.ls_ir(*ls_problem(), theta=theta)


@pytest.mark.parametrize("scale", [1e-170, 1e160])
def test_ls_ir_column_scaling_of_tiny_and_huge_columns(scale):
    """Column norms whose squares underflow or overflow double: the fp16 scaling used to divide by a
    norm of 0 or Inf and report 'singular'.  R's first entry is -+||a_1||_2 (mpmath) and R is s times
    the R of A (LAPACK's, up to the signs of its rows), both to fp16's accuracy."""
    A, b = ls_problem()
    res = linalg.ls_ir(A * scale, b)
    error = _relative_difference(res.x, np.linalg.lstsq(A * scale, b, rcond=None)[0])
    if scale > 1:
        assert res.status == "converged" and error <= 10 * np.linalg.cond(A) * U_D
    else:
        # sigma_min(R)^-2 ~ 1e341: the preconditioner's R \ (R' \ s) overflows and GMRES takes no step.
        # x_0 is 5e-2 from lstsq's x; the stop rule measured on [I, A; A^T, 0] called it 'converged'.
        assert not res.converged and error > 1e-2
    norm = mpmath.sqrt(mpmath.fsum(mpmath.mpf(v) ** 2 for v in A[:, 0] * scale))
    assert abs(abs(mpmath.mpf(res.R[0, 0])) / norm - 1) <= 2.0**-8
    R = np.abs(np.linalg.qr(A)[1])
    assert np.max(np.abs(np.abs(res.R) / scale - R)) <= 2.0**-6 * np.max(R)


def _scaled_augmented_backward_error(A, b, r, x, alpha):
    """Normwise backward error (infinity norm) of ``[alpha I, A; A^T, 0] [r / alpha; x] = [b; 0]``
    with exact rational residuals ``b - r - A x`` and ``-A^T r / alpha`` (fractions)."""
    m, n = A.shape
    F = np.vectorize(Fraction, otypes=[object])
    Af, bf, rf, xf, a = F(A), F(b), F(r), F(x), Fraction(alpha)
    res = [abs(v) for v in bf - rf - Af.dot(xf)] + [abs(v) / a for v in Af.T.dot(rf)]
    norm_k = max(max(a + sum(abs(v) for v in row) for row in Af), max(sum(abs(v) for v in col) for col in Af.T))
    norm_y = max(max(abs(v) for v in rf) / a, max(abs(v) for v in xf))
    return float(max(res) / (norm_k * norm_y + max(abs(v) for v in bf)))


def test_ls_ir_stop_rule_is_invariant_under_scaling_a_by_a_power_of_two():
    """2^e A has the fp16 QR factors of A times 2^e (exact): the same problem, x / 2^e its solution.
    The backward error of [I, A; A^T, 0] [r; x] = [b; 0] is not invariant: for ||A|| << 1 the identity
    block dominates, and 2^-27 A 'converged' at x_0, 5e-2 from lstsq's x (2^-20 A after one step, 1.5e-10).
    ls_ir measures [alpha I, A; A^T, 0] [r / alpha; x] = [b; 0], GMRES's system (alpha scales with A)."""
    A, b = ls_problem()
    runs = {e: linalg.ls_ir(2.0**e * A, b) for e in (0, -20, -27, 20)}
    for e, res in runs.items():
        x = np.linalg.lstsq(2.0**e * A, b, rcond=None)[0]
        assert res.converged and _relative_difference(res.x, x) <= 10 * np.linalg.cond(A) * U_D
        assert res.iterations == runs[0].iterations == 2
        first = linalg.ls_ir(2.0**e * A, b, max_iter=0)
        exact = _scaled_augmented_backward_error(2.0**e * A, b, first.r, first.x, first.alpha)
        assert first.backward_error[0] == pytest.approx(exact, rel=1e-12) and exact > 1e-4
        assert _scaled_augmented_backward_error(2.0**e * A, b, res.r, res.x, res.alpha) <= (12 + 5) * U_D


def test_column_norms_of_huge_and_tiny_columns_scale_by_a_power_of_two():
    """ls_ir's column norms are linalg.norm's 'fro' rule (linalg.common.safe_two_norm).  Where the
    squares overflow or underflow, a column is scaled by 2**k at or above its largest entry (it was
    divided by max|a_j|, not exact: another last bit for this matrix): an exact scaling, so the norm
    is 2**k times NumPy's norm of a_j / 2**k, finite, within 4 eps of the exact norm (mpmath)."""
    A = np.random.default_rng(4).standard_normal((6, 3)) * np.array([1e200, 1e-200, 1.0])
    norms = safe_two_norm(A, axis=0)
    k = np.frexp(np.max(np.abs(A), axis=0))[1]
    scaled = np.ldexp(1.0, k) * np.linalg.norm(A / np.ldexp(1.0, k), axis=0)
    assert np.array_equal(norms[:2], scaled[:2]) and np.all(np.isfinite(norms))
    assert norms[2] == np.linalg.norm(A, axis=0)[2]  # no overflow: NumPy's norm, bit for bit
    for j in range(3):
        with mpmath.workprec(200):
            exact = mpmath.sqrt(mpmath.fsum(mpmath.mpf(v) ** 2 for v in A[:, j]))
        assert abs(mpmath.mpf(norms[j]) / exact - 1) < 4 * 2.0**-52


def test_cholesky_route_reports_singular_whatever_the_options():
    """Documented: pivots <= 0 and Inf or NaN entries give status 'singular'.  With scaling, a
    diagonal entry <= 0 raised spd_diag_scale's ValueError, and an Inf entry chol_lp's 'not
    symmetric' (Inf - Inf is NaN), where the LU route says 'singular'."""
    b = np.ones(2)
    indefinite = np.array([[-1.0, 0.0], [0.0, 1.0]])
    for A in (indefinite, np.array([[np.inf, 1.0], [1.0, 2.0]]), np.array([[2.0, np.nan], [np.nan, 2.0]])):
        for scaling in (None, "positive"):
            for res in (linalg.cg_ir(A, b, scaling=scaling),
                        linalg.gmres_ir(A, b, factorization="cholesky", scaling=scaling)):
                assert res.status == "singular" and np.all(np.isnan(res.x))


def test_negative_iteration_counts_are_refused_by_cg_ir_and_ls_ir():
    """A negative max_iter gave status 'maxiter' with no iterate measured; 0 means no step."""
    A, b = spd_matrix(4)
    with pytest.raises(ValueError, match="max_iter"):
        linalg.cg_ir(A, b, scaling="p", max_iter=-1)
    with pytest.raises(ValueError, match="cg_maxit"):
        linalg.cg_ir(A, b, scaling="p", cg_maxit=-1)
    with pytest.raises(ValueError, match="max_iter"):
        linalg.ls_ir(*ls_problem(), max_iter=-1)
    with pytest.raises(ValueError, match="gmres_maxit"):
        linalg.ls_ir(*ls_problem(), gmres_maxit=-1)
    assert len(linalg.cg_ir(A, b, scaling="p", max_iter=0).backward_error) == 1


def test_spd_diag_scale_of_an_empty_matrix():
    """NumPy's empty-reduction error before: the empty result, nothing to squeeze (mu = 1)."""
    B, d, mu = linalg.spd_diag_scale(np.zeros((0, 0)), 1, 0.1)
    assert B.shape == (0, 0) and d.shape == (0,) and mu == 1.0
