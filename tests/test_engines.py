"""Every engine agrees with the NumPy engine bit for bit (torch CPU/CUDA, CuPy).

The matrix (``engine_matrix.py``): formats x rounding modes x subnormal x
explim x dtype x flip, on inputs that mix chop's boundaries (xmin, xmins,
xmax, xboundary, their halves and neighbours, ties), the carrier's own
extremes and subnormals, 0, -0, +-Inf and NaN, in 2-D arrays so that
column-major order matters.  Random modes draw from identical seeded
``randfunc``s; flips from MATLAB's stream reset by ``rng`` before each engine.
Then the torch specifics (float16/bfloat16, non-contiguous, autograd, 0-d,
empty, integers) and the lazy imports.  The GPU code paths without a GPU are
in ``test_gpu_paths.py``.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import numpy as np
import pytest

from conftest import engine_rows
from engine_matrix import (CountingRandfunc, assert_bits_equal, boundaries, check_engine_matches_numpy,
                           check_kernel_matches_rules, make_input, matrix, options_for, run_numpy, run_on_engine,
                           zlib_seed)
from pychop_compat import Chop, chop, explain, rng
from pychop_compat.engines import array_library, available_engines, to_numpy
from pychop_compat.formats import custom_format, lookup_format

_AVAILABLE = available_engines()
TORCH_ENGINES = [
    pytest.param("torch", id="torch",
                 marks=pytest.mark.skipif("torch" not in _AVAILABLE, reason="torch not installed")),
    pytest.param("torch-cuda", id="torch-cuda",
                 marks=[pytest.mark.gpu,
                        pytest.mark.skipif("torch-cuda" not in _AVAILABLE, reason="no CUDA GPU for torch")]),
]


# --- the matrix on every engine ---------------------------------------------------------------
#
# The rows whose arithmetic differs take the whole matrix: "numpy" (the NumPy engine against
# the executable specification, rules/chop.py), "numba" (the compiled engine against the NumPy
# engine), and on a GPU "torch-cuda" and "cupy".  The namespace kernel on torch CPU tensors and
# the CUDA kernel's logic are in test_gpu_paths.py, the namespace kernel on NumPy in
# test_namespace_kernel_on_numpy_matches_the_rules below.
#
# The CPU wrapper rows only hand their arrays to kernels tested in full: a CPU tensor's memory
# to the NumPy engine (under the row's cpu_engine('numpy')), a JAX array to the namespace kernel
# (deterministic modes without flips) or to the host engines (numbers drawn by the host in
# chop.m's order).  They run a sample of the matrix in the default profile (the rest under
# ``pytest -m slow``), and every point's route is asserted, in every profile.

FULL_ROWS = engine_rows("numpy", "numba", "torch-cuda", "cupy")
WRAPPER_ROWS = engine_rows("torch", "jax")


def wrapper_route(engine_name, mode, flip):
    """The kernel a wrapper row's array reaches for options with this mode and flip."""
    if engine_name == "torch":
        return "numpy"  # the CPU tensor's memory, read in place (the row's cpu_engine('numpy'))
    return "namespace" if mode <= 4 and not flip else "host"


@pytest.mark.parametrize("engine", FULL_ROWS, indirect=True)
@pytest.mark.parametrize("name, params, dtype, mode, sub, explim, flip", list(matrix()))
def test_engine_matches_numpy(engine, name, params, dtype, mode, sub, explim, flip):
    check_engine_matches_numpy(engine, name, params, dtype, mode, sub, explim, flip)


@pytest.mark.parametrize("engine", WRAPPER_ROWS, indirect=True)
@pytest.mark.parametrize("name, params, dtype, mode, sub, explim, flip", list(matrix(sample=True)))
def test_wrapper_row_matches_numpy(engine, name, params, dtype, mode, sub, explim, flip):
    fmt = custom_format(*params) if params else lookup_format(name)
    x = engine.to(make_input(fmt, dtype, seed=1))
    options = options_for(name, params, mode, sub, explim, flip, CountingRandfunc(1) if mode >= 5 else None)
    assert explain(x, options).kernel == wrapper_route(engine.name, mode, flip)
    check_engine_matches_numpy(engine, name, params, dtype, mode, sub, explim, flip)


@pytest.mark.parametrize("engine", WRAPPER_ROWS, indirect=True)
def test_wrapper_rows_route_every_point_to_a_kernel_tested_in_full(engine):
    """The route of every point of the matrix (the default profile runs only a sample of them):
    a torch CPU tensor to the NumPy engine; a JAX array to the namespace kernel, or to the host
    copy that the compiled engine rounds (``numba`` row) or, under cpu_engine('numpy'), the
    NumPy engine."""
    from pychop_compat.kernels.compiled import available as numba_available
    from pychop_compat.kernels.compiled import cpu_engine

    for param in matrix():
        name, params, dtype, mode, sub, explim, flip = param.values
        fmt = custom_format(*params) if params else lookup_format(name)
        x = make_input(fmt, dtype, seed=1)
        options = options_for(name, params, mode, sub, explim, flip, CountingRandfunc(1) if mode >= 5 else None)
        found = explain(engine.to(x), options)
        want = wrapper_route(engine.name, mode, flip)
        assert found.kernel == want, (param.id, found.kernel, want)
        if want == "host":  # the host copy goes where a NumPy array goes
            assert explain(x, options).kernel == ("numba" if numba_available() else "numpy"), param.id
            with cpu_engine("numpy"):
                assert explain(x, options).kernel == "numpy", param.id


@pytest.mark.parametrize("name, params, dtype, mode, sub, explim, flip", list(matrix()))
def test_namespace_kernel_on_numpy_matches_the_rules(name, params, dtype, mode, sub, explim, flip):
    """The namespace kernel (kernels/elementwise.py) on NumPy arrays, numbers drawn by the host
    in chop.m's order: chop.m's algorithm's bits (rules/chop.py), the same draws from randfunc,
    MATLAB's stream moved the same way, the input left alone."""
    check_kernel_matches_rules("namespace", name, params, dtype, mode, sub, explim, flip)


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
    specials = boundaries(fmt, dtype)
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
    expected, expected_after = run_numpy(x, options, seed=7)
    actual, after = run_on_engine(engine, x, options, seed=7)
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

    from pychop_compat.random.sources import matlab_stream_on_device

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
        expected, _ = run_numpy(view(base), options, seed=2)
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
    # The straight-through estimator (documented): in the graph, derivative 1.
    assert out.requires_grad and out.grad_fn is not None
    assert_bits_equal(to_numpy(out.detach()), expected, "requires_grad")
    weights = torch.arange(leaf.numel(), dtype=leaf.dtype, device=leaf.device).reshape(leaf.shape)
    (out * weights).sum().backward()
    assert torch.equal(leaf.grad, weights)  # d/dx sum(w * x) = w, passed through chop unchanged
    with torch.no_grad():
        assert not chop(leaf, options).requires_grad


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
    assert_bits_equal(x, before, f"mode {mode}: input modified", nan_payloads=True)


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


def test_engines_report_their_library(engine):
    x = np.linspace(-1, 1, 12).reshape(3, 4)
    xe = engine.to(x)
    out = chop(xe, {"format": "h"})
    library = "numpy" if engine.name == "numba" else engine.name.split("-")[0]  # numba: NumPy arrays
    assert array_library(out) == array_library(xe) == library
    assert to_numpy(out).dtype == np.float64
