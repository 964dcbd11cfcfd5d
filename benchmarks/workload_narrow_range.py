"""A real workload as the benchmark: Mary and Mikaitis' narrow-range matmul study, ported line by line.

Source (cited, not copied): github.com/north-numerical-computing/narrow-range-FP-underflow-experiments,
files ``experiments.m`` and ``matmul_test.m`` at commit 95b7205cf728f7eca812851f8b9420d49d905b9a
(2024-08-17; BSD-2-Clause), the MATLAB code of Sec. 5 of T. Mary and M. Mikaitis, "Error Analysis of
Matrix Multiplication with Narrow Range Floating-Point Arithmetic", hal-04671474, 2024.  Its data files
were made with MATLAB R2024a and CPFloat 0ddba87dd19adf5da154e228b68f86e60051f102.

The study multiplies 10 x n by n x 10 matrices with elements of magnitude 10^-10..10^10: it scales
them into an 8-bit input format, rounds them with ``cpfloat`` and accumulates the n outer products in
binary16 or binary32, rounding after every product and every addition (``cpfloat`` on a 10 x 10
array, twice per outer product): about 1.56e9 calls in full (n up to 10^6, 5 format pairs, 1 to 3
words, subnormals on and off, with and without the range limits).

The slice run here: the study's first experiment (``rng(1)``; input fp8-e4m3, accumulation binary16,
``p = 1`` word), the first 25 of its 40 sizes (n = 10 .. 11937), subnormals off then on; the MATLAB
stream is advanced past the 15 larger sizes between the two (their draws are made and discarded), so
that every row is the study's own row.  ``--quick``: the first 9 sizes (n <= 106), subnormals off.

What is checked on every run: the printed rows against the study's published data files, character
for character (``%e``, 7 digits); the matrices the chopped products give (LABM, with and without the
range limits) bit for bit, and the errors to 1e-12 (relative), against GNU Octave 7.3 running the
same lines with CPFloat's MEX (commit 0ddba87) on the same inputs (stored in
``tests/data/workload_narrow_range.json``; Octave's ``rand`` is not MATLAB's, so the inputs drawn
here from MATLAB's stream are passed to it, see ``--export-inputs``).

Run from the repository root::

    python benchmarks/workload_narrow_range.py             # the slice: its time and the checks
    python benchmarks/workload_narrow_range.py --quick     # a few seconds
    python benchmarks/workload_narrow_range.py --compare /work/baseline . --runs 3
                                                           # two trees, interleaved, min of the runs
    python benchmarks/workload_narrow_range.py --per-call  # one call of cpfloat, chop, the inner step (us)
    python benchmarks/workload_narrow_range.py --export-inputs DIR   # inputs for the Octave run
    python benchmarks/workload_narrow_range.py --store-octave DIR    # store the Octave run's results

The Octave side is ``benchmarks/workload_narrow_range.m`` (its header says how to build the MEX).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from pychop_compat import clear_cpfloat, cpfloat, rand, randi, rng

REPOSITORY = Path(__file__).resolve().parents[1]
REFERENCE = REPOSITORY / "tests" / "data" / "workload_narrow_range.json"
SIZES_IN_SLICE, SIZES_IN_QUICK = 25, 9


def study_sizes() -> list:
    """``nlist = floor(logspace(1,6,40))``, with MATLAB's linspace (the last point is 6 exactly)."""
    exponents = 1 + np.arange(40) * (6 - 1) / 39
    exponents[-1] = 6
    return [int(n) for n in np.floor(10.0 ** exponents)]


def format_parameters(name: str) -> tuple:
    """``[~, options] = cpfloat([], struct('format', name)); options.params``."""
    t, emin, emax = cpfloat(None, {"format": name}).params
    return t, emin, emax


def previous_pow2(x):
    """Replace elements of x by the immediately inferior power of two (the study's helper)."""
    return 2.0 ** np.floor(np.log2(x))


def norm_inf(matrix) -> float:
    """``norm(X, 'inf')``: the largest row sum of ``abs(X)``, each row added left to right as
    LAPACK's dlange and Octave add it (``np.cumsum`` is sequential; ``np.sum`` adds in pairs)."""
    return float(np.max(np.cumsum(np.abs(matrix), axis=1)[:, -1]))


def matmul(A: list, B: list, options_accum: dict, p: int, u: float):
    """The study's ``matmul``: the outer products of the words, each rounded, each sum rounded."""
    C = np.zeros((A[0].shape[0], B[0].shape[1]))
    for j in range(1, p + 1):
        for k in range(1, p + 1):
            if j + k - 2 < p:
                for i in range(A[j - 1].shape[1]):
                    C = cpfloat(C + u ** (j + k - 2) * cpfloat(np.outer(A[j - 1][:, i], B[k - 1][i, :]),
                                                                options_accum), options_accum)
    return C


def split_words(temp1, temp2, options_input: dict, p: int, u: float) -> tuple:
    """Round ``L.*A`` and ``B.*M`` to the input format, in ``p`` words (the study's loop on ``j``)."""
    LA = [cpfloat(temp1, options_input)]
    BM = [cpfloat(temp2, options_input)]
    for j in range(2, p + 1):
        temp1 = temp1 - LA[j - 2] * u ** (j - 2)
        temp2 = temp2 - BM[j - 2] * u ** (j - 2)
        LA.append(cpfloat(temp1 / u ** (j - 1), options_input))
        BM.append(cpfloat(temp2 / u ** (j - 1), options_input))
    return LA, BM


def scaled_product_error(scaled: tuple, options_input: dict, options_accum: dict, p: int, u: float) -> tuple:
    """LABM and the error of C: the study's lines run twice per size, with the range limits and
    without (``_nrl``), written here once."""
    A, B, L, M, Linv, Minv, Ctrue = scaled
    LA, BM = split_words(L * A, B * M, options_input, p, u)
    LABM = matmul(LA, BM, options_accum, p, u)
    C = Linv * LABM * Minv
    return LABM, norm_inf(C - Ctrue) / norm_inf(A) / norm_inf(B)


def draw_inputs(m: int, n: int, q: int, l: float) -> tuple:
    """Matrix elements: uniformly distributed logarithms in [-l, l], random signs (MATLAB's stream)."""
    A = 10.0 ** (rand(m, n) * 2 * l - l)
    B = 10.0 ** (rand(n, q) * 2 * l - l)
    sA = randi(2, m, n) * 2 - 3
    sB = randi(2, n, q) * 2 - 3
    return A * sA, B * sB


def skip_draws(sizes: list, m: int, q: int) -> None:
    """Advance MATLAB's stream past the study's draws for ``sizes`` (4 uniforms per element)."""
    left = sum(2 * (m * n + n * q) for n in sizes)
    while left:
        chunk = min(left, 1 << 20)
        rand(1, chunk)
        left -= chunk


def matmul_test(input_format: str, accum_format: str, p: int, sizes: list, subnormal_settings: tuple,
                options_input: dict, options_accum: dict, inputs=None, on_size=None) -> list:
    """``matmul_test.m`` for ``sizes`` (a prefix of the study's 40) and ``subnormal_settings``.

    ``options_input`` and ``options_accum`` are the caller's: in MATLAB they are variables of the
    calling script, kept from one run to the next, and which fields they hold matters (CPFloat keeps
    the previous value of a field left out: ``explim``, first set in the loop, is the last call's).
    Returns one row per (subnormals_on, n): the data file's ``n error bound error-nrl bound-nrl``
    and the two chopped products.  ``inputs(subnormals_on, n)`` replaces the draws (the Octave
    check passes the same matrices); ``on_size(subnormals_on, n, A, B)`` sees each pair drawn."""
    options_input["format"] = input_format
    t, emin, emax = format_parameters(input_format)
    u = 2.0 ** -t
    fmin = 2.0 ** emin
    # Special treatment for the maximum value of fp8-e4m3, as per the OFP8 format specification.
    fmax = 2.0 ** emax * (2 - 4 * u) if input_format == "fp8-e4m3" else 2.0 ** emax * (2 - 2 * u)
    options_accum["format"] = accum_format
    T, Emin, Emax = format_parameters(accum_format)
    U = 2.0 ** -T
    Fmin = 2.0 ** Emin
    Fmax = 2.0 ** Emax * (2 - 2 * U)
    m, q, l = 10, 10, 10
    rows = []
    for subnormals_on in subnormal_settings:
        options_input["subnormal"] = subnormals_on
        options_accum["subnormal"] = subnormals_on
        for n in sizes:
            A, B = draw_inputs(m, n, q, l) if inputs is None else inputs(subnormals_on, n)
            if on_size is not None:
                on_size(subnormals_on, n, A, B)
            Ctrue = A @ B
            # Diagonal scaling matrices L and M such that the elements of L*A and B*M are at most theta.
            theta = min(fmax, np.sqrt(Fmax / n))
            L = previous_pow2(theta / np.max(np.abs(A), axis=1, keepdims=True))
            M = previous_pow2(theta / np.max(np.abs(B), axis=0, keepdims=True))
            Linv = 1 / L
            Minv = 1 / M
            scaled = (A, B, L, M, Linv, Minv, Ctrue)
            LABM, err = scaled_product_error(scaled, options_input, options_accum, p, u)
            # The product as if there were no range limitations.
            options_input["explim"] = 0
            options_accum["explim"] = 0
            LABM_nrl, err_nrl = scaled_product_error(scaled, options_input, options_accum, p, u)
            options_input["explim"] = 1
            options_accum["explim"] = 1
            bound = 2 * u + n * U + 4 * n ** 2 * fmin / theta + 4 * n ** 2 * Fmin / theta ** 2  # (3.26)
            bound_nrl = 2 * u + n * U
            rows.append({"subnormals": subnormals_on, "n": n, "err": err, "bound": bound,
                         "err_nrl": err_nrl, "bound_nrl": bound_nrl, "LABM": LABM, "LABM_nrl": LABM_nrl})
    return rows


def data_line(row: dict) -> str:
    """The study's ``fprintf(fileID, '%d %e %e %e %e \\n', ...)`` line (without the newline)."""
    return "%d %e %e %e %e " % (row["n"], row["err"], row["bound"], row["err_nrl"], row["bound_nrl"])


def column_major_digest(matrix) -> str:
    """SHA-256 of the matrix's float64 bytes in MATLAB's (column-major) order."""
    return hashlib.sha256(np.asarray(matrix, dtype="<f8").tobytes(order="F")).hexdigest()


def cpfloat_calls(sizes: list, settings: tuple, p: int) -> int:
    """Calls per run: per size and range setting, 2p to split the words and 2 per outer product."""
    products = sum(1 for j in range(p) for k in range(p) if j + k < p)
    return len(settings) * sum(2 * (2 * p + 2 * products * n) for n in sizes)


def run_slice(quick: bool, inputs=None, on_size=None) -> dict:
    """The slice of the study (see the module notes), timed; the rows and the times."""
    sizes = study_sizes()
    kept = sizes[:SIZES_IN_QUICK if quick else SIZES_IN_SLICE]
    settings = (0,) if quick else (0, 1)
    start = time.perf_counter()
    cpfloat(np.zeros((10, 10)), {"format": "binary16"})  # the one-time setup (kernels loaded), timed apart
    first_call_seconds = time.perf_counter() - start
    clear_cpfloat()  # experiments.m: clear all; rng(1);
    rng(1)
    options_input: dict = {}
    options_accum: dict = {}
    rows, loop_seconds, skip_seconds = [], 0.0, 0.0
    for subnormals_on in settings:  # (matmul_test's loop, cut in two to time the skipped draws apart)
        start = time.perf_counter()
        rows += matmul_test("fp8-e4m3", "binary16", 1, kept, (subnormals_on,), options_input, options_accum,
                            inputs, on_size)
        loop_seconds += time.perf_counter() - start
        if subnormals_on == 0 and 1 in settings and inputs is None:
            start = time.perf_counter()
            skip_draws(sizes[len(kept):], 10, 10)
            skip_seconds += time.perf_counter() - start
    return {"rows": rows, "loop_s": loop_seconds, "skip_s": skip_seconds, "first_call_s": first_call_seconds,
            "calls": cpfloat_calls(kept, settings, 1), "sizes": kept, "settings": settings}


def checks(result: dict) -> dict:
    """The rows against the published lines and the Octave run (where the reference has them)."""
    reference = json.loads(REFERENCE.read_text())
    published = {(r["subnormals"], r["n"]): r["line"] for r in reference["published"]}
    octave = {(r["subnormals"], r["n"]): r for r in reference["octave"]["rows"]}
    counts = {"published": [0, 0], "LABM bits": [0, 0], "err to 1e-12": [0, 0]}
    for row in result["rows"]:
        key = (row["subnormals"], row["n"])
        if key in published:
            counts["published"][0] += data_line(row) == published[key]
            counts["published"][1] += 1
        if key in octave:
            theirs = octave[key]
            counts["LABM bits"][0] += (column_major_digest(row["LABM"]) == theirs["LABM_sha256"]
                                       and column_major_digest(row["LABM_nrl"]) == theirs["LABM_nrl_sha256"])
            counts["LABM bits"][1] += 1
            # Ctrue = A*B is BLAS's: its last bits may differ between NumPy's and Octave's BLAS.
            counts["err to 1e-12"][0] += all(abs(row[name] - float(theirs[name])) <= 1e-12 * abs(float(theirs[name]))
                                             for name in ("err", "err_nrl"))
            counts["err to 1e-12"][1] += 1
    return counts


def report(result: dict) -> None:
    rows = result["rows"]
    print(f"Slice: fp8-e4m3 -> binary16, p = 1, n = {result['sizes'][0]}..{result['sizes'][-1]} "
          f"({len(result['sizes'])} sizes), subnormals {list(result['settings'])}; "
          f"{result['calls']} cpfloat calls, {result['calls'] - 4 * len(rows)} of them on 10 x 10 arrays "
          f"({4 * len(rows)} on 10 x n and n x 10)")
    print()
    print("| subnormals | n | error | bound | error-nrl | bound-nrl |")
    print("|---:|---:|---:|---:|---:|---:|")
    for row in rows:
        print("| %d | %d | %e | %e | %e | %e |" % (row["subnormals"], row["n"], row["err"], row["bound"],
                                                   row["err_nrl"], row["bound_nrl"]))
    print()
    print("Checks")
    print()
    print("| check | agree | rows |")
    print("|---|---:|---:|")
    for name, (agree, total) in checks(result).items():
        print(f"| {name} | {agree} | {total} |")
    print()
    print("Times")
    print()
    print("| part | s | us per cpfloat call |")
    print("|---|---:|---:|")
    print(f"| loop over the sizes | {result['loop_s']:.3f} | {1e6 * result['loop_s'] / result['calls']:.2f} |")
    print(f"| stream advanced (discarded draws) | {result['skip_s']:.3f} | |")
    print(f"| first call (one-time setup, before the loop) | {result['first_call_s']:.3f} | |")


def compare(trees: list, runs: int, quick: bool) -> None:
    """This script on each tree in a fresh process, interleaved; the min and median of the runs."""
    seconds: dict = {str(tree): [] for tree in trees}
    for _ in range(runs):
        for tree in trees:
            command = [sys.executable, str(Path(__file__).resolve()), "--json"] + (["--quick"] if quick else [])
            env = dict(os.environ, PYTHONPATH=str(Path(tree).resolve()))
            out = subprocess.run(command, env=env, capture_output=True, text=True, check=True)
            seconds[str(tree)].append(json.loads(out.stdout.splitlines()[-1]))
    print("| tree | loop s (min) | loop s (median) | us per call (min) | loop s, each run | first call s (min) "
          "| published lines | LABM bits |")
    print("|---|---:|---:|---:|---|---:|---:|---:|")
    for tree, results in seconds.items():
        loops = sorted(r["loop_s"] for r in results)
        calls = results[0]["calls"]
        checked = results[0]["checks"]
        print(f"| {tree} | {loops[0]:.2f} | {loops[len(loops) // 2]:.2f} | {1e6 * loops[0] / calls:.2f} | "
              f"{', '.join('%.2f' % r['loop_s'] for r in results)} | "
              f"{min(r['first_call_s'] for r in results):.2f} | "
              f"{'/'.join(map(str, checked['published']))} | {'/'.join(map(str, checked['LABM bits']))} |")


def per_call(calls: int = 20000, repeats: int = 5) -> dict:
    """The cost of one call, as ``workload_narrow_range.m`` times it under Octave: the minimum over
    ``repeats`` of the mean over ``calls`` calls, in microseconds."""
    from pychop_compat import chop

    X = np.random.default_rng(1).random((10, 10)) - 0.5
    a, b = np.random.default_rng(2).random(10), np.random.default_rng(3).random(10)
    options_accum = {"format": "binary16", "subnormal": 0, "explim": 1}
    chop(None, {"format": "h"})
    steps = {
        "cpfloat 10x10": lambda: cpfloat(X, options_accum),
        "inner-loop step (2 cpfloat)": lambda: cpfloat(C + cpfloat(np.outer(a, b), options_accum), options_accum),
        "chop 10x10": lambda: chop(X),
        "chop 10x10 with options": lambda: chop(X, {"format": "h"}),
    }
    C = np.zeros((10, 10))
    best = {name: float("inf") for name in steps}
    for _ in range(repeats):
        for name, step in steps.items():
            count = calls if name.startswith(("cpfloat", "inner")) else calls // 10
            start = time.perf_counter()
            for _ in range(count):
                step()
            best[name] = min(best[name], (time.perf_counter() - start) / count * 1e6)
    return best


def export_inputs(directory: Path) -> None:
    """Write the slice's inputs (column-major float64) for ``workload_narrow_range.m``."""
    directory.mkdir(parents=True, exist_ok=True)
    with open(directory / "inputs.bin", "wb") as stream:
        def write(subnormals_on, n, A, B):
            stream.write(np.asarray(A, "<f8").tobytes(order="F"))
            stream.write(np.asarray(B, "<f8").tobytes(order="F"))
        result = run_slice(quick=False, on_size=write)
    (directory / "sizes.txt").write_text(" ".join(map(str, result["sizes"])) + "\n")


def store_octave(directory: Path) -> None:
    """Read the Octave run's results (``results.txt``, ``labm.bin``) into the stored reference,
    after checking that this tree gives the same chopped products on the same inputs."""
    inputs_file = np.fromfile(directory / "inputs.bin", dtype="<f8")
    products = np.fromfile(directory / "labm.bin", dtype="<f8")
    sizes = study_sizes()[:SIZES_IN_SLICE]
    offsets, place = {}, 0
    for subnormals_on in (0, 1):
        for n in sizes:
            offsets[subnormals_on, n] = place
            place += 2 * 10 * n

    def inputs(subnormals_on, n):
        start = offsets[subnormals_on, n]
        A = inputs_file[start:start + 10 * n].reshape((10, n), order="F")
        B = inputs_file[start + 10 * n:start + 20 * n].reshape((n, 10), order="F")
        return A, B

    clear_cpfloat()
    ours = matmul_test("fp8-e4m3", "binary16", 1, sizes, (0, 1), {}, {}, inputs)
    lines = (directory / "results.txt").read_text().split("\n")
    rows = []
    for index, (row, line) in enumerate(zip(ours, lines)):
        subnormals_on, n, err, err_nrl = line.split()
        LABM = products[200 * index:200 * index + 100].reshape((10, 10), order="F")
        LABM_nrl = products[200 * index + 100:200 * index + 200].reshape((10, 10), order="F")
        assert (int(subnormals_on), int(n)) == (row["subnormals"], row["n"])
        print(n, subnormals_on, "LABM bits:", np.array_equal(LABM, row["LABM"]) and np.array_equal(LABM_nrl, row["LABM_nrl"]),
              "err:", err, repr(row["err"]), "err_nrl:", err_nrl, repr(row["err_nrl"]))
        rows.append({"subnormals": int(subnormals_on), "n": int(n), "err": err, "err_nrl": err_nrl,
                     "LABM_sha256": column_major_digest(LABM), "LABM_nrl_sha256": column_major_digest(LABM_nrl)})
    reference = json.loads(REFERENCE.read_text())
    reference["octave"]["rows"] = rows
    REFERENCE.write_text(json.dumps(reference, indent=1) + "\n")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="the first 9 sizes, subnormals off")
    parser.add_argument("--json", action="store_true", help="print times and check counts as one JSON line")
    parser.add_argument("--compare", nargs="+", metavar="TREE", help="run on each tree, interleaved")
    parser.add_argument("--runs", type=int, default=3, help="runs per tree with --compare")
    parser.add_argument("--export-inputs", type=Path, metavar="DIR")
    parser.add_argument("--store-octave", type=Path, metavar="DIR")
    parser.add_argument("--per-call", action="store_true", help="time one call of each kind (us)")
    args = parser.parse_args(argv)
    if args.compare:
        compare(args.compare, args.runs, args.quick)
    elif args.export_inputs:
        export_inputs(args.export_inputs)
    elif args.store_octave:
        store_octave(args.store_octave)
    elif args.per_call:
        print(" | ".join(f"{name} {value:.2f}" for name, value in per_call().items()))
    else:
        result = run_slice(args.quick)
        if args.json:
            print(json.dumps({"loop_s": result["loop_s"], "skip_s": result["skip_s"], "calls": result["calls"],
                              "first_call_s": result["first_call_s"],
                              "checks": checks(result)}))
        else:
            report(result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
