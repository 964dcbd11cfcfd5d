"""Speed of pychop_compat.nn's quantizer against a hardware cast, ``x.half().float()``.

Run from the repository root::

    python benchmarks/bench_nn.py                  # CPU, and CUDA when torch sees a GPU
    python benchmarks/bench_nn.py --threads 1      # steadier numbers on a shared machine
    python benchmarks/bench_nn.py --quick          # smoke run
    python benchmarks/bench_nn.py --device cuda    # one device only

Rows: the quantizer to fp16 and to bfloat16 (chop's ``'b'``, no subnormals)
with round to nearest, eager and under ``torch.compile`` (Inductor: one fused
loop of integer operations on the bit patterns,
:mod:`pychop_compat.kernels.torch_elementwise`); torch's own fixed cost of a
compiled call (``torch.compile`` of ``v * 2``), which a quantizer inside a
compiled training step shares with the rest of the step; ``chop`` itself on a
tensor; stochastic rounding with torch's generator (the default), eager and
compiled, with its two parts timed apart (the random numbers alone,
``torch.rand``; the rounding alone, given the numbers); stochastic rounding
with ``rng=<int seed>`` (the counter-based generator: chop's compiled CPU
engine eagerly, the numbers made inside Inductor's fused loop when compiled);
and the forward + backward of ``quantize`` on a tensor that requires grad.  Each time is the median of repeats, in ns per element, with
its ratio to ``x.half().float()`` timed alternately in the same run (the
ratio is what to compare across machines; nothing is asserted).  All rows
return a new tensor.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

from pychop_compat import Chop  # noqa: E402
from pychop_compat.nn import GradientRule, Rounder, apply_quantizer  # noqa: E402


def _time(func, sync, repeats: int) -> float:
    func()
    sync()
    samples = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        func()
        sync()
        samples.append(time.perf_counter() - t0)
    return statistics.median(samples)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small n, few repeats, no torch.compile")
    parser.add_argument("--device", default="all", help="'cpu', 'cuda' or 'all' (CPU, and CUDA when visible)")
    parser.add_argument("--sizes", default=None, help="comma-separated n (default 1e5,1e6)")
    parser.add_argument("--repeats", type=int, default=None)
    parser.add_argument("--no-compile", action="store_true", help="skip the torch.compile rows")
    parser.add_argument("--threads", type=int, default=None,
                        help="torch.set_num_threads (1 gives steadier numbers on a shared machine)")
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.device == "all":
        devices = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
    elif args.device.startswith("cuda") and not torch.cuda.is_available():
        print("No CUDA GPU visible to torch: nothing to measure on cuda.")
        return 0
    else:
        devices = [args.device]
    sizes = [int(float(s)) for s in (args.sizes or ("2e4" if args.quick else "1e5,1e6")).split(",")]
    repeats = args.repeats or (3 if args.quick else 15)
    compile_rows = not (args.quick or args.no_compile)
    print(f"torch {torch.__version__}, threads {torch.get_num_threads()}, float32, median of {repeats}")
    print("| device | case | n | ns/element | baseline ns/element | ratio to x.half().float() |")
    print("|---|---|---|---|---|---|")
    for name in devices:
        _measure(torch.device(name), sizes, repeats, compile_rows)
    return 0


def _measure(device, sizes, repeats: int, compile_rows: bool) -> None:
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    fp16, bf16, sr = Rounder("h"), Rounder("b"), Rounder("h", "stochastic")
    sr_counter = Rounder("h", "stochastic", rng=0)
    chop_fp16 = Chop(format="h")
    rule = GradientRule()
    if compile_rows:
        compiled = {label: torch.compile(lambda v, r=r: r(v), fullgraph=True)
                    for label, r in (("fp16", fp16), ("bf16", bf16), ("sr", sr), ("sr_counter", sr_counter))}
        compiled["double"] = torch.compile(lambda v: v * 2, fullgraph=True)
    for n in sizes:
        x = torch.randn(n, device=device)
        leaf = x.clone().requires_grad_(True)
        upstream = torch.ones_like(x)
        numbers = torch.rand(n, device=device)

        def train_step():
            apply_quantizer(leaf, fp16, rule).backward(upstream)

        cases = [("quantizer fp16 RN, eager", lambda: fp16(x)),
                 ("quantizer bf16 RN, eager", lambda: bf16(x)),
                 ("chop fp16 RN on a tensor", lambda: chop_fp16(x)),
                 ("quantizer fp16 SR, eager (torch.rand)", lambda: sr(x)),
                 ("  its numbers alone: torch.rand", lambda: torch.rand(n, device=device)),
                 ("  its rounding alone, given the numbers", lambda: sr(x, numbers)),
                 ("quantizer fp16 SR, eager, rng=0 (counter numbers)", lambda: sr_counter(x)),
                 ("quantize fp16 forward + backward", train_step)]
        if compile_rows:
            cases[2:2] = [("quantizer fp16 RN, torch.compile", lambda: compiled["fp16"](x)),
                          ("quantizer bf16 RN, torch.compile", lambda: compiled["bf16"](x)),
                          ("  torch's fixed cost: torch.compile of v * 2", lambda: compiled["double"](x))]
            cases.insert(-1, ("quantizer fp16 SR, torch.compile (Inductor's rand)", lambda: compiled["sr"](x)))
            cases.insert(-1, ("quantizer fp16 SR, torch.compile, rng=0 (counter numbers fused)",
                              lambda: compiled["sr_counter"](x)))
        for label, func in cases:
            ours, base = [], []
            for _ in range(3):  # alternate with the baseline, to share the machine's state
                ours.append(_time(func, sync, repeats))
                base.append(_time(lambda: x.half().float(), sync, repeats))
            t, b = statistics.median(ours), statistics.median(base)
            print(f"| {device.type} | {label} | {n:.0e} | {t / n * 1e9:.2f} | {b / n * 1e9:.2f} | {t / b:.2f} |",
                  flush=True)


if __name__ == "__main__":
    sys.exit(main())
