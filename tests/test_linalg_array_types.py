"""linalg keeps torch tensors and JAX arrays: same kind, dtype and device out, and bit for bit the
results of NumPy input (the same sequence of chop calls and random draws)."""

from __future__ import annotations

import numpy as np
import pytest

from pychop_compat import linalg, rng

torch = pytest.importorskip("torch")


def _problem(dtype):
    gen = np.random.default_rng(2)
    A = (gen.standard_normal((8, 8)) + 8 * np.eye(8)).astype(dtype)
    return A, gen.standard_normal(8).astype(dtype)


def _same(got, want, like):
    assert isinstance(got, torch.Tensor) and got.device == like.device
    assert got.dtype == like.dtype if np.asarray(want).dtype.kind == "f" else True
    np.testing.assert_array_equal(got.numpy(), want)
    assert np.asarray(want).dtype == got.numpy().dtype


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("options", [{"format": "h"}, {"format": "b", "round": 5}], ids=["h", "b-sr"])
def test_kernels_and_lu_keep_torch_tensors(dtype, options):
    A, b = _problem(dtype)
    At, bt = torch.from_numpy(A.copy()), torch.from_numpy(b.copy())
    for name, args in (("matmul", (A, A)), ("matvec", (A, b)), ("dot", (b, b))):
        rng(5)
        want = getattr(linalg, name)(*args, options)
        rng(5)
        tensors = [torch.from_numpy(np.array(a)) for a in args]
        _same(getattr(linalg, name)(*tensors, options), want, tensors[0])
    rng(5)
    F = linalg.lu(A, options)
    x = linalg.solve(F, b, options)
    rng(5)
    Ft = linalg.lu(At, options)
    xt = linalg.solve(Ft, bt, options)
    for got, want in ((Ft.L, F.L), (Ft.U, F.U), (xt, x)):
        _same(got, want, At)
    np.testing.assert_array_equal(Ft.perm.numpy(), F.perm)
    assert Ft.singular == F.singular
    np.testing.assert_array_equal(At.numpy(), A)  # inputs unchanged


@pytest.mark.parametrize("solver", ["lu_ir", "gmres_ir"])
def test_refinement_keeps_torch_tensors(solver):
    A, b = _problem(np.float64)
    want = getattr(linalg, solver)(A, b, uf="h")
    got = getattr(linalg, solver)(torch.from_numpy(A), torch.from_numpy(b), uf="h")
    assert got.converged == want.converged and got.status == want.status
    _same(got.x, want.x, torch.from_numpy(A))
    _same(got.factors.U, want.factors.U, torch.from_numpy(A))
    assert got.backward_error == want.backward_error


def test_jax_arrays_come_back_as_jax():
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    A, b = _problem(np.float64)
    got = linalg.matvec(jax.numpy.asarray(A), jax.numpy.asarray(b), "h")
    assert isinstance(got, jax.Array) and got.dtype == np.float64
    np.testing.assert_array_equal(np.asarray(got), linalg.matvec(A, b, "h"))
    with pytest.raises(TypeError, match="mix"):
        linalg.matvec(jax.numpy.asarray(A), torch.from_numpy(b), "h")


@pytest.mark.parametrize("library", ["torch", "jax"])
def test_lu_permutation_matrix_keeps_the_library(library):
    """LUResult.P used NumPy's ``perm.size`` (a method on torch tensors) and gave NumPy for JAX; the
    oracle is the definition: P has a 1 at (i, perm[i]), so P @ A is A[perm]."""
    A = np.array([[1.0, 2.0, 0.0], [3.0, 4.0, 1.0], [0.0, 5.0, 6.0]])
    if library == "torch":
        arr, kind = torch.from_numpy(A.copy()), torch.Tensor
    else:
        jax = pytest.importorskip("jax")
        jax.config.update("jax_enable_x64", True)
        arr, kind = jax.numpy.asarray(A), jax.Array
    F = linalg.lu(arr, "h")
    P = F.P
    assert isinstance(P, kind) and str(P.dtype).endswith("float64")  # as NumPy input gives
    perm = np.asarray(F.perm)
    want = np.zeros((3, 3))
    for i, j in enumerate(perm):
        want[i, j] = 1.0
    np.testing.assert_array_equal(np.asarray(P), want)
    np.testing.assert_array_equal(np.asarray(P) @ A, A[perm])
    assert sorted(perm.tolist()) == [0, 1, 2] and perm.tolist() != [0, 1, 2]  # a real row exchange


def test_norm_and_cond_read_tensors_that_require_grad():
    # ||A||_1 = 4 and inv(A) = [[0.6, -0.2], [-0.2, 0.4]], ||inv(A)||_1 = 0.8 (0.6.0: torch's error)
    torch = pytest.importorskip("torch")
    A = torch.tensor([[2.0, 1.0], [1.0, 3.0]], dtype=torch.float64, requires_grad=True)
    assert linalg.norm(A, 1) == 4.0 and linalg.cond(A, 1, "exact") == 4.0 * 0.8


@pytest.mark.parametrize("fmt", ["s", "d"])
def test_lapack_lu_keeps_float32(fmt):
    # method='lapack' gave float64 factors for float32 input (NumPy and torch) while the chopped
    # path keeps float32. float32 data is factorized in single (sgetrf), as the chopped path
    # computes on it: the oracle is SciPy's LAPACK on the float32 matrix itself.
    import scipy.linalg

    A, _ = _problem(np.float32)
    P, L, U = scipy.linalg.lu(A)
    for data in (A, torch.from_numpy(A.copy())):
        F = linalg.lu(data, fmt, method="lapack")
        for got, want in ((F.L, L), (F.U, U)):
            got = got.numpy() if isinstance(got, torch.Tensor) else got
            assert got.dtype == np.float32
            np.testing.assert_array_equal(got, want)
        assert (F.U.dtype == torch.float32) if isinstance(data, torch.Tensor) else True
    F64 = linalg.lu(A.astype(np.float64), "s", method="lapack")
    assert F64.U.dtype == np.float64 and np.array_equal(F64.U, U)  # double input: as before
