"""The Triton block-FMA kernel (``kernels/triton_blockfma.py``) on CPU tensors, by Triton's interpreter.

Run by ``test_triton_blockfma.py`` in a subprocess with ``TRITON_INTERPRET=1``.
CPU torch tensors take the route of CUDA tensors (the preparation in torch, the
kernel, the NaN and infinite inner products on the device), with 8 x 8 tiles so that
an 8 x 8 result is one program (the interpreter runs a program's operations one
at a time: about 0.3 s a call).  The oracle is ``hardware.matmul`` on the same NumPy
data (the compiled kernel, or the namespace implementation), bit for bit.  Every
aligned preset is run: those with the same parameters (the A100, A2 and A30, ...)
once.  By hand::

    TRITON_INTERPRET=1 python -m pytest tests/triton_blockfma_interpreted_cases.py
"""

from __future__ import annotations

import os

import numpy as np
import pytest

if os.environ.get("TRITON_INTERPRET") != "1":
    pytest.skip("needs TRITON_INTERPRET=1 (run through test_triton_blockfma.py)", allow_module_level=True)

from bits import assert_bits_equal  # noqa: E402
from pychop_compat import hardware  # noqa: E402
from pychop_compat.hardware import PRESETS, BlockFMA  # noqa: E402
from test_triton_blockfma import distinct_aligned_presets, operands  # noqa: E402

torch = pytest.importorskip("torch")

DISTINCT = distinct_aligned_presets()
#: Models no preset has: products normalised, no subnormals, up and down, sums past 2**53
#: (no compiled CPU kernel: the namespace implementation is the oracle), odd groups of an odd block.
CUSTOM = {
    "normalised-ru-flush": BlockFMA("bf16", "fp32", 8, 3, "ru", -130, normalised_products=True,
                                    input_subnormals=False, output_subnormals=False),
    "rd-fp16-out": BlockFMA("fp16", "fp16", 4, 1, "rd", -30),
    "wide-sums": BlockFMA("fp16", "fp32", 4, 0, "rne", accumulator_fraction_bits=48),
    "late-rd": BlockFMA("bf16", "fp32", 4, 2, "rd", late_addend_bits=3),
    "odd-groups-rd": BlockFMA("e5m2", "fp32", 5, 1, "rd", late_addend_bits=4, odd_even_groups=True,
                              input_subnormals=False),
}
MODELS = {"-".join(keys[0]) + (f"+{len(keys) - 1}" if len(keys) > 1 else ""): spec
          for spec, keys in DISTINCT.items()}
MODELS.update(CUSTOM)
if os.environ.get("BLOCKFMA_MODELS") == "quick":  # the default test run's share: each feature once
    features = {}
    for name, spec in MODELS.items():
        features.setdefault((spec.rounding, spec.output_format, spec.late_addend_bits is None, spec.odd_even_groups,
                             spec.normalised_products, spec.output_subnormals), name)
    MODELS = {name: MODELS[name] for name in features.values()}


@pytest.fixture
def launches(monkeypatch):
    """CPU tensors routed to the kernel (8 x 8 tiles); returns the shapes of its results."""
    from pychop_compat.kernels import triton_blockfma

    monkeypatch.setattr(triton_blockfma, "CPU_TENSORS_AS_CUDA", True)
    monkeypatch.setattr(triton_blockfma, "BLOCK_M", 8)
    monkeypatch.setattr(triton_blockfma, "BLOCK_N", 8)
    shapes = []
    real = triton_blockfma.block_matmul

    def counting(*args):
        shapes.append(tuple(args[-2].shape))
        return real(*args)

    monkeypatch.setattr(triton_blockfma, "block_matmul", counting)
    yield shapes


def test_every_aligned_preset_is_run():
    assert sum(len(keys) for keys in DISTINCT.values()) == sum(s.block_sum == "aligned" for s in PRESETS.values())
    assert any(spec.odd_even_groups for spec in DISTINCT), "the MI300X's fp8"


def _check(launches, spec, m, k, n, seed, adversarial, name):
    A, B, C, alpha, beta = operands(spec, m, k, n, seed, adversarial)
    want = hardware.matmul(A, B, C, alpha, beta, model=spec)
    tensors = [None if x is None else torch.from_numpy(x.copy()) for x in (A, B, C)]
    got = hardware.matmul(*tensors, alpha, beta, model=spec)
    assert isinstance(got, torch.Tensor) and got.dtype == (torch.float16 if spec.output_format == "fp16"
                                                           else torch.float32)
    assert launches == [(m, n)], "the kernel ran once"
    assert_bits_equal(got.numpy(), want, f"{name} seed {seed} {'adversarial' if adversarial else 'random'}")
    finite = np.isfinite(want)
    assert finite.any() and (m < 8 or not finite.all()), "finite and special results both (the NaN of row 7)"
    assert np.array_equal(tensors[0].numpy(), A, equal_nan=True), "inputs unchanged"


@pytest.mark.parametrize("name", list(MODELS))
def test_adversarial_operands(launches, name):
    """No C, alpha 1; K = 37 (a part block at the end); tiny terms, cancellation, subnormal
    inputs, values near overflow, infinities and NaN (:func:`test_triton_blockfma.operands`)."""
    _check(launches, MODELS[name], 8, 37, 8, 5, True, name)


@pytest.mark.parametrize("name", list(MODELS))
def test_random_operands_with_c(launches, name):
    """C over 80 binades (with Inf, NaN, an overflow and a subnormal), alpha 0.75, beta -1.5, K = 40."""
    _check(launches, MODELS[name], 8, 40, 8, 6, False, name)


def test_several_programs_and_ragged_edges(launches, monkeypatch):
    """4 x 4 tiles on a 7 x 6 result: four programs, two of them cut at the edges."""
    from pychop_compat.kernels import triton_blockfma

    monkeypatch.setattr(triton_blockfma, "BLOCK_M", 4)
    monkeypatch.setattr(triton_blockfma, "BLOCK_N", 4)
    _check(launches, PRESETS["MI300X", "e4m3fnuz", "fp32"], 7, 21, 6, 8, True, "MI300X e4m3fnuz 7x21x6")


@pytest.mark.parametrize("rounding", ["rz", "rd"])
def test_exact_bit_length_and_uncut_addend(launches, rounding):
    """Against stated values, not the namespace: 1024 - 2**-44 (a block sum of 54 bits and more
    with 31 extra bits) rounds toward zero, or down, to 1024 - 2**-14 (0.9 read its bit length from
    the float64 conversion, rounded up to 2**64 units: 1024 - 2**-13); and an addend 2**-38 with
    accumulator_emin -14 is kept whole (a multiple of 2**(-14 - 23 - 2); 0.9 cut it at 2**-37)."""
    wide = BlockFMA("fp16", "fp32", fma_size=16, extra_alignment_bits=31, rounding=rounding)
    A, B = np.zeros((1, 16)), np.zeros((16, 1))
    A[0, 0], B[0, 0] = -2.0**-22, 2.0**-22
    got = hardware.matmul(torch.from_numpy(A), torch.from_numpy(B), torch.tensor([[1024.0]], dtype=torch.float64),
                          model=wide)
    assert got.dtype == torch.float32 and got.item() == 1024 - 2.0**-14
    emin = BlockFMA("fp16", "fp32", fma_size=1, extra_alignment_bits=2, rounding=rounding, accumulator_emin=-14)
    got = hardware.matmul(torch.zeros((1, 1), dtype=torch.float64), torch.zeros((1, 1), dtype=torch.float64),
                          torch.tensor([[2.0**-38]], dtype=torch.float64), model=emin)
    assert got.item() == 2.0**-38
    assert launches == [(1, 1), (1, 1)], "the kernel ran"
