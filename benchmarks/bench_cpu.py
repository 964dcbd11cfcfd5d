"""CPU benchmark of pychop_compat's NumPy engine (plus its torch engine and PyPI pychop when present).

Run from the repository root::

    python benchmarks/bench_cpu.py            # n = 1e4 .. 1e7, float64 and float32
    python benchmarks/bench_cpu.py --quick    # smoke run: small n, few repeats
    python benchmarks/bench_cpu.py --large    # also n = 1e8 (needs ~3 GB of memory)
    python benchmarks/bench_cpu.py --memory   # peak memory of chop on 1e8 float64 values

Every time is the median over repeats, in ns per element, next to its ratio
to the one-pass NumPy baseline ``np.multiply(x, 1.0, out=y)`` measured
alternately with it in the same run (the ratio is what to compare across
machines; this script makes no assertion).  ``alloc`` is the ratio to
``np.multiply(x, 1.0)``, which, like chop, returns a new array.  The torch
rows compare ``Chop(...)(tensor)`` with ``tensor.mul(1.0)`` and appear when
torch is installed and ``pychop_compat/engines/torch_engine.py`` exists.
The pychop column is PyPI pychop's faster chop-compatible NumPy class on the
same input divided by ours (pychop is never a dependency; install it to
measure).
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import statistics
import sys
import time
import types
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import pychop_compat  # noqa: E402
from pychop_compat.engines import numpy_fast  # noqa: E402

# (label, chop options, uses a NumPy Generator, pychop (exp_bits, sig_bits, rmode, subnormal),
#  pychop's chop-style (prec, rmode, subnormal))
CONFIGS = [
    ("fp16 RN", dict(format="h"), False, (5, 10, 1, True), ("h", 1, 1)),
    ("bf16 RN sub=0", dict(format="b", subnormal=0), False, (8, 7, 1, False), ("b", 1, 0)),
    ("fp8-e4m3 RN", dict(format="fp8-e4m3"), False, (4, 3, 1, True), ("q43", 1, 1)),
    ("fp16 RZ", dict(format="h", round=4), False, (5, 10, 4, True), ("h", 4, 1)),
    ("fp16 SR5 MATLAB stream", dict(format="h", round=5), False, (5, 10, 5, True), ("h", 5, 1)),
    ("fp16 SR5 Generator", dict(format="h", round=5), True, (5, 10, 5, True), ("h", 5, 1)),
    # Formats and modes beyond chop.m (issue 13): OCP formats through chop, round to odd
    # through the cpfloat facade (no pychop equivalent: its column stays empty).
    ("float8_e4m3fn RN", dict(format="float8_e4m3fn"), False, None, None),
    ("float4_e2m1fn RN", dict(format="float4_e2m1fn"), False, None, None),
    ("fp16 round to odd (cpfloat)", dict(cpfloat=dict(format="h", round=7)), False, None, None),
]


def _samples(func, budget: float, min_samples: int, max_samples: int) -> list:
    """Seconds per call of ``func``, several samples; short calls are batched per sample."""
    t0 = time.perf_counter()
    func()
    once = time.perf_counter() - t0
    number = max(1, int(2e-3 / max(once, 1e-9)))  # each sample at least ~2 ms
    count = int(min(max_samples, max(min_samples, budget / max(once * number, 1e-9))))
    out = []
    for _ in range(count):
        t0 = time.perf_counter()
        for _ in range(number):
            func()
        out.append((time.perf_counter() - t0) / number)
    return out


def _paired(func, base, budget: float, min_samples: int, max_samples: int):
    """Medians of ``func`` and ``base``, sampled alternately (drift on a busy machine cancels)."""
    ours, ref = [], []
    rounds = 3
    for _ in range(rounds):
        ours += _samples(func, budget / rounds, max(1, min_samples // rounds), max_samples)
        ref += _samples(base, budget / rounds / 2, max(1, min_samples // rounds), max_samples)
    return statistics.median(ours), statistics.median(ref)


# --- optional competitors ------------------------------------------------------------------


def _load_pychop():
    """PyPI pychop's NumPy classes ``(LightChop_, Chop_)``, or None when it is not installed.

    pychop's package ``__init__`` imports pandas, scikit-learn and dask; when
    those are missing, its NumPy modules (which need only NumPy) are loaded
    directly.
    """
    if importlib.util.find_spec("pychop") is None:
        return None
    try:
        import pychop  # noqa: F401
    except ImportError:
        spec = importlib.util.find_spec("pychop")
        stub = types.ModuleType("pychop")
        stub.__path__ = list(spec.submodule_search_locations)
        sys.modules["pychop"] = stub
    try:
        light = importlib.import_module("pychop.np.lightchop").LightChop_
    except Exception:  # pragma: no cover - depends on pychop's version
        light = None
    try:
        matlab_style = importlib.import_module("pychop.np.float_point").Chop_
    except Exception:  # pragma: no cover
        matlab_style = None
    return light, matlab_style


def _pychop_callables(classes, config):
    if config[3] is None:
        return []
    light, matlab_style = classes
    _, _, _, (eb, sb, rmode, sub), (prec, rm, s) = config
    found = []
    if light is not None:
        found.append(("LightChop", light(eb, sb, rmode=rmode, subnormal=sub)))
    if matlab_style is not None:
        found.append(("Chop_", matlab_style(prec=prec, rmode=rm, subnormal=s)))
    return found


def _torch():
    if importlib.util.find_spec("torch") is None or not (ROOT / "pychop_compat/engines/torch_engine.py").exists():
        return None
    try:
        import torch

        return torch
    except Exception:  # pragma: no cover - broken install
        return None


# --- the run ----------------------------------------------------------------------------------


def _chopper(config):
    label, options, generator, _, _ = config
    if "cpfloat" in options:
        fpopts = options["cpfloat"]
        return lambda x: pychop_compat.cpfloat(x, fpopts)
    return pychop_compat.Chop(rng=np.random.default_rng(0) if generator else None, **options)


def run(sizes, dtypes, budget, min_samples, max_samples, use_pychop, use_torch):
    pychop_classes = _load_pychop() if use_pychop else None
    torch = _torch() if use_torch else None
    print(f"NumPy {np.__version__}, {numpy_fast.THREADS} thread(s) for large deterministic arrays, "
          f"block {numpy_fast.BLOCK}; pychop: {'yes' if pychop_classes else 'not installed'}; "
          f"torch rows: {'yes' if torch else 'no'}\n")
    header = ("| n | dtype | configuration | ns/elt | x baseline | x alloc | baseline ns/elt "
              "| pychop ns/elt (class) | pychop / ours |")
    print(header)
    print("|---|---|---|---:|---:|---:|---:|---|---:|")
    torch_rows = []
    for n in sizes:
        for dtype in dtypes:
            x = np.random.default_rng(1).standard_normal(n).astype(dtype)
            y = np.empty_like(x)
            base = lambda: np.multiply(x, 1.0, out=y)  # noqa: E731
            base_alloc = lambda: np.multiply(x, 1.0)  # noqa: E731
            for config in CONFIGS:
                chopper = _chopper(config)
                t, tb = _paired(lambda: chopper(x), base, budget, min_samples, max_samples)
                ta, _ = _paired(base_alloc, base, budget / 4, 3, max_samples)
                alloc_ratio = t / ta
                competitor = "", ""
                if pychop_classes:
                    best = None
                    for name, obj in _pychop_callables(pychop_classes, config):
                        try:
                            tp = statistics.median(_samples(lambda: obj(x), budget / 2, 2, max_samples))
                        except Exception as err:  # pragma: no cover - pychop version drift
                            print(f"<!-- pychop {name} failed: {err!r} -->")
                            continue
                        if best is None or tp < best[0]:
                            best = (tp, name)
                    if best:
                        competitor = (f"{best[0] / n * 1e9:.2f} ({best[1]})", f"{best[0] / t:.1f}")
                print(f"| {n:.0e} | {np.dtype(dtype).name} | {config[0]} | {t / n * 1e9:.2f} | "
                      f"{t / tb:.2f} | {alloc_ratio:.2f} | {tb / n * 1e9:.2f} | {competitor[0]} | {competitor[1]} |",
                      flush=True)
                if torch is not None:
                    torch_rows.append(_torch_row(torch, x, n, config, budget, min_samples, max_samples))
    if torch_rows:
        print("\n| n | dtype | configuration (torch engine, CPU tensor) | ns/elt | x mul(1.0) |")
        print("|---|---|---|---:|---:|")
        for row in torch_rows:
            print(row)


def _torch_row(torch, x, n, config, budget, min_samples, max_samples):
    xt = torch.from_numpy(x.copy())
    chopper = _chopper(config)
    try:
        t, tb = _paired(lambda: chopper(xt), lambda: xt.mul(1.0), budget, min_samples, max_samples)
    except Exception as err:  # the torch engine is another developer's work in progress
        return f"| {n:.0e} | {x.dtype.name} | {config[0]} | failed: {type(err).__name__}: {err} | |"
    return f"| {n:.0e} | {x.dtype.name} | {config[0]} | {t / n * 1e9:.2f} | {t / tb:.2f} |"


def memory_report(n: int) -> None:
    """Peak traced memory of one chop of ``n`` float64 values, in units of the input's size."""
    import tracemalloc

    x = np.random.default_rng(1).standard_normal(n)
    for label, options in (("fp16 RN", dict(format="h")), ("fp16 RZ", dict(format="h", round=4)),
                           ("fp16 SR5 Generator", dict(format="h", round=5))):
        chopper = pychop_compat.Chop(rng=np.random.default_rng(0) if "Generator" in label else None, **options)
        tracemalloc.start()
        t0 = time.perf_counter()
        out = chopper(x)
        elapsed = time.perf_counter() - t0
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        del out
        print(f"{label}: n = {n:.0e} float64 ({x.nbytes / 2**20:.0f} MiB): peak allocated during the call "
              f"{peak / 2**20:.1f} MiB = {peak / x.nbytes:.3f} x input ({elapsed:.2f} s)")


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="smoke run: n = 1e4 and 1e5, few repeats")
    parser.add_argument("--large", action="store_true", help="also n = 1e8")
    parser.add_argument("--memory", action="store_true", help="only report peak memory for n = 1e8")
    parser.add_argument("--threads", type=int, default=None, help="worker threads (default: %(default)s = engine's)")
    parser.add_argument("--no-pychop", action="store_true", help="skip PyPI pychop even if installed")
    parser.add_argument("--no-torch", action="store_true", help="skip the torch engine rows")
    args = parser.parse_args(argv)
    if args.threads:
        numpy_fast.set_threads(args.threads)
    if args.memory:
        memory_report(10**8)
        return
    if args.quick:
        sizes, budget, min_samples, max_samples = [10**4, 10**5], 0.05, 3, 20
    else:
        sizes, budget, min_samples, max_samples = [10**4, 10**5, 10**6, 10**7], 1.0, 5, 200
        if args.large:
            sizes.append(10**8)
    run(sizes, [np.float64, np.float32], budget, min_samples, max_samples,
        not args.no_pychop, not args.no_torch)


if __name__ == "__main__":
    main()
