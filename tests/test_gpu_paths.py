"""The GPU code paths: on a GPU where there is one, and without one on the host.

* The GPU generator (``engines/device_random.py``): its definition restated
  with NumPy's uint64 arithmetic is the oracle for stochastic rounding and bit
  flips on every route, and its contract (same seed, same result; MATLAB's
  stream untouched; deterministic modes leave it alone).
* The CUDA kernel's source, compiled for the host (g++, shims for a few CUDA
  intrinsics) and driven by ``cupy_engine`` on a NumPy stand-in for CuPy,
  against the NumPy engine over the engine matrix; compiled by nvcc where it
  is installed (no flush-to-zero, no fused multiply-add in the PTX).
* The paths a CUDA tensor takes without CuPy (the torch port, whole-tensor
  passes, the counter-based numbers), run on CPU tensors, and the route
  through CuPy's kernel (DLPack), against each other and against NumPy.
"""

from __future__ import annotations

import functools
import re
import subprocess

import numpy as np
import pytest

from engine_matrix import (CountingRandfunc, assert_bits_equal, check_engine_matches_numpy, make_input, matrix,
                           options_for, run_numpy, zlib_seed)
from pychop_compat import chop, rand, rng
from pychop_compat.engines import available_engines, to_numpy
from pychop_compat.formats import custom_format, lookup_format
from pychop_compat.options import resolve
from pychop_compat.randomness import MATLAB_STREAM

_AVAILABLE = available_engines()
GPU_ENGINES = [
    pytest.param("torch-cuda", id="torch-cuda",
                 marks=[pytest.mark.gpu,
                        pytest.mark.skipif("torch-cuda" not in _AVAILABLE, reason="no CUDA GPU for torch")]),
    pytest.param("cupy", id="cupy",
                 marks=[pytest.mark.gpu, pytest.mark.skipif("cupy" not in _AVAILABLE, reason="no cupy with a GPU")]),
]


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


# --- the CUDA source ---------------------------------------------------------------------------

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


@pytest.mark.parametrize("name, params, dtype, mode, sub, explim, flip", list(matrix()))
def test_cuda_kernel_logic_on_host(host_kernel, name, params, dtype, mode, sub, explim, flip):
    from pychop_compat.engines import cupy_engine
    from pychop_compat.randomness import sources_for

    host_cupy = host_kernel
    fmt = custom_format(*params) if params else lookup_format(name)
    seed = zlib_seed(name, dtype, mode, sub, explim, flip)
    x = make_input(fmt, dtype, seed)
    random = mode >= 5
    randfuncs = (CountingRandfunc(seed), CountingRandfunc(seed)) if random else (None, None)
    expected, expected_after = run_numpy(x, options_for(name, params, mode, sub, explim, flip, randfuncs[0]), seed)
    spec = resolve(options_for(name, params, mode, sub, explim, flip, randfuncs[1]), None,
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

    from pychop_compat.engines import torch_engine

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


def random_modes():
    for param in matrix():
        if param.values[3] >= 5 or param.values[6]:
            yield param


@pytest.mark.skipif("torch" not in _AVAILABLE, reason="torch not installed")
@pytest.mark.parametrize("name, params, dtype, mode, sub, explim, flip", list(random_modes()))
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
    options = options_for(name, params, mode, sub, explim, flip)
    results = []
    for cupy_for in (lambda _: host_kernel, lambda _: None):
        monkeypatch.setattr(torch_engine, "_cupy_for", cupy_for)
        torch_engine.seed_device(11)
        results.append(chop(x, options).numpy())
    assert_bits_equal(results[1], results[0], f"{name} {dtype} r{mode} s{sub} e{explim} f{flip}")


@pytest.mark.skipif("torch" not in _AVAILABLE, reason="torch not installed")
@pytest.mark.parametrize("name, params, dtype, mode, sub, explim, flip", list(matrix()))
def test_torch_device_paths_on_cpu(monkeypatch, name, params, dtype, mode, sub, explim, flip):
    """CPU tensors take host-tuned paths; the paths a CUDA tensor takes without CuPy (the torch
    port, whole-tensor passes, torch.nonzero) are run here on CPU tensors, against NumPy, bit
    for bit, with flips from MATLAB's stream as the GPU engines are tested."""
    from conftest import Engine
    from pychop_compat.engines import torch_engine

    monkeypatch.setattr(torch_engine, "_DEVICE_PATHS_ON_CPU", True)
    with torch_engine.matlab_stream_on_device():
        check_engine_matches_numpy(Engine("torch"), name, params, dtype, mode, sub, explim, flip)
