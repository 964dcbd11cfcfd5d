"""A Triton kernel for the block-FMA model of :mod:`pychop_compat.hardware` on CUDA tensors.

Why: on a GPU, ``hardware.matmul``'s array-namespace implementation builds a work array of
(rows, N, fma_size) elements per step and runs dozens of int64 array operations over it; this
kernel keeps a ``BLOCK_M x BLOCK_N`` tile of the result in registers instead and runs the
blocks of its inner products in order, as the compiled CPU kernel does.

Which rule: ``numba_blockfma.block_matmul`` (its ``_tile`` and ``_add_late``), aligned blocks
only, on the same operands: each input as its truncated value ``q = sign * I * 2**(e - f)``
and its exponent ``e`` (``hardware.blockfma.ZERO_EXPONENT`` for a zero), as the caller's ``_truncated`` builds
them, and the addends ``C`` finite.  A product aligned to ``2**scale`` and truncated toward
zero is ``trunc(qa * qb * 2**-scale)`` (exact: see ``numba_blockfma``'s description), here
converted to int64 at once, so that a block's sum is an exact int64 sum for every model that
:class:`~pychop_compat.hardware.BlockFMA` accepts (Numba's float64 sums need its
``exact_sums``).  The alignment of the addend, the odd/even groups (the MI300X's fp8), the late
addend and the rounding of a block's sum are int64 shifts, as the namespace implementation's
``_floor_shift``, ``_late_addend`` and ``_round_scaled`` in ``hardware.blockfma`` do, with the
bit length of the sum read from its float64 conversion and corrected in int64 as there.  NaN
and infinite inner products are the caller's (the kernel sees zeros for non-finite inputs); a
block result that overflowed to an infinity stays as it is.  Float64 and int64 operations
only: no libdevice, no fp fusion (``triton_kernel.LAUNCH_OPTIONS``).  Triton is imported on first use.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any, Iterable

__all__ = ["BLOCK_M", "BLOCK_N", "ENABLED", "available", "block_matmul",
           "build_kernel", "wanted"]

if TYPE_CHECKING:  # the kernel's annotations name ``tl.constexpr``
    import triton
    import triton.language as tl
else:
    triton = tl = None  # set by build_kernel
power_of_two: Any = None  # set by build_kernel
floor_shift: Any = None  # set by build_kernel

#: Rows of the result per Triton program.
BLOCK_M = 32
#: Columns of the result per Triton program.
BLOCK_N = 32
#: Use the kernel where it applies (False: the namespace implementation; for benchmarks).
ENABLED = True
#: Route CPU tensors as if CUDA (Triton's interpreter; set by the tests only).
CPU_TENSORS_AS_CUDA = False


def available() -> bool:
    """True when Triton and torch can be imported (the kernel runs on torch tensors).

    Returns
    -------
    bool
    """
    import importlib.util

    from . import triton_kernel

    return triton_kernel.available() and importlib.util.find_spec("torch") is not None


def wanted(library: str, array: Any) -> bool:
    """Whether an operand of ``library`` (``'torch'`` or ``'cupy'``) takes the Triton kernel.

    Parameters
    ----------
    library : str
        The array library of the operands.
    array : array
        One operand: a torch tensor on CUDA (or any, routed there by the tests), or a CuPy array.

    Returns
    -------
    bool
        True with :data:`ENABLED` set and Triton and torch installed.
    """
    if not ENABLED or library not in ("torch", "cupy"):
        return False
    on_gpu = library == "cupy" or array.device.type == "cuda" or CPU_TENSORS_AS_CUDA
    return on_gpu and available()


@functools.lru_cache(maxsize=None)
def build_kernel() -> Any:
    """The ``@triton.jit`` block-FMA kernel (built on first use).

    Returns
    -------
    triton.JITFunction
        ``blockfma_kernel(qa_ptr, ea_ptr, qb_ptr, eb_ptr, d_ptr, M, N, K, fraction, extra,
        min_alignment, accumulator_emin, result_fraction, out_emin, out_emax, late_bits, addend_fraction, FMA,
        ROUNDING, OUTPUT_SUBNORMALS, NORMALISED, LATE, GROUPED, BLOCK_M, BLOCK_N)``.
    """
    # Module globals, not locals: Triton's interpreter patches the ``tl`` its kernel's globals name.
    global triton, tl, power_of_two, floor_shift
    import triton
    import triton.language as tl

    @triton.jit
    def power_of_two(exponent):
        """``2.0**exponent`` (int64), the exponent clipped to float64's normal range, from its bits."""
        return ((tl.minimum(tl.maximum(exponent, -1022), 1023) + 1023) << 52).to(tl.float64, bitcast=True)

    @triton.jit
    def floor_shift(values, left):
        """``floor(values * 2**left)`` of int64 ``values`` (the namespace's ``_floor_shift``)."""
        return tl.where(left >= 0, values << tl.minimum(tl.maximum(left, 0), 62),
                        values >> tl.minimum(tl.maximum(-left, 0), 63))

    @triton.jit(do_not_specialize=["M", "N", "K", "fraction", "extra", "min_alignment", "accumulator_emin",
                                   "result_fraction", "out_emin", "out_emax", "late_bits", "addend_fraction"])
    def blockfma_kernel(qa_ptr, ea_ptr, qb_ptr, eb_ptr, d_ptr, M, N, K, fraction, extra, min_alignment,
                        accumulator_emin, result_fraction, out_emin, out_emax, late_bits, addend_fraction,
                        FMA: tl.constexpr, ROUNDING: tl.constexpr, OUTPUT_SUBNORMALS: tl.constexpr,
                        NORMALISED: tl.constexpr, LATE: tl.constexpr, GROUPED: tl.constexpr,
                        BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
        rows = tl.program_id(0).to(tl.int64) * BLOCK_M + tl.arange(0, BLOCK_M).to(tl.int64)
        cols = tl.program_id(1).to(tl.int64) * BLOCK_N + tl.arange(0, BLOCK_N).to(tl.int64)
        in_rows = rows < M
        in_cols = cols < N
        inside = in_rows[:, None] & in_cols[None, :]
        result = tl.load(d_ptr + rows[:, None] * N + cols[None, :], mask=inside, other=0.0)
        zero = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.int64)  # int64 scalars as tiles: no int32 sums
        lowest = zero - 2147483648  # the namespace's int32 floor of an alignment exponent
        smallest_output = power_of_two(zero + out_emin)
        infinity = (zero + 0x7FF0000000000000).to(tl.float64, bitcast=True)
        for start in range(0, K, FMA):
            # The addend: the previous block's result (an infinity is kept, its blocks see 0)
            magnitude_bits = result.to(tl.int64, bitcast=True) & 0x7FFFFFFFFFFFFFFF
            overflowed = magnitude_bits == 0x7FF0000000000000
            flushed = overflowed
            if not OUTPUT_SUBNORMALS:
                flushed = flushed | (magnitude_bits.to(tl.float64, bitcast=True) < smallest_output)
            c = tl.where(flushed, 0.0, result)
            magnitude_bits = tl.where(flushed, 0, magnitude_bits)
            exponent_c = tl.maximum((magnitude_bits >> 52) - 1023, accumulator_emin)
            # its significand read at its exponent floored at min(accumulator_emin, out_emin): all its bits
            value_exponent = tl.maximum((magnitude_bits >> 52) - 1023, tl.minimum(accumulator_emin, out_emin))
            if LATE:
                largest = lowest
            else:
                largest = tl.where(c != 0, exponent_c, lowest)
            largest_odd = lowest
            # The alignment exponent: the largest product exponent (per group), and the addend's
            for k in range(start, start + FMA):
                # k in int64 vectors: offsets past 2**31 elements stay right
                k_rows = rows * 0 + k
                k_cols = cols * 0 + k
                exponent = (tl.load(ea_ptr + rows * K + k_rows, mask=in_rows, other=0)[:, None]
                            + tl.load(eb_ptr + k_cols * N + cols, mask=in_cols, other=0)[None, :])
                if NORMALISED:  # a product of significands 2 or more: its exponent one larger
                    qa = tl.load(qa_ptr + rows * K + k_rows, mask=in_rows, other=0.0)
                    qb = tl.load(qb_ptr + k_cols * N + cols, mask=in_cols, other=0.0)
                    product = qa[:, None] * qb[None, :]
                    exponent += (tl.abs(product) >= power_of_two(exponent + 1)).to(tl.int64)
                if GROUPED:
                    odd = ((k_rows - start) % 2 == 1)[:, None]
                    largest_odd = tl.where(odd, tl.maximum(largest_odd, exponent), largest_odd)
                    largest = tl.where(odd, largest, tl.maximum(largest, exponent))
                else:
                    largest = tl.maximum(largest, exponent)
            scale = tl.maximum(largest, min_alignment) - fraction - extra
            factor = power_of_two(-scale)
            # The addend's integer significand (addend_fraction bits: all its bits, cut only when
            # aligned, to 2**scale here or in the late addition)
            addend = (tl.abs(c) * power_of_two(addend_fraction - value_exponent)).to(tl.int64)
            if LATE:
                total = zero
            else:
                aligned = floor_shift(addend, value_exponent - addend_fraction - scale)
                total = tl.where(c < 0, -aligned, aligned)
            scale_odd = tl.maximum(largest_odd, min_alignment) - fraction - extra
            factor_odd = power_of_two(-scale_odd)
            total_odd = zero
            for k in range(start, start + FMA):
                k_rows = rows * 0 + k
                k_cols = cols * 0 + k
                qa = tl.load(qa_ptr + rows * K + k_rows, mask=in_rows, other=0.0)
                qb = tl.load(qb_ptr + k_cols * N + cols, mask=in_cols, other=0.0)
                product = qa[:, None] * qb[None, :]  # exact
                if GROUPED:
                    odd = ((k_rows - start) % 2 == 1)[:, None]
                    term = (product * tl.where(odd, factor_odd, factor)).to(tl.int64)
                    total += tl.where(odd, 0, term)
                    total_odd += tl.where(odd, term, 0)
                else:
                    total += (product * factor).to(tl.int64)  # truncated toward zero
            if GROUPED:  # the group sum of the smaller scale floored to the larger one's
                top = tl.maximum(scale, scale_odd)
                total = floor_shift(total, scale - top) + floor_shift(total_odd, scale_odd - top)
                scale = top
            if LATE:  # the namespace's _late_addend
                addend = tl.where(c < 0, -addend, addend)
                largest = scale + fraction + extra
                if GROUPED:  # an addend below the products' last bit adds nothing
                    addend = tl.where(exponent_c < largest - (fraction + extra + 1), 0, addend)
                smaller = largest < exponent_c
                new_scale = tl.where(smaller, exponent_c - late_bits - fraction - extra, scale)
                addend = floor_shift(addend, value_exponent - addend_fraction - new_scale)
                total = floor_shift(total, scale - new_scale) + addend
                scale = new_scale
            # The namespace's _round_scaled: total * 2**scale to result_fraction bits after its
            # leading one, exponent floor out_emin
            magnitude = tl.abs(total)
            unrounded = magnitude.to(tl.float64)
            estimate = tl.where(magnitude == 0, 0, (unrounded.to(tl.int64, bitcast=True) >> 52) - 1022)
            # one less where the conversion rounded a sum of 54 bits or more up to a power of two
            power = (zero + 1) << tl.minimum(tl.maximum(estimate - 1, 0), 62)
            rounded_up = (magnitude != 0) & (magnitude < power)
            bit_length = estimate - rounded_up.to(tl.int64)
            quantum = tl.maximum(scale + bit_length - 1, out_emin) - result_fraction
            dropped = tl.minimum(tl.maximum(quantum - scale, 0), 63)  # (see _round_scaled)
            kept = magnitude >> dropped
            remainder = magnitude - (kept << dropped)
            negative = total < 0
            if ROUNDING == 0:
                up = zero
            elif ROUNDING == 1:
                half = tl.where(dropped > 0, (zero + 1) << tl.maximum(dropped - 1, 0), 1)
                up = ((dropped > 0) & ((remainder > half) | ((remainder == half) & ((kept & 1) == 1)))).to(tl.int64)
            elif ROUNDING == 2:
                up = ((remainder > 0) & (total >= 0)).to(tl.int64)
            else:
                up = ((remainder > 0) & negative).to(tl.int64)
            value = tl.where(quantum > scale, (kept + up).to(tl.float64) * power_of_two(quantum),
                             unrounded * power_of_two(scale))
            value = tl.where(value >= power_of_two(zero + out_emax + 1), infinity, value)
            if not OUTPUT_SUBNORMALS:
                value = tl.where(value < smallest_output, 0.0, value)
            # the sign bit set, not -value: Triton compiles a float negation as 0 - value, which gives +0 for
            # a zero (so did an H200, 2026-11-28), where NumPy's rounding keeps -0
            value = tl.where(negative, (value.to(tl.int64, bitcast=True) | (-9223372036854775807 - 1)).to(
                tl.float64, bitcast=True), value)
            result = tl.where(overflowed, result, value)
        tl.store(d_ptr + rows[:, None] * N + cols[None, :], result, mask=inside)

    return blockfma_kernel


def block_matmul(QA: Any, EA: Any, QB: Any, EB: Any, D: Any, params: Iterable[int]) -> None:
    """The inner products of the rows of ``QA`` with the columns of ``QB``, added to ``D``.

    The Triton counterpart of ``numba_blockfma.block_matmul``, with its arguments.

    Parameters
    ----------
    QA, EA : torch.Tensor
        ``(M, K)`` contiguous: truncated inputs (float64) and their exponents (int64,
        ``hardware.blockfma.ZERO_EXPONENT`` for zeros); ``K`` a multiple of the block size.
    QB, EB : torch.Tensor
        ``(K, N)`` contiguous, the same for B.
    D : torch.Tensor
        ``(M, N)`` contiguous float64, the finite addends; overwritten with the results.
    params : iterable of int
        ``numba_blockfma.block_matmul``'s: fma_size, F, x, min_alignment_exponent,
        accumulator_emin, result fraction bits, output emin, emax, rounding code
        (``hardware.blockfma.ROUNDING_CODES``), output subnormals, normalised products, late addend bits
        (-1: the addend aligned with the products), odd/even groups, the addend's fraction bits.
    """
    from . import triton_kernel

    (fma_size, fraction, extra, min_alignment, accumulator_emin, result_fraction, out_emin, out_emax, rounding,
     output_subnormals, normalised, late_bits, grouped, addend_fraction) = (int(value) for value in params)
    M, N = D.shape
    grid = (-(-M // BLOCK_M), -(-N // BLOCK_N))
    build_kernel()[grid](QA, EA, QB, EB, D, M, N, QA.shape[1], fraction, extra, min_alignment, accumulator_emin,
                         result_fraction, out_emin, out_emax, max(late_bits, 0), addend_fraction, FMA=fma_size,
                         ROUNDING=rounding,
                         OUTPUT_SUBNORMALS=bool(output_subnormals), NORMALISED=bool(normalised),
                         LATE=late_bits >= 0, GROUPED=bool(grouped), BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N,
                         **triton_kernel.LAUNCH_OPTIONS)
