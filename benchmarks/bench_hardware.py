"""Time of the block-FMA model of a matrix unit (``hardware.matmul``, H100, fp16 inputs, fp32
output) against chopped ``linalg.matmul(A, B, 'h', method='fma')``, side by side in one process.

Run from the repository root::

    python benchmarks/bench_hardware.py            # n = 256, 512, 1024
    python benchmarks/bench_hardware.py --quick    # n = 256 only
    python benchmarks/bench_hardware.py --sizes 2048 --repeats 5

For each n, on standard normal n x n matrices, after a small warm-up call of
each (which compiles or loads the Numba kernels), the two take turns
``--repeats`` times and the best time of each is printed, with their ratio
(model / linalg): the compiled block-FMA kernel against the compiled
chopped-FMA kernel, both on all the process's threads.  Then the NumPy
implementation of the model (``cpu_engine('numpy')``, the oracle, which
builds an (M, N, K) array) at small n, for reference.  The time of the first
call in this process (import of the kernels, from Numba's cache or compiled)
is printed first.  No assertion is made; these machines are shared, so
compare only numbers printed by one run.
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np


def best_of(function, repeats: int) -> float:
    """The least wall time of ``repeats`` calls of ``function``."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        function()
        times.append(time.perf_counter() - start)
    return min(times)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[256, 512, 1024])
    parser.add_argument("--quick", action="store_true", help="n = 256 only")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--numpy-sizes", type=int, nargs="+", default=[64, 128])
    args = parser.parse_args(argv)
    sizes = [256] if args.quick else args.sizes

    start = time.perf_counter()
    from pychop_compat import hardware, linalg
    from pychop_compat.kernels import compiled

    hardware.matmul(np.ones((4, 4)), np.ones((4, 4)))
    print(f"first call of hardware.matmul (imports, kernels from the cache or compiled): "
          f"{time.perf_counter() - start:.2f} s")
    linalg.matmul(np.ones((4, 4)), np.ones((4, 4)), "h", method="fma")
    print(f"numba available: {compiled.available()}; CPU threads: {os.cpu_count()}")
    rng = np.random.default_rng(0)
    print(f"{'n':>6} {'hardware.matmul H100 [s]':>25} {'linalg fma h [s]':>17} {'ratio':>7}")
    for n in sizes:
        A, B = rng.standard_normal((n, n)), rng.standard_normal((n, n))
        model_best, linalg_best = float("inf"), float("inf")
        for _ in range(args.repeats):  # take turns: the load of the machine changes both alike
            model_best = min(model_best, best_of(lambda: hardware.matmul(A, B, model="H100"), repeats=1))
            linalg_best = min(linalg_best, best_of(lambda: linalg.matmul(A, B, "h", method="fma"), repeats=1))
        print(f"{n:>6} {model_best:>25.4f} {linalg_best:>17.4f} {model_best / linalg_best:>7.2f}")
    print("NumPy implementation of the model (the oracle, an (M, N, K) array):")
    for n in args.numpy_sizes:
        A, B = rng.standard_normal((n, n)), rng.standard_normal((n, n))
        with compiled.cpu_engine("numpy"):
            seconds = best_of(lambda: hardware.matmul(A, B, model="H100"), args.repeats)
        compiled_seconds = best_of(lambda: hardware.matmul(A, B, model="H100"), args.repeats)
        print(f"{n:>6} numpy {seconds:.4f} s, compiled {compiled_seconds:.4f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
