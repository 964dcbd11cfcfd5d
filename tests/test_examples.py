"""The examples' key claims, on small sizes.

Expected values: the published harmonic-series results of Higham & Pranesh
(2019), mathematical facts stated at each assertion, exact solutions from
mpmath, and the standard rounding-error bounds.
"""

from __future__ import annotations

import importlib.util
import json
import math
from pathlib import Path

import mpmath
import numpy as np
import pytest

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def load(name):
    spec = importlib.util.spec_from_file_location(f"example_{name}", EXAMPLES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# ---------------------------------------------------------------------------
# harmonic.py
# ---------------------------------------------------------------------------


def test_harmonic_published_numbers():
    res = load("harmonic").main(formats=("fp16", "bfloat16"), rounds=(1,), verbose=False)
    # Higham & Pranesh (2019), sec. 5: round to nearest stagnates at
    # 7.0859375 after 513 terms in fp16 and at 5.0625 after 65 terms in bfloat16.
    assert res[("fp16", 1)] == (7.0859375, 513, True)
    assert res[("bfloat16", 1)] == (5.0625, 65, True)


@pytest.fixture(scope="module")
def harmonic_all():
    return load("harmonic").main(verbose=False)


def test_harmonic_all_formats_and_modes(harmonic_all):
    res = harmonic_all
    mod = load("harmonic")
    assert set(res) == {(f, m) for f in mod.FORMATS for m in range(1, 7)}
    assert res[("fp16", 1)][:2] == (7.0859375, 513)
    assert res[("bfloat16", 1)][:2] == (5.0625, 65)
    from pychop_compat import Chop

    for fmt in mod.FORMATS:
        # every partial sum and term is positive, so rounding down and
        # rounding toward zero are the same operation
        assert res[(fmt, 3)] == res[(fmt, 4)]
        # rounding is monotone, so by induction every partial sum rounded
        # down is at most the one rounded to nearest; both sequences are
        # nondecreasing, so the final sums are ordered too
        assert res[(fmt, 3)][0] <= res[(fmt, 1)][0]
        # round to nearest stagnates only once chop(1/n) is at most half the
        # spacing of the format at s (else s + chop(1/n) would round away from s)
        s, n, stagnated = res[(fmt, 1)]
        assert stagnated
        o = mod.options_for(fmt, 1)
        t = Chop(o).options.params[0]
        spacing = 2.0 ** (math.frexp(s)[1] - t)
        assert Chop(o)(1 / n) <= spacing / 2
    assert all(r[2] for r in res.values())  # every run stagnated (none hit the cap)
    # fp16, round up: each term moves s up by at least one spacing, so the sum
    # grows until it overflows to inf (chop's round-up overflow)
    assert res[("fp16", 2)][0] == math.inf


# ---------------------------------------------------------------------------
# lu_solve.py
# ---------------------------------------------------------------------------


def test_lu_solve_claims():
    n, kappas = 30, (1e1, 1e3, 1e5)
    res = load("lu_solve").main(n=n, kappas=kappas, formats=("fp16", "bfloat16"), verbose=False)
    for fmt in ("fp16", "bfloat16"):
        u = res["u"][fmt]
        for kappa in kappas:
            ferr, nbe = res[(fmt, False, 1, kappa)]
            # backward stable: normwise backward error of order u
            # (Higham Thm 9.4 gives gamma_3n times a modest growth factor)
            assert nbe <= 3 * n * u
            assert ferr <= n * kappa * u
            # scaled near the underflow threshold: with subnormals still
            # backward stable ...
            _, nbe_sub = res[(fmt, True, 1, kappa)]
            assert nbe_sub <= 3 * n * u
            # ... flushing subnormals to zero is markedly worse (or fails)
            _, nbe_ftz = res[(fmt, True, 0, kappa)]
            assert nbe_ftz >= 3 * nbe_sub
        # the forward error grows with the condition number
        assert res[(fmt, False, 1, kappas[-1])][0] >= 100 * res[(fmt, False, 1, kappas[0])][0]


# ---------------------------------------------------------------------------
# gmres_ir.py
# ---------------------------------------------------------------------------


def mp_solve(A, b):
    with mpmath.workprec(200):
        x = mpmath.lu_solve(mpmath.matrix(A.tolist()), mpmath.matrix(b.tolist()))
        return np.array([float(v) for v in x])


@pytest.mark.slow  # runs the example's study: CI's slow step
def test_gmres_ir_claims():
    n = 40
    out = load("gmres_ir").main(n=n, kappas=(1e7,), modes=(2, 3), verbose=False)
    assert len(out) == 2
    for (mode, kappa), r in out.items():
        A, b = r["A"], r["b"]
        x_exact = mp_solve(A, b)
        err = lambda x: np.linalg.norm(x - x_exact, np.inf) / np.linalg.norm(x_exact, np.inf)  # noqa: E731
        # the example's reference solution is accurate to double precision
        assert err(r["x_ref"]) <= 2.0**-52
        # kappa_inf(A) * uf >> 1: outside the range where LU-IR can converge
        assert r["kappa_inf"] * 2.0**-11 > 1e3
        lu_res, gm_res = r["lu_ir"], r["gmres_ir"]
        assert not lu_res.converged
        assert lu_res.forward_error[-1] > 0.1
        # GMRES-IR reaches double-precision accuracy
        assert gm_res.converged
        assert err(gm_res.x) <= 2.0**-52
        assert gm_res.backward_error[-1] <= 2.0**-53
        assert gm_res.iterations <= 10


# ---------------------------------------------------------------------------
# gmres_ir_study.py
# ---------------------------------------------------------------------------


@pytest.mark.slow  # runs the example's study: CI's slow step
def test_gmres_ir_study_small(tmp_path):
    study = load("gmres_ir_study")
    n = 16
    out = study.main(n=n, kappas=(1e2, 1e8), modes=(2, 3), ufs=("h", "s"), verbose=False,
                     plot=str(tmp_path / "study.png"))
    assert len(out) == 8
    for (mode, kappa, uf), r in out.items():
        res = r["result"]
        # converged is claimed only with the backward error criterion met, checked here with
        # an exact residual (mpmath at 200 bits)
        if res.converged:
            A, b, x = r["A"], r["b"], res.x
            with mpmath.workprec(200):
                rr = [abs(mpmath.mpf(b[i]) - mpmath.fsum(mpmath.mpf(A[i, j]) * mpmath.mpf(x[j]) for j in range(n)))
                      for i in range(n)]
                nbe = max(rr) / (max(mpmath.fsum(abs(mpmath.mpf(v)) for v in row) for row in A)
                                 * max(abs(mpmath.mpf(v)) for v in x) + max(abs(mpmath.mpf(v)) for v in b))
            assert nbe <= n * 2.0**-53
    # GMRES-IR with single factors converges on all of these (kappa * u_s < 1 up to 1e8)
    assert all(out[(m, k, "s")]["result"].converged for m in (2, 3) for k in (1e2, 1e8))
    text = study.table(out, (2, 3), (1e2, 1e8), ("h", "s"), n)
    assert "fp16" in text and "single" in text
    pytest.importorskip("matplotlib")
    assert (tmp_path / "study.png").stat().st_size > 0


# ---------------------------------------------------------------------------
# dask_out_of_core.py
# ---------------------------------------------------------------------------


def test_dask_out_of_core_small():
    pytest.importorskip("dask.array")
    res = load("dask_out_of_core").run(n=200_000, chunk=2**14, scheduler="threads", verbose=False)
    # Round to nearest in bfloat16 (t = 8): relative error at most the unit roundoff 2^-8,
    # and standard-normal doubles are never bfloat16 numbers.
    assert 0 < res["max_relative_error"] <= 2.0**-8
    assert res["inexact_fraction"] == 1.0
    if "mean_signed_error_sr" in res:
        # Stochastic rounding is unbiased: |mean error| is far below the mean absolute error
        # (a 6-sigma bound for 200,000 independent errors is about 1.3% of it).
        assert abs(res["mean_signed_error_sr"]) < 0.05 * res["mean_abs_error_sr"]


# ---------------------------------------------------------------------------
# train_digits.py
# ---------------------------------------------------------------------------


@pytest.mark.slow  # trains a network: CI's slow step
def test_train_digits_smoke(tmp_path):
    """Two epochs, one seed: every configuration runs and is recorded, and the float32 baseline
    learns (test accuracy well above the 1/10 of guessing)."""
    pytest.importorskip("torch")
    pytest.importorskip("sklearn")
    mod = load("train_digits")
    path = tmp_path / "results.json"
    results = mod.main(seeds=(0,), epochs=2, results_path=path, verbose=False)
    assert set(results) == {("float32", "-")} | {(label, r) for label, fmt in mod.FORMATS[1:] for r in ("RN", "SR")}
    assert all(len(h) == 1 and len(h[0]) == 2 and all(0 <= a <= 1 for a in h[0]) for h in results.values())
    assert results[("float32", "-")][0][-1] > 0.5
    stored = json.loads(path.read_text())["histories"]
    assert stored == {f"{label}|{rounding}": h for (label, rounding), h in results.items()}


@pytest.mark.slow  # trains a network: CI's slow step
def test_train_digits_hardware_smoke(tmp_path):
    """One epoch, one seed: the three configurations run and are recorded, and each learns (test
    accuracy well above the 1/10 of guessing)."""
    pytest.importorskip("torch")
    pytest.importorskip("sklearn")
    mod = load("train_digits_hardware")
    path = tmp_path / "results.json"
    histories = mod.main(seeds=(0,), epochs=1, results_path=path, verbose=False)
    assert list(histories) == list(mod.CONFIGURATIONS)
    assert json.loads(path.read_text())["histories"] == histories
    finals = [h[0][-1] for h in histories.values()]
    assert all(a > 0.5 for a in finals)
