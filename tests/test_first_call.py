"""A new process's first calls: under 'auto' they run on the NumPy engine while loading the
compiled kernels would cost more than they gain; an explicit request loads them at once; the
bits are the same on either side of the switch.  Each check runs in a new Python process
(which engine ran, not how long it took)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from pychop_compat.kernels.compiled import available

needs_numba = pytest.mark.skipif(not available(), reason="numba not installed")

ROOT = Path(__file__).resolve().parents[1]

PRELUDE = """
import json, sys
import numpy as np
import pychop_compat
from pychop_compat import chop, cpfloat, Chop
from pychop_compat.engines import dispatch
from pychop_compat.kernels import compiled
x = np.linspace(-3, 3, 100)
def numba_loaded():
    return 'numba' in sys.modules
"""


def run_fresh(code: str, **env: str) -> dict:
    """Run ``code`` after PRELUDE in a new process; it prints one JSON object, returned."""
    environment = {key: value for key, value in os.environ.items() if key != "PYCHOP_COMPAT_CPU_ENGINE"}
    environment.update(PYTHONPATH=str(ROOT), **env)
    done = subprocess.run([sys.executable, "-c", PRELUDE + code], capture_output=True, text=True, env=environment,
                          timeout=600, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


FIRST_CALLS = {
    "h": "chop(x, {'format': 'h'})",
    "bfloat16": "chop(x, {'format': 'bfloat16'})",
    "float8_e4m3fn": "chop(x, {'format': 'float8_e4m3fn'})",
    "cpfloat h": "cpfloat(x, {'format': 'h'})",
    "custom": "chop(x, {'format': 'c', 'params': [5, 7]})",
    "stochastic": "chop(x, {'format': 'h', 'round': 5})",
    "float32": "chop(x.astype(np.float32), {'format': 'h'})",
}


@needs_numba
def test_first_small_calls_run_on_the_numpy_engine_without_loading_numba():
    code = "out = {}\n" + "".join(
        f"{call}\nout[{name!r}] = numba_loaded()\n" for name, call in FIRST_CALLS.items()) + """
for _ in range(100):
    chop(x, {'format': 'h'})
out['after 100 calls'] = numba_loaded()
found = pychop_compat.explain(x, {'format': 'h'})
out['kernel'] = found.kernel
out['reason'] = dict(found.passed_over)['numba']
print(json.dumps(out))
"""
    out = run_fresh(code)
    assert out.pop("kernel") == "numpy"
    assert out.pop("reason").startswith("the compiled kernels are not loaded yet")
    assert not any(out.values()), out  # Numba is not even imported


@needs_numba
# Each case is a new process that loads the compiled kernels: the default profile runs one way of
# asking and one call, the others run in the slow profile.
@pytest.mark.parametrize("how", [pytest.param("environment", marks=pytest.mark.slow), "cpu_engine"])
def test_an_explicit_request_loads_the_compiled_engine_at_once(how):
    call = "chop(x, {'format': 'h'})"
    code = (f"with compiled.cpu_engine('numba'):\n    {call}\n" if how == "cpu_engine" else call + "\n") + """
print(json.dumps({'loaded': compiled.loaded(), 'kernel': pychop_compat.explain(x, {'format': 'h'}).kernel}))
"""
    env = {"PYCHOP_COMPAT_CPU_ENGINE": "numba"} if how == "environment" else {}
    # once loaded, 'auto' uses it too
    assert run_fresh(code, **env) == {"loaded": True, "kernel": "numba"}


@needs_numba
def test_warm_up_loads_the_compiled_engine_for_auto():
    code = """
compiled.warm_up()
print(json.dumps({'kernel': pychop_compat.explain(x, {'format': 'h'}).kernel}))
"""
    assert run_fresh(code) == {"kernel": "numba"}


@needs_numba
def test_an_array_that_pays_for_the_load_loads_it_at_once():
    code = """
dispatch._LOAD_SECONDS = 1e-3  # a stand-in for an array of 10^9 elements: 10^6 x 3 ns > 1 ms
small = pychop_compat.explain(x, {'format': 'h'}).kernel
large = np.linspace(-3, 3, 10**6)
found = pychop_compat.explain(large, {'format': 'h'}).kernel
before = numba_loaded()
chop(large, {'format': 'h'})
print(json.dumps({'small': small, 'large': found, 'before': before, 'loaded': compiled.loaded()}))
"""
    assert run_fresh(code) == {"small": "numpy", "large": "numba", "before": False, "loaded": True}


@needs_numba
@pytest.mark.parametrize("call", ["chop(x, {'format': 'h'})",
                                  pytest.param("cpfloat(x, {'format': 'h'})", marks=pytest.mark.slow),
                                  pytest.param("chop(list(x), {'format': 'bfloat16'})", marks=pytest.mark.slow)])
def test_small_calls_load_the_compiled_engine_once_they_have_taken_as_long(call):
    """Planned small calls (NumPy arrays below the parallel size) and the general path (a list) both count."""
    code = f"""
dispatch._LOAD_SECONDS = 0.02
calls = 0
while not numba_loaded() and calls < 100000:
    {call}
    calls += 1
{call}
print(json.dumps({{'calls': calls, 'loaded': numba_loaded(), 'due': dispatch._load_due}}))
"""
    out = run_fresh(code)
    assert out["loaded"] and out["due"] and out["calls"] > 1, out


SEQUENCE = """
digest = []
options = [({'format': 'h', 'round': 5}, None), ({'format': 'bfloat16', 'round': 6}, None),
           ({'format': 'h', 'round': 5, 'flip': 1, 'p': 0.1}, None), ({'format': 'h', 'round': 5}, 7),
           ({'format': 'float8_e4m3fn', 'round': 5}, None), ({'format': 'h', 'round': 1}, None)]
chops = [Chop(o, rng=seed) if seed is not None else None for o, seed in options]
for step in range(STEPS):
    for (o, seed), c in zip(options, chops):
        y = np.linspace(-3, 3, 50 + step % 7) * (1 + step)
        digest.append((c(y) if c is not None else chop(y, o)).tobytes().hex())
print(json.dumps({'digest': digest, 'loaded': compiled.loaded()}))
"""


@needs_numba
def test_stochastic_rounding_gives_the_same_bits_across_the_switch():
    """MATLAB's stream, the counter (rng=<int>) and bit flips: the same numbers and results
    when the calls move from the NumPy engine to the compiled one mid-sequence."""
    steps = "STEPS = 40\n"
    switching = run_fresh("dispatch._LOAD_SECONDS = 0.01\n" + steps + SEQUENCE)
    numpy_only = run_fresh(steps + SEQUENCE, PYCHOP_COMPAT_CPU_ENGINE="numpy")
    assert switching["loaded"] and not numpy_only["loaded"]
    assert switching["digest"] == numpy_only["digest"]


@pytest.mark.slow  # with an empty Numba cache it compiles every kernel (minutes on a busy 2-core machine)
def test_warm_up_command():
    """``python -m pychop_compat warm-up`` fills Numba's cache (exit 0), or says that there is
    nothing to compile without Numba (exit 1)."""
    done = subprocess.run([sys.executable, "-m", "pychop_compat", "warm-up"], capture_output=True, text=True,
                          timeout=1800, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
    if available():
        assert done.returncode == 0 and "compiled CPU engine ready in Numba's cache" in done.stdout, done.stderr
    else:
        assert done.returncode == 1 and "Numba is not installed" in done.stdout
