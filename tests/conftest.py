"""Shared test plumbing: corpus loading, MATLAB's equality rule, and the engine matrix."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest
import scipy.io

CORPUS = Path(__file__).parent / "matlab_reference"


def load_mat(path) -> dict:
    return {k: v for k, v in scipy.io.loadmat(path).items() if not k.startswith("__")}


def manifest(group: str = "") -> list:
    return json.loads((CORPUS / group / "manifest.json").read_text())


def matlab_string(value) -> str:
    return str(value[0]) if np.size(value) else ""


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

def _torch_available() -> bool:
    return importlib.util.find_spec("torch") is not None


def _cupy_gpu_available() -> bool:
    if importlib.util.find_spec("cupy") is None:
        return False
    try:
        import cupy

        return cupy.cuda.runtime.getDeviceCount() > 0
    except Exception:
        return False


def _torch_cuda_available() -> bool:
    if not _torch_available():
        return False
    import torch

    return torch.cuda.is_available()


class Engine:
    """How to hand an array to an engine and read the result back as NumPy."""

    def __init__(self, name):
        self.name = name

    def to(self, x: np.ndarray):
        if self.name == "numpy":
            return x
        if self.name.startswith("torch"):
            import torch

            t = torch.from_numpy(np.ascontiguousarray(x).copy())
            return t.cuda() if self.name == "torch-cuda" else t
        import cupy

        return cupy.asarray(x)

    def back(self, y, like):
        if self.name == "numpy":
            assert isinstance(y, np.ndarray)
            return y
        if self.name.startswith("torch"):
            import torch

            assert isinstance(y, torch.Tensor), type(y)
            assert y.device == like.device, (y.device, like.device)
            return y.cpu().numpy()
        import cupy

        assert isinstance(y, cupy.ndarray)
        return cupy.asnumpy(y)

    def __repr__(self):
        return self.name


ENGINES = [
    pytest.param(Engine("numpy"), id="numpy"),
    pytest.param(Engine("torch"), id="torch",
                 marks=pytest.mark.skipif(not _torch_available(), reason="torch not installed")),
    pytest.param(Engine("torch-cuda"), id="torch-cuda",
                 marks=[pytest.mark.gpu, pytest.mark.skipif(not _torch_cuda_available(), reason="no CUDA GPU for torch")]),
    pytest.param(Engine("cupy"), id="cupy",
                 marks=[pytest.mark.gpu, pytest.mark.skipif(not _cupy_gpu_available(), reason="no cupy with a GPU")]),
]


@pytest.fixture(params=ENGINES)
def engine(request):
    return request.param


@pytest.fixture(autouse=True)
def _fresh_chop():
    """Every test starts, like every corpus case, from a cleared chop and the default stream."""
    import pychop_compat

    pychop_compat.clear_chop()
    pychop_compat.rng("default")
    yield
    pychop_compat.clear_chop()
