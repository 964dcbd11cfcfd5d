"""Command line: ``python -m pychop_compat [--version | demo | validate ... | info | warm-up | gpu-check ...]``.

With no arguments, prints a small demonstration table of chop results (``demo``).
"""

from __future__ import annotations

import argparse
import math
import os
import sys

from . import __version__
from .matlab.api import Chop


def demo() -> None:
    """Print chop(x) for a few values, formats and rounding modes."""
    values = [("pi", math.pi), ("1/3", 1 / 3), ("1e-6", 1e-6), ("70000", 70000.0)]
    modes = {1: "nearest", 2: "up", 3: "down", 4: "to zero"}
    print(f"pychop_compat {__version__}: chop(x, {{'format': F, 'round': R}})\n")
    header = f"{'x':>6} {'format':>9} " + " ".join(f"{name:>14}" for name in modes.values())
    print(header)
    print("-" * len(header))
    for label, x in values:
        for fmt in ("fp8-e4m3", "bfloat16", "fp16", "single"):
            cells = " ".join(f"{Chop(format=fmt, round=r)(x):>14.8g}" for r in modes)
            print(f"{label:>6} {fmt:>9} {cells}")
    print("\nStochastic rounding of 1/3 to fp8-e4m3 (round=5), mean of 10^5 draws:",
          f"{sum(Chop(format='fp8-e4m3', round=5, rng=0)([1 / 3] * 100000)) / 100000:.5f}")


def warm_up() -> int:
    """Fill Numba's on-disk cache with the compiled CPU engine's kernels (chop's and CPFloat's
    rules, float64 and float32, serial and parallel); print the seconds it took.  Returns 0,
    or 1 without Numba (the NumPy engine compiles nothing)."""
    import time

    import numpy as np

    from .kernels import compiled
    from .matlab.api import chop

    if not compiled.available():
        print("Numba is not installed: the NumPy engine runs every call, and compiles nothing.")
        return 1
    start = time.perf_counter()
    compiled.warm_up()
    with compiled.cpu_engine("numba"):
        for dtype in (np.float64, np.float32):
            for size in (8, compiled.SERIAL_BELOW + 8):
                x = np.linspace(-3, 3, size).astype(dtype)
                chop(x, {"format": "float8_e4m3fn"})  # CPFloat's rules (one correct rounding)
                chop(x, {"format": "float8_e4m3fn", "round": 5})  # their stochastic loop
    print(f"compiled CPU engine ready in Numba's cache: {time.perf_counter() - start:.1f} s")
    return 0


def main(argv: list[str] | None = None) -> int:
    """Run the command line with ``argv`` (default: ``sys.argv[1:]``); return the exit status."""
    parser = argparse.ArgumentParser(prog="python -m pychop_compat",
                                     description="Bit-exact port of MATLAB's chop.")
    parser.add_argument("--version", action="version", version=f"pychop_compat {__version__}")
    sub = parser.add_subparsers(dest="command", title="commands", metavar="COMMAND")
    sub.add_parser("demo", help="print a table of chop results by format and rounding mode (the default)")
    sub.add_parser("info", help="print the package, Python, library and engine versions and the machine, as JSON")
    v = sub.add_parser("validate", help="rerun the MATLAB corpus and the mpmath oracle on every available engine")
    v.add_argument("--corpus", help="corpus folder in pychop_compat.validation.corpora's layout "
                   "(default: the folder named by $PYCHOP_COMPAT_CORPUS when it is set, else the copy installed "
                   "with the package); exit status 2 when it is not found or cannot be read")
    v.add_argument("--engines", help="comma-separated engines, no empty name (default: all available)")
    v.add_argument("--json", metavar="FILE", help="also write the results as JSON, with the versions "
                   "of the package, Python, NumPy and the engines, the machine and the corpus's checksums")
    v.add_argument("--no-progress", action="store_true", help="no progress bar")
    v.add_argument("--no-oracle", action="store_true", help="skip the mpmath oracle (corpus only)")
    sub.add_parser("warm-up", help="compile the compiled CPU engine's kernels into Numba's cache (once per "
                   "installation; a new process then loads them in about a second)")
    sub.add_parser("gpu-check", add_help=False,
                   help="run the GPU tests, validate on every GPU engine and the quick GPU benchmark "
                        "(exit 3 without a GPU; see gpu-check --help)")
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["gpu-check"]:
        from .validation.gpu_check import main as gpu_check

        return gpu_check(argv[1:])
    args = parser.parse_args(argv)

    if args.command in (None, "demo"):
        demo()
        return 0
    if args.command == "warm-up":
        return warm_up()
    from .engines import available_engines
    from .validation import ENGINE_INDEPENDENT, environment, find_corpus, format_table, not_run, validate, write_json

    known = available_engines()
    if args.command == "info":
        import json

        print(json.dumps(environment(known), indent=2))
        return 0
    # (--engines "" or "numpy,": an empty name is refused, not read as "all engines")
    engines = args.engines.split(",") if args.engines is not None else None
    if engines is not None and not all(engines):
        parser.error(f"--engines: an empty engine name in {args.engines!r}; give comma-separated names, "
                     f"available: {', '.join(known)}")
    unknown = [e for e in engines or () if e not in known]
    if unknown:
        parser.error(f"--engines: {', '.join(unknown)} not available here; available: {', '.join(known)}")
    if args.json:  # (checked before the run, which takes minutes, not after it)
        folder = os.path.dirname(os.path.abspath(args.json))
        if os.path.isdir(args.json):
            parser.error(f"--json: {args.json} is a directory; give the path of a file to write")
        if not (os.path.isdir(folder) and os.access(folder, os.W_OK)):
            parser.error(f"--json: cannot write {args.json} (its folder does not exist or is not writable)")
    try:
        corpus = find_corpus(args.corpus)
    except (FileNotFoundError, ValueError) as exc:  # a corpus problem: exit 2, as docs/validation.rst says
        print(f"validate: {exc}", file=sys.stderr)
        return 2
    results = validate(corpus, engines, progress=not args.no_progress, oracle=not args.no_oracle)
    print(format_table(results))
    ran = engines or known
    left_out = not_run(ran, with_oracle=not args.no_oracle, requested=engines is not None)
    for line in left_out:
        print(f"not run: {line}")
    if args.json:
        write_json(results, args.json, environment(ran, corpus), left_out)
    failed = [r for r in results if not r.ok]
    for r in failed:
        print(f"DISAGREE {r.group}/{r.engine}: {', '.join(map(str, r.disagreeing[:10]))}", file=sys.stderr)
    ran_on = {r.engine for r in results} - {ENGINE_INDEPENDENT}  # (roundit, float_params: no engine's)
    scope = (f"{len({r.group for r in results})} groups on {len(ran_on)} engine(s); "
             f"{len(left_out)} left out, listed above")
    print(f"all cases agree ({scope})" if not failed else f"{len(failed)} group(s) disagree ({scope})")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
