"""Shared test plumbing: the MATLAB corpus, MATLAB's equality rule, and the engine matrix."""

from __future__ import annotations

import os
import sys
from pathlib import Path

# The suite keeps its bytecode caches even where PYTHONDONTWRITEBYTECODE is set (as on the
# project's machines): without them every xdist worker and every subprocess a test starts
# compiles the package again and pytest rewrites the asserts of ~90 test modules again.
# Measured on 2 cores (default profile, warm Numba cache): 353 s without, 312 s with.
# Nothing returned depends on it; where the tree cannot be written, Python and pytest carry on.
sys.dont_write_bytecode = False
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)

_WORKER = os.environ.get("PYTEST_XDIST_WORKER")
if "NUMBA_CACHE_DIR" not in os.environ:
    # One Numba cache for every xdist worker, kept between runs (and out of the source tree): a
    # kernel one worker compiled, the other loads.  Sharing is safe because the package saves its
    # kernels under a lock (kernels.numba_kernels.lock_kernel_caches; without it two workers once
    # wrote two signatures under one file name in CI, "can't unbox array from PyObject").  Set
    # before anything imports Numba, which reads it at import; subprocesses inherit it.
    os.environ["NUMBA_CACHE_DIR"] = str(Path(__file__).resolve().parent.parent / ".numba_cache" / "shared")
_JAX_CACHES = Path(__file__).resolve().parent.parent / ".jax_cache"
if os.environ.get("JAX_COMPILATION_CACHE_DIR", str(_JAX_CACHES)).startswith(str(_JAX_CACHES)):  # (not the caller's own)
    # XLA's compilations are most of the JAX rows' time (the JAX tests ran in 77 s with a cold
    # cache, 22 s with a warm one): JAX's persistent compilation cache keeps every executable
    # between runs, keyed by the program, the versions and the backend, so a warm run executes
    # the same programs without compiling them again.  A directory per xdist worker: JAX writes an
    # entry without a lock, so a second process could read it half written.  (JAX takes a file
    # lock once the cache has a size limit, but then every write lists and reads the whole
    # directory to evict: tried on a fresh clone, three JAX linalg tests took about 40 s each
    # against about 10 s with a directory per worker.)
    # Read by JAX at import.  (A worker inherits the controller's setting: replaced here.)
    os.environ["JAX_COMPILATION_CACHE_DIR"] = str(_JAX_CACHES / (_WORKER or "main"))
    os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0")
    os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES", "0")
# On a GPU JAX would take 75% of its memory in each process (pytest -n 8 beside torch and CuPy): on demand.
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

import numpy as np
import pytest

if _WORKER:
    # Under `pytest -n N` on N cores every worker would start torch's own pool of N OpenMP
    # threads, which spin while they wait: two workers on two cores ran the torch-heavy files
    # 1.4 times slower.  One intra-op thread per worker (results do not depend on it: torch's
    # elementwise kernels round each element alone).
    try:
        import torch

        torch.set_num_threads(1)
    except ImportError:
        pass
    # The same for OpenBLAS/MKL: a BLAS-heavy test (the fp16 Cholesky table's SVDs) ran 9 times
    # slower with two BLAS threads per worker on two cores.  The package's rounded products never
    # call BLAS; a stored result that depended on BLAS's thread count would be a bug of its own.
    try:
        from threadpoolctl import threadpool_limits

        _BLAS_LIMIT = threadpool_limits(1, user_api="blas")
    except ImportError:
        pass

from pychop_compat.validation.corpora import load_corpus

# The MATLAB corpus is read from the copy shipped inside the package
# (pychop_compat/data/matlab_reference; one copy of the data for tests and `validate`).
MATLAB_CORPUS = load_corpus("matlab_reference")


def matlab_cases(group: str) -> list:
    """The cases of one group of the MATLAB corpus (chop, matlab_native, matlab_stream, roundit, float_params)."""
    return MATLAB_CORPUS.cases(group)


def matlab_equal(actual, expected) -> bool:
    """MATLAB's isequal with NaN == NaN: every element equal; sign of zero and NaN payloads ignored."""
    a = np.asarray(actual)
    b = np.asarray(expected)
    if a.shape != b.shape:
        return False
    both_nan = np.isnan(a) & np.isnan(b)
    return bool(np.all((a == b) | both_nan))


def assert_matlab_equal(actual, expected, context=""):
    a, b = np.asarray(actual), np.asarray(expected)
    assert a.dtype == b.dtype, f"{context}: dtype {a.dtype} != {b.dtype}"
    if not matlab_equal(a, b):
        bad = np.flatnonzero(~((a == b) | (np.isnan(a) & np.isnan(b))).ravel(order="F"))
        fa, fb = a.ravel(order="F"), b.ravel(order="F")
        sample = ", ".join(f"[{i}] got {fa[i]!r} want {fb[i]!r}" for i in bad[:5])
        raise AssertionError(f"{context}: {bad.size} of {a.size} elements differ: {sample}")


def assert_same(got, want, x, context=""):
    """Exact equality, NaN == NaN, sign of zero ignored; dtype and shape must agree."""
    got = np.asarray(got)
    assert got.dtype == want.dtype, f"{context}: dtype {got.dtype} != {want.dtype}"
    assert got.shape == want.shape, f"{context}: shape {got.shape} != {want.shape}"
    ok = (got == want) | (np.isnan(got) & np.isnan(want))
    if not ok.all():
        bad = np.flatnonzero(~ok)
        rows = "\n".join(f"  x={float(x[i])!r} ({float(x[i]).hex()}): got {float(got[i])!r}, "
                         f"want {float(want[i])!r}" for i in bad[:8])
        raise AssertionError(f"{context}: {bad.size} of {got.size} values differ:\n{rows}")


class StreamFunc:
    """options.randfunc that returns the next n numbers of a stored column, counting what it gives."""

    def __init__(self, stream):
        self.stream = np.asarray(stream, dtype=np.float64).ravel()
        self.used = 0

    def __call__(self, n):
        out = self.stream[self.used:self.used + n]
        assert out.size == n, f"randfunc asked for {n} numbers, only {self.stream.size - self.used} left"
        self.used += n
        return out.reshape(n, 1)


# --- engines: one semantics, every available engine runs the same matrix -----------------

from pychop_compat.engines import array_library, available_engines, from_numpy, to_numpy  # noqa: E402

_AVAILABLE = available_engines()


class Engine:
    """How to hand a NumPy array to an engine and read its result back (checking type and device)."""

    def __init__(self, name):
        self.name = name

    def to(self, x: np.ndarray):
        if self.name == "jax":
            import jax

            jax.config.update("jax_enable_x64", True)  # float64 arrays (JAX's default is 32-bit)
        return from_numpy(x, "numpy" if self.name == "numba" else self.name)

    def back(self, y, like):
        assert array_library(y) == array_library(like), (type(y), type(like))
        if self.name not in ("numpy", "numba"):
            assert y.device == like.device, (y.device, like.device)
        return to_numpy(y)

    def matlab_random_numbers(self):
        """GPU engines draw on the device unless told otherwise; the corpus needs MATLAB's stream.
        The NumPy rows pick their CPU engine (compiled or NumPy) for the whole test."""
        if self.name in ("numpy", "numba"):
            from pychop_compat.kernels.compiled import cpu_engine

            return cpu_engine(self.name)
        if self.name == "torch":
            # CPU tensors go to the compiled engine when Numba is there (the "numba" row
            # tests it); without it they take the torch engine's own CPU paths, tested here.
            from pychop_compat.kernels.compiled import cpu_engine

            return cpu_engine("numpy")
        if self.name in ("torch-cuda", "cupy"):
            from pychop_compat.random.sources import matlab_stream_on_device

            return matlab_stream_on_device()
        import contextlib

        return contextlib.nullcontext()

    def __repr__(self):
        return self.name


# --- the GPU tests: deselected (not skipped) where no CUDA GPU is visible ------------------------

GPU_VISIBLE = bool({"torch-cuda", "cupy"} & set(_AVAILABLE))
_GPU_DESELECTED = "pychop_compat_gpu_deselected"


def _heavy_first(items: list, workers: int) -> None:
    """Reorder ``items`` so that the tests marked ``heavy`` start first, shared among the workers.

    pytest-xdist hands tests out in collection order, and a test of a minute handed out last
    kept one worker busy while the other had finished.  Under ``--dist load`` its first hand-out
    gives each worker a run of consecutive tests (a quarter of its share), so all the heavy tests
    at the front would go to the first worker, one after another: each worker's run starts with
    its own share of them instead.  Every worker computes the same order (it must: pytest-xdist
    checks that the workers' collections are equal), and the order changes no result.
    """
    heavy, light = [], []
    for item in items:
        (light if item.get_closest_marker("heavy") is None else heavy).append(item)
    workers = max(workers, 1)
    run = max(2, len(items) // workers // 4)  # (pytest-xdist's LoadScheduling.schedule)
    order: list = []
    for worker in range(workers):
        share = heavy[worker::workers]
        fill = max(run - len(share), 0)
        order += share + light[:fill]
        light = light[fill:]
    items[:] = order + light


@pytest.hookimpl(trylast=True)  # after -m's own selection: count the gpu tests that would have run
def pytest_collection_modifyitems(config, items):
    """Without a CUDA GPU (for torch or CuPy) the tests marked ``gpu`` are deselected: they
    could only be skipped (``pytest -m gpu`` on a GPU machine runs them all).

    The tests marked ``heavy`` go first (:func:`_heavy_first`, on the tests that remain)."""
    gpu = [] if GPU_VISIBLE else [item for item in items if item.get_closest_marker("gpu") is not None]
    if gpu:
        config.hook.pytest_deselected(items=gpu)
        items[:] = [item for item in items if item.get_closest_marker("gpu") is None]
    _heavy_first(items, getattr(config, "workerinput", {}).get("workercount", 1))
    if not gpu:
        return
    setattr(config, _GPU_DESELECTED, len(gpu))
    if hasattr(config, "workeroutput"):  # a pytest-xdist worker: tell the controller
        config.workeroutput[_GPU_DESELECTED] = len(gpu)


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error):
    """pytest-xdist's controller: each worker collects every test, so any worker's count is the run's."""
    count = getattr(node, "workeroutput", {}).get(_GPU_DESELECTED)
    if count:
        setattr(node.config, _GPU_DESELECTED, count)


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    count = getattr(config, _GPU_DESELECTED, 0)
    if count:
        terminalreporter.write_line(f"{count} tests marked gpu deselected: no CUDA GPU is visible to torch or CuPy "
                                    "(on a GPU machine: pytest -m gpu)")


def _engine_param(name, reason, gpu=False):
    marks = [pytest.mark.skipif(name not in _AVAILABLE, reason=reason)]
    if gpu:
        marks.append(pytest.mark.gpu)
    return pytest.param(Engine(name), id=name, marks=marks)


ENGINES = [
    _engine_param("numpy", "numpy is always available"),
    _engine_param("numba", "numba not installed (the compiled CPU engine)"),
    _engine_param("torch", "torch not installed"),
    _engine_param("torch-cuda", "no CUDA GPU for torch", gpu=True),
    _engine_param("cupy", "no cupy with a GPU", gpu=True),
    _engine_param("jax", "jax not installed"),
]


#: The engine rows by name, for tests that take some of them (``indirect=["engine"]``).
ENGINE_ROWS = {param.id: param for param in ENGINES}


def engine_rows(*names):
    """The params of the ``engine`` fixture for these rows."""
    return [ENGINE_ROWS[name] for name in names]


@pytest.fixture(params=ENGINES)
def engine(request):
    with request.param.matlab_random_numbers():
        yield request.param


@pytest.fixture(autouse=True, scope="session")
def _compiled_engine_loaded():
    """The tests see a process that has loaded the compiled kernels, where 'auto' routes to them;
    a new process's wait before loading is tested in tests/test_first_call.py."""
    from pychop_compat.kernels import compiled

    if compiled.available():
        compiled.kernels()


@pytest.fixture(autouse=True)
def _fresh_chop():
    """Every test starts, like every corpus case, from a cleared chop and the default stream."""
    import pychop_compat

    pychop_compat.clear_chop()
    pychop_compat.rng("default")
    yield
    pychop_compat.clear_chop()


@pytest.fixture
def device_paths_on_cpu():
    """CPU tensors on the routes of a CUDA tensor for the test (the router's test hook)."""
    from pychop_compat.engines.dispatch import device_paths_on_cpu as on_device_routes

    with on_device_routes():
        yield
