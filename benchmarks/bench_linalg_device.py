"""Chopped fp16 ``linalg.matmul`` (and ``linalg.lu``) on every available device, against an unchopped
float32 matmul on the same device.

Run from the repository root::

    python benchmarks/bench_linalg_device.py                     # n = 256 .. 4096 (slow on a CPU)
    python benchmarks/bench_linalg_device.py --quick             # n = 256, 512
    python benchmarks/bench_linalg_device.py --sizes 256 512 1024 --lu --libraries torch jax numpy

For each size ``n`` and array library, on standard normal float32 ``n x n``
matrices: the time of ``linalg.matmul(A, B, 'h')`` (recursive summation,
every product and sum rounded to fp16 by chop on the array's own device), of
``A @ B`` in float32 by the library itself, and their ratio (chopped /
unchopped); with ``--lu`` also ``linalg.lu(A, 'h')``.  Libraries: ``torch``
(CPU), ``torch-cuda`` (the fused Triton kernel of
:mod:`pychop_compat.kernels.triton_matmul` when Triton is installed),
``torch-cuda-generic`` (the same with that kernel off: one chop call per step
over the whole panel) and ``cupy`` (when a CUDA GPU is visible), ``jax`` (its
default device), and the host paths: ``numpy`` (float32 data: the NumPy
kernels) and ``numpy-f64`` (float64 data: the compiled kernels when Numba is
installed, else NumPy).  Each time is the best of ``--repeats`` runs, the
libraries interleaved within each repeat (the first run of JAX includes its
compilations); GPU work is synchronised before the clock stops.  CPU code runs
``--threads`` threads (default 1).  No assertion is made.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path


def _threads_from_argv(argv: list) -> str:
    """``--threads N`` read before NumPy is imported (BLAS reads its thread count once)."""
    if "--threads" in argv and argv.index("--threads") + 1 < len(argv):
        return argv[argv.index("--threads") + 1]
    return "1"


for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, _threads_from_argv(sys.argv))

import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pychop_compat import linalg  # noqa: E402
from pychop_compat.engines import available_engines  # noqa: E402


def _libraries() -> list:
    engines = available_engines()
    names = ["numpy", "numpy-f64"]
    if "torch" in engines:
        names.append("torch")
    if "torch-cuda" in engines:
        names.append("torch-cuda")
        names.append("torch-cuda-generic")
    if "cupy" in engines:
        names.append("cupy")
    if "jax" in engines:
        names.append("jax")
    return names


def _device_array(library: str, a: np.ndarray):
    """``a`` as an array of ``library`` on its device, and a function that waits for that device."""
    if library == "numpy":
        return a, lambda r: r
    if library == "numpy-f64":
        return a.astype(np.float64), lambda r: r
    if library in ("torch", "torch-cuda", "torch-cuda-generic"):
        import torch

        t = torch.from_numpy(a)
        if library != "torch":
            t = t.cuda()
            return t, lambda r: (torch.cuda.synchronize(), r)[1]
        return t, lambda r: r
    if library == "cupy":
        import cupy

        return cupy.asarray(a), lambda r: (cupy.cuda.Stream.null.synchronize(), r)[1]
    if library == "jax":
        import jax

        def wait(r):
            import dataclasses

            leaves = [getattr(r, f.name) for f in dataclasses.fields(r)] if dataclasses.is_dataclass(r) else [r]
            for leaf in leaves:
                if isinstance(leaf, jax.Array):
                    leaf.block_until_ready()
            return r

        return jax.numpy.asarray(a), wait
    raise ValueError(library)


def _best(func, wait, repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        wait(func())
        best = min(best, time.perf_counter() - t0)
    return best


def _chopped_matmul(library: str, a, b, fmt: str):
    """``linalg.matmul(a, b, fmt)``; ``torch-cuda-generic``: with the fused Triton kernel off."""
    if library != "torch-cuda-generic":
        return linalg.matmul(a, b, fmt)
    from pychop_compat.kernels import triton_matmul

    triton_matmul.ENABLED = False
    try:
        return linalg.matmul(a, b, fmt)
    finally:
        triton_matmul.ENABLED = True


def measure(n: int, libraries: list, repeats: int, with_lu: bool, fmt: str) -> dict:
    """``{library: {'chopped': s, 'plain': s, 'lu': s}}`` for size ``n`` (libraries interleaved)."""
    gen = np.random.default_rng(n)
    A = gen.standard_normal((n, n)).astype(np.float32)
    B = gen.standard_normal((n, n)).astype(np.float32)
    arrays = {lib: (_device_array(lib, A), _device_array(lib, B)) for lib in libraries}
    for lib, ((a, wait), (b, _)) in arrays.items():  # warm up: compile, load kernels, allocate
        wait(linalg.matmul(a[:8, :8], b[:8, :8], fmt))
        wait(a @ b)
    times = {lib: {"chopped": float("inf"), "plain": float("inf"), "lu": float("nan")} for lib in libraries}
    for _ in range(repeats):
        for lib, ((a, wait), (b, _)) in arrays.items():
            t = times[lib]
            t["plain"] = min(t["plain"], _best(lambda: a @ b, wait, 5))
            t["chopped"] = min(t["chopped"], _best(lambda: _chopped_matmul(lib, a, b, fmt), wait, 1))
            if with_lu:
                lu_time = _best(lambda: linalg.lu(a, fmt), wait, 1)
                t["lu"] = lu_time if np.isnan(t["lu"]) else min(t["lu"], lu_time)
    return times


def libraries_requested(args: argparse.Namespace) -> list:
    return args.libraries or _libraries()


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[256, 512, 1024, 2048, 4096])
    parser.add_argument("--quick", action="store_true", help="n = 256 and 512 only")
    parser.add_argument("--libraries", nargs="+", default=None,
                        help="subset of numpy, numpy-f64, torch, torch-cuda, torch-cuda-generic, cupy, jax "
                             "(default: all available)")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--lu", action="store_true", help="also time linalg.lu(A, format)")
    parser.add_argument("--format", default="h")
    parser.add_argument("--threads", type=int, default=1,
                        help="CPU threads of BLAS, torch and XLA's host code (default 1: a shared machine)")
    args = parser.parse_args(argv)
    if "torch" in libraries_requested(args):
        import torch

        torch.set_num_threads(args.threads)
    sizes = [256, 512] if args.quick else args.sizes
    libraries = args.libraries or _libraries()
    if "jax" in libraries:
        import jax

        jax.config.update("jax_enable_x64", True)
    if not {"torch-cuda", "cupy"} & set(_libraries()):
        print("No CUDA GPU visible: the times below are CPU times only (not GPU times).")
    print(f"chopped: linalg.matmul(A, B, {args.format!r}) (recursive); plain: A @ B in float32; "
          f"best of {args.repeats} interleaved runs\n")
    print(f"CPU threads: {args.threads}; numpy-f64: float64 data (its plain matmul is float64)\n")
    print("| n | library | chopped matmul (s) | plain float32 matmul (s) | ratio | chopped lu (s) |")
    print("|---:|---|---:|---:|---:|---:|")
    for n in sizes:
        times = measure(n, libraries, args.repeats, args.lu, args.format)
        for lib in libraries:
            t = times[lib]
            lu_cell = f"{t['lu']:.3g}" if not np.isnan(t["lu"]) else "-"
            print(f"| {n} | {lib} | {t['chopped']:.3g} | {t['plain']:.3g} | {t['chopped'] / t['plain']:.0f} "
                  f"| {lu_cell} |", flush=True)


if __name__ == "__main__":
    main()
