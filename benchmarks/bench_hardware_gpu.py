"""Time of the block-FMA model of a matrix unit (``hardware.matmul``) on CUDA tensors: the Triton
kernel (``kernels/triton_blockfma.py``) against the array-namespace implementation, same process.

Run from the repository root on a machine with a CUDA GPU (prints "no GPU" and exits 0 elsewhere)::

    python benchmarks/bench_hardware_gpu.py                  # n = 1024, 4096; H100 fp16 and B200 e4m3
    python benchmarks/bench_hardware_gpu.py --sizes 512 --repeats 5
    TRITON_INTERPRET=1 python benchmarks/bench_hardware_gpu.py --cpu-proxy --sizes 32 --repeats 1

For each model (H100 fp16 inputs, fp32 output; B200 e4m3 inputs, fp32 output) and n, on standard
normal n x n float32 CUDA tensors, after a warm-up call (which compiles the kernel), the best of
``--repeats`` calls of each path is printed (synchronised wall time, rounding of the inputs and
all), with GFLOP/s (2 n**3 / time), the ratio namespace / Triton, and whether the two results
have the same bits.  The namespace path runs a few rows at a time with dozens of array
operations per block: it is timed up to ``--namespace-max`` (1024) only, which the output says.
First the two paths and the host (NumPy) result are compared on a small adversarial product.
The whole run takes well under a minute on an H100 or H200.
"""

from __future__ import annotations

import argparse
import time

import numpy as np


def best_of(function, repeats: int, synchronize) -> tuple:
    """The least wall time of ``repeats`` calls of ``function`` (the device synchronised), and
    the result of the last."""
    times = []
    for _ in range(repeats):
        synchronize()
        start = time.perf_counter()
        result = function()
        synchronize()
        times.append(time.perf_counter() - start)
    return min(times), result


def same_bits(x, y) -> bool:
    """Whether two float tensors of one dtype have the same bit patterns."""
    import torch

    view = torch.int16 if x.dtype == torch.float16 else torch.int32
    return x.shape == y.shape and x.dtype == y.dtype and bool(torch.equal(x.view(view), y.view(view)))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1024, 4096])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--namespace-max", type=int, default=1024,
                        help="largest n at which the namespace path is timed (it is slow)")
    parser.add_argument("--models", nargs="+", default=["H100:fp16", "B200:e4m3"], help="GPU:inputs, fp32 output")
    parser.add_argument("--cpu-proxy", action="store_true",
                        help="CPU tensors down the kernel's route, run by Triton's interpreter (with "
                             "TRITON_INTERPRET=1 and small --sizes): checks this script, not GPU times")
    args = parser.parse_args(argv)
    try:
        import torch
    except ImportError:
        print("no GPU (torch is not installed)")
        return 0
    if not torch.cuda.is_available() and not args.cpu_proxy:
        print("no GPU (torch sees no CUDA device)")
        return 0
    from pychop_compat import hardware
    from pychop_compat.kernels import triton_blockfma

    if not triton_blockfma.available():
        print("no Triton: the namespace path only; nothing to compare")
        return 0
    if args.cpu_proxy:
        triton_blockfma.CPU_TENSORS_AS_CUDA = True
        device = torch.device("cpu")
        print("CPU proxy (Triton's interpreter): not GPU times")
    else:
        device = torch.device("cuda")
        print(f"device: {torch.cuda.get_device_name(device)}; torch {torch.__version__}")
    synchronize = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)

    def run(A, B, spec, kernel: bool):
        triton_blockfma.ENABLED = kernel
        try:
            return hardware.matmul(A, B, model=spec)
        finally:
            triton_blockfma.ENABLED = True

    # A check first: both paths and the host on a small product with a 1 beside tiny terms,
    # cancellation, subnormal inputs and an infinity.
    rng = np.random.default_rng(0)
    A, B = rng.standard_normal((96, 200)), rng.standard_normal((200, 80))
    A[0, 1:] *= 2.0 ** -30
    A[1, ::2] = -A[1, 1::2]
    A[2] *= 2.0 ** -20
    A[3, 5] = np.inf
    for name in args.models:
        gpu, inputs = name.split(":")
        spec = hardware.model(gpu, inputs, "fp32")
        host = torch.from_numpy(hardware.matmul(A, B, model=spec))
        tA, tB = torch.from_numpy(A).to(device), torch.from_numpy(B).to(device)
        kernel, namespace = run(tA, tB, spec, True).cpu(), run(tA, tB, spec, False).cpu()
        print(f"check {name} 96x200x80: Triton == host: {same_bits(kernel, host)}, "
              f"namespace == host: {same_bits(namespace, host)}")

    print(f"{'model':>10} {'n':>6} {'Triton [s]':>11} {'GFLOP/s':>9} {'namespace [s]':>14} {'GFLOP/s':>9} "
          f"{'ratio':>7} {'same bits':>9}")
    for name in args.models:
        gpu, inputs = name.split(":")
        spec = hardware.model(gpu, inputs, "fp32")
        warm = torch.ones((64, 64), device=device)
        run(warm, warm, spec, True)
        run(warm, warm, spec, False)
        for n in args.sizes:
            generator = torch.Generator(device=device).manual_seed(n)
            A = torch.randn((n, n), generator=generator, device=device)
            B = torch.randn((n, n), generator=generator, device=device)
            flops = 2.0 * n ** 3
            kernel_s, kernel_result = best_of(lambda: run(A, B, spec, True), args.repeats, synchronize)
            if n <= args.namespace_max:
                namespace_s, namespace_result = best_of(lambda: run(A, B, spec, False), max(1, args.repeats - 1),
                                                        synchronize)
                same = same_bits(kernel_result, namespace_result)
                print(f"{name:>10} {n:>6} {kernel_s:>11.4f} {flops / kernel_s / 1e9:>9.1f} {namespace_s:>14.4f} "
                      f"{flops / namespace_s / 1e9:>9.1f} {namespace_s / kernel_s:>7.1f} {str(same):>9}")
            else:
                print(f"{name:>10} {n:>6} {kernel_s:>11.4f} {flops / kernel_s / 1e9:>9.1f} "
                      f"{'not timed':>14} {'':>9} {'':>7} {'':>9}   (namespace path too slow at this n: "
                      f"timed up to n = {args.namespace_max})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
