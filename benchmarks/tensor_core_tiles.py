"""Single MMA tiles on the GPU's tensor cores against pychop_compat.hardware, bit for bit.

Run from the repository root on a machine with a CUDA GPU::

    python benchmarks/tensor_core_tiles.py --report tiles.md               # default budget: 120 s
    python benchmarks/tensor_core_tiles.py --report tiles.md --seconds 60  # a tighter budget
    python benchmarks/tensor_core_tiles.py --report tiles.md --rehearse    # CPU: plumbing only
    python benchmarks/tensor_core_tiles.py --ptx 90     # no GPU: compile for sm_90, print the MMA instructions

A small Triton kernel computes ``D = A @ B + C`` for one tile per program with
``tl.dot(a, b, acc=c, out_dtype=...)``: fp16, bf16, tf32 (float32 data,
``input_precision='tf32'``) and fp8 e4m3/e5m2 inputs (Triton's default
``max_num_imprecise_acc``, which keeps C in the MMA's accumulator, as the model's
``D = A B + C`` does; with ``max_num_imprecise_acc=K`` Triton 3.x on sm_90 sums the
products apart from C and adds C in fp32 afterwards: see ``--fp8-diagnostic``)
where the device's capability has them, fp32 output
and fp16 output (``out_dtype=tl.float16``, an fp16 accumulator).  Two tile shapes:
16 x 16 x 64 with one warp (``mma.sync``) and 64 x 64 x 64 with four warps
(``wgmma`` on sm_90); the instruction the PTX holds is reported.  On sm_90
Triton feeds fp8 tiles to ``mma.sync`` as fp16 (exact: every fp8 value is an
fp16 one); those rows compare the kernel with the fp16 model.  The inputs are random
(standard normal) and adversarial: one large term and many tiny ones
(alignment and truncation), terms that cancel (in one block or in two), and
values across the whole range of the format (subnormals, overflow), with a
fixed seed.

Every output is compared, as bits (NaN equal to NaN), with
``hardware.matmul(A, B, C, beta=1, model=hardware.model(gpu, inputs, output))``
(the GPU's name is mapped to a preset; ``--gpu`` overrides), and with the
batched torch product in the same precision (``torch.baddbmm``, with
``out_dtype=float32`` for fp16/bf16 to fp32, ``allow_tf32=True`` for tf32, the
default ``allow_fp16_reduced_precision_reduction``; fp8 through
``torch._scaled_mm`` with unit scales, which takes no fp32 addend: its outputs
are compared with the model's for ``C = 0``).  cuBLAS may split K or use other
instructions, so torch's agreement is reported, not expected.

The Markdown table (``--report``, rewritten after every row so that a run cut
short still leaves one) gives per format pair and tile shape: the tiles and
outputs compared, how many equal the model, how many of torch's equal the model,
and the first disagreement of the kernel with the model.  Every step runs in
``try``/``except`` (its error goes into the table) and ``--seconds`` is checked
between steps.  The last line printed counts the kernel's outputs equal to the
model over every row that has a model for the MMA's own input format (not the
fp8 rows Triton computes with an fp16 MMA: which products share an instruction
is Triton's choice there); with ``--strict`` the exit status is 1
when one differs or a row failed (``python -m pychop_compat gpu-check`` runs it so).  Without
CUDA the script prints "no GPU" and exits with status 0; ``--rehearse`` runs the same code on the CPU (Triton's interpreter, torch on CPU)
at the smallest size: its numbers say nothing about hardware.  ``--ptx 90``
compiles the kernels for a capability without running them (no GPU needed).

``--fp8-diagnostic`` runs only fp8 -> fp32 on the 64 x 64 (wgmma) tile, 8 tiles
per kind of input, for K = 32 (one wgmma k32) and 64 (two), ``max_num_imprecise_acc``
= K, None (Triton's default) and 0, and C = 0 or random; each row counts the
kernel's outputs equal to the model with C, the model without C, and the model
without C followed by one fp32 add of C.  With ``--ptx 90`` it compiles those
kernels and counts the MMA instructions and fp32 adds in their PTX (Triton
3.9 for sm_90: max_num_imprecise_acc=K accumulates the MMAs apart from C and adds
C in fp32 afterwards; None keeps C in the wgmma accumulator; 0 falls back to an
fp16 mma.sync).
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import time
import traceback
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

# Input formats: torch dtype, significand bits (with the implicit one), emin, emax,
# the capability the tensor cores need.
FORMATS = {
    "fp16": ("float16", 11, -14, 15, (7, 0)),
    "bf16": ("bfloat16", 8, -126, 127, (8, 0)),
    "tf32": ("float32", 11, -126, 127, (8, 0)),
    "e4m3": ("float8_e4m3fn", 4, -6, 8, (8, 9)),
    "e5m2": ("float8_e5m2", 3, -14, 15, (8, 9)),
}
OUTPUT_DTYPES = {"fp32": "float32", "fp16": "float16"}
LARGEST = {"fp32": 3.4028234663852886e38, "fp16": 65504.0, "bf16": 3.3895313892515355e38,
           "tf32": 3.4028234663852886e38, "e4m3": 448.0, "e5m2": 57344.0}
PAIRS = [("fp16", "fp32"), ("fp16", "fp16"), ("bf16", "fp32"), ("tf32", "fp32"),
         ("e4m3", "fp32"), ("e5m2", "fp32"), ("e4m3", "fp16"), ("e5m2", "fp16")]
KINDS = ("random", "tiny terms", "cancellation", "whole range")
# Name fragments of torch.cuda.get_device_name() -> preset; then capability -> preset.
GPU_NAMES = [("H200", "H200"), ("H100", "H100"), ("H800", "H100"), ("GH200", "H100"), ("B200", "B200"),
             ("L40S", "L40S"), ("A100", "A100"), ("A30", "A30"), ("A2", "A2"), ("V100", "V100")]
GPU_CAPABILITIES = {(7, 0): "V100", (8, 0): "A100", (8, 6): "A100", (8, 9): "Ada", (9, 0): "H100",
                    (10, 0): "B200"}


def preset_for(device_name: str, capability: tuple) -> str:
    for fragment, preset in GPU_NAMES:
        if fragment in device_name.upper():
            return preset
    return GPU_CAPABILITIES.get(tuple(capability), "H100")


def make_tiles(kind: str, fmt: str, output: str, count: int, m: int, n: int, k: int, rng) -> tuple:
    """float64 A (count, m, k), B (count, k, n) and C (count, m, n) of one kind of test."""
    _, p, emin, emax, _ = FORMATS[fmt]
    tiny = (max(emin - p + 1, -15), -2)  # factors' exponents: products 2**-4 to 2**-30 below 1

    def powers(shape, low, high):  # random significands in [1, 2) times 2**e, random signs
        e = rng.integers(low, high + 1, size=shape)
        return rng.choice([-1.0, 1.0], size=shape) * np.ldexp(1.0 + rng.random(shape), e)

    if kind == "random":
        scale = 1.0 if fmt not in ("e4m3", "e5m2") else 4.0
        a, b = rng.standard_normal((count, m, k)) * scale, rng.standard_normal((count, k, n)) * scale
        c = rng.standard_normal((count, m, n))
    elif kind == "tiny terms":  # one term of 1 (a product or C), the others far below: what alignment keeps
        a, b = powers((count, m, k), *tiny), powers((count, k, n), *tiny)
        a[..., 0], b[:, 0, :] = 1.0, 1.0
        c = np.where(rng.random((count, m, n)) < 0.5, 0.0, powers((count, m, n), -2, 2))
        large_in_c = rng.random(count) < 0.5  # half the tiles: the large term is the addend
        a[large_in_c, :, 0] = 0.0
        c[large_in_c] = powers(c[large_in_c].shape, 0, 0)
    elif kind == "cancellation":  # a large pair that cancels exactly, tiny terms, a small addend
        a, b = powers((count, m, k), *tiny), powers((count, k, n), *tiny)
        big = powers((count, m, 1), 2, min(emax, 6))
        second = np.where(rng.random(count) < 0.5, 1, k - 1)  # same block or the last one
        for t in range(count):
            a[t, :, 0], a[t, :, second[t]] = big[t, :, 0], -big[t, :, 0]
            b[t, 0, :], b[t, second[t], :] = 1.0, 1.0
        c = powers((count, m, n), 2 * tiny[0], 2 * tiny[1])
    elif kind == "whole range":  # subnormals to the largest values: overflow, underflow, flushing
        a = powers((count, m, k), emin - p + 1, emax)
        b = powers((count, k, n), emin - p + 1, emax)
        c = powers((count, m, n), -30, 30) if output == "fp32" else powers((count, m, n), -24, 15)
        c[rng.random((count, m, n)) < 0.05] = LARGEST[output]
    else:
        raise ValueError(kind)
    return a, b, c


def to_format(torch, x: np.ndarray, fmt: str, device: str):
    """The tensor of format fmt nearest to x (clipped to the format's range)."""
    dtype = getattr(torch, FORMATS[fmt][0] if fmt in FORMATS else OUTPUT_DTYPES[fmt])
    x = np.clip(x, -LARGEST[fmt], LARGEST[fmt]).astype(np.float32)
    return torch.from_numpy(x).to(device).to(dtype)


def as_numpy(tensor) -> np.ndarray:
    """float64 values of a tensor (fp8/bf16 through float32: exact)."""
    return tensor.detach().float().cpu().numpy().astype(np.float64)


def equal_bits(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Elementwise: same bits, or both NaN."""
    unsigned = np.uint16 if x.dtype == np.float16 else np.uint32
    return (x.view(unsigned) == y.view(unsigned)) | (np.isnan(x) & np.isnan(y))


def build_kernel(triton, tl):
    @triton.jit
    def tile_mma(a_ptr, b_ptr, c_ptr, d_ptr, M: tl.constexpr, N: tl.constexpr, K: tl.constexpr,
                 OUT_FP16: tl.constexpr, TF32: tl.constexpr, FP8: tl.constexpr, IMPRECISE: tl.constexpr = -2):
        t = tl.program_id(0)
        rm, rn, rk = tl.arange(0, M), tl.arange(0, N), tl.arange(0, K)
        a = tl.load(a_ptr + t * M * K + rm[:, None] * K + rk[None, :])
        b = tl.load(b_ptr + t * K * N + rk[:, None] * N + rn[None, :])
        c = tl.load(c_ptr + t * M * N + rm[:, None] * N + rn[None, :])
        # max_num_imprecise_acc only for fp8 (other inputs may refuse it): IMPRECISE -2 means K, -1 Triton's
        # default (None), else the number itself (the --fp8-diagnostic mode varies it)
        if OUT_FP16:
            if FP8 and IMPRECISE == -2:
                d = tl.dot(a, b, acc=c, max_num_imprecise_acc=K, out_dtype=tl.float16)
            elif FP8 and IMPRECISE >= 0:
                d = tl.dot(a, b, acc=c, max_num_imprecise_acc=IMPRECISE, out_dtype=tl.float16)
            else:
                d = tl.dot(a, b, acc=c, out_dtype=tl.float16)
        elif TF32:
            d = tl.dot(a, b, acc=c, input_precision="tf32", out_dtype=tl.float32)
        elif FP8:
            if IMPRECISE == -2:
                d = tl.dot(a, b, acc=c, max_num_imprecise_acc=K, out_dtype=tl.float32)
            elif IMPRECISE == -1:
                d = tl.dot(a, b, acc=c, out_dtype=tl.float32)
            else:
                d = tl.dot(a, b, acc=c, max_num_imprecise_acc=IMPRECISE, out_dtype=tl.float32)
        else:
            d = tl.dot(a, b, acc=c, out_dtype=tl.float32)
        tl.store(d_ptr + t * M * N + rm[:, None] * N + rn[None, :], d)

    return tile_mma


def mma_instruction(ptx: str) -> str:
    """The first MMA instruction of a PTX text, shortened: 'mma.sync m16n8k16 f32.f16.f16.f32'."""
    found = re.search(r"(wgmma\.mma_async\.sync|mma\.sync)\.aligned\.(m\d+n\d+k\d+)((?:\.row\.col)?)((?:\.\w+)+)", ptx)
    if not found:
        return "no MMA instruction"
    name = "wgmma" if found.group(1).startswith("wgmma") else "mma.sync"
    return f"{name} {found.group(2)} {found.group(4).lstrip('.')}"


def fed_as_fp16(fmt: str, instruction: str) -> bool:
    """Whether Triton converted fp8 inputs to fp16 for the instruction (mma.sync on sm_90 does)."""
    operands = instruction.split(" ")[-1].split(".")[1:3]
    return fmt in ("e4m3", "e5m2") and operands == ["f16", "f16"]


def mma_count(ptx: str) -> str:
    """How many MMA instructions and fp32 adds the PTX holds: 'wgmma x2, add.f32 x0'."""
    wgmma, mma_sync = len(re.findall(r"wgmma\.mma_async", ptx)), len(re.findall(r"\bmma\.sync", ptx))
    adds = len(re.findall(r"\badd(?:\.r[nzmp])?\.f32\b", ptx))  # the kernel has no other float adds
    return (f"wgmma x{wgmma}" if wgmma else f"mma.sync x{mma_sync}") + f", add.f32 x{adds}"


def run_kernel(kernel, torch, a, b, c, fmt: str, output: str, warps: int, imprecise: int = -1,
               counts: bool = False) -> tuple:
    """D from the Triton kernel and the MMA instruction its PTX holds (imprecise: as IMPRECISE in the kernel;
    counts: also how many MMA instructions and fp32 adds the PTX holds)."""
    count, m, k = a.shape
    n = b.shape[2]
    d = torch.empty((count, m, n), dtype=c.dtype, device=c.device)
    fp8 = fmt in ("e4m3", "e5m2")
    compiled = kernel[(count,)](a.contiguous(), b.contiguous(), c.contiguous(), d, M=m, N=n, K=k,
                                OUT_FP16=output == "fp16", TF32=fmt == "tf32", FP8=fp8,
                                IMPRECISE=imprecise, num_warps=warps)
    instruction = "?"
    try:
        ptx = compiled.asm["ptx"]
        instruction = mma_instruction(ptx) + (f" ({mma_count(ptx)})" if counts else "")
    except Exception:  # the interpreter returns no compiled kernel
        instruction = "interpreter" if os.environ.get("TRITON_INTERPRET") == "1" else "?"
    if c.device.type == "cuda":
        torch.cuda.synchronize()
    return d, instruction


def run_torch(torch, a, b, c, fmt: str, output: str) -> tuple:
    """torch's batched product in the same precision, and whether it used the addend C."""
    if fmt in ("e4m3", "e5m2"):
        out_dtype = torch.float16 if output == "fp16" else torch.float32
        one = torch.tensor(1.0, device=a.device)
        tiles = [torch._scaled_mm(a[t], b[t].t().contiguous().t(), scale_a=one, scale_b=one, out_dtype=out_dtype)
                 for t in range(a.shape[0])]
        return torch.stack(tiles), False
    if fmt == "tf32":
        previous = torch.backends.cuda.matmul.allow_tf32
        torch.backends.cuda.matmul.allow_tf32 = True
        try:
            return torch.baddbmm(c, a, b), True
        finally:
            torch.backends.cuda.matmul.allow_tf32 = previous
    if output == "fp16":
        return torch.baddbmm(c, a, b), True
    return torch.baddbmm(c, a, b, out_dtype=torch.float32), True


def describe(a: np.ndarray, b: np.ndarray, c: float, got, expected) -> str:
    terms = a * b
    nonzero = np.abs(terms[terms != 0])
    span = f"abs(a_k b_k) in [{nonzero.min():.3g}, {nonzero.max():.3g}]" if nonzero.size else "all a_k b_k = 0"
    bits = "{:04x}" if np.asarray(got).dtype == np.float16 else "{:08x}"
    unsigned = np.uint16 if np.asarray(got).dtype == np.float16 else np.uint32
    return (f"c={c:.9g}, {span}, sum ~ {terms.sum() + c:.9g}; got {float(got):.9g} "
            f"({bits.format(int(np.asarray(got).view(unsigned)))}), model {float(expected):.9g} "
            f"({bits.format(int(np.asarray(expected).view(unsigned)))})")


class Report:
    """Rows printed as they come and the Markdown file rewritten after each."""

    HEADER = ("| inputs | output | tile (warps) | MMA | tiles | outputs | kernel = model | torch = model "
              "| kernel = torch | first disagreement of the kernel with the model |")

    def __init__(self, path, preamble: list):
        self.path, self.preamble = path, preamble
        self.rows: list = []
        print("\n".join(preamble + ["", self.HEADER]), flush=True)
        self.write()

    def add(self, *cells) -> None:
        row = "| " + " | ".join(str(cell).replace("|", "/").replace("\n", " ") for cell in cells) + " |"
        self.rows.append(row)
        print(row, flush=True)
        self.write()

    def write(self, footer: tuple = ()) -> None:
        if self.path:
            separator = "|" + "---|" * self.HEADER.count(" | ") + "---|"
            Path(self.path).write_text("\n".join(self.preamble + ["", self.HEADER, separator] + self.rows
                                                 + [""] + list(footer)) + "\n")


def compile_only(capability: int, path, diagnostic: bool = False) -> int:
    """Compile every kernel of the run for one CUDA capability (no GPU needed) and list its MMA instruction."""
    import triton
    import triton.language as tl
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    kernel = build_kernel(triton, tl)
    pointers = {"fp16": "*fp16", "bf16": "*bf16", "tf32": "*fp32", "e4m3": "*fp8e4nv", "e5m2": "*fp8e5",
                "fp32": "*fp32"}
    if diagnostic:  # the --fp8-diagnostic kernels: (inputs, output, m, n, k, warps, IMPRECISE)
        kernels = [(fmt, "fp32", 64, 64, k, 4, imprecise) for fmt in ("e4m3", "e5m2") for k in DIAGNOSTIC_K
                   for imprecise in DIAGNOSTIC_IMPRECISE]
    else:
        kernels = [(fmt, output, m, n, k, warps, -1) for m, n, k, warps in ((16, 16, 64, 1), (64, 64, 64, 4))
                   for fmt, output in PAIRS]
    setting_column = " max_num_imprecise_acc |" if diagnostic else ""
    lines = [f"# Tile kernels compiled for sm_{capability} (Triton {triton.__version__}; not run)", "",
             f"| inputs | output | tile (warps) |{setting_column} MMA |",
             "|---|---|---|" + "---|" * (2 if diagnostic else 1)]
    print("\n".join(lines), flush=True)
    for fmt, output, m, n, k, warps, imprecise in kernels:
        constants = {"M": m, "N": n, "K": k, "OUT_FP16": output == "fp16", "TF32": fmt == "tf32",
                     "FP8": fmt in ("e4m3", "e5m2"), "IMPRECISE": imprecise}
        signature = {"a_ptr": pointers[fmt], "b_ptr": pointers[fmt], "c_ptr": pointers[output],
                     "d_ptr": pointers[output], **dict.fromkeys(constants, "constexpr")}
        try:
            compiled = triton.compile(ASTSource(kernel, signature, constexprs=constants),
                                      target=GPUTarget("cuda", capability, 32), options={"num_warps": warps})
            ptx = compiled.asm["ptx"]
            instruction = mma_instruction(ptx) + (f" ({mma_count(ptx)})" if diagnostic else "")
        except Exception as error:
            instruction = f"failed: {type(error).__name__}: {error}"[:200].replace("|", "/").replace("\n", " ")
        setting = f" {imprecise_name(imprecise, k)} |" if diagnostic else ""
        lines.append(f"| {fmt} | {output} | {m}x{n}x{k} ({warps}) |{setting} {instruction} |")
        print(lines[-1], flush=True)
    if path:
        Path(path).write_text("\n".join(lines) + "\n")
    return 0


# --fp8-diagnostic: why fp8 -> fp32 wgmma tiles differ from the model (which reproduces one MMA with C = 0)
DIAGNOSTIC_K = (32, 64)  # one wgmma k32 instruction, or two chained
DIAGNOSTIC_IMPRECISE = (-2, -1, 0)  # the kernel's IMPRECISE: max_num_imprecise_acc=K, Triton's default, 0


def imprecise_name(imprecise: int, k: int) -> str:
    return {-2: f"K ({k})", -1: "None (Triton's default)"}.get(imprecise, str(imprecise))


class DiagnosticReport(Report):
    HEADER = ("| inputs | K | max_num_imprecise_acc | C | MMA (count in the PTX) | outputs | kernel = model(A, B, C) "
              "| kernel = model(A, B, no C) | kernel = fp32(model(A, B, no C) + C) "
              "| first disagreement of the kernel with model(A, B, C) |")


def run_fp8_diagnostic(torch, hardware, kernel, gpu, per_kind, seed, device, over_budget, report) -> None:
    """One row per inputs x K x max_num_imprecise_acc x (C = 0 or not): fp8 -> fp32 on the 64-row (wgmma) tile.

    The model is computed once per inputs, K and C; only the kernel changes between the rows it serves."""
    m, n, warps = 64, 64, 4
    for fmt_index, fmt in enumerate(("e4m3", "e5m2")):
        for k in DIAGNOSTIC_K:
            rng = np.random.default_rng([seed, fmt_index, k])
            pieces = [make_tiles(kind, fmt, "fp32", per_kind, m, n, k, rng) for kind in KINDS]
            a = to_format(torch, np.concatenate([p[0] for p in pieces]), fmt, device)
            b = to_format(torch, np.concatenate([p[1] for p in pieces]), fmt, device)
            kinds = [kind for kind in KINDS for _ in range(per_kind)]
            a64, b64 = as_numpy(a), as_numpy(b)
            spec = hardware.model(gpu, fmt, "fp32")
            no_addend = np.stack([hardware.matmul(a64[t], b64[t], None, model=spec) for t in range(len(kinds))])
            for c_name in ("0", "random"):
                if over_budget():
                    report.add(fmt, k, "", c_name, "", "", "", "", "", "skipped: time budget spent")
                    continue
                c_values = np.concatenate([p[2] for p in pieces]) if c_name == "random" else \
                    np.zeros((len(kinds), m, n))
                c = to_format(torch, c_values, "fp32", device)
                c64 = as_numpy(c)
                with_c = np.stack([hardware.matmul(a64[t], b64[t], c64[t], beta=1.0, model=spec)
                                   for t in range(len(kinds))])
                then_add = (no_addend.astype(np.float32) + c64.astype(np.float32)).astype(np.float32)
                for imprecise in DIAGNOSTIC_IMPRECISE:
                    cells = [fmt, k, imprecise_name(imprecise, k), c_name]
                    if over_budget():
                        report.add(*cells, "", "", "", "", "", "skipped: time budget spent")
                        continue
                    try:
                        d, instruction = run_kernel(kernel, torch, a, b, c, fmt, "fp32", warps, imprecise, counts=True)
                        got = d.cpu().numpy()
                    except Exception as error:
                        traceback.print_exc()
                        report.add(*cells, "", "", "", "", "", f"failed: {type(error).__name__}: {error}"[:300])
                        continue
                    counts = [f"{int(equal_bits(got, expected.astype(np.float32)).sum())} / {got.size}"
                              for expected in (with_c, no_addend, then_add)]
                    unlike = ~equal_bits(got, with_c.astype(np.float32))
                    first = "none"
                    if unlike.any():
                        t, i, j = map(int, np.argwhere(unlike)[0])
                        first = f"{kinds[t]} tile {t} ({i},{j}): " + describe(
                            a64[t, i], b64[t, :, j], c64[t, i, j], got[t, i, j], np.float32(with_c[t, i, j]))
                    if fed_as_fp16(fmt, instruction.split(" (")[0]):
                        first += "; Triton fed the fp8 values to an fp16 MMA (the fp8 model does not apply)"
                    report.add(*cells, instruction, got.size, *counts, first)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--report", help="Markdown file to write")
    parser.add_argument("--seconds", type=float, default=120.0, help="time budget, checked between steps")
    parser.add_argument("--rehearse", action="store_true", help="run on the CPU, smallest size (plumbing only)")
    parser.add_argument("--ptx", type=int, metavar="CAPABILITY",
                        help="only compile the kernels for this CUDA capability (e.g. 90) and list their MMA "
                             "instructions; needs no GPU")
    parser.add_argument("--fp8-diagnostic", action="store_true",
                        help="only fp8 -> fp32 on the 64 x 64 (wgmma) tile: K = 32 and 64, max_num_imprecise_acc "
                             "= K, None and 0, C = 0 and random; with --ptx: compile those kernels")
    parser.add_argument("--gpu", help="preset to compare with (default: from the device's name)")
    parser.add_argument("--tiles", type=int, default=None, help="tiles per kind of input (default 40, or 1)")
    parser.add_argument("--seed", type=int, default=2021)
    parser.add_argument("--strict", action="store_true",
                        help="exit 1 when an output of the kernel differs from the model or a row failed")
    args = parser.parse_args(argv)
    start = time.perf_counter()

    def over_budget() -> bool:
        return time.perf_counter() - start > args.seconds

    if args.ptx:
        return compile_only(args.ptx, args.report, args.fp8_diagnostic)
    if args.rehearse:
        os.environ["TRITON_INTERPRET"] = "1"  # before triton is imported
    import torch

    if not args.rehearse and not torch.cuda.is_available():
        print("no GPU: CUDA is not available to torch; nothing to run (use --rehearse for a CPU rehearsal)")
        return 0
    from pychop_compat import hardware

    device = "cpu" if args.rehearse else "cuda"
    if args.rehearse:
        name, capability = "CPU rehearsal (Triton interpreter)", (9, 0)
    else:
        name, capability = torch.cuda.get_device_name(), torch.cuda.get_device_capability()
    gpu = args.gpu or preset_for(name, capability)
    shapes = [(16, 16, 32, 1)] if args.rehearse else [(16, 16, 64, 1), (64, 64, 64, 4)]
    per_kind = args.tiles or (1 if args.rehearse else 8 if args.fp8_diagnostic else 40)
    versions = f"torch {torch.__version__}"
    try:
        import triton
        import triton.language as tl

        versions += f", Triton {triton.__version__}"
        kernel = build_kernel(triton, tl)
        kernel_error = ""
    except Exception as error:  # no Triton: the torch columns still run
        kernel, kernel_error = None, f"Triton: {type(error).__name__}: {error}"
    preamble = [
        "# Tensor-core tiles against pychop_compat.hardware",
        "",
        f"- device: {name}, capability {tuple(capability)}; model preset: {gpu}; {versions}",
        f"- D = A @ B + C per tile; {per_kind} tiles per kind of input ({', '.join(KINDS)}; a quarter "
        f"as many for tiles over 16 x 16), seed {args.seed}",
        "- Triton: tl.dot(a, b, acc=c, out_dtype=fp32 or fp16); tf32: input_precision='tf32'; "
        "fp8: Triton's default max_num_imprecise_acc (C is the MMA's accumulator)",
        "- torch: baddbmm (fp16/bf16 -> fp32 with out_dtype=float32; tf32 with allow_tf32=True; "
        "allow_fp16_reduced_precision_reduction="
        f"{torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction}); fp8: torch._scaled_mm with "
        "unit scales, use_fast_accum=False (its default) and no addend, compared with the model for C = 0",
    ]
    if args.rehearse:
        preamble.append("- REHEARSAL on the CPU (Triton's interpreter, torch on CPU): these numbers say "
                        "nothing about hardware; they only check the script's plumbing")
    if kernel_error:
        preamble.append(f"- {kernel_error}")
    if args.fp8_diagnostic:
        preamble[3:6] = [
            f"- FP8 DIAGNOSTIC: D = A @ B + C, fp8 -> fp32, 64 x 64 x K tiles (4 warps), {per_kind} tiles per "
            f"kind of input ({', '.join(KINDS)}), seed {args.seed}; C = 0 (zeros in the kernel and the model) or "
            "random as in the full run",
            "- columns: the kernel against the model with C, without C (as the anchor measured), and the model "
            "without C followed by one fp32 add of C (round to nearest): what Triton does when it accumulates "
            "the fp8 MMA apart from C (max_num_imprecise_acc <= K); MMA: the instruction, how many the PTX holds, "
            "and its fp32 adds",
        ]
        report = DiagnosticReport(args.report, preamble)
        if kernel is None:
            report.add("", "", "", "", "", "", "", "", "", "no Triton")
        elif not args.rehearse and tuple(capability) < FORMATS["e4m3"][4]:
            report.add("", "", "", "", "", "", "", "", "", f"skipped: needs capability {FORMATS['e4m3'][4]}")
        else:
            run_fp8_diagnostic(torch, hardware, kernel, gpu, per_kind, args.seed, device, over_budget, report)
        elapsed = time.perf_counter() - start
        report.write((f"{elapsed:.1f} s in all.",))
        print(f"{elapsed:.1f} s in all.", flush=True)
        return 0
    report = Report(args.report, preamble)
    agreeing = checked = failed_rows = 0
    for shape_index, (m, n, k, warps) in enumerate(shapes):  # every pair at the small tile first
        for pair_index, (fmt, output) in enumerate(PAIRS):
            cells = [fmt, output, f"{m}x{n}x{k} ({warps})"]
            if over_budget():
                report.add(*cells, "", "", "", "", "", "", f"skipped: time budget of {args.seconds:g} s spent")
                continue
            if not args.rehearse and tuple(capability) < FORMATS[fmt][4]:
                report.add(*cells, "", "", "", "", "", "", f"skipped: needs capability {FORMATS[fmt][4]}")
                continue
            tiles = per_kind if m * n <= 256 else max(1, per_kind // 4)  # the model's time grows with m * n
            try:
                equal, outputs, row = run_pair(torch, hardware, kernel, gpu, fmt, output, (m, n, k, warps), tiles,
                                               np.random.default_rng([args.seed, pair_index, shape_index]),
                                               device, over_budget)
                agreeing, checked = agreeing + equal, checked + outputs
                failed_rows += "kernel failed:" in row[-1]  # (torch may refuse a pair: reported, not a failure)
            except Exception as error:
                traceback.print_exc()
                row = ["", "", "", "", "", "", f"failed: {type(error).__name__}: {error}"[:300]]
                failed_rows += 1
            report.add(*cells, *row)
    elapsed = time.perf_counter() - start
    verdict = f"tiles: kernel = model on {agreeing} of {checked} outputs; {failed_rows} rows with a failure"
    footer = (f"{elapsed:.1f} s in all.", verdict)
    report.write(footer)
    print("\n".join(footer), flush=True)
    return 1 if args.strict and (agreeing != checked or failed_rows or not checked) else 0


def run_pair(torch, hardware, kernel, gpu, fmt, output, shape, per_kind, rng, device, over_budget) -> list:
    """One row: kernel and torch against the model for one format pair and tile shape."""
    m, n, k, warps = shape
    notes = []
    pieces = [make_tiles(kind, fmt, output, per_kind, m, n, k, rng) for kind in KINDS]
    a = to_format(torch, np.concatenate([p[0] for p in pieces]), fmt, device)
    b = to_format(torch, np.concatenate([p[1] for p in pieces]), fmt, device)
    c = to_format(torch, np.concatenate([p[2] for p in pieces]), output, device)
    kinds = [kind for kind in KINDS for _ in range(per_kind)]
    a64, b64, c64 = as_numpy(a), as_numpy(b), as_numpy(c)
    try:
        spec = hardware.model(gpu, fmt, output)
    except ValueError:
        spec = None
        notes.append(f"no {gpu} preset for this pair")

    kernel_d, instruction = None, ""
    if kernel is None:
        notes.append("no Triton")
    else:
        try:
            d, instruction = run_kernel(kernel, torch, a, b, c, fmt, output, warps)
            kernel_d = d.cpu().numpy()
        except Exception as error:
            notes.append(f"kernel failed: {type(error).__name__}: {error}"[:200])
    torch_d, torch_has_c = None, True
    try:
        d, torch_has_c = run_torch(torch, a, b, c, fmt, output)
        torch_d = d.cpu().numpy()
    except Exception as error:
        notes.append(f"torch failed: {type(error).__name__}: {error}"[:200])

    kernel_spec = spec
    if fed_as_fp16(fmt, instruction):  # the kernel computed in fp16 on the fp8 values (exact in fp16)
        try:
            kernel_spec = hardware.model(gpu, "fp16", output)
            notes.append("Triton fed the fp8 values to an fp16 MMA: the kernel is compared with the fp16 model, "
                         "outside the --strict verdict (which products share an MMA is Triton's choice there)")
        except ValueError:
            kernel_spec = None
    compared, kernel_equal, torch_equal, outputs = 0, 0, 0, 0
    differing = dict.fromkeys(KINDS, 0)  # the kernel's outputs unlike the model's, per kind of input
    first = ""
    for t in range(a64.shape[0]):
        if (spec is None and kernel_spec is None) or over_budget():
            if spec is not None or kernel_spec is not None:
                notes.append(f"time budget: {t} of {a64.shape[0]} tiles compared")
            break
        compared, outputs, expected = compared + 1, outputs + m * n, None
        if kernel_d is not None and kernel_spec is not None:
            expected = hardware.matmul(a64[t], b64[t], c64[t], beta=1.0, model=kernel_spec)
            same = equal_bits(kernel_d[t], expected)
            kernel_equal += int(same.sum())
            differing[kinds[t]] += int((~same).sum())
            if not first and not same.all():
                i, j = map(int, np.argwhere(~same)[0])
                first = f"{kinds[t]} tile {t} ({i},{j}): " + describe(a64[t, i], b64[t, :, j], c64[t, i, j],
                                                                     kernel_d[t, i, j], expected[i, j])
        if torch_d is not None and spec is not None:
            reference = expected if torch_has_c and kernel_spec is spec and expected is not None else \
                hardware.matmul(a64[t], b64[t], c64[t] if torch_has_c else None, beta=1.0, model=spec)
            torch_equal += int(equal_bits(torch_d[t], reference).sum())
    kernel_torch = "--"
    if kernel_d is not None and torch_d is not None and torch_has_c:
        kernel_torch = f"{int(equal_bits(kernel_d, torch_d).sum())} / {kernel_d.size}"
    elif kernel_d is not None and torch_d is not None:
        kernel_torch = "-- (torch without C)"
    if kernel_d is not None and kernel_spec is None:
        notes.append("kernel ran")
    if not first and kernel_d is not None and kernel_spec is not None:
        first = "none"
    elif first:
        notes.insert(0, "differing by kind: " + ", ".join(f"{kind} {count}" for kind, count in differing.items()))
    first = "; ".join([part for part in [first] + notes if part])
    # The verdict counts the rows whose MMA takes the inputs in their own format: where Triton converted fp8
    # to fp16 (mma.sync on sm_90), its operand layout decides which products meet in one instruction, and
    # the H200 run of 2026-11-28 found 33,200 and 20,172 of 40,960 outputs equal to the fp16 model there
    checked = outputs if kernel_d is not None and kernel_spec is spec and spec is not None else 0
    return kernel_equal if checked else 0, checked, [instruction, compared, outputs,
            f"{kernel_equal} / {outputs}" if kernel_d is not None and kernel_spec is not None else "--",
            f"{torch_equal} / {outputs}" + ("" if torch_has_c else " (C = 0)") if torch_d is not None
            and spec is not None else "--",
            kernel_torch, first]


if __name__ == "__main__":
    sys.exit(main())
