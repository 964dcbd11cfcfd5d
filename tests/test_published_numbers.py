"""Published numbers of chop studies as regression tests.

Source of every expected value: the public repository of Higham & Pranesh,
"Simulating Low Precision Floating-Point Arithmetic", SIAM J. Sci. Comput.
41(5), C585-C602, 2019 -- https://github.com/SrikaraPranesh/LowPrecision_Simulation
("Test.m generates all the tables in the manuscript"):

* Euler's method (``MainScripts/euler_exp.m``): ``Results/euler_exp_results.mat``,
  commit 4cb5b23 (2019-01-28), variables ``nrange``, ``efp(:, 1:4)`` (64
  errors: 16 step counts x bfloat16, fp16, fp16 without subnormals, fp32)
  and ``edp`` (16 errors in double), transcribed as the stored doubles.
* Series summation (``MainScripts/sum_series.m``): ``Results/sum_series.txt``,
  same commit, printed ``'%12.6e'`` (sums) and ``'%9.2e'`` (difference): 12
  numbers.  Seven significant digits identify an fp16 number uniquely, and
  Python's ``%e`` rounds the exact binary value as C's ``fprintf`` does.
* Matrix multiplication (``MainScripts/matmult.m``): the comment block at the
  end of the file, commit 126f8cd (2019-03-20), case "rpts = 1" with
  ``rand``: 10 numbers as MATLAB displays them (``format short e``, five
  significant digits).

These are the outputs the authors' scripts wrote; the paper's typeset
tables were not available to compare with.  The numbers were made with the
chop of early 2019, so they are computed with
``chop_at`` of the study's date (``chop_at('2019-03-07')``, chop's first
release, for the two experiments run before it).  Where today's ``chop``
gives other numbers the tests say which, and why: since 2020-06-16 (commit
d27af83) chop rounds values below ``xmin`` to ``xmin`` or 0 instead of
flushing them to 0 when subnormals are off.

Two more studies, on SuiteSparse matrices, are cited at their sections below: the fp16 LU
residuals of Multi_precision_NLA_kernels' ``gmresir3_ctest.txt`` and the fp16 Cholesky
condition numbers of fp16_Cholesky's ``cholir_test.txt``.

The default run checks a leading part of each table (a few seconds); the
whole tables take up to half an hour and carry the ``published`` marker
(excluded by default; run ``python -m pytest -m published
tests/test_published_numbers.py``).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

from pychop_compat import chop, chop_at, clear_chop, rand, rng

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
MATRICES = Path(__file__).resolve().parent / "data" / "matrices"


def load(name):
    spec = importlib.util.spec_from_file_location(f"example_{name}", EXAMPLES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(autouse=True)
def _fresh_chop():
    clear_chop()
    yield
    clear_chop()


# ---------------------------------------------------------------------------
# Euler's method: Results/euler_exp_results.mat (commit 4cb5b23)
# ---------------------------------------------------------------------------

NRANGE = (10, 18, 34, 63, 117, 215, 398, 736, 1359, 2512, 4642, 8577, 15849, 29286, 54117, 100000)

# efp(:, 1:4): columns bfloat16, fp16, fp16 with subnormal = 0, fp32.
EULER_EFP = (
    (0.0001692729273394234, 0.0001864390650347359, 0.0001864390650347359, 0.00018860462285136053),
    (0.0001234965601519234, 9.870102792536089e-05, 9.870102792536089e-05, 0.00010113154701446364),
    (4.720261483942339e-05, 5.101731210504839e-05, 5.101731210504839e-05, 5.123314611171553e-05),
    (0.0001359028539105766, 2.6221779878485892e-05, 0.0001530689916058891, 2.5828296090710853e-05),
    (0.0004105610570355766, 1.0962990815985892e-05, 0.0034279865941449516, 1.2197691719282363e-05),
    (0.0005507426539019234, 8.110495512139108e-06, 0.006330971213285576, 4.987392346609328e-06),
    (0.006330971213285576, 4.529526620661089e-05, 0.006330971213285576, 1.0360234931595068e-06),
    (0.006330971213285576, 3.3335962847358923e-06, 0.006330971213285576, 1.0922814204805155e-06),
    (0.006330971213285576, 8.821913809026411e-05, 0.006330971213285576, 2.2385066791885157e-06),
    (0.006330971213285576, 0.005964760275785576, 0.006330971213285576, 2.8587675138824244e-06),
    (0.006330971213285576, 0.006330971213285576, 0.006330971213285576, 3.1942764713876505e-06),
    (0.006330971213285576, 0.006330971213285576, 0.006330971213285576, 3.375884373437669e-06),
    (0.006330971213285576, 0.006330971213285576, 0.006330971213285576, 3.4750702276342173e-06),
    (0.006330971213285576, 0.006330971213285576, 0.006330971213285576, 3.5244303240888376e-06),
    (0.006330971213285576, 0.006330971213285576, 0.006330971213285576, 3.582405154358651e-06),
    (0.006330971213285576, 0.006330971213285576, 0.006330971213285576, 3.6604034199826975e-06),
)

EULER_EDP = (
    0.00019201001071442268, 0.00010462204376778797, 5.477282085777522e-05, 2.9391427788751177e-05,
    1.5777571749092754e-05, 8.571954608822731e-06, 4.62644546620275e-06, 2.500596792433512e-06,
    1.3539082920586976e-06, 7.323655924983651e-07, 3.962865851537753e-07, 2.144673624717569e-07,
    1.1606067034644271e-07, 6.280896597829835e-08, 3.398952946962602e-08, 1.839404877327852e-08,
)

# Where today's chop differs from the published table: fp16 without
# subnormals (column 2) at n = 63, 117, 215, where the iterates pass below
# fp16's xmin = 2**-14 (the 2019 chop flushed them to 0; today's rounds them
# to xmin or 0).  Everywhere else today's chop gives the published double.
EULER_TODAY_DIFFERS = {(63, 2), (117, 2), (215, 2)}


def euler_table(ch, nvalues):
    return load("published_euler").chopped_errors(ch, nvalues)


def test_euler_examples_copy_is_the_published_table():
    mod = load("published_euler")
    assert mod.NRANGE == NRANGE and mod.PUBLISHED_EFP == EULER_EFP and mod.PUBLISHED_EDP == EULER_EDP
    # the script's step counts, round(10.^linspace(1, 5, 16)), as stored
    assert mod.nrange() == list(NRANGE)


def test_euler_double_precision_all_16():
    assert load("published_euler").double_errors(NRANGE) == list(EULER_EDP)


def test_euler_study_chop_up_to_n_2512():
    """chop_at('2019-03-07'): 40 of the 64 numbers, every one identical."""
    nvalues = [n for n in NRANGE if n <= 2512]
    assert euler_table(chop_at("2019-03-07"), nvalues) == [list(r) for r in EULER_EFP[:len(nvalues)]]


def test_euler_today_chop_differs_only_where_documented():
    nvalues = [n for n in NRANGE if n <= 215]
    got = euler_table(chop, nvalues)
    for j, n in enumerate(nvalues):
        for k in range(4):
            if (n, k) in EULER_TODAY_DIFFERS:
                assert got[j][k] != EULER_EFP[j][k], (n, k)
            else:
                assert got[j][k] == EULER_EFP[j][k], (n, k)


@pytest.mark.published
def test_euler_study_chop_all_64():
    assert euler_table(chop_at("2019-03-07"), NRANGE) == [list(r) for r in EULER_EFP]


@pytest.mark.published
def test_euler_today_chop_61_of_64():
    got = euler_table(chop, NRANGE)
    differ = {(n, k) for j, n in enumerate(NRANGE) for k in range(4) if got[j][k] != EULER_EFP[j][k]}
    assert differ == EULER_TODAY_DIFFERS


# ---------------------------------------------------------------------------
# Series summation: Results/sum_series.txt (commit 4cb5b23)
# ---------------------------------------------------------------------------

# nmax: (sum with subnormals '%12.6e', sum without '%12.6e', difference '%9.2e')
SERIES = {
    100: ("1.634766e+00", "1.634766e+00", "0.00e+00"),
    1000: ("1.643555e+00", "1.636719e+00", "6.84e-03"),
    10000: ("1.644531e+00", "1.636719e+00", "7.81e-03"),
    100000: ("1.644531e+00", "1.636719e+00", "7.81e-03"),
}


def series_rows(ch, nmaxes):
    mod = load("published_series")
    return {n: mod.printed(*s) for n, s in mod.series_sums(ch, nmaxes).items()}


def test_series_examples_copy_is_the_published_table():
    assert load("published_series").PUBLISHED == SERIES


def test_series_study_chop_up_to_1000():
    assert series_rows(chop_at("2019-03-07"), (100, 1000)) == {n: SERIES[n] for n in (100, 1000)}


def test_series_today_chop_differs_without_subnormals():
    got = series_rows(chop, (100, 1000))
    assert got[100] == SERIES[100]
    # With subnormals: as published.  Without: summed from the smallest term,
    # the first partial sums, (1/k)^2 for k > 128, lie below xmin = 2**-14;
    # the 2019 chop flushed them to 0, today's rounds those >= xmin/2 to xmin.
    # For positive values today's rounding is pointwise >= the old one and
    # both are monotone, so by induction every partial sum is >= the old one:
    # the sums differ and today's is the larger.
    assert got[1000][0] == SERIES[1000][0]
    assert got[1000][1] != SERIES[1000][1]
    assert float(got[1000][1]) > float(SERIES[1000][1])


@pytest.mark.published
def test_series_study_chop_all_12():
    assert series_rows(chop_at("2019-03-07"), tuple(SERIES)) == SERIES


@pytest.mark.published
def test_series_today_chop_all_with_subnormals_one_without():
    got = series_rows(chop, tuple(SERIES))
    assert [got[n][0] == SERIES[n][0] for n in SERIES] == [True] * 4
    assert [got[n][1] == SERIES[n][1] for n in SERIES] == [True, False, False, False]


# ---------------------------------------------------------------------------
# Matrix multiplication: matmult.m closing comment (commit 126f8cd)
# ---------------------------------------------------------------------------

MATMUL_NVALS = (500, 1000, 1500, 2000, 2500)
MATMUL_CBE64 = ("4.8759e-04", "4.8799e-04", "3.6660e-04", "4.8803e-04", "4.2930e-04")
MATMUL_CBE16 = ("1.1945e-02", "2.3047e-02", "4.0701e-02", "4.5976e-02", "6.8770e-02")


def test_matmul_examples_copy_is_the_published_table():
    mod = load("published_matmul")
    assert (mod.NVALS, mod.PUBLISHED_CBE64, mod.PUBLISHED_CBE16) == (
        MATMUL_NVALS, MATMUL_CBE64, MATMUL_CBE16)


def test_matmul_n_500():
    mod = load("published_matmul")
    (cbe64, cbe16), = mod.errors(chop, (500,)).values()
    assert (mod.displayed(cbe64), mod.displayed(cbe16)) == (MATMUL_CBE64[0], MATMUL_CBE16[0])


def test_matmul_study_chop_rounds_the_matrices_as_today():
    """The study's chop (2019-03-20) and today's agree on A, B and chop(A*B) at n = 500."""
    old = chop_at("2019-03-20")
    old([], {"format": "h"})
    chop([], {"format": "h"})
    rng(1)
    X, Y = rand(500), rand(500)
    A, B = chop(X), chop(Y)
    assert np.array_equal(old(X), A) and np.array_equal(old(Y), B)
    assert np.array_equal(old(A @ B), chop(A @ B))


@pytest.mark.published
def test_matmul_all_10():
    mod = load("published_matmul")
    got = mod.errors(chop, MATMUL_NVALS)
    assert [mod.displayed(got[n][0]) for n in MATMUL_NVALS] == list(MATMUL_CBE64)
    assert [mod.displayed(got[n][1]) for n in MATMUL_NVALS] == list(MATMUL_CBE16)


@pytest.mark.published
def test_matmul_study_chop_accumulation_n_500():
    mod = load("published_matmul")
    (cbe64, cbe16), = mod.errors(chop_at("2019-03-20"), (500,)).values()
    assert (mod.displayed(cbe64), mod.displayed(cbe16)) == (MATMUL_CBE64[0], MATMUL_CBE16[0])


# ---------------------------------------------------------------------------
# LU residuals of the GMRES-IR SuiteSparse test: gmresir3_ctest.txt of
# github.com/SrikaraPranesh/Multi_precision_NLA_kernels (commit 3265d72),
# printed '%6.2e'.  The matrices are SuiteSparse's: two of them, MATLAB v7.3
# files, are stored in tests/data/matrices (the tests after this one); the
# others are not shipped and the test runs when PYCHOP_SUITESPARSE_DIR names a
# folder of SuiteSparse .mat files (v5/v7 format), for the matrices found there.
# ---------------------------------------------------------------------------


@pytest.mark.published
def test_gmresir3_ctest_lu_residuals():
    import os

    folder = os.environ.get("PYCHOP_SUITESPARSE_DIR")
    if not folder:
        pytest.skip("set PYCHOP_SUITESPARSE_DIR to a folder of SuiteSparse .mat files")
    mod = load("published_gmresir3_lu")
    got = mod.main(folder, verbose=False)
    if not got:
        pytest.skip(f"none of the test's matrices in {folder}")
    for name, n, cond, amax, amin, res in mod.PUBLISHED:
        if name in got:
            props, study, today = got[name]
            assert props == (cond, amax, amin), name
            assert study == res, name
            assert today == res, name


V73_ROWS = ("tumorAntiAngiogenesis_2", "tumorAntiAngiogenesis_3")


@pytest.mark.parametrize("name", V73_ROWS)
def test_gmresir3_ctest_v73_matrix_properties(name):
    """The two rows whose matrices are MATLAB v7.3 (HDF5) files, stored in tests/data/matrices and
    read by ``pychop_compat.matlab.load_suitesparse``: the published cond(A, inf), max and min."""
    pytest.importorskip("h5py")
    from pychop_compat.matlab import load_suitesparse

    mod = load("published_gmresir3_lu")
    (row,) = [r for r in mod.PUBLISHED if r[0] == name]
    A = load_suitesparse(MATRICES / f"{name}.mat").A.toarray()
    assert (A.shape[0],) + mod.properties(A) == row[1:5]


@pytest.mark.published
@pytest.mark.parametrize("name", V73_ROWS)
def test_gmresir3_ctest_v73_matrix_lu_residual(name):
    """Their fp16 LU residuals, with the study's chop and today's (about a minute each)."""
    pytest.importorskip("h5py")
    from pychop_compat.matlab import load_suitesparse

    mod = load("published_gmresir3_lu")
    (row,) = [r for r in mod.PUBLISHED if r[0] == name]
    A = load_suitesparse(MATRICES / f"{name}.mat").A.toarray()
    assert [f"{r:.2e}" for r in mod.residuals(A)] == [row[5], row[5]]


# ---------------------------------------------------------------------------
# fp16 Cholesky preconditioners: cholir_test.txt of github.com/SrikaraPranesh/fp16_Cholesky
# (commit 18e0c8d, 2019-11-06; Higham & Pranesh, "Exploiting lower precision arithmetic in
# solving symmetric positive definite linear systems and least squares problems", SIAM J. Sci.
# Comput. 43(1), A258-A277, 2021), written by cholir_test.m: its first two blocks, printed
# '%6.2e'.  The script takes the 14 real SPD SuiteSparse matrices with 300 <= n <= 500; per
# matrix, with mu = 0.1 * xmax and c = 2:
#   block 1: n, cond(A), max |a_ij|, min |a_ij| > 0;
#   block 2: cond(mu * H) with H = D A D (spd_diag_scale), cond of the preconditioned matrix
#   with R = chol_lp(chop(mu H + c u mu I)), with R = chol_lp(mu * spd_diag_scale(A + c u amax I))
#   (amax = max a_ii), and with a single-precision Cholesky factor of A + c u_s diag(diag(A)).
# Its other blocks (GMRES-IR and CG-IR iteration counts) solve for b = randn(n, 1): MATLAB's
# randn is not reproduced (docs/linalg.rst), so they are not tests.
# Three of the 14 matrices are here: Trefethen_300 and Trefethen_500, which are generated (the
# collection's JGD_Trefethen matrices: the primes 2, 3, 5, ... on the diagonal and ones where
# |i - j| is a power of 2), and nos5, stored in tests/data/matrices (a v5 file).  The others run
# with the published marker when PYCHOP_SUITESPARSE_DIR names a folder of SuiteSparse files.
# ---------------------------------------------------------------------------

#: name: ((n, cond(A), max, min), (cond(mu H), cond with chop(mu H + c u mu I), with A + c u amax I, single))
CHOLIR_TEST = {
    "Trefethen_300": ((300, "1.77e+03", "1.99e+03", "1.00e+00"), ("4.45e+00", "1.00e+00", "2.73e+00", "1.00e+00")),
    "mesh2e1": ((306, "2.90e+02", "2.46e+02", "7.22e-07"), ("1.21e+02", "1.10e+00", "1.20e+00", "1.00e+00")),
    "mesh2em5": ((306, "2.47e+02", "1.47e+02", "1.59e-06"), ("1.27e+02", "1.09e+00", "1.14e+00", "1.00e+00")),
    "plat362": ((362, "2.18e+11", "4.57e-01", "3.53e-21"), ("1.85e+11", "8.52e+08", "2.05e+08", "2.73e+04")),
    "mhdb416": ((416, "3.99e+09", "1.67e+00", "1.39e-19"), ("6.97e+01", "6.23e+00", "2.96e+06", "1.00e+00")),
    "bcsstk06": ((420, "7.57e+06", "2.42e+09", "7.70e-34"), ("3.18e+04", "8.72e+01", "5.17e+03", "1.00e+00")),
    "bcsstk07": ((420, "7.57e+06", "2.42e+09", "7.70e-34"), ("3.18e+04", "8.72e+01", "5.17e+03", "1.00e+00")),
    "bcsstm06": ((420, "3.46e+06", "7.60e+03", "2.20e-03"), ("1.00e+00", "1.00e+00", "3.37e+03", "1.00e+00")),
    "bcsstm07": ((420, "7.62e+03", "1.74e+03", "9.81e-33"), ("2.73e+01", "1.10e+00", "6.15e+00", "1.00e+00")),
    "nos5": ((468, "1.10e+04", "4.27e+05", "8.88e-16"), ("1.95e+03", "2.63e+00", "9.65e+00", "1.00e+00")),
    "bcsstk20": ((485, "3.89e+12", "1.21e+16", "4.88e-04"), ("1.80e+08", "2.32e+08", "3.65e+09", "1.04e+04")),
    "bcsstm20": ((485, "2.55e+05", "4.78e+07", "1.87e+02"), ("1.00e+00", "1.00e+00", "2.50e+02", "1.00e+00")),
    "494_bus": ((494, "2.42e+06", "2.00e+04", "1.70e-01"), ("7.90e+04", "6.82e+02", "1.60e+03", "1.02e+00")),
    "Trefethen_500": ((500, "3.19e+03", "3.57e+03", "1.00e+00"), ("4.45e+00", "1.00e+00", "4.11e+00", "1.00e+00")),
}


def trefethen(n):
    """SuiteSparse's JGD_Trefethen/Trefethen_n, dense."""
    sieve = np.ones(16 * n, dtype=bool)  # the n-th prime is below 16 n for n < 10^5
    sieve[:2] = False
    for k in range(2, int(len(sieve) ** 0.5) + 1):
        if sieve[k]:
            sieve[k * k::k] = False
    primes = np.flatnonzero(sieve)[:n].astype(np.float64)
    A = np.diag(primes)
    power = 1
    while power < n:
        A += np.eye(n, k=power) + np.eye(n, k=-power)
        power *= 2
    return A


def cholir_matrix(name, folder=None):
    from pychop_compat.matlab import load_suitesparse

    if name.startswith("Trefethen_"):
        return trefethen(int(name.split("_")[1]))
    if folder is None:
        return load_suitesparse(MATRICES / f"{name}.mat").A.toarray()
    return load_suitesparse(name, folder=folder).A.toarray()


def cholir_row(A1, cn=2):
    """cholir_test.m's two blocks for one matrix, as the script prints them."""
    try:  # scikit-learn's dependency, in the test extra
        from threadpoolctl import threadpool_limits
    except ImportError:
        return cholir_row_computed(A1, cn)
    # One BLAS thread: the 300 x 300 SVDs on OpenBLAS's threads, beside other processes on 2
    # busy cores, took 8 to 11 s against 0.9 s on one thread (the same 3 digits).
    with threadpool_limits(1):
        return cholir_row_computed(A1, cn)


def cholir_row_computed(A1, cn):
    import scipy.linalg

    from pychop_compat import float_params, linalg

    u, xmax = float_params("h")[0], float_params("h")[3]
    mu, n = 0.1 * xmax, A1.shape[0]

    def cond(M):
        return f"{np.linalg.cond(M):.2e}"

    def preconditioned(L, U):  # U \ (L \ A1), both triangular
        return scipy.linalg.solve_triangular(U, scipy.linalg.solve_triangular(L, A1, lower=True))

    magnitudes = np.abs(A1)
    properties = (n, cond(A1), f"{magnitudes.max():.2e}", f"{magnitudes[magnitudes > 0].min():.2e}")
    H, d, _ = linalg.spd_diag_scale(A1, 0)
    A = mu * H
    R, _ = linalg.chol_lp(chop(A + mu * cn * u * np.eye(n), {"format": "h"}), "h")
    B1t = mu * (d[:, None] * scipy.linalg.solve_triangular(R, scipy.linalg.solve_triangular(
        R, d[:, None] * A1, trans="T")))
    shifted, d1, _ = linalg.spd_diag_scale(A1 + cn * np.max(np.diag(A1)) * u * np.eye(n))
    R9, _ = linalg.chol_lp(mu * shifted, "h")
    L9 = (1 / np.sqrt(mu)) * ((1 / d1)[:, None] * R9.T)
    U9 = (1 / np.sqrt(mu)) * (R9 * (1 / d1)[None, :])
    single = (A1 + cn * float_params("s")[0] * np.diag(np.diag(A1))).astype(np.float32)
    Rs = scipy.linalg.cholesky(single).astype(np.float64)  # LAPACK's spotrf, as MATLAB's chol
    return properties, (cond(A), cond(B1t), cond(preconditioned(L9, U9)), cond(preconditioned(Rs.T, Rs)))


def test_cholir_test_trefethen_300():
    assert cholir_row(cholir_matrix("Trefethen_300")) == CHOLIR_TEST["Trefethen_300"]


@pytest.mark.published
@pytest.mark.parametrize("name", ["nos5", "Trefethen_500"])
def test_cholir_test_shipped_and_generated_matrices(name):
    assert cholir_row(cholir_matrix(name)) == CHOLIR_TEST[name]


@pytest.mark.published
def test_cholir_test_suitesparse_folder():
    import os

    folder = os.environ.get("PYCHOP_SUITESPARSE_DIR")
    if not folder:
        pytest.skip("set PYCHOP_SUITESPARSE_DIR to a folder of SuiteSparse .mat files")
    found = [name for name in CHOLIR_TEST if not name.startswith("Trefethen_")
             and (list(Path(folder).glob(f"{name}.mat")) or list(Path(folder).glob(f"*/{name}.mat")))]
    if not found:
        pytest.skip(f"none of the test's matrices in {folder}")
    for name in found:
        assert cholir_row(cholir_matrix(name, folder)) == CHOLIR_TEST[name], name
