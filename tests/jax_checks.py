"""Checks of the JAX engine and chopped JAX arrays, run by test_arithmetic_jax.py in a subprocess
(JAX starts threads, and other tests fork: a forked child of a JAX process may deadlock).

Expected values: the NumPy engine's chop (checked against the MATLAB corpus
elsewhere) on the same inputs, and hand-written chop calls.
"""

from __future__ import annotations

import sys

import numpy as np
import pytest

import jax
import jax.numpy as jnp

import pychop_compat
from pychop_compat import Chop, chopped, linalg
from pychop_compat.arithmetic import Arithmetic, NotChoppedError
from pychop_compat.arithmetic.jax_array import einsum, random_draws
from pychop_compat import chop_jax
from pychop_compat.matlab.options import resolve

jax.config.update("jax_enable_x64", True)


def inputs(dtype):
    rng = np.random.default_rng(0)
    x = rng.standard_normal(20000) * np.exp2(rng.integers(-40, 40, 20000))
    specials = [0.0, -0.0, np.inf, -np.inf, np.nan, 65504.0, 65520.0, 2.0**-25, 1.5 * 2.0**-25,
                2.0**-24, 3 * 2.0**-26, 240.0, 248.0, 3.4e38]
    with np.errstate(over="ignore"):
        return np.concatenate([x, specials, -np.array(specials)]).astype(dtype)


def test_jax_engine_equals_numpy_engine(dtype):
    """Every format, deterministic mode and subnormal setting; jit on a few (compiling is slow)."""
    x = inputs(dtype)
    xj = jnp.asarray(x)
    for fmt in ["h", "b", "q43", "q52", "s", {"format": "c", "params": [5, 7]}]:
        for mode in [1, 2, 3, 4]:
            for subnormal in [0, 1]:
                o = dict(fmt) if isinstance(fmt, dict) else {"format": fmt}
                o.update(round=mode, subnormal=subnormal)
                want = Chop(o)(x)
                spec = resolve(o, None, "single" if dtype == np.float32 else "double").spec
                jit = mode == 1 and subnormal == 1
                run = jax.jit(lambda v: chop_jax(v, spec)) if jit else (lambda v: chop_jax(v, spec))
                got = np.asarray(run(xj))
                assert got.dtype == want.dtype
                assert np.array_equal(got, want, equal_nan=True), (o, dtype)


def test_chopped_jax_arrays_under_jit_equal_hand_chopped():
    ch = Chop(format="b")
    a, b = ch(np.random.default_rng(1).standard_normal(50)), ch(np.random.default_rng(2).standard_normal(50))

    @jax.jit
    def step(x, y):
        return (x * y + 0.5) / 3 - x.apply(jnp.exp)

    got = step(chopped(jnp.asarray(a), "b"), chopped(jnp.asarray(b), "b"))
    want = ch(ch(ch(ch(a * b) + 0.5) / 3) - ch(np.exp(a)))
    np.testing.assert_array_equal(np.asarray(got.values), want)


def test_chopped_jax_sum_equals_numpy_chopped_sum():
    x = np.random.default_rng(3).standard_normal((300, 4))
    want = chopped(x, "h").sum(axis=0).values
    got = jax.jit(lambda c: c.sum(axis=0))(chopped(jnp.asarray(x), "h"))
    np.testing.assert_array_equal(np.asarray(got.values), want)
    ones = chopped(jnp.ones(4096), "h").sum()
    assert float(ones.values) == 2048.0  # fp16 recursive summation stagnates at 2048


def test_chopped_jax_refuses_what_it_cannot_round():
    x = chopped(jnp.ones(3), "h")
    with pytest.raises(TypeError):
        jnp.sum(x)  # no __jax_array__: no silent computation in full precision
    with pytest.raises(TypeError, match="values"):
        np.inner(x, x)  # nor through NumPy (0.6.0 iterated a chopped JAX array without end here)
    rows = list(chopped(jnp.arange(6.0).reshape(3, 2), "h"))  # iteration ends after the first axis
    a, b = chopped(jnp.asarray([1.0, 2.0]), "h"), chopped(jnp.asarray([1.0, 5.0]), "h")
    assert np.asarray(a == b).tolist() == [True, False] and np.asarray(a != 1.0).tolist() == [False, True]
    assert not bool(chopped(jnp.asarray([0.0]), "h"))
    # strict rounds a Python number from its double value (0.6.0 cast it to float32 first: 1.0)
    strict = chopped(jnp.asarray([1.0]), "h", strict=True) * (1 + 2**-11 + 2**-30)
    assert np.asarray(strict.values).tolist() == [1 + 2**-10]
    # a NumPy operand on the left gives way to the chopped array's reflected operator (rounded)
    assert np.asarray((np.full(2, 0.1) + a).values).tolist() == np.float16(np.array([1.1, 2.1])).astype(
        np.float32).tolist()
    assert [np.asarray(r.values).tolist() for r in rows] == [[0.0, 1.0], [2.0, 3.0], [4.0, 5.0]]
    sr = {"format": "h", "round": 5}
    with pytest.raises(TypeError, match="random_draws"):
        jax.jit(lambda c: c * 3)(chopped(jnp.ones(3), sr))  # no hidden host stream under jit
    with pytest.raises(TypeError, match="jit"):
        jax.jit(lambda c: c.sum())(chopped(jnp.ones(3), sr))
    with pytest.raises(ValueError, match="rng"):
        with random_draws(offset=0):
            chopped(jnp.ones(3), sr) * 3
    counter = Arithmetic(sr, rng=1)
    with pytest.raises(NotChoppedError, match="counter"):
        chopped(jnp.ones((2, 2)), counter) @ chopped(jnp.ones((2, 2)), counter)
    with pytest.raises(ValueError):
        random_draws()
    with pytest.raises(NotImplementedError, match="offset"):
        with random_draws(key=jax.random.key(0)):
            chopped(jnp.ones(3), Arithmetic(sr, rng=1)).sum()


ALL_UNDER_JIT = False


def hand_sum(ch, c, axis):
    """Recursive sum with one chop call per step (the documented order of reductions)."""
    terms = np.moveaxis(c, axis, 0)
    s = terms[0].copy()
    for k in range(1, terms.shape[0]):
        s = ch(s + terms[k])
    return s


def test_chopped_jax_products_and_reductions_equal_numpy_chopped():
    """Deterministic rounding, every order eagerly and each case under jit (host callbacks; every
    order under jit with --all-under-jit); the NumPy
    chopped array's results (checked against explicit chop calls in test_arithmetic.py) and
    linalg.matmul (the documented kernels) as oracles."""
    rng = np.random.default_rng(5)
    a, b = rng.standard_normal((9, 37)), rng.standard_normal((37, 4))
    stack = rng.standard_normal((3, 9, 37))
    for m, method in enumerate(["recursive", "pairwise", "blocked", "fma"]):
        o = {"format": "b", "round": 1}
        ch = Chop(o)
        A, B, S = chopped(jnp.asarray(a), o, method=method, block_size=8), chopped(jnp.asarray(b), o), \
            chopped(jnp.asarray(stack), o, method=method, block_size=8)
        An, Bn, Sn = chopped(a, o, method=method, block_size=8), chopped(b, o), chopped(stack, o, method=method,
                                                                                       block_size=8)
        want_mm = linalg.matmul(ch(a), ch(b), o, method=method, block_size=8)
        cases = [
            (lambda X, Y, Z: X @ Y, want_mm),
            (lambda X, Y, Z: X.dot(Y[:, 0]), linalg.matmul(ch(a), ch(b)[:, 0], o, method=method, block_size=8)),
            (lambda X, Y, Z: X.sum(axis=1), (An.sum(axis=1)).values),
            (lambda X, Y, Z: X.prod(axis=0), (An.prod(axis=0)).values),
            (lambda X, Y, Z: X.cumsum(axis=1), (An.cumsum(axis=1)).values),
            (lambda X, Y, Z: X.mean(), np.asarray(An.mean())),
            (lambda X, Y, Z: X.var(axis=0, ddof=1), An.var(axis=0, ddof=1).values),
            (lambda X, Y, Z: X.std(axis=1), An.std(axis=1).values),
            (lambda X, Y, Z: Z @ Y, (Sn @ Bn).values),
            (lambda X, Y, Z: einsum("bij,jk->bki", Z, Y), np.einsum("bij,jk->bki", Sn, Bn).values),
        ]
        if method == "recursive":
            cases.append((lambda X, Y, Z: X.sum(axis=0), hand_sum(ch, ch(a), 0)))
        for k, (f, want) in enumerate(cases):
            eager = np.asarray(f(A, B, S).values)
            assert eager.dtype == np.asarray(want).dtype, (method, k)
            assert np.array_equal(eager, want), (method, k)
            # each jit is a compilation: by default every case once (the hand-written sum, case 10, too)
            if ALL_UNDER_JIT or k % 4 == m or k == 10:
                traced = np.asarray(jax.jit(f)(A, B, S).values)
                assert np.array_equal(traced, want), (method, k)
    ones = chopped(jnp.ones(4096), "h").sum()
    assert float(ones.values) == 2048.0  # fp16 recursive summation stagnates at 2048


def test_chopped_jax_stochastic_rounding_eager_draws_as_chop():
    """MATLAB's stream, eager: the same numbers as explicit chop calls in the same order."""
    o = {"format": "h", "round": 5}
    rng = np.random.default_rng(8)
    x, y = rng.standard_normal((5, 6)), rng.standard_normal((6, 3))
    pychop_compat.rng(4)
    ch = Chop(o)
    a, b = ch(x), ch(y)
    c = ch(ch(linalg.matmul(a, b, o) * 3) + 1)
    want = hand_sum(ch, c, 1)
    pychop_compat.rng(4)
    A, B = chopped(jnp.asarray(x), o), chopped(jnp.asarray(y), o)
    got = ((A @ B) * 3 + 1).sum(axis=1)
    np.testing.assert_array_equal(np.asarray(A.values), a)
    np.testing.assert_array_equal(np.asarray(got.values), want)


def test_chopped_jax_counter_equals_chop_with_seed_eager_and_under_jit():
    """rng=<seed>: eager on the arithmetic's counter, then under jit from an explicit offset;
    oracle: Chop(options, rng=seed) called in the same sequence."""
    for o in ({"format": "b", "round": 5}, {"format": "h", "round": 6}, {"format": "h", "flip": 1, "p": 0.3}):
        rng = np.random.default_rng(9)
        x, y = rng.standard_normal((40, 7)), rng.standard_normal((40, 7))
        ch = Chop(o, rng=77)
        a, b = ch(x), ch(y)
        s = hand_sum(ch, ch(a * b), 0)
        z = ch(ch(ch(a * 3) + b) / 7)
        arith = Arithmetic(o, rng=77)
        A, B = chopped(jnp.asarray(x), arith), chopped(jnp.asarray(y), arith)
        S = (A * B).sum(axis=0)  # eager: the arithmetic's counter
        np.testing.assert_array_equal(np.asarray(S.values), s)

        @jax.jit
        def step(X, Y, offset):
            with random_draws(offset=offset) as draws:
                Z = (X * 3 + Y) / 7
            return Z, draws.offset

        Z, after = step(A, B, jnp.uint64(arith.counter.offset))
        np.testing.assert_array_equal(np.asarray(Z.values), z)
        assert int(after) == arith.counter.offset + 3 * x.size  # three rounding calls of x.size counters

        # reductions (host code) under jit draw from the block's counter too
        total = hand_sum(ch, ch(z * 3), 0)

        @jax.jit
        def reduce_step(Zc, offset):
            with random_draws(offset=offset) as draws:
                T = (Zc * 3).sum(axis=0)
            return T, draws.offset

        T, after2 = reduce_step(Z, after)
        np.testing.assert_array_equal(np.asarray(T.values), total)
        assert int(after2) == int(after) + x.size + (x.shape[0] - 1) * x.shape[1]
        with random_draws(offset=int(after)) as draws:  # eagerly, the same
            T2 = (Z * 3).sum(axis=0)
        np.testing.assert_array_equal(np.asarray(T2.values), total)
        assert draws.offset == int(after2)


def test_chopped_jax_key_draws_are_reproducible_and_unbiased():
    o = {"format": "h", "round": 5}
    v = 1.0 + 2.0**-12  # a quarter of fp16's spacing 2^-10 above 1: rounds up with probability 1/4
    x = chopped(jnp.full(40000, 1.0), "h")  # exact in fp16

    def f(c, key):
        with random_draws(key=key):
            return (c * v).values, (c * v).values

    key = jax.random.key(3)
    first, second = f(chopped(x.values, o), key)
    again, _ = jax.jit(f)(chopped(x.values, o), key)
    np.testing.assert_array_equal(np.asarray(first), np.asarray(again))
    assert not np.array_equal(np.asarray(first), np.asarray(second))  # call 1 and call 2 differ
    values = np.asarray(first)
    assert set(np.unique(values)) == {1.0, 1.0 + 2.0**-10}
    up = float(np.mean(values > 1.0))
    assert abs(up - 0.25) < 5 * np.sqrt(0.25 * 0.75 / values.size)  # 5 sigma of the binomial


def test_chopped_jax_float32_flushes_on_the_cpu_and_takes_chopped_scalars():
    """docs/differences.rst: JAX's float32 arithmetic on the CPU flushes subnormal results (NumPy's
    float32 keeps them); float64 JAX arrays keep them.  A chopped scalar is an operand, as for NumPy."""
    v = np.array([7e-39], np.float32)
    assert (chopped(v * 4, "s") / 4).values.tolist() == (v * 4 / np.float32(4)).tolist() != [0.0]
    if jax.devices()[0].platform == "cpu":
        assert (chopped(jnp.asarray(v * 4), "s") / 4).values.tolist() == [0.0]
    w = np.array([2.0**-125 * 1.25])  # / 4: a float32 subnormal, kept in float64 and chopped by hand
    assert np.asarray((chopped(jnp.asarray(w), "s") / 4).values).tolist() == Chop(format="s")(w / 4).tolist()
    c, h = chopped(jnp.asarray([1.0]), "h"), float(np.float16(0.1))  # fp16(1 + fp16(0.1)) = 1.099609375
    for got in (c + chopped(0.1, "h"), chopped(0.1, "h") + c):
        assert np.asarray(got.values).tolist() == [float(np.float16(1.0 + h))]


if __name__ == "__main__":
    ALL_UNDER_JIT = "--all-under-jit" in sys.argv  # the slow profile: every product case under jit too
    for name in [arg for arg in sys.argv[1:] if not arg.startswith("--")]:  # JAX's start-up is paid once
        if name == "engine":
            for dtype in (np.float64, np.float32):
                test_jax_engine_equals_numpy_engine(dtype)
        else:
            globals()[name]()
        print(name, "ok")
