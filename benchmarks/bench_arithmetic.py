"""Cost of chopped arithmetic over the hand-written ``chop(op(a, b))`` it replaces.

Measured in one run, timings interleaved (A, B, A, B, ...) and the median of
each kept, so both sides see the same machine state.  The default clock is
the process's CPU time (``time.process_time``, all threads), which a machine
shared with other jobs disturbs far less than wall time; ``--clock wall``
measures wall time.  No assertions: the
output is a Markdown table for ``benchmarks/RESULTS.md``.

* elementwise: ``X + Y``, ``X * Y``, ``np.sqrt(X)`` on chopped arrays of n
  doubles against ``ch(x + y)`` etc. with a stateless ``Chop`` (the ratio is
  the figure; the issue asks for at most 1.5 at n = 1e7), the overhead in
  microseconds per operation on small arrays (at most 5 us asked), and the
  time against the plain NumPy operation ``x + y`` alone (issue 29 asks for a
  10-element operation at most 5 times the plain one);
* scalars: ``a + b``, ``a * b``, ``a / b`` on chopped scalars against the same
  Python float operation alone and against ``chop(a + b)`` on Python floats
  (the overhead over the bare float operation is the figure; at most 1 us asked).

Run from the repository root::

    python benchmarks/bench_arithmetic.py            # n = 10, 1e3, 1e5, 1e7
    python benchmarks/bench_arithmetic.py --quick    # n = 10, 1e3
    python benchmarks/bench_arithmetic.py --smoke    # one sample of each (checks the script)
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__), "..")))

from pychop_compat import Chop, chop, chopped  # noqa: E402
from pychop_compat.kernels import compiled  # noqa: E402


CLOCK = time.process_time  # CPU time of the process (all its threads); see --clock


def interleaved(funcs, repeats: int, number: int) -> list[float]:
    """Median seconds per call of each function, timed alternately."""
    samples = [[] for _ in funcs]
    for _ in range(repeats):
        for k, f in enumerate(funcs):
            start = CLOCK()
            for _ in range(number):
                f()
            samples[k].append((CLOCK() - start) / number)
    return [float(np.median(s)) for s in samples]


def elementwise(sizes, fmt: str = "h", smoke: bool = False):
    ch = Chop(format=fmt)
    rows = []
    rng = np.random.default_rng(0)
    for n in sizes:
        x, y = ch(rng.standard_normal(n)), ch(np.abs(rng.standard_normal(n)) + 3.0)
        X, Y = chopped(x, fmt), chopped(y, fmt)
        number = 1 if smoke else min(1000, max(1, int(2e5 // n)))
        repeats = 1 if smoke else (7 if n >= 10**6 else 11)
        cases = [
            ("x + y", lambda: x + y, lambda: ch(x + y), lambda: X + Y),
            ("x * y", lambda: x * y, lambda: ch(x * y), lambda: X * Y),
            ("sqrt(y)", lambda: np.sqrt(y), lambda: ch(np.sqrt(y)), lambda: np.sqrt(Y)),
        ]
        for name, bare, hand, wrapped in cases:
            t_bare, t_hand, t_wrapped = interleaved([bare, hand, wrapped], repeats, number)
            rows.append((n, name, t_bare, t_hand, t_wrapped))
    return rows


def scalars(fmt: str = "h", mode: int = 1, number: int = 200000, repeats: int = 9):
    o = {"format": fmt, "round": mode}
    a, b = chop(1 / 3, o), chop(2 / 7, o)
    A, B = chopped(a, o), chopped(b, o)
    rows = []
    for name, bare, hand, wrapped in (
        ("a + b", lambda: a + b, lambda: chop(a + b), lambda: A + B),
        ("a * b", lambda: a * b, lambda: chop(a * b), lambda: A * B),
        ("a / b", lambda: a / b, lambda: chop(a / b), lambda: A / B),
    ):
        t_bare, t_hand, t_wrapped = interleaved([bare, hand, wrapped], repeats, number)
        rows.append((name, t_bare, t_hand, t_wrapped))
    return rows


def stochastic_before_after(number: int = 100000, repeats: int = 9):
    """Chopped-scalar stochastic rounding: the scalar path used before the one-number draw
    (``numpy_fast.chop_scalar``, which draws an array of one) against the current one, on the
    same chopped-scalar objects, interleaved.  Same numbers either way (tested)."""
    from pychop_compat.arithmetic import Arithmetic, ChoppedScalar
    from pychop_compat.kernels import numpy_fast

    o = {"format": "h", "round": 5}
    new, old = Arithmetic(o), Arithmetic(o)
    spec, sources = old.spec, old.sources
    old.round_scalar = lambda v: numpy_fast.chop_scalar(v, spec, sources)
    a, b = chop(1 / 3, o), chop(2 / 7, o)
    An, Bn = ChoppedScalar._make(a, new), ChoppedScalar._make(b, new)
    Ao, Bo = ChoppedScalar._make(a, old), ChoppedScalar._make(b, old)
    times = interleaved([lambda: a + b, lambda: Ao + Bo, lambda: An + Bn, lambda: Ao / Bo,
                         lambda: An / Bn], repeats, number)
    return [("a + b", times[0], times[1], times[2]), ("a / b", None, times[3], times[4])]


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes only")
    parser.add_argument("--smoke", action="store_true", help="one sample of each (tests the script)")
    parser.add_argument("--format", default="h", help="chop format (default 'h')")
    parser.add_argument("--clock", choices=("cpu", "wall"), default="cpu",
                        help="cpu: process CPU time (default; steadier on a shared machine); wall: perf_counter")
    args = parser.parse_args(argv)
    global CLOCK
    CLOCK = time.process_time if args.clock == "cpu" else time.perf_counter
    if compiled.available():
        # A loop's steady state: under 'auto' a new process runs its first 0.5 s of calls on the
        # NumPy engine while the compiled kernels wait to load (docs/performance.rst, first call).
        compiled.warm_up()
    print(f"Clock: {args.clock} time; median of interleaved samples; NumPy {np.__version__}; "
          f"compiled engine {'loaded' if compiled.loaded() else 'not available'}\n")
    sizes = [10, 1000] if args.quick or args.smoke else [10, 1000, 100000, 10**7]
    print(f"Elementwise, format {args.format!r}, round to nearest: chopped arrays vs ch(op(x, y)) "
          "and the NumPy op alone\n")
    print("| n | operation | op | ch(op) | chopped | ratio | overhead per op | chopped / op |")
    print("|---|---|---|---|---|---|---|---|")
    for n, name, t_bare, t_hand, t_wrapped in elementwise(sizes, args.format, args.smoke):
        print(f"| {n:.0e} | `{name}` | {t_bare * 1e6:.2f} us | {t_hand * 1e6:.2f} us | {t_wrapped * 1e6:.2f} us | "
              f"{t_wrapped / t_hand if t_hand > 0 else float('nan'):.3f} | "
              f"{(t_wrapped - t_hand) * 1e6:+.2f} us | "
              f"{t_wrapped / t_bare if t_bare > 0 else float('nan'):.1f} |")
    for mode in (1, 4, 5):
        print(f"\nScalars, format {args.format!r}, round={mode}: chopped scalars vs Python floats\n")
        print("| operation | float op | chop(float op) | chopped scalar | overhead over float op |")
        print("|---|---|---|---|---|")
        number = 10 if args.smoke else (20000 if args.quick else 200000)
        for name, t_bare, t_hand, t_wrapped in scalars(args.format, mode, number, 1 if args.smoke else 9):
            print(f"| `{name}` | {t_bare * 1e9:.0f} ns | {t_hand * 1e9:.0f} ns | {t_wrapped * 1e9:.0f} ns | "
                  f"{(t_wrapped - t_bare) * 1e9:.0f} ns |")
    print("\nChopped scalars, fp16, round=5: the array-of-one draw (before) and the one-number draw (after)\n")
    print("| operation | float op | before | after |")
    print("|---|---|---|---|")
    number = 10 if args.smoke else (10000 if args.quick else 100000)
    for name, t_bare, t_before, t_after in stochastic_before_after(number, 1 if args.smoke else 9):
        bare = "-" if t_bare is None else f"{t_bare * 1e9:.0f} ns"
        print(f"| `{name}` | {bare} | {t_before * 1e9:.0f} ns | {t_after * 1e9:.0f} ns |")


if __name__ == "__main__":
    main()
