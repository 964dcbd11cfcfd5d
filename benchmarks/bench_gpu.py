"""GPU benchmark of pychop_compat's CuPy and torch CUDA engines.

Run from the repository root::

    python benchmarks/bench_gpu.py                  # n = 1e6 .. 1e9, float32 and float64
    python benchmarks/bench_gpu.py --quick          # smoke run: n = 1e6 and 1e7, few repeats
    python benchmarks/bench_gpu.py --sizes 1e6 1e8  # chosen sizes
    python benchmarks/bench_gpu.py --formats        # also OCP formats and the cpfloat facade

For each engine (CuPy arrays; torch CUDA tensors on their default route:
CuPy's kernel when CuPy is installed, else the Triton kernel; then, as
separate rows, the Triton route and pure torch), dtype, size and case
(fp16, bf16 and fp8-e4m3 round to nearest, fp16 stochastic rounding with
device draws) the table gives the median time of ``chop`` and its effective
bandwidth: bytes read plus bytes written (``2 * n * itemsize``) per second.
Next to it, measured in the same run on the same array: the device's copy
bandwidth (``cupy.copyto`` or ``Tensor.copy_``, the same bytes) and, for
torch, the native ``x.half()`` round trip (``x.half().to(x.dtype)``, counted
with the same bytes, so its column compares directly with the fp16 row).
Sizes that do not fit in device memory are reported as such.  Without a CUDA
GPU the script says so and exits with status 0.

``--cpu-proxy`` runs the pure-torch rows on CPU tensors sent down the paths a
CUDA tensor takes without CuPy (whole-tensor operations, numbers made by the
counter-based generator), timed with ``time.perf_counter``: not a GPU
measurement, but the ratio to the copy column tells how many passes over
memory those paths make.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pychop_compat import Chop  # noqa: E402
from pychop_compat.engines import available_engines  # noqa: E402

_CPU_PROXY = "torch-cpu (GPU paths, proxy)"

CASES = [
    ("fp16 RN", dict(format="h")),
    ("bf16 RN", dict(format="b")),
    ("fp8-e4m3 RN", dict(format="fp8-e4m3")),
    ("fp16 SR", dict(format="h", round=5)),
]
#: The formats beyond chop (issue 13), with ``--formats``: chop's rules on OCP formats, and the
#: ``cpfloat`` facade (CPFloat's rules; its stochastic mode draws MATLAB's stream on the host).
FORMAT_CASES = [
    ("float8_e4m3fn RN", dict(format="float8_e4m3fn")),
    ("float4_e2m1fn RN", dict(format="float4_e2m1fn")),
    ("float8_e4m3fn SR", dict(format="float8_e4m3fn", round=5)),
    ("cpfloat float8_e4m3fn RN", dict(format="float8_e4m3fn", round=1, saturation=0), "cpfloat"),
    ("cpfloat fp16 round to odd", dict(format="h", round=7, saturation=0), "cpfloat"),
    ("cpfloat float4_e2m1fn SR", dict(format="float4_e2m1fn", round=5, saturation=0), "cpfloat"),
]


def _rounder(case):
    """The callable a case times: ``Chop(options)``, or ``cpfloat(x, fpopts)``."""
    options = case[1]
    if len(case) > 2 and case[2] == "cpfloat":
        from pychop_compat import cpfloat

        return lambda x: cpfloat(x, options)
    return Chop(options)


class _Timer:
    """Median milliseconds of a callable: GPU work timed with device events, CPU work with a clock."""

    def __init__(self, library):
        self.library = library

    def __call__(self, func, repeats: int) -> float:
        func()  # warm up (kernel compilation, allocator)
        times = []
        for _ in range(repeats):
            if self.library == "cpu":
                start = time.perf_counter()
                func()
                times.append(1e3 * (time.perf_counter() - start))
            elif self.library == "cupy":
                import cupy

                start, stop = cupy.cuda.Event(), cupy.cuda.Event()
                start.record()
                func()
                stop.record()
                stop.synchronize()
                times.append(cupy.cuda.get_elapsed_time(start, stop))
            else:
                import torch

                start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
                func()
                stop.record()
                stop.synchronize()
                times.append(start.elapsed_time(stop))
        return statistics.median(times)


def _gbps(nbytes: int, ms: float) -> float:
    return nbytes / (ms * 1e-3) / 1e9


def _input(library, n: int, dtype: str):
    """n standard normal values on the device."""
    if library == "cupy":
        import cupy

        return cupy.random.default_rng(0).standard_normal(n, dtype=dtype)
    import torch

    device = "cpu" if library == "cpu" else "cuda"
    generator = torch.Generator(device=device).manual_seed(0)
    return torch.randn(n, dtype=getattr(torch, dtype), device=device, generator=generator)


def _free_bytes(library) -> int:
    if library == "cpu":
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    if library == "cupy":
        import cupy

        return cupy.cuda.runtime.memGetInfo()[0]
    import torch

    return torch.cuda.mem_get_info()[0]


def _release(library) -> None:
    if library == "cpu":
        return
    if library == "cupy":
        import cupy

        cupy.get_default_memory_pool().free_all_blocks()
    else:
        import torch

        torch.cuda.empty_cache()


def _engine_rows(engine: str, sizes, dtypes, repeats: int, cases=CASES):
    """Rows of the table for one engine: (engine, dtype, n, case, ms, GB/s, copy GB/s, half GB/s)."""
    from pychop_compat.engines.dispatch import cuda_route, device_paths_on_cpu

    library = {"cupy": "cupy", _CPU_PROXY: "cpu"}.get(engine, "torch")
    pure_torch = engine in ("torch-cuda (pure torch)", _CPU_PROXY)
    timer = _Timer(library)
    routes = {"torch-cuda (pure torch)": "torch", "torch-cuda (triton)": "triton", _CPU_PROXY: "torch"}
    route = routes.get(engine, "auto")
    with device_paths_on_cpu(engine == _CPU_PROXY):
        for dtype in dtypes:
            itemsize = 4 if dtype == "float32" else 8
            for n in sizes:
                # Input, output, and for stochastic rounding one float64 draw per element,
                # plus room for temporaries (pure torch keeps several full-size ones).
                need = n * (2 * itemsize + 8) * (4 if pure_torch else 1.5)
                if need > _free_bytes(library):
                    yield (engine, dtype, n, "all", None, None, None, None)
                    continue
                try:
                    x = _input(library, n, dtype)
                    nbytes = 2 * n * itemsize
                    if library == "cupy":
                        import cupy

                        y = cupy.empty_like(x)
                        copy_ms = timer(lambda: cupy.copyto(y, x), repeats)
                        half_ms = None
                    else:
                        y = x.clone()
                        copy_ms = timer(lambda: y.copy_(x), repeats)
                        half_ms = timer(lambda: x.half().to(x.dtype), repeats)
                    del y
                    for case in cases:
                        label, chopper = case[0], _rounder(case)
                        with cuda_route(route):
                            ms = timer(lambda: chopper(x), repeats)
                        yield (engine, dtype, n, label, ms, _gbps(nbytes, ms), _gbps(nbytes, copy_ms),
                               None if half_ms is None else _gbps(nbytes, half_ms))
                    del x
                except MemoryError:
                    yield (engine, dtype, n, "all", None, None, None, None)
                except RuntimeError as err:  # torch's out-of-memory error
                    if "out of memory" not in str(err):
                        raise
                    yield (engine, dtype, n, "all", None, None, None, None)
                finally:
                    _release(library)


def _format(row) -> str:
    engine, dtype, n, case, ms, gbps, copy, half = row
    if ms is None:
        return f"| {engine} | {dtype} | {n:.0e} | {case} | does not fit | | | | |"
    share = f"{100 * gbps / copy:.0f}%"
    half_text = "" if half is None else f"{half:.3g}"
    return (f"| {engine} | {dtype} | {n:.0e} | {case} | {ms:.3f} | {gbps:.3g} | {copy:.3g} | "
            f"{share} | {half_text} |")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="smoke run: n = 1e6 and 1e7, few repeats")
    parser.add_argument("--sizes", type=float, nargs="+", default=None, help="sizes (default 1e6 1e7 1e8 1e9)")
    parser.add_argument("--dtypes", nargs="+", default=["float32", "float64"], choices=["float32", "float64"])
    parser.add_argument("--repeats", type=int, default=None, help="timed calls per entry (median)")
    parser.add_argument("--formats", action="store_true",
                        help="also the formats beyond chop: OCP formats under chop's rules, the cpfloat facade")
    parser.add_argument("--cpu-proxy", action="store_true",
                        help="only the pure-torch GPU paths, run on CPU tensors (not a GPU measurement)")
    args = parser.parse_args(argv)

    available = available_engines()
    engines = []
    if args.cpu_proxy:
        if "torch" not in available:
            print("--cpu-proxy needs torch.")
            return 0
        engines = [_CPU_PROXY]
    if "cupy" in available and not args.cpu_proxy:
        engines.append("cupy")
    if "torch-cuda" in available and not args.cpu_proxy:
        engines.append("torch-cuda")
        if "cupy" in available and importlib.util.find_spec("triton") is not None:
            engines.append("torch-cuda (triton)")
        engines.append("torch-cuda (pure torch)")
    if not engines:
        print("No CUDA GPU visible to CuPy or torch: nothing to benchmark (see benchmarks/bench_cpu.py).")
        return 0

    sizes = [int(s) for s in (args.sizes or ([1e6, 1e7] if args.quick else [1e6, 1e7, 1e8, 1e9]))]
    repeats = args.repeats or (3 if args.quick else 10)
    print(_device_line(engines[0]))
    print()
    print("| engine | dtype | n | case | ms | GB/s | copy GB/s | of copy | x.half() GB/s |")
    print("|---|---|---|---|---:|---:|---:|---:|---:|")
    for engine in engines:
        cases = CASES + FORMAT_CASES if args.formats else CASES
        for row in _engine_rows(engine, sizes, args.dtypes, repeats, cases):
            print(_format(row), flush=True)
    print()
    print("GB/s = 2 * n * itemsize / time (bytes read + written); the fp16 SR rows make their numbers "
          "on the device.")
    return 0


def _device_line(engine: str) -> str:
    if engine == _CPU_PROXY:
        import torch

        return (f"CPU proxy (no GPU): {os.cpu_count()} cores, torch {torch.__version__}, "
                f"{torch.get_num_threads()} threads; times are not GPU times")
    if engine == "cupy":
        import cupy

        props = cupy.cuda.runtime.getDeviceProperties(cupy.cuda.Device().id)
        name = props["name"].decode() if isinstance(props["name"], bytes) else props["name"]
        return f"Device: {name}, CuPy {cupy.__version__}"
    import torch

    return f"Device: {torch.cuda.get_device_name()}, torch {torch.__version__}"


if __name__ == "__main__":
    sys.exit(main())
