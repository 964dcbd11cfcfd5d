"""Compiled chopped LU, Cholesky and Householder QR factorizations (Numba), imported by
:mod:`pychop_compat.linalg` on first use.

The elimination of :func:`pychop_compat.linalg.lu` (right-looking, ``kij``, the first
largest ``|a_ik|`` as pivot, a NaN first; a zero pivot skips the step) with its
roundings ``l_ik = fl(a_ik / a_kk)``, ``a_ij = fl(a_ij - fl(l_ik a_kj))`` by
``numba_kernels.chop_double`` (modes 1-4, no flips), rows rounded as in
:mod:`.numba_linalg`, in panels of ``PANEL`` columns (one pass per panel).  The Cholesky
factorization of :func:`pychop_compat.linalg.chol_lp` shares the row update; the QR of
:func:`pychop_compat.linalg.house_qr_lp` rounds each operation by ``chop_double``.
"""

from __future__ import annotations

import math

import numba
import numpy as np
from numba import prange

from .numba_kernels import (INLINE_OPTIONS, JIT_OPTIONS, bits_of_double, chop_double, constants, double_of_bits,
                            fast_bits, fast_constants, irregular, lock_kernel_caches, nearest_only)
from .numba_linalg import regular_bits, tasks_one_at_a_time

__all__ = ["factor", "cholesky", "house_qr", "PANEL", "PARALLEL_BELOW", "ROWS"]

#: Columns per panel: the steps of a panel reach the rows below it in one pass (one thread launch).
PANEL = 32
#: Trailing matrices with fewer elements than this are updated on one thread.
PARALLEL_BELOW = 1 << 16
#: Rows per task of a parallel trailing update.
ROWS = 8


@numba.njit(**JIT_OPTIONS)
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


@numba.njit(**INLINE_OPTIONS)  # inlined: a call per row cost LU 10-20% at n = 300
def _row_update(a, i, l, k, first, last, scratch, kc, fc):
    """``a_ij = fl(a_ij - fl(l a_kj))`` for ``j`` in ``first:last``, through ``scratch``."""
    start = np.uint64(first)
    stop = np.uint64(last)
    special = 0
    near = nearest_only(fc)
    for j in range(start, stop):
        tb = bits_of_double(l * a[k, j])
        ub = bits_of_double(a[i, j] - double_of_bits(regular_bits(tb, fc, near)))
        special += irregular(tb, fc) + irregular(ub, fc)
        scratch[j] = double_of_bits(regular_bits(ub, fc, near))
    if special:
        for j in range(start, stop):
            tb = bits_of_double(l * a[k, j])
            ub = bits_of_double(a[i, j] - double_of_bits(fast_bits(tb, fc)))
            if irregular(tb, fc) + irregular(ub, fc):
                scratch[j] = chop_double(a[i, j] - chop_double(l * a[k, j], kc), kc)
    for j in range(start, stop):
        a[i, j] = scratch[j]


@numba.njit(**JIT_OPTIONS)
def _panel(a, perm, k0, k1, skipped, info, ip, up, fp, rp):
    """Steps ``k0:k1`` on the panel's columns (every row below ``k0``), then on the rows of the
    panel right of it; returns ``info``.  ``skipped[k]``: step ``k`` had a zero pivot."""
    kc, fc = constants(ip, up, fp), fast_constants(ip, up, rp)
    n = a.shape[0]
    scratch = np.empty(n)
    for k in range(k0, k1):
        _pivot_and_swap(a, perm, k)
        pivot = a[k, k]
        skipped[k] = pivot == 0.0
        if skipped[k]:
            if info == 0:
                info = k + 1
            continue
        for i in range(k + 1, n):
            a[i, k] = chop_double(a[i, k] / pivot, kc)
            _row_update(a, i, a[i, k], k, k + 1, k1, scratch, kc, fc)
    for k in range(k0, k1):  # the panel's rows right of the panel: U's block row, step by step
        if not skipped[k]:
            for i in range(k + 1, k1):
                _row_update(a, i, a[i, k], k, k1, n, scratch, kc, fc)
    return info


@numba.njit(**JIT_OPTIONS)
def _trailing_rows(a, k0, k1, first, last, skipped, scratch, kc, fc, cholesky):
    """Rows ``first:last`` below the panel: the panel's steps in order, right of the panel (LU)
    or on and right of the diagonal (Cholesky, whose multipliers are in the panel's rows)."""
    n = a.shape[0]
    for i in range(first, last):
        for k in range(k0, k1):
            if cholesky or not skipped[k]:
                multiplier, start = (a[k, i], i) if cholesky else (a[i, k], k1)
                _row_update(a, i, multiplier, k, start, n, scratch, kc, fc)


@numba.njit(**JIT_OPTIONS)
def _trailing_serial(a, k0, k1, skipped, ip, up, fp, rp, cholesky):
    kc, fc = constants(ip, up, fp), fast_constants(ip, up, rp)
    n = a.shape[0]
    _trailing_rows(a, k0, k1, k1, n, skipped, np.empty(n), kc, fc, cholesky)


@numba.njit(parallel=True, **JIT_OPTIONS)
def _trailing_parallel(a, k0, k1, skipped, ip, up, fp, rp, cholesky):
    kc, fc = constants(ip, up, fp), fast_constants(ip, up, rp)
    n = a.shape[0]
    for task in prange((n - k1 + ROWS - 1) // ROWS):
        first = k1 + task * ROWS
        _trailing_rows(a, k0, k1, first, min(n, first + ROWS), skipped, np.empty(n), kc, fc, cholesky)


def _update_trailing(a: np.ndarray, k0: int, k1: int, skipped: np.ndarray, rounding: tuple, cholesky: bool) -> None:
    """The rows below the panel ``k0:k1``, on Numba's threads unless the trailing matrix is small."""
    n = a.shape[0]
    update = _trailing_parallel if (n - k1) ** 2 >= PARALLEL_BELOW else _trailing_serial
    update(a, k0, k1, skipped, *rounding, cholesky)


def factor(a: np.ndarray, rounding: tuple) -> tuple:
    """Factorize ``a`` (float64, square, already rounded to the format) in place, by panels of
    ``PANEL`` columns (each element's operations in the order of the unblocked elimination).

    Parameters
    ----------
    a : ndarray
        C-contiguous float64 ``n x n``; on return ``L`` below the diagonal (unit diagonal
        implied) and ``U`` on and above it.
    rounding : tuple
        :func:`.compiled.rounding_constants` of a deterministic mode (1-4) without flips.

    Returns
    -------
    perm : ndarray of int
        The row permutation, ``A[perm] = L U``.
    info : int
        0, or ``k`` for the first zero pivot ``U[k-1, k-1]``.
    """
    n = a.shape[0]
    perm = np.arange(n)
    skipped = np.zeros(n, np.bool_)
    info = 0
    with tasks_one_at_a_time():
        for k0 in range(0, n, PANEL):
            k1 = min(n, k0 + PANEL)
            info = int(_panel(a, perm, k0, k1, skipped, info, *rounding))
            if k1 == n:
                break
            _update_trailing(a, k0, k1, skipped, rounding, False)
    return perm, info


@numba.njit(**JIT_OPTIONS)
def _cholesky_panel(a, k0, k1, ip, up, fp, rp):
    """Steps ``k0:k1`` on the panel's rows (``a_kk = fl(sqrt(a_kk))``, ``a_kj = fl(a_kj / a_kk)``,
    then ``a_ij = fl(a_ij - fl(a_ki a_kj))`` on the rows below ``k`` in the panel); False at a
    pivot ``a_kk <= 0``."""
    kc, fc = constants(ip, up, fp), fast_constants(ip, up, rp)
    n = a.shape[0]
    scratch = np.empty(n)
    for k in range(k0, k1):
        if a[k, k] <= 0.0:  # a NaN pivot goes on, as in the research code
            return False
        a[k, k] = chop_double(math.sqrt(a[k, k]), kc)
        for j in range(k + 1, n):
            a[k, j] = chop_double(a[k, j] / a[k, k], kc)
        for i in range(k + 1, k1):
            _row_update(a, i, a[k, i], k, i, n, scratch, kc, fc)
    return True


@numba.njit(**JIT_OPTIONS)
def _cholesky_serial(a, ip, up, fp, rp):
    """:func:`cholesky` of a small matrix in one call on one thread."""
    no_skips = np.zeros(a.shape[0], np.bool_)
    for k0 in range(0, a.shape[0], PANEL):
        k1 = min(a.shape[0], k0 + PANEL)
        if not _cholesky_panel(a, k0, k1, ip, up, fp, rp):
            return 1
        _trailing_serial(a, k0, k1, no_skips, ip, up, fp, rp, True)
    return 0


def cholesky(a: np.ndarray, rounding: tuple) -> int:
    """The steps of :func:`pychop_compat.linalg.chol_lp` on ``a`` in place, by panels of ``PANEL``
    rows, each element's operations in the order of the unblocked algorithm.

    The research code updates the whole trailing block; only its upper triangle is ever read
    (pivots, rows of the factor), so only that is computed here.

    Parameters
    ----------
    a : ndarray
        C-contiguous float64 ``n x n``, symmetric and already rounded to the format; on return
        the factor on and above the diagonal (below it: the input, the caller takes the upper
        triangle).
    rounding : tuple
        :func:`.compiled.rounding_constants` of round to nearest without flips.

    Returns
    -------
    int
        0, or 1 when a pivot ``a_kk <= 0`` appeared.
    """
    n = a.shape[0]
    if n * n < PARALLEL_BELOW:
        return int(_cholesky_serial(a, *rounding))
    no_skips = np.zeros(n, np.bool_)
    with tasks_one_at_a_time():
        for k0 in range(0, n, PANEL):
            k1 = min(n, k0 + PANEL)
            if not _cholesky_panel(a, k0, k1, *rounding):
                return 1
            _update_trailing(a, k0, k1, no_skips, rounding, True)
    return 0


# --- Householder QR (house_qr_lp) ----------------------------------------------------------------

@numba.njit(**JIT_OPTIONS)
def _reflect(u, x, kc):
    """``x = fl(x - fl(u * row))`` in place, ``row`` the rounded partial sums
    ``fl(row + fl(fl(u_i) fl(x_i,:)))`` taken one row of ``x`` after another."""
    m, n = x.shape
    row = np.zeros(n)
    for i in range(m):
        ui = chop_double(u[i], kc)
        for j in range(n):
            row[j] = chop_double(row[j] + chop_double(ui * chop_double(x[i, j], kc), kc), kc)
    for i in range(m):
        for j in range(n):
            x[i, j] = chop_double(x[i, j] - chop_double(u[i] * row[j], kc), kc)


@numba.njit(**JIT_OPTIONS)
def _house_gen(x, u, kc):
    """The reflector of ``x`` into ``u`` (same length), as ``linalg.qr``'s ``_house_gen``."""
    largest = np.nan
    for v in x:  # MATLAB's max: NaN ignored (all NaN: NaN)
        if not math.isnan(v) and (math.isnan(largest) or abs(v) > largest):
            largest = abs(v)
    square = 0.0
    for v in x:
        xi = chop_double(v / largest, kc)
        square = chop_double(square + chop_double(xi * xi, kc), kc)
    nu = chop_double(largest * chop_double(math.sqrt(square), kc), kc)
    if nu == 0.0:
        u[:] = x
        u[0] = chop_double(math.sqrt(2.0), kc)
        return
    for i in range(x.shape[0]):
        u[i] = chop_double(x[i] / nu, kc)
    first = u[0]
    sign = 1.0 if first > 0.0 else (-1.0 if first < 0.0 else (0.0 if first == 0.0 else np.nan))
    u[0] = chop_double(first + sign + (1.0 if first == 0.0 else 0.0), kc)  # sign(0) taken as 1
    scale = math.sqrt(abs(u[0]))
    for i in range(x.shape[0]):
        u[i] = chop_double(u[i] / scale, kc)


@numba.njit(**JIT_OPTIONS)
def _house_qr(R, Q, reflectors, ip, up, fp):
    kc = constants(ip, up, fp)
    m, n = R.shape
    for j in range(n):
        _house_gen(R[j:, j].copy(), reflectors[j:, j], kc)
        block = R[j:, j:].copy()
        _reflect(reflectors[j:, j], block, kc)
        R[j:, j:] = block
        R[j + 1:, j] = 0.0
    for j in range(n - 1, -1, -1):
        _reflect(reflectors[:, j].copy(), Q, kc)


def house_qr(a: np.ndarray, Q: np.ndarray, rounding: tuple) -> None:
    """The steps of :func:`pychop_compat.linalg.house_qr_lp` in place: ``a`` (float64 ``m x n``,
    ``m >= n``, as given) becomes ``R``, ``Q`` (the identity, ``m x m`` or ``m x n``) becomes ``Q``.

    Parameters
    ----------
    a, Q : ndarray
        C-contiguous float64.
    rounding : tuple
        :func:`.compiled.rounding_constants` of round to nearest without flips.
    """
    ip, up, fp, _ = rounding
    _house_qr(a, Q, np.zeros(a.shape), ip, up, fp)


lock_kernel_caches(globals())
