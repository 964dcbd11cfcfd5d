"""CPU benchmark of pychop_compat's NumPy engine (plus its torch engine and PyPI pychop when present).

Run from the repository root::

    python benchmarks/bench_cpu.py            # n = 1e4 .. 1e7, float64 and float32
    python benchmarks/bench_cpu.py --quick    # smoke run: small n, few repeats
    python benchmarks/bench_cpu.py --large    # also n = 1e8 (needs ~3 GB of memory)
    python benchmarks/bench_cpu.py --memory   # peak memory of chop on 1e8 float64 values
    python benchmarks/bench_cpu.py --compiled [--cpfloat CPFLOAT/src]   # the compiled engine at n = 1e7

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

``--compiled --cpfloat DIR`` also builds ``benchmarks/cpfloat_driver.c``
against CPFloat's sources in ``DIR`` and times CPFloat's fp16 round to
nearest on the same array.  CPFloat's stochastic rounding is not compared:
see ``CPFLOAT_SR_NOT_COMPARED``.
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
from pychop_compat.kernels import numpy_fast  # noqa: E402
from pychop_compat.kernels import compiled  # noqa: E402

if compiled.available():  # the steady state: a process that has loaded the compiled engine
    compiled.kernels()    # ('auto' waits to load it in a new process: bench_first_call.py)

# (label, chop options, uses a NumPy Generator, pychop (exp_bits, sig_bits, rmode, subnormal),
#  pychop's chop-style (prec, rmode, subnormal))
CONFIGS = [
    ("fp16 RN", dict(format="h"), False, (5, 10, 1, True), ("h", 1, 1)),
    ("bf16 RN sub=0", dict(format="b", subnormal=0), False, (8, 7, 1, False), ("b", 1, 0)),
    ("fp8-e4m3 RN", dict(format="fp8-e4m3"), False, (4, 3, 1, True), ("q43", 1, 1)),
    ("fp16 RZ", dict(format="h", round=4), False, (5, 10, 4, True), ("h", 4, 1)),
    ("fp16 SR5 MATLAB stream", dict(format="h", round=5), False, (5, 10, 5, True), ("h", 5, 1)),
    ("fp16 SR5 Generator", dict(format="h", round=5), True, (5, 10, 5, True), ("h", 5, 1)),
    # Formats and modes beyond chop.m (issue 13): OCP formats through chop (chop's rules) and
    # through the cpfloat facade (correct rounding, CPFloat's switches), round to odd and ties
    # away (no pychop equivalent: its column stays empty).  The cpfloat rows give every field
    # they depend on: the facade's options persist from call to call.
    ("float8_e4m3fn RN", dict(format="float8_e4m3fn"), False, None, None),
    ("float4_e2m1fn RN", dict(format="float4_e2m1fn"), False, None, None),
    ("fp16 round to odd (cpfloat)", dict(cpfloat=dict(format="h", round=7, saturation=0)), False, None, None),
    ("float6_e2m3fn RN", dict(format="float6_e2m3fn"), False, None, None),
    ("float8_e4m3fn RN ties away (cpfloat)", dict(cpfloat=dict(format="float8_e4m3fn", round=-1, saturation=0)),
     False, None, None),
    ("float8_e4m3fn RN saturation (cpfloat)", dict(cpfloat=dict(format="float8_e4m3fn", round=1, saturation=1)),
     False, None, None),
    ("float8_e5m2 RN (cpfloat)", dict(cpfloat=dict(format="float8_e5m2", round=1, saturation=0)), False, None, None),
    ("float4_e2m1fn RN (cpfloat)", dict(cpfloat=dict(format="float4_e2m1fn", round=1)), False, None, None),
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
    # (The main table's rows run on the CPU engine in force: compiled when Numba is installed.)
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


# --- the compiled engine (issue 21's table) -------------------------------------------------------

COMPILED_CONFIGS = [
    ("fp16 RN", dict(format="h"), None),
    ("bf16 RN sub=0", dict(format="b", subnormal=0), None),
    ("fp8-e4m3 RN", dict(format="fp8-e4m3"), None),
    ("fp16 RZ", dict(format="h", round=4), None),
    ("custom [5, 7] RU", dict(format="c", params=[5, 7], round=2), None),
    ("fp16 SR5 counter (rng=1)", dict(format="h", round=5), 1),
    ("fp16 SR5 MATLAB stream", dict(format="h", round=5), None),
]


def _best_interleaved(funcs: dict, repeats: int) -> dict:
    """Best time of each function, the functions called in turn ``repeats`` times."""
    best = {name: float("inf") for name in funcs}
    for _ in range(repeats):
        for name, func in funcs.items():
            t0 = time.perf_counter()
            func()
            best[name] = min(best[name], time.perf_counter() - t0)
    return best


def _new_process_first_call(engine: str, n: int, cache_dir=None) -> float:
    """Seconds from interpreter start to the end of the first chop of ``n`` doubles (imports included)."""
    import os
    import subprocess

    code = ("import time; t0 = time.perf_counter(); import numpy as np, pychop_compat; "
            f"x = np.random.default_rng(1).standard_normal({n}); pychop_compat.chop(x, {{'format': 'h'}}); "
            "print(time.perf_counter() - t0)")
    env = dict(os.environ, PYCHOP_COMPAT_CPU_ENGINE=engine, PYTHONPATH=str(ROOT))
    if cache_dir is not None:
        env["NUMBA_CACHE_DIR"] = str(cache_dir)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=1200)
    if out.returncode != 0:
        raise RuntimeError(out.stderr)
    return float(out.stdout.split()[-1])


CPFLOAT_SR_NOT_COMPARED = (
    "CPFloat's stochastic rounding: not compared. The driver is built with OpenMP but without CPFloat's PCG "
    "generator (pcg_variants.h and libpcg_random), and CPFloat then falls back to the C library's rand_r "
    "seeded from the clock (time(NULL)), a fallback it warns against when it compiles (in some CPFloat versions "
    "every OpenMP thread starts from the same seed): its time would not be that of CPFloat's stochastic "
    "rounding as CPFloat means it to run.")


def _cpfloat_times(source, x: np.ndarray, repeats: int):
    """CPFloat's best time for fp16 round to nearest on ``x`` (float64), from a driver built here
    against the CPFloat source directory ``source``; or a reason to skip.  Stochastic rounding is
    not timed: see ``CPFLOAT_SR_NOT_COMPARED``."""
    import os
    import shutil
    import subprocess
    import tempfile

    if not source:
        return "no CPFloat source given (--cpfloat DIR, the src/ folder of a CPFloat checkout)"
    header = Path(source) / "cpfloat_binary64.h"
    if not header.exists():
        return f"{header} not found"
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        return "no C compiler"
    with tempfile.TemporaryDirectory() as tmp:
        driver = Path(tmp) / "cpfloat_driver"
        build = subprocess.run([compiler, "-O3", "-march=native", "-fopenmp", "-w", f"-I{source}",
                                str(ROOT / "benchmarks" / "cpfloat_driver.c"), "-o", str(driver), "-lm"],
                               capture_output=True, text=True)
        if build.returncode != 0:
            return f"build failed: {build.stderr.strip()[:200]}"
        data = Path(tmp) / "x.bin"
        x.astype(np.float64).tofile(data)
        env = dict(os.environ, OMP_NUM_THREADS=os.environ.get("OMP_NUM_THREADS", "2"))
        times = {}
        for label, code in (("fp16 RN", 1),):
            run = subprocess.run([str(driver), str(data), str(x.size), "h", str(code), str(repeats)],
                                 capture_output=True, text=True, env=env)
            if run.returncode != 0:
                return f"driver failed: {run.stderr.strip()[:200]}"
            times[label] = float(run.stdout.split()[-1])
        return times


def compiled_report(n: int, repeats: int, cpfloat_source=None, new_process: bool = True) -> None:
    """The compiled engine against the one-pass baseline, the NumPy engine and (optionally) CPFloat."""
    import platform

    from pychop_compat.kernels import compiled
    from pychop_compat.random.matlab_stream import stream_uniform

    if not compiled.available():
        print("The compiled engine is not available here (numba is not installed): skipped.")
        return
    import numba

    print(f"n = {n:.0e} float64, best of {repeats} interleaved runs; {platform.processor() or platform.machine()}, "
          f"{numba.config.NUMBA_NUM_THREADS} Numba thread(s), "
          f"NumPy {np.__version__}, Numba {numba.__version__}, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}\n")
    compile_seconds = None
    if new_process:
        import tempfile

        with tempfile.TemporaryDirectory() as cache:
            # A fresh Numba cache: the first call compiles (as after installation), the second loads.
            compile_seconds = _new_process_first_call("numba", 10**6, cache)
            cached = min(_new_process_first_call("numba", 10**6, cache) for _ in range(3))
        plain = min(_new_process_first_call("numpy", 10**6) for _ in range(3))
    x = np.random.default_rng(1).standard_normal(n)
    y = np.empty_like(x)
    with compiled.cpu_engine("numba"):
        compiled.warm_up()
    print("| configuration | compiled ns/elt | x one-pass | x one-pass (allocating) | NumPy engine x one-pass "
          "| compiled / NumPy engine |")
    print("|---|---:|---:|---:|---:|---:|")
    results = {}
    for label, options, seed in COMPILED_CONFIGS:
        numpy_chop = pychop_compat.Chop(options, rng=seed)
        fast_chop = pychop_compat.Chop(options, rng=seed)

        def run_numpy():
            with compiled.cpu_engine("numpy"):
                numpy_chop(x)

        def run_compiled():
            with compiled.cpu_engine("numba"):
                fast_chop(x)

        funcs = {"base": lambda: np.multiply(x, 1.0, out=y), "alloc": lambda: np.multiply(x, 1.0),
                 "numpy": run_numpy, "compiled": run_compiled}
        if "MATLAB" in label:
            funcs["draw"] = lambda: stream_uniform(n)
        best = _best_interleaved(funcs, repeats)
        results[label] = best
        print(f"| {label} | {best['compiled'] / n * 1e9:.2f} | {best['compiled'] / best['base']:.2f} | "
              f"{best['compiled'] / best['alloc']:.2f} | {best['numpy'] / best['base']:.2f} | "
              f"{best['compiled'] / best['numpy']:.2f} |", flush=True)
    stream = results["fp16 SR5 MATLAB stream"]
    print(f"\nMATLAB stream: draw of n uniforms {stream['draw'] * 1e3:.1f} ms, one pass {stream['base'] * 1e3:.1f} ms; "
          f"compiled / (draw + one pass) = {stream['compiled'] / (stream['draw'] + stream['base']):.2f}, "
          f"NumPy engine / (draw + one pass) = {stream['numpy'] / (stream['draw'] + stream['base']):.2f}")

    small = np.random.default_rng(2).standard_normal(1000)
    scalar_chop = pychop_compat.Chop(format="h")
    per_call = {}
    for engine in ("numba", "numpy"):
        with compiled.cpu_engine(engine):
            per_call[engine] = min(_samples(lambda: scalar_chop(small), 0.2, 5, 50))
    with compiled.cpu_engine("numba"):
        pychop_compat.chop(1 / 3, {"format": "h"})
        scalar = min(_samples(lambda: pychop_compat.chop(1 / 3), 0.2, 5, 50))
    print(f"n = 1e3: compiled {per_call['numba'] * 1e6:.1f} us, NumPy engine {per_call['numpy'] * 1e6:.1f} us; "
          f"scalar chop(1/3) with stored options: {scalar * 1e6:.2f} us")
    if compile_seconds is not None:
        print(f"New process, first chop of 1e6 doubles, imports included: NumPy engine {plain:.2f} s; compiled engine "
              f"{cached:.2f} s with Numba's cache (+{cached - plain:.2f} s), {compile_seconds:.1f} s on the very "
              "first call after installation (compilation of the kernels it needs)")

    cp = _cpfloat_times(cpfloat_source, x, repeats)
    if isinstance(cp, str):
        print(f"CPFloat: skipped ({cp}).")
    else:
        base = results["fp16 RN"]["base"]
        print(f"CPFloat (driver built here, OMP_NUM_THREADS={__import__('os').environ.get('OMP_NUM_THREADS', '2')}, "
              "into a preallocated array): "
              f"fp16 RN {cp['fp16 RN'] * 1e3:.1f} ms = {cp['fp16 RN'] / base:.2f} x one-pass "
              f"(compiled engine {results['fp16 RN']['compiled'] / base:.2f})")
    print(CPFLOAT_SR_NOT_COMPARED)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="smoke run: n = 1e4 and 1e5, few repeats")
    parser.add_argument("--large", action="store_true", help="also n = 1e8")
    parser.add_argument("--memory", action="store_true", help="only report peak memory for n = 1e8")
    parser.add_argument("--threads", type=int, default=None, help="worker threads (default: %(default)s = engine's)")
    parser.add_argument("--no-pychop", action="store_true", help="skip PyPI pychop even if installed")
    parser.add_argument("--no-torch", action="store_true", help="skip the torch engine rows")
    parser.add_argument("--compiled", action="store_true",
                        help="the compiled engine's table: n = 1e7 (1e5 with --quick), ratios to one pass")
    parser.add_argument("--repeats", type=int, default=7, help="interleaved runs for --compiled (best is kept)")
    parser.add_argument("--cpfloat", default=None, help="CPFloat's src/ folder: build a driver and time it too")
    args = parser.parse_args(argv)
    if args.compiled:
        compiled_report(10**5 if args.quick else 10**7, 2 if args.quick else args.repeats, args.cpfloat,
                        new_process=not args.quick)
        return
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
