"""Compiled inner products of a block-FMA matrix unit (Numba), for :mod:`pychop_compat.hardware`.

The same integer arithmetic as ``hardware.blockfma``'s NumPy implementation, in a
different form: the caller hands over each input as its *truncated value*
``q = sign * I * 2**(e - f)`` (``I`` its integer significand, ``e`` its clamped
exponent, ``f`` the input format's fraction bits) and its exponent ``e`` (a value
far below any real one, ``hardware.blockfma.ZERO_EXPONENT``, for a zero), so that

* the largest product exponent of a block is ``max(ea + eb)`` over the block: a zero
  product's sum is below every real one, so no test for zero is needed;
* a product ``qa * qb = ±Ia * Ib * 2**(ea + eb - 2f)`` is exact in float64
  (``Ia * Ib < 2**22`` for every input format, exponents above -300);
* the product aligned to ``2**scale`` and truncated toward zero, NumPy's
  ``±(Ia * Ib) >> (scale - (ea + eb - 2f))``, is ``trunc(qa * qb * 2**-scale)``: a
  multiplication by a power of two is exact (or, below 2**-1022, gives a value
  under 1 whose truncation is 0 either way);
* the block's sum is a sum of integers each below ``2**(F + x + 2)`` (``F``
  accumulator fraction bits, ``x`` extra bits: a product's significand is below 4
  and its exponent at most the alignment exponent) and the addend's, below
  ``2**(F + x + 1)``: with ``fma_size`` terms it stays below
  ``(fma_size + 1) * 2**(F + x + 2)``.  :func:`exact_sums` says whether that is at
  most ``2**53``; then every partial sum is an integer that float64 holds exactly
  (in any order), as NumPy's int64 sum is.  The caller uses NumPy otherwise (no
  preset comes near: H100 fp16 has ``17 * 2**27``, B200 fp8 ``33 * 2**27``);
* the addend (the previous block's result, a value of the output format) is
  decomposed as NumPy does, with the exponent read from its bits.

The rounding of a block's sum is NumPy's ``_round_scaled`` in float64 operations
(see :func:`_tile`).  The loops over the columns of a tile are branch-free, so
LLVM vectorises them.  NaN and infinity are the caller's (:func:`special_values`
computes them where it asks).  With odd/even groups (the MI300X's fp8) the products at even
and at odd positions of a block are aligned and summed apart, each to its own scale, and the
two integer sums floored to the larger scale before they are added, as NumPy's ``_block`` does.

AMD's unaligned block sums (``block_sum`` ``'exact'``, the MI100, and ``'pairwise'``, the
MI210 and MI250; rounding to nearest binary32) have their own kernels,
:func:`unaligned_matmul` and :func:`unaligned_rows`, an inner product at a time: the
exact sum as NumPy's ``_exact_block`` distils it (TwoSums into a nonoverlapping expansion,
then the top of it rounded to odd), converted to binary32 once; the pairwise sums in
binary32 arithmetic itself (each product converted from its exact float64 value, each sum
a binary32 addition, rounded to nearest as IEEE 754 says).
"""

from __future__ import annotations

import math

import numba
import numpy as np
from numba import prange

from .numba_kernels import INLINE_OPTIONS, JIT_OPTIONS, bits_of_double, double_of_bits, lock_kernel_caches

__all__ = ["TILE", "ROWS", "exact_sums", "block_matmul", "block_rows",
           "special_values", "unaligned_matmul", "unaligned_rows"]

#: Columns of the result per task (the work arrays of one task stay in the L1 cache).
TILE = 64
#: Rows of the result per task (they share each block of B, read once from memory).
ROWS = 8
_LOWEST = -(1 << 31)  # NumPy's int32 floor of the alignment exponent


def exact_sums(accumulator_fraction_bits: int, extra_alignment_bits: int, fma_size: int,
               late_addend_bits: int = 0) -> bool:
    """Whether every block sum of such a model is below ``2**53`` (see the module's description;
    a late addend's shift of the products, ``late_addend_bits``, included)."""
    return (fma_size + 1) * 2.0 ** (accumulator_fraction_bits + extra_alignment_bits + 2 + late_addend_bits) \
        <= 2.0 ** 53


@numba.njit(**INLINE_OPTIONS)
def _power_of_two(exponent):
    """``2.0**exponent``, the exponent clipped to float64's normal range (branch-free)."""
    return double_of_bits(np.uint64(min(max(exponent, -1022), 1023) + 1023) << np.uint64(52))


@numba.njit(**INLINE_OPTIONS)
def _exponent_of(magnitude):
    """``floor(log2(magnitude))`` of a positive normal float64 (-1023 for 0)."""
    return np.int64(bits_of_double(magnitude) >> np.uint64(52)) - 1023


@numba.njit(**INLINE_OPTIONS)
def _add_late(total, scales, addends, j, fraction, extra, accumulator_emin, late_bits, grouped, addend_fraction,
              value_emin):
    """NumPy's ``_late_addend`` on column ``j``: ``total[j]``, the products' integer sum at
    ``2**scales[j]``, becomes their sum with ``addends[j]`` (every bit of it: ``addend_fraction``
    bits after its exponent floored at ``value_emin``, its exponent in the alignment floored at
    ``accumulator_emin``), the operand of the smaller exponent floored (toward minus infinity)
    to the other's last bit, ``late_bits`` further for the products (``grouped``: an addend more
    than ``fraction + extra + 1`` binades below them adds nothing), and an addend's bits below
    the sum's last bit floored as well; ``scales[j]`` the scale of the result.  Every step is
    exact: the integers stay below ``2**53`` (:func:`exact_sums`), the scalings by powers of two
    are far from float64's limits (or floor a value below 1 in magnitude to 0 or -1)."""
    c = addends[j]
    exponent_c = max(_exponent_of(abs(c)), accumulator_emin)
    value_exponent = max(_exponent_of(abs(c)), value_emin)
    addend = np.trunc(abs(c) * _power_of_two(addend_fraction - value_exponent))
    addend = -addend if c < 0 else addend
    largest = scales[j] + fraction + extra
    if grouped and exponent_c < largest - (fraction + extra + 1):
        addend = 0.0
    if largest < exponent_c:
        scale = exponent_c - late_bits - fraction - extra
        products = np.floor(total[j] * _power_of_two(scales[j] - scale))
    else:
        scale = scales[j]
        products = total[j]
    total[j] = products + np.floor(addend * _power_of_two(value_exponent - addend_fraction - scale))
    scales[j] = scale


@numba.njit(**JIT_OPTIONS)
def _tile(QA, EA, first_row, QB, EB, first, width, out, params):
    """``out`` (rows, width): the inner products of rows ``first_row``... of ``QA`` with columns
    ``first`` to ``first + width`` of ``QB``, block after block; ``out`` holds the addends on
    entry.  The rows take their turn block by block, so that a block of ``QB`` is read from the
    cache by all but the first.

    Each step is a loop over the columns without branches, so that LLVM vectorises it; the
    rounding of a block's sum is NumPy's ``_round_scaled`` in float64 operations on the
    integer sum ``total`` (below 2**53): ``|total| * 2**-dropped`` is exact, and floor,
    ceil or rint (ties to even) of it is the kept part plus NumPy's rounding increment.
    """
    fma_size, fraction, extra, min_alignment = params[0], params[1], params[2], params[3]
    accumulator_emin, result_fraction, out_emin, out_emax = params[4], params[5], params[6], params[7]
    rounding, output_subnormals, normalised = params[8], params[9] != 0, params[10] != 0
    late, late_bits = params[11] >= 0, params[11]  # the addend added after the products (-1: with them)
    grouped = params[12] != 0  # the products at odd positions of a block in a group of their own
    addend_fraction = params[13]  # the addend's bits before it is aligned (NumPy's)
    # the addend's significand is read at its exponent floored here (NumPy's value_exp): all its bits
    value_emin = min(accumulator_emin, out_emin)
    inner = QA.shape[1]
    largest = np.empty(width, np.int64)
    total = np.empty(width, np.float64)
    factor = np.empty(width, np.float64)
    largest_odd = np.full(width, _LOWEST, np.int64)  # the odd group's (untouched without groups)
    total_odd = np.zeros(width, np.float64)
    factor_odd = np.ones(width, np.float64)
    addends = np.empty(width, np.float64)
    smallest_output = _power_of_two(out_emin)
    infinite_from = _power_of_two(out_emax + 1)
    flush_output = 0.0 if output_subnormals else smallest_output
    for start in range(0, inner, fma_size):
        stop = start + fma_size
        for r in range(out.shape[0]):
            row, result = first_row + r, out[r]
            for j in range(width):
                c = result[j]
                c = 0.0 if math.isinf(c) or abs(c) < flush_output else c
                addends[j] = c
                largest[j] = max(_exponent_of(abs(c)), accumulator_emin) if c != 0 and not late else _LOWEST
                largest_odd[j] = _LOWEST
            for k in range(start, stop):
                exponent_a = EA[row, k]
                exponents_b = EB[k, first:first + width]
                exponents = largest_odd if grouped and (k - start) % 2 == 1 else largest
                if normalised:  # the exponent of a product of significands 2 or more is one larger
                    value_a = QA[row, k]
                    values_b = QB[k, first:first + width]
                    for j in range(width):
                        exponent = exponent_a + exponents_b[j]
                        exponent += abs(value_a * values_b[j]) >= _power_of_two(exponent + 1)
                        exponents[j] = max(exponents[j], exponent)
                else:
                    for j in range(width):
                        exponents[j] = max(exponents[j], exponent_a + exponents_b[j])
            for j in range(width):
                # 2**-scale clipped to float64's normal range: a larger one only meets zero products
                # (a nonzero one is at least 2**-600, so its exponent bounds the alignment exponent
                # from below), a smaller one only terms it truncates to zero either way.
                scale = max(largest[j], min_alignment) - fraction - extra
                largest[j] = scale
                factor[j] = _power_of_two(-scale)
                c = addends[j]
                value_exponent = max(_exponent_of(abs(c)), value_emin)
                addend = np.trunc(abs(c) * _power_of_two(addend_fraction - value_exponent))
                aligned = np.trunc(addend * _power_of_two(value_exponent - addend_fraction - scale))
                total[j] = 0.0 if late else (-aligned if c < 0 else aligned)
            if grouped:
                for j in range(width):
                    largest_odd[j] = max(largest_odd[j], min_alignment) - fraction - extra
                    factor_odd[j] = _power_of_two(-largest_odd[j])
                    total_odd[j] = 0.0
            for k in range(start, stop):
                value_a = QA[row, k]
                values_b = QB[k, first:first + width]
                sums, factors = (total_odd, factor_odd) if grouped and (k - start) % 2 == 1 else (total, factor)
                for j in range(width):
                    sums[j] += np.trunc(value_a * values_b[j] * factors[j])
            if grouped:  # the group sum of the smaller scale floored to the larger one
                for j in range(width):
                    top = max(largest[j], largest_odd[j])
                    total[j] = np.floor(total[j] * _power_of_two(largest[j] - top)) + \
                        np.floor(total_odd[j] * _power_of_two(largest_odd[j] - top))
                    largest[j] = top
            if late:
                for j in range(width):
                    _add_late(total, largest, addends, j, fraction, extra, accumulator_emin, late_bits, grouped,
                              addend_fraction, value_emin)
            for j in range(width):
                scale = largest[j]
                magnitude = abs(total[j])
                exponent = scale + (_exponent_of(magnitude) if magnitude != 0 else -1)
                quantum = max(exponent, out_emin) - result_fraction
                scaled = magnitude * _power_of_two(scale - quantum)
                if rounding == 0:
                    kept = np.floor(scaled)
                elif rounding == 1:
                    kept = np.rint(scaled)
                else:
                    kept = np.ceil(scaled) if (rounding == 2) == (total[j] >= 0) else np.floor(scaled)
                value = kept * _power_of_two(quantum) if quantum > scale else magnitude * _power_of_two(scale)
                value = np.inf if value >= infinite_from else value
                value = 0.0 if value < flush_output else value
                value = -value if total[j] < 0 else value
                result[j] = result[j] if math.isinf(result[j]) else value


@numba.njit(parallel=True, **JIT_OPTIONS)
def block_matmul(QA, EA, QB, EB, C, params):
    """The inner products of the rows of ``QA`` (M, K) with the columns of ``QB`` (K, N), added
    to ``C`` (M, N, float64, overwritten with the results); ``K`` a multiple of the block size.
    ``params``: int64 fma_size, F, x, min_alignment_exponent, accumulator_emin, result fraction
    bits, output emin, emax, rounding code, output subnormals, normalised products, late addend
    bits (-1: the addend aligned with the products), odd/even groups, the addend's fraction bits
    before it is aligned with the products (``hardware.blockfma``'s ``_addend_fraction``)."""
    rows, columns = C.shape
    tiles, groups = -(-columns // TILE), -(-rows // ROWS)
    for task in prange(tiles * groups):
        tile, group = task // groups, task % groups  # consecutive tasks share their columns of B
        first, first_row = tile * TILE, group * ROWS
        width, height = min(TILE, columns - first), min(ROWS, rows - first_row)
        out = C[first_row:first_row + height, first:first + width].copy()
        _tile(QA, EA, first_row, QB, EB, first, width, out, params)
        C[first_row:first_row + height, first:first + width] = out


@numba.njit(parallel=True, **JIT_OPTIONS)
def block_rows(QA, EA, QBT, EBT, c, params):
    """The inner products of row ``r`` of ``QA`` with column ``r`` of ``QBT`` (K, R), added to
    ``c[r]`` (overwritten with the results); ``params`` as :func:`block_matmul`'s."""
    for row in prange(c.shape[0]):
        out = np.full((1, 1), c[row])
        _tile(QA, EA, row, QBT, EBT, row, 1, out, params)
        c[row] = out[0, 0]


@numba.njit(**JIT_OPTIONS)
def special_values(A, B, C, rows, columns):
    """For each pair ``(rows[n], columns[n])``: NaN where the inner product of that row of ``A``
    with that column of ``B`` plus that element of ``C`` has a NaN term or infinite terms of both
    signs, else the infinity it has (0 where it has neither)."""
    result = np.zeros(rows.shape[0])
    for n in range(rows.shape[0]):
        i, j = rows[n], columns[n]
        c = C[i, j]
        has_nan, plus, minus = math.isnan(c), c == np.inf, c == -np.inf
        for k in range(A.shape[1]):
            term = A[i, k] * B[k, j]
            has_nan |= math.isnan(term)
            plus |= term == np.inf
            minus |= term == -np.inf
        if has_nan or (plus and minus):
            result[n] = np.nan
        elif plus:
            result[n] = np.inf
        elif minus:
            result[n] = -np.inf
    return result


@numba.njit(**INLINE_OPTIONS)
def _two_sum(a, b):
    """``(s, e)``: ``s = fl(a + b)`` and ``a + b = s + e`` exactly (TwoSum)."""
    total = a + b
    b_part = total - a
    return total, (a - (total - b_part)) + (b - b_part)


@numba.njit(**INLINE_OPTIONS)
def _exact_block(a, b, start, stop, c, expansion, output_subnormals):
    """NumPy's ``_exact_block`` for one block of one inner product (``a[start:stop]``,
    ``b[start:stop]``, addend ``c``), rounded to nearest binary32; ``expansion`` a work array of
    ``stop - start + 1`` elements."""
    smallest_normal = _power_of_two(-126)
    if not output_subnormals and abs(c) < smallest_normal:
        c = 0.0
    expansion[0] = c
    count = 1
    for k in range(start, stop):
        term = a[k] * b[k]  # exact
        for m in range(count):
            term, expansion[m] = _two_sum(term, expansion[m])
        expansion[count] = term
        count += 1
    value, residual = expansion[count - 1], 0.0
    for m in range(count - 2, -1, -1):
        value, error = _two_sum(value, expansion[m])
        if error != 0:
            residual = error
            break
    if value == 0:
        return 0.0  # an exact zero is +0
    if residual != 0 and bits_of_double(value) & np.uint64(1) == 0:
        # to odd: one unit toward the rest (the exact sum lies between value and that neighbour)
        toward_zero = (residual > 0) != (value > 0)
        bits = bits_of_double(value)
        value = double_of_bits(bits - np.uint64(1) if toward_zero else bits + np.uint64(1))
    result = np.float64(np.float32(value))  # to nearest, ties to even, with subnormals
    if not output_subnormals and abs(result) < smallest_normal:
        result = -0.0 if value < 0 else 0.0
    return result


@numba.njit(**INLINE_OPTIONS)
def _pairwise_block(a, b, start, stop, c, sums, input_subnormals, output_subnormals):
    """NumPy's ``_pairwise_block`` for one block of one inner product, to nearest binary32;
    ``sums`` a float32 work array of ``stop - start`` (a power of two) elements."""
    flush = np.float32(0.0) if output_subnormals else np.float32(_power_of_two(-126))
    for k in range(start, stop):
        product = a[k] * b[k]  # exact
        if product == 0 and not input_subnormals:
            product = 0.0  # +0, as a flushed input gives
        rounded = np.float32(product)
        sums[k - start] = np.float32(0.0) if abs(rounded) < flush else rounded
    count = stop - start
    while count > 1:
        for k in range(count // 2):
            total = sums[2 * k] + sums[2 * k + 1]
            sums[k] = total * np.float32(0.0) if abs(total) < flush else total  # a zero of its sign
        count //= 2
    addend = np.float32(c)
    total = (np.float32(0.0) if abs(addend) < flush else addend) + sums[0]
    return np.float64(total * np.float32(0.0) if abs(total) < flush else total)


@numba.njit(**INLINE_OPTIONS)
def _unaligned_inner(a, b, c, params, expansion, sums):
    """One inner product of ``a`` and ``b`` plus ``c`` through the unaligned model of ``params``
    (int64 fma_size, pairwise, input subnormals, output subnormals), block after block: an
    infinite result of the exact sum is kept (NumPy's ``_block_step``), the pairwise sums pass
    it on as binary32 arithmetic does."""
    fma_size, pairwise = params[0], params[1] != 0
    input_subnormals, output_subnormals = params[2] != 0, params[3] != 0
    accumulator = c
    for start in range(0, a.shape[0], fma_size):
        if pairwise:
            accumulator = _pairwise_block(a, b, start, start + fma_size, accumulator, sums, input_subnormals,
                                          output_subnormals)
        elif not math.isinf(accumulator):
            accumulator = _exact_block(a, b, start, start + fma_size, accumulator, expansion, output_subnormals)
    return accumulator


@numba.njit(parallel=True, **JIT_OPTIONS)
def unaligned_matmul(QA, QBT, C, params):
    """The inner products of the rows of ``QA`` (M, K) with the rows of ``QBT`` (N, K: B
    transposed), added to ``C`` (M, N, overwritten with the results) through AMD's unaligned
    block sums; ``K`` a multiple of the block size; ``params`` as :func:`_unaligned_inner`'s."""
    for i in prange(C.shape[0]):
        expansion, sums = np.empty(params[0] + 1), np.empty(params[0], np.float32)
        for j in range(C.shape[1]):
            C[i, j] = _unaligned_inner(QA[i], QBT[j], C[i, j], params, expansion, sums)


@numba.njit(parallel=True, **JIT_OPTIONS)
def unaligned_rows(QA, QB, c, params):
    """The inner product of row ``r`` of ``QA`` with row ``r`` of ``QB`` plus ``c[r]`` (overwritten
    with the results), as :func:`unaligned_matmul`."""
    for row in prange(c.shape[0]):
        expansion, sums = np.empty(params[0] + 1), np.empty(params[0], np.float32)
        c[row] = _unaligned_inner(QA[row], QB[row], c[row], params, expansion, sums)


lock_kernel_caches(globals())
