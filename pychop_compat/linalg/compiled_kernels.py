"""Compiled chopped matrix products (Numba), imported by :mod:`.kernels` on first use.

Each kernel computes ``C = A @ B`` (float64) with every product and every sum
rounded by :func:`pychop_compat.engines.numba_kernels.chop_double`, the
compiled engine's rounding of one value, in exactly the order of the method
that :mod:`.kernels` documents; only deterministic rounding (modes 1-4, no
bit flips) comes here, so each element of ``C`` depends only on its own
operations and the loops may run in any order.

Memory: the result, plus O(rows_per_task * p) (blocked) or
O(n * COLUMNS) (pairwise) scratch per thread: never the n * m * p products.
Rows of ``C`` are shared out over Numba's threads in groups of ROWS, so a
row of ``B`` is read from the cache once per group.
"""

from __future__ import annotations

import numba
import numpy as np
from numba import prange

from ..engines.numba_kernels import chop_double, constants

__all__ = ["matmul_recursive", "matmul_pairwise", "matmul_blocked", "ROWS", "COLUMNS"]

#: Rows of C per task.
ROWS = 8
#: Columns of C per pairwise tree pass (the n x COLUMNS terms stay in the cache).
COLUMNS = 64

_jit = dict(cache=True, nogil=True, error_model="numpy")


@numba.njit(parallel=True, **_jit)
def matmul_recursive(A, B, ipp, upp, fpp, round_products, ips, ups, fps):
    """``s = fl(p_1)``; ``s = fl(s + p_k)``, with ``p_k = fl(a_k b_k)`` when ``round_products``
    (products rounded by the first constants) else the double product (sums by the second)."""
    kp = constants(ipp, upp, fpp)
    ks = constants(ips, ups, fps)
    m, n = A.shape
    p = B.shape[1]
    C = np.empty((m, p))
    for block in prange((m + ROWS - 1) // ROWS):
        i0 = block * ROWS
        i1 = min(m, i0 + ROWS)
        for i in range(i0, i1):
            a = A[i, 0]
            for j in range(p):
                t = a * B[0, j]
                C[i, j] = chop_double(t, kp) if round_products else chop_double(t, ks)
        for kk in range(1, n):
            for i in range(i0, i1):
                a = A[i, kk]
                for j in range(p):
                    t = a * B[kk, j]
                    if round_products:
                        t = chop_double(t, kp)
                    C[i, j] = chop_double(C[i, j] + t, ks)
    return C


@numba.njit(parallel=True, **_jit)
def matmul_blocked(A, B, ipp, upp, fpp, round_products, ips, ups, fps, block_size):
    """Each block of ``block_size`` terms summed recursively, the block sums summed recursively
    in order (as each block ends, its sum joins the running total)."""
    kp = constants(ipp, upp, fpp)
    ks = constants(ips, ups, fps)
    m, n = A.shape
    p = B.shape[1]
    C = np.empty((m, p))
    for block in prange((m + ROWS - 1) // ROWS):
        i0 = block * ROWS
        i1 = min(m, i0 + ROWS)
        partial = np.empty((ROWS, p))
        for kk in range(n):
            position = kk % block_size
            ends = position == block_size - 1 or kk == n - 1
            first_block = kk < block_size
            for i in range(i0, i1):
                a = A[i, kk]
                for j in range(p):
                    t = a * B[kk, j]
                    if position == 0:
                        v = chop_double(t, kp) if round_products else chop_double(t, ks)
                    else:
                        if round_products:
                            t = chop_double(t, kp)
                        v = chop_double(partial[i - i0, j] + t, ks)
                    if not ends:
                        partial[i - i0, j] = v
                    elif first_block:
                        C[i, j] = v
                    else:
                        C[i, j] = chop_double(C[i, j] + v, ks)
    return C


@numba.njit(parallel=True, **_jit)
def matmul_pairwise(A, B, ipp, upp, fpp, round_products, ips, ups, fps):
    """The products summed pairwise level by level: ``y_q = fl(x_{2q} + x_{2q+1})``, an odd last
    term carried over, until one is left (products unrounded, unless ``round_products`` or n = 1,
    as in :mod:`.kernels`)."""
    kp = constants(ipp, upp, fpp)
    ks = constants(ips, ups, fps)
    m, n = A.shape
    p = B.shape[1]
    C = np.empty((m, p))
    for block in prange((m + ROWS - 1) // ROWS):
        i0 = block * ROWS
        i1 = min(m, i0 + ROWS)
        terms = np.empty((n, COLUMNS))
        for j0 in range(0, p, COLUMNS):
            width = min(p, j0 + COLUMNS) - j0
            for i in range(i0, i1):
                for kk in range(n):
                    a = A[i, kk]
                    for j in range(width):
                        t = a * B[kk, j0 + j]
                        if round_products:
                            t = chop_double(t, kp)
                        elif n == 1:
                            t = chop_double(t, ks)
                        terms[kk, j] = t
                length = n
                while length > 1:
                    half = length // 2
                    for q in range(half):  # writes q, reads 2q and 2q + 1 >= q: in place is safe
                        for j in range(width):
                            terms[q, j] = chop_double(terms[2 * q, j] + terms[2 * q + 1, j], ks)
                    if length % 2:
                        for j in range(width):
                            terms[half, j] = terms[length - 1, j]
                    length = half + length % 2
                for j in range(width):
                    C[i, j0 + j] = terms[0, j]
    return C
