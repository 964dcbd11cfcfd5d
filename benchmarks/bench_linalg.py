"""Time and peak memory of chopped ``linalg.matmul`` (every summation method), ``linalg.lu`` and
``linalg.chol_lp``, compiled vs NumPy, side by side.

Run from the repository root::

    python benchmarks/bench_linalg.py                       # n = 500, 1000, 2000, fp16
    python benchmarks/bench_linalg.py --sizes 200 --engines numba
    python benchmarks/bench_linalg.py --sizes 1000 2000 --methods lu --repeats 3

Each (n, method, engine) runs in a fresh process: the time of one
``linalg.matmul(A, B, 'h', method=...)`` (method ``lu``: one ``linalg.lu(A,
'h')``; method ``chol``: one ``linalg.chol_lp(S, 'h')`` with ``S = (A + A.T) / 2 + n I``,
symmetric positive definite; method ``qr``: one ``linalg.house_qr_lp(A)``, fp16 whatever
``--format`` says) on standard normal n x n matrices (after a small warm-up call that
compiles or loads the kernels), and the growth of the process's peak
resident memory during that call, which counts every allocation (NumPy's,
Numba's, the result's); also the CPU time of the process during the call (all
its threads), a figure that the other work on a shared machine changes less.  ``numpy`` is the NumPy implementation (the readable
reference: for matmul the code before the compiled kernels, now in column
groups for 'pairwise' and 'blocked'; for LU the vectorised elimination), ``numba``
the compiled kernels.  With ``--repeats R`` the engines take turns R times
and the best time of each is printed (these machines are shared).  No
assertion is made.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

_CHILD = """
import json, resource, sys, time
import numpy as np
from pychop_compat import linalg
n, method, fmt = int(sys.argv[1]), sys.argv[2], sys.argv[3]
rng = np.random.default_rng(0)
A, B = rng.standard_normal((n, n)), rng.standard_normal((n, n))
if method == "lu":
    run = lambda A, B: linalg.lu(A, fmt).U
elif method == "chol":
    run = lambda A, B: linalg.chol_lp((A + A.T) / 2 + A.shape[0] * np.eye(A.shape[0]), fmt)[0]
elif method == "qr":  # house_qr_lp runs in fp16 only
    run = lambda A, B: linalg.house_qr_lp(A)[1]
else:
    run = lambda A, B: linalg.matmul(A, B, fmt, method=method)
run(A[:300, :300], B[:300, :300])  # compile or load the kernels (every LU path: panels, threads)
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
cpu0 = time.process_time()
t0 = time.perf_counter()
C = run(A, B)
seconds = time.perf_counter() - t0
cpu = time.process_time() - cpu0
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"seconds": seconds, "cpu_seconds": cpu, "peak_growth_mib": (peak - before) / 1024,
                  "result_mib": C.nbytes / 2**20}))
"""


def measure(n: int, method: str, engine: str, fmt: str) -> dict:
    env = dict(os.environ, PYCHOP_COMPAT_CPU_ENGINE=engine, PYTHONPATH=str(ROOT))
    out = subprocess.run([sys.executable, "-c", _CHILD, str(n), method, fmt], capture_output=True, text=True,
                         env=env, timeout=7200)
    if out.returncode != 0:
        return {"error": out.stderr.strip().splitlines()[-1] if out.stderr.strip() else "failed"}
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[500, 1000, 2000])
    parser.add_argument("--methods", nargs="+",
                        default=["recursive", "fma", "pairwise", "blocked", "lu", "chol", "qr"],
                        help="summation methods of matmul, 'lu', 'chol' and 'qr'")
    parser.add_argument("--engines", nargs="+", default=["numba", "numpy"])
    parser.add_argument("--format", default="h")
    parser.add_argument("--repeats", type=int, default=1, help="runs per engine, taking turns; the best is shown")
    args = parser.parse_args(argv)
    print(f"linalg.matmul(A, B, {args.format!r}) and linalg.lu(A, {args.format!r}), n x n standard normal, "
          f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {os.cpu_count()} CPU(s), "
          f"best of {args.repeats}\n")
    print("| n | method | engine | seconds | CPU seconds | peak memory growth (MiB) | result (MiB) "
          "| NumPy / compiled |")
    print("|---:|---|---|---:|---:|---:|---:|---:|")
    for n in args.sizes:
        for method in args.methods:
            rows = {}
            for _ in range(args.repeats):
                for engine in args.engines:
                    r = measure(n, method, engine, args.format)
                    if "error" in r or r["seconds"] < rows.get(engine, {}).get("seconds", float("inf")):
                        rows[engine] = r
            for engine, r in rows.items():
                if "error" in r:
                    print(f"| {n} | {method} | {engine} | failed: {r['error']} | | | | |", flush=True)
                    continue
                speedup = ""
                if engine == "numpy" and "seconds" in rows.get("numba", {}):
                    speedup = f"{r['seconds'] / rows['numba']['seconds']:.1f}"
                print(f"| {n} | {method} | {engine} | {r['seconds']:.2f} | {r['cpu_seconds']:.2f} | "
                      f"{r['peak_growth_mib']:.1f} | "
                      f"{r['result_mib']:.1f} | {speedup} |", flush=True)


if __name__ == "__main__":
    main()
