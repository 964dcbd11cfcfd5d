"""A Triton kernel for CUDA tensors without CuPy: chop's regular elements in one pass.

It rounds on the bit patterns what :func:`chop_regular` says and counts the others, which
the namespace kernel rounds (:func:`left_over`); no libdevice, no fp fusion
(``LAUNCH_OPTIONS``).  Triton is imported on first use.  See docs/engines.rst.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any, Optional

import numpy as np

from .device_plan import Carrier, RegularRange, SubnormalBlock, carrier_for, subnormal_block, zero_keeps_sign
from ..random.counter import GOLDEN, MIX1, MIX2

__all__ = ["BLOCK", "available", "build_kernel", "build_round_helper", "chop_regular", "left_over"]

if TYPE_CHECKING:  # the kernels' annotations name ``tl.constexpr``
    import triton
    import triton.language as tl
else:
    triton = tl = None  # set by build_kernel
round_bits: Any = None  # set by build_kernel
round_stochastic: Any = None  # set by build_kernel

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
    """The ``@triton.jit`` kernel (built on first use: importing this module imports no Triton).

    Modes 1 to 4 round by :func:`build_round_helper`; modes 5 and 6 the regular elements only,
    with ``key`` (the unsigned key of stream 1 as int64) and ``offset``.
    """
    # Module globals, not locals: Triton's interpreter patches the ``tl`` its kernel's globals name.
    global triton, tl, round_bits, round_stochastic
    import triton
    import triton.language as tl

    round_bits = build_round_helper()

    _check_constants()  # the literals below (Triton reads no globals inside a kernel)

    @triton.jit
    def round_stochastic(x, index, low, high, mask, key, offset, scale, MODE: tl.constexpr, WIDE: tl.constexpr):
        """Modes 5 and 6 on the regular elements; ``(rounded, irregular)`` as ``round_bits``."""
        if WIDE:
            bits = x.to(tl.int64, bitcast=True)
            magnitude = bits & 0x7FFFFFFFFFFFFFFF
            mask_ = mask.to(tl.int64)
        else:
            bits = x.to(tl.int32, bitcast=True)
            magnitude = bits & 0x7FFFFFFF
            mask_ = mask.to(tl.int32)
        regular = (magnitude >= low) & (magnitude <= high)
        # u_1(offset + i) in wrapping int64 words; logical right shifts as masked arithmetic ones.
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
        return result.to(x.dtype, bitcast=True), (regular == 0).to(tl.int32)

    @triton.jit(do_not_specialize=["n", "low", "high", "mask", "shift", "xmins", "tiny_cut", "emin_field",
                                   "signed_zero", "key", "offset"])
    def chop_regular_kernel(x_ptr, out_ptr, count_ptr, n, low, high, mask, shift, xmins, tiny_cut, emin_field,
                            signed_zero, key, offset, scale, MODE: tl.constexpr, WIDE: tl.constexpr,
                            BLOCK: tl.constexpr):
        start = tl.program_id(0).to(tl.int64) * BLOCK
        index = start + tl.arange(0, BLOCK).to(tl.int64)
        inside = index < n
        x = tl.load(x_ptr + index, mask=inside, other=0.0)
        if MODE <= 4:
            value, irregular = round_bits(x, low, high, shift, xmins, tiny_cut, emin_field, signed_zero,
                                          MODE, WIDE)
        else:
            value, irregular = round_stochastic(x, index, low, high, mask, key, offset, scale, MODE, WIDE)
        tl.store(out_ptr + index, value, mask=inside)
        tl.atomic_add(count_ptr, tl.sum(tl.where(inside, irregular, 0), axis=0))

    return chop_regular_kernel


def _check_constants() -> None:
    """The literals in the kernel are device_random's constants (read as int64 words)."""
    assert (_signed64(GOLDEN), _signed64(MIX1), _signed64(MIX2)) == (
        -7046029254386353131, -4658895280553007687, -7723592293110705685)


def _block(spec: Any, carrier: Any) -> Optional[SubnormalBlock]:
    """The subnormal block the kernel rounds itself (modes 1 to 4 only)."""
    return subnormal_block(spec, carrier) if int(spec.round) <= 4 else None


def chop_regular(flat: Any, out: Any, spec: Any, regular: RegularRange, stream: Any = None) -> int:
    """Round the elements of the contiguous 1-D tensor ``flat`` that the kernel handles into
    ``out`` (regular ones; in modes 1 to 4 also zeros and below xmin where
    :func:`~pychop_compat.kernels.device_plan.subnormal_block` holds); returns how many others
    there are (the caller rounds those :func:`left_over` marks).  ``stream``: modes 5 and 6's numbers.
    """
    import torch

    carrier = carrier_for(str(flat.dtype).rpartition(".")[2])
    n = flat.numel()
    count = torch.zeros(1, dtype=torch.int32, device=flat.device)
    key, offset = (stream.keys[0], stream.offset) if stream is not None else (0, 0)
    mask = (1 << regular.shift) - 1
    block = _block(spec, carrier)
    below = (block.xmins, block.tiny_cut, block.emin_field) if block is not None else (0, 0, 0)
    grid = (max(1, -(-n // BLOCK)),)
    build_kernel()[grid](flat, out, count, n, regular.low, regular.high, mask, regular.shift,
                         *below, int(zero_keeps_sign(spec)),
                         _signed64(key), _signed64(offset),
                         2.0 ** -regular.shift,
                         MODE=int(spec.round), WIDE=carrier.np_float == np.float64, BLOCK=BLOCK,
                         **LAUNCH_OPTIONS)
    return int(count.item())


def left_over(magnitude: Any, spec: Any, regular: RegularRange, carrier: Carrier) -> Any:
    """Where :func:`chop_regular` left the result to the caller: a boolean tensor over the
    magnitude bits of the input (sign bit cleared; ``carrier`` its float layout)."""
    outside = (magnitude < regular.low).logical_or_(magnitude > regular.high)
    if int(spec.round) <= 4:
        outside.logical_and_(magnitude != 0)  # zeros: in the kernel
        if _block(spec, carrier) is not None:
            outside.logical_and_(magnitude >= regular.low)  # below xmin: in the kernel
    return outside


@functools.lru_cache(maxsize=None)
def build_round_helper():
    """The ``@triton.jit`` helper ``round_bits(x, low, high, shift, xmins, tiny_cut, emin_field,
    signed_zero, MODE, WIDE)`` (also :mod:`.triton_matmul`'s): modes 1 to 4 on the bit pattern
    only, for the :class:`.device_plan.RegularRange`, zeros (``signed_zero``:
    :func:`.device_plan.zero_keeps_sign`) and, where ``xmins`` is not 0, the
    :class:`.device_plan.SubnormalBlock`.  Returns ``(rounded, irregular)`` (int32: left to the caller).
    """
    global triton, tl
    import triton
    import triton.language as tl

    @triton.jit
    def round_bits(x, low, high, shift, xmins, tiny_cut, emin_field, signed_zero, MODE: tl.constexpr,
                   WIDE: tl.constexpr):
        if WIDE:
            bits = x.to(tl.int64, bitcast=True)
            magnitude = bits & 0x7FFFFFFFFFFFFFFF
            mant = 52
        else:
            bits = x.to(tl.int32, bitcast=True)
            magnitude = bits & 0x7FFFFFFF
            mant = 23
        shift, xmins, tiny_cut, emin_field = (shift.to(bits.dtype), xmins.to(bits.dtype), tiny_cut.to(bits.dtype),
                                              emin_field.to(bits.dtype))
        one = magnitude * 0 + 1
        field = magnitude >> mant
        regular = (magnitude >= low) & (magnitude <= high)
        # chop.m's subnormal block [xmins, xmin): the fixed quantum xmins, so more bits go the
        # further the exponent is below emin; below xmins: its underflow rule.
        block = (magnitude >= xmins) & (magnitude < low) & (xmins != 0)
        tiny = (magnitude < xmins) & (magnitude != 0)
        below = tl.maximum(emin_field - tl.maximum(field, one), magnitude * 0)
        drop = tl.where(block, below + shift, magnitude * 0 + shift)
        mask_ = (one << drop) - 1
        # The last kept bit of the significand (its hidden bit counted): ties go to even.
        significand = tl.where(field != 0, (magnitude & ((one << mant) - 1)) | (one << mant), magnitude)
        lsb = tl.where(mask_ != 0, (significand >> drop) & 1, 0)
        if MODE == 1:
            rounded = magnitude + (mask_ >> 1) + lsb
            tiny_result = tl.where(magnitude > tiny_cut, xmins, 0)
        elif MODE == 2:
            rounded = magnitude + tl.where(bits >= 0, mask_, 0)
            tiny_result = tl.where(bits >= 0, xmins, 0)
        elif MODE == 3:
            rounded = magnitude + tl.where(bits < 0, mask_, 0)
            tiny_result = tl.where(bits < 0, xmins, 0)
        else:
            rounded = magnitude
            tiny_result = magnitude * 0
        kept = tl.where(tiny, tiny_result, rounded & ~mask_)
        zero = tl.where(signed_zero != 0, bits, 0)
        result = tl.where(magnitude == 0, zero, tl.where(regular | block | tiny, kept | (bits ^ magnitude), 0))
        result = tl.where(tiny & (kept == 0), 0, result)  # the underflow rule's zeros: +0
        irregular = ((regular == 0) & (block == 0) & (tiny == 0) & (magnitude != 0)).to(tl.int32)
        return result.to(x.dtype, bitcast=True), irregular

    return round_bits
