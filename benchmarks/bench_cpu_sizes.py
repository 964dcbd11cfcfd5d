"""Time per element against n: chop to fp16 and bfloat16 (round to nearest) next to the peers' casts.

Run from the repository root::

    python benchmarks/bench_cpu_sizes.py                       # prints the table
    python benchmarks/bench_cpu_sizes.py --out benchmarks/results/cpu_sizes_<date>
    python benchmarks/bench_cpu_sizes.py --quick               # n = 1e3, 1e4 only

For standard normal float64 vectors of n = 10^3 .. 10^7 elements it times, as
the median of repeated samples in ns per element:

* ``pychop_compat``: ``Chop(format='h')(x)`` and ``Chop(format='b')(x)`` (NumPy engine);
* NumPy's cast round trip ``x.astype(np.float16).astype(np.float64)`` (fp16 only:
  NumPy has no bfloat16) and, with ml_dtypes installed, the same through
  ``ml_dtypes.bfloat16``;
* torch's ``t.half().double()`` and ``t.bfloat16().double()`` on a CPU tensor
  (these round twice through float32, so they are a speed reference only);
* PyPI ``pychop``'s chop-compatible class, where it is installed.

A cast does less than chop (no options, no subnormal or range switches, no
other formats), so it is a lower bound on what rounding can cost.  The output
is a CSV table (one row per n, one column per method) and, with ``--out
PREFIX``, ``PREFIX.csv`` plus ``PREFIX.json`` recording the machine, the date,
the versions and the command; the figure script ``docs/figures/cpu_speed.py``
plots them and the documentation shows the table.  Nothing is asserted.
"""

from __future__ import annotations

import argparse
import csv
import datetime
import io
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import pychop_compat  # noqa: E402
from pychop_compat import Chop  # noqa: E402
from pychop_compat.kernels import compiled  # noqa: E402

if compiled.available():  # the steady state: a process that has loaded the compiled engine
    compiled.kernels()    # ('auto' waits to load it in a new process: bench_first_call.py)


def _median_ns_per_element(func, n: int, budget: float = 0.5) -> float:
    func()  # warm up (allocations, caches, lazy imports)
    t0 = time.perf_counter()
    func()
    once = max(time.perf_counter() - t0, 1e-9)
    number = max(1, int(2e-3 / once))  # each sample at least ~2 ms
    samples = []
    for _ in range(int(min(25, max(5, budget / (once * number))))):
        t0 = time.perf_counter()
        for _ in range(number):
            func()
        samples.append((time.perf_counter() - t0) / number)
    return statistics.median(samples) / n * 1e9


def _contenders(x: np.ndarray) -> dict:
    """label -> zero-argument callable rounding x (to fp16 or bfloat16 and back to float64)."""
    out = {
        "pychop_compat fp16": lambda c=Chop(format="h"): c(x),
        "pychop_compat bf16": lambda c=Chop(format="b"): c(x),
        "NumPy cast fp16": lambda: x.astype(np.float16).astype(np.float64),
    }
    try:
        import ml_dtypes

        out["ml_dtypes cast bf16"] = lambda: x.astype(ml_dtypes.bfloat16).astype(np.float64)
    except ImportError:
        pass
    try:
        import torch

        t = torch.from_numpy(x)
        out["torch cast fp16"] = lambda: t.half().double()
        out["torch cast bf16"] = lambda: t.bfloat16().double()
    except ImportError:
        pass
    try:
        from pychop import Chop as PychopChop  # PyPI pychop (0.6.2: Chop(exp_bits, sig_bits)), never a dependency

        for label, (exp_bits, sig_bits) in (("fp16", (5, 10)), ("bf16", (8, 7))):
            chopper = PychopChop(exp_bits=exp_bits, sig_bits=sig_bits, rmode=1)
            out[f"pychop {label}"] = lambda c=chopper: c(x)
    except ImportError:
        pass
    return out


def _environment() -> dict:
    versions = {"python": platform.python_version(), "numpy": np.__version__,
                "pychop_compat": pychop_compat.__version__}
    for name in ("torch", "ml_dtypes", "pychop"):
        try:
            versions[name] = __import__(name).__version__
        except (ImportError, AttributeError):
            pass
    return {
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": f"{platform.machine()} {platform.system()} {platform.release()}, {os.cpu_count()} CPU(s), "
                   f"processor {platform.processor() or 'unknown'}",
        "versions": ", ".join(f"{k} {v}" for k, v in versions.items()),
        "command": "python benchmarks/bench_cpu_sizes.py " + " ".join(sys.argv[1:]),
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="n = 1e3 and 1e4 only, short samples")
    parser.add_argument("--out", metavar="PREFIX", help="write PREFIX.csv and PREFIX.json instead of printing")
    args = parser.parse_args(argv)
    sizes = [10**3, 10**4] if args.quick else [10**k for k in range(3, 8)]
    budget = 0.05 if args.quick else 0.6

    rng = np.random.default_rng(0)
    table: dict[int, dict[str, float]] = {}
    for n in sizes:
        x = rng.standard_normal(n)
        table[n] = {label: _median_ns_per_element(func, n, budget) for label, func in _contenders(x).items()}
    methods = list(next(iter(table.values())))
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(["n"] + methods)
    for n, row in table.items():
        writer.writerow([n] + [f"{row[m]:.2f}" for m in methods])
    if args.out:
        Path(f"{args.out}.csv").write_text(buffer.getvalue())
        Path(f"{args.out}.json").write_text(json.dumps(_environment(), indent=1) + "\n")
    else:
        print(json.dumps(_environment(), indent=1))
        sys.stdout.write(buffer.getvalue())
    return 0


if __name__ == "__main__":
    sys.exit(main())
