"""The ``cpfloat`` facade (CPFloat's rules) on both CPU engines, as a ratio to the compiled
engine's chop fp16 round to nearest (``Chop(format='h')(x)``) measured in the same run.

Run from the repository root::

    python benchmarks/bench_cpfloat.py            # n = 1e6 float64, best of 7 interleaved runs
    python benchmarks/bench_cpfloat.py --n 1e7 --repeats 5 --dtype float32

For each (format, mode) the facade is timed with ``cpu_engine('numpy')`` (the NumPy
bit-pattern engine :mod:`pychop_compat.kernels.numpy_cpfloat` and the reference for the rare
elements) and ``cpu_engine('numba')`` (the compiled kernel
:mod:`pychop_compat.kernels.numba_cpfloat`).  No assertion is made; the numbers are what
benchmarks/RESULTS.md records (docs/performance.rst quotes a summary).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import pychop_compat  # noqa: E402
from pychop_compat.kernels.compiled import available, cpu_engine  # noqa: E402

MODES = (-1, 0, 1, 2, 3, 4, 7)
#: (label, the fields every call gives: the facade's options persist between calls)
CASES = [(f"{name} mode {mode}", dict(format=name, round=mode, saturation=0))
         for name in ("float8_e4m3fn", "float4_e2m1fn") for mode in MODES]
CASES += [("fp16 mode 7 (round to odd)", dict(format="h", round=7, saturation=0)),
          ("float8_e4m3fn mode 1 saturation", dict(format="float8_e4m3fn", round=1, saturation=1)),
          ("float4_e2m1fn mode 3 subnormal 0", dict(format="float4_e2m1fn", round=3, saturation=0,
                                                    subnormal=0))]


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=float, default=1e6, help="elements (standard normal values)")
    parser.add_argument("--dtype", default="float64", choices=("float64", "float32"))
    parser.add_argument("--repeats", type=int, default=7, help="interleaved runs (best is kept)")
    args = parser.parse_args(argv)
    if not available():
        print("numba is not installed: only the NumPy engine exists, nothing to compare.")
        return
    n = int(args.n)
    x = np.random.default_rng(0).standard_normal(n).astype(args.dtype)
    fp16 = pychop_compat.Chop(format="h")

    def facade(engine: str, fields: dict):
        def call():
            with cpu_engine(engine):
                pychop_compat.cpfloat(x, dict(fields))
        return call

    def chop_fp16():
        with cpu_engine("numba"):
            fp16(x)

    funcs = {"fp16": chop_fp16}
    for label, fields in CASES:
        funcs[(label, "numpy")] = facade("numpy", fields)
        funcs[(label, "numba")] = facade("numba", fields)
    for func in funcs.values():  # compile and warm up
        func()
    best = {key: float("inf") for key in funcs}
    for _ in range(args.repeats):
        for key, func in funcs.items():
            t0 = time.perf_counter()
            func()
            best[key] = min(best[key], time.perf_counter() - t0)
    base = best["fp16"]
    print(f"n = {n:.0e} {args.dtype}, best of {args.repeats} interleaved runs, "
          f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; "
          f"compiled chop fp16 RN: {base * 1e3:.2f} ms\n")
    print("| cpfloat(x, ...) | NumPy engine ms | x chop fp16 | compiled kernel ms | x chop fp16 | speed-up |")
    print("|---|---:|---:|---:|---:|---:|")
    for label, _ in CASES:
        t_np, t_nb = best[(label, "numpy")], best[(label, "numba")]
        print(f"| {label} | {t_np * 1e3:.2f} | {t_np / base:.2f} | {t_nb * 1e3:.2f} | {t_nb / base:.2f} "
              f"| {t_np / t_nb:.1f} |", flush=True)


if __name__ == "__main__":
    main()
