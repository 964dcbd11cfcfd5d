"""The compiled block-FMA kernel (kernels/numba_blockfma.py) against the NumPy implementation,
its oracle: the same bits on every preset and rounding mode, random and adversarial inputs."""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest

from pychop_compat import hardware
from pychop_compat.kernels.compiled import cpu_engine
from pychop_compat.rounding import round_to_format

pytest.importorskip("numba")
from pychop_compat.kernels import numba_blockfma  # noqa: E402

SPECS = [pytest.param(spec, id="-".join(key)) for key, spec in hardware.PRESETS.items()]


def _adversarial(seed, shape_a=(13, 37), shape_b=(37, 11)):
    """A, B and C with rows and columns scaled to the ends of the formats' ranges (subnormals,
    overflow), integer rows, exact cancellation, NaN and infinities."""
    rng = np.random.default_rng(seed)
    A, B = rng.standard_normal(shape_a), rng.standard_normal(shape_b)
    C = rng.standard_normal((shape_a[0], shape_b[1]))
    A[1] *= 2.0**-20
    A[2] *= 2.0**14
    B[:, 3] *= 2.0**-14
    A[3] = np.round(A[3] * 4)
    B[:, 4] = -B[:, 5]
    A[5, 3], B[7, 6], C[8, 8], A[9, 0], B[0, 9] = np.inf, np.nan, np.inf, -np.inf, np.inf
    A[10] *= 2.0**120
    B[:, 1] *= 2.0**-130
    C[11] *= 2.0**-140
    C[12] *= 2.0**120
    A[4] *= 2.0**100
    A[6, ::2] = 0.0
    return A, B, C


def _same(spec, *args, **kwargs):
    with np.errstate(all="ignore"):
        compiled = hardware.matmul(*args, model=spec, **kwargs)
        with cpu_engine("numpy"):
            oracle = hardware.matmul(*args, model=spec, **kwargs)
    assert compiled.dtype == oracle.dtype
    different = compiled.view(np.uint16 if compiled.dtype == np.float16 else np.uint32) != \
        oracle.view(np.uint16 if oracle.dtype == np.float16 else np.uint32)
    assert not different.any(), (np.argwhere(different)[:3], compiled[different][:3], oracle[different][:3])


@pytest.mark.parametrize("spec", SPECS)
def test_compiled_matmul_is_the_numpy_implementation_bit_for_bit(spec):
    A, B, C = _adversarial(7)
    _same(spec, A, B, C, beta=1.0)
    rng = np.random.default_rng(8)
    _same(spec, rng.standard_normal((5, 70)), rng.standard_normal((70, 6)))


@pytest.mark.slow
@pytest.mark.parametrize("spec", SPECS)
@pytest.mark.parametrize("rounding", hardware.ROUNDING_MODES)
def test_compiled_matmul_in_every_rounding_mode(spec, rounding):
    for seed in range(3):
        A, B, C = _adversarial(seed, (15, 75), (75, 20))
        _same(spec.replace(rounding=rounding), A, B, C, beta=1.0)
        _same(spec.replace(rounding=rounding), A, B)


@pytest.mark.parametrize("changes", [dict(input_subnormals=False, output_subnormals=False),
                                     dict(normalised_products=True), dict(min_alignment_exponent=-5),
                                     dict(fma_size=3, extra_alignment_bits=-20), dict(fma_size=1)])
@pytest.mark.parametrize("gpu, inputs, output", [("H100", "fp16", "fp32"), ("H100", "fp16", "fp16"),
                                                 ("A100", "bf16", "fp32"), ("Ada", "e4m3", "fp16")])
def test_compiled_matmul_follows_every_parameter(gpu, inputs, output, changes):
    A, B, C = _adversarial(3, (14, 29), (29, 17))
    for rounding in ("rne", "ru", "rd"):  # toward zero: the presets' own, above
        _same(hardware.model(gpu, inputs, output).replace(rounding=rounding, **changes), A, B, C, beta=1.0)


def test_compiled_block_dot_and_overflowing_blocks():
    spec = hardware.model("H100", "fp16", "fp16")
    rng = np.random.default_rng(4)
    a = round_to_format(rng.standard_normal((300, 40)) * 2.0 ** rng.integers(-20, 14, (300, 40)), "fp16")
    b = round_to_format(rng.standard_normal((300, 40)) * 2.0 ** rng.integers(-20, 14, (300, 40)), "fp16")
    c = round_to_format(rng.standard_normal(300) * 2.0**15, "fp16")
    compiled = hardware.block_dot(a, b, c, spec)
    with cpu_engine("numpy"):
        oracle = hardware.block_dot(a, b, c, spec)
    assert np.isinf(oracle).any()  # a block overflows, the next ones leave the infinity alone
    np.testing.assert_array_equal(compiled.view(np.uint64), oracle.view(np.uint64))


@pytest.mark.parametrize("changes", [{}, dict(input_subnormals=False, output_subnormals=False),
                                     dict(input_subnormals=True, output_subnormals=True)])
@pytest.mark.parametrize("gpu, inputs, fma_size", [("MI100", "fp16", 3), ("MI100", "bf16", 2), ("MI250", "fp16", 8),
                                                   ("MI250", "bf16", 4)])
def test_compiled_unaligned_block_sums(gpu, inputs, fma_size, changes):
    # AMD's exact and pairwise sums: matmul and block_dot over the formats' whole ranges (overflow
    # and subnormals included), the presets' switches and other block sizes.
    spec = hardware.model(gpu, inputs).replace(fma_size=fma_size, **changes)
    A, B, C = _adversarial(9, (14, 29), (29, 17))
    _same(spec, A, B, C, beta=1.0)
    rng = np.random.default_rng(10)
    high = 16 if inputs == "fp16" else 128
    a, b = (round_to_format(rng.standard_normal((500, 21)) * 2.0 ** rng.integers(-high - 10, high, (500, 21)),
                            hardware.INPUT_FORMATS[inputs]) for _ in range(2))
    c = round_to_format(rng.standard_normal(500) * 2.0 ** rng.integers(-140, 120, 500), "fp32")
    with np.errstate(all="ignore"):
        compiled = hardware.block_dot(a, b, c, spec)
        with cpu_engine("numpy"):
            oracle = hardware.block_dot(a, b, c, spec)
    assert np.isinf(oracle).any()
    np.testing.assert_array_equal(compiled.view(np.uint64), oracle.view(np.uint64))


def test_sums_beyond_53_bits_go_to_numpy():
    assert numba_blockfma.exact_sums(23, 2, 16)  # every preset's: 17 * 2**27
    wide = hardware.model("H100").replace(extra_alignment_bits=30)
    assert not numba_blockfma.exact_sums(23, 30, 16)
    A, B, C = _adversarial(5)
    _same(wide, A, B, C, beta=1.0)
    assert numba_blockfma.exact_sums(23, 1, 8, 7)  # the MI300X's late addend: 9 * 2**33
    late = hardware.model("MI300X").replace(late_addend_bits=30)
    assert not numba_blockfma.exact_sums(23, 1, 8, 30)
    _same(late, A, B, C, beta=1.0)


def test_compiled_matmul_makes_no_m_n_k_array():
    rng = np.random.default_rng(2)
    A, B = rng.standard_normal((64, 1024)), rng.standard_normal((1024, 64))
    hardware.matmul(A[:2, :16], B[:16, :2])  # compiled or loaded from the cache before measuring
    tracemalloc.start()
    try:
        hardware.matmul(A, B)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 64 * 1024 * 64 * 8 / 4  # an (M, N, K) float64 array is 32 MiB; A and B 0.5 MiB
