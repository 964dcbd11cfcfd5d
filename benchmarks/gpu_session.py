"""The Python stages of ``benchmarks/gpu_session.sh`` (issue 32): ``matmul`` and ``rng``.

Run from the repository root (stand-alone, or through the session script)::

    python benchmarks/gpu_session.py matmul                 # n = 4096 on the GPU against host rows
    python benchmarks/gpu_session.py rng                    # ~10^6 values, Chop(rng=seed) on every array kind
    python benchmarks/gpu_session.py matmul --rehearse      # the same code on the CPU (torch CPU tensors, n = 64)
    python benchmarks/gpu_session.py rng --device cpu --n 2000 --report rng.md

``matmul``: ``linalg.matmul(A, B, 'h')`` (recursive summation, every product
and sum rounded to fp16) on float32 standard normal ``n x n`` matrices (NumPy
``default_rng(seed)``), as torch tensors on the device, once per device path
(CUDA: the fused Triton kernel when Triton is installed, and the generic path
with one chop call per step; CPU: the host-tuned paths, and the paths a CUDA
tensor takes, run on the CPU).  On the host, only the first ``--rows`` rows
are computed (the same call on NumPy float32 arrays, chop on the compiled
engine when Numba is installed; and, with Numba, float64 data on the compiled
kernels): the device's rows must agree with them bit for bit.  Times: the
device's whole product (and an unchopped ``A @ B`` for scale), the host's
rows, and the host's time extrapolated linearly to ``n`` rows (an
extrapolation, not a measurement).

``rng``: ``Chop(format='h', round=5, rng=seed)`` and
``Chop(format='float8_e4m3fn', round=5, rng=seed)`` (the counter-based
generator), each applied to a float32 then a float64 array (the second call
takes counters after the first's), and ``cpfloat(x, {'format':
'float8_e4m3fn', 'round': 5})`` after ``rng(seed)`` (cpfloat takes no
``rng=``: it draws MATLAB's global stream on the host for every array kind,
so only the rounding on the device is checked), on the NumPy engine (the
reference), the compiled engine, torch CPU tensors (host paths and device
paths), CUDA tensors (default route and each installed ``cuda_route``) and
CuPy arrays.  The inputs include fp16 and float8_e4m3fn subnormals, exact
ties of both formats and their carrier neighbours, the carrier's own
subnormals and Inf/NaN.  Bits are compared (any NaN equals any NaN).

``--rehearse`` is ``--device cpu`` with small sizes (n = 64 for ``matmul``,
10^4 for ``rng``): it proves the code runs, on a machine without a GPU.
``--report FILE`` also writes the report (Markdown) to FILE as it goes.

Exit status: 0 when everything agrees, 1 when something disagrees (or one
array kind or device path raised), 2 when the script itself failed, 3 for
``--device cuda`` without a CUDA GPU visible to torch (then nothing is
checked).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import os
import platform
import statistics
import sys
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

NO_GPU = 3
REHEARSAL_SIZES = {"matmul": 64, "rng": 10_000}
FULL_SIZES = {"matmul": 4096, "rng": 1_000_000}


class Report:
    """Lines to standard output and, when given, to a file (flushed line by line)."""

    def __init__(self, path=None):
        self.file = open(path, "w", encoding="utf-8") if path else None
        self.failures = 0

    def __call__(self, line: str = "") -> None:
        print(line, flush=True)
        if self.file:
            self.file.write(line + "\n")
            self.file.flush()

    def close(self) -> None:
        if self.file:
            self.file.close()


# --- bits -----------------------------------------------------------------------------------

_UINT = {2: np.uint16, 4: np.uint32, 8: np.uint64}


def bits(a) -> np.ndarray:
    """The bit patterns of a float array (unsigned integers of its width)."""
    a = np.ascontiguousarray(a)
    return a.view(_UINT[a.dtype.itemsize])


def hex_of(value, dtype) -> str:
    """``value`` in ``dtype`` as ``0x...`` (its bit pattern) followed by its repr."""
    v = np.asarray(value, dtype=dtype).reshape(1)
    width = 2 * v.dtype.itemsize
    return f"0x{int(bits(v)[0]):0{width}x} ({v[0]!r})"


def compare(got, want):
    """``(agreeing, total, first differing flat indices (up to 3), note)``; any NaN agrees with any NaN."""
    got, want = np.asarray(got), np.asarray(want)
    if got.shape != want.shape or got.dtype != want.dtype:
        return 0, want.size, [], f"shape/dtype {got.shape} {got.dtype} vs {want.shape} {want.dtype}"
    g, w = got.ravel(), want.ravel()
    same = bits(g) == bits(w)
    same |= np.isnan(g) & np.isnan(w)
    return int(same.sum()), int(same.size), np.flatnonzero(~same)[:3].tolist(), ""


def describe_differences(indices, got, want, inputs=None) -> str:
    got, want = np.asarray(got).ravel(), np.asarray(want).ravel()
    parts = []
    for i in indices:
        text = f"[{i}]"
        if inputs is not None:
            text += f" x = {hex_of(np.asarray(inputs).ravel()[i], got.dtype)},"
        parts.append(f"{text} got {hex_of(got[i], got.dtype)}, want {hex_of(want[i], want.dtype)}")
    return "; ".join(parts)


def to_numpy(a) -> np.ndarray:
    if isinstance(a, np.ndarray):
        return a
    if hasattr(a, "detach"):  # torch
        return a.detach().cpu().numpy()
    if hasattr(a, "get"):  # CuPy
        return a.get()
    return np.asarray(a)


@contextlib.contextmanager
def module_flag(module, name: str, value):
    """Set ``module.name`` within the block (AttributeError when the package has no such flag)."""
    saved = getattr(module, name)
    setattr(module, name, value)
    try:
        yield
    finally:
        setattr(module, name, saved)


def device_paths_flag():
    """A context factory sending CPU tensors down the GPU routes: the router's
    ``device_paths_on_cpu`` (or the old module flag), or None when the package has neither."""
    try:
        from pychop_compat.engines.dispatch import device_paths_on_cpu

        return device_paths_on_cpu
    except ImportError:
        from pychop_compat.engines import torch_engine

        if not hasattr(torch_engine, "_DEVICE_PATHS_ON_CPU"):
            return None
        return lambda: module_flag(torch_engine, "_DEVICE_PATHS_ON_CPU", True)


def cuda_route_of_package():
    """The package's ``cuda_route`` context manager (the router's, or the old torch engine's)."""
    try:
        from pychop_compat.engines.dispatch import cuda_route
    except ImportError:
        from pychop_compat.engines.torch_engine import cuda_route
    return cuda_route


def package_module(*names):
    """The first of ``names`` that imports: the package's modules moved (``engines/compiled.py`` and
    ``linalg/triton_matmul.py`` to ``kernels/``); this script runs on either layout."""
    first_error = None
    for name in names:
        try:
            return importlib.import_module(name)
        except ImportError as exc:
            first_error = first_error or exc
    raise first_error


def compiled_module():
    return package_module("pychop_compat.kernels.compiled", "pychop_compat.engines.compiled")


def cupy_usable():
    """CuPy when it is installed and sees a CUDA device; else None."""
    if importlib.util.find_spec("cupy") is None:
        return None
    try:
        import cupy

        return cupy if cupy.cuda.runtime.getDeviceCount() > 0 else None
    except Exception:  # CuPy without a usable CUDA runtime
        return None


def device_or_exit(args, report: Report):
    """``'cuda'`` or ``'cpu'``; None (after saying so) when CUDA was asked for and is absent."""
    import torch

    if args.device == "cuda" and not torch.cuda.is_available():
        report("no GPU: torch sees no CUDA device, so nothing was checked "
               "(use --device cpu or --rehearse to run this code on the CPU).")
        return None
    if args.device == "cuda":
        report(f"Device: {torch.cuda.get_device_name()}, torch {torch.__version__} (CUDA {torch.version.cuda})")
    else:
        report(f"Device: CPU ({platform.processor() or platform.machine()}, {os.cpu_count()} cores), "
               f"torch {torch.__version__}, {torch.get_num_threads()} threads; "
               "a rehearsal on the CPU, not a GPU measurement")
    return args.device


def _numba_line() -> str:
    if importlib.util.find_spec("numba") is None:
        return "Numba not installed: the host uses the NumPy engine"
    import numba

    return f"Numba {numba.__version__}, {numba.config.NUMBA_NUM_THREADS} threads"


# --- matmul ---------------------------------------------------------------------------------

def _device_variants(device: str):
    """``[(label, context factory or None when unavailable, note)]``: the device paths of linalg.matmul."""
    triton_matmul = package_module("pychop_compat.kernels.triton_matmul", "pychop_compat.linalg.triton_matmul")

    def flag(module, name, value):
        if not hasattr(module, name):
            return None
        return lambda: module_flag(module, name, value)

    if device == "cuda":
        fused = (flag(triton_matmul, "ENABLED", True) if triton_matmul.available() else None)
        return [
            ("torch-cuda, fused Triton matmul", fused, "Triton not installed" if fused is None else ""),
            ("torch-cuda, generic (one chop call per step)", flag(triton_matmul, "ENABLED", False),
             "no triton_matmul.ENABLED in this version"),
        ]
    return [
        ("torch-cpu, host paths", contextlib.nullcontext, ""),
        ("torch-cpu, GPU paths on the CPU", device_paths_flag(), "no GPU-paths switch in this version"),
    ]


def run_matmul(args, report: Report) -> int:
    import torch

    from pychop_compat import linalg

    compiled = compiled_module()
    device = device_or_exit(args, report)
    if device is None:
        return NO_GPU
    n = args.n or (REHEARSAL_SIZES if args.rehearse else FULL_SIZES)["matmul"]
    rows = min(args.rows, n)
    fmt = args.format
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    report(f"\n### matmul: linalg.matmul(A, B, {fmt!r}), n = {n}, float32, "
           f"A, B standard normal (numpy default_rng({args.seed}))\n")
    report(f"Host: {os.cpu_count()} cores, {_numba_line()}. Times: wall clock around one call "
           f"({'after torch.cuda.synchronize()' if device == 'cuda' else 'CPU'}), best of {args.repeats} for "
           "the device products, after a warm-up call on a 16x16 corner (kernel compilation).")
    if device == "cuda":
        report(f"torch.backends.cuda.matmul.allow_tf32 = {torch.backends.cuda.matmul.allow_tf32} "
               "(the plain A @ B row)")
    gen = np.random.default_rng(args.seed)
    A = gen.standard_normal((n, n), dtype=np.float32)
    B = gen.standard_normal((n, n), dtype=np.float32)
    a, b = torch.from_numpy(A).to(device), torch.from_numpy(B).to(device)
    failures = 0
    report("\n| computation | time (s) | rows | agree with the host float32 rows | first differences |")
    report("|---|---:|---:|---|---|")

    # The host's first rows: the reference every device path is compared with.
    t0 = time.perf_counter()
    linalg.matmul(A[:2, :8], B[:8, :8], fmt)  # compile (or load) chop's kernels
    warm_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    host32 = linalg.matmul(A[:rows], B, fmt)
    host_s = time.perf_counter() - t0
    report(f"| host: A[:{rows}] @ B on NumPy float32 arrays (NumPy kernels, one chop call per step; "
           f"first call {warm_s:.2f} s) | {host_s:.3g} | {rows} | (reference) | |")
    report(f"| host float32, extrapolated linearly to all {n} rows (an extrapolation, not a measurement) | "
           f"{host_s * n / rows:.3g} | {n} | | |")

    results, seconds = {}, {}
    for label, context, note in _device_variants(device):
        if context is None:
            report(f"| {label} | not run: {note} | | | |")
            continue
        # Progress on stdout (the stage's log): a run cut short shows which path it was in.
        print(f"matmul: {label}: warm-up, then {args.repeats} product(s) of n = {n}", flush=True)
        try:
            with context():
                linalg.matmul(a[:16, :16], b[:16, :16], fmt)  # warm up: compile, load kernels
                sync()
                best = float("inf")
                for _ in range(args.repeats):
                    t0 = time.perf_counter()
                    c = linalg.matmul(a, b, fmt)
                    sync()
                    best = min(best, time.perf_counter() - t0)
        except Exception as exc:  # report and go on with the other paths
            failures += 1
            report(f"| {label} | ERROR {type(exc).__name__}: {exc} | | | |")
            traceback.print_exc()
            continue
        print(f"matmul: {label}: {best:.3g} s", flush=True)
        got = to_numpy(c[:rows])
        count, total, where, note = compare(got, host32)
        if count != total:
            failures += 1
        report(f"| {label} | {best:.3g} | {n} (whole product) | {count}/{total} ({total - count} differ) | "
               f"{note or describe_differences(where, got, host32)} |")
        results[label], seconds[label] = to_numpy(c), best
    plain = _plain_matmul_seconds(a, b, sync)
    report(f"| plain A @ B in float32 on the device (median of 5, for scale) | {plain:.3g} | {n} | | |")

    # float64 data on the compiled kernels (Numba): the same fp16 values are expected, since fp16
    # sums and products rounded once to binary32 then to fp16 are correctly rounded (2*11 + 2 <= 24).
    if compiled.available():
        A64, B64 = A.astype(np.float64), B.astype(np.float64)
        t0 = time.perf_counter()
        linalg.matmul(A64[:2, :8], B64[:8, :8], fmt)  # compile (or load) the kernels
        warm_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        host64 = linalg.matmul(A64[:rows], B64, fmt).astype(np.float32)
        host64_s = time.perf_counter() - t0
        count, total, where, note = compare(host64, host32)
        if count != total:
            failures += 1
        report(f"| host: float64 data, compiled kernels (first call {warm_s:.2f} s) | {host64_s:.3g} | {rows} | "
               f"{count}/{total} | {note or describe_differences(where, host64, host32)} |")
        report(f"| host float64 compiled, extrapolated linearly to all {n} rows (an extrapolation) | "
               f"{host64_s * n / rows:.3g} | {n} | | |")
    report("")
    for label, best in seconds.items():
        report(f"{label}: {best / plain:.3g}x the plain float32 product on the device; "
               f"{host_s * n / rows / best:.3g}x faster than the host float32 rows extrapolated to all rows")
    labels = list(results)
    for other in labels[1:]:
        count, total, where, note = compare(results[other], results[labels[0]])
        if count != total:
            failures += 1
        report(f"{other} vs {labels[0]}, all {n}x{n} elements: {count}/{total} agree"
               + (f"; {note or describe_differences(where, results[other], results[labels[0]])}"
                  if count != total else ""))
    report(f"\nmatmul: {'all agree' if failures == 0 else f'{failures} DISAGREEMENT(S) OR ERROR(S)'}")
    return 0 if failures == 0 else 1


def _plain_matmul_seconds(a, b, sync) -> float:
    (a @ b)
    sync()
    times = []
    for _ in range(5):
        t0 = time.perf_counter()
        (a @ b)
        sync()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


# --- rng ------------------------------------------------------------------------------------

def grid_and_ties(gen, count: int, t: int, emin: int, emax: int) -> np.ndarray:
    """Values of a format with ``t`` significand bits (float64): representable values, exact ties
    between neighbours (midpoints), normal and subnormal, with random signs."""
    k = count // 4
    m = gen.integers(2 ** (t - 1), 2 ** t, size=k).astype(np.float64)   # normal significands
    e = gen.integers(emin, emax + 1, size=k)
    normal = np.ldexp(m, e - (t - 1))
    normal_ties = np.ldexp(m + 0.5, e - (t - 1))
    s = gen.integers(1, 2 ** (t - 1), size=k).astype(np.float64)       # subnormal significands
    subnormal = np.ldexp(s, emin - (t - 1))
    subnormal_ties = np.ldexp(s + 0.5, emin - (t - 1))
    values = np.concatenate([normal, normal_ties, subnormal, subnormal_ties])
    return values * gen.choice([-1.0, 1.0], size=values.size)


SPECIALS = [0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 65504.0, 65519.0, 65520.0, -65520.0,
            448.0, 464.0, 480.0, -480.0, 1e30, -1e30, 2.0 ** -24, 2.0 ** -25, 2.0 ** -9, 2.0 ** -10]


def rng_inputs(n: int, dtype, seed: int) -> np.ndarray:
    """``n`` values of ``dtype`` (float32/float64) for the stochastic rounding check."""
    dtype = np.dtype(dtype)
    gen = np.random.default_rng([seed, dtype.itemsize])
    part = max(n // 8, 8)
    fp16 = grid_and_ties(gen, part, 11, -14, 15).astype(dtype)
    fp8 = grid_and_ties(gen, part, 4, -6, 8).astype(dtype)
    ties = np.concatenate([grid_and_ties(gen, part, 11, -14, 15), grid_and_ties(gen, part, 4, -6, 8)]).astype(dtype)
    neighbours = np.concatenate([np.nextafter(ties, dtype.type(np.inf)), np.nextafter(ties, dtype.type(-np.inf))])
    wide = (gen.standard_normal(2 * part) * np.exp2(gen.uniform(-40, 20, 2 * part))).astype(dtype)
    tiny = np.finfo(dtype).smallest_normal
    carrier_subnormals = (gen.uniform(-1, 1, part) * tiny).astype(dtype)
    x = np.concatenate([fp16, fp8, neighbours, wide, carrier_subnormals, np.asarray(SPECIALS, dtype=dtype)])
    gen.shuffle(x)
    if x.size < n:
        x = np.concatenate([x, (gen.standard_normal(n - x.size)).astype(dtype)])
    return np.ascontiguousarray(x[:n])


def _rng_backends(device: str):
    """``[(label, convert numpy -> array, context factory)]``; the first is the reference."""
    import torch

    backends = []
    try:
        compiled = compiled_module()
        numba_available, cpu_engine = compiled.available, compiled.cpu_engine

        backends.append(("numpy, NumPy engine (reference)", lambda x: x, lambda: cpu_engine("numpy")))
        if numba_available():
            backends.append(("numpy, compiled engine", lambda x: x, lambda: cpu_engine("numba")))
    except (ImportError, AttributeError):  # a package without the engine switch
        backends.append(("numpy, default engine (reference)", lambda x: x, contextlib.nullcontext))
    backends.append(("torch cpu, host paths", lambda x: torch.from_numpy(x.copy()), contextlib.nullcontext))
    if device_paths_flag() is not None:
        backends.append(("torch cpu, GPU paths on the CPU", lambda x: torch.from_numpy(x.copy()), device_paths_flag()))
    if device == "cuda":
        cupy = cupy_usable()
        backends.append(("torch cuda, default route", lambda x: torch.from_numpy(x).cuda(), contextlib.nullcontext))
        routes = (["cupy"] if cupy is not None else []) + (
            ["triton"] if importlib.util.find_spec("triton") is not None else []) + ["torch"]
        for route in routes:
            backends.append((f"torch cuda, cuda_route({route!r})", lambda x: torch.from_numpy(x).cuda(),
                             lambda route=route: cuda_route_of_package()(route)))
        if cupy is not None:
            backends.append(("cupy", lambda x: cupy.asarray(x), contextlib.nullcontext))
    return backends


def _rng_cases(seed: int):
    """``[(label, run)]``: ``run(x32, x64) -> (r32, r64)`` on one backend's arrays, from a fresh state."""
    from pychop_compat import Chop, clear_cpfloat, cpfloat, rng

    def chop_case(fmt):
        def run(x32, x64):
            ch = Chop(format=fmt, round=5, rng=seed)  # fresh counter: the float64 call follows the float32 one
            return ch(x32), ch(x64)
        return run

    def cpfloat_case(x32, x64):
        out = []
        for x in (x32, x64):
            clear_cpfloat()
            rng(seed)  # cpfloat draws MATLAB's global stream (no rng= argument)
            out.append(cpfloat(x, {"format": "float8_e4m3fn", "round": 5}))
        clear_cpfloat()
        return tuple(out)

    return [
        (f"Chop(format='h', round=5, rng={seed})", chop_case("h")),
        (f"Chop(format='float8_e4m3fn', round=5, rng={seed})", chop_case("float8_e4m3fn")),
        (f"cpfloat(x, {{'format': 'float8_e4m3fn', 'round': 5}}) after rng({seed})", cpfloat_case),
    ]


def run_rng(args, report: Report) -> int:
    device = device_or_exit(args, report)
    if device is None:
        return NO_GPU
    n = args.n or (REHEARSAL_SIZES if args.rehearse else FULL_SIZES)["rng"]
    x32, x64 = rng_inputs(n, np.float32, args.seed), rng_inputs(n, np.float64, args.seed)
    report(f"\n### rng: stochastic rounding (round = 5) with the same seed on every array kind, "
           f"n = {n} float32 then float64 values\n")
    report("Inputs: fp16 and float8_e4m3fn values, their exact ties (normal and subnormal) and the carrier's "
           "neighbours of the ties, wide-range normals, the carrier's subnormals, Inf/NaN/overflow. "
           "Chop(rng=seed) is the counter-based generator (fresh object per array kind; its float64 call "
           "takes the counters after the float32 call's). cpfloat has no rng= argument: it draws MATLAB's "
           "global stream, reseeded by rng(seed) before each call, on the host for every array kind, so "
           "that row checks the rounding with host-drawn numbers on each device, not the device generator.\n")
    report("| case | array kind | float32 agree | float64 agree | first differences |")
    report("|---|---|---|---|---|")
    backends = _rng_backends(device)
    failures = 0
    for case_label, run in _rng_cases(args.seed):
        reference = None
        for label, convert, context in backends:
            try:
                with context():
                    r32, r64 = (to_numpy(r) for r in run(convert(x32), convert(x64)))
            except Exception as exc:  # report and go on
                failures += 1
                report(f"| {case_label} | {label} | ERROR | | {type(exc).__name__}: {exc} |")
                traceback.print_exc()
                continue
            if reference is None:
                reference = (r32, r64)
                changed = [int((bits(r) != bits(x)).sum()) for r, x in ((r32, x32), (r64, x64))]
                report(f"| {case_label} | {label} | (reference: {changed[0]} of {n} values changed) | "
                       f"(reference: {changed[1]} of {n} changed) | |")
                continue
            cells, details = [], []
            for got, want, x in ((r32, reference[0], x32), (r64, reference[1], x64)):
                count, total, where, note = compare(got, want)
                cells.append(f"{count}/{total}")
                if count != total:
                    failures += 1
                    details.append(f"{got.dtype}: " + (note or describe_differences(where, got, want, x)))
            report(f"| {case_label} | {label} | {cells[0]} | {cells[1]} | {'; '.join(details)} |")
    report(f"\nrng: {'all agree' if failures == 0 else f'{failures} DISAGREEMENT(S) OR ERROR(S)'}")
    return 0 if failures == 0 else 1


# --- command line ---------------------------------------------------------------------------

def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    for name, helptext in (("matmul", "chopped fp16 matmul on the device against host rows"),
                           ("rng", "Chop(rng=seed) stochastic rounding: the same bits on every array kind")):
        p = sub.add_parser(name, help=helptext)
        p.add_argument("--device", choices=["cuda", "cpu"], default="cuda",
                       help="where the torch tensors live (default cuda; cpu: a rehearsal)")
        p.add_argument("--rehearse", action="store_true",
                       help=f"--device cpu with a small n ({REHEARSAL_SIZES[name]}) unless --n is given")
        p.add_argument("--n", type=int, default=None,
                       help=f"size (default {FULL_SIZES[name]}; {REHEARSAL_SIZES[name]} with --rehearse)")
        p.add_argument("--seed", type=int, default=2024 if name == "rng" else 0)
        p.add_argument("--report", metavar="FILE", help="also write the report (Markdown) to FILE")
        if name == "matmul":
            p.add_argument("--rows", type=int, default=4, help="rows computed on the host (default 4)")
            p.add_argument("--format", default="h", help="chop format (default 'h')")
            p.add_argument("--repeats", type=int, default=1, help="timed runs of each device product (best)")
    args = parser.parse_args(argv)
    if args.rehearse:
        args.device = "cpu"
    report = Report(args.report)
    try:
        return (run_matmul if args.command == "matmul" else run_rng)(args, report)
    except Exception as exc:  # the script itself failed (not a disagreement): exit 2
        traceback.print_exc()
        report(f"\n{args.command}: ERROR {type(exc).__name__}: {exc}")
        return 2
    finally:
        report.close()


if __name__ == "__main__":
    sys.exit(main())
