"""linalg.matmul's compiled kernels and bounded-memory NumPy paths equal the NumPy implementation.

The reference is the NumPy implementation of each summation method
(``products._SUMMERS``: one whole-array chop call per step, every product held
at once), run on the whole product with the NumPy CPU engine; its own
correctness is tested against scalar loops in test_linalg.py.
"""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest

import pychop_compat.linalg as linalg
from engine_matrix import assert_bits_equal
from pychop_compat import rng
from pychop_compat.kernels import compiled
from pychop_compat.linalg import products
from pychop_compat.linalg.arrays import HOST
from pychop_compat.linalg.common import Rounder

METHODS = ["recursive", "fma", "pairwise", "blocked"]
needs_numba = pytest.mark.skipif(not compiled.available(), reason="numba not installed")


def _reference(A, B, options, method, accumulate=None, block_size=5):
    """The NumPy implementation on the whole product (the code before bounded memory)."""
    with compiled.cpu_engine("numpy"):
        rin = Rounder(options, HOST)
        rsum = rin if accumulate is None else Rounder(accumulate, HOST)
        rprod = None if accumulate is not None or method == "fma" else rin
        with np.errstate(all="ignore"):
            return products._SUMMERS[method](HOST, rin(A), rin(B), rprod, rsum, block_size)


def _operands(seed, m, n, p):
    gen = np.random.default_rng(seed)
    A = gen.standard_normal((m, n)) * 2.0 ** gen.integers(-20, 17, (m, n))
    B = gen.standard_normal((n, p)) * 2.0 ** gen.integers(-6, 6, (n, p))
    A[0, :3] = [0.0, -0.0, 1e-30]  # zeros and values that underflow in every format
    A[-1, -2:] = [7e4, -6e4]  # products that overflow fp16
    B[1, 0] = 2.0**-20
    return A, B


@needs_numba
@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("options", [{"format": "h"}, {"format": "h", "round": 2, "subnormal": 0},
                                     {"format": "b", "round": 3}, {"format": "q43", "round": 4},
                                     {"format": "c", "params": [7, 6], "explim": 0}, {"format": "s"}])
def test_compiled_matmul_equals_numpy_implementation(method, options):
    A, B = _operands(1, 9, 23, 11)
    with compiled.cpu_engine("numba"):
        actual = linalg.matmul(A, B, options, method=method, block_size=5)
    assert_bits_equal(actual, _reference(A, B, options, method), f"{options} {method}")


@needs_numba
@pytest.mark.parametrize("method", METHODS)
def test_compiled_matmul_accumulate_vectors_and_shapes(method):
    A, B = _operands(2, 13, 70, 130)  # more columns than one pairwise tile, several row groups
    with compiled.cpu_engine("numba"):
        actual = linalg.matmul(A, B, "h", method=method, accumulate="s", block_size=5)
        vector = linalg.matvec(A, B[:, 3], "b", method=method, block_size=5)
        scalar = linalg.dot(A[2], B[:, 1], "q52", method=method, block_size=5)
        single_term = linalg.matmul(A[:, :1], B[:1], "h", method=method)
    assert_bits_equal(actual, _reference(A, B, "h", method, accumulate="s"), "accumulate")
    assert_bits_equal(vector, _reference(A, B[:, 3:4], "b", method)[:, 0], "matvec")
    assert_bits_equal(np.array(scalar), _reference(A[2:3], B[:, 1:2], "q52", method)[0, 0], "dot")
    assert_bits_equal(single_term, _reference(A[:, :1], B[:1], "h", method, block_size=32), "n = 1")


@pytest.mark.parametrize("method", ["pairwise", "blocked"])
def test_numpy_paths_in_column_groups_give_the_same_bits_in_bounded_memory(monkeypatch, method):
    A, B = _operands(3, 40, 50, 60)
    expected = _reference(A, B, "h", method)
    monkeypatch.setattr(products, "TERM_BUDGET", 2000)  # one column of 40 x 50 products at a time
    with compiled.cpu_engine("numpy"):
        tracemalloc.start()
        actual = linalg.matmul(A, B, "h", method=method, block_size=5)
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    assert_bits_equal(actual, expected, method)
    all_products = A.shape[0] * A.shape[1] * B.shape[1] * 8
    assert peak < all_products / 4, (peak, all_products)


@pytest.mark.parametrize("engine", ["numpy", pytest.param("numba", marks=needs_numba)])
@pytest.mark.parametrize("method", ["pairwise", "blocked"])
def test_stochastic_pairwise_and_blocked_go_column_by_column(engine, method):
    """With random numbers, C is computed one column at a time: the same draws as
    matvec(A, B[:, j]) for j = 1, 2, ... (inputs already in fp16, so rounding them draws nothing)."""
    gen = np.random.default_rng(4)
    A = linalg_fp16(gen.standard_normal((6, 9)))
    B = linalg_fp16(gen.standard_normal((9, 4)))
    options = {"format": "h", "round": 5}
    with compiled.cpu_engine(engine):
        rng(7)
        actual = linalg.matmul(A, B, options, method=method, block_size=4)
        rng(7)
        columns = [linalg.matvec(A, B[:, j], options, method=method, block_size=4) for j in range(B.shape[1])]
    assert_bits_equal(actual, np.stack(columns, axis=1), method)


def linalg_fp16(x):
    return x.astype(np.float16).astype(np.float64)


# --- LU -----------------------------------------------------------------------------------------

LU_OPTIONS = [{"format": "h"}, {"format": "h", "round": 2, "subnormal": 0}, {"format": "b", "round": 3},
              {"format": "b", "round": 4, "subnormal": 0}, {"format": "q43"}, {"format": "q52", "round": 2},
              {"format": "c", "params": [7, 6], "round": 3}, {"format": "h", "explim": 0},
              {"format": "c", "params": [4, 5], "explim": 0, "round": 4}, {"format": "s", "round": 2}, "d"]


def _lu_matrices(seed, n):
    """Random matrices of size n: scaled over many binades (overflow, underflow, subnormals in every
    format), singular ones (a repeated column, a zero column after the first panel), Inf and NaN."""
    gen = np.random.default_rng(seed)
    plain = gen.standard_normal((n, n))
    wide = plain * 2.0 ** gen.integers(-18, 16, (n, n))
    out = [plain, wide]
    if n > 1:
        repeated = plain.copy()
        repeated[:, n // 2] = repeated[:, 0]
        zero_column = wide.copy()
        zero_column[:, min(n - 1, 9)] = 0.0
        special = plain.copy()
        special[n // 2, 0] = np.inf
        special[-1, -1] = np.nan
        integers = gen.integers(-3, 4, (n, n)).astype(float)  # exact zeros and ties in the eliminations
        out += [repeated, zero_column, special, integers]
    return out


def _assert_same_factors(actual, expected, label):
    assert_bits_equal(actual.L, expected.L, f"L {label}")
    assert_bits_equal(actual.U, expected.U, f"U {label}")
    assert np.array_equal(actual.perm, expected.perm), label
    assert actual.info == expected.info, label


def _lu(A, options, engine):
    import warnings

    with compiled.cpu_engine(engine), warnings.catch_warnings():
        warnings.simplefilter("ignore", linalg.SingularMatrixWarning)
        return linalg.lu(A, options)


@needs_numba
@pytest.mark.parametrize("options", LU_OPTIONS, ids=str)
def test_compiled_lu_equals_numpy_lu(monkeypatch, options):
    """Bit for bit the NumPy elimination (itself tested against a scalar loop in test_linalg.py): factors,
    pivots, info; small panels and a low parallel threshold exercise the blocked and threaded paths."""
    from pychop_compat.kernels import numba_lu as compiled_lu

    monkeypatch.setattr(compiled_lu, "PANEL", 4)
    monkeypatch.setattr(compiled_lu, "PARALLEL_BELOW", 100)
    for seed, n in enumerate([1, 2, 3, 5, 8, 13, 30]):
        for index, A in enumerate(_lu_matrices(seed, n)):
            _assert_same_factors(_lu(A, options, "numba"), _lu(A, options, "numpy"), f"{options} n={n} #{index}")


@needs_numba
def test_compiled_lu_default_panels_and_threads():
    from pychop_compat.kernels import numba_lu as compiled_lu

    n = 300
    assert (n - compiled_lu.PANEL) ** 2 >= compiled_lu.PARALLEL_BELOW  # the first panels update on threads
    for index, A in enumerate(_lu_matrices(7, n)[1:4]):
        _assert_same_factors(_lu(A, "h", "numba"), _lu(A, "h", "numpy"), f"#{index}")


@pytest.mark.parametrize("engine", ["numpy", pytest.param("numba", marks=needs_numba)])
def test_stochastic_lu_keeps_the_numpy_elimination(engine):
    """Stochastic rounding and bit flips stay on the NumPy elimination (chop.m's draw order): the same
    numbers on both engines, call after call."""
    A = np.random.default_rng(8).standard_normal((12, 12))
    results = []
    for options in ({"format": "h", "round": 5}, {"format": "b", "round": 6}, {"format": "h", "flip": 1, "p": 0.1}):
        rng(3)
        results.append(_lu(A, options, engine))
    with compiled.cpu_engine("numpy"):
        for options, actual in zip(({"format": "h", "round": 5}, {"format": "b", "round": 6},
                                    {"format": "h", "flip": 1, "p": 0.1}), results):
            rng(3)
            _assert_same_factors(actual, _lu(A, options, "numpy"), str(options))


@needs_numba
def test_refinement_unchanged_by_the_compiled_lu():
    n = 40
    A = linalg.randsvd(n, 1e4, mode=2, rng=13)
    b = np.random.default_rng(13).standard_normal(n)
    results = {}
    for engine in ("numba", "numpy"):
        with compiled.cpu_engine(engine):
            results[engine] = (linalg.lu_ir(A, b, "h", "d", "q", stop="change"),
                               linalg.gmres_ir(A, b, "h", "d", "q", stop="change"),
                               linalg.lu_ir(A, b, "b", "s", "d", max_iter=5))
    for compiled_run, numpy_run in zip(results["numba"], results["numpy"]):
        assert_bits_equal(compiled_run.x, numpy_run.x, "x")
        assert compiled_run.iterations == numpy_run.iterations
        assert compiled_run.backward_error == numpy_run.backward_error


@needs_numba
@pytest.mark.parametrize("method", METHODS)
def test_double_format_keeps_signed_zeros(method):
    """Format 'd' does not round double data: -0 + -0 stays -0 (the compiled kernels are not used)."""
    A = np.array([[-0.0, -0.0, -0.0]])
    B = np.ones((3, 2))
    with compiled.cpu_engine("numba"):
        C = linalg.matmul(A, B, "d", method=method)
    assert np.all(np.signbit(C)) and np.all(C == 0)


@needs_numba
def test_compiled_pairwise_tree_for_every_binary_shape_of_n():
    """The streamed tree (partial sums per power of two) equals the level-by-level tree whatever the
    bits of n: every n up to 40, around powers of two, with and without rounded products."""
    for n in list(range(1, 41)) + [63, 64, 65, 127, 129, 255, 257]:
        if n >= 3:
            A, B = _operands(n, 3, n, 5)
        else:
            A, B = np.random.default_rng(n).standard_normal((3, n)), np.random.default_rng(n).standard_normal((n, 5))
        with compiled.cpu_engine("numba"):
            actual = linalg.matmul(A, B, "b", method="pairwise")
            mixed = linalg.matmul(A, B, "h", method="pairwise", accumulate="s")
        assert_bits_equal(actual, _reference(A, B, "b", "pairwise"), f"n = {n}")
        assert_bits_equal(mixed, _reference(A, B, "h", "pairwise", accumulate="s"), f"n = {n}, accumulate")


@needs_numba
def test_nearest_bits_equals_fast_bits_where_nearest_only():
    """The short round-to-nearest path gives the bits of the general branch-free rounding, and is
    taken only for round to nearest with bits dropped (not t = 1, not the double format)."""
    import numba

    from pychop_compat.kernels import numba_kernels as nk
    from pychop_compat.matlab.options import resolve

    @numba.njit
    def compare(bits, ip, up, rp):
        f = nk.fast_constants(ip, up, rp)
        same = 0
        for b in bits:
            same += nk.nearest_bits(b, f) == nk.fast_bits(b, f)
        return nk.nearest_only(f), same

    gen = np.random.default_rng(9)
    bits = gen.integers(0, 2**63, 100_000, dtype=np.uint64) | (gen.integers(0, 2, 100_000, dtype=np.uint64) << 63)
    for options, expected in [({"format": "h"}, True), ({"format": "b", "subnormal": 0}, True),
                              ({"format": "q43"}, True), ({"format": "c", "params": [1, 5]}, False),
                              ({"format": "h", "round": 2}, False), ({"format": "h", "round": 3}, False),
                              ({"format": "h", "round": 4}, False), ({"format": "d", "subnormal": 0}, False)]:
        ip, up, _, rp = compiled.rounding_constants(resolve(options, None, "double").spec, np.float64)
        nearest, same = compare(bits, ip, up, rp)
        assert nearest == expected, options
        if nearest:
            assert same == bits.size, options
