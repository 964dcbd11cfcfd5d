"""linalg.matmul's compiled kernels and bounded-memory NumPy paths equal the NumPy implementation.

The reference is the NumPy implementation of each summation method
(``kernels._SUMMERS``: one whole-array chop call per step, every product held
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
from pychop_compat.engines import compiled
from pychop_compat.linalg import kernels
from pychop_compat.linalg._common import _make_rounder

METHODS = ["recursive", "fma", "pairwise", "blocked"]
needs_numba = pytest.mark.skipif(not compiled.available(), reason="numba not installed")


def _reference(A, B, options, method, accumulate=None, block_size=5):
    """The NumPy implementation on the whole product (the code before bounded memory)."""
    with compiled.cpu_engine("numpy"):
        rin = _make_rounder(options)
        rsum = rin if accumulate is None else _make_rounder(accumulate)
        rprod = None if accumulate is not None or method == "fma" else rin
        with np.errstate(all="ignore"):
            return kernels._SUMMERS[method](rin(A), rin(B), rprod, rsum, block_size)


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
    monkeypatch.setattr(kernels, "TERM_BUDGET", 2000)  # one column of 40 x 50 products at a time
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
