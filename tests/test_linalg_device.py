"""linalg on the device: torch tensors and JAX arrays are computed with their own library's
operations and engines (the code written once against linalg/arrays.py), and give NumPy's results
bit for bit.

Oracle: the NumPy path of the same function on the same data (itself checked against the MATLAB
corpus and exact arithmetic in test_linalg.py).  Every kernel makes the same chop calls, in the
same order, on arrays of the same shapes, with the same IEEE operations between them, so
deterministic rounding must agree bit for bit; torch CPU tensors and concrete JAX arrays draw
stochastic rounding from MATLAB's stream in chop.m's order, as NumPy does, so they agree too.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from pychop_compat import linalg, rng

torch = pytest.importorskip("torch")

FORMATS = [
    pytest.param({"format": "h"}, id="h-rn"),
    pytest.param({"format": "b", "round": 2}, id="b-up"),
    pytest.param({"format": "s", "round": 3}, id="s-down"),
    pytest.param({"format": "q43", "round": 4}, id="q43-zero"),
]
DTYPES = [np.float64, np.float32]
METHODS = ["recursive", "fma", "pairwise", "blocked"]


def _jax():
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)  # float64 arrays (JAX's default is 32-bit)
    return jax


def _to(library, a):
    if library == "torch":
        return torch.from_numpy(np.array(a))
    return _jax().numpy.asarray(np.array(a))


def _check(got, want, library, like=None):
    """Same bits, dtype and library; on the input's device."""
    if library == "torch":
        assert isinstance(got, torch.Tensor)
        assert got.device == (like.device if like is not None else torch.device("cpu"))
        assert not got.requires_grad
    else:
        assert isinstance(got, _jax().Array)
    host = np.asarray(got.numpy() if library == "torch" else got)
    want = np.asarray(want)
    assert host.dtype == want.dtype and host.shape == want.shape
    np.testing.assert_array_equal(host, want)


def _problem(dtype, n=7, seed=4):
    g = np.random.default_rng(seed)
    A = (g.standard_normal((n, n)) + n * np.eye(n)).astype(dtype)
    return A, g.standard_normal((n, 5)).astype(dtype), g.standard_normal(n).astype(dtype)


LIBRARIES = ["torch", "jax"]


def _points(*axes, jax_point=0):
    """pytest params for ``library`` times the product of ``axes`` (lists of pytest.param or
    values).  Every torch point runs by default; JAX pays an XLA compilation per operation (the
    code is the one torch runs), so the default profile runs one JAX point, the ``jax_point``-th
    point of the product's diagonal (each test names another, so that formats, dtypes, methods
    and solvers vary across tests), and the others under -m slow."""
    def unpack(value):
        return (value.values, value.id) if hasattr(value, "values") else ((value,), getattr(value, "__name__", str(value)))

    for library in LIBRARIES:
        for indices in itertools.product(*(range(len(axis)) for axis in axes)):
            values, ids = [], [library]
            for axis, i in zip(axes, indices):
                v, label = unpack(axis[i])
                values.extend(v)
                ids.append(label)
            diagonal = all(i % len(axis) == indices[0] % len(axis) for axis, i in zip(axes, indices))
            slow = library == "jax" and not (diagonal and indices[0] == jax_point)  # jax_point None: all
            yield pytest.param(library, *values, id="-".join(ids), marks=[pytest.mark.slow] if slow else [])


# (JAX's products run by default in the stochastic-rounding and LU tests below; the other JAX
# points of the products, of matvec/dot and of the jitted recursive steps under -m slow.)
@pytest.mark.parametrize("library, method, options, dtype", list(_points(METHODS, FORMATS, DTYPES, jax_point=None)))
def test_matmul_every_method_is_the_numpy_path(library, dtype, options, method):
    A, B, _ = _problem(dtype)
    A = A[:, :6] * 3.7  # non-square, with a product that rounds
    B = B[:6]
    for accumulate in (None, "s"):
        want = linalg.matmul(A, B, options, method=method, accumulate=accumulate, block_size=4)
        got = linalg.matmul(_to(library, A), _to(library, B), options, method=method, accumulate=accumulate,
                            block_size=4)
        _check(got, want, library)


@pytest.mark.parametrize("library, options, dtype", [p for p in _points(FORMATS, DTYPES, jax_point=None)
                                                     if p.values[0] == "jax"])
def test_jax_compiled_recursive_steps_are_the_numpy_path(library, dtype, options):
    """From JAX_JIT_STEPS inner terms JAX's recursive step runs under jax.jit: same bits
    (an unrounded product is left eager: XLA would contract it into an FMA)."""
    from pychop_compat.linalg.products import JAX_JIT_STEPS

    g = np.random.default_rng(5)
    A = (g.standard_normal((4, JAX_JIT_STEPS + 3)) * 3.3).astype(dtype)
    B = g.standard_normal((JAX_JIT_STEPS + 3, 3)).astype(dtype)
    for method, accumulate in (("recursive", None), ("fma", None), ("recursive", "s")):
        want = linalg.matmul(A, B, options, method=method, accumulate=accumulate)
        got = linalg.matmul(_to("jax", A), _to("jax", B), options, method=method, accumulate=accumulate)
        _check(got, want, "jax")


@pytest.mark.parametrize("library", LIBRARIES)
def test_plain_double_sums_in_order(library):
    """Format 'd' on double data rounds nothing: the recursive sum is sequential (as NumPy's
    np.add.accumulate), compared with the NumPy path and with math.fsum-free left-to-right sums."""
    x = np.array([1.0, 2.0**-53, 2.0**-53, -1.0])
    ones = np.ones(4)
    got = linalg.dot(_to(library, x), _to(library, ones), "d")
    _check(got, linalg.dot(x, ones, "d"), library)
    assert float(got) == ((1.0 + 2.0**-53) + 2.0**-53) - 1.0 == 0.0  # left to right, ties to even


@pytest.mark.parametrize("library, options, dtype", list(_points(FORMATS, DTYPES, jax_point=None)))
def test_matvec_and_dot_are_the_numpy_path(library, dtype, options):
    A, _, b = _problem(dtype)
    _check(linalg.matvec(_to(library, A), _to(library, b), options, method="pairwise"),
           linalg.matvec(A, b, options, method="pairwise"), library)
    _check(linalg.dot(_to(library, b), _to(library, b * 1.3), options),
           linalg.dot(b, b * 1.3, options), library)


@pytest.mark.parametrize("library, options, dtype", list(_points(FORMATS, DTYPES, jax_point=3)))
def test_lu_and_solve_are_the_numpy_path(library, dtype, options):
    A, B, b = _problem(dtype, n=8)
    A[0, 0] = 0.01  # pivoting happens
    F = linalg.lu(A, options)
    Fd = linalg.lu(_to(library, A), options)
    _check(Fd.L, F.L, library)
    _check(Fd.U, F.U, library)
    np.testing.assert_array_equal(np.asarray(Fd.perm), F.perm)
    assert Fd.info == F.info and not F.singular and not Fd.singular
    _check(linalg.solve(Fd, _to(library, b), options), linalg.solve(F, b, options), library)
    _check(linalg.solve(_to(library, A), _to(library, B), options), linalg.solve(A, B, options), library)
    # factors as a tuple with a MATLAB permutation matrix, P A = L U
    _check(linalg.solve((Fd.L, Fd.U, _to(library, F.P)), _to(library, b), options),
           linalg.solve((F.L, F.U, F.P), b, options), library)


@pytest.mark.parametrize("library", LIBRARIES)
def test_lu_keeps_a_negative_zero_multiplier_as_numpy_does(library):
    """L's strictly lower part holds the multipliers as computed: -0 / 2 is -0 in IEEE arithmetic
    (format 'd' rounds nothing), on every library (a sign that assert_array_equal would not see)."""
    A = np.array([[2.0, 1.0], [-0.0, 1.0]])
    want = linalg.lu(A, "d").L
    assert np.signbit(want[1, 0]) and want[1, 0] == 0
    got = np.asarray(linalg.lu(_to(library, A), "d").L)
    np.testing.assert_array_equal(np.signbit(got), np.signbit(want))
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("library, kwargs, solver", list(_points([
    pytest.param({}, id="h-d-q"),
    pytest.param({"ur": "s", "stop": "change"}, id="ur-single-change"),
    pytest.param({"uf": "b", "u": "s", "ur": "d", "x_true": "given"}, id="b-s-d"),
], ["lu_ir", "gmres_ir"], jax_point=1)))
def test_refinement_is_the_numpy_path(library, solver, kwargs):
    A, _, b = _problem(np.float64, n=10, seed=9)
    A[:, 0] *= 1e3  # kappa large enough for several steps
    kwargs = dict(kwargs)
    device_kwargs = dict(kwargs)
    if kwargs.get("x_true") == "given":
        xt = np.linalg.solve(A, b)
        kwargs["x_true"], device_kwargs["x_true"] = xt, _to(library, xt)
    want = getattr(linalg, solver)(A, b, **kwargs)
    got = getattr(linalg, solver)(_to(library, A), _to(library, b), **device_kwargs)
    assert want.iterations >= 1
    _check(got.x, want.x, library)
    _check(got.factors.U, want.factors.U, library)
    assert (got.status, got.converged, got.gmres_iterations) == (want.status, want.converged,
                                                                  want.gmres_iterations)
    assert got.backward_error == want.backward_error
    assert got.changes == want.changes and got.forward_error == want.forward_error
    # |A||x| is the library's matrix-vector product (BLAS order): equal to rounding error only
    np.testing.assert_allclose(got.componentwise_error, want.componentwise_error, rtol=1e-13, atol=0)


@pytest.mark.parametrize("library", LIBRARIES)
def test_stochastic_rounding_draws_matlabs_stream_as_numpy_does(library):
    """CPU tensors and concrete JAX arrays: MATLAB's stream, chop.m's order (the contract)."""
    A, B, b = _problem(np.float64)
    options = {"format": "b", "round": 5}
    # JAX compiles each method's operations: two of the four methods (torch runs all) by default
    for method in METHODS if library == "torch" else METHODS[::2]:
        rng(11)
        want = linalg.matmul(A, B, options, method=method, block_size=3)
        rng(11)
        _check(linalg.matmul(_to(library, A), _to(library, B), options, method=method, block_size=3), want,
               library)
    rng(12)
    F = linalg.lu(A, {"format": "h", "round": 6})
    x = linalg.solve(F, b, {"format": "h", "round": 6})
    rng(12)
    Fd = linalg.lu(_to(library, A), {"format": "h", "round": 6})
    _check(Fd.U, F.U, library)
    _check(linalg.solve(Fd, _to(library, b), {"format": "h", "round": 6}), x, library)


def test_the_device_path_rounds_on_the_torch_engine(monkeypatch):
    """No host round trip: chop never rounds a NumPy array, and the NumPy kernels of linalg are
    never called, for tensors (the tensors themselves are rounded, on their own memory)."""
    from pychop_compat.engines import dispatch
    from pychop_compat.linalg import products

    A, B, b = _problem(np.float64)
    want = linalg.matmul(A, B, "h"), linalg.lu(A, "h").U, linalg.gmres_ir(A, b).x

    def refuse(*args, **kwargs):
        raise AssertionError("the host path was used")

    round_array = dispatch.round_array

    def tensors_only(x, *args, **kwargs):
        if isinstance(x, np.ndarray):
            refuse()
        return round_array(x, *args, **kwargs)

    monkeypatch.setattr(dispatch, "round_array", tensors_only)
    monkeypatch.setattr(products, "_compiled_product", refuse)
    At, Bt, bt = (torch.from_numpy(v) for v in (A, B, b))
    _check(linalg.matmul(At, Bt, "h"), want[0], "torch")
    _check(linalg.lu(At, "h").U, want[1], "torch")
    _check(linalg.gmres_ir(At, bt).x, want[2], "torch")  # u = 'd': GMRES's host scalars are not rounded


def test_inputs_are_not_modified_and_autograd_is_left_alone():
    A, B, b = _problem(np.float64)
    At = torch.from_numpy(A.copy()).requires_grad_(True)
    bt = torch.from_numpy(b.copy())
    C = linalg.matmul(At, bt, "h")
    F = linalg.lu(At, "h")
    x = linalg.solve(F, bt, "h")
    assert not (C.requires_grad or F.L.requires_grad or x.requires_grad)
    np.testing.assert_array_equal(At.detach().numpy(), A)
    np.testing.assert_array_equal(bt.numpy(), b)


def test_host_route_for_lapack_and_scaling_keeps_the_type():
    A, _, b = _problem(np.float64)
    F = linalg.lu(torch.from_numpy(A), "s", method="lapack")
    _check(F.U, linalg.lu(A, "s", method="lapack").U, "torch")
    res = linalg.lu_ir(torch.from_numpy(A), torch.from_numpy(b), scaling="g")
    _check(res.x, linalg.lu_ir(A, b, scaling="g").x, "torch")


def test_mixed_libraries_are_refused():
    A, _, b = _problem(np.float64)
    with pytest.raises(TypeError, match="mix"):
        linalg.matvec(_to("jax", A), torch.from_numpy(b), "h")


def test_numpy_operands_join_the_device_array():
    A, _, b = _problem(np.float64)
    _check(linalg.matvec(A, torch.from_numpy(b), "h"), linalg.matvec(A, b, "h"), "torch")


def test_jax_division_by_a_scalar_is_ieee():
    """XLA on the CPU rewrites x / scalar (a few quotients per hundred differ from IEEE division);
    the namespace divides arrays of equal shapes instead."""
    jax = _jax()
    from pychop_compat.linalg.arrays import arrays_for

    g = np.random.default_rng(0)
    for dtype in DTYPES:
        a = g.standard_normal(4000).astype(dtype)
        c = dtype(g.standard_normal())
        arrays = arrays_for(jax.numpy.asarray(a))
        got = np.asarray(arrays.divide(jax.numpy.asarray(a), jax.numpy.asarray(c)))
        np.testing.assert_array_equal(got, a / c)  # NumPy's division is IEEE division


# -- GPUs: marked gpu (deselected where torch and CuPy see no CUDA device; run by pytest -m gpu) -------

def _cuda_libraries():
    out = []
    if torch.cuda.is_available():
        out.append("torch-cuda")
    try:
        import cupy

        if cupy.cuda.runtime.getDeviceCount() > 0:
            out.append("cupy")
    except Exception:  # cupy missing, or no driver or device
        pass
    return out


@pytest.mark.gpu
@pytest.mark.parametrize("library", ["torch-cuda", "cupy"])
@pytest.mark.parametrize("dtype", DTYPES)
def test_gpu_arrays_stay_on_the_gpu_and_match_numpy(library, dtype):
    if library not in _cuda_libraries():
        pytest.skip(f"no CUDA device for {library}")
    A, B, b = _problem(dtype)
    if library == "torch-cuda":
        dev = [torch.from_numpy(v).cuda() for v in (A, B, b)]

        def host(v):
            assert isinstance(v, torch.Tensor) and v.is_cuda
            return v.cpu().numpy()
    else:
        import cupy

        dev = [cupy.asarray(v) for v in (A, B, b)]

        def host(v):
            assert isinstance(v, cupy.ndarray)
            return cupy.asnumpy(v)
    for method in METHODS:
        np.testing.assert_array_equal(host(linalg.matmul(dev[0], dev[1], "h", method=method)),
                                      linalg.matmul(A, B, "h", method=method))
    F, Fd = linalg.lu(A, "h"), linalg.lu(dev[0], "h")
    np.testing.assert_array_equal(host(Fd.U), F.U)
    np.testing.assert_array_equal(host(linalg.solve(Fd, dev[2], "h")), linalg.solve(F, b, "h"))
    if dtype == np.float64:
        np.testing.assert_array_equal(host(linalg.gmres_ir(dev[0], dev[2]).x), linalg.gmres_ir(A, b).x)


@pytest.mark.slow  # a run of the benchmark script: CI's slow step
def test_device_benchmark_smoke_run():
    """benchmarks/bench_linalg_device.py prints one row per (n, library); no timing is asserted."""
    import subprocess
    import sys
    from pathlib import Path

    script = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_linalg_device.py"
    out = subprocess.run([sys.executable, str(script), "--sizes", "16", "--repeats", "1", "--lu",
                          "--libraries", "numpy", "torch"], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    rows = [line for line in out.stdout.splitlines() if line.startswith("| 16 |")]
    assert [row.split("|")[2].strip() for row in rows] == ["numpy", "torch"], out.stdout
    assert all(row.count("|") == 7 and row.split("|")[6].strip() != "-" for row in rows)
