"""Householder QR factorization in simulated low precision, as the research codes run it."""

from __future__ import annotations

from typing import Tuple

import numpy as np
from numpy.typing import ArrayLike

from .arrays import HOST, host_computed
from .common import Rounder

__all__ = ["house_qr_lp"]


def _reflect(u: np.ndarray, x: np.ndarray, rounded: Rounder) -> np.ndarray:
    """The code's ``H(u, x) = chop(x - chop(u * hgemm(u', x)))``: ``hgemm`` adds the products
    ``chop(u_i x_i,:)`` of the rounded operands row after row, rounding each partial sum."""
    u_rounded, x_rounded = rounded(u), rounded(x)
    row = np.zeros(x.shape[1])
    for i in range(u.shape[0]):
        row = rounded(row + rounded(u_rounded[i] * x_rounded[i]))
    return rounded(x - rounded(np.outer(u, row)))


def _house_gen(x: np.ndarray, rounded: Rounder) -> np.ndarray:
    """The code's ``house_gen``: the reflector ``u`` with ``H(u, x) = -+ norm(x) e_1``, the norm
    formed from ``x / max|x_i|`` by the rounded inner product of ``ip_chop``."""
    largest = np.fmax.reduce(np.abs(x))  # MATLAB's max: NaN ignored
    x1 = rounded(x / largest)
    square = np.zeros(1)
    for xi in x1:
        square = rounded(square + rounded(np.array([xi * xi])))
    nu = rounded(largest * rounded(np.sqrt(square)))[0]
    if nu == 0:
        u = x.copy()
        u[0] = rounded(np.sqrt(np.array([2.0])))[0]
        return u
    u = rounded(x / nu)
    u[0] = rounded(np.array([u[0] + np.sign(u[0]) + (u[0] == 0)]))[0]  # sign(0) taken as 1
    return rounded(u / np.sqrt(np.abs(u[0])))


@host_computed
def house_qr_lp(A: ArrayLike, flag: int = 1, format: str = "h") -> Tuple[np.ndarray, np.ndarray]:
    """The research codes' ``house_qr_lp``: Householder QR factorization in fp16.

    For ``j = 1 .. n``: the reflector ``u`` of column ``j`` (``house_gen``: ``x / max|x_i|``
    rounded, its norm by a rounded inner product, ``u = chop(x / nu)``, ``u_1 = chop(u_1 +
    sign(u_1))`` with ``sign(0) = 1``, ``u = chop(u / sqrt|u_1|)``) is applied to the trailing
    block as ``chop(X - chop(u * hgemm(u', X)))`` (``hgemm``: a row of rounded partial sums,
    one row of ``X`` at a time) and the entries below the diagonal are set to 0; ``Q`` is the
    reflectors applied to the identity, last first.  The algorithm of ``house_qr_lp.m`` (with
    ``hgemm.m`` and ``ip_chop.m``) in github.com/SrikaraPranesh/Multi_precision_NLA_kernels
    (commit fb3a2d7, 2021-02-16; the QR factorization of its least-squares refinement codes),
    bit for bit as GNU Octave runs it with ``chop.m`` of github.com/higham/chop (commit
    906c31e) (``tests/data/research_linalg``).  ``A`` is not rounded first (the first block
    update subtracts from ``A`` as given).

    Parameters
    ----------
    A : array_like
        Real ``m x n`` matrix with ``m >= n``.
    flag : {1, 0}, optional
        1 (default): full ``Q`` (``m x m``) and ``R`` (``m x n``); 0: economy ``Q`` (``m x n``)
        and ``R`` (``n x n``).
    format : {'h'}, optional
        fp16 only: the code's helpers ``hgemm`` and ``ip_chop``, called without a format, set
        chop's format back to fp16, so another format would round only the code's first
        operation in that format.

    Returns
    -------
    Q : ndarray
        Orthogonal up to rounding, ``Q @ R = A`` up to rounding.
    R : ndarray
        Upper triangular.

    Raises
    ------
    ValueError
        ``'Matrix must have more rows than columns'`` (the code's message) for ``m < n``;
        for a ``flag`` other than 0 or 1 or a format other than ``'h'``.

    Examples
    --------
    >>> import numpy as np
    >>> from pychop_compat import linalg
    >>> Q, R = linalg.house_qr_lp(np.array([[3.0, 1.0], [4.0, 2.0], [0.0, 2.0]]), 0)
    >>> R.tolist()
    [[-4.9921875, -2.19921875], [0.0, -2.041015625]]
    """
    R = np.array(A, dtype=np.float64, order="C")  # a copy, R in the end (C order: the compiled kernel's)
    if R.ndim != 2:
        raise ValueError("house_qr_lp needs a matrix")
    if format != "h":
        raise ValueError("house_qr_lp runs in fp16 only ('h'), as the code's helpers do")
    if flag not in (0, 1):
        raise ValueError(f"flag must be 0 or 1, got {flag!r}")
    if R.shape[0] < R.shape[1]:
        raise ValueError("Matrix must have more rows than columns")
    return house_qr_rounded(R, flag, Rounder({"format": "h"}, HOST))


def house_qr_rounded(R: np.ndarray, flag: int, rounded: Rounder) -> Tuple[np.ndarray, np.ndarray]:
    """The steps of :func:`house_qr_lp` with every result rounded by ``rounded`` (any chop
    options): the factorization of :func:`~pychop_compat.linalg.ls_ir`, whose ``uf`` may round
    otherwise than to nearest.

    Parameters
    ----------
    R : ndarray
        Real float64 C-ordered ``m x n`` matrix, ``m >= n``, overwritten by the factor (not checked:
        :func:`house_qr_lp` checks and copies its input).
    flag : {1, 0}
        As :func:`house_qr_lp`'s.
    rounded : Rounder
        The rounding of each operation's result.

    Returns
    -------
    Q, R
        As :func:`house_qr_lp`'s.
    """
    m, n = R.shape
    from ..kernels import compiled

    spec = rounded.kernel_spec("float64")
    Q = np.eye(m) if flag == 1 else np.eye(m, n)
    if spec is not None and compiled.wanted() and n:  # the same roundings, compiled
        from ..kernels.numba_lu import house_qr

        house_qr(R, Q, compiled.rounding_constants(spec, np.float64))
        return Q, (R if flag == 1 else R[:n, :n])
    reflectors = np.zeros((m, n))
    with np.errstate(all="ignore"):  # Inf and NaN propagate, as in the code
        for j in range(n):
            u = _house_gen(R[j:, j], rounded)
            reflectors[j:, j] = u
            R[j:, j:] = _reflect(u, R[j:, j:], rounded)
            R[j + 1:, j] = 0.0
        for j in range(n - 1, -1, -1):
            Q = _reflect(reflectors[:, j], Q, rounded)
    return Q, (R if flag == 1 else R[:n, :n])
