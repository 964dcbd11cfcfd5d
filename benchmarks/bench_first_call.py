"""A new process's first call (issue 29, item 4): import time, Numba's import time, the first
call on the default engine ('auto') and on the NumPy engine, and a short script of 1,000 small
calls, each in new Python processes, for several formats.

Run from the repository root::

    python benchmarks/bench_first_call.py                 # Numba's cache as it is (warm after a first run)
    python benchmarks/bench_first_call.py --fresh-cache   # also: an empty Numba cache, and the warm-up command
    python benchmarks/bench_first_call.py --smoke         # one process per cell

Every time is the best of ``--repeats`` new processes, started in turn (auto, numpy, numba, ...)
so that the machine's load touches each column alike.  The target: the first call on 'auto'
costs at most Numba's import time plus 0.1 s more than on the NumPy engine.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: label -> the call, on ``x`` (100 float64 values)
CALLS = {
    "chop 'h'": "chop(x, {'format': 'h'})",
    "chop 'bfloat16'": "chop(x, {'format': 'bfloat16'})",
    "chop 'float8_e4m3fn'": "chop(x, {'format': 'float8_e4m3fn'})",
    "cpfloat 'h'": "cpfloat(x, {'format': 'h'})",
    "custom [t, emax] = [5, 7]": "chop(x, {'format': 'c', 'params': [5, 7]})",
}

PROCESS = """
import json, sys, time
import numpy as np
x = np.linspace(-3, 3, 100)
start = time.perf_counter()
import pychop_compat
from pychop_compat import chop, cpfloat
imported = time.perf_counter()
{call}
first = time.perf_counter()
for _ in range({more}):
    {call}
done = time.perf_counter()
print(json.dumps({{"import": imported - start, "first": first - imported, "script": done - imported,
                  "numba": "numba" in sys.modules}}))
"""

NUMBA_IMPORT = """
import json, time
import numpy as np
start = time.perf_counter()
import numba
print(json.dumps({"numba import": time.perf_counter() - start}))
"""


def in_new_process(code: str, engine: str = "auto", cache: str | None = None) -> dict:
    env = {key: value for key, value in os.environ.items() if key != "PYCHOP_COMPAT_CPU_ENGINE"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    if engine != "auto":
        env["PYCHOP_COMPAT_CPU_ENGINE"] = engine
    if cache is not None:
        env["NUMBA_CACHE_DIR"] = cache
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=900)
    if done.returncode:
        raise RuntimeError(done.stderr)
    return json.loads(done.stdout.strip().splitlines()[-1])


def best_of(repeats: int, engines: tuple, code_of, cache: str | None = None) -> dict:
    """engine -> the best of each measured field over ``repeats`` rounds of new processes."""
    best: dict = {}
    for _ in range(repeats):
        for engine in engines:
            got = in_new_process(code_of(engine), engine, cache)
            mine = best.setdefault(engine, {})
            for field, value in got.items():
                mine[field] = min(mine.get(field, value), value) if field != "numba" else value
    return best


def report(repeats: int, cache: str | None = None) -> bool:
    numba_import = best_of(repeats, ("auto",), lambda engine: NUMBA_IMPORT)["auto"]["numba import"]
    engines = ("auto", "numpy", "numba")
    print(f"Numba's import: {numba_import:.3f} s (best of {repeats} new processes)\n")
    print("| call (100 float64) | import s | first call auto s | numpy s | numba s | auto loads Numba "
          "| 1,000 calls auto s | numpy s | numba s | target |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    all_met = True
    for label, call in CALLS.items():
        got = best_of(repeats, engines, lambda engine: PROCESS.format(call=call, more=999), cache)
        auto, numpy, numba = got["auto"], got["numpy"], got["numba"]
        met = auto["first"] <= numpy["first"] + numba_import + 0.1
        all_met = all_met and met
        print(f"| {label} | {auto['import']:.3f} | {auto['first']:.4f} | {numpy['first']:.4f} | {numba['first']:.3f} "
              f"| {'yes' if auto['numba'] else 'no'} | {auto['script']:.3f} | {numpy['script']:.3f} "
              f"| {numba['script']:.3f} | {'met' if met else 'MISSED'} |", flush=True)
    print(f"\ntarget (first call on 'auto' <= NumPy engine's + Numba's import + 0.1 s): "
          f"{'met for every call' if all_met else 'MISSED'}")
    return all_met


def fresh_cache_report() -> None:
    """An empty Numba cache: the first explicit compiled call, and the warm-up command."""
    call = CALLS["chop 'h'"]
    with tempfile.TemporaryDirectory() as cache:
        first = in_new_process(PROCESS.format(call=call, more=0), "numba", cache)["first"]
        with tempfile.TemporaryDirectory() as other:
            env = {**os.environ, "NUMBA_CACHE_DIR": other,
                   "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
            done = subprocess.run([sys.executable, "-m", "pychop_compat", "warm-up"], capture_output=True, text=True,
                                  env=env, timeout=1800)
            after = in_new_process(PROCESS.format(call=call, more=0), "numba", other)["first"]
    print(f"\nempty Numba cache: first compiled call (chop 'h', PYCHOP_COMPAT_CPU_ENGINE=numba) {first:.1f} s; "
          f"`python -m pychop_compat warm-up`: {done.stdout.strip() or done.stderr.strip()}; "
          f"then a new process's first compiled call {after:.2f} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3, help="new processes per cell (best of)")
    parser.add_argument("--smoke", action="store_true", help="one process per cell")
    parser.add_argument("--fresh-cache", action="store_true", help="also time an empty Numba cache and warm-up")
    args = parser.parse_args()
    import importlib.util

    if importlib.util.find_spec("numba") is None:
        print("Numba is not installed: every call runs on the NumPy engine (nothing to load).")
        return
    import platform

    print(f"bench_first_call: {platform.platform()}, Python {platform.python_version()}, "
          f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}\n")
    report(1 if args.smoke else args.repeats)
    if args.fresh_cache:
        fresh_cache_report()


if __name__ == "__main__":
    main()
