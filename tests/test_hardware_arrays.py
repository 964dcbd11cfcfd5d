"""hardware.matmul and block_dot on torch, JAX (and CuPy) arrays: computed on their device by the
same namespace-generic body as NumPy's, the NumPy bits, the input's library, device and the
output dtype (issue 31, item 1)."""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest

from pychop_compat import hardware
from pychop_compat.kernels.compiled import cpu_engine

PRESETS = [("H100", "fp16", "fp32"), ("H100", "fp16", "fp16"), ("H100", "bf16", "fp32"), ("A100", "tf32", "fp32"),
           ("H100", "e4m3", "fp32"), ("B200", "e5m2", "fp32"), ("Ada", "e4m3", "fp16"), ("V100", "fp16", "fp32"),
           ("MI100", "fp16", "fp32"), ("MI250", "bf16", "fp32"),  # AMD's exact and pairwise block sums
           ("MI300X", "e4m3fnuz", "fp32")]  # and odd/even groups
MODELS = [pytest.param(hardware.model(*key), id="-".join(key)) for key in PRESETS]
# The other rounding modes of the block result and the switches no preset uses.
CUSTOM = [pytest.param(hardware.model("H100").replace(rounding=mode), id=mode) for mode in ("rne", "ru", "rd")] + [
    pytest.param(hardware.model("A100").replace(normalised_products=True, input_subnormals=False,
                                                output_subnormals=False), id="flushing-normalised")]
# JAX compiles each model and shape (seconds each on a CPU): the default run takes one model.
JAX_MODELS = [MODELS[0]] + [pytest.param(*p.values, id=p.id, marks=pytest.mark.slow) for p in MODELS[1:] + CUSTOM]


def _bits(x):
    x = np.asarray(x)
    return x.view({2: np.uint16, 4: np.uint32, 8: np.uint64}[x.dtype.itemsize])


def _adversarial(seed, m=9, k=37, n=7):
    """A, B and C with subnormal, huge and integer rows, cancellation, NaN and infinities."""
    rng = np.random.default_rng(seed)
    A, B, C = rng.standard_normal((m, k)), rng.standard_normal((k, n)), rng.standard_normal((m, n))
    A[1] *= 2.0**-20
    A[2] *= 2.0**14
    B[:, 3] *= 2.0**-14
    A[3] = np.round(A[3] * 4)
    B[:, 4] = -B[:, 5]
    A[4] *= 2.0**100
    A[5, 3], B[7, 6], C[8, 2], A[6, 0], B[0, 1] = np.inf, np.nan, np.inf, -np.inf, np.inf
    B[:, 2] *= 2.0**-130
    C[7] *= 2.0**-140  # float32 subnormals (XLA's conversions flush them)
    C[0] *= 2.0**120
    return A, B, C


def _numpy(*args, **kwargs):
    with np.errstate(all="ignore"), cpu_engine("numpy"):
        return hardware.matmul(*args, **kwargs)


def _cases():
    A, B, C = _adversarial(3)
    rng = np.random.default_rng(4)
    return [((A, B, C), {"beta": 1.0}), ((A, B, C), {"alpha": 2.0, "beta": -0.5}), ((A, B), {}),
            ((A, B, C[3]), {"beta": 3.0}),  # a row broadcast
            ((rng.standard_normal((5, 70)), rng.standard_normal((70, 6))), {})]  # the last: another shape


def test_the_generic_body_is_the_compiled_kernel_on_numpy():
    pytest.importorskip("numba")
    model = hardware.model("H100", "e4m3", "fp32")
    for args, kwargs in _cases():
        with np.errstate(all="ignore"):
            assert np.array_equal(_bits(hardware.matmul(*args, model=model, **kwargs)),
                                  _bits(_numpy(*args, model=model, **kwargs)))


@pytest.mark.parametrize("model", MODELS + CUSTOM)
def test_torch_tensors_give_the_numpy_bits(model):
    torch = pytest.importorskip("torch")
    for args, kwargs in _cases():
        got = hardware.matmul(*(torch.from_numpy(x) for x in args), model=model, **kwargs)
        expected = _numpy(*args, model=model, **kwargs)
        assert isinstance(got, torch.Tensor) and got.device.type == "cpu"
        assert got.dtype == (torch.float16 if model.output_format == "fp16" else torch.float32)
        assert np.array_equal(_bits(got.numpy()), _bits(expected))


@pytest.fixture
def jnp():
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)  # int64 sums and float64 values (as conftest's engines do)
    return jax.numpy


@pytest.mark.parametrize("model", JAX_MODELS)
def test_jax_arrays_give_the_numpy_bits(jnp, model):
    (A, B, C), _ = _cases()[0]
    C32 = C.astype(np.float32)  # with float32 subnormals (XLA's conversion would flush them)
    for args, kwargs in _cases()[:-1] + [((A, B, C32), {"beta": 1.0})]:  # one shape: one compilation
        got = hardware.matmul(*(jnp.asarray(x) for x in args), model=model, **kwargs)
        expected = _numpy(*args, model=model, **kwargs)
        assert got.dtype == (jnp.float16 if model.output_format == "fp16" else jnp.float32)
        assert got.devices() == jnp.asarray(args[0]).devices()
        assert np.array_equal(_bits(got), _bits(expected))


@pytest.mark.parametrize("model", [MODELS[6], pytest.param(*MODELS[4].values, id=MODELS[4].id,
                                                             marks=pytest.mark.slow)])
def test_jax_under_jit(jnp, model):
    import jax

    (A, B, C), kwargs = _cases()[1]

    @jax.jit
    def product(a, b, c):
        return hardware.matmul(a, b, c, model=model, **kwargs)

    got = product(jnp.asarray(A), jnp.asarray(B), jnp.asarray(C))
    assert np.array_equal(_bits(got), _bits(_numpy(A, B, C, model=model, **kwargs)))


def _narrow_inputs():
    """float32 values with bfloat16 and float32 subnormals (XLA's conversions would flush them)."""
    A = np.array([[2.0**-130, 3 * 2.0**-133, 1.5]], dtype=np.float32)
    B = np.array([[2.0**60], [2.0**70], [2.0**-140]], dtype=np.float32)
    return A, B, np.array([[2.0**-140]], dtype=np.float32)


def test_narrow_torch_dtypes():
    torch = pytest.importorskip("torch")
    model = hardware.model("H100", "bf16", "fp32")
    A, B, C = _narrow_inputs()
    expected = _bits(_numpy(A, B, C, beta=1.0, model=model))
    for dtype in (torch.float32, torch.bfloat16):
        got = hardware.matmul(torch.from_numpy(A).to(dtype), torch.from_numpy(B).to(dtype), torch.from_numpy(C),
                              beta=1.0, model=model)
        assert np.array_equal(_bits(got.numpy()), expected)


@pytest.mark.slow
def test_narrow_jax_dtypes_are_read_exactly(jnp):
    model = hardware.model("H100", "bf16", "fp32")
    A, B, C = _narrow_inputs()
    expected = _bits(_numpy(A, B, C, beta=1.0, model=model))
    for dtype in (jnp.float32, jnp.bfloat16):
        got = hardware.matmul(jnp.asarray(A, dtype=dtype), jnp.asarray(B, dtype=dtype), jnp.asarray(C), beta=1.0,
                              model=model)
        assert np.array_equal(_bits(got), expected)


def _block_dot_case(rng):
    """``(a, b, c, model, expected bits)``: pairs of fp16 vectors drawn from ``rng`` with an Inf and
    a NaN, the H100's fp16 model, and NumPy's block_dot."""
    model = hardware.model("H100", "fp16", "fp32")
    a = np.float16(rng.standard_normal((4, 3, 40))).astype(np.float64)
    b = np.float16(rng.standard_normal((3, 40))).astype(np.float64)
    c = np.float32(rng.standard_normal((4, 3))).astype(np.float64)
    a[0, 0, 3], c[1, 1] = np.inf, np.nan
    with np.errstate(all="ignore"), cpu_engine("numpy"):
        return a, b, c, model, _bits(hardware.block_dot(a, b, c, model))


def test_block_dot_on_torch_and_jax(jnp):
    torch = pytest.importorskip("torch")
    a, b, c, model, expected = _block_dot_case(np.random.default_rng(5))
    with np.errstate(all="ignore"):
        assert np.array_equal(_bits(hardware.block_dot(a, b, c, model)), expected)  # compiled, if Numba is there
    got = hardware.block_dot(torch.from_numpy(a), torch.from_numpy(b), torch.from_numpy(c), model)
    assert isinstance(got, torch.Tensor) and got.dtype == torch.float64
    assert np.array_equal(_bits(got.numpy()), expected)
    assert np.array_equal(_bits(hardware.block_dot(jnp.asarray(a), jnp.asarray(b), c, model)), expected)


def test_host_data_joins_the_device_arrays_and_gradients_are_dropped():
    torch = pytest.importorskip("torch")
    (A, B, C), kwargs = _cases()[1]
    A_t = torch.from_numpy(A).requires_grad_(True)
    got = hardware.matmul(A_t, B, C.tolist(), model="H100", **kwargs)  # NumPy data and lists join torch's
    assert isinstance(got, torch.Tensor) and not got.requires_grad
    assert np.array_equal(_bits(got.numpy()), _bits(_numpy(A, B, C, model="H100", **kwargs)))


def test_integer_inputs_and_empty_products():
    torch = pytest.importorskip("torch")
    A, B = np.arange(12).reshape(3, 4), np.arange(8).reshape(4, 2)
    assert np.array_equal(_bits(hardware.matmul(torch.from_numpy(A), torch.from_numpy(B)).numpy()),
                          _bits(_numpy(A, B)))
    C = np.full((3, 2), 0.1)
    for k in (0,):
        got = hardware.matmul(torch.zeros(3, k), torch.zeros(k, 2), torch.from_numpy(C), beta=1.0,
                              model=hardware.model("H100", "e4m3", "fp32"))
        assert np.array_equal(_bits(got.numpy()), _bits(_numpy(np.zeros((3, k)), np.zeros((k, 2)), C, beta=1.0,
                                                              model=hardware.model("H100", "e4m3", "fp32"))))
    assert tuple(hardware.matmul(torch.zeros(0, 5), torch.zeros(5, 2)).shape) == (0, 2)


def test_refusals_on_device_arrays(jnp):
    torch = pytest.importorskip("torch")
    with pytest.raises(TypeError, match="mix jax and torch"):
        hardware.matmul(torch.ones(2, 2), jnp.ones((2, 2)))
    with pytest.raises(TypeError, match="must hold real numbers"):
        hardware.matmul(torch.ones(2, 2, dtype=torch.complex64), torch.ones(2, 2))
    with pytest.raises(ValueError, match="A.shape\\[1\\] == B.shape\\[0\\], got \\(2, 3\\) and \\(2, 2\\)"):
        hardware.matmul(torch.ones(2, 3), torch.ones(2, 2))


def test_jax_without_64_bit_types_computes_on_host_copies():
    """Eager arrays: NumPy computes (the same bits) and the result goes back; traced ones and
    block_dot (a float64 result) are refused."""
    jax = pytest.importorskip("jax")
    enabled = jax.config.read("jax_enable_x64")
    jax.config.update("jax_enable_x64", False)
    try:
        A, B = _narrow_inputs()[:2]
        got = hardware.matmul(jax.numpy.asarray(A), jax.numpy.asarray(B), model="H100")
        assert got.dtype == jax.numpy.float32 and np.array_equal(_bits(got), _bits(_numpy(A, B, model="H100")))
        with pytest.raises(ValueError, match="jax_enable_x64"):
            jax.jit(lambda a: hardware.matmul(a, a, model="H100"))(jax.numpy.ones((2, 2)))
        with pytest.raises(ValueError, match="jax_enable_x64"):
            hardware.block_dot(jax.numpy.ones((2, 2)), jax.numpy.ones((2, 2)), 0.0, hardware.model("H100"))
    finally:
        jax.config.update("jax_enable_x64", enabled)


def test_rows_are_computed_a_few_at_a_time(monkeypatch):
    """A small work budget splits the rows: the same bits; and the memory of a long product stays
    far below that of an (M, N, K) array."""
    torch = pytest.importorskip("torch")
    (A, B, C), kwargs = _cases()[0]
    expected = _bits(_numpy(A, B, C, model="H100", **kwargs))
    monkeypatch.setattr("pychop_compat.hardware.blockfma._CHUNK_ELEMENTS", 7 * 16 * 2)
    assert np.array_equal(_bits(_numpy(A, B, C, model="H100", **kwargs)), expected)
    got = hardware.matmul(*(torch.from_numpy(x) for x in (A, B, C)), model="H100", **kwargs)
    assert np.array_equal(_bits(got.numpy()), expected)
    monkeypatch.undo()
    rng = np.random.default_rng(6)
    A, B = rng.standard_normal((24, 2048)), rng.standard_normal((2048, 24))
    tracemalloc.start()
    try:
        _numpy(A, B, model="H100")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 24 * 24 * 2048 * 8 / 4, peak


# -- On a GPU (tests marked gpu: deselected where torch and CuPy see no CUDA device) ----------------


def _on_gpu(library):
    """``(to_device, to_host)`` for ``library`` on its first CUDA device; skips where it has none."""
    if library == "torch-cuda":
        torch = pytest.importorskip("torch")
        if not torch.cuda.is_available():
            pytest.skip("torch sees no CUDA device")

        def torch_host(v):
            assert isinstance(v, torch.Tensor) and v.is_cuda
            return v.cpu().numpy()

        return (lambda x: torch.from_numpy(np.asarray(x)).cuda()), torch_host
    if library == "cupy":
        cupy = pytest.importorskip("cupy")
        try:
            if cupy.cuda.runtime.getDeviceCount() < 1:
                pytest.skip("CuPy sees no CUDA device")
        except Exception as exc:  # CuPy without a driver
            pytest.skip(f"CuPy sees no CUDA device ({exc})")

        def cupy_host(v):
            assert isinstance(v, cupy.ndarray)
            return cupy.asnumpy(v)

        return cupy.asarray, cupy_host
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    try:
        device = jax.devices("gpu")[0]
    except RuntimeError:
        pytest.skip("JAX has no GPU backend")

    def jax_host(v):
        assert v.devices() == {device}
        return np.asarray(v)

    return (lambda x: jax.device_put(np.asarray(x), device)), jax_host


# JAX compiles each model and shape (seconds each): two models on the GPU.
GPU_ROWS = ([pytest.param(library, *m.values, id=f"{library}-{m.id}") for library in ("torch-cuda", "cupy")
             for m in MODELS + CUSTOM]
            + [pytest.param("jax-gpu", *m.values, id=f"jax-gpu-{m.id}") for m in (MODELS[0], MODELS[4])])


@pytest.mark.gpu
@pytest.mark.parametrize("library, model", GPU_ROWS)
def test_gpu_arrays_give_the_numpy_bits(library, model):
    """Computed on the device (adversarial inputs: subnormal, huge, Inf and NaN), the host's bits."""
    to_device, to_host = _on_gpu(library)
    for args, kwargs in _cases():
        if library == "jax-gpu" and len(args) == 3:
            args = (*args[:2], args[2].astype(np.float32))  # (XLA's float64 -> float32 conversion flushes)
        got = to_host(hardware.matmul(*(to_device(x) for x in args), model=model, **kwargs))
        expected = _numpy(*args, model=model, **kwargs)
        assert got.dtype == expected.dtype
        # NaN payloads may differ: CUDA's conversion to half gives 0x7FFF, NumPy's 0x7E00 (an H200)
        nan = np.isnan(expected)
        assert np.array_equal(np.isnan(got), nan), (library, model, kwargs)
        assert np.array_equal(_bits(got)[~nan], _bits(expected)[~nan]), (library, model, kwargs)


def _namespace_arrays(library):
    """``(namespace, to_library, to_numpy)`` of ``library`` on the CPU."""
    from pychop_compat.kernels.xp import library_namespace

    if library == "torch":
        torch = pytest.importorskip("torch")
        return library_namespace("torch"), torch.from_numpy, lambda v: v.numpy()
    if library == "jax":
        jax = pytest.importorskip("jax")
        jax.config.update("jax_enable_x64", True)
        return library_namespace("jax"), jax.numpy.asarray, np.asarray
    return library_namespace("numpy"), np.asarray, np.asarray


@pytest.mark.parametrize("library", ["numpy", "torch", "jax"])
def test_exact_conversions_between_float32_and_float64(library):
    """float64 -> float32 rounded as IEEE conversion rounds (NumPy's, which does not flush; XLA's
    and CuPy's do), subnormal results, ties to even, extremes, zeros of both signs, Inf and NaN
    included; and float32 -> float64 exactly, subnormals included."""
    from pychop_compat.kernels.xp import exact_float32, exact_float64

    ns, to, back = _namespace_arrays(library)
    finfo = np.finfo(np.float32)
    rng = np.random.default_rng(8)
    special = [2.0**-149, -2.0**-149, 3 * 2.0**-140, -(2.0**-126 - 2.0**-149), 2.0**-126, -2.0**-126, 2.0**-150,
               -2.0**-150, 3 * 2.0**-151, 5 * 2.0**-151, 2.0**-126 - 2.0**-150, 2.0**-127 + 2.0**-151, 2.0**-160,
               float(finfo.max), -float(finfo.max), 0.0, -0.0, np.inf, -np.inf, 1.0, -1.5, 1 / 3, 1e39, -1e39]
    values = np.concatenate([special, rng.standard_normal(200) * 2.0 ** rng.integers(-160, -120, 200),
                             rng.standard_normal(50)])
    with np.errstate(over="ignore"):
        expected = values.astype(np.float32)
    got = back(exact_float32(ns, to(values)))
    assert got.dtype == np.float32 and np.array_equal(_bits(got), _bits(expected))
    assert np.isnan(back(exact_float32(ns, to(np.array([np.nan]))))).all()
    widened = back(exact_float64(ns, to(expected)))
    assert widened.dtype == np.float64 and np.array_equal(_bits(widened), _bits(expected.astype(np.float64)))


@pytest.mark.gpu
@pytest.mark.parametrize("library", ["torch-cuda", "cupy"])
def test_float32_subnormal_operands_on_the_gpu(library):
    """float32 operands below float32's normal range (which CuPy's conversions flush) are read
    exactly: the host's bits; and float32 data rounded to E8M0, whose smallest value 2**-127 is
    a float32 subnormal, as on the host."""
    from pychop_compat import chop

    to_device, to_host = _on_gpu(library)
    A, B, C = _narrow_inputs()
    expected = _numpy(A, B, C, beta=1.0, model="H100", inputs="bf16")
    got = to_host(hardware.matmul(to_device(A), to_device(B), to_device(C), beta=1.0, model="H100", inputs="bf16"))
    assert np.array_equal(_bits(got), _bits(expected))
    x = np.array([2.0**-127 * 1.2, -(2.0**-127), 2.0**-140, 2.0**-126, 3.0, -0.75], dtype=np.float32)
    options = {"format": "float8_e8m0fnu"}
    want = chop(x, options)
    assert want[0] == 2.0**-127  # (the case itself: a float32 subnormal result)
    assert np.array_equal(_bits(to_host(chop(to_device(x), options))), _bits(want))


@pytest.mark.gpu
@pytest.mark.parametrize("library", ["torch-cuda", "cupy"])
def test_block_dot_and_linalg_matmul_on_the_gpu(library):
    from pychop_compat import linalg

    to_device, to_host = _on_gpu(library)
    rng = np.random.default_rng(5)
    a, b, c, model, expected = _block_dot_case(rng)
    assert np.array_equal(_bits(to_host(hardware.block_dot(to_device(a), to_device(b), to_device(c), model))),
                          expected)
    A, B = rng.standard_normal((9, 37)), rng.standard_normal((37, 7))
    A[0] *= 2.0**-120  # products below float32's normal range
    expected = _numpy(A, B, model="H100")
    for dtype in (np.float64, np.float32):
        got = to_host(linalg.matmul(to_device(A.astype(dtype)), to_device(B.astype(dtype)), "h", hardware="H100"))
        assert got.dtype == dtype and np.array_equal(got, expected.astype(dtype)), dtype


@pytest.mark.gpu
def test_nn_simulate_on_cuda_tensors_gives_the_host_bits():
    """A small CNN (convolutions, ReLU, a linear layer) under ``nn.simulate`` on a CUDA device: the
    bits of the same run on the CPU (tests/test_nn_simulate.py checks that one by hand)."""
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch sees no CUDA device")
    from torch import nn as tnn

    from pychop_compat.nn import simulate

    torch.manual_seed(0)
    net = tnn.Sequential(tnn.Conv2d(2, 4, 3, padding=1), tnn.ReLU(), tnn.Conv2d(4, 4, 3, stride=2, groups=2),
                         tnn.ReLU(), tnn.Flatten(), tnn.Linear(4 * 3 * 3, 5))
    x = torch.randn(2, 2, 7, 7)
    with simulate("h", hardware="H100"):
        want = net(x)
        got = net.cuda()(x.cuda())
    assert got.is_cuda and got.dtype == want.dtype
    assert np.array_equal(_bits(got.detach().cpu().numpy()), _bits(want.detach().numpy()))


def test_linalg_and_nn_keep_device_tensors_where_they_are(jnp, monkeypatch):
    """linalg.matmul(hardware=) and nn.simulate(hardware=) compute on the operands' device: no host
    copy (one would fail here), the bits of the NumPy product."""
    torch = pytest.importorskip("torch")
    from pychop_compat import linalg, nn

    rng = np.random.default_rng(7)
    A, B = rng.standard_normal((9, 37)), rng.standard_normal((37, 7))  # the shapes of _cases: compiled once
    A[0] *= 2.0**-120  # products below float32's normal range
    expected = _numpy(A, B, model="H100")

    def no_host_copy(*args, **kwargs):
        raise AssertionError("copied to the host")

    monkeypatch.setattr("pychop_compat.linalg.arrays.Arrays.to_host", no_host_copy)
    for to, name in ((torch.from_numpy, "torch"), (jnp.asarray, "jax")):
        for dtype in (np.float64, np.float32):
            got = linalg.matmul(to(A.astype(dtype)), to(B.astype(dtype)), "h", hardware="H100")
            assert str(got.dtype).endswith(np.dtype(dtype).name), (name, got.dtype)
            host = np.asarray(got.numpy() if name == "torch" else got)
            assert np.array_equal(_bits(host.astype(np.float32)), _bits(expected)), (name, dtype)
            assert np.array_equal(host, expected.astype(dtype))
    monkeypatch.setattr("pychop_compat.engines.to_numpy", no_host_copy)
    x, w = torch.from_numpy(A.astype(np.float32)), torch.from_numpy(B.astype(np.float32))
    with nn.simulate("h", hardware="H100"):
        got = x @ w
    assert np.array_equal(_bits(got.numpy()), _bits(expected))
