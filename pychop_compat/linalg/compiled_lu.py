"""Compiled chopped LU factorization (Numba), imported by :mod:`pychop_compat.linalg.lu` on first use.

The same elimination as the NumPy code of :func:`pychop_compat.linalg.lu`
(right-looking, ``kij``, partial pivoting), with the same roundings: at step
``k`` the row of the first largest ``|a_ik|`` (a NaN first, as
:func:`numpy.argmax`) is swapped into row ``k``; a zero pivot skips the step;
then for every row ``i > k`` the multiplier ``l_ik = fl(a_ik / a_kk)`` and the
row ``a_ij = fl(a_ij - fl(l_ik a_kj))``, ``j > k``.  Every ``fl`` is
``pychop_compat.engines.numba_kernels.chop_double`` (deterministic rounding,
modes 1-4, no bit flips: each element depends only on its own operations, so
the rows of a step may be updated in any order and on any thread, with the
bits of the NumPy code).

A row is first rounded by the branch-free loop on bit patterns
(``numba_kernels.fast_bits``, which LLVM vectorises) into a scratch row; only
a row holding a value that loop cannot round (zero, near the format's range
limits, Inf, NaN) is gone over again by ``chop_double``, one value at a time.
Steps with a large trailing matrix update its rows on Numba's threads; the
last steps (fewer than ``PARALLEL_ROWS`` rows left) run on one thread in one
call.
"""

from __future__ import annotations

import math

import numba
import numpy as np
from numba import prange

from ..engines.numba_kernels import (bits_of_double, chop_double, constants, double_of_bits, fast_bits,
                                     fast_constants, irregular)

__all__ = ["factor", "PARALLEL_ROWS", "ROWS"]

#: Steps whose trailing matrix has at least this many rows share them out over the threads.
PARALLEL_ROWS = 192
#: Rows per task of a parallel step.
ROWS = 16

_jit = dict(cache=True, nogil=True, error_model="numpy")


@numba.njit(**_jit)
def _pivot_and_swap(a, perm, k):
    """Swap the row of the first largest ``|a_ik|``, ``i >= k`` (the first NaN if any), into row ``k``."""
    n = a.shape[0]
    piv = k
    best = abs(a[k, k])
    if not math.isnan(best):
        for i in range(k + 1, n):
            v = abs(a[i, k])
            if math.isnan(v):
                piv = i
                break
            if v > best:
                best = v
                piv = i
    if piv != k:
        for j in range(n):
            a[k, j], a[piv, j] = a[piv, j], a[k, j]
        perm[k], perm[piv] = perm[piv], perm[k]


@numba.njit(**_jit)
def _eliminate_rows(a, k, first, last, scratch, kc, fc):
    """Rows ``first:last`` (all > k): ``a_ik = fl(a_ik / a_kk)``, then
    ``a_ij = fl(a_ij - fl(a_ik a_kj))`` for ``j > k``."""
    n = a.shape[0]
    pivot = a[k, k]
    start = np.uint64(k + 1)
    stop = np.uint64(n)
    for i in range(first, last):
        l = chop_double(a[i, k] / pivot, kc)
        a[i, k] = l
        special = 0
        for j in range(start, stop):
            tb = bits_of_double(l * a[k, j])
            ub = bits_of_double(a[i, j] - double_of_bits(fast_bits(tb, fc)))
            special += irregular(tb, fc) + irregular(ub, fc)
            scratch[j] = double_of_bits(fast_bits(ub, fc))
        if special:  # redo the values the branch-free loop cannot round (a[i] is still unchanged)
            for j in range(start, stop):
                tb = bits_of_double(l * a[k, j])
                ub = bits_of_double(a[i, j] - double_of_bits(fast_bits(tb, fc)))
                if irregular(tb, fc) + irregular(ub, fc):
                    scratch[j] = chop_double(a[i, j] - chop_double(l * a[k, j], kc), kc)
        for j in range(start, stop):
            a[i, j] = scratch[j]


@numba.njit(**_jit)
def _serial_steps(a, perm, first, ip, up, fp, rp, info):
    """Steps ``first .. n-1`` on one thread; returns LAPACK's ``info`` (``info`` so far given)."""
    kc, fc = constants(ip, up, fp), fast_constants(ip, up, rp)
    n = a.shape[0]
    scratch = np.empty(n)
    for k in range(first, n):
        _pivot_and_swap(a, perm, k)
        if a[k, k] == 0.0:
            if info == 0:
                info = k + 1
            continue
        _eliminate_rows(a, k, k + 1, n, scratch, kc, fc)
    return info


@numba.njit(parallel=True, **_jit)
def _parallel_step(a, perm, k, ip, up, fp, rp):
    """Step ``k`` with the rows of the trailing matrix on Numba's threads; False for a zero pivot."""
    kc, fc = constants(ip, up, fp), fast_constants(ip, up, rp)
    n = a.shape[0]
    _pivot_and_swap(a, perm, k)
    if a[k, k] == 0.0:
        return False
    rows = n - k - 1
    for task in prange((rows + ROWS - 1) // ROWS):
        scratch = np.empty(n)
        first = k + 1 + task * ROWS
        _eliminate_rows(a, k, first, min(n, first + ROWS), scratch, kc, fc)
    return True


def factor(a: np.ndarray, rounding: tuple) -> tuple:
    """Factorize ``a`` (float64, square, already rounded to the format) in place.

    Parameters
    ----------
    a : ndarray
        C-contiguous float64 ``n x n`` matrix; on return it holds ``L`` below
        the diagonal (unit diagonal implied) and ``U`` on and above it.
    rounding : tuple
        The constant arrays ``(ip, up, fp, rp)`` of
        :func:`pychop_compat.engines.compiled.rounding_constants` for the
        format and a deterministic mode (1-4) without flips.

    Returns
    -------
    perm : ndarray of int
        The row permutation, ``A[perm] = L U``.
    info : int
        0, or ``k`` for the first zero pivot ``U[k-1, k-1]``.
    """
    ip, up, fp, rp = rounding
    n = a.shape[0]
    perm = np.arange(n)
    info = 0
    k = 0
    while k < n and n - k - 1 >= PARALLEL_ROWS:
        if not _parallel_step(a, perm, k, ip, up, fp, rp) and info == 0:
            info = k + 1
        k += 1
    return perm, int(_serial_steps(a, perm, k, ip, up, fp, rp, info))
