"""Chopped torch tensors (CPU here; the same code runs on any device through chop's torch engine).

Expected values: hand-written chop calls on tensors (chop's torch engine is
checked against the NumPy engine and the MATLAB corpus elsewhere), torch's
float32 -> float16 cast, and the derivative of a linear function.
"""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import pychop_compat  # noqa: E402
from pychop_compat import Chop, chopped  # noqa: E402
from pychop_compat.arithmetic import FormatMismatchError, NotChoppedError  # noqa: E402


def same(got, want):
    got = got.values if hasattr(got, "values") and not isinstance(got, np.ndarray) else got
    assert type(got) is torch.Tensor and type(want) is torch.Tensor
    assert got.dtype == want.dtype and got.device == want.device and got.shape == want.shape
    assert torch.equal(got, want) or bool(torch.all((got == want) | (got.isnan() & want.isnan())))


def test_construction_rounds_like_half_cast_and_keeps_dtype_device():
    x = torch.randn(1000, dtype=torch.float32) * 100
    X = chopped(x, "h")
    assert isinstance(X, torch.Tensor) and X.dtype == torch.float32 and X.device == x.device
    same(X, x.half().float())  # float32 -> float16 is one correct rounding


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_elementwise_equal_hand_chopped(dtype):
    ch = Chop(format="b")
    a = ch(torch.randn(6, 4, dtype=dtype))
    b = ch(torch.randn(6, 4, dtype=dtype) + 3)
    keep = a.clone()
    A, B = chopped(a, "b"), chopped(b, "b")
    same(A + B, ch(a + b))
    same(A * B - 1.5, ch(ch(a * b) - 1.5))
    same(A / B, ch(a / b))
    same(torch.sqrt(B.abs()), ch(torch.sqrt(b.abs())))
    same(torch.exp(A), ch(torch.exp(a)))
    same(-A, -a)
    same(A ** 2, ch(a ** 2))
    same(A.reshape(4, 6)[1:3], a.reshape(4, 6)[1:3])
    assert torch.equal(a, keep)
    cmp = A > B
    assert type(cmp) is torch.Tensor and cmp.dtype == torch.bool


def test_same_numbers_as_numpy_chopped_arrays():
    x = np.random.default_rng(0).standard_normal((5, 5))
    y = chopped(x, "q43")
    t = chopped(torch.from_numpy(x), "q43")
    np.testing.assert_array_equal((t * t + t / 3).values.numpy(), (y * y + y / 3).values)


def test_stochastic_rounding_draws_as_chop():
    o = {"format": "h", "round": 5}
    ch = Chop(o)
    x, y = torch.randn(20, dtype=torch.float64), torch.randn(20, dtype=torch.float64)
    pychop_compat.rng(4)
    want = ch(ch(ch(x) * ch(y)) + 0.25)
    pychop_compat.rng(4)
    got = chopped(x, o) * chopped(y, o) + 0.25
    same(got, want)


def test_autograd_straight_through():
    x = torch.randn(8, dtype=torch.float64, requires_grad=True)
    y = chopped(x, "h") * 3.0 + 1.0
    y.backward(torch.ones(8, dtype=torch.float64))
    # d/dx (3x + 1) = 3, each rounding passing the gradient through unchanged
    assert torch.equal(x.grad, torch.full((8,), 3.0, dtype=torch.float64))


def test_in_place_arithmetic_rounds():
    ch = Chop(format="h")
    a = ch(torch.randn(5, dtype=torch.float64))
    A = chopped(a, "h")
    A += 0.1
    same(A, ch(a + 0.1))


def test_sums_and_products_equal_numpy_chopped_arrays():
    from pychop_compat import linalg

    ch = Chop(format="h")
    a, b = ch(torch.randn(6, 9, dtype=torch.float64)), ch(torch.randn(9, 4, dtype=torch.float64))
    A, B = chopped(a, "h"), chopped(b, "h")
    na = chopped(a.numpy(), "h")
    same(A @ B, torch.from_numpy(linalg.matmul(a.numpy(), b.numpy(), "h")))
    same(torch.matmul(A, B[:, 0]), torch.from_numpy(linalg.matvec(a.numpy(), b[:, 0].numpy(), "h")))
    same(A.sum(), torch.tensor(na.sum().value, dtype=torch.float64))
    same(A.sum(dim=0), torch.from_numpy(na.sum(axis=0).values))
    same(torch.mean(A, 1, keepdim=True), torch.from_numpy(na.mean(axis=1, keepdims=True).values))
    same(A.cumsum(1), torch.from_numpy(np.cumsum(na, axis=1).values))
    same(chopped(torch.ones(4096), "h").sum(), torch.tensor(2048.0))  # fp16 recursive summation stagnates


def test_inner_contracts_the_last_axes_of_both_operands():
    # torch.inner(a, b)[i, j] = sum_k a[i, k] b[j, k] (a @ b.T); integers below 2^11 are exact in
    # fp16, so the chopped result equals the exact one.  (0.6.0 computed a @ b here.)
    a = torch.tensor([[1.0, 2.0], [3.0, 4.0]], dtype=torch.float64)
    b = torch.tensor([[1.0, 0.0], [1.0, 1.0]], dtype=torch.float64)
    same(torch.inner(chopped(a, "h"), chopped(b, "h")), torch.tensor([[1.0, 3.0], [3.0, 7.0]], dtype=torch.float64))
    ch = Chop(format="h")
    x, y = ch(torch.randn(4, 7, dtype=torch.float64)), ch(torch.randn(3, 7, dtype=torch.float64))
    same(torch.inner(chopped(x, "h"), chopped(y, "h")),
         torch.from_numpy(np.inner(chopped(x.numpy(), "h"), chopped(y.numpy(), "h")).values))
    same(torch.inner(chopped(x[0], "h"), chopped(y[0], "h")),
         torch.tensor(np.inner(chopped(x[0].numpy(), "h"), chopped(y[0].numpy(), "h")).value, dtype=torch.float64))


def test_product_gradients_straight_through():
    ch = Chop(format="h")
    a, b = ch(torch.randn(3, 5, dtype=torch.float64)), ch(torch.randn(5, 2, dtype=torch.float64))
    leaf = a.clone().requires_grad_(True)
    (chopped(leaf, "h") @ chopped(b, "h")).sum().backward()
    # d/dA sum(A B) = ones @ B^T: each row is the row sums of B
    assert torch.equal(leaf.grad, b.sum(dim=1).expand(3, 5))


def test_unimplemented_and_mismatch_raise():
    A = chopped(torch.randn(3, 3), "h")
    for func in (lambda: torch.linalg.inv(A), lambda: torch.softmax(A, 0), lambda: A.var(),
                 lambda: torch.einsum("ij,jk->ik", A, A)):
        with pytest.raises(NotChoppedError):
            func()
    with pytest.raises(FormatMismatchError, match=r"'h'.*'b'"):
        A + chopped(torch.randn(3, 3), "b")


def test_in_place_arithmetic_keeps_the_autograd_graph():
    # Straight-through, as out of place: d/dx (3x) = 3 and d/dx (x + 3x) = 4.  (In-place operations
    # used to copy their values back under no_grad, leaving the graph of the old values: grad 1.)
    x = torch.tensor([1.0, 2.0], dtype=torch.float64, requires_grad=True)
    y = chopped(x * 1, "h")
    y.mul_(3)
    y.sum().backward()
    assert torch.equal(x.grad, torch.full((2,), 3.0, dtype=torch.float64))
    x.grad = None
    y = chopped(x * 1, "h")
    y += 3 * y
    y.sum().backward()
    assert torch.equal(x.grad, torch.full((2,), 4.0, dtype=torch.float64))
    x.grad = None
    y = chopped(x * 1, "h")
    y.log_()  # d/dx log x = 1/x: backward reads x, not the overwritten tensor
    y.sum().backward()
    assert torch.equal(x.grad, torch.tensor([1.0, 0.5], dtype=torch.float64))
    ch = Chop(format="h")
    same(y, ch(torch.log(torch.tensor([1.0, 2.0], dtype=torch.float64))))


def test_plain_values_entering_a_chopped_tensor_are_rounded():
    # As the chopped NumPy array stores plain values (c[i] = v, np.clip, np.concatenate) and rounds
    # np.round's result: fp16(0.1) = 0.0999755859375 and fp16(2.7) = 2.69921875 (NumPy's float64 ->
    # float16 cast is one correct rounding).
    h = float(np.float16(0.1))
    ct = chopped(torch.tensor([0.0, 2.7], dtype=torch.float64), "h")
    same(torch.clamp(ct, min=0.1), torch.tensor([h, float(np.float16(2.7))], dtype=torch.float64))
    d = ct.clone()
    d[0] = 0.1
    assert d.tolist() == [h, float(np.float16(2.7))]
    d[1] = torch.tensor(2049)  # integers too: 2049 is a tie between fp16's 2048 and 2050, to even
    assert d.tolist() == [h, 2048.0]
    same(torch.cat([ct, torch.tensor([0.1], dtype=torch.float64)]),
         torch.tensor([0.0, float(np.float16(2.7)), h], dtype=torch.float64))
    same(torch.round(ct, decimals=1), torch.tensor([0.0, float(np.float16(2.7))], dtype=torch.float64))


def test_int_bounds_entering_a_chopped_tensor_are_rounded_as_float_bounds():
    # A Python int or an int tensor as clamp's bound (keyword or positional), where's value or
    # maximum's operand enters the result rounded, as the float 2049.0 does (and as np.clip of a
    # chopped array): fp16(2049) = 2048 and fp16(4097) = 4096 (ties to even; NumPy's cast).
    lo, hi = float(np.float16(2049)), float(np.float16(4097))
    assert (lo, hi) == (2048.0, 4096.0)
    ct = chopped(torch.tensor([0.0, 5000.0], dtype=torch.float64), "h")
    want = torch.tensor([lo, hi], dtype=torch.float64)
    for bound_lo, bound_hi in ((2049, 4097), (torch.tensor(2049), torch.tensor(4097)), (2049.0, 4097.0)):
        same(torch.clamp(ct, min=bound_lo, max=bound_hi), want)
        same(torch.clamp(ct, bound_lo, bound_hi), want)
        same(torch.clip(ct, bound_lo, bound_hi), want)
        same(ct.clamp_min(bound_lo).clamp_max(bound_hi), want)
        d = ct.clone()
        assert d.clamp_(bound_lo, bound_hi) is d  # in place: the target itself holds the rounded bounds
        same(d, want)
    same(torch.where(ct > 1, ct, 2049), torch.tensor([lo, 5000.0], dtype=torch.float64))
    same(torch.maximum(ct, torch.tensor([2049, 0])), torch.tensor([lo, 5000.0], dtype=torch.float64))
    same(ct, torch.tensor([0.0, 5000.0], dtype=torch.float64))  # the operand is not modified


def test_values_of_another_format_are_rounded_by_max_min_clamp_and_cat():
    # Under mismatch='left' an fp16 result holds fp16 values: fp32(1/3) = 0.3333333432674408 enters
    # rounded to fp16 = 0.333251953125 (NumPy's casts), as in the chopped NumPy array's np.maximum.
    ta = chopped(torch.tensor([1 / 3], dtype=torch.float64), "h", mismatch="left")
    tb = chopped(torch.tensor([1 / 3], dtype=torch.float64), "s")
    h = float(np.float16(np.float32(1 / 3)))
    assert h == 0.333251953125
    want = torch.tensor([h], dtype=torch.float64)
    for got in (torch.maximum(ta, tb), torch.fmax(ta, tb), torch.clamp(ta, min=tb), ta.clamp_min(tb)):
        same(got, want)
    same(torch.cat([ta, tb]), torch.tensor([h, h], dtype=torch.float64))
    same(torch.stack([ta, tb]), torch.tensor([[h], [h]], dtype=torch.float64))
    same(tb, torch.tensor([float(np.float32(1 / 3))], dtype=torch.float64))  # the operand is not modified


def test_refused_in_place_functions_write_nothing():
    # An in-place function outside the module's lists raises before it runs: the tensor keeps its values
    # (0.7.x had written 1/3, 0.1 ... unrounded before raising).  clamp_min_/clamp_max_ round their bound as
    # clamp_min does: fp16(2049) = 2048, fp16(4097) = 4096 (ties to even; NumPy's cast).
    start = torch.tensor([1.0, 3.0], dtype=torch.float64)
    for func in (lambda u: u.fill_(1 / 3), lambda u: u.copy_(torch.tensor([1 / 3, 0.1], dtype=torch.float64)),
                 lambda u: u.masked_fill_(u > 0, 0.1), lambda u: u.zero_()):
        u = chopped(start.clone(), "h")
        with pytest.raises(NotChoppedError):
            func(u)
        same(u, start)
    u = chopped(start.clone(), "h")
    assert u.clamp_min_(2049) is u
    same(u, torch.tensor([float(np.float16(2049))] * 2, dtype=torch.float64))
    assert u.clamp_max_(torch.tensor(2047.5)) is u and u.tolist() == [float(np.float16(2047.5))] * 2


def test_reflected_division_and_rsub_round_once():
    # 1.0 / t and torch.rsub(t, v) = v - t are rounded once, as 2 - t: oracle chop of the plain operation.
    x = torch.tensor([1.0, 3.0, 7.0], dtype=torch.float64)
    ch, t = Chop(format="h"), chopped(x, "h")
    same(1.0 / t, ch(1.0 / x))
    same(torch.rsub(t, 0.1), ch(0.1 - x))
    same(torch.rsub(t, 0.1, alpha=3), ch(0.1 - 3 * x))
    assert (1.0 / t)[1].item() == float(np.float16(1 / 3))


def test_pickle_and_deepcopy_round_trip():
    # As chopped NumPy arrays pickle: values (fp16(0.1) = 0.0999755859375, NumPy's cast), dtype, format,
    # settings and requires_grad come back, and the copy still rounds (0.1 * 3 in fp16 by hand).
    import copy
    import pickle

    t = chopped(torch.tensor([0.1, 3.0], dtype=torch.float32), "h", mismatch="left").requires_grad_()
    for u in (pickle.loads(pickle.dumps(t)), copy.deepcopy(t)):
        same(u, torch.tensor([float(np.float16(0.1)), 3.0], dtype=torch.float32))
        assert u.requires_grad and u.is_leaf and u.arithmetic.mismatch == "left"
        assert u.arithmetic.same_rounding(t.arithmetic)
        same(u * 3, Chop(format="h")(torch.tensor([float(np.float16(0.1)) * 3, 9.0], dtype=torch.float32)))


def test_chopped_scalars_with_chopped_tensors():
    # As with chopped NumPy and JAX arrays: a chopped scalar enters as its value (fp16(0.3) = 0.300048828125,
    # NumPy's cast), the result rounded once (oracle: chop of the plain operation), in the tensor's dtype.
    x = torch.tensor([1.0, 3.0], dtype=torch.float32)
    ch, t, s = Chop(format="h"), chopped(x, "h"), chopped(0.3, "h")
    v = float(np.float16(0.3))
    same(s * t, ch(v * x))
    same(t + s, ch(x + v))
    same(s - t, ch(v - x))
    same(s / t, ch(v / x))
    same(torch.clamp(t, max=s), ch(torch.clamp(x, max=v)))
    with pytest.raises(FormatMismatchError):
        t * chopped(0.3, "s")


def test_strict_rounds_python_ints_and_keyword_operands():
    # strict: chop(1 + chop(2049)) = chop(1 + 2048) = 2048 (fp16 has 11 significand bits), as NumPy's
    s = chopped(torch.tensor([1.0], dtype=torch.float64), "h", strict=True)
    assert (s + 2049).tolist() == [2048.0]
    assert torch.add(s, other=torch.tensor([2049.0], dtype=torch.float64)).tolist() == [2048.0]
    assert (chopped(np.array([1.0]), "h", strict=True) + 2049).tolist() == [2048.0]


def test_functions_returning_named_tuples_keep_the_names():
    ct = chopped(torch.tensor([[3.0, 1.0], [2.0, 5.0]], dtype=torch.float64), "h")
    assert torch.sort(ct).indices.tolist() == [[1, 0], [0, 1]]
    assert torch.max(ct, dim=1).values.tolist() == [3.0, 5.0]
    top = torch.topk(ct, 1)
    assert top.indices.tolist() == [[0], [1]] and isinstance(top.values, type(ct))


def test_fma_says_that_it_does_not_take_chopped_tensors():
    from pychop_compat.arithmetic import fma

    t = chopped(torch.tensor([1.5], dtype=torch.float64), "h")
    with pytest.raises(TypeError, match="torch"):
        fma(t, t, t)


def test_out_holds_the_rounded_result_and_a_plain_out_is_refused():
    # As the chopped NumPy array's out=: fp16(1.1) = 1.099609375, fp16(2.1) = 2.099609375 (NumPy's cast).
    t = chopped(torch.tensor([1.0, 2.0], dtype=torch.float64), "h")
    want = torch.tensor([float(np.float16(1.1)), float(np.float16(2.1))], dtype=torch.float64)
    o = chopped(torch.zeros(2, dtype=torch.float64), "h")
    assert torch.add(t, 0.1, out=o) is o
    same(o, want)
    joined = chopped(torch.zeros(3, dtype=torch.float64), "h")
    torch.cat([t, torch.tensor([0.1], dtype=torch.float64)], out=joined)
    same(joined, torch.tensor([1.0, 2.0, float(np.float16(0.1))], dtype=torch.float64))
    plain = torch.zeros(2, dtype=torch.float64)
    with pytest.raises(NotChoppedError, match="out="):
        torch.add(t, 0.1, out=plain)
    assert torch.equal(plain, torch.zeros(2, dtype=torch.float64))  # nothing written


@pytest.mark.parametrize("dtype,fmt", [(torch.float32, "h"), (torch.float32, "s"), (torch.float64, "d")])
def test_square_roots_are_correctly_rounded(dtype, fmt):
    # torch's CPU sqrt is not correctly rounded (float32: 0.24987793 in fp16 gives 0.5; float64 too, checked
    # with mpmath); NumPy's IEEE sqrt of the stored values, chopped by hand, is:
    # sqrt(fp16(0.24987793)) = 0.49987...,  fp16 of it 0.499755859375.
    ch = Chop(format=fmt)
    x = ch(torch.from_numpy(np.random.default_rng(7).random(3000) * 10.0 ** np.arange(-4, 4).repeat(375)).to(dtype))
    x = torch.cat([x, ch(torch.tensor([0.24987793, 0.0, -0.0, float("inf"), -1.0], dtype=dtype))])
    with np.errstate(invalid="ignore"):
        want = ch(torch.from_numpy(np.sqrt(x.numpy())))
    c = chopped(x, fmt)
    for got in (c.sqrt(), torch.sqrt(c), c ** 0.5, torch.pow(c, 0.5)):
        same(got, want)
    if fmt == "h":
        assert c.sqrt()[3000].item() == 0.499755859375


@pytest.mark.parametrize("mismatch", ["wider", "left"])
def test_in_place_arithmetic_stores_a_result_of_another_format_in_the_targets(mismatch):
    # Under 'wider' the sum of an 'h' and an 's' tensor is an 's' value; written into the 'h' target in
    # place it must be an 'h' value, as NumPy's += stores it (under 'left' the sum is rounded to 'h' once).
    a = chopped(torch.tensor([1 / 3], dtype=torch.float64), "h", mismatch=mismatch)
    b = chopped(torch.tensor([1 / 7], dtype=torch.float64), "s", mismatch=mismatch)
    exact_sum = float(np.float16(1 / 3)) + float(np.float32(1 / 7))  # (exact in double)
    expected = float(np.float16(np.float32(exact_sum) if mismatch == "wider" else exact_sum))
    a.add_(b)
    numpy_target = chopped(np.array([1 / 3]), "h", mismatch=mismatch)
    numpy_target += chopped(np.array([1 / 7]), "s", mismatch=mismatch)
    assert float(a.as_subclass(torch.Tensor)[0]) == expected == float(numpy_target.values[0])


def test_requires_grad_and_parameter_give_leaves_whose_grad_is_filled():
    # torch's rules: t.requires_grad_() returns t itself, a leaf; nn.Parameter(t) is a leaf.  Gradients
    # pass straight through: d/dw sum(2w) = 2; an SGD step (lr 0.1, d/dp sum(3p) = 3) stores fp16(1 - 0.3)
    # = fp16(0.7) (NumPy's cast).  (A re-wrapped alias, grad_fn AliasBackward0, had lost its .grad.)
    c = chopped(torch.zeros(3, dtype=torch.float64), "h")
    w = c.requires_grad_()
    assert w is c and w.is_leaf and w.grad_fn is None
    (w * 2).sum().backward()
    same(w.grad, torch.full((3,), 2.0, dtype=torch.float64))
    p = torch.nn.Parameter(chopped(torch.ones(3, dtype=torch.float64), "h"))
    assert p.is_leaf and p.requires_grad and isinstance(p, torch.nn.Parameter) and type(p) is type(c)
    (p * 3).sum().backward()
    same(p.grad, torch.full((3,), 3.0, dtype=torch.float64))
    torch.optim.SGD([p], lr=0.1).step()
    same(p, torch.full((3,), float(np.float16(0.7)), dtype=torch.float64))
    lin = torch.nn.Linear(3, 1)
    lin.weight = weight = torch.nn.Parameter(chopped(torch.ones(1, 3), "h"))
    assert lin.weight is weight


def test_chopped_scalar_on_the_left_brings_its_mismatch_rule():
    # The first chopped operand's rule applies, as with chopped NumPy arrays (the oracle): s * t and s + t
    # under s's mismatch='left' compute in 'h'; under s's 'error' they raise.  (torch hands t.__rmul__(s) to
    # __torch_function__ as mul(t, s), which had applied t's rule.)
    v = [0.3, 0.7]
    x, a = torch.tensor(v, dtype=torch.float64), np.array(v)
    s = chopped(0.1, "h", mismatch="left")
    same(s * chopped(x, "b"), torch.from_numpy((s * chopped(a, "b")).values))
    same(s + chopped(x, "b"), torch.from_numpy((s + chopped(a, "b")).values))
    s2 = chopped(0.1, "h")
    for op in (lambda u, w: u + w, lambda u, w: u * w):
        with pytest.raises(FormatMismatchError):
            op(s2, chopped(a, "b", mismatch="left"))
        with pytest.raises(FormatMismatchError):
            op(s2, chopped(x, "b", mismatch="left"))


def test_strict_rounds_integer_tensors():
    # strict: chop(0.5 + chop(2049)) = chop(0.5 + 2048) = 2048 (fp16 has 11 significand bits; unrounded,
    # 2049.5 gives 2050), as NumPy's strict does with an integer array; the result keeps the tensor's dtype.
    assert (chopped(np.array([0.5]), "h", strict=True) + np.array([2049])).tolist() == [2048.0]
    for dtype in (torch.float32, torch.float64):
        s = chopped(torch.tensor([0.5], dtype=dtype), "h", strict=True)
        same(s + torch.tensor([2049]), torch.tensor([2048.0], dtype=dtype))
        same(torch.add(s, other=torch.tensor([2049], dtype=torch.int32)), torch.tensor([2048.0], dtype=dtype))


def test_classes_of_arithmetics_no_longer_used_are_freed():
    # Each deep copy, unpickling and chopped(t) with the persistent options makes another arithmetic and its
    # class: gone with its last tensor (2000 deep copies had kept 2000 classes, 12 MB), while a live
    # tensor's class keeps rounding (fp16(0.1) * 3 by hand).
    import copy
    import gc
    import pickle
    import weakref

    t = chopped(torch.tensor([0.1], dtype=torch.float64), "h")
    refs = [weakref.ref(type(u)) for u in (copy.deepcopy(t), pickle.loads(pickle.dumps(t)),
                                           chopped(torch.ones(2)), copy.deepcopy(t) * 2)]
    kept = copy.deepcopy(t)
    gc.collect()
    assert [r() for r in refs] == [None] * 4
    assert type(kept * 3) is type(kept)
    same(kept * 3, Chop(format="h")(torch.tensor([float(np.float16(0.1)) * 3], dtype=torch.float64)))


def test_in_place_arithmetic_on_a_plain_target_is_refused():
    # As NumPy's a += chopped_array: a plain target would leave the simulation silently; nothing is written.
    with pytest.raises(NotChoppedError):
        a = np.ones(3)
        a += chopped(np.array([0.1, 0.2, 0.3]), "h")
    ct = chopped(torch.tensor([0.1, 0.2, 0.3], dtype=torch.float64), "h")
    t = torch.ones(3, dtype=torch.float64)
    for func in (lambda u: u.__iadd__(ct), lambda u: u.add_(ct), lambda u: u.mul_(ct)):
        with pytest.raises(NotChoppedError):
            func(t)
        assert type(t) is torch.Tensor and torch.equal(t, torch.ones(3, dtype=torch.float64))
    with pytest.raises(NotChoppedError):
        t += ct
