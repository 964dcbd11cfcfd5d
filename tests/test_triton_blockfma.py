"""The Triton kernel of the block-FMA model (``kernels/triton_blockfma.py``), without a GPU and with one.

* Its results, run on CPU tensors by Triton's interpreter on the route a CUDA tensor
  takes (``triton_blockfma_interpreted_cases.py``, in a subprocess), bit for bit
  against the NumPy result of ``hardware.matmul``, for every aligned preset.
* Its PTX for sm_90, compiled with the package's launch options: no instruction
  flushes subnormals (``.ftz``), no multiply and add are fused, no library calls.
* On a GPU (``pytest -m gpu``): CUDA tensors (and CuPy arrays) of every preset against
  the host bits, on larger random and adversarial operands.

:func:`operands` builds the operands of both.
"""

from __future__ import annotations

import re

import numpy as np
import pytest

from bits import assert_bits_equal
from pychop_compat import hardware
from pychop_compat.formats import catalogue_format
from pychop_compat.hardware import INPUT_FORMATS, OUTPUT_FORMATS, PRESETS, BlockFMA

triton = pytest.importorskip("triton")
torch = pytest.importorskip("torch")

from triton_checks import assert_imports_no_triton, assert_plain_ptx, run_interpreted, sm90_ptx  # noqa: E402


def operands(spec: BlockFMA, m: int, k: int, n: int, seed: int, adversarial: bool) -> tuple:
    """``(A, B, C, alpha, beta)`` for ``spec``'s formats (float64, rounded by ``matmul``).

    Random: standard normal ``A`` and ``B``; ``C`` over 80 binades with an infinity, a NaN,
    a value that overflows when scaled by ``beta`` and a subnormal of the output format; row and
    column 3 scaled down, rows 4 to 7 against ones with addends at the late addend's thresholds.
    Adversarial (no ``C``): the rows of ``A`` take turns (``i % 8``): ones, a 1 beside tiny
    terms, pairs that cancel (against ``B``'s alternating signs), subnormal inputs, values near
    the input format's largest, exponents spread over its range, an infinity, random with a
    NaN; and so do the columns of ``B``: random, alternating signs, then the same kinds, zeros.
    """
    informat = catalogue_format(INPUT_FORMATS[spec.input_format])
    outformat = catalogue_format(OUTPUT_FORMATS[spec.output_format])
    rng = np.random.default_rng(seed)
    A, B = rng.standard_normal((m, k)), rng.standard_normal((k, n))
    if not adversarial:
        C = rng.standard_normal((m, n)) * 2.0 ** rng.integers(-40, 40, (m, n))
        C.flat[[0, 1 * n + 1, 2 * n + 2, 3 * n + 3][:min(m, n)]] = [np.inf, np.nan, outformat.xmax / 1.5,
                                                                    2.0 ** outformat.emin / 3][:min(m, n)]
        if m > 7 and n > 4:
            # Results in the output format's subnormal range (where the inputs reach it)
            A[3] *= 2.0 ** max(outformat.emin // 2 - 2, informat.emin + 1)
            B[:, 3] *= 2.0 ** max(outformat.emin // 2 - 2, informat.emin + 1)
            # Rows 4 to 7 times ones: products 1 and smaller powers of two, an addend -2**-(F + x + d):
            # d = 0 to 3 binades below the products' last kept bit (the late addend's thresholds)
            B[:, 4] = 1.0
            A[4:8] = rng.choice([-1.0, 1.0], (4, k)) * 2.0 ** -rng.integers(1, 7, (4, k))
            A[4:8, 0] = 1.0
            C[4:8, 4] = 2.0 ** -(spec.accumulator_fraction_bits + spec.extra_alignment_bits + np.arange(4))
        return A, B, C, 0.75, -1.5
    signs = rng.choice([-1.0, 1.0], (max(m, n), k))
    spread = signs * 2.0 ** rng.uniform(informat.emin - informat.t, informat.emax, (max(m, n), k))
    tiny = signs * 2.0 ** -(informat.t + rng.integers(0, 2 * informat.t, (max(m, n), k)))
    tiny[:, 0] = 1.0
    pairs = np.repeat(rng.standard_normal((max(m, n), (k + 1) // 2)), 2, axis=1)[:, :k]
    pairs[:, -1] = 2.0 ** -20
    alternating = np.where(np.arange(k) % 2 == 0, 1.0, -1.0)
    subnormal = rng.uniform(-1.0, 1.0, (max(m, n), k)) * 2.0 ** informat.emin
    large = signs * informat.xmax * rng.uniform(0.5, 1.0, (max(m, n), k))
    special = np.zeros(k)
    special[seed % k] = np.inf
    for i in range(m):
        A[i] = [np.ones(k), tiny[i], pairs[i], subnormal[i], large[i], spread[i], special, A[i]][i % 8]
        if i % 8 == 7:
            A[i, (seed + i) % k] = np.nan
    for j in range(n):
        B[:, j] = [B[:, j], alternating, tiny[j], subnormal[j], large[j], spread[j], -special, np.zeros(k)][j % 8]
    return A, B, None, 1.0, 0.0


def distinct_aligned_presets() -> dict:
    """The aligned presets by their parameters (their names aside): ``{model: [keys]}``."""
    distinct: dict = {}
    for key, spec in PRESETS.items():
        if spec.block_sum == "aligned":
            distinct.setdefault(spec.replace(name="custom"), []).append(key)
    return distinct


@pytest.mark.parametrize("late, grouped, normalised, rounding, output_subnormals",
                         [(False, False, False, 0, True), (True, True, False, 1, True),
                          (True, False, True, 2, False), (False, False, False, 3, True)],
                         ids=["nvidia-rz", "mi300x-fp8", "late-normalised-ru-flush", "rd"])
def test_blockfma_ptx_has_no_ftz_fma_or_calls(late, grouped, normalised, rounding, output_subnormals):
    from pychop_compat.kernels import triton_blockfma

    signature = {"qa_ptr": "*fp64", "ea_ptr": "*i64", "qb_ptr": "*fp64", "eb_ptr": "*i64", "d_ptr": "*fp64"}
    signature.update({name: "i32" for name in ("M", "N", "K", "fraction", "extra", "min_alignment",
                                               "accumulator_emin", "result_fraction", "out_emin", "out_emax",
                                               "late_bits", "addend_fraction")})
    constexprs = {"FMA": 16, "ROUNDING": rounding, "OUTPUT_SUBNORMALS": int(output_subnormals),
                  "NORMALISED": int(normalised), "LATE": int(late), "GROUPED": int(grouped),
                  "BLOCK_M": triton_blockfma.BLOCK_M, "BLOCK_N": triton_blockfma.BLOCK_N}
    ptx = sm90_ptx(triton_blockfma.build_kernel(), signature, constexprs)
    assert_plain_ptx(ptx)
    assert re.search(r"\bmul\.[\w.]*f64\b", ptx), "the products are formed"
    # Triton 3.6 compiled a float negation as 0 - x, which turns -0 into +0 (the H200 run of 2026-11-28,
    # where the interpreter kept -0; Triton 3.9 emits neg.f64, which keeps it): the kernel sets sign bits
    # instead, and no float subtraction may come back
    assert not re.search(r"\bsub\.[\w.]*f64\b", ptx), re.search(r"\bsub\.[\w.]*f64\b", ptx)


@pytest.mark.heavy
def test_triton_blockfma_in_the_interpreter():
    """Runs ``triton_blockfma_interpreted_cases.py`` with ``TRITON_INTERPRET=1`` in a fresh process
    (8 x 8 results, one program each) on one model of each combination of features (rounding,
    output format, addend, groups, normalisation, subnormal outputs): about 12 s."""
    run_interpreted("triton_blockfma_interpreted_cases.py", BLOCKFMA_MODELS="quick")


@pytest.mark.slow
def test_triton_blockfma_in_the_interpreter_every_preset():
    """The same on every aligned preset and custom model (about 30 s)."""
    run_interpreted("triton_blockfma_interpreted_cases.py", BLOCKFMA_MODELS="all")


def test_cpu_tensors_take_the_namespace_path():
    """Without the test routing, CPU tensors never build the kernel (and import no Triton)."""
    code = ("import sys, torch\n"
            "from pychop_compat import hardware\n"
            "A = torch.linspace(-3, 3, 12, dtype=torch.float64).reshape(3, 4)\n"
            "hardware.matmul(A, A.T, model='H100')\n"
            "print('triton' in sys.modules)\n")
    assert_imports_no_triton(code)


@pytest.fixture
def cuda_launches(monkeypatch):
    """The calls of the Triton kernel (a CUDA GPU needed)."""
    if not torch.cuda.is_available():
        pytest.skip("no CUDA GPU for torch")
    from pychop_compat.kernels import triton_blockfma

    launches = []
    real = triton_blockfma.block_matmul

    def counting(*args):
        launches.append(args[-2].shape)
        return real(*args)

    monkeypatch.setattr(triton_blockfma, "block_matmul", counting)
    return launches


@pytest.mark.gpu
@pytest.mark.parametrize("key", sorted(PRESETS), ids="-".join)
def test_cuda_tensors_give_the_host_bits(cuda_launches, key):
    """Every preset on CUDA tensors (64 x 250 x 64 adversarial, 64 x 256 x 64 random with C):
    the host's bits; the aligned ones through the Triton kernel."""
    spec = PRESETS[key]
    for seed, (k, adversarial) in enumerate([(250, True), (256, False)]):
        A, B, C, alpha, beta = operands(spec, 64, k, 64, seed, adversarial)
        want = hardware.matmul(A, B, C, alpha, beta, model=spec)
        device = [None if x is None else torch.from_numpy(x).cuda() for x in (A, B, C)]
        got = hardware.matmul(*device, alpha, beta, model=spec)
        assert got.is_cuda
        assert_bits_equal(got.cpu().numpy(), want, f"{key} seed {seed}")
    assert len(cuda_launches) == (2 if spec.block_sum == "aligned" else 0)


@pytest.mark.gpu
def test_cupy_arrays_take_the_kernel(cuda_launches):
    """CuPy arrays reach the kernel through DLPack and come back as CuPy arrays, the host's bits."""
    cupy = pytest.importorskip("cupy")
    spec = PRESETS["H100", "fp16", "fp32"]
    A, B, C, alpha, beta = operands(spec, 40, 100, 24, 3, False)
    got = hardware.matmul(cupy.asarray(A), cupy.asarray(B), cupy.asarray(C), alpha, beta, model=spec)
    assert isinstance(got, cupy.ndarray)
    assert_bits_equal(cupy.asnumpy(got), hardware.matmul(A, B, C, alpha, beta, model=spec), "cupy")
    assert len(cuda_launches) == 1
