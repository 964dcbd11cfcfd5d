"""The GPU code paths: on a GPU where there is one, and without one on the host.

* The GPU generator (``engines/device_random.py``): its definition restated
  with NumPy's uint64 arithmetic is the oracle for stochastic rounding and bit
  flips on every route, and its contract (same seed, same result; MATLAB's
  stream untouched; deterministic modes leave it alone).
* The CUDA kernel (``engines/cuda.py``): its compile path (NVRTC with exactly
  the engine's options, the PTX loaded by ``RawModule(path=...)``, never one
  of CuPy's compilers, which force ``-ftz=true``; the disk cache), its PTX
  from nvcc and NVRTC where installed (no ``.ftz``, no fused multiply-add),
  and its generated source for every variant, compiled for the host (g++,
  shims for a few CUDA intrinsics) and driven by ``engines/cuda.py`` on a
  NumPy stand-in for CuPy, against the NumPy engine over the engine matrix.
* The routes a CUDA tensor takes (``engines.dispatch.device_paths_on_cpu`` runs
  them on CPU tensors: the namespace kernel with numbers made on the device
  or drawn by the host in chop.m's order, CuPy's kernel through DLPack), against
  each other and against NumPy; the router's choices as data (``route``); on a
  GPU, every route of a CUDA tensor (``cuda_route``) over the matrix.
"""

from __future__ import annotations

import itertools
import re
import subprocess
from pathlib import Path

import numpy as np
import pytest

from engine_matrix import (CountingRandfunc, assert_bits_equal, check_engine_matches_numpy, make_input, matrix,
                           options_for, run_numpy, zlib_seed)
from pychop_compat import chop, rand, rng
from pychop_compat.engines import available_engines, to_numpy
from pychop_compat.formats import custom_format, lookup_format
from pychop_compat.matlab.options import resolve
from pychop_compat.engines import dispatch
from pychop_compat.engines.dispatch import round_array
from pychop_compat.random.sources import MATLAB_STREAM

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

    "torch-device-paths": CPU tensors take the routes of a CUDA tensor without CuPy;
    "torch-host-kernel": and with CuPy, its kernel compiled for the host (see below).
    """
    def select(name):
        if name in ("torch-device-paths", "torch-host-kernel"):
            request.getfixturevalue("device_paths_on_cpu")
            if name == "torch-host-kernel":
                request.getfixturevalue("host_kernel")  # CuPy's route for every tensor
            return "torch"
        return name

    return select


def _on_device(name, x):
    from pychop_compat.engines import from_numpy

    return from_numpy(x, name)


@pytest.mark.parametrize("name", DEVICE_PATH_ENGINES)
@pytest.mark.parametrize("mode, flip", [(5, 0), (6, 0), (1, 1), (5, 1)])
def test_device_generator_contract(device_paths, name, mode, flip):
    from pychop_compat.random.counter import seed_device

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
    from pychop_compat.random import counter as device_random

    device_random._offsets["cpu:0" if name == "torch" else "cuda:0"] = value


@pytest.mark.parametrize("name", DEVICE_PATH_ENGINES)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("start", [0, 2**64 - 5000], ids=["counter-0", "counter-wraps"])
def test_device_stochastic_rounding_follows_the_definition(device_paths, name, dtype, start):
    """Element i (row-major order) of the k-th drawing call (n elements each) after the
    counter is at ``start`` rounds |x| up exactly when u_1(start + k n + i mod 2**64)
    <= frac(|x| 2^(t-1-e)) (mode 5), or <= 1/2 (mode 6).  The input is a transposed view."""
    from pychop_compat.random.counter import seed_device

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
    from pychop_compat.random.counter import seed_device

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
    """The Python definition and the array-namespace implementation (int64 words, on NumPy,
    torch and JAX) against NumPy's uint64, across the 2**64 wrap of the counter; and the
    numbers' support and mean."""
    from pychop_compat.kernels.xp import library_namespace
    from pychop_compat.random import counter as device_random

    libraries = [name for name in ("numpy", "torch", "jax") if name in _AVAILABLE]
    if "jax" in libraries:
        import jax

        jax.config.update("jax_enable_x64", True)

    seed = 123456789
    keys = [device_random.mix64(seed + s * device_random.GOLDEN) for s in (1, 2, 3)]
    offsets = [0, 2**63 - 5, 2**64 - 40]
    for s, key in enumerate(keys, start=1):
        for offset in offsets:
            j = (offset + np.arange(64, dtype=object)) % 2**64
            want = _u(seed, s, j.astype(np.uint64))
            assert [device_random.counter_uniform(key, int(k)) for k in j] == want.tolist()
            for name in libraries:
                xp = library_namespace(name).xp
                got = to_numpy(device_random.uniform(xp, key, offset, xp.arange(64, dtype=xp.int64)))
                assert np.array_equal(got, want), (name, s, offset)
    u = _u(seed, 1, np.arange(2**20))
    assert ((u > 0) & (u < 1)).all()
    assert np.all(np.ldexp(u, 53) % 2 == 1), "odd multiples of 2**-53"
    sigma = (1 / 12 / u.size) ** 0.5
    assert abs(u.mean() - 0.5) < 5 * sigma


@pytest.mark.parametrize("name", DEVICE_PATH_ENGINES)
def test_device_deterministic_modes_ignore_generator(device_paths, name):
    from pychop_compat.random import counter as device_random

    name = device_paths(name)
    x = make_input(lookup_format("b"), "float64", seed=10)
    device_random.seed_device(0)
    for mode in (1, 2, 3, 4):
        expected = chop(x.copy(), {"format": "b", "round": mode})
        assert_bits_equal(to_numpy(chop(_on_device(name, x), {"format": "b", "round": mode})), expected, name)
    assert device_random._offsets == {}, "deterministic modes leave the counters alone"


@pytest.mark.gpu
@pytest.mark.skipif("cupy" not in _AVAILABLE or "torch-cuda" not in _AVAILABLE, reason="needs cupy and CUDA torch")
def test_torch_cuda_through_cupy_matches_pure_torch():
    """With CuPy, CUDA tensors use its kernel (DLPack); without, pure torch: the same bits, draws included."""
    import torch

    from pychop_compat.engines.dispatch import cuda_route
    from pychop_compat.random.counter import seed_device

    x = torch.from_numpy(make_input(lookup_format("q52"), "float64", seed=12, n=4000)).cuda()
    for options in ({"format": "q52", "round": 1}, {"format": "q52", "round": 5, "flip": 1}):
        seed_device(3)
        with cuda_route("cupy"):
            with_cupy = chop(x, options)
        seed_device(3)
        with cuda_route("torch"):
            without = chop(x, options)
        assert_bits_equal(to_numpy(with_cupy), to_numpy(without), str(options))


# --- the CUDA source and its compilation (no GPU needed) ---------------------------------------

def _variants():
    """Variants that between them use every branch of the generated source."""
    from pychop_compat.kernels.cuda import Variant

    for dtype in ("float32", "float64"):
        yield Variant(dtype, 1, True, True, False, "none")
        yield Variant(dtype, 4, False, False, False, "none")
        yield Variant(dtype, 5, True, True, True, "device")
        yield Variant(dtype, 6, True, False, True, "host")
        yield Variant(dtype, 2, True, False, False, "none")


def test_kernel_source_is_specialised_per_variant():
    """The CUDA source can be generated (and read) without CuPy, one per variant."""
    from pychop_compat.kernels.cuda import Variant, kernel_source

    for dtype, real in (("float32", "float"), ("float64", "double")):
        source = kernel_source(dtype)
        assert f"#define REAL {real}\n" in source and "chop_kernel" in source and "chop_classify" in source
        assert source.count("{") == source.count("}")
    sources = {kernel_source(v) for v in _variants()}
    assert len(sources) == len(list(_variants()))
    assert "#define MODE 5\n#define LIMITS 1\n#define KEEP_SUB 1\n#define FLIPS 1\n#define RANDOM 2\n" in \
        kernel_source(Variant("float64", 5, True, True, True, "device"))
    with pytest.raises(ValueError, match="random must be"):
        Variant("float64", 5, True, True, True, "gpu")


_FLOAT_FMA = re.compile(r"\b(fma|mad)\.[\w.]*f(16|32|64)\b")


def _ptx_by_nvcc(tmp_path, source, options, name="chop"):
    import shutil

    nvcc = shutil.which("nvcc")
    if nvcc is None:
        pytest.skip("no nvcc (CUDA toolkit) on this machine")
    cu = tmp_path / f"{name}.cu"
    cu.write_text(source)
    ptx = tmp_path / f"{name}.ptx"
    subprocess.run([nvcc, *options, "-ptx", "-o", str(ptx), str(cu)], check=True, capture_output=True, timeout=300)
    return ptx.read_text()


@pytest.mark.parametrize("index", range(10))
def test_kernel_ptx_has_no_ftz_and_no_fma(tmp_path, index):
    """Where CUDA's compiler is installed (no GPU needed), each variant compiles with exactly the
    options the engine hands NVRTC (``compile_options('90')``: nvcc takes the same spellings),
    and the PTX shows they took effect: every floating-point product is a separately rounded
    ``mul.rn`` (no contracted ``fma``/``mad`` where the source wrote a multiply and an add),
    and no instruction flushes subnormals (``.ftz``)."""
    from pychop_compat.kernels.cuda import compile_options, kernel_source

    variant = list(_variants())[index]
    real = "f32" if variant.dtype == "float32" else "f64"
    text = _ptx_by_nvcc(tmp_path, kernel_source(variant), compile_options("90"))
    assert ".entry chop_kernel(" in text and ".entry chop_classify(" in text
    assert f"mul.rn.{real}" in text
    assert ".ftz" not in text
    assert not _FLOAT_FMA.search(text), _FLOAT_FMA.search(text)


def test_ptx_checks_can_fail(tmp_path):
    """The checks above see what CuPy's RawKernel does: its appended ``-ftz=true`` puts ``.ftz``
    on float32 instructions, and without ``--fmad=false`` products fuse into ``fma``."""
    from pychop_compat.kernels.cuda import Variant, kernel_source

    source = kernel_source(Variant("float32", 1, True, True, False, "none"))
    flushed = _ptx_by_nvcc(tmp_path, source, ("--ftz=false", "-arch=compute_90", "-ftz=true"), "ftz")
    assert ".ftz" in flushed
    fused = _ptx_by_nvcc(tmp_path, "extern \"C\" __global__ void f(float* a, float b, float c)"
                                   " { a[0] = a[0] * b + c; }", ("-arch=compute_90",), "fma")
    assert _FLOAT_FMA.search(fused)


class _FakeNVRTC:
    """``cupy.cuda.nvrtc``'s functions, recording what they are given (PTX from nvcc if asked)."""

    def __init__(self, ptx="// fake ptx\n.entry chop_kernel(\n"):
        self.ptx, self.programs, self.compiled = ptx, [], []

    def getVersion(self):
        return (12, 9)

    def getSupportedArchs(self):
        return (75, 80, 86, 89, 90)

    def createProgram(self, source, name, headers, include_names):
        self.programs.append(source)
        return len(self.programs)

    def compileProgram(self, program, options):
        self.compiled.append(tuple(options))

    def getPTX(self, program):
        return self.ptx.encode() + b"\x00"

    def getCUBIN(self, program):
        return b"\x7fELF fake cubin"

    def getProgramLog(self, program):
        return ""

    def destroyProgram(self, program):
        pass


def _fake_cupy(nvrtc, loaded):
    """A CuPy whose only usable way to get a kernel is RawModule(path=...) (recorded in ``loaded``)."""
    import contextlib
    import types

    class Device(contextlib.nullcontext):
        def __init__(self, device_id=0):
            super().__init__(self)
            self.compute_capability = "90" if device_id == 0 else "100"

    def forbidden(*args, **kwargs):
        raise AssertionError("CuPy's compilers append -ftz=true: never used")

    class RawModule:
        reject_ptx = False

        def __init__(self, code=None, *, path=None, options=(), **kwargs):
            assert code is None and path is not None and options == () and not kwargs, (code, options, kwargs)
            if path.endswith(".cubin"):
                loaded.append(Path(path).read_bytes())
                return
            if RawModule.reject_ptx:
                raise RuntimeError("CUDA_ERROR_UNSUPPORTED_PTX_VERSION")
            loaded.append(Path(path).read_text())

        def get_function(self, name):
            return name

    return types.SimpleNamespace(RawKernel=forbidden, ElementwiseKernel=forbidden, RawModule=RawModule,
                                 cuda=types.SimpleNamespace(Device=Device, nvrtc=nvrtc, compiler=forbidden))


@pytest.fixture
def fake_cuda(monkeypatch, tmp_path):
    from pychop_compat.kernels import cuda

    nvrtc, loaded = _FakeNVRTC(), []
    fake = _fake_cupy(nvrtc, loaded)
    monkeypatch.setattr(cuda, "_cupy", lambda: fake)
    monkeypatch.setattr(cuda, "_kernel_cache", {})
    monkeypatch.setenv("PYCHOP_COMPAT_CACHE_DIR", str(tmp_path / "cache"))
    return cuda, nvrtc, loaded, tmp_path / "cache"



def test_compile_path_is_nvrtc_with_exact_options(fake_cuda):
    """The kernel is compiled by NVRTC with exactly the engine's options and the device's
    architecture (nothing appended: CuPy's RawKernel would append -ftz=true), then the PTX is
    loaded by RawModule(path=...); CuPy's compilers are never called."""
    cuda, nvrtc, loaded, _ = fake_cuda
    variant = list(_variants())[0]
    assert cuda._kernels(variant, 0) == ("chop_kernel", "chop_classify")
    assert nvrtc.programs == [cuda.kernel_source(variant)]
    assert nvrtc.compiled == [("--ftz=false", "--prec-div=true", "--prec-sqrt=true", "--fmad=false",
                               "-arch=compute_90")]
    assert not any("ftz=true" in o or "fmad=true" in o or "use_fast_math" in o for o in nvrtc.compiled[0])
    assert len(loaded) == 1 and nvrtc.ptx in loaded[0]
    # A device newer than NVRTC knows compiles for the newest architecture it does know.
    cuda._kernels(variant, 1)
    assert nvrtc.compiled[-1][-1] == "-arch=compute_90"


def test_compiled_kernels_are_cached_in_memory_and_on_disk(fake_cuda, monkeypatch):
    cuda, nvrtc, loaded, cache = fake_cuda
    variant = list(_variants())[2]
    cuda._kernels(variant, 0)
    cuda._kernels(variant, 0)
    assert len(nvrtc.compiled) == 1 and len(loaded) == 1, "in memory"
    files = list(cache.glob("*.ptx"))
    assert len(files) == 1
    monkeypatch.setattr(cuda, "_kernel_cache", {})  # a new process
    cuda._kernels(variant, 0)
    assert len(nvrtc.compiled) == 1 and len(loaded) == 2, "from disk, not compiled again"
    # The key covers the source, the options, the architecture and NVRTC's version.
    monkeypatch.setattr(cuda, "_kernel_cache", {})
    monkeypatch.setattr(nvrtc, "getVersion", lambda: (12, 8))
    cuda._kernels(variant, 0)
    assert len(nvrtc.compiled) == 2 and len(list(cache.glob("*.ptx"))) == 2


def test_corrupt_or_unwritable_cache_is_survived(fake_cuda, monkeypatch):
    import os

    cuda, nvrtc, loaded, cache = fake_cuda
    variant = list(_variants())[1]
    cuda._kernels(variant, 0)
    (path,) = cache.glob("*.ptx")
    whole = path.read_text()
    for broken in (whole[: len(whole) // 2], whole.replace("fake ptx", "fake ptX"), "\xff\xfe garbage"):
        path.write_text(broken)
        monkeypatch.setattr(cuda, "_kernel_cache", {})
        cuda._kernels(variant, 0)
        assert loaded[-1] == whole and path.read_text() == whole, "compiled again and replaced"
    compiled = len(nvrtc.compiled)
    # A cache that cannot be written: compiled, loaded from a private temporary file.
    path.unlink()
    os.chmod(cache, 0o500)
    try:
        monkeypatch.setattr(cuda, "_kernel_cache", {})
        if os.access(cache, os.W_OK):  # root ignores permissions: use a path that is a file
            monkeypatch.setenv("PYCHOP_COMPAT_CACHE_DIR", str(path.parent / "not-a-dir" / "x"))
            (path.parent / "not-a-dir").write_text("a file")
            os.chmod(cache, 0o700)
        cuda._kernels(variant, 0)
    finally:
        os.chmod(cache, 0o700)
    assert len(nvrtc.compiled) == compiled + 1 and loaded[-1] == whole


def test_a_driver_rejecting_the_ptx_gets_nvrtc_cubin(fake_cuda, monkeypatch):
    """A driver older than NVRTC's PTX version: NVRTC's CUBIN for sm_XY, with the same options."""
    cuda, nvrtc, loaded, _ = fake_cuda
    RawModule = cuda._cupy().RawModule
    monkeypatch.setattr(RawModule, "reject_ptx", True)
    cuda._kernels(list(_variants())[3], 0)
    assert nvrtc.compiled[-1] == ("--ftz=false", "--prec-div=true", "--prec-sqrt=true", "--fmad=false",
                                  "-arch=sm_90")
    assert loaded == [b"\x7fELF fake cubin"]


def test_real_nvrtc_compiles_without_ftz_or_fma():
    """Where CuPy and NVRTC are installed (no GPU needed), the engine's own compile path gives
    PTX without ``.ftz`` and without floating-point ``fma``, for the architecture it picks."""
    try:
        from cupy.cuda import nvrtc

        nvrtc.getVersion()
    except Exception as exc:  # no cupy, or no libnvrtc
        pytest.skip(f"no usable cupy.cuda.nvrtc: {exc}")
    from pychop_compat.kernels.cuda import compile_cubin, compile_ptx, device_arch, kernel_source

    arch = device_arch("90", nvrtc)
    for variant in _variants():
        ptx = compile_ptx(kernel_source(variant), arch, nvrtc)
        assert ".entry chop_kernel(" in ptx and f".target sm_{arch}" in ptx
        assert ".ftz" not in ptx and not _FLOAT_FMA.search(ptx)
    assert compile_cubin(kernel_source(variant), arch, nvrtc)[:4] == b"\x7fELF"


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

    class HostKernel:
        """A kernel of the generated source, compiled by g++; every launch checks its arguments
        against the kernel's signature, as CuPy does not: a scalar of the wrong type or order
        would be read as other bits on a GPU."""

        def __init__(self, code, name, library, symbol):
            self.signature = signature(code, name)
            self.function = getattr(library, symbol)
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

    def every_variant():
        """The kernel's whole variant space (160 sources)."""
        from pychop_compat.kernels.cuda import Variant

        for dtype, mode, limits, keep_sub, flips in itertools.product(
                ("float32", "float64"), range(1, 7), (True, False), (True, False), (True, False)):
            for random in (("none",) if mode < 5 and not flips else ("host", "device")):
                yield Variant(dtype, mode, limits, keep_sub, flips, random)

    def compile_all():
        """Every variant's source in one translation unit (one g++ run instead of 160: the
        compiler's start-up dominated), each in a namespace of its own with its entry points
        renamed to ``chop_kernel_<i>``/``chop_classify_<i>`` and its macros undefined after it."""
        from pychop_compat.kernels.cuda import kernel_source

        parts, symbols = [_HOST_SHIM], {}
        for i, variant in enumerate(every_variant()):
            code = kernel_source(variant)
            macros = sorted(set(re.findall(r"#define (\w+)", code)))
            parts.append(f"#define chop_kernel chop_kernel_{i}\n#define chop_classify chop_classify_{i}\n"
                         f"namespace variant_{i} {{\n{code}\n}}\n#undef chop_kernel\n#undef chop_classify\n"
                         + "".join(f"#undef {name}\n" for name in macros))
            symbols[code] = i
        folder = tmp_path_factory.mktemp("kernel")
        source, library = folder / "kernels.cpp", folder / "kernels.so"
        source.write_text("".join(parts))
        subprocess.run([compiler, "-O1", "-shared", "-fPIC", "-ffp-contract=off", "-fno-fast-math",
                        "-o", str(library), str(source)], check=True, capture_output=True)
        libraries["all"] = (ctypes.CDLL(str(library)), symbols)

    compiled_variants = []

    def kernels(variant, device_id):
        """What ``cuda._kernels`` returns: the variant's two entry points."""
        from pychop_compat.kernels.cuda import kernel_source

        compiled_variants.append(variant)
        code = kernel_source(variant)
        if "all" not in libraries:
            compile_all()
        library, symbols = libraries["all"]
        i = symbols[code]
        return (HostKernel(code, "chop_kernel", library, f"chop_kernel_{i}"),
                HostKernel(code, "chop_classify", library, f"chop_classify_{i}"))

    def no_compiler(*args, **kwargs):
        raise AssertionError("the device engines never compile through CuPy's compilers (they force -ftz=true)")

    return types.SimpleNamespace(
        ndarray=HostArray, RawKernel=no_compiler, ElementwiseKernel=no_compiler, RawModule=no_compiler,
        asarray=wrap(np.asarray), zeros=wrap(np.zeros),
        empty=wrap(np.empty), empty_like=wrap(np.empty_like), ascontiguousarray=wrap(np.ascontiguousarray),
        asnumpy=np.asarray, where=wrap(np.where), left_shift=wrap(np.left_shift), from_dlpack=wrap(np.from_dlpack),
        cuda=types.SimpleNamespace(Device=Device),
        HostArray=HostArray, kernels=kernels, compiled_variants=compiled_variants)


@pytest.fixture(scope="module")
def host_cupy(tmp_path_factory):
    return _host_cupy(tmp_path_factory)


@pytest.fixture
def host_kernel(host_cupy, monkeypatch):
    """CuPy's route on the stand-in (for CuPy arrays, and for every tensor off the host), with a
    kernel cache of its own (the real one stays clean for the GPU tests that may follow)."""
    from pychop_compat.engines import cupy_engine, dispatch
    from pychop_compat.kernels import cuda

    monkeypatch.setattr(cupy_engine, "_cupy", lambda: host_cupy)
    monkeypatch.setattr(cuda, "_cupy", lambda: host_cupy)
    monkeypatch.setattr(cuda, "_kernels", host_cupy.kernels)
    monkeypatch.setattr(dispatch, "cupy_for", lambda call: host_cupy)
    return host_cupy


@pytest.mark.parametrize("name, params, dtype, mode, sub, explim, flip", list(matrix()))
def test_cuda_kernel_logic_on_host(host_kernel, name, params, dtype, mode, sub, explim, flip):
    from pychop_compat.engines import cupy_engine
    from pychop_compat.random.sources import sources_for

    host_cupy = host_kernel
    fmt = custom_format(*params) if params else lookup_format(name)
    seed = zlib_seed(name, dtype, mode, sub, explim, flip)
    x = make_input(fmt, dtype, seed)
    random = mode >= 5
    randfuncs = (CountingRandfunc(seed), CountingRandfunc(seed)) if random else (None, None)
    expected, expected_after = run_numpy(x, options_for(name, params, mode, sub, explim, flip, randfuncs[0]), seed)
    settings = resolve(options_for(name, params, mode, sub, explim, flip, randfuncs[1]), None,
                       "single" if dtype == "float32" else "double")
    rng(seed)
    with cupy_engine.matlab_stream_on_device():  # flips from MATLAB's stream, as NumPy
        actual = round_array(x.copy().view(host_cupy.HostArray), settings.spec, sources_for(settings.randfunc),
                             library="cupy")
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
    spec = resolve({"format": "h", "round": mode, "flip": flip}, None, "single" if dtype == "float32" else "double").spec
    stream_before = rng().State.copy()
    cupy_engine.seed_device(5)
    first = np.asarray(round_array(x.view(host_cupy.HostArray), spec, MATLAB_STREAM, library="cupy"))
    cupy_engine.seed_device(5)
    again = np.asarray(round_array(x.view(host_cupy.HostArray), spec, MATLAB_STREAM, library="cupy"))
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
def test_torch_through_kernel_matches_pure_torch_on_host(host_kernel, device_paths_on_cpu, options, dtype):
    """A CUDA tensor with CuPy goes through DLPack to the kernel; without CuPy, the namespace
    kernel (torch operations).  Here both on CPU tensors (the kernel compiled for the host):
    the same bits, numbers made on the device included, and the input is left alone."""
    import torch

    from pychop_compat.engines.dispatch import cuda_route
    from pychop_compat.random.counter import seed_device

    x = torch.from_numpy(make_input(lookup_format(options["format"]), dtype, seed=12, n=4000))
    kept = x.clone()
    spec = resolve(options, None, "single" if dtype == "float32" else "double").spec
    results = {}
    for route, kernel in (("auto", "cuda"), ("torch", "namespace")):
        with cuda_route(route):
            assert dispatch.route(x, spec, MATLAB_STREAM).kernel.name == kernel
            seed_device(3)
            out = chop(x, options)
        assert isinstance(out, torch.Tensor) and out.dtype == x.dtype and out.shape == x.shape
        results[route] = out.numpy()
    assert_bits_equal(results["auto"], results["torch"], str(options))
    assert_bits_equal(x, kept, "input modified", nan_payloads=True)


def random_modes():
    """The points of the matrix that draw numbers, sampled as ``matrix(sample=True)`` samples (the
    rest under ``slow``; on a GPU, ``test_torch_cuda_route_matches_numpy`` takes every point)."""
    for param in matrix(sample=True):
        if param.values[3] >= 5 or param.values[6]:
            yield param


@pytest.mark.skipif("torch" not in _AVAILABLE, reason="torch not installed")
@pytest.mark.parametrize("name, params, dtype, mode, sub, explim, flip", list(random_modes()))
def test_device_numbers_give_the_same_bits_on_both_routes(host_kernel, device_paths_on_cpu, name, params, dtype,
                                                          mode, sub, explim, flip):
    """With numbers made on the device, the namespace kernel (torch operations) and the CUDA
    kernel (compiled for the host, itself checked against NumPy above) agree bit for bit on the
    matrix's inputs."""
    import torch

    from pychop_compat.engines.dispatch import cuda_route
    from pychop_compat.random.counter import seed_device

    fmt = custom_format(*params) if params else lookup_format(name)
    x = torch.from_numpy(make_input(fmt, dtype, zlib_seed(name, dtype, mode, sub, explim, flip)))
    options = options_for(name, params, mode, sub, explim, flip)
    results = []
    for route in ("auto", "torch"):  # CuPy's kernel (the stand-in), then the namespace kernel
        with cuda_route(route):
            seed_device(11)
            results.append(chop(x, options).numpy())
    assert_bits_equal(results[1], results[0], f"{name} {dtype} r{mode} s{sub} e{explim} f{flip}")


@pytest.mark.skipif("torch" not in _AVAILABLE, reason="torch not installed")
@pytest.mark.parametrize("name, params, dtype, mode, sub, explim, flip", list(matrix(sample=True)))
def test_torch_device_paths_on_cpu(device_paths_on_cpu, name, params, dtype, mode, sub, explim, flip):
    """CPU tensors take the host kernels; the route a CUDA tensor takes without CuPy (the
    namespace kernel, numbers drawn by the host in chop.m's order and scattered to the
    elements) is run here on CPU tensors, against NumPy, bit for bit, with flips from MATLAB's
    stream as the GPU engines are tested.  The default profile takes the matrix's sample (every
    format, dtype and mode), ``-m slow`` the rest; on a GPU the CUDA routes take every point."""
    from conftest import Engine
    from pychop_compat.random.sources import matlab_stream_on_device

    with matlab_stream_on_device():
        check_engine_matches_numpy(Engine("torch"), name, params, dtype, mode, sub, explim, flip)


@pytest.mark.parametrize("name", DEVICE_PATH_ENGINES)
@pytest.mark.parametrize("mode", [1, 2, 5, 6])
@pytest.mark.parametrize("host_stream", [True, False], ids=["matlab-stream", "device-numbers"])
def test_zero_dim_keeps_its_shape_on_device_paths(device_paths, name, mode, host_stream):
    """A 0-d array stays 0-d with flips, on both routes of a CUDA tensor (with MATLAB's
    stream on the host, the kernel's result was made contiguous by ascontiguousarray,
    which turns 0-d into shape (1,)), and equals NumPy when the numbers are MATLAB's."""
    import contextlib

    from pychop_compat.random.sources import matlab_stream_on_device

    name = device_paths(name)
    options = {"format": "h", "round": mode, "flip": 1, "p": 1.0}
    for dtype in ("float64", "float32"):
        x = np.array(1 / 3, dtype=dtype)
        rng(4)
        expected = chop(x.copy(), options)
        rng(4)
        with matlab_stream_on_device() if host_stream else contextlib.nullcontext():
            out = chop(_on_device(name, x), options)
        assert tuple(out.shape) == (), (name, dtype, tuple(out.shape))
        if host_stream:
            assert_bits_equal(np.asarray(to_numpy(out)), np.asarray(expected), f"{name} {dtype}")


def test_zero_dim_cupy_array_keeps_its_shape(host_kernel):
    from pychop_compat.engines import cupy_engine

    spec = resolve({"format": "h", "round": 5, "flip": 1}, None, "double").spec
    with cupy_engine.matlab_stream_on_device():
        out = round_array(np.array(1 / 3).view(host_kernel.HostArray), spec, MATLAB_STREAM, library="cupy")
    assert out.shape == ()


@pytest.mark.parametrize("options", [{"rules": "chop", "format": "float8_e4m3fn", "round": 1, "flip": 1, "p": 0.5},
                                     {"rules": "chop", "format": "float8_e8m0fnu", "round": 2},
                                     {"rules": "chop", "format": "float4_e2m1fn", "round": 5, "flip": 1}], ids=str)
@pytest.mark.parametrize("route", ["torch-device-paths", "torch-host-kernel", "cupy-host-kernel"])
def test_extended_specs_round_trip_through_the_host(request, route, options):
    """A spec beyond chop.m's semantics that no device kernel covers (bit flips on an OCP format,
    E8M0 under chop's rules) is routed to the host (a copy, the host kernels, and back): the
    NumPy engine's bits, MATLAB's stream drawn as the NumPy engine draws it."""
    from pychop_compat.random.sources import matlab_stream_on_device

    spec = resolve(options, None, "double").spec
    x = make_input(lookup_format("h"), "float64", seed=3)
    rng(7)
    expected = round_array(x.copy(), spec, MATLAB_STREAM)
    after = rand(1, 2)
    rng(7)
    with matlab_stream_on_device():
        if route == "cupy-host-kernel":
            host = request.getfixturevalue("host_kernel")
            assert dispatch.route(x.view(host.HostArray), spec, MATLAB_STREAM, library="cupy").kernel.name == "host"
            got = np.asarray(round_array(x.copy().view(host.HostArray), spec, MATLAB_STREAM, library="cupy"))
        else:
            import torch

            request.getfixturevalue("device_paths_on_cpu")
            if route == "torch-host-kernel":
                request.getfixturevalue("host_kernel")
            t = torch.from_numpy(x.copy())
            found = dispatch.route(t, spec, MATLAB_STREAM)
            assert found.kernel.name == "host", found
            assert dict(found.passed_over)["namespace"].startswith("bit flips") or spec.fmt.encoding == "e8m0"
            got = round_array(t, spec, MATLAB_STREAM).numpy()
    assert_bits_equal(got, expected, route)
    assert np.array_equal(rand(1, 2), after), "the stream advanced as the NumPy engine's"


@pytest.mark.parametrize("mode", [1, 3])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name", ["float8_e4m3fn", "float4_e2m1fn", "float8_e5m2fnuz", "float6_e3m2fn"])
def test_cupy_rounds_ocp_formats_on_the_device(host_kernel, name, dtype, mode):
    """A CuPy array (the stand-in, with NumPy as its array library) in an OCP format and a
    deterministic mode is routed to the namespace kernel, never to the host, with the NumPy
    engine's bits."""
    from pychop_compat.kernels.compiled import cpu_engine

    spec = resolve({"rules": "chop", "format": name, "round": mode}, None, "single" if dtype == "float32" else "double").spec
    x = make_input(lookup_format(name), dtype, seed=5)
    with cpu_engine("numpy"):
        expected = round_array(x.copy(), spec, MATLAB_STREAM)
    assert_bits_equal(_on_cupy_stand_in(host_kernel, x, spec), expected, f"{name} {dtype} r{mode}")


def _on_cupy_stand_in(host_kernel, x: np.ndarray, spec) -> np.ndarray:
    """The stand-in's route (asserted: the namespace kernel, not the host) and its result."""
    stand_in = x.copy().view(host_kernel.HostArray)
    found = dispatch.route(stand_in, spec, MATLAB_STREAM, library="cupy")
    assert found.kernel.name == "namespace", found
    got = round_array(stand_in, spec, MATLAB_STREAM, library="cupy")
    assert isinstance(got, host_kernel.HostArray)
    return np.asarray(got)


@pytest.mark.parametrize("mode", [-1, 1, 2, 7, 8])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name", ["float8_e4m3fn", "float4_e2m1fn", "float8_e5m2fnuz", "float8_e8m0fnu"])
def test_cupy_rounds_cpfloat_rules_on_the_device(host_kernel, monkeypatch, name, dtype, mode):
    """A CuPy array (the stand-in) under CPFloat's rules in a deterministic mode is rounded by the
    elementwise bit-pattern code, never by the NumPy engine, with the reference's bits."""
    from pychop_compat.rounding import make_spec
    from pychop_compat.rules.cpfloat import round_cpfloat

    fmt = lookup_format(name)
    spec = make_spec(fmt, mode, saturation=mode == 2)
    x = make_input(fmt, dtype, seed=6)
    # E8M0 from float32 is rounded in float64 (2^-127 lies below float32's normal range).
    wide = x.astype(np.float64) if fmt.encoding == "e8m0" else x
    expected = round_cpfloat(wide.ravel(), fmt, mode, spec.keeps_subnormals, True, spec.saturation, spec.infinity,
                             MATLAB_STREAM).reshape(x.shape).astype(x.dtype)
    assert_bits_equal(_on_cupy_stand_in(host_kernel, x, spec), expected, f"{name} {dtype} r{mode}")


@pytest.mark.parametrize("mode", [5, 6])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name", ["float8_e4m3fn", "float4_e2m1fn", "float8_e5m2fnuz"])
def test_cupy_rounds_ocp_formats_stochastically_on_the_device(host_kernel, monkeypatch, name, dtype, mode):
    """Stochastic rounding on an OCP format of a CuPy array (the stand-in) with the device's
    numbers: after ``seed_device(seed)`` element i (row-major) gets counter i, the numbers of
    ``Chop(rng=seed)``'s first call on the NumPy engine, whose bits it gives; no host call."""
    from pychop_compat import Chop
    from pychop_compat.engines import cupy_engine
    from pychop_compat.kernels.compiled import cpu_engine

    options = {"rules": "chop", "format": name, "round": mode}
    spec = resolve(options, None, "single" if dtype == "float32" else "double").spec
    x = make_input(lookup_format(name), dtype, seed=8)
    with cpu_engine("numpy"):
        expected = Chop(options, rng=29)(x.copy())
    cupy_engine.seed_device(29)
    assert_bits_equal(_on_cupy_stand_in(host_kernel, x, spec), expected, f"{name} {dtype} r{mode}")


@pytest.mark.parametrize("mode", [5, 6])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name", ["float8_e4m3fn", "float4_e2m1fn", "float8_e8m0fnu"])
def test_cupy_rounds_cpfloat_stochastic_modes_on_the_device(host_kernel, monkeypatch, name, dtype, mode):
    """CPFloat's stochastic modes on a CuPy array (the stand-in): MATLAB's stream drawn by the
    host for the inexact elements in column-major order, the rounding elementwise; the NumPy
    engine's bits from the same stream state and the stream left as it leaves it."""
    from pychop_compat.rounding import make_spec

    spec = make_spec(lookup_format(name), mode)
    x = make_input(lookup_format(name), dtype, seed=9)
    rng(12)
    expected = round_array(x.copy(), spec, MATLAB_STREAM)
    after = rand(1, 3)
    rng(12)
    assert_bits_equal(_on_cupy_stand_in(host_kernel, x, spec), expected, f"{name} {dtype} r{mode}")
    assert np.array_equal(rand(1, 3), after)


# --- CUDA tensors on every route (GPU only) ----------------------------------------------------

def _route_available(route) -> bool:
    import importlib.util

    if route == "cupy":
        return "cupy" in _AVAILABLE
    if route == "triton":
        return importlib.util.find_spec("triton") is not None
    return True


CUDA_ROUTES = [pytest.param(route, id=f"torch-cuda-{route}",
                            marks=[pytest.mark.gpu,
                                   pytest.mark.skipif("torch-cuda" not in _AVAILABLE, reason="no CUDA GPU for torch"),
                                   pytest.mark.skipif(not _route_available(route), reason=f"{route} not installed")])
               for route in ("cupy", "triton", "torch")]


@pytest.mark.parametrize("route", CUDA_ROUTES)
@pytest.mark.parametrize("name, params, dtype, mode, sub, explim, flip", list(matrix()))
def test_torch_cuda_route_matches_numpy(route, name, params, dtype, mode, sub, explim, flip):
    """Each route of a CUDA tensor (CuPy's kernel, the Triton kernel, pure torch) over the
    engine matrix, MATLAB's stream on the host, against NumPy bit for bit."""
    from conftest import Engine
    from pychop_compat.engines.dispatch import cuda_route
    from pychop_compat.random.sources import matlab_stream_on_device

    with cuda_route(route), matlab_stream_on_device():
        check_engine_matches_numpy(Engine("torch-cuda"), name, params, dtype, mode, sub, explim, flip)


@pytest.mark.parametrize("route", CUDA_ROUTES)
@pytest.mark.parametrize("name, params, dtype, mode, sub, explim, flip", list(random_modes()))
def test_torch_cuda_route_device_numbers_match_pure_torch(route, name, params, dtype, mode, sub, explim, flip):
    """With numbers made on the device, every route gives pure torch's bits (which the tests
    above check against the generator's definition)."""
    import torch

    from pychop_compat.engines.dispatch import cuda_route
    from pychop_compat.random.counter import seed_device

    fmt = custom_format(*params) if params else lookup_format(name)
    x = torch.from_numpy(make_input(fmt, dtype, zlib_seed(name, dtype, mode, sub, explim, flip))).cuda()
    options = options_for(name, params, mode, sub, explim, flip)
    results = []
    for chosen in ("torch", route):
        seed_device(23)
        with cuda_route(chosen):
            results.append(chop(x, options).cpu().numpy())
    assert_bits_equal(results[1], results[0], f"{route} {name} {dtype} r{mode} s{sub} e{explim} f{flip}")
