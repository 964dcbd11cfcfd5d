"""Dated chop at today's speed: ``chop_at(date)`` against ``chop`` (issue 29, item 2).

Run from the repository root::

    python benchmarks/bench_chop_at.py            # about a minute
    python benchmarks/bench_chop_at.py --quick    # fewer rounds
    python benchmarks/bench_chop_at.py --old      # also 2020-05-01 (the rules before 2020-05-14)
    python benchmarks/bench_chop_at.py --cpu-time # CPU time, for a machine shared with other work
    python benchmarks/bench_chop_at.py --old --round 5   # stochastic rounding (MATLAB's stream)

Everything is timed in one process, interleaved: each round times every case once
(``timeit`` with enough calls for about 10 ms per sample), and a case's figure is its
fastest round.  The inputs: the scalar 1/3 (a Python float), standard normal float64
vectors of 10, 1000 and 10^6 elements and a 400 x 400 matrix; the options
``{'format': 'h'}`` on every call (``--round N``: ``{'format': 'h', 'round': N}``).  Dates: a recent one (2024-01-01: today's rules),
2020-05-20 (the tiny-number rule of before 2020-06-16; exponents, overflow and
truncation as today) and, with ``--old``, 2020-05-01 (older rules, route 'old rules': the
compiled engine's loops, or the NumPy engine's rounding with the old rules on its special
elements).  Each engine setting (``auto``: Numba when installed; ``numpy``) gets its own
rows, each ratio against ``chop`` on the same engine in the same round.  Nothing is
asserted; the target is a ratio of at most 1.2 for every size.
"""

from __future__ import annotations

import argparse
import sys
import time
import timeit
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if (ROOT / "pychop_compat").is_dir():  # a copy outside a checkout runs the tree on PYTHONPATH
    sys.path.insert(0, str(ROOT))

from pychop_compat import chop, chop_at  # noqa: E402
from pychop_compat.kernels.compiled import available, cpu_engine  # noqa: E402

H = {"format": "h"}


def _inputs() -> list:
    r = np.random.default_rng(0)
    return [("scalar", 1 / 3), ("10", r.standard_normal(10)), ("1000", r.standard_normal(1000)),
            ("400 x 400", r.standard_normal((400, 400))), ("10^6", r.standard_normal(10**6))]


def _time(func, x, options: dict, budget: float, clock) -> float:
    """Seconds per call of ``func(x, options)`` in one sample of about ``budget`` seconds of ``clock``."""
    timer = timeit.Timer(lambda: func(x, options), timer=clock)
    number = 1
    while True:
        elapsed = timer.timeit(number)
        if elapsed >= budget or number >= 1 << 20:
            return elapsed / number
        number *= 2 if elapsed * 2 >= budget else max(2, int(budget / max(elapsed, 1e-9)))


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="5 rounds instead of 15")
    parser.add_argument("--old", action="store_true", help="also 2020-05-01 (the rules before 2020-05-14)")
    parser.add_argument("--cpu-time", action="store_true",
                        help="time by the process's CPU time (less disturbed by other processes on a loaded machine)")
    parser.add_argument("--round", type=int, default=1, help="the rounding mode of every call (default 1)")
    args = parser.parse_args(argv)
    options = H if args.round == 1 else dict(H, round=args.round)
    clock = time.process_time if args.cpu_time else time.perf_counter
    rounds = 5 if args.quick else 15
    dates = ["2024-01-01", "2020-05-20"] + (["2020-05-01"] if args.old else [])
    engines = (["auto"] if available() else []) + ["numpy"]
    functions = {"chop": chop, **{date: chop_at(date) for date in dates}}
    best: dict = {}
    for _ in range(rounds):
        for engine in engines:
            with cpu_engine(engine):
                for size, x in _inputs():
                    for name, func in functions.items():
                        func(x, options)  # (the first call of a case resolves and plans)
                        seconds = _time(func, x, options, 0.01, clock)
                        key = (engine, size, name)
                        best[key] = min(best.get(key, np.inf), seconds)
    print(f"chop_at(date)(x, {options}) / chop(x, {options}): fastest of {rounds} interleaved rounds "
          f"({'CPU' if args.cpu_time else 'wall-clock'} time)\n")
    header = f"{'engine':<7} {'size':<10} {'chop':>10}" + "".join(f" {d:>22}" for d in dates)
    print(header)
    print("-" * len(header))
    for engine in engines:
        for size, _x in _inputs():
            base = best[(engine, size, "chop")]
            cells = "".join(f" {best[(engine, size, d)] * 1e6:>11.1f} us {best[(engine, size, d)] / base:>5.2f}x"
                            for d in dates)
            print(f"{engine:<7} {size:<10} {base * 1e6:>7.1f} us{cells}")


if __name__ == "__main__":
    main()
