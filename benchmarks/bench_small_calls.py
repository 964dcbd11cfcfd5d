"""The fixed cost of one call on a small array: chop, Chop, cpfloat and the scalar chop (issue 29, item 1).

Run from the repository root::

    python benchmarks/bench_small_calls.py              # n = 10, 100, 1000; about 15 s
    python benchmarks/bench_small_calls.py --quick      # fewer rounds; about 10 s
    python benchmarks/bench_small_calls.py --smoke      # one call per case: the table, no timing
    python benchmarks/compare_trees.py OLD NEW --runs 5 -- bench_small_calls.py --quick

Everything is timed in one process, interleaved: each round times every case once
(``timeit`` with enough calls per sample for about a millisecond), and a case's
figure is its fastest round (the minimum is the least disturbed by other work on a
shared machine).  The inputs are standard normal float64 vectors of n elements
(n = 10, 100, 1000), a 10 x 10 array for ``cpfloat`` and the scalar 1/3.  Rows:

* ``astype fp16``: ``x.astype(np.float16).astype(np.float64)``, the baseline of the
  array rows; ``float(np.float16(v))``, the baseline of the scalar rows;
* ``chop stored``: ``chop(x)`` after ``chop(None, {'format': 'h'})`` (target 3x);
* ``chop dict``: ``chop(x, {'format': 'h'})``, the same dict on every call (target 5x);
* ``Chop object``: ``Chop(format='h')(x)`` (target 3x);
* ``cpfloat dict``: ``cpfloat(A, {'format': 'binary16'})`` on a 10 x 10 array (target 5x);
* ``chop scalar``: ``chop(1/3)`` with stored options (target 4x ``float(np.float16(v))``);
* ``chop stored round 5``: MATLAB's stream, and ``Chop round 5 rng``:
  ``Chop(format='h', round=5, rng=1)(x)``, the counter numbers; each within 1.5x of
  its deterministic row (``chop stored``, ``Chop object``);
* floors: an empty Python function call, ``np.positive(x)`` (a trivial ufunc with a
  result array), which bound what any call can cost; and the parts of a call that live below
  the facades and the router: the compiled loops of small calls called through Numba's
  dispatcher on arrays made beforehand (``compiled loop``: round to nearest; ``compiled loop
  round 5 stream``: stochastic rounding drawing from a copy of MATLAB's stream state;
  ``compiled loop round 5 counter``: with the counter's numbers), MATLAB's stream's numbers
  alone (``stream draws``: ``rand(n, 1)`` through NumPy's MT19937), the scalar kernel
  ``numpy_fast.chop_scalar``, MATLAB's stream lent to a kernel (``with stream_state()``) and
  the counter's ``take``.  A stochastic row's floor in the second table is its reference row
  with the deterministic loop swapped for the stochastic one: what the call would cost if
  everything above the loops were free of the draws.

The first table gives us per call (compared by ``compare_trees.py``), the ratio to
the row's reference and the number of function calls per call counted by cProfile
(``py calls``: Python functions; ``all calls``: with built-in ones), which does not
depend on the machine's load.  The second table says which targets are met.
Nothing is asserted.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import sys
import timeit
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if (ROOT / "pychop_compat").is_dir():  # a copy outside a checkout runs the tree on PYTHONPATH
    sys.path.insert(0, str(ROOT))

import pychop_compat  # noqa: E402
from pychop_compat import Chop, chop, cpfloat  # noqa: E402
from pychop_compat.kernels import compiled, numpy_fast  # noqa: E402
from pychop_compat.matlab.options import resolve  # noqa: E402
from pychop_compat.random.matlab_stream import stream_state, stream_uniform  # noqa: E402
from pychop_compat.random.sources import MATLAB_STREAM, counter_sources  # noqa: E402

if compiled.available():  # the steady state: a process that has loaded the compiled engine
    compiled.kernels()    # ('auto' waits to load it in a new process: bench_first_call.py)

H = {"format": "h"}
H_ROUND5 = {"format": "h", "round": 5}
BINARY16 = {"format": "binary16"}


def _empty() -> None:
    pass


def _lend_stream() -> None:
    with stream_state():
        pass


def _cases(sizes: list) -> list:
    """``(name, n, statement, setup, reference name, target)``: statements run in ``NAMESPACE``."""
    cases = [("floor: empty function", 1, "empty()", "pass", None, None),
             ("floor: chop_scalar kernel", 1, "chop_scalar(v, SPEC, MATLAB_STREAM)", "pass", "float16 scalar", None),
             ("floor: with stream_state()", 1, "lend_stream()", "pass", None, None),
             ("float16 scalar", 1, "float(np.float16(v))", "pass", None, None),
             ("chop scalar", 1, "chop(v)", "chop(None, H)", "float16 scalar", 4.0),
             ("chop scalar dict", 1, "chop(v, H)", "pass", "float16 scalar", None)]
    for n in sizes:
        x = f"x{n}"
        cases += [
            ("floor: np.positive", n, f"np.positive({x})", "pass", None, None),
            ("floor: counter take", n, f"counter.take({n})", "pass", None, None),
            ("astype fp16", n, f"{x}.astype(np.float16).astype(np.float64)", "pass", None, None),
            ("floor: compiled loop", n, f"loop({x}, {x}o, PACKED)", "pass", "astype fp16", None),
            ("floor: compiled loop round 5 stream", n, f"stream_loop({x}, {x}o, PACKED_ROUND5, KEY, POS)", "pass",
             "floor: compiled loop", None),
            ("floor: compiled loop round 5 counter", n, f"counter_loop({x}, {x}o, PACKED_ROUND5, KEYS, 0)", "pass",
             "floor: compiled loop", None),
            ("floor: stream draws", n, f"stream_uniform({n})", "pass", None, None),
            ("chop stored", n, f"chop({x})", "chop(None, H)", "astype fp16", 3.0),
            ("chop dict", n, f"chop({x}, H)", "pass", "astype fp16", 5.0),
            ("Chop object", n, f"half({x})", "pass", "astype fp16", 3.0),
            ("chop stored round 5", n, f"chop({x})", "chop(None, H_ROUND5)", "chop stored", 1.5),
            ("Chop round 5 rng", n, f"half_sr({x})", "pass", "Chop object", 1.5),
        ]
        if n == 100:
            cases += [("astype fp16 10x10", n, "a.astype(np.float16).astype(np.float64)", "pass", None, None),
                      ("cpfloat dict 10x10", n, "cpfloat(a, BINARY16)", "pass", "astype fp16 10x10", 5.0),
                      ("cpfloat stored 10x10", n, "cpfloat(a)", "cpfloat(None, BINARY16)", "astype fp16 10x10",
                       None)]
    return cases


#: The stochastic rows and the loop each runs (for their floors).
_STOCHASTIC_LOOPS = {"chop stored round 5": "floor: compiled loop round 5 stream",
                     "Chop round 5 rng": "floor: compiled loop round 5 counter"}


def _namespace(sizes: list) -> dict:
    rng = np.random.default_rng(2026)
    namespace = {"np": np, "chop": chop, "cpfloat": cpfloat, "H": H, "H_ROUND5": H_ROUND5, "BINARY16": BINARY16,
                 "v": 1 / 3, "a": rng.standard_normal((10, 10)), "empty": _empty,
                 "half": Chop(format="h"), "half_sr": Chop(format="h", round=5, rng=1)}
    spec = resolve(H, None).spec
    counter = counter_sources(1).counter
    namespace.update(SPEC=spec, MATLAB_STREAM=MATLAB_STREAM, chop_scalar=numpy_fast.chop_scalar,
                     lend_stream=_lend_stream, counter=counter, stream_uniform=stream_uniform,
                     PACKED=compiled.packed_constants(compiled.rounding_constants(spec, np.float64)),
                     PACKED_ROUND5=compiled.packed_constants(
                         compiled.rounding_constants(resolve(H_ROUND5, None).spec, np.float64)),
                     KEY=np.array(rng.integers(0, 2**32, 624), np.uint32), POS=np.array([624], np.intc),
                     KEYS=np.array(counter.keys, np.uint64))
    if compiled.available():  # (without Numba the compiled loops' rows are left out)
        kernels = compiled.kernels()
        namespace.update(loop=kernels.det_small, stream_loop=kernels.stream_small, counter_loop=kernels.counter_small)
    for n in sizes:
        x = namespace[f"x{n}"] = rng.standard_normal(n)
        out = np.empty_like(x)
        namespace.update({f"x{n}u": x.view(np.uint64), f"x{n}o": out, f"x{n}ou": out.view(np.uint64)})
    return namespace


def _calls_per_call(statement: str, setup: str, namespace: dict, count: int = 200) -> tuple:
    """Function calls per run of ``statement`` counted by cProfile: (Python only, all)."""
    totals = []
    for builtins in (False, True):
        per_statement = []
        for body in ("pass", statement):
            exec(setup, namespace)
            code = compile(f"for _ in range({count}):\n    {body}\n", "<count>", "exec")
            profile = cProfile.Profile(builtins=builtins)
            profile.enable()
            exec(code, namespace)
            profile.disable()
            per_statement.append(pstats.Stats(profile).total_calls)
        totals.append((per_statement[1] - per_statement[0]) / count)
    return tuple(totals)


def main(argv: list | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer rounds (noisier minima)")
    parser.add_argument("--rounds", type=int, default=None, help="timing rounds (default 40; 12 with --quick)")
    parser.add_argument("--sizes", type=int, nargs="+", default=[10, 100, 1000])
    parser.add_argument("--smoke", action="store_true", help="one call per case (checks the script, times nothing)")
    options = parser.parse_args(argv)
    rounds = 1 if options.smoke else options.rounds or (12 if options.quick else 40)
    namespace = _namespace(options.sizes)
    cases = [case for case in _cases(options.sizes) if "loop" in namespace or "loop(" not in case[2]]

    timers = []
    for name, n, statement, setup, _, _ in cases:
        timer = timeit.Timer(statement, setup, globals=namespace)
        timer.timeit(3)  # the warm-up (caches, compilation), apart from the calibration
        number = 100 if options.smoke else timer.autorange()[0]
        timers.append((timer, max(1, number // 100)))  # about 2 ms per sample
    best = [float("inf")] * len(cases)
    for _ in range(rounds):
        for i, (timer, number) in enumerate(timers):
            best[i] = min(best[i], timer.timeit(number) / number)

    figures = {(name, n): seconds for (name, n, *_), seconds in zip(cases, best)}
    print(f"pychop_compat {pychop_compat.__version__} from {Path(pychop_compat.__file__).parent}; "
          f"NumPy {np.__version__}; min of {rounds} interleaved rounds")
    print()
    print("Time per call")
    print()
    print("| case | n | us | ratio | reference | py calls | all calls |")
    print("|---|---|---:|---:|---|---:|---:|")
    verdicts = []
    for (name, n, statement, setup, reference, target), seconds in zip(cases, best):
        ref_name = reference or ""
        ref_n = 1 if reference == "float16 scalar" else n
        ratio = seconds / figures[(reference, ref_n)] if reference else float("nan")
        py_calls, all_calls = _calls_per_call(statement, setup, namespace, 2 if options.smoke else 200)
        ratio_cell = f"{ratio:.2f}" if reference else ""
        # (n as text: compare_trees.py tells rows apart by their text cells)
        print(f"| {name} | n={n} | {seconds * 1e6:.3f} | {ratio_cell} | {ref_name} | {py_calls:.0f} | {all_calls:.0f} |")
        if target is not None:
            verdicts.append((name, n, ratio, reference, target))
    print()
    print("Targets (ratio to the reference row, same run)")
    print()
    print("| case | n | ratio | target | met | floor |")
    print("|---|---|---:|---:|---|---:|")
    for name, n, ratio, reference, target in verdicts:
        met = "-" if options.smoke else "yes" if ratio <= target else "no"  # (a smoke run measures nothing)
        loop = _STOCHASTIC_LOOPS.get(name)
        floor = ""
        if loop and ("floor: compiled loop", n) in figures:
            # the reference call with its deterministic loop swapped for the stochastic one
            deterministic = figures[(reference, n)]
            floor = (f"{(deterministic - figures[('floor: compiled loop', n)] + figures[(loop, n)]) / deterministic:.2f}")
        print(f"| {name} | n={n} | {ratio:.2f} | {target:g}x {reference} | {met} | {floor} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
