"""Speed of the formats and modes beyond chop.m, next to chop's fp16 round to nearest.

Run from the repository root::

    python benchmarks/bench_formats.py                 # n = 1e6 and 1e7, float64 and float32
    python benchmarks/bench_formats.py --quick         # smoke run: n = 1e5, 3 repeats
    python benchmarks/bench_formats.py --engines numpy numba torch

Each configuration rounds the same standard normal array; every time is the
best of ``--repeats`` runs, the configurations called in turn within each
repeat (drift on a busy machine hits them alike).  The ratio column divides by
chop's fp16 round to nearest on the NumPy engine measured in the same run.
Engines: ``numpy`` (the NumPy engine, ``cpu_engine('numpy')``), ``numba``
(``cpu_engine('numba')``: the compiled engine, which since 2026-11-23 also
rounds the extended specs with chop's rules and CPFloat's deterministic modes) and ``torch`` (a CPU tensor: the torch engine hands
extended specs to the NumPy engine on the tensor's memory).  This script makes
no assertion.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]


def configurations(pc) -> list:
    """``(label, function of x)`` pairs; the first is the reference row (chop's fp16 RN)."""
    from pychop_compat.rounding import make_spec, round_to_format

    fp16 = pc.Chop(format="h")
    chops = {name: pc.Chop(format=name) for name in ("float8_e4m3fn", "float4_e2m1fn", "float6_e2m3fn")}
    specs = {
        "float8_e4m3fn RN": make_spec("float8_e4m3fn", 1),
        "float8_e4m3fn RN saturation": make_spec("float8_e4m3fn", 1, saturation=True),
        "float8_e4m3fn RN ties away": make_spec("float8_e4m3fn", -1),
        "float8_e5m2 RN": make_spec("float8_e5m2", 1),
        "float6_e2m3fn RN": make_spec("float6_e2m3fn", 1),
        "float4_e2m1fn RN": make_spec("float4_e2m1fn", 1),
    }
    rows = [("fp16 RN (chop)", fp16)]
    rows += [(f"{name} RN (chop)", chop) for name, chop in chops.items()]
    rows += [(f"{label} (round_to_format)", lambda x, s=spec: round_to_format(x, s)) for label, spec in specs.items()]
    rows.append(("fp16 round to odd (cpfloat)", lambda x: pc.cpfloat(x, {"format": "h", "round": 7, "saturation": 0})))
    rows.append(("fp16 RN ties away (cpfloat)", lambda x: pc.cpfloat(x, {"format": "h", "round": -1, "saturation": 0})))
    return rows


def best_interleaved(funcs: list, x, repeats: int) -> list:
    """Best time of each ``func(x)``, the functions called in turn ``repeats`` times."""
    best = [float("inf")] * len(funcs)
    for _ in range(repeats):
        for k, func in enumerate(funcs):
            t0 = time.perf_counter()
            func(x)
            best[k] = min(best[k], time.perf_counter() - t0)
    return best


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="n = 1e5, 3 repeats")
    parser.add_argument("--sizes", type=float, nargs="*", default=[1e6, 1e7])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--engines", nargs="*", default=["numpy"], choices=["numpy", "numba", "torch"])
    parser.add_argument("--root", default=str(ROOT), help="import pychop_compat from this checkout")
    args = parser.parse_args(argv)
    sys.path.insert(0, args.root)
    import pychop_compat as pc
    from pychop_compat.kernels import compiled, numpy_fast

    sizes, repeats = ([10**5], 3) if args.quick else ([int(n) for n in args.sizes], args.repeats)
    engines = [e for e in args.engines if e != "numba" or compiled.available()]
    if "torch" in engines and importlib.util.find_spec("torch") is None:
        engines.remove("torch")
    print(f"pychop_compat from {Path(pc.__file__).parent}; NumPy {np.__version__}; "
          f"{numpy_fast.THREADS} thread(s); best of {repeats} interleaved runs; "
          f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}\n")
    print("| n | dtype | engine | configuration | ns/elt | x fp16 RN (NumPy engine) |")
    print("|---|---|---|---|---:|---:|")
    rows = configurations(pc)
    for n in sizes:
        for dtype in (np.float64, np.float32):
            x = np.random.default_rng(1).standard_normal(n).astype(dtype)
            funcs, labels = [], []
            for engine in engines:
                for label, func in rows:
                    funcs.append(_on_engine(engine, func, compiled))
                    labels.append((engine, label))
            data = {"numpy": x, "numba": x}
            if "torch" in engines:
                import torch

                data["torch"] = torch.from_numpy(x.copy())
            times = best_interleaved([lambda _x, f=f, e=e: f(data[e]) for f, (e, _) in zip(funcs, labels)], x, repeats)
            base = times[labels.index(("numpy", rows[0][0]))] if "numpy" in engines else times[0]
            for (engine, label), t in zip(labels, times):
                print(f"| {n:.0e} | {np.dtype(dtype).name} | {engine} | {label} | {t / n * 1e9:.2f} | "
                      f"{t / base:.2f} |", flush=True)


def _on_engine(engine: str, func, compiled):
    setting = {"numpy": "numpy", "numba": "numba", "torch": "auto"}[engine]

    def run(x):
        with compiled.cpu_engine(setting):
            return func(x)

    return run


if __name__ == "__main__":
    main()
