"""Compiled chopped matrix products (Numba), imported by :mod:`pychop_compat.linalg` on first use.

``C = A @ B`` (float64), every product and sum rounded by ``numba_kernels.chop_double``
in the order of the method :mod:`pychop_compat.linalg` documents; modes 1-4 without
flips only, so groups of ``ROWS`` rows may go to any thread.  A row is first rounded
by the branch-free ``numba_kernels.fast_bits``, which counts the values it
cannot round; only a row with one is redone by ``chop_double``.
"""

from __future__ import annotations

import contextlib
from typing import Iterator

import numba
import numpy as np
from numba import prange

from .numba_kernels import (INLINE_OPTIONS, JIT_OPTIONS, bits_of_double, chop_double, constants, double_of_bits,
                            fast_bits, fast_constants, irregular, lock_kernel_caches, nearest_bits, nearest_only)

__all__ = ["matmul_recursive", "matmul_pairwise", "matmul_blocked", "tasks_one_at_a_time", "ROWS", "TILE"]

#: Rows of C per task.
ROWS = 8
#: Columns of C per pairwise pass (ROWS x log2(n) partial sums of TILE columns stay in the cache).
TILE = 128


@numba.njit(**INLINE_OPTIONS)
def regular_bits(b, f, nearest):
    """The branch-free rounding of a regular bit pattern; ``nearest``: ``nearest_only(f)``, tested
    once outside the loop (LLVM then splits the loop).  Shared with :mod:`.numba_lu`."""
    return nearest_bits(b, f) if nearest else fast_bits(b, f)


@contextlib.contextmanager
def tasks_one_at_a_time() -> Iterator[None]:
    """Numba's parallel loops in the block hand out their tasks one at a time, not in equal shares
    (on a busy machine a stalled thread then holds up one task, not a share of the work)."""
    previous = numba.set_parallel_chunksize(1)
    try:
        yield
    finally:
        numba.set_parallel_chunksize(previous)


@numba.njit(**INLINE_OPTIONS)
def _setup(A, B, ipp, upp, fpp, rpp, ips, ups, fps, rps):
    """A product kernel's roundings (products, then sums: constants, fast constants), the shapes
    ``m, n, p`` and the result ``C``."""
    m, n = A.shape
    p = B.shape[1]
    return (constants(ipp, upp, fpp), fast_constants(ipp, upp, rpp), constants(ips, ups, fps),
            fast_constants(ips, ups, rps), m, n, p, np.empty((m, p)))


# --- rows: out[j] = fl_s(acc[j] + fl_p(a * b[j])) and friends, fast loop then exact loop if needed -----

@numba.njit(**JIT_OPTIONS)
def _axpy_row(a, b, acc, out, first, kp, fp_, ks, fs, round_products, p):
    """``out[j] = fl_s(acc[j] + fl_p(a b[j]))`` (``first``: ``fl(a b[j])``; no ``fl_p`` unless
    ``round_products``).  One branch-free loop per case (a test inside stops LLVM vectorising)."""
    if first:
        kr, fr = (kp, fp_) if round_products else (ks, fs)
        _leaf_row(a, b, out, True, kr, fr, p)
        return
    special = 0
    n = np.uint64(p)
    near = nearest_only(fs)
    if round_products:
        near_p = nearest_only(fp_)
        for j in range(n):
            tb = bits_of_double(a * b[j])
            ub = bits_of_double(acc[j] + double_of_bits(regular_bits(tb, fp_, near_p)))
            special += irregular(tb, fp_) + irregular(ub, fs)
            out[j] = double_of_bits(regular_bits(ub, fs, near))
        if special:
            for j in range(n):
                tb = bits_of_double(a * b[j])
                ub = bits_of_double(acc[j] + double_of_bits(fast_bits(tb, fp_)))
                if irregular(tb, fp_) + irregular(ub, fs):
                    out[j] = chop_double(acc[j] + chop_double(a * b[j], kp), ks)
        return
    for j in range(n):
        ub = bits_of_double(acc[j] + a * b[j])
        special += irregular(ub, fs)
        out[j] = double_of_bits(regular_bits(ub, fs, near))
    if special:
        for j in range(n):
            if irregular(bits_of_double(acc[j] + a * b[j]), fs):
                out[j] = chop_double(acc[j] + a * b[j], ks)


@numba.njit(**JIT_OPTIONS)
def _add_rows(x, y, out, ks, fs, p):
    """``out[j] = fl(x[j] + y[j])``."""
    special = 0
    near = nearest_only(fs)
    for j in range(np.uint64(p)):
        ub = bits_of_double(x[j] + y[j])
        special += irregular(ub, fs)
        out[j] = double_of_bits(regular_bits(ub, fs, near))
    if special:
        for j in range(np.uint64(p)):
            if irregular(bits_of_double(x[j] + y[j]), fs):
                out[j] = chop_double(x[j] + y[j], ks)


@numba.njit(parallel=True, **JIT_OPTIONS)
def matmul_recursive(A, B, ipp, upp, fpp, rpp, round_products, ips, ups, fps, rps):
    """``s = fl(p_1)``; ``s = fl(s + p_k)``, with ``p_k = fl(a_k b_k)`` when ``round_products``
    (products rounded by the first constants) else the double product (sums by the second)."""
    kp, fp_, ks, fs, m, n, p, C = _setup(A, B, ipp, upp, fpp, rpp, ips, ups, fps, rps)
    for block in prange((m + ROWS - 1) // ROWS):
        i0 = block * ROWS
        i1 = min(m, i0 + ROWS)
        # Two sets of accumulator rows, read from one and written to the other at each step
        # (the exact loop of a row with a special value needs the old sums).
        sums = np.empty((2, ROWS, p))
        for i in range(i0, i1):
            _axpy_row(A[i, 0], B[0], sums[0, i - i0], sums[0, i - i0], True, kp, fp_, ks, fs, round_products, p)
        for kk in range(1, n):
            old = (kk - 1) % 2
            for i in range(i0, i1):
                _axpy_row(A[i, kk], B[kk], sums[old, i - i0], sums[1 - old, i - i0], False, kp, fp_, ks, fs,
                          round_products, p)
        for i in range(i0, i1):
            C[i, :] = sums[(n - 1) % 2, i - i0]
    return C


@numba.njit(parallel=True, **JIT_OPTIONS)
def matmul_blocked(A, B, ipp, upp, fpp, rpp, round_products, ips, ups, fps, rps, block_size):
    """Each block of ``block_size`` terms summed recursively, the block sums summed recursively
    in order (as each block ends, its sum joins the running total)."""
    kp, fp_, ks, fs, m, n, p, C = _setup(A, B, ipp, upp, fpp, rpp, ips, ups, fps, rps)
    for block in prange((m + ROWS - 1) // ROWS):
        i0 = block * ROWS
        i1 = min(m, i0 + ROWS)
        partial = np.empty((ROWS, p))
        row = np.empty(p)
        for kk in range(n):
            position = kk % block_size
            ends = position == block_size - 1 or kk == n - 1
            first_block = kk < block_size
            for i in range(i0, i1):
                part = partial[i - i0]
                _axpy_row(A[i, kk], B[kk], part, row, position == 0, kp, fp_, ks, fs, round_products, p)
                if not ends:
                    part[:] = row
                elif first_block:
                    C[i, :] = row
                else:
                    _add_rows(C[i], row, part, ks, fs, p)
                    C[i, :] = part
    return C


@numba.njit(**JIT_OPTIONS)
def _leaf_row(a, b, out, rounds, kr, fr, width):
    """``out[j] = fl(a b[j])`` by the constants ``kr, fr`` (``rounds``) or the double product."""
    if not rounds:
        for j in range(np.uint64(width)):
            out[j] = a * b[j]
        return
    special = 0
    near = nearest_only(fr)
    for j in range(np.uint64(width)):
        tb = bits_of_double(a * b[j])
        special += irregular(tb, fr)
        out[j] = double_of_bits(regular_bits(tb, fr, near))
    if special:  # redo the special elements only (the exact loop is scalar)
        for j in range(np.uint64(width)):
            if irregular(bits_of_double(a * b[j]), fr):
                out[j] = chop_double(a * b[j], kr)


@numba.njit(parallel=True, **JIT_OPTIONS)
def matmul_pairwise(A, B, ipp, upp, fpp, rpp, round_products, ips, ups, fps, rps):
    """The products summed pairwise level by level: ``y_q = fl(x_{2q} + x_{2q+1})``, an odd last
    term carried over (products unrounded unless ``round_products`` or n = 1).

    That tree is the aligned binary tree, summed here term by term like a binary counter:
    ``levels[L]`` holds a finished subtree of ``2^L`` terms while bit ``L`` of the count is set; a
    new term merges with the full levels below its carry; the partial sums left are added from
    the smallest up.  The same additions, in O(log2 n) rows of scratch per row of C.
    """
    kp, fp_, ks, fs, m, n, p, C = _setup(A, B, ipp, upp, fpp, rpp, ips, ups, fps, rps)
    depth = 1
    while (1 << depth) <= n:
        depth += 1
    rounds_leaves = round_products or n == 1
    kr, fr = (kp, fp_) if round_products else (ks, fs)
    for block in prange((m + ROWS - 1) // ROWS):
        i0 = block * ROWS
        i1 = min(m, i0 + ROWS)
        levels = np.empty((ROWS, depth, TILE))
        scratch = np.empty((2, TILE))
        for j0 in range(0, p, TILE):
            width = min(p, j0 + TILE) - j0
            for kk in range(n):
                carries = 0  # trailing ones of kk: the full levels the new term merges with
                while (kk >> carries) & 1:
                    carries += 1
                b = B[kk, j0:j0 + width]
                for i in range(i0, i1):
                    stack = levels[i - i0]
                    if carries == 0:
                        _leaf_row(A[i, kk], b, stack[0], rounds_leaves, kr, fr, width)
                        continue
                    _leaf_row(A[i, kk], b, scratch[0], rounds_leaves, kr, fr, width)
                    current = 0
                    for level in range(carries):
                        # fl(left + right) into the other scratch row, the last one into its level
                        out = stack[carries] if level == carries - 1 else scratch[1 - current]
                        _add_rows(stack[level], scratch[current], out, ks, fs, width)
                        current = 1 - current
            for i in range(i0, i1):
                stack = levels[i - i0]
                row = C[i, j0:j0 + width]
                found = False
                for level in range(depth):
                    if not (n >> level) & 1:
                        continue
                    if not found:
                        row[:] = stack[level, :width]
                        found = True
                    else:
                        _add_rows(stack[level], row, scratch[0], ks, fs, width)
                        row[:] = scratch[0, :width]
    return C


lock_kernel_caches(globals())
