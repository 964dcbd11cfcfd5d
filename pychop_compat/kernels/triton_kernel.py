"""A Triton kernel for CUDA tensors without CuPy: chop's regular elements in one pass.

Triton ships with torch's CUDA wheels, so this path needs nothing beyond
torch.  The kernel rounds the *regular* elements (see
:func:`~pychop_compat.kernels.device_plan.regular_range`) on their bit
patterns with integer operations, exactly as the CUDA kernel of
:mod:`pychop_compat.kernels.cuda` and ``numpy_fast.py`` do, for round to
nearest, the directed modes and stochastic rounding with numbers made on the
device (:mod:`pychop_compat.random.counter`), and counts the other
elements.  In most data there are none, and the call is one pass over memory
plus one 4-byte read; otherwise the namespace kernel
(:mod:`pychop_compat.kernels.elementwise`) rounds just those elements.  Bit
flips and host draws (MATLAB's stream, ``randfunc``) go to the namespace
kernel whole (:mod:`pychop_compat.engines.dispatch` routes them).

Floating point and its traps: nothing on the rounding path goes through
libdevice (whose flush-to-zero reflection and approximations would change
results), and no multiply and add may be fused (``enable_fp_fusion=False``).
The only floating-point operations are exact ones (an integer below 2**53
converted to a float, a multiplication by a power of two, an addition of 1/2
to such an integer), the rounding of a float64 number in (0, 1) to float32 and
comparisons, none of which meets a subnormal.  The tests compile the kernel
for sm_90 without a GPU and check its PTX (no ``.ftz``, no ``fma``), and run
it on the CPU with Triton's interpreter (``TRITON_INTERPRET=1``).

Triton is imported only when a CUDA tensor needs this kernel.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from .device_plan import RegularRange, carrier_for
from ..random.counter import GOLDEN, MIX1, MIX2

__all__ = ["BLOCK", "available", "build_kernel", "build_round_helper", "chop_regular"]

triton = tl = None  # imported by build_kernel

#: Elements per Triton program.
BLOCK = 1024
#: Launch options: no contraction of a multiply and an add into an fma.
LAUNCH_OPTIONS = {"enable_fp_fusion": False}


def available() -> bool:
    """True when Triton can be imported."""
    import importlib.util

    return importlib.util.find_spec("triton") is not None


def _signed64(value: int) -> int:
    value &= (1 << 64) - 1
    return value - (1 << 64) if value >= 1 << 63 else value


@functools.lru_cache(maxsize=None)
def build_kernel():
    """The ``@triton.jit`` kernel (built on first use, so that importing this module imports no Triton).

    Arguments: ``x_ptr, out_ptr, count_ptr, n, low, high, mask, shift, lsb_fixed,
    key, offset`` and the compile-time ``MODE`` (1 to 6), ``WIDE`` (float64),
    ``BLOCK``.  ``key`` (int64 holding the unsigned 64-bit key of stream 1) and
    ``offset`` are read for modes 5 and 6 only.
    """
    # Module globals, not locals: Triton's interpreter patches the ``tl`` its kernel's globals name.
    global triton, tl
    import triton
    import triton.language as tl

    # device_random's constants as int64 words (Triton reads no globals inside a kernel):
    # GOLDEN, MIX1, MIX2 (checked against device_random.py by _check_constants).
    _check_constants()

    @triton.jit(do_not_specialize=["n", "low", "high", "mask", "shift", "lsb_fixed", "key", "offset"])
    def chop_regular_kernel(x_ptr, out_ptr, count_ptr, n, low, high, mask, shift, lsb_fixed, key, offset,
                            scale, MODE: tl.constexpr, WIDE: tl.constexpr, BLOCK: tl.constexpr):
        start = tl.program_id(0).to(tl.int64) * BLOCK
        index = start + tl.arange(0, BLOCK).to(tl.int64)
        inside = index < n
        if WIDE:
            bits = tl.load(x_ptr + index, mask=inside, other=0.0).to(tl.int64, bitcast=True)
            magnitude = bits & 0x7FFFFFFFFFFFFFFF
            mask_ = mask.to(tl.int64)
        else:
            bits = tl.load(x_ptr + index, mask=inside, other=0.0).to(tl.int32, bitcast=True)
            magnitude = bits & 0x7FFFFFFF
            mask_ = mask.to(tl.int32)
        regular = (magnitude >= low) & (magnitude <= high)
        if MODE == 1:
            # Ties to even: half an ulp, minus one unless the kept lsb is odd (t = 1: always odd;
            # nothing dropped: nothing added).
            lsb = tl.where(lsb_fixed != 0, 1, (magnitude >> shift) & 1)
            lsb = tl.where(mask_ != 0, lsb, 0)
            rounded = magnitude + (mask_ >> 1) + lsb.to(magnitude.dtype)
        elif MODE == 2:
            rounded = magnitude + tl.where(bits >= 0, mask_, 0)
        elif MODE == 3:
            rounded = magnitude + tl.where(bits < 0, mask_, 0)
        elif MODE == 4:
            rounded = magnitude
        else:
            # u_1(offset + i) of device_random.py, in 64-bit words that wrap around; the logical
            # right shifts are arithmetic ones with the sign copies masked off.
            z = key + (offset + index) * -7046029254386353131
            z = (z ^ ((z >> 30) & 0x3FFFFFFFF)) * -4658895280553007687
            z = (z ^ ((z >> 27) & 0x1FFFFFFFFF)) * -7723592293110705685
            z = z ^ ((z >> 31) & 0x1FFFFFFFF)
            u = (((z >> 12) & 0xFFFFFFFFFFFFF).to(tl.float64) + 0.5) * 2.220446049250313e-16
            dropped = magnitude & mask_
            # The dropped bits as the scaled value's fraction: exact (scale = 2^-shift).
            if WIDE:
                real_u = u
                fraction = dropped.to(tl.float64) * scale
            else:
                real_u = u.to(tl.float32)  # compared in the input's class, as MATLAB does for single
                fraction = dropped.to(tl.float32) * scale
            half = 0.5
            if MODE == 5:
                up = (dropped != 0) & (real_u <= fraction)
            else:
                up = (dropped != 0) & (real_u <= half)
            rounded = magnitude + tl.where(up, mask_ + 1, 0)
        result = tl.where(regular, (rounded & ~mask_) | (bits ^ magnitude), bits)
        if WIDE:
            value = result.to(tl.float64, bitcast=True)
        else:
            value = result.to(tl.float32, bitcast=True)
        tl.store(out_ptr + index, value, mask=inside)
        special = (inside & (regular == 0)).to(tl.int32)
        tl.atomic_add(count_ptr, tl.sum(special, axis=0))

    return chop_regular_kernel


def _check_constants() -> None:
    """The literals in the kernel are device_random's constants (read as int64 words)."""
    assert (_signed64(GOLDEN), _signed64(MIX1), _signed64(MIX2)) == (
        -7046029254386353131, -4658895280553007687, -7723592293110705685)


def chop_regular(flat: Any, out: Any, spec: Any, regular: RegularRange, stream: Any = None) -> int:
    """Round the regular elements of the contiguous 1-D tensor ``flat`` into ``out``.

    Other elements are copied; returns how many there are (the caller rounds
    them).  ``stream`` (a :class:`~pychop_compat.random.counter.CounterStream`)
    gives the numbers of modes 5 and 6.
    """
    import torch

    carrier = carrier_for(str(flat.dtype).rpartition(".")[2])
    n = flat.numel()
    count = torch.zeros(1, dtype=torch.int32, device=flat.device)
    key, offset = (stream.keys[0], stream.offset) if stream is not None else (0, 0)
    mask = (1 << regular.shift) - 1
    grid = (max(1, -(-n // BLOCK)),)
    build_kernel()[grid](flat, out, count, n, regular.low, regular.high, mask, regular.shift,
                         int(regular.shift == carrier.mant), _signed64(key), _signed64(offset),
                         2.0 ** -regular.shift,
                         MODE=int(spec.round), WIDE=carrier.np_float == np.float64, BLOCK=BLOCK,
                         **LAUNCH_OPTIONS)
    return int(count.item())


@functools.lru_cache(maxsize=None)
def build_round_helper():
    """The ``@triton.jit`` helper ``round_bits(x, low, high, mask, shift, lsb_fixed, MODE, WIDE)``
    that fused kernels (:mod:`pychop_compat.kernels.triton_matmul`) call on values in registers.

    The rounding of :func:`build_kernel` for modes 1 to 4 (integer operations on the bit
    pattern only, so no subnormal is flushed and nothing can be contracted), plus zeros:
    ``chop(+-0)`` is ``+0`` in every deterministic mode.  Returns ``(rounded, irregular)``;
    ``irregular`` (int32, 1 or 0) marks the elements that are neither zero nor regular
    (chop's subnormal range, near or past overflow, Inf, NaN): their ``rounded`` is
    meaningless and the caller must round them with the general path.
    """
    global triton, tl
    import triton
    import triton.language as tl

    @triton.jit
    def round_bits(x, low, high, mask, shift, lsb_fixed, MODE: tl.constexpr, WIDE: tl.constexpr):
        if WIDE:
            bits = x.to(tl.int64, bitcast=True)
            magnitude = bits & 0x7FFFFFFFFFFFFFFF
            mask_ = mask.to(tl.int64)
        else:
            bits = x.to(tl.int32, bitcast=True)
            magnitude = bits & 0x7FFFFFFF
            mask_ = mask.to(tl.int32)
        regular = (magnitude >= low) & (magnitude <= high)
        if MODE == 1:
            lsb = tl.where(lsb_fixed != 0, 1, (magnitude >> shift) & 1)
            lsb = tl.where(mask_ != 0, lsb, 0)
            rounded = magnitude + (mask_ >> 1) + lsb.to(magnitude.dtype)
        elif MODE == 2:
            rounded = magnitude + tl.where(bits >= 0, mask_, 0)
        elif MODE == 3:
            rounded = magnitude + tl.where(bits < 0, mask_, 0)
        else:
            rounded = magnitude
        result = tl.where(regular, (rounded & ~mask_) | (bits ^ magnitude), 0)  # zeros: +0
        irregular = ((regular == 0) & (magnitude != 0)).to(tl.int32)
        if WIDE:
            value = result.to(tl.float64, bitcast=True)
        else:
            value = result.to(tl.float32, bitcast=True)
        return value, irregular

    return round_bits
