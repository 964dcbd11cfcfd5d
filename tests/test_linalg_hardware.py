"""LU "as on a GPU": linalg.lu(..., hardware=, block_size=), the blocked right-looking LU whose
trailing updates a block-FMA model computes, and its pass-through in lu_ir and gmres_ir.

What is checked is mathematics the docstring states: one panel is the unblocked LU; two panels are
the hand-composed steps (panel LU, triangular solve, hardware.matmul update, LU of the rest); the
factors satisfy the backward error bound; the model's extra alignment bits are observable."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from pychop_compat import chop, hardware, linalg

RNG = np.random.default_rng(2026)
HALF = {"format": "h"}
U_HALF = 2.0 ** -11


def _bits(x) -> bytes:
    """The exact bits of an array (signed zeros included)."""
    return np.ascontiguousarray(np.asarray(x, dtype=np.float64)).tobytes()


def _same_factors(F, G) -> bool:
    return _bits(F.L) == _bits(G.L) and _bits(F.U) == _bits(G.U) and np.array_equal(F.perm, G.perm) \
        and F.info == G.info


@pytest.mark.parametrize("n, block_size", [(5, None), (32, None), (12, 12), (12, 40)])
def test_one_panel_is_the_unblocked_lu_bit_for_bit(n, block_size):
    A = RNG.standard_normal((n, n))
    assert _same_factors(linalg.lu(A, "h", hardware="H100", block_size=block_size), linalg.lu(A, "h"))


def _hand_composed_two_panels(A: np.ndarray, width: int, model: hardware.BlockFMA):
    """Blocked LU of an order ``2 * width`` matrix from public calls, step by step."""
    n = A.shape[0]
    Ah = chop(A, HALF)
    # 1. the first panel (rows 0..n-1, columns 0..width-1) by the chopped elimination: lu of the
    #    panel padded with zero columns, whose steps are the panel's (the zero columns stay zero
    #    and pivot nothing: info reports them, which is not the panel's business)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", linalg.SingularMatrixWarning)
        panel = linalg.lu(np.hstack([Ah[:, :width], np.zeros((n, n - width))]), "h")
    first_order = panel.perm
    B = Ah[first_order]  # 2. the interchanges applied to the whole rows
    L11, L21, U11 = panel.L[:width, :width], panel.L[width:, :width], panel.U[:width, :width]
    # 3. U12 = L11^{-1} A12 by the chopped substitutions (U = I: the backward one changes nothing)
    U12 = linalg.solve((L11, np.eye(width), np.arange(width)), B[:width, width:], "h")
    # 4. the trailing update on the matrix units, rounded to the format
    A22 = chop(hardware.matmul(L21, U12, B[width:, width:], -1.0, 1.0, model=model).astype(np.float64), HALF)
    # the second (last) panel: the LU of the updated trailing block
    rest = linalg.lu(A22, "h")
    L = np.block([[L11, np.zeros((width, n - width))], [L21[rest.perm], rest.L]])
    U = np.block([[U11, U12], [np.zeros((n - width, width)), rest.U]])
    return L, U, np.concatenate([first_order[:width], first_order[width:][rest.perm]])


@pytest.mark.parametrize("gpu", ["H100", "V100"])
def test_two_panels_are_the_hand_composed_steps(gpu):
    width = 8
    A = RNG.standard_normal((2 * width, 2 * width))
    model = hardware.model(gpu, "fp16", "fp32")
    L, U, perm = _hand_composed_two_panels(A, width, model)
    F = linalg.lu(A, "h", hardware=model, block_size=width)
    assert _bits(F.L) == _bits(L) and _bits(F.U) == _bits(U) and np.array_equal(F.perm, perm)
    assert _same_factors(F, linalg.lu(A, "h", hardware=gpu, block_size=width))  # the name: the same model


@pytest.mark.parametrize("n, block_size", [(64, 16), (50, 8), (45, None)])
def test_factors_meet_the_backward_error_bound(n, block_size):
    A = RNG.standard_normal((n, n))
    F = linalg.lu(A, "h", hardware="H100", block_size=block_size)
    # |A_h[perm] - L U| <= gamma_n |L| |U| (Higham, Thm. 9.3); each trailing update here rounds
    # once to fp16 after a block-FMA sum in fp32, fewer roundings than the unblocked steps.
    gamma = n * U_HALF / (1 - n * U_HALF)
    residual = np.abs(chop(A, HALF)[F.perm] - F.L @ F.U)
    assert np.all(residual <= gamma * (np.abs(F.L) @ np.abs(F.U)))
    assert np.allclose(np.tril(F.L), F.L) and np.all(np.diag(F.L) == 1) and np.allclose(np.triu(F.U), F.U)
    assert F.info == 0 and sorted(F.perm.tolist()) == list(range(n))


def test_the_models_trailing_updates_change_the_factors():
    A = RNG.standard_normal((48, 48))
    blocked = linalg.lu(A, "h", hardware="H100", block_size=16)
    chopped_steps = linalg.lu(A, "h")  # every product and difference rounded to fp16
    assert not _same_factors(blocked, chopped_steps)
    # The first panel is the same: its pivots, and each original row's multipliers (later pivots,
    # which differ with the trailing updates, reorder the rows of L, not their values).
    assert np.array_equal(blocked.perm[:16], chopped_steps.perm[:16])
    assert np.array_equal(blocked.L[np.argsort(blocked.perm), :16], chopped_steps.L[np.argsort(chopped_steps.perm), :16])


def test_the_models_extra_alignment_bits_are_observable():
    # A = [[I, u], [l, 1]]: one panel of 4 columns with pivots 1 and L21 = l, U12 = u, then
    # U[4, 4] = fl16(1 - l @ u) = fl16(1 + 2**-11 + 3 * 2**-24): the products are 2**-11 and
    # three times 2**-24.  H100 aligns with 2 extra bits: the three 2**-24 add up to 2**-23 in
    # fp32, just above the fp16 midpoint 1 + 2**-11, so 1 + 2**-10.  Without extra bits (V100, or
    # rounding each product and sum to fp16) they are lost: the tie rounds to even, 1.
    u = np.array([2.0 ** -6, 2.0 ** -12, 2.0 ** -12, 2.0 ** -12])
    l = np.array([-2.0 ** -5, -2.0 ** -12, -2.0 ** -12, -2.0 ** -12])
    A = np.block([[np.eye(4), u[:, None]], [l[None, :], np.ones((1, 1))]])
    no_extra_bits = hardware.model("H100", "fp16", "fp32").replace(extra_alignment_bits=0)
    assert linalg.lu(A, "h", hardware="H100", block_size=4).U[4, 4] == 1 + 2.0 ** -10
    assert linalg.lu(A, "h", hardware=no_extra_bits, block_size=4).U[4, 4] == 1
    assert linalg.lu(A, "h", hardware="V100", block_size=4).U[4, 4] == 1
    assert linalg.lu(A, "h").U[4, 4] == 1


def test_lu_ir_with_h100_factors_converges():
    n = 40
    A = RNG.standard_normal((n, n)) + n * np.eye(n)  # well conditioned
    x_true = RNG.standard_normal(n)
    b = A @ x_true
    result = linalg.lu_ir(A, b, "h", "d", "q", hardware="H100", block_size=8)
    assert result.status == "converged" and result.converged
    assert result.backward_error[-1] <= n * 2.0 ** -53
    assert np.max(np.abs(result.x - x_true)) / np.max(np.abs(x_true)) <= 1e-12
    assert _same_factors(result.factors, linalg.lu(A, "h", hardware="H100", block_size=8))
    gmres = linalg.gmres_ir(A, b, "h", "d", "q", hardware="H100", block_size=8)
    assert gmres.status == "converged" and _same_factors(gmres.factors, result.factors)


def test_torch_tensors_give_the_numpy_bits():
    torch = pytest.importorskip("torch")
    A = RNG.standard_normal((20, 20))
    F = linalg.lu(torch.tensor(A), "h", hardware="H100", block_size=8)
    G = linalg.lu(A, "h", hardware="H100", block_size=8)
    assert isinstance(F.L, torch.Tensor) and isinstance(F.U, torch.Tensor)
    assert _bits(F.L.numpy()) == _bits(G.L) and _bits(F.U.numpy()) == _bits(G.U)
    assert np.array_equal(np.asarray(F.perm), G.perm)


@pytest.mark.parametrize("kwargs, message", [
    ({"method": "lapack"}, "method='lapack'"),
    ({"block_size": 0}, "block_size must be a positive integer"),
])
def test_hardware_refuses_what_it_cannot_go_with(kwargs, message):
    with pytest.raises(ValueError, match=message):
        linalg.lu(np.eye(3), "h", hardware="H100", **kwargs)


@pytest.mark.parametrize("options", [{"format": "h", "round": 2}, "s"])
def test_hardware_refuses_options_the_model_cannot_take(options):
    with pytest.raises(ValueError, match="hardware=|input format"):
        linalg.lu(np.eye(3), options, hardware="H100")


def test_hardware_refuses_an_unbounded_exponent():
    # explim=0 was ignored: fp16 with an unbounded exponent keeps 1e6 (999936 = fl(1e6) with 11
    # bits), but the model's fp16 inputs overflowed it to inf (and lu's factors to NaN)
    o = {"format": "h", "explim": 0}
    assert linalg.matmul(np.array([[1e6]]), np.array([[1.0]]), o)[0, 0] == 999936.0
    with pytest.raises(ValueError, match="explim=0"):
        linalg.matmul(np.array([[1e6]]), np.array([[1.0]]), o, hardware="H100")
    with pytest.raises(ValueError, match="explim=0"):
        linalg.lu(np.eye(3) * 1e5, o, hardware="H100", block_size=8)


def test_block_size_needs_hardware():
    with pytest.raises(ValueError, match="give hardware="):
        linalg.lu(np.eye(3), "h", block_size=2)


def test_a_model_with_fp16_output_keeps_the_operands_dtype():
    # fp16 output values are exact in float32: float32 operands give float32, float64 ones float64
    # (0.9 returned the model's float16 for float32 NumPy and torch data, and failed on JAX float64
    # arrays, widening float16 bits as float32).  1 + 2**-12 + 4.5 rounds to fp16's 5.5 (its
    # spacing in [4, 8) is 2**-8); the ones give 3.
    from pychop_compat.arithmetic import chopped

    m16 = hardware.model("H100", "fp16", "fp16")
    A, B = np.array([[1.0, 2.0**-12, 3.0]]), np.array([[1.0], [1.0], [1.5]])
    ones_a, ones_b = np.ones((2, 3), np.float32), np.ones((3, 2), np.float32)
    got = linalg.matmul(ones_a, ones_b, "h", hardware=m16)
    assert got.dtype == np.float32 and np.array_equal(got, np.full((2, 2), 3.0))
    got = (chopped(ones_a, "h", hardware=m16) @ chopped(ones_b, "h", hardware=m16))
    assert np.asarray(got).dtype == np.float32 and np.array_equal(np.asarray(got), np.full((2, 2), 3.0))
    got = linalg.matmul(A, B, "h", hardware=m16)
    assert got.dtype == np.float64 and got[0, 0] == 5.5
    assert linalg.matmul(A.astype(np.float32), B.astype(np.float32), "h", hardware=m16).dtype == np.float32
    torch = pytest.importorskip("torch")
    got = linalg.matmul(torch.tensor(ones_a), torch.tensor(ones_b), "h", hardware=m16)
    assert got.dtype == torch.float32 and torch.equal(got, torch.full((2, 2), 3.0))
    got = linalg.matmul(torch.tensor(A), torch.tensor(B), "h", hardware=m16)
    assert got.dtype == torch.float64 and got.item() == 5.5


def test_a_model_with_fp16_output_on_jax_float64_arrays():
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)  # float64 JAX arrays (as conftest's engines do)
    from pychop_compat.arithmetic import chopped

    m16 = hardware.model("H100", "fp16", "fp16")
    A, B = jax.numpy.asarray([[1.0, 2.0**-12, 3.0]]), jax.numpy.asarray([[1.0], [1.0], [1.5]])
    got = linalg.matmul(A, B, "h", hardware=m16)  # 1 + 2**-12 + 4.5 to fp16: 5.5
    assert got.dtype == jax.numpy.float64 and float(got[0, 0]) == 5.5
    got = linalg.matmul(A.astype(jax.numpy.float32), B.astype(jax.numpy.float32), "h", hardware=m16)
    assert got.dtype == jax.numpy.float32 and float(got[0, 0]) == 5.5
    got = (chopped(A, "h", hardware=m16) @ chopped(B, "h", hardware=m16)).values
    assert got.dtype == jax.numpy.float64 and float(got[0, 0]) == 5.5
