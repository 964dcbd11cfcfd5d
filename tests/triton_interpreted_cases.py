"""The Triton kernel's logic on CPU tensors, by Triton's interpreter.

Run by ``test_triton_kernel.py`` in a subprocess with ``TRITON_INTERPRET=1``
(Triton picks its interpreter when it is imported).  CPU tensors take the
route of a CUDA tensor without CuPy (``engines.dispatch.device_paths_on_cpu``): bit for bit equal to the NumPy engine
over the engine matrix (deterministic modes), and to pure torch with numbers
made on the device (stochastic rounding; ``test_gpu_paths.py`` checks those
against the generator's definition).  By hand::

    TRITON_INTERPRET=1 python -m pytest tests/triton_interpreted_cases.py
"""

from __future__ import annotations

import os

import numpy as np
import pytest

if os.environ.get("TRITON_INTERPRET") != "1":
    pytest.skip("needs TRITON_INTERPRET=1 (run through test_triton_kernel.py)", allow_module_level=True)

from engine_matrix import assert_bits_equal, make_input, matrix, options_for, zlib_seed  # noqa: E402
from pychop_compat import chop  # noqa: E402
from pychop_compat.formats import custom_format, lookup_format  # noqa: E402

triton = pytest.importorskip("triton")
torch = pytest.importorskip("torch")


@pytest.fixture
def triton_route(monkeypatch, device_paths_on_cpu):
    """CPU tensors on the route of a CUDA tensor without CuPy, the Triton kernel interpreted;
    returns the list of its launches (so a test knows that the kernel ran)."""
    from pychop_compat.kernels import triton_kernel

    monkeypatch.setenv("TRITON_INTERPRET", "1")
    triton_kernel.build_kernel.cache_clear()
    launches = []
    original = triton_kernel.chop_regular

    def counting(*args, **kwargs):
        launches.append(args[2].round)
        return original(*args, **kwargs)

    monkeypatch.setattr(triton_kernel, "chop_regular", counting)
    yield launches
    triton_kernel.build_kernel.cache_clear()


def _no_flips():
    for param in matrix(sample=True):  # the points outside the sample marked slow
        if not param.values[6]:
            yield param


@pytest.mark.parametrize("name, params, dtype, mode, sub, explim, flip", list(_no_flips()))
def test_triton_kernel_matches_numpy_and_torch(triton_route, name, params, dtype, mode, sub, explim, flip):
    from pychop_compat.engines.dispatch import cuda_route
    from pychop_compat.random.counter import seed_device

    fmt = custom_format(*params) if params else lookup_format(name)
    x = make_input(fmt, dtype, zlib_seed(name, dtype, mode, sub, explim, flip))
    options = options_for(name, params, mode, sub, explim, flip)
    context = f"{name} {dtype} r{mode} s{sub} e{explim}"
    if mode <= 4:
        expected = chop(x.copy(), options)
    else:  # numbers made on the device: the namespace kernel is the reference (checked against the definition)
        seed_device(17)
        with cuda_route("torch"):
            expected = chop(torch.from_numpy(x.copy()), options).numpy()
    seed_device(17)
    with cuda_route("triton"):
        got = chop(torch.from_numpy(x.copy()), options)
    assert triton_route == [mode], "the Triton kernel ran once"
    assert got.dtype == torch.float32 if dtype == "float32" else torch.float64
    assert_bits_equal(got.numpy(), expected, context)


def test_triton_kernel_regular_only_input_is_one_pass(triton_route, monkeypatch):
    """Input with only regular elements, zeros and values below xmin (fp16 keeps subnormals:
    the kernel rounds them): the namespace kernel never runs; with values it leaves (Inf, past
    the overflow threshold), only those go to it."""
    from pychop_compat.engines import dispatch
    from pychop_compat.engines.dispatch import cuda_route

    calls = []
    general = dispatch.chop_elementwise
    monkeypatch.setattr(dispatch, "chop_elementwise",
                        lambda ns, v, *a, **k: calls.append(v.numel()) or general(ns, v, *a, **k))
    x = np.linspace(0.5, 1000.0, 3001)
    with cuda_route("triton"):
        got = chop(torch.from_numpy(x.copy()), {"format": "h"}).numpy()
    assert_bits_equal(got, x.astype(np.float16).astype(np.float64), "fp16 by NumPy's cast")
    assert calls == []
    x[[5, 17, 18, 19]] = [0.0, 1e-9, -3e-8, 2.0 ** -25 * (1 + 2.0 ** -9)]
    with cuda_route("triton"):
        got = chop(torch.from_numpy(x.copy()), {"format": "h"}).numpy()
    assert_bits_equal(got, x.astype(np.float16).astype(np.float64), "fp16 by NumPy's cast")
    assert calls == []
    x[[7, 9]] = [np.inf, 7e4]
    with cuda_route("triton"):
        got = chop(torch.from_numpy(x.copy()), {"format": "h"}).numpy()
    assert_bits_equal(got, x.astype(np.float16).astype(np.float64), "fp16 by NumPy's cast")
    assert calls == [2]
