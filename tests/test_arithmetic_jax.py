"""The JAX engine and chopped JAX arrays, under jit (checks in tests/jax_checks.py).

The checks run in subprocesses: JAX starts threads, and other tests fork.
Expected values: the NumPy engine's chop (checked against the MATLAB corpus
elsewhere) on the same inputs, and hand-written chop calls.
"""

from __future__ import annotations

import os
import subprocess
import sys
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

