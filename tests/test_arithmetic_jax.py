"""The JAX engine and chopped JAX arrays, under jit (checks in tests/jax_checks.py).

The checks run in subprocesses: JAX starts threads, and other tests fork.
Expected values: the NumPy engine's chop (checked against the MATLAB corpus
elsewhere) on the same inputs, and hand-written chop calls.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytest.importorskip("jax")

TESTS = Path(__file__).resolve().parent


# Two processes of four or five checks each (one per xdist worker): each process pays JAX's start-up once.
CHECKS = [("engine", "test_chopped_jax_arrays_under_jit_equal_hand_chopped",
           "test_chopped_jax_sum_equals_numpy_chopped_sum", "test_chopped_jax_refuses_what_it_cannot_round",
           "test_chopped_jax_float32_flushes_on_the_cpu_and_takes_chopped_scalars"),
          ("test_chopped_jax_products_and_reductions_equal_numpy_chopped",
           "test_chopped_jax_stochastic_rounding_eager_draws_as_chop",
           "test_chopped_jax_counter_equals_chop_with_seed_eager_and_under_jit",
           "test_chopped_jax_key_draws_are_reproducible_and_unbiased")]


@pytest.mark.parametrize("checks, flags", [
    pytest.param(CHECKS[0], (), id="engine-jit-sum-refusals"),
    # (chopped JAX products and stochastic rounding: about 27 s of one worker, in the slow profile;
    # the JAX engine's own products and draws run by default in test_jax_engine and test_linalg_device)
    pytest.param(CHECKS[1], (), id="products-random", marks=[pytest.mark.slow, pytest.mark.heavy]),
    pytest.param(CHECKS[1][:1], ("--all-under-jit",), id="products-all-under-jit", marks=pytest.mark.slow),
])
def test_jax_checks(checks, flags):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(TESTS.parent), os.environ.get("PYTHONPATH", "")]))
    out = subprocess.run([sys.executable, str(TESTS / "jax_checks.py"), *checks, *flags], capture_output=True,
                         text=True, timeout=900, env=env, cwd=TESTS.parent)
    passed = [line.split()[0] for line in out.stdout.splitlines() if line.endswith(" ok")]
    assert out.returncode == 0 and passed == list(checks), out.stdout[-3000:] + out.stderr[-3000:]



def run_jax(code: str, x64: bool = True) -> None:
    """``code`` in a fresh process (JAX starts threads, and other tests fork), JAX 64-bit or not."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(TESTS.parent), os.environ.get("PYTHONPATH", "")]))
    head = ("import numpy as np, pytest, jax\n"
            f"jax.config.update('jax_enable_x64', {x64})\n"
            "import jax.numpy as jnp\n"
            "from pychop_compat import Chop, chop, chopped\n"
            "from pychop_compat.arithmetic import Arithmetic\n"
            "from pychop_compat.arithmetic.jax_array import random_draws\n")
    out = subprocess.run([sys.executable, "-c", head + textwrap.dedent(code)], capture_output=True, text=True,
                         timeout=600, env=env, cwd=TESTS.parent)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]


def test_chopped_jax_strict_rounds_plain_operands_in_their_own_dtype():
    # strict: chop(a + chop(b)) with b rounded from its own value (as NumPy's Arithmetic.enter), not first cast to
    # the data's float32 (1 + 2**-11 + 2**-40 is 1 in float32, then 'h' gives 1; from double, 1 + 2**-10)
    run_jax("""
        b = np.array([1 + 2**-11 + 2**-40]); z = np.zeros(1, np.float32)
        got = chopped(jnp.asarray(z), 'h', strict=True) + b
        want = chopped(z, 'h', strict=True) + b   # the NumPy chopped array: float64, chop(0 + chop(b))
        assert want.values.tolist() == [1 + 2**-10] and got.dtype == want.dtype == np.float64
        np.testing.assert_array_equal(np.asarray(got.values), want.values)
        # stochastic rounding of a Python float with the counter: Chop(rng=seed)'s calls in the same order (the
        # data, the operand from its double value, the sum); float32(1 + 2**-30) is 1, which never rounds up
        v, up = 1 + 2**-30, 0
        for seed in range(8):
            ch = Chop({'format': 'h', 'round': 6}, rng=seed)
            x = ch(z)
            want = ch(x + float(ch(np.array([v]))[0]))
            up += want[0] > 1
            arith = Arithmetic({'format': 'h', 'round': 6}, rng=seed, strict=True)
            got = chopped(jnp.asarray(z), arith) + v
            assert got.dtype == np.float32
            np.testing.assert_array_equal(np.asarray(got.values), want)
            # under jit, from the counter at the offset after chopped(): the same numbers
            c = chopped(jnp.asarray(z), Arithmetic({'format': 'h', 'round': 6}, rng=seed, strict=True))

            @jax.jit
            def step(c, offset):
                with random_draws(offset=offset) as draws:
                    y = c + v
                return y, draws.offset

            y, after = step(c, jnp.uint64(1))
            assert y.dtype == np.float32 and int(after) == 3
            np.testing.assert_array_equal(np.asarray(y.values), want)
        assert up  # (seeds 1 and 2 round up)
    """)


def test_chopped_jax_refuses_integers_without_x64():
    # chop refuses integer JAX arrays without x64 (MATLAB's double); float32 would round 2**24 + 2**16 + 1 first
    run_jax("""
        n = jnp.asarray([2**24 + 2**16 + 1])
        with pytest.raises(TypeError, match='jax_enable_x64'):
            chop(n, {'format': 'b'})
        with pytest.raises(TypeError, match='jax_enable_x64'):
            chopped(n, 'b')
        c = chopped(jnp.ones(1), 'b', strict=True)
        with pytest.raises(TypeError, match='jax_enable_x64'):
            c + n
        with pytest.raises(TypeError, match='jax_enable_x64'):
            c * np.array([3])
        assert float((c + jnp.asarray([0.5], jnp.float32)).values[0]) == 1.5  # float operands still enter
    """, x64=False)


def test_chopped_jax_jit_reuses_the_trace_for_equal_arithmetics():
    # the pytree's static data compares arithmetics by value (options and settings, and the rng object): equal
    # ones share a trace; other settings, or rng objects of their own (own state), retrace
    run_jax("""
        a = jnp.asarray([0.1, 0.2, 0.3])
        want = chop(chop(chop(np.asarray(a), {'format': 'h'}) * 3, {'format': 'h'}) + 1, {'format': 'h'})
        for make, traces in [(lambda: chopped(a, 'h'), 1), (lambda: chopped(a), 1),
                             (lambda: chopped(a, Arithmetic('h')), 1), (lambda: chopped(a, {'format': 'h'}), 1),
                             (lambda: chopped(a, Arithmetic('h', strict=True)), 1)]:
            count = []

            @jax.jit
            def f(x):
                count.append(1)
                return x * 3 + 1

            for i in range(4):
                np.testing.assert_array_equal(np.asarray(f(make()).values), want)
            assert len(count) == traces, (len(count), make)
        count = []
        g = jax.jit(lambda x: (count.append(1), x * 3)[1])
        shared = Arithmetic('h', rng=1)
        for arith in [shared, shared, shared.with_settings(method='pairwise'), Arithmetic('h', rng=1),
                      Arithmetic('h', strict=True), Arithmetic('h')]:
            g(chopped(a, arith))
        assert len(count) == 5  # the same rng object: one trace; another rng, other settings: retraced
    """)


def test_chopped_of_a_chopped_jax_array_rounds_again():
    # chopped(chopped x, 'b') rounds x's values again, as for chopped NumPy arrays: chop(chop(x, 'h'), 'b')
    run_jax("""
        x = np.array([0.1, 0.2, 1 / 3])
        got = chopped(chopped(jnp.asarray(x), 'h'), 'b')
        assert got.arithmetic.given['format'] == 'b'
        np.testing.assert_array_equal(np.asarray(got.values), chop(chop(x, {'format': 'h'}), {'format': 'b'}))
    """)
