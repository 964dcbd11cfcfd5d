"""Every engine agrees with the NumPy engine bit for bit (torch CPU/CUDA, CuPy).

The matrix: formats x rounding modes x subnormal x explim x dtype x flip,
on inputs that mix chop's boundaries (xmin, xmins, xmax, xboundary, their
halves and neighbours, ties), the carrier's own extremes and subnormals,
0, -0, +-Inf and NaN, in 2-D arrays so that column-major order matters.
Random modes draw from identical seeded ``randfunc``s; flips from MATLAB's
stream reset by ``rng`` before each engine.  Then the torch specifics
(float16/bfloat16, non-contiguous, autograd, 0-d, empty, integers), the
device generator's contract (on GPUs, and on CPU tensors sent down the GPU
paths), the lazy imports, and the CUDA kernel compiled for the host and by nvcc.
"""

from __future__ import annotations

import functools
import itertools
import math
import re
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from pychop_compat import Chop, chop, rand, rng
from pychop_compat.engines import array_library, available_engines, to_numpy
from pychop_compat.formats import custom_format, lookup_format
from pychop_compat.options import resolve
from pychop_compat.randomness import MATLAB_STREAM
from pychop_compat.reference import chop_vector

_AVAILABLE = available_engines()
TORCH_ENGINES = [
    pytest.param("torch", id="torch",
                 marks=pytest.mark.skipif("torch" not in _AVAILABLE, reason="torch not installed")),
    pytest.param("torch-cuda", id="torch-cuda",
                 marks=[pytest.mark.gpu,
                        pytest.mark.skipif("torch-cuda" not in _AVAILABLE, reason="no CUDA GPU for torch")]),
]
GPU_ENGINES = [
    pytest.param("torch-cuda", id="torch-cuda",
                 marks=[pytest.mark.gpu,
                        pytest.mark.skipif("torch-cuda" not in _AVAILABLE, reason="no CUDA GPU for torch")]),
    pytest.param("cupy", id="cupy",
                 marks=[pytest.mark.gpu, pytest.mark.skipif("cupy" not in _AVAILABLE, reason="no cupy with a GPU")]),
]


# --- comparison -------------------------------------------------------------------------------

def assert_bits_equal(actual: np.ndarray, expected: np.ndarray, context: str = "") -> None:
    """Same dtype and shape, NaN in the same places, every other element the same bit pattern
    (so -0 and +0 differ).  NaN payloads are not compared (MATLAB's isequal ignores them too)."""
    assert actual.dtype == expected.dtype, f"{context}: dtype {actual.dtype} != {expected.dtype}"
    assert actual.shape == expected.shape, f"{context}: shape {actual.shape} != {expected.shape}"
    a, e = actual.ravel(order="F"), expected.ravel(order="F")
    nan_a, nan_e = np.isnan(a), np.isnan(e)
    as_int = np.dtype(f"i{a.dtype.itemsize}")
    differ = (nan_a != nan_e) | (~nan_a & ~nan_e & (a.view(as_int) != e.view(as_int)))
    if differ.any():
        bad = np.flatnonzero(differ)
        sample = ", ".join(f"[{i}] got {a[i]!r} want {e[i]!r}" for i in bad[:5])
        raise AssertionError(f"{context}: {bad.size} of {a.size} elements differ: {sample}")


# --- inputs -----------------------------------------------------------------------------------

def _boundaries(fmt, dtype) -> np.ndarray:
    """chop's thresholds for ``fmt``, the carrier's extremes and ties, each with both neighbours and sign."""
    dt = np.dtype(dtype)
    info = np.finfo(dt)
    t, ulp = fmt.t, math.ldexp(1.0, -fmt.t)
    base = [fmt.xmin, fmt.xmins, fmt.xmax, fmt.xboundary, fmt.xmin / 2, fmt.xmins / 2,
            fmt.xmins / 2 * (1 + ulp), fmt.xmin / 2 * (1 + ulp), math.ldexp(1.0, min(fmt.emax + 1, 1023)),
            1.0, 1 + ulp, 1 + 3 * ulp, 1 + 2 * ulp, 3 * ulp, 0.75 * fmt.xmins, 0.875 * fmt.xmins,
            float(info.max), float(info.tiny), float(info.smallest_subnormal), 0.75 * float(info.tiny)]
    base += [k * fmt.xmins for k in (1.5, 2, 2.5, 3, 3.5, 7.25)]
    grid = math.ldexp(1.0, max(fmt.emin - t + 1, -1074))
    base += [(m + 0.5) * grid for m in (1, 2, 2 ** (t - 1), 2 ** t - 1)]
    values = []
    with np.errstate(over="ignore", under="ignore"):
        for v in base:
            f = dt.type(v)
            if not np.isfinite(f):
                f = dt.type(info.max)
            for g in (f, np.nextafter(f, dt.type(np.inf)), np.nextafter(f, dt.type(0))):
                values += [g, -g]
    values += [dt.type(0), dt.type(-0.0), dt.type(np.inf), dt.type(-np.inf), dt.type(np.nan)]
    return np.array(values, dtype=dt)


def _random_values(gen, n: int, fmt, dtype) -> np.ndarray:
    """Magnitudes spread over the carrier's range and the format's, and ties at t bits."""
    dt = np.dtype(dtype)
    info = np.finfo(dt)
    lo, hi = math.log2(float(info.smallest_subnormal)), math.log2(float(info.max))
    exponent = np.where(gen.random(n) < 0.6,
                        gen.uniform(max(lo, fmt.emins - 4), min(hi, fmt.emax + 2), n),
                        gen.uniform(lo, hi, n))
    with np.errstate(over="ignore", under="ignore"):
        values = (np.exp2(exponent) * gen.choice([-1.0, 1.0], n)).astype(dt)
        ties = np.ldexp(gen.integers(2 ** (fmt.t - 1), 2 ** fmt.t, n) + 0.5,
                        gen.integers(int(max(lo, fmt.emins)), int(min(hi - 1, fmt.emax)), n) - fmt.t + 1)
    values = np.where(gen.random(n) < 0.25, ties.astype(dt), values)
    return np.where(np.isfinite(values), values, dt.type(0.5))


def make_input(fmt, dtype, seed: int, n: int = 600, columns: int = 6) -> np.ndarray:
    """A (rows, columns) C-ordered test array for ``fmt`` in ``dtype``."""
    gen = np.random.default_rng(seed)
    values = np.concatenate([_boundaries(fmt, dtype), _random_values(gen, n, fmt, dtype)])
    gen.shuffle(values)
    return values[: values.size - values.size % columns].reshape(-1, columns)


# --- the matrix -------------------------------------------------------------------------------

FORMATS = {"q43": None, "q52": None, "b": None, "h": None, "s": None, "d": None,
           "c1_3": [1, 3], "c3_1": [3, 1], "c5_3": [5, 3], "c10_30": [10, 30], "c20_300": [20, 300],
           "c10_5000": [10, 5000]}  # t = 1; 0, Inf and NaN in the subnormal block; xmin = 0 in double


def _matrix():
    for (name, params), dtype, mode, sub, explim, flip in itertools.product(
            FORMATS.items(), ("float32", "float64"), range(1, 7), (0, 1), (0, 1), (0, 1)):
        if name == "c20_300" and dtype == "float32":
            continue  # over chop.m's precision limits for single
        if name == "c1_3" and flip:
            continue  # flips need t >= 2 (test_flip_needs_two_bits_on_every_engine)
        yield pytest.param(name, params, dtype, mode, sub, explim, flip,
                           id=f"{name}-{dtype}-r{mode}-s{sub}-e{explim}-f{flip}")


class CountingRandfunc:
    """A seeded randfunc that counts the numbers it gives."""

    def __init__(self, seed):
        self.gen, self.used = np.random.default_rng(seed), 0

    def __call__(self, n):
        self.used += n
        return self.gen.random(n)


def _options(name, params, mode, sub, explim, flip, randfunc=None):
    options = {"format": "c" if params else name, "round": mode, "subnormal": sub,
               "explim": explim, "flip": flip}
    if params:
        options["params"] = params
    if randfunc is not None:
        options["randfunc"] = randfunc
    return options


def _run(engine, x: np.ndarray, options: dict, seed: int):
    """chop(x, options) on ``engine`` after rng(seed); the result as NumPy and the stream's next numbers."""
    rng(seed)
    xe = engine.to(x.copy())
    out = chop(xe, options)
    back = engine.back(out, xe)
    return back, rand(4, 1)


@pytest.mark.parametrize("name, params, dtype, mode, sub, explim, flip", list(_matrix()))
def test_engine_matches_numpy(engine, name, params, dtype, mode, sub, explim, flip):
    fmt = custom_format(*params) if params else lookup_format(name)
    seed = zlib_seed(name, dtype, mode, sub, explim, flip)
    x = make_input(fmt, dtype, seed)
    x_before = x.copy()
    random = mode >= 5
    expected_randfunc, randfunc = (CountingRandfunc(seed), CountingRandfunc(seed)) if random else (None, None)
    expected, expected_after = _run_numpy(x, _options(name, params, mode, sub, explim, flip, expected_randfunc),
                                          seed, reference=engine.name == "numpy")
    actual, after = _run(engine, x, _options(name, params, mode, sub, explim, flip, randfunc), seed)
    context = f"{engine.name} {name} {dtype} round={mode} subnormal={sub} explim={explim} flip={flip}"
    assert_bits_equal(actual, expected, context)
    np.testing.assert_array_equal(x, x_before)
    assert np.array_equal(after, expected_after), f"{context}: MATLAB's stream moved differently"
    if random:
        assert randfunc.used == expected_randfunc.used, f"{context}: number of stochastic draws"


def zlib_seed(*parts) -> int:
    import zlib

    return zlib.crc32(repr(parts).encode())


def _run_numpy(x, options, seed, reference=False):
    """The NumPy engine through the API, or (for the numpy row) the reference algorithm itself."""
    rng(seed)
    if not reference:
        out = chop(x.copy(), options)
    else:
        spec = resolve(options, None, "single" if x.dtype == np.float32 else "double")
        from pychop_compat.randomness import sources_for

        out = chop_vector(x.ravel(order="F"), spec, sources_for(spec.randfunc)).reshape(x.shape, order="F")
    return out, rand(4, 1)


@pytest.mark.parametrize("name, mode, explim, sub", [
    ("h", 1, 1, 1), ("h", 2, 1, 1), ("b", 1, 1, 0), ("b", 3, 1, 1), ("q43", 1, 1, 1), ("q43", 4, 1, 0),
    ("q52", 2, 1, 1), ("s", 1, 1, 1), ("d", 1, 1, 1), ("h", 1, 0, 1), ("q43", 3, 0, 1)])
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_large_arrays_match_numpy(engine, name, mode, explim, sub, dtype):
    """Many chunks of the fast path: regular, all-tiny, with zeros, with rare specials."""
    fmt = lookup_format(name)
    gen = np.random.default_rng(zlib_seed(name, mode, explim, sub, dtype))
    n = 300_003
    scale = np.where(np.arange(n) < 100_000, 1.0, np.where(np.arange(n) < 200_000, fmt.xmin * 0.3, 1.0))
    with np.errstate(over="ignore", under="ignore"):
        x = (gen.standard_normal(n) * scale).astype(dtype)
    x[200_000:230_000] = np.maximum(x[200_000:230_000], 0)  # many zeros
    specials = _boundaries(fmt, dtype)
    x[gen.integers(0, n, specials.size)] = specials
    x = x.reshape(-1, 3)
    options = {"format": name, "round": mode, "explim": explim, "subnormal": sub}
    expected = chop(x.copy(), options)
    xe = engine.to(x)
    assert_bits_equal(engine.back(chop(xe, options), xe), expected, f"{engine.name} {name} {dtype}")


@pytest.mark.parametrize("mode, flip", [(5, 0), (6, 0), (5, 1), (1, 1), (6, 1)])
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_matlab_stream_default_matches_numpy(engine, mode, flip, dtype):
    """No randfunc: MATLAB's stream (on the host for GPU engines here), the same numbers as NumPy."""
    x = make_input(lookup_format("h"), dtype, seed=mode, columns=12).reshape(-1, 4, 3)
    options = {"format": "h", "round": mode, "flip": flip, "subnormal": 1}
    expected, expected_after = _run_numpy(x, options, seed=7)
    actual, after = _run(engine, x, options, seed=7)
    assert_bits_equal(actual, expected, f"{engine.name} round={mode} flip={flip}")
    assert np.array_equal(after, expected_after)


@pytest.mark.parametrize("mode", [1, 5, 6])
def test_chop_rng_generator_matches_numpy(engine, mode):
    """Chop(..., rng=seed): every draw from a NumPy generator, the same on every engine."""
    x = make_input(lookup_format("b"), "float32", seed=3)
    options = {"format": "b", "round": mode, "flip": 1, "p": 0.3}
    expected = Chop(options, rng=123)(x.copy())
    xe = engine.to(x)
    assert_bits_equal(engine.back(Chop(options, rng=123)(xe), xe), expected, engine.name)


def test_flip_needs_two_bits_on_every_engine(engine):
    x = make_input(lookup_format("h"), "float64", seed=1)
    options = {"format": "c", "params": [1, 5], "round": 2, "flip": 1}
    with pytest.raises(ValueError, match="precision t >= 2"):
        chop(engine.to(x), options)


# --- torch specifics --------------------------------------------------------------------------

@pytest.fixture(params=TORCH_ENGINES)
def torch_device(request):
    import torch

    from pychop_compat.engines.torch_engine import matlab_stream_on_device

    with matlab_stream_on_device():
        yield torch.device("cuda" if request.param == "torch-cuda" else "cpu")


def _tensor(x: np.ndarray, device):
    import torch

    return torch.from_numpy(x.copy()).to(device)


@pytest.mark.parametrize("dtype_name", ["float16", "bfloat16"])
@pytest.mark.parametrize("name, mode", [("h", 1), ("b", 1), ("q43", 2), ("q52", 4), ("b", 5), ("h", 6)])
def test_torch_half_types_round_in_single(torch_device, dtype_name, name, mode):
    import torch

    dtype = getattr(torch, dtype_name)
    x32 = make_input(lookup_format(name), "float32", seed=mode).astype(np.float32)
    x = torch.from_numpy(x32).to(dtype)            # the half-precision input
    up = x.float().numpy()                          # ... and its exact float32 value
    options = {"format": name, "round": mode}
    rng(11)
    expected = torch.from_numpy(chop(up, dict(options))).to(dtype)
    rng(11)
    xd = x.to(torch_device)
    actual = chop(xd, dict(options))
    assert actual.dtype == dtype and actual.device == xd.device and actual.shape == x.shape
    # Compared through their exact float32 values (NaN payloads may differ).
    assert_bits_equal(actual.cpu().float().numpy(), expected.float().numpy(), f"{dtype_name} {name} {mode}")


@pytest.mark.parametrize("mode", [1, 3, 5])
def test_torch_non_contiguous(torch_device, mode):
    """Strided and permuted views: the values of the logical array, in its column-major order."""
    base = make_input(lookup_format("h"), "float64", seed=5, n=900, columns=24).reshape(-1, 6, 4)
    views = {
        "strided": lambda a: a[:, ::2, 1:],
        "transposed": lambda a: a.transpose(2, 0, 1),
    }
    options = {"format": "h", "round": mode}
    for label, view in views.items():
        expected, _ = _run_numpy(view(base), options, seed=2)
        tensor = _tensor(base, torch_device)
        torch_view = tensor[:, ::2, 1:] if label == "strided" else tensor.permute(2, 0, 1)
        assert not torch_view.is_contiguous()
        rng(2)
        actual = chop(torch_view, options)
        assert_bits_equal(to_numpy(actual), expected, label)


def test_torch_no_grad_and_requires_grad(torch_device):
    import torch

    x = make_input(lookup_format("b"), "float64", seed=8)
    options = {"format": "b", "round": 1}
    expected = chop(x.copy(), options)
    with torch.no_grad():
        assert_bits_equal(to_numpy(chop(_tensor(x, torch_device), options)), expected, "no_grad")
    leaf = _tensor(x, torch_device).requires_grad_(True)
    out = chop(leaf, options)
    assert not out.requires_grad and out.grad_fn is None  # detached, as documented
    assert_bits_equal(to_numpy(out), expected, "requires_grad")
    assert leaf.requires_grad and leaf.grad is None


@pytest.mark.parametrize("mode", [1, 2, 5, 6])
def test_torch_zero_dim_and_empty(torch_device, mode):
    import torch

    options = {"format": "h", "round": mode, "flip": 1}
    rng(4)
    expected = chop(np.float64(1 / 3), options)
    rng(4)
    scalar = torch.tensor(1 / 3, dtype=torch.float64, device=torch_device)
    out = chop(scalar, options)
    assert out.shape == () and out.dtype == torch.float64 and out.device == scalar.device
    assert out.item() == float(expected)

    for shape in [(0,), (3, 0), (0, 2, 5)]:
        for dtype in (torch.float32, torch.float64):
            before = rng().State.copy()
            empty = torch.empty(shape, dtype=dtype, device=torch_device)
            out = chop(empty, options)
            assert out.shape == empty.shape and out.dtype == dtype and out.device == empty.device
            assert np.array_equal(rng().State, before), "an empty input draws nothing"


@pytest.mark.parametrize("mode", range(1, 7))
def test_torch_input_not_modified(torch_device, mode):
    import torch

    x = _tensor(make_input(lookup_format("q43"), "float32", seed=mode), torch_device)
    before = x.clone()
    out = chop(x, {"format": "q43", "round": mode, "flip": 1})
    assert out.data_ptr() != x.data_ptr()
    assert torch.equal(x.view(torch.int32), before.view(torch.int32))


def test_torch_integer_and_bool_tensors(torch_device):
    import torch

    values = np.array([[0, 1, 2049, -65519], [65521, 3, -7, 123457]])
    for dtype in (torch.int64, torch.int32, torch.int16, torch.uint8):
        source = values.astype(np.uint8) if dtype == torch.uint8 else values
        tensor = torch.from_numpy(source.copy()).to(dtype).to(torch_device)
        out = chop(tensor, {"format": "h"})
        assert out.dtype == torch.float64 and out.device == tensor.device
        held = tensor.cpu().numpy().astype(np.float64)  # the values the integer dtype holds
        assert_bits_equal(to_numpy(out), chop(held, {"format": "h"}), str(dtype))
    flags = torch.tensor([True, False], device=torch_device)
    assert chop(flags, {"format": "h"}).dtype == torch.float64


def test_torch_complex_is_rejected(torch_device):
    import torch

    with pytest.raises(ValueError, match="real"):
        chop(torch.ones(3, dtype=torch.complex64, device=torch_device), {"format": "h"})


# --- the device generator (GPU, and CPU tensors on the GPU paths) ------------------------------
#
# The definition (pychop_compat/engines/device_random.py), restated here with NumPy's
# uint64 arithmetic (which wraps modulo 2**64), is the oracle for every route.

G, M1, M2 = np.uint64(0x9E3779B97F4A7C15), np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB)


def _mix(z):
    z = (z ^ (z >> np.uint64(30))) * M1
    z = (z ^ (z >> np.uint64(27))) * M2
    return z ^ (z >> np.uint64(31))


def _u(seed: int, stream: int, j) -> np.ndarray:
    """u_s(j) = ((mix(key_s + j G) >> 12) + 1/2) 2^-52 with key_s = mix(seed + s G)."""
    with np.errstate(over="ignore"):
        key = _mix(np.uint64(seed % 2**64) + np.uint64(stream) * G)
        z = _mix(key + np.asarray(j, np.uint64) * G)
    return ((z >> np.uint64(12)).astype(np.float64) + 0.5) * 2.0**-52


DEVICE_PATH_ENGINES = [
    pytest.param("torch-device-paths", id="torch-cpu-device-paths",
                 marks=pytest.mark.skipif("torch" not in _AVAILABLE, reason="torch not installed")),
    pytest.param("torch-host-kernel", id="torch-cpu-host-kernel",
                 marks=pytest.mark.skipif("torch" not in _AVAILABLE, reason="torch not installed")),
    *GPU_ENGINES,
]


@pytest.fixture
def device_paths(monkeypatch, request):
    """The engine to hand arrays to for a DEVICE_PATH_ENGINES name.

    "torch-device-paths": CPU tensors take the paths of a CUDA tensor without CuPy;
    "torch-host-kernel": and with CuPy, its kernel compiled for the host (see below).
    """
    def select(name):
        if name in ("torch-device-paths", "torch-host-kernel"):
            from pychop_compat.engines import torch_engine

            monkeypatch.setattr(torch_engine, "_DEVICE_PATHS_ON_CPU", True)
            if name == "torch-host-kernel":
                from pychop_compat.engines import cupy_engine

                host_cupy = request.getfixturevalue("host_kernel")
                monkeypatch.setattr(torch_engine, "_cupy_for", lambda _: host_cupy)
            return "torch"
        return name

    return select


def _on_device(name, x):
    from pychop_compat.engines import from_numpy

    return from_numpy(x, name)


@pytest.mark.parametrize("name", DEVICE_PATH_ENGINES)
@pytest.mark.parametrize("mode, flip", [(5, 0), (6, 0), (1, 1), (5, 1)])
def test_device_generator_contract(device_paths, name, mode, flip):
    from pychop_compat.engines.device_random import seed_device

    name = device_paths(name)
    x = make_input(lookup_format("h"), "float32", seed=9, n=5000)
    options = {"format": "h", "round": mode, "flip": flip}
    stream_before = rng().State.copy()
    seed_device(42)
    first = to_numpy(chop(_on_device(name, x), options))
    second = to_numpy(chop(_on_device(name, x), options))
    seed_device(42)
    again = to_numpy(chop(_on_device(name, x), options))
    assert_bits_equal(again, first, "same seed, same shape: same result")
    assert not np.array_equal(first, second, equal_nan=True), "the generator advances between calls"
    assert np.array_equal(rng().State, stream_before), "MATLAB's stream is not used on the device"
    if flip == 0:
        # Stochastic rounding lands between rounding down and rounding up (limits included).
        down = chop(x.copy(), {"format": "h", "round": 3})
        up = chop(x.copy(), {"format": "h", "round": 2})
        assert (np.isnan(first) | ((down <= first) & (first <= up))).all()


def _normal_fp16_values(dtype, n, seed, on_grid=False):
    """n values of fp16's normal range (exponents -14..15), random signs; on fp16's grid if asked."""
    gen = np.random.default_rng(seed)
    significand = gen.integers(2**10, 2**11, n) if on_grid else gen.uniform(2**10, 2**11, n)
    x = gen.choice([-1.0, 1.0], n) * np.ldexp(significand, gen.integers(-14, 16, n) - 10)
    return x.astype(dtype)


def _set_counter(name, value):
    """Put the device counter of the route ``name`` (after ``device_paths``) at ``value``."""
    from pychop_compat.engines import device_random

    device_random._offsets["cpu:0" if name == "torch" else "cuda:0"] = value


@pytest.mark.parametrize("name", DEVICE_PATH_ENGINES)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("start", [0, 2**64 - 5000], ids=["counter-0", "counter-wraps"])
def test_device_stochastic_rounding_follows_the_definition(device_paths, name, dtype, start):
    """Element i (row-major order) of the k-th drawing call (n elements each) after the
    counter is at ``start`` rounds |x| up exactly when u_1(start + k n + i mod 2**64)
    <= frac(|x| 2^(t-1-e)) (mode 5), or <= 1/2 (mode 6).  The input is a transposed view."""
    from pychop_compat.engines.device_random import seed_device

    name = device_paths(name)
    n, t, seed = 4096, 11, 2**64 - 3
    x = _normal_fp16_values(dtype, n, seed=31).reshape(64, 64).T   # not C-contiguous
    flat = np.ascontiguousarray(x).ravel()                         # row-major order
    e = np.frexp(flat.astype(np.float64))[1] - 1
    scaled = np.abs(flat.astype(np.float64)) * 2.0**(t - 1 - e)   # exact
    floor, frac = np.floor(scaled), scaled - np.floor(scaled)
    seed_device(seed)
    _set_counter(name, start)
    for call, mode in enumerate((5, 6, 5)):
        j = (start + call * n + np.arange(n, dtype=object)) % 2**64
        u = _u(seed, 1, j.astype(np.uint64)).astype(dtype)   # compared in the input's class
        up = (frac != 0) & (u <= (frac.astype(dtype) if mode == 5 else 0.5))
        want = (np.sign(flat) * (floor + up) * 2.0**-(t - 1 - e)).astype(dtype).reshape(x.shape)
        got = to_numpy(chop(_on_device(name, x), {"format": "h", "round": mode}))
        assert_bits_equal(got, want, f"{name} {dtype} call {call} mode {mode}")


@pytest.mark.parametrize("name", DEVICE_PATH_ENGINES)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_device_bit_flips_follow_the_definition(device_paths, name, dtype):
    """On fp16 values (which round to themselves), element i flips bit 1 + floor((t-1) u_3(j))
    of its t-bit integer significand exactly when u_2(j) <= p, j = offset + i."""
    from pychop_compat.engines.device_random import seed_device

    name = device_paths(name)
    n, t, p = 4096, 11, 0.3
    x = _normal_fp16_values(dtype, n, seed=32, on_grid=True)
    e = np.frexp(x.astype(np.float64))[1] - 1
    m = (np.abs(x.astype(np.float64)) * 2.0**(t - 1 - e)).astype(np.int64)   # t-bit integers
    seed_device(7)
    to_numpy(chop(_on_device(name, x[:100]), {"format": "h", "round": 5}))   # offset 100 after this
    j = 100 + np.arange(n)
    chosen = _u(7, 2, j) <= p
    bit = 1 + np.floor((t - 1) * _u(7, 3, j)).astype(np.int64)
    flipped = np.where(chosen, m ^ (np.int64(1) << (bit - 1)), m)
    want = (np.sign(x) * flipped * 2.0**-(t - 1 - e)).astype(dtype)
    got = to_numpy(chop(_on_device(name, x), {"format": "h", "round": 1, "flip": 1, "p": p}))
    assert_bits_equal(got, want, f"{name} {dtype}")
    assert 0.25 < chosen.mean() < 0.35 and set(bit.tolist()) == set(range(1, t))


def test_counter_numbers_match_their_definition():
    """The Python definition and the torch implementation (int64 words) against NumPy's uint64,
    across the 2**64 wrap of the counter; and the numbers' support and mean."""
    from pychop_compat.engines import device_random

    seed = 123456789
    keys = [device_random.mix64(seed + s * device_random.GOLDEN) for s in (1, 2, 3)]
    offsets = [0, 2**63 - 5, 2**64 - 40]
    for s, key in enumerate(keys, start=1):
        for offset in offsets:
            j = (offset + np.arange(64, dtype=object)) % 2**64
            want = _u(seed, s, j.astype(np.uint64))
            assert [device_random.counter_uniform(key, int(k)) for k in j] == want.tolist()
            if "torch" in _AVAILABLE:
                import torch

                from pychop_compat.engines.torch_engine import _counter_uniform

                got = _counter_uniform(key, offset, 64, torch.device("cpu")).numpy()
                assert np.array_equal(got, want), (s, offset)
    u = _u(seed, 1, np.arange(2**20))
    assert ((u > 0) & (u < 1)).all()
    assert np.all(np.ldexp(u, 53) % 2 == 1), "odd multiples of 2**-53"
    sigma = (1 / 12 / u.size) ** 0.5
    assert abs(u.mean() - 0.5) < 5 * sigma


@pytest.mark.parametrize("name", DEVICE_PATH_ENGINES)
def test_device_deterministic_modes_ignore_generator(device_paths, name):
    from pychop_compat.engines import device_random

    name = device_paths(name)
    x = make_input(lookup_format("b"), "float64", seed=10)
    device_random.seed_device(0)
    for mode in (1, 2, 3, 4):
        expected = chop(x.copy(), {"format": "b", "round": mode})
        assert_bits_equal(to_numpy(chop(_on_device(name, x), {"format": "b", "round": mode})), expected, name)
    assert device_random._offsets == {}, "deterministic modes leave the counters alone"


@pytest.mark.gpu
@pytest.mark.skipif("cupy" not in _AVAILABLE or "torch-cuda" not in _AVAILABLE, reason="needs cupy and CUDA torch")
def test_torch_cuda_through_cupy_matches_pure_torch(monkeypatch):
    """With CuPy, CUDA tensors use its kernel (DLPack); without, pure torch: the same bits, draws included."""
    import torch

    from pychop_compat.engines import torch_engine

    x = torch.from_numpy(make_input(lookup_format("q52"), "float64", seed=12, n=4000)).cuda()
    for options in ({"format": "q52", "round": 1}, {"format": "q52", "round": 5, "flip": 1}):
        torch_engine.seed_device(3)
        with_cupy = chop(x, options)
        monkeypatch.setattr(torch_engine, "_cupy_for", lambda _: None)
        torch_engine.seed_device(3)
        without = chop(x, options)
        monkeypatch.undo()
        assert_bits_equal(to_numpy(with_cupy), to_numpy(without), str(options))


# --- imports ----------------------------------------------------------------------------------

def test_numpy_use_imports_neither_torch_nor_cupy():
    code = textwrap.dedent("""
        import sys
        import numpy as np
        import pychop_compat
        from pychop_compat.engines import cupy_engine, torch_engine  # the modules import lazily
        x = np.linspace(-3, 3, 50).reshape(5, 10)
        for mode in range(1, 7):
            pychop_compat.chop(x, {'format': 'b', 'round': mode, 'flip': 1})
        pychop_compat.Chop(format='h')(np.float32(0.1))
        print(sorted(m for m in ('torch', 'cupy') if m in sys.modules))
    """)
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


def test_kernel_source_is_built_for_both_dtypes():
    """The CUDA source can be generated (and read) without CuPy."""
    from pychop_compat.engines.cupy_engine import kernel_source

    for dtype, real in (("float32", "float"), ("float64", "double")):
        source = kernel_source(dtype)
        assert f"#define REAL {real}\n" in source and "chop_kernel" in source
        assert source.count("{") == source.count("}")



@pytest.mark.parametrize("dtype, real", [("float32", "f32"), ("float64", "f64")])
def test_kernel_compiles_for_hopper_without_ftz_or_fma(tmp_path, dtype, real):
    """Where CUDA's compiler is installed (no GPU needed), the kernel compiles for sm_90 with the
    options CuPy hands NVRTC, and the PTX shows they took effect: every product is a separately
    rounded ``mul.rn`` (no contracted ``fma``), and no instruction flushes subnormals (``.ftz``)."""
    import shutil

    from pychop_compat.engines.cupy_engine import _COMPILE_OPTIONS, kernel_source

    nvcc = shutil.which("nvcc")
    if nvcc is None:
        pytest.skip("no nvcc (CUDA toolkit) on this machine")
    source = tmp_path / "chop_kernel.cu"
    source.write_text(kernel_source(dtype))
    ptx = tmp_path / "chop_kernel.ptx"
    subprocess.run([nvcc, "-arch=sm_90", *_COMPILE_OPTIONS, "-ptx", "-o", str(ptx), str(source)],
                   check=True, capture_output=True, timeout=300)
    subprocess.run([nvcc, "-arch=sm_90", *_COMPILE_OPTIONS, "-cubin", "-o", str(tmp_path / "k.cubin"),
                    str(source)], check=True, capture_output=True, timeout=300)
    text = ptx.read_text()
    assert ".entry chop_kernel(" in text
    assert f"mul.rn.{real}" in text
    assert ".ftz" not in text
    assert "fma." not in text and "mad." not in text

def test_engines_report_their_library(engine):
    x = np.linspace(-1, 1, 12).reshape(3, 4)
    xe = engine.to(x)
    out = chop(xe, {"format": "h"})
    assert array_library(out) == array_library(xe) == engine.name.split("-")[0]
    assert to_numpy(out).dtype == np.float64


# --- the CUDA kernel's logic, compiled for the host -------------------------------------------
#
# No GPU here?  The kernel's source is C++ but for a few CUDA intrinsics: with a
# shim for them it compiles with the host's C++ compiler, and cupy_engine's
# orchestration (phase 0, counts, host draws, column-major scatter) runs on a
# NumPy stand-in for CuPy.  This checks the kernel's arithmetic and logic bit
# for bit; NVRTC, launch configuration and device memory need a real GPU.

_HOST_SHIM = r"""
#include <cmath>
#include <cstring>
#define __device__
#define __forceinline__ inline
#define __global__
#define __restrict__
struct host_dim { unsigned x; };
static const host_dim blockIdx = {0}, threadIdx = {0}, blockDim = {1}, gridDim = {1};
static inline long long __double_as_longlong(double d) { long long r; std::memcpy(&r, &d, 8); return r; }
static inline double __longlong_as_double(long long v) { double r; std::memcpy(&r, &v, 8); return r; }
static inline int __float_as_int(float f) { int r; std::memcpy(&r, &f, 4); return r; }
static inline float __int_as_float(int v) { float r; std::memcpy(&r, &v, 4); return r; }
static inline int __clzll(long long v) { return __builtin_clzll((unsigned long long)v); }
static inline int __clz(int v) { return __builtin_clz((unsigned)v); }
using std::floor; using std::ceil; using std::rint; using std::trunc; using std::fabs;
"""


def _host_cupy(tmp_path_factory):
    """A NumPy-backed stand-in for the parts of CuPy that cupy_engine uses, kernels compiled by g++."""
    import contextlib
    import ctypes
    import shutil
    import types

    compiler = shutil.which("g++") or shutil.which("c++")
    if compiler is None:
        pytest.skip("no host C++ compiler")

    class Device(contextlib.nullcontext):
        id = 0

    class HostArray(np.ndarray):
        @property
        def device(self):
            return Device()

    def wrap(function):
        return lambda *args, **kwargs: np.asarray(function(*args, **kwargs)).view(HostArray)

    libraries = {}
    scalar_types = {"int": (np.int32, ctypes.c_int), "long long": (np.int64, ctypes.c_longlong),
                    "unsigned long long": (np.uint64, ctypes.c_ulonglong), "double": (np.float64, ctypes.c_double)}
    pointer_types = {"float": np.float32, "double": np.float64, "long long": np.int64, "unsigned char": np.uint8}

    def signature(code, name):
        """The kernel's parameters as (pointer?, NumPy type), read from its source."""
        real = re.search(r"#define REAL (\w+)", code).group(1)
        params = re.search(rf"void {name}\((.*?)\)\s*{{", code, re.S).group(1)
        out = []
        for param in params.split(","):
            words = param.replace("__restrict__", "").replace("const", "").split()[:-1]  # drop the name
            kind = " ".join(words).replace("REAL", real)
            if kind.endswith("*"):
                out.append((True, pointer_types[kind[:-1].strip()]))
            else:
                out.append((False, scalar_types[kind][0]))
        return out

    class RawKernel:
        """Checks every argument against the kernel's signature, as CuPy does not: a scalar of
        the wrong type or order would be read as other bits on a GPU."""

        def __init__(self, code, name, options=()):
            assert "--ftz=false" in options and "--fmad=false" in options
            key = hash(code)
            if key not in libraries:
                folder = tmp_path_factory.mktemp("kernel")
                source, library = folder / "kernel.cpp", folder / "kernel.so"
                source.write_text(_HOST_SHIM + code)
                subprocess.run([compiler, "-O2", "-shared", "-fPIC", "-ffp-contract=off", "-fno-fast-math",
                                "-o", str(library), str(source)], check=True, capture_output=True)
                libraries[key] = ctypes.CDLL(str(library))
            self.signature = signature(code, name)
            self.function = getattr(libraries[key], name)
            self.function.argtypes = [ctypes.c_void_p if pointer else
                                      next(c for t, c in scalar_types.values() if t is kind)
                                      for pointer, kind in self.signature]

        def __call__(self, grid, block, args):
            assert len(args) == len(self.signature), (len(args), len(self.signature))
            converted = []
            for position, (arg, (pointer, kind)) in enumerate(zip(args, self.signature)):
                if pointer:
                    assert isinstance(arg, np.ndarray) and arg.dtype == kind, (position, type(arg))
                    assert arg.flags.c_contiguous
                    converted.append(arg.ctypes.data)
                else:
                    assert type(arg) is kind, (position, type(arg), kind)
                    converted.append(arg.item())
            self.function(*converted)

    return types.SimpleNamespace(
        ndarray=HostArray, RawKernel=RawKernel, asarray=wrap(np.asarray), zeros=wrap(np.zeros),
        empty=wrap(np.empty), empty_like=wrap(np.empty_like), ascontiguousarray=wrap(np.ascontiguousarray),
        where=wrap(np.where), left_shift=wrap(np.left_shift), from_dlpack=wrap(np.from_dlpack),
        cuda=types.SimpleNamespace(Device=Device),
        HostArray=HostArray)


@pytest.fixture(scope="module")
def host_cupy(tmp_path_factory):
    return _host_cupy(tmp_path_factory)


@pytest.fixture
def host_kernel(host_cupy, monkeypatch):
    """cupy_engine on the stand-in, with a kernel cache of its own (the real one stays clean
    for the GPU tests that may follow)."""
    from pychop_compat.engines import cupy_engine

    monkeypatch.setattr(cupy_engine, "_cupy", lambda: host_cupy)
    monkeypatch.setattr(cupy_engine, "_kernel", functools.lru_cache(maxsize=None)(cupy_engine._kernel.__wrapped__))
    return host_cupy


@pytest.mark.parametrize("name, params, dtype, mode, sub, explim, flip", list(_matrix()))
def test_cuda_kernel_logic_on_host(host_kernel, name, params, dtype, mode, sub, explim, flip):
    from pychop_compat.engines import cupy_engine
    from pychop_compat.randomness import sources_for

    host_cupy = host_kernel
    fmt = custom_format(*params) if params else lookup_format(name)
    seed = zlib_seed(name, dtype, mode, sub, explim, flip)
    x = make_input(fmt, dtype, seed)
    random = mode >= 5
    randfuncs = (CountingRandfunc(seed), CountingRandfunc(seed)) if random else (None, None)
    expected, expected_after = _run_numpy(x, _options(name, params, mode, sub, explim, flip, randfuncs[0]), seed)
    spec = resolve(_options(name, params, mode, sub, explim, flip, randfuncs[1]), None,
                   "single" if dtype == "float32" else "double")
    rng(seed)
    with cupy_engine.matlab_stream_on_device():  # flips from MATLAB's stream, as NumPy
        actual = cupy_engine.chop_cupy(x.copy().view(host_cupy.HostArray), spec, sources_for(spec.randfunc))
    after = rand(4, 1)
    assert isinstance(actual, host_cupy.HostArray)
    assert_bits_equal(np.asarray(actual), expected, f"kernel {name} {dtype} r{mode} s{sub} e{explim} f{flip}")
    assert np.array_equal(after, expected_after)
    if random:
        assert randfuncs[0].used == randfuncs[1].used


@pytest.mark.parametrize("mode, flip", [(5, 0), (6, 1), (1, 1)])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_cuda_kernel_device_draws_on_host(host_kernel, dtype, mode, flip):
    """A cupy array's numbers made in the kernel: reproducible from the seed, between round down and up."""
    from pychop_compat.engines import cupy_engine

    host_cupy = host_kernel
    x = make_input(lookup_format("h"), dtype, seed=21, n=3000)
    spec = resolve({"format": "h", "round": mode, "flip": flip}, None, "single" if dtype == "float32" else "double")
    stream_before = rng().State.copy()
    cupy_engine.seed_device(5)
    first = np.asarray(cupy_engine.chop_cupy(x.view(host_cupy.HostArray), spec, MATLAB_STREAM))
    cupy_engine.seed_device(5)
    again = np.asarray(cupy_engine.chop_cupy(x.view(host_cupy.HostArray), spec, MATLAB_STREAM))
    assert_bits_equal(again, first, "same seed")
    assert np.array_equal(rng().State, stream_before)
    if flip:
        assert not np.array_equal(first, chop(x.copy(), {"format": "h", "round": 1}), equal_nan=True)
    else:
        down, up = chop(x.copy(), {"format": "h", "round": 3}), chop(x.copy(), {"format": "h", "round": 2})
        assert (np.isnan(first) | ((down <= first) & (first <= up))).all()


@pytest.mark.skipif("torch" not in _AVAILABLE, reason="torch not installed")
@pytest.mark.parametrize("options", [
    {"format": "q52", "round": 1}, {"format": "b", "round": 4, "explim": 0},
    {"format": "h", "round": 5}, {"format": "q52", "round": 6, "flip": 1, "p": 0.3},
    {"format": "s", "round": 1, "flip": 1, "subnormal": 0},
])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_torch_through_kernel_matches_pure_torch_on_host(host_kernel, monkeypatch, options, dtype):
    """A CUDA tensor with CuPy goes through DLPack to the kernel; without CuPy, pure torch.
    Here both on CPU tensors (the kernel compiled for the host): the same bits, numbers made
    on the device included, and the input is left alone."""
    import torch

    from pychop_compat.engines import cupy_engine, torch_engine

    host_cupy = host_kernel
    monkeypatch.setattr(torch_engine, "_DEVICE_PATHS_ON_CPU", True)
    x = torch.from_numpy(make_input(lookup_format(options["format"]), dtype, seed=12, n=4000))
    kept = x.clone()
    results = {}
    for route, cupy_for in (("kernel", lambda _: host_cupy), ("torch", lambda _: None)):
        monkeypatch.setattr(torch_engine, "_cupy_for", cupy_for)
        torch_engine.seed_device(3)
        out = chop(x, options)
        assert isinstance(out, torch.Tensor) and out.dtype == x.dtype and out.shape == x.shape
        results[route] = out.numpy()
    assert_bits_equal(results["kernel"], results["torch"], str(options))
    assert torch.equal(x.view(torch.int64 if dtype == "float64" else torch.int32),
                       kept.view(torch.int64 if dtype == "float64" else torch.int32))


def _random_modes():
    for param in _matrix():
        if param.values[3] >= 5 or param.values[6]:
            yield param


@pytest.mark.skipif("torch" not in _AVAILABLE, reason="torch not installed")
@pytest.mark.parametrize("name, params, dtype, mode, sub, explim, flip", list(_random_modes()))
def test_device_numbers_give_the_same_bits_on_both_routes(host_kernel, monkeypatch, name, params, dtype,
                                                          mode, sub, explim, flip):
    """With numbers made on the device, pure torch (its bit-pattern path for stochastic
    rounding, the general path for the rest and for flips) and the CUDA kernel (compiled for
    the host, itself checked against NumPy above) agree bit for bit on the matrix's inputs."""
    import torch

    from pychop_compat.engines import torch_engine

    monkeypatch.setattr(torch_engine, "_DEVICE_PATHS_ON_CPU", True)
    fmt = custom_format(*params) if params else lookup_format(name)
    x = torch.from_numpy(make_input(fmt, dtype, zlib_seed(name, dtype, mode, sub, explim, flip)))
    options = _options(name, params, mode, sub, explim, flip)
    results = []
    for cupy_for in (lambda _: host_kernel, lambda _: None):
        monkeypatch.setattr(torch_engine, "_cupy_for", cupy_for)
        torch_engine.seed_device(11)
        results.append(chop(x, options).numpy())
    assert_bits_equal(results[1], results[0], f"{name} {dtype} r{mode} s{sub} e{explim} f{flip}")


@pytest.mark.skipif("torch" not in _AVAILABLE, reason="torch not installed")
@pytest.mark.parametrize("name, params, dtype, mode, sub, explim, flip", list(_matrix()))
def test_torch_device_paths_on_cpu(monkeypatch, name, params, dtype, mode, sub, explim, flip):
    """CPU tensors take host-tuned paths; the paths a CUDA tensor takes without CuPy (the torch
    port, whole-tensor passes, torch.nonzero) are run here on CPU tensors, against NumPy, bit
    for bit, with flips from MATLAB's stream as the GPU engines are tested."""
    from conftest import Engine
    from pychop_compat.engines import torch_engine

    monkeypatch.setattr(torch_engine, "_DEVICE_PATHS_ON_CPU", True)
    with torch_engine.matlab_stream_on_device():
        test_engine_matches_numpy(Engine("torch"), name, params, dtype, mode, sub, explim, flip)
