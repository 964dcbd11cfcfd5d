"""The formats beyond chop through ``chop`` on the compiled CPU engine, as ratios to its fp16.

Run from the repository root::

    python benchmarks/bench_formats_compiled.py            # the default engine setting ('auto')
    python benchmarks/bench_formats_compiled.py numpy      # the extended rows on the NumPy engine

``Chop(format=name, round=mode)`` on one standard normal array (n = 10^6,
float64) for the OCP/ML formats in the deterministic modes and in stochastic
rounding (counter numbers of ``Chop(rng=1)`` and MATLAB's stream), next to
fp16 on the compiled engine.  Each time is the best of 7 runs, the
configurations called in turn within each run; the ratio divides by the
compiled engine's fp16 round to nearest measured in the same run; the
MATLAB-stream rows also print their ratio to fp16's stochastic rounding on
that stream (the same count of numbers drawn: MT19937 sets the floor).  No
assertion is made.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import pychop_compat as pc  # noqa: E402
from pychop_compat.kernels.compiled import available, cpu_engine  # noqa: E402

FORMATS = ("float8_e4m3fn", "float4_e2m1fn", "float6_e2m3fn", "float8_e5m2fnuz")


def configurations(engine: str) -> dict:
    """name -> (Chop object, engine setting)."""
    out = {"fp16 RN": (pc.Chop(format="h"), "numba")}
    for name in FORMATS:
        for mode in (1, 2, 3, 4):
            out[f"{name} mode {mode}"] = (pc.Chop(format=name, round=mode), engine)
        out[f"{name} SR5 rng=1"] = (pc.Chop(format=name, round=5, rng=1), engine)
        out[f"{name} SR5 MATLAB"] = (pc.Chop(format=name, round=5), engine)
    out["fp16 SR5 rng=1"] = (pc.Chop(format="h", round=5, rng=1), "numba")
    out["fp16 SR5 MATLAB"] = (pc.Chop(format="h", round=5), "numba")
    return out


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("engine", nargs="?", default="auto", choices=["auto", "numba", "numpy"],
                        help="engine setting for the extended rows (default: %(default)s)")
    parser.add_argument("--n", type=float, default=1e6)
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args(argv)
    if not available():
        print("Numba is not installed: nothing to compare.")
        return
    x = np.random.default_rng(0).standard_normal(int(args.n))
    configs = configurations(args.engine)
    best = dict.fromkeys(configs, float("inf"))
    for _ in range(args.repeats):
        for key, (chopper, engine) in configs.items():
            with cpu_engine(engine):
                start = time.perf_counter()
                chopper(x)
                best[key] = min(best[key], time.perf_counter() - start)
    print(f"n = {int(args.n):.0e} float64, best of {args.repeats}, extended rows on {args.engine!r}")
    for key in configs:
        line = f"{key:28s} {best[key] * 1e3:7.2f} ms  {best[key] / best['fp16 RN']:.2f}x"
        if key.endswith("MATLAB"):  # and to fp16 on the same stream, which draws as many numbers
            line += f"  to fp16 SR5 MATLAB: {best[key] / best['fp16 SR5 MATLAB']:.2f}x"
        print(line)


if __name__ == "__main__":
    main()
