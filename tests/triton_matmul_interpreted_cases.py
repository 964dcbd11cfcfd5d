"""The fused Triton matmul kernel (``linalg/triton_matmul.py``) on CPU tensors, by Triton's interpreter.

Run by ``test_triton_matmul.py`` in a subprocess with ``TRITON_INTERPRET=1``.
CPU torch tensors take the route of CUDA tensors (the fused kernel, 8 x 8
tiles so that small matrices have several tiles and ragged edges); the oracle
is the NumPy path of :func:`pychop_compat.linalg.matmul` on the same data,
bit for bit.  The other rows have one sign each (no cancellation: their partial
sums stay regular).  Rows 8 and 9 of ``A`` are scaled so that their products and
partial sums fall in the format's subnormal range (row 8) and overflow
(row 9): the overflowing tiles (and, with subnormals flushed, the subnormal
ones) must be flagged and recomputed by the generic path, the other tiles
come from the kernel.  ``test_subnormal_block_in_the_kernel`` checks chop.m's
rules below xmin in the kernel, value by value at their thresholds.  By hand::

    TRITON_INTERPRET=1 python -m pytest tests/triton_matmul_interpreted_cases.py
"""

from __future__ import annotations

import os

import numpy as np
import pytest

if os.environ.get("TRITON_INTERPRET") != "1":
    pytest.skip("needs TRITON_INTERPRET=1 (run through test_triton_matmul.py)", allow_module_level=True)

from engine_matrix import assert_bits_equal  # noqa: E402
from pychop_compat import linalg  # noqa: E402
from pychop_compat.formats import lookup_format  # noqa: E402

triton = pytest.importorskip("triton")
torch = pytest.importorskip("torch")

FORMATS = {"h": {"format": "h"}, "b": {"format": "b"}, "q43": {"format": "q43"},
           "custom": {"format": "custom", "params": [6, 9]}}


@pytest.fixture
def fused(monkeypatch):
    """CPU tensors routed to the fused kernel (8 x 8 tiles); returns the list of
    ``(tiles in the grid, flagged tiles)`` of its launches."""
    from pychop_compat.kernels import triton_matmul

    monkeypatch.setattr(triton_matmul, "CPU_TENSORS_AS_CUDA", True)
    monkeypatch.setattr(triton_matmul, "BLOCK_M", 8)
    monkeypatch.setattr(triton_matmul, "BLOCK_N", 8)
    launches = []
    real = triton_matmul.fused_matmul

    def counting(A, B, product_spec, sum_spec):
        C, tiles = real(A, B, product_spec, sum_spec)
        launches.append((-(-A.shape[0] // 8) * -(-B.shape[1] // 8), len(tiles)))
        return C, tiles

    monkeypatch.setattr(triton_matmul, "fused_matmul", counting)
    yield launches


def _operands(name, m, n, p, dtype, seed):
    options = FORMATS[name]
    if name == "custom":
        t, emax = options["params"]
        xmin, xmax = 2.0 ** (1 - emax), 2.0 ** emax * (2 - 2.0 ** (1 - t))
    else:
        fmt = lookup_format(name)
        xmin, xmax = fmt.xmin, fmt.xmax
    rng = np.random.default_rng(seed)
    # Magnitudes in [0.25, 2], one sign per row of A and per column of B: no cancellation, so that the partial
    # sums of these rows stay in the normal range of every format here (kernel tiles).
    A = rng.uniform(0.25, 2.0, (m, n)) * np.where(np.arange(m) % 3 == 1, -1.0, 1.0)[:, None]
    B = rng.uniform(0.25, 2.0, (n, p))
    B[:, 0] *= -1  # one sign per column too
    A[0, :3] = 0.0
    A[2] = 0.0  # products -0 in column 0 (inputs are rounded first: chop(-0) = +0); sum +0
    if m > 9:
        A[8] *= 2 * xmin  # normal inputs, products and sums in the subnormal range
        A[9] *= xmax / 2  # products and sums past xmax (some inputs too)
    return A.astype(dtype), B.astype(dtype)


def _check(fused, name, mode, sub, method, dtype, shape=(10, 13, 19), accumulate=None):
    options = dict(FORMATS[name], round=mode, subnormal=sub)
    A, B = _operands(name, *shape, dtype, seed=mode * 10 + sub)
    kwargs = {"method": method} if accumulate is None else {"method": method, "accumulate": accumulate}
    expected = linalg.matmul(A.copy(), B.copy(), options, **kwargs)
    tA, tB = torch.from_numpy(A.copy()), torch.from_numpy(B.copy())
    got = linalg.matmul(tA, tB, options, **kwargs)
    assert isinstance(got, torch.Tensor) and got.dtype == tA.dtype
    assert len(fused) == 1, "the fused kernel ran once"
    total, flagged = fused[0]
    assert flagged < total, "some tiles came from the kernel"
    if shape[0] > 9:
        assert flagged >= 1, "the tiles with subnormal and overflowing values went to the generic path"
    assert_bits_equal(got.numpy(), expected, f"{name} r{mode} s{sub} {method} {dtype}")
    assert np.array_equal(tA.numpy(), A) and np.array_equal(tB.numpy(), B), "inputs unchanged"


@pytest.mark.parametrize("sub", [0, 1])
@pytest.mark.parametrize("mode", [1, 2, 3, 4])
@pytest.mark.parametrize("name", list(FORMATS))
def test_recursive_float64(fused, name, mode, sub):
    _check(fused, name, mode, sub, "recursive", "float64")


@pytest.mark.parametrize("mode", [1, 2, 3, 4])
@pytest.mark.parametrize("name", list(FORMATS))
def test_fma_float64(fused, name, mode):
    _check(fused, name, mode, 1, "fma", "float64")


@pytest.mark.parametrize("method", ["recursive", "fma"])
@pytest.mark.parametrize("mode", [1, 3])
@pytest.mark.parametrize("name", ["h", "b", "q43"])
def test_float32_data(fused, name, mode, method):
    """Single data: products and sums in float32 before each rounding, as the NumPy path."""
    _check(fused, name, mode, 1, method, "float32")


def test_accumulate_and_long_inner_dimension(fused):
    """Products exact in double, sums rounded to fp32 (tensor-core style), n = 33."""
    _check(fused, "h", 1, 1, "recursive", "float64", shape=(9, 33, 17), accumulate={"format": "s"})


def test_vector_operands(fused):
    """matvec (one column) and dot (1 x 1) take the kernel too."""
    A, B = _operands("h", 5, 16, 1, "float64", seed=3)
    expected = linalg.matvec(A, B[:, 0], "h")
    got = linalg.matvec(torch.from_numpy(A), torch.from_numpy(B[:, 0].copy()), "h")
    assert_bits_equal(got.numpy(), expected, "matvec")
    assert len(fused) == 1


def _edge_values(name, dtype):
    """Values around chop.m's thresholds below xmin (xmins/2, the round-to-nearest cut above it,
    xmins, xmin), each with its carrier neighbours, random values of the subnormal block, and
    their negatives: a column that, times a row of ones, the kernel rounds once."""
    if name == "custom":
        t, emax = FORMATS[name]["params"]
        emin = 1 - emax
    else:
        fmt = lookup_format(name)
        t, emin = fmt.t, fmt.emin
    emins = emin - t + 1
    points = [2.0 ** (emins - 1), 2.0 ** (emins - 1) * (1 + 2.0 ** -t), 2.0 ** emins, 2.0 ** emin,
              2.0 ** (emins - 1) * (1 + 2.0 ** (1 - t)), 1.5 * 2.0 ** emins, 2.0 ** (emins - 2)]
    values = []
    for point in np.array(points, dtype=dtype):
        values += [np.nextafter(point, dtype(0)), point, np.nextafter(point, dtype(np.inf))]
    rng = np.random.default_rng(7)
    values += list(rng.uniform(2.0 ** emins, 2.0 ** emin, 40).astype(dtype))
    values += [np.finfo(dtype).smallest_subnormal, dtype(0)]
    column = np.array(values, dtype=dtype)
    return np.concatenate([column, -column])[:, None]


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("mode", [1, 2, 3, 4])
@pytest.mark.parametrize("name", ["h", "b", "q43", "custom"])
def test_subnormal_block_in_the_kernel(fused, name, mode, dtype):
    """With subnormals kept, values below xmin are rounded in the kernel (no tile flagged), bit for
    bit with the NumPy path: single roundings at the thresholds (times ones), then standard normal
    operands, whose products and partial sums cross zero and fall below xmin."""
    options = dict(FORMATS[name], round=mode, subnormal=1)
    np_dtype = np.dtype(dtype).type
    A = _edge_values(name, np_dtype)
    B = np.ones((1, 3), dtype=dtype)
    rng = np.random.default_rng(mode)
    C, D = rng.standard_normal((9, 24)).astype(dtype), rng.standard_normal((24, 9)).astype(dtype)
    if name in ("q43", "custom"):  # narrow ranges: operands scaled towards their xmin
        C *= 2.0 ** -4
    for left, right in ((A, B), (C, D)):
        expected = linalg.matmul(left.copy(), right.copy(), options)
        got = linalg.matmul(torch.from_numpy(left.copy()), torch.from_numpy(right.copy()), options)
        assert_bits_equal(got.numpy(), expected, f"{name} r{mode} {dtype} {left.shape}")
    assert len(fused) == 2
    flagged = [tiles for _, tiles in fused]
    assert flagged[0] == 0, "no tile of the threshold values was flagged"
    if name in ("h", "b"):
        assert flagged[1] == 0, "standard normal operands: no tile flagged (nothing overflows)"
