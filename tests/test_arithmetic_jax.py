"""The JAX engine and chopped JAX arrays, under jit (checks in tests/jax_checks.py).

Each check runs in a subprocess: JAX starts threads, and other tests fork.
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


@pytest.mark.parametrize("check", ["engine", "test_chopped_jax_arrays_under_jit_equal_hand_chopped",
                                   "test_chopped_jax_sum_equals_numpy_chopped_sum",
                                   "test_chopped_jax_refuses_what_it_cannot_round",
                                   "test_chopped_jax_products_and_reductions_equal_numpy_chopped",
                                   "test_chopped_jax_stochastic_rounding_eager_draws_as_chop",
                                   "test_chopped_jax_counter_equals_chop_with_seed_eager_and_under_jit",
                                   "test_chopped_jax_key_draws_are_reproducible_and_unbiased"])
def test_jax_check(check):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(TESTS.parent), os.environ.get("PYTHONPATH", "")]))
    out = subprocess.run([sys.executable, str(TESTS / "jax_checks.py"), check], capture_output=True,
                         text=True, timeout=600, env=env, cwd=TESTS.parent)
    assert out.returncode == 0 and out.stdout.strip().endswith("ok"), out.stdout[-3000:] + out.stderr[-3000:]
