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

from pychop_compat import Chop, chopped
from pychop_compat.engines.jax_engine import chop_jax
from pychop_compat.options import resolve

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
                spec = resolve(o, None, "single" if dtype == np.float32 else "double")
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
    with pytest.raises(NotImplementedError):
        chopped(jnp.ones(3), {"format": "h", "round": 5})


if __name__ == "__main__":
    name = sys.argv[1]
    if name == "engine":
        for dtype in (np.float64, np.float32):
            test_jax_engine_equals_numpy_engine(dtype)
    else:
        globals()[name]()
    print("ok")
