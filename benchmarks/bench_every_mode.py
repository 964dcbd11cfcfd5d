"""Every mode compiled (issue 29, item 3): each mode's call against fp16 round to nearest.

Run from the repository root::

    python benchmarks/bench_every_mode.py            # n = 1000 and 10^6; about a minute
    python benchmarks/bench_every_mode.py --quick    # fewer rounds
    python benchmarks/bench_every_mode.py --smoke --sizes 1e3   # one call per case

Everything is timed in one process, interleaved: each round times every case once, and a
case's figure is its fastest round.  The input is a standard normal float64 vector.  Each row
is ``dispatch.round_array`` under ``cpu_engine('numba')`` (the compiled engine where it takes
the spec), with fresh sources made outside the timing: MATLAB's stream (``rng(1)`` once), or
the counter of ``rng=<int>``.  ``ratio`` is the row's time over the compiled fp16 round to
nearest call (``fp16 RN``) of the same size; ``same mode fp16`` over the compiled chop.m
spec with the same mode, flips and source in fp16 (what the row adds to chop.m's own spec);
``before`` is the row's time on the kernel that took it before (the NumPy engine for chop's
rules, the executable specification for CPFloat's) over the row's own time.
Nothing is asserted.
"""

from __future__ import annotations

import argparse
import sys
import timeit
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if (ROOT / "pychop_compat").is_dir():  # a copy outside a checkout runs the tree on PYTHONPATH
    sys.path.insert(0, str(ROOT))

from pychop_compat import rng  # noqa: E402
from pychop_compat.engines import dispatch  # noqa: E402
from pychop_compat.kernels import compiled  # noqa: E402
from pychop_compat.random.sources import MATLAB_STREAM, counter_sources  # noqa: E402
from pychop_compat.rounding import make_spec  # noqa: E402

#: (name, spec, source, same-mode fp16 row, kernel before).
CASES = [
    ("fp16 RN", make_spec("h", 1, rules="chop"), "stream", None, "numpy"),
    ("fp16 SR5 stream", make_spec("h", 5, rules="chop"), "stream", None, "numpy"),
    ("fp16 SR5 counter", make_spec("h", 5, rules="chop"), "counter", None, "numpy"),
    ("fp16 RN flips p=0.01", make_spec("h", 1, rules="chop", flip=1, p=0.01), "stream", None, "numpy"),
    ("E8M0 RN (chop)", make_spec("float8_e8m0fnu", 1, rules="chop"), "stream", "fp16 RN", "numpy"),
    ("E8M0 SR5 stream (chop)", make_spec("float8_e8m0fnu", 5, rules="chop"), "stream", "fp16 SR5 stream", "numpy"),
    ("fp16 SR5 8 bits stream", make_spec("h", 5, rules="chop", random_bits=8), "stream", "fp16 SR5 stream", "numpy"),
    ("fp16 SR5 8 bits counter", make_spec("h", 5, rules="chop", random_bits=8), "counter", "fp16 SR5 counter",
     "numpy"),
    ("cpfloat fp16 SR5 stream", make_spec("binary16", 5), "stream", "fp16 SR5 stream", "reference"),
    ("cpfloat fp16 SR6 counter", make_spec("binary16", 6), "counter", "fp16 SR5 counter", "reference"),
    ("cpfloat fp16 SR5 8 bits", make_spec("binary16", 5, random_bits=8), "stream", "fp16 SR5 stream", "reference"),
    ("cpfloat fp16 RN flips p=0.01", make_spec("binary16", 1, flip=1, p=0.01), "stream", "fp16 RN flips p=0.01",
     "reference"),
    ("cpfloat fp16 RN encoding flips", make_spec("binary16", 1, flip=2, p=0.01), "stream", "fp16 RN flips p=0.01",
     "reference"),
]


def _sources(kind: str):
    return MATLAB_STREAM if kind == "stream" else counter_sources(1)


def _time(x: np.ndarray, spec, kind: str, kernel, number: int) -> float:
    sources = _sources(kind)
    return timeit.timeit(lambda: dispatch.round_array(x, spec, sources, kernel=kernel), number=number) / number


def main(argv: list | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer rounds")
    parser.add_argument("--smoke", action="store_true", help="one call per case, no timing")
    parser.add_argument("--sizes", type=float, nargs="+", default=[1e3, 1e6], help="array sizes")
    args = parser.parse_args(argv)
    if not compiled.available():
        print("Numba is not installed: nothing compiled to time.")
        return 0
    rounds = 1 if args.smoke else (4 if args.quick else 10)
    gen = np.random.default_rng(2026)
    rng(1)
    print("| case | n | kernel | us | ratio to fp16 RN | ratio to same mode fp16 | before / now |")
    print("|---|---|---|---:|---:|---:|---:|")
    with compiled.cpu_engine("numba"):
        for n in (int(size) for size in args.sizes):
            x = gen.standard_normal(n)
            number = 1 if args.smoke else max(1, 200_000 // n)  # (about 5 ms a sample at n = 1000)
            best: dict = {}
            for _ in range(rounds):  # interleaved: every case once per round
                for name, spec, kind, _, before in CASES:
                    for kernel in (None, before):
                        key = (name, kernel)
                        best[key] = min(best.get(key, np.inf), _time(x, spec, kind, kernel, number))
            for name, spec, kind, same, before in CASES:
                now = best[(name, None)]
                kernel = dispatch.route(x, spec, _sources(kind)).kernel.name
                same_ratio = f"{now / best[(same, None)]:.2f}" if same else ""
                print(f"| {name} | {n} | {kernel} | {now * 1e6:.1f} | {now / best[('fp16 RN', None)]:.2f} | "
                      f"{same_ratio} | {best[(name, before)] / now:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
