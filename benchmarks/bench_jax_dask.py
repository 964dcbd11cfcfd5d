"""CPU benchmark of the JAX and Dask engines against the NumPy engine (times measured, nothing asserted).

Run from the repository root::

    python benchmarks/bench_jax_dask.py            # n = 1e6 and 1e7, float32 and float64
    python benchmarks/bench_jax_dask.py --quick    # smoke run

Rows: fp16 round to nearest (``{'format': 'h'}``) and fp16 stochastic
rounding with counter-based numbers; then CPFloat's rules through
``round_to_format`` (``float8_e4m3fn`` round to nearest, fp16 round to odd),
whose JAX rows run on the device.  Columns, in ns per element (median of
repeats) and as a ratio to the NumPy engine measured in the same run:

* ``numpy``: ``chop(x)`` on an ndarray (for SR: ``Chop(..., rng=seed)`` where
  that is counter-based, else a NumPy Generator);
* ``jax eager``: ``chop(x)`` on a ``jax.Array`` after warm-up (one compiled
  function per options; SR: the host path, chop.m's numbers);
* ``jax jit``: ``jax.jit(lambda x: chop_jax(x, options[, seed=1]))``;
* ``dask``: ``chop`` on a Dask array of 8 chunks, computed with the threaded scheduler.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pychop_compat import Chop, chop
from pychop_compat.random import sources as randomness  # noqa: E402
from pychop_compat.rounding import make_spec, round_to_format  # noqa: E402


def _median_time(func, repeats: int) -> float:
    func()  # warm-up (compilation)
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        func()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def _row(label: str, dtype: str, n: int, t_np: float, others) -> None:
    cells = [f"{t_np / n * 1e9:.2f}"] + [f"{t / n * 1e9:.2f} ({t / t_np:.2f}x)" for t in others]
    print(f"| {label} | {dtype} | {n:.0e} | " + " | ".join(cells) + " |")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args(argv)
    import dask.array as da
    import jax

    jax.config.update("jax_enable_x64", True)
    from pychop_compat import chop_jax

    counter = hasattr(randomness, "counter_sources")
    sizes = [10**5] if args.quick else [10**6, 10**7]
    repeats = 2 if args.quick else 5
    print(f"jax {jax.__version__} on {jax.devices()[0].device_kind}; SR numbers on NumPy: "
          f"{'Chop(rng=seed), counter-based' if counter else 'a NumPy Generator'}")
    print("| case | dtype | n | numpy ns/el | jax eager | jax jit | dask |")
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: |")
    for label, options, seeded in (("fp16 RN", {"format": "h"}, False),
                                   ("fp16 SR", {"format": "h", "round": 5}, True)):
        for dtype in ("float32", "float64"):
            for n in sizes:
                x = np.random.default_rng(0).standard_normal(n).astype(dtype)
                xj = jax.device_put(x)
                xd = da.from_array(x, chunks=-(-n // 8))
                rng = 1 if counter else np.random.default_rng(1)
                numpy_call = (lambda: Chop(options, rng=rng)(x)) if seeded else (lambda: chop(x, options))
                jitted = jax.jit(lambda a: chop_jax(a, options, seed=1) if seeded else chop_jax(a, options))
                t_np = _median_time(numpy_call, repeats)
                t_eager = _median_time(lambda: chop(xj, options).block_until_ready(), repeats)
                t_jit = _median_time(lambda: jitted(xj).block_until_ready(), repeats)
                if seeded and not counter:
                    t_dask = float("nan")  # Dask needs the counter-based Chop(rng=<int>)
                else:
                    dask_call = (lambda: Chop(options, rng=1)(xd).compute()) if seeded else (
                        lambda: chop(xd, options).compute(scheduler="threads"))
                    t_dask = _median_time(dask_call, repeats)
                _row(label, dtype, n, t_np, (t_eager, t_jit, t_dask))
    # CPFloat's rules (round_to_format, the cpfloat facade's rounding): on JAX arrays they run on
    # the device (integer operations on bit patterns), eagerly and under jit.
    for label, spec in (("cpfloat float8_e4m3fn RN", make_spec("float8_e4m3fn", 1)),
                        ("cpfloat fp16 round to odd", make_spec("fp16", 7))):
        for dtype in ("float32", "float64"):
            for n in sizes:
                x = np.random.default_rng(0).standard_normal(n).astype(dtype)
                xj = jax.device_put(x)
                xd = da.from_array(x, chunks=-(-n // 8))
                jitted = jax.jit(lambda a: round_to_format(a, spec))
                t_np = _median_time(lambda: round_to_format(x, spec), repeats)
                t_eager = _median_time(lambda: round_to_format(xj, spec).block_until_ready(), repeats)
                t_jit = _median_time(lambda: jitted(xj).block_until_ready(), repeats)
                t_dask = _median_time(lambda: round_to_format(xd, spec).compute(scheduler="threads"), repeats)
                _row(label, dtype, n, t_np, (t_eager, t_jit, t_dask))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
