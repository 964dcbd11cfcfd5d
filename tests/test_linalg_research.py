"""The research codes' linear algebra, bit for bit against GNU Octave's runs of the codes.

``tests/data/research_linalg/oracle.json`` holds inputs and the outputs of ``chol_lp.m``,
``lutx_chop.m``, ``scale_diag_2side.m`` and ``scale_diag_2side_symm.m`` of
github.com/SrikaraPranesh/Multi_precision_NLA_kernels (commit fb3a2d7) and of Octave's ``sum``,
run under GNU Octave with ``chop.m`` of github.com/higham/chop (commit 906c31e); its README
says how it was made.  No Octave is needed here.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from pychop_compat import linalg
from pychop_compat.kernels.compiled import available as compiled_available
from pychop_compat.kernels.compiled import cpu_engine
from pychop_compat.matlab import sequential_sum

NEEDS_NUMBA = pytest.mark.skipif(not compiled_available(), reason="the compiled engine needs Numba")

ORACLE = json.loads((Path(__file__).parent / "data" / "research_linalg" / "oracle.json").read_text())
INPUTS = {name: np.array(value, dtype=np.float64) for name, value in ORACLE["inputs"].items()}


def same_bits(computed, expected) -> bool:
    """Equal shapes and bits (every NaN counts as one value; the sign of zero counts)."""
    a = np.asarray(computed, dtype=np.float64)
    b = np.asarray(expected, dtype=np.float64).reshape(a.shape)
    nan = np.isnan(a)
    return bool(np.array_equal(nan, np.isnan(b)) and np.array_equal(a[~nan].view(np.uint64),
                                                                    b[~nan].view(np.uint64)))


def results(function: str) -> list:
    return [pytest.param(r, id=f"{r['case']}-{i}") for i, r in enumerate(ORACLE["results"])
            if r["function"] == function]


def test_oracle_covers_every_function():
    assert {r["function"] for r in ORACLE["results"]} == {"scale_diag_2side", "scale_diag_2side_symm",
                                                         "lutx_chop", "chol_lp", "sum",
                                                         "spd_diag_scale", "house_qr_lp"}
    assert "fb3a2d7d0d8a1cd5b0e09e7b4801996b4f5de2bc" in ORACLE["provenance"]["research"]


@pytest.mark.parametrize("result", results("scale_diag_2side"))
def test_scale_diag_2side_matches_octave(result):
    B, d1, d2 = linalg.scale_diag_2side(INPUTS[result["case"]])
    out = result["outputs"]
    assert same_bits(B, out["B"]) and same_bits(d1, out["d1"]) and same_bits(d2, out["d2"])


@pytest.mark.parametrize("result", results("scale_diag_2side_symm"))
def test_scale_diag_2side_symm_matches_octave(result):
    B, d1, d2, its = linalg.scale_diag_2side_symm(INPUTS[result["case"]])
    out = result["outputs"]
    assert same_bits(B, out["B"]) and same_bits(d1, out["d1"]) and same_bits(d2, out["d2"])
    assert its == out["its"][0][0]


def test_research_scaling_differs_from_the_package_equilibration():
    """The named fix: the research name no longer gives the ``D A D`` equilibration."""
    A = INPUTS["wide"]
    B, d1, d2, _ = linalg.scale_diag_2side_symm(A)
    old = linalg.ruiz_equilibrate_symmetric(A)
    assert not np.array_equal(old.row, d1)
    assert abs(np.max(np.abs(B)) - 1) < 1e-4


@pytest.mark.parametrize("result", results("spd_diag_scale"))
def test_spd_diag_scale_matches_octave(result):
    flag = 1 if "A, 1," in result["call"] else 0
    B, d, mu = linalg.spd_diag_scale(INPUTS[result["case"]], flag, 0.1)
    out = result["outputs"]
    assert same_bits(B, out["B"]) and same_bits(d, out["d"]) and same_bits(mu, out["mu"])


def test_spd_diag_scale_refuses_what_the_code_refuses():
    with pytest.raises(ValueError, match="Input matrix is not symmetric"):
        linalg.spd_diag_scale(np.array([[2.0, 1.0], [1.5, 2.0]]))
    with pytest.raises(ValueError, match="positive definite"):
        linalg.spd_diag_scale(np.array([[2.0, 1.0], [1.0, 0.0]]))


@pytest.mark.parametrize("result", results("lutx_chop"))
def test_lutx_chop_matches_octave(result):
    A = INPUTS[result["case"]]
    fmt = "b" if "'b')" in result["call"] else "h"
    if "scale_diag_2side_symm" in result["call"]:  # gmresir3_ctest's flow: scale, squeeze, round, factorize
        B = linalg.scale_diag_2side_symm(A)[0]
        A = _chop(0.1 * 65504 * B, "h")
    L, U, p = linalg.lutx_chop(A, fmt)
    out = result["outputs"]
    assert same_bits(L, out["L"]) and same_bits(U, out["U"])
    assert p.tolist() == [int(v) - 1 for v in np.ravel(out["p"])]


def _chop(x, fmt):
    from pychop_compat import Chop

    return np.asarray(Chop({"format": fmt})(x))


def test_lutx_chop_is_lu_on_a_rounded_matrix():
    A = _chop(INPUTS["normal"], "h")
    L, U, p = linalg.lutx_chop(A, "h")
    F = linalg.lu(A, "h")
    assert same_bits(L, F.L) and same_bits(U, F.U) and p.tolist() == F.perm.tolist()


@pytest.mark.parametrize("engine", ["numpy", pytest.param("numba", marks=NEEDS_NUMBA)])
@pytest.mark.parametrize("result", results("chol_lp"))
def test_chol_lp_matches_octave(result, engine):
    fmt = "b" if "'b')" in result["call"] else "h"
    with cpu_engine(engine):
        R, flag = linalg.chol_lp(INPUTS[result["case"]], fmt)
    out = result["outputs"]
    assert same_bits(R, out["R"]) and flag == out["flag"][0][0]


@NEEDS_NUMBA
@pytest.mark.parametrize("fmt", ["h", "b"])
def test_compiled_chol_lp_is_the_numpy_one_bit_for_bit(fmt):
    """Beyond Octave's cases: larger sizes, overflow, subnormals (fp16) and flushed tiny numbers
    (bfloat16's chop.m default), and a failure half way."""
    rng = np.random.default_rng(7)
    for n in (17, 90, 270):  # 270: the panels' trailing rows on several threads
        X = rng.standard_normal((n, n))
        cases = ((1.0, n), (1e5, n), (1e-6, n), (1.0, 0.0)) if n < 270 else ((1.0, n), (1.0, 0.0))
        for scale, shift in cases:
            A = scale * (X @ X.T + shift * np.eye(n))
            A = (A + A.T) / 2
            if shift == 0.0:
                A[n // 2, n // 2] = -1.0
            with cpu_engine("numpy"):
                expected = linalg.chol_lp(A, fmt)
            with cpu_engine("numba"):
                found = linalg.chol_lp(A, fmt)
            assert found[1] == expected[1] and same_bits(found[0], expected[0]), (n, scale, shift)


@pytest.mark.parametrize("engine", ["numpy", pytest.param("numba", marks=NEEDS_NUMBA)])
@pytest.mark.parametrize("result", results("house_qr_lp"))
def test_house_qr_lp_matches_octave(result, engine):
    flag = 0 if "A, 0)" in result["call"] else 1
    with cpu_engine(engine):
        Q, R = linalg.house_qr_lp(INPUTS[result["case"]], flag)
    out = result["outputs"]
    assert same_bits(Q, out["Q"]) and same_bits(R, out["R"])


@NEEDS_NUMBA
def test_compiled_house_qr_lp_is_the_numpy_one_bit_for_bit():
    """Beyond Octave's cases: overflow, subnormals, a zero column (the code's ``nu == 0``
    branch), NaN and Inf, square and tall, both flags."""
    rng = np.random.default_rng(8)
    for m, n in ((1, 1), (3, 2), (9, 4), (17, 6), (12, 12)):
        for change in range(6):
            A = rng.standard_normal((m, n)) * (1e4 if change == 1 else 1e-6 if change == 2 else 1.0)
            if change == 3:
                A[:, 0] = 0.0
            if change in (4, 5):
                A[m // 2, n // 2] = np.nan if change == 4 else np.inf
            for flag in (0, 1):
                with cpu_engine("numpy"):
                    expected = linalg.house_qr_lp(A, flag)
                with cpu_engine("numba"):
                    found = linalg.house_qr_lp(A, flag)
                assert same_bits(found[0], expected[0]) and same_bits(found[1], expected[1]), (m, n, change)


def test_house_qr_lp_refuses_what_the_code_cannot_run():
    with pytest.raises(ValueError, match="Matrix must have more rows than columns"):
        linalg.house_qr_lp(np.ones((2, 3)))
    with pytest.raises(ValueError, match="fp16"):
        linalg.house_qr_lp(np.ones((3, 2)), 1, "b")


def test_chol_lp_refuses_what_the_code_refuses():
    with pytest.raises(ValueError, match="Input matrix is not symmetric"):
        linalg.chol_lp(np.array([[2.0, 1.0], [1.5, 2.0]]))
    with pytest.raises(ValueError, match="unsupported low precision format"):
        linalg.chol_lp(np.eye(2), "s")
    with pytest.raises(ValueError, match="square"):
        linalg.lutx_chop(np.ones((2, 3)))


@pytest.mark.parametrize("result", results("sum"))
def test_sequential_sum_matches_octave(result):
    x = INPUTS[result["case"]]
    call = result["call"]
    if "single" in call:
        s = sequential_sum(x.astype(np.float32))
    elif ", 2)" in call:
        s = sequential_sum(x, 2)
    else:
        s = sequential_sum(x)
    assert same_bits(s, result["outputs"]["s"])


def test_sequential_sum_vector_where_numpy_differs():
    x = INPUTS["sum_numpy_differs"]
    expected = np.ravel(next(r for r in ORACLE["results"] if r["case"] == "sum_numpy_differs")["outputs"]["s"])[0]
    assert float(np.sum(x)) != expected  # NumPy's pairwise order gives another last bit
    assert sequential_sum(x) == expected
    with pytest.raises(ValueError, match="dim"):
        sequential_sum(np.eye(2), 3)


@pytest.mark.parametrize("library", ["torch", "jax"])
def test_research_functions_take_torch_and_jax_arrays(library):
    """Computed by NumPy on a copy, the outputs given back on the input's library, same bits."""
    xp = pytest.importorskip(library)
    if library == "jax":
        xp.config.update("jax_enable_x64", True)
        convert = xp.numpy.asarray
    else:
        convert = xp.asarray
    calls = [(linalg.chol_lp, INPUTS["normal_spd"], ("h",)), (linalg.lutx_chop, INPUTS["normal"], ("h",)),
             (linalg.house_qr_lp, INPUTS["tall"], (0,)), (linalg.scale_diag_2side, INPUTS["wide"], ()),
             (linalg.scale_diag_2side_symm, INPUTS["wide"], ()), (linalg.spd_diag_scale, INPUTS["spd_wide"], (1, 0.1))]
    for function, A, args in calls:
        want = function(A, *args)
        got = function(convert(A), *args)
        for g, w in zip(got, want):
            if isinstance(w, np.ndarray):
                assert type(g).__module__.split(".")[0] in (library, "jaxlib"), function.__name__
                assert same_bits(np.asarray(g), w), function.__name__
            else:
                assert g == w
