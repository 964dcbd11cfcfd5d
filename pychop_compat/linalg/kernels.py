"""Chopped kernels: :func:`dot`, :func:`matvec`, :func:`matmul` (every operation rounded)."""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from ._common import OptionsLike, _float_array, _ieee, _make_rounder, _matmul_matrices


def _sum_recursive(A, B, rprod, rsum, block_size):
    s = A[:, :1] * B[:1, :]
    s = rprod(s) if rprod is not None else rsum(s)
    for k in range(1, A.shape[1]):
        t = A[:, k : k + 1] * B[k : k + 1, :]
        if rprod is not None:
            t = rprod(t)
        s = rsum(s + t)
    return s


def _outer_terms(A, B, idx):
    """Products ``A[:, k] * B[k, :]`` for ``k`` in ``idx``, stacked (len(idx), m, p)."""
    return A[:, idx].T[:, :, None] * B[idx, :][:, None, :]


def _sum_pairwise(A, B, rprod, rsum, block_size):
    n = A.shape[1]
    terms = _outer_terms(A, B, np.arange(n))
    terms = rprod(terms) if rprod is not None else (rsum(terms) if n == 1 else terms)
    while terms.shape[0] > 1:
        h = terms.shape[0] // 2
        pairs = rsum(terms[0 : 2 * h : 2] + terms[1 : 2 * h : 2])
        terms = np.concatenate([pairs, terms[2 * h :]]) if terms.shape[0] % 2 else pairs
    return terms[0]


def _sum_blocked(A, B, rprod, rsum, block_size):
    n = A.shape[1]
    b = int(block_size)
    if b < 1:
        raise ValueError("block_size must be a positive integer")
    nblocks = -(-n // b)
    S = None
    for j in range(min(b, n)):
        cnt = -(-(n - j) // b)  # blocks that have a j-th element: a prefix
        t = _outer_terms(A, B, np.arange(cnt) * b + j)
        if j == 0:
            S = rprod(t) if rprod is not None else rsum(t)
        else:
            if rprod is not None:
                t = rprod(t)
            S[:cnt] = rsum(S[:cnt] + t)
    s = S[0]
    for i in range(1, nblocks):
        s = rsum(s + S[i])
    return s


_SUMMERS = {
    "recursive": _sum_recursive,
    "fma": _sum_recursive,
    "pairwise": _sum_pairwise,
    "blocked": _sum_blocked,
}

#: Products (8 MiB) the NumPy pairwise and blocked paths hold at once (columns of C in groups).
TERM_BUDGET = 1 << 20


def _deterministic(rounder) -> bool:
    """Whether a rounder (or None: no rounding) draws no random numbers."""
    if rounder is None:
        return True
    o = rounder.options
    return int(o.round) <= 4 and not o.flip


def _compiled_specs(A, rprod, rsum):
    """``(product spec or None, sum spec)`` when the compiled kernels can compute the product:
    Numba in use, double data, deterministic rounding that is not the identity, chop.m's
    semantics; else None."""
    from ..kernels import compiled
    from ..matlab.options import resolve

    if A.dtype != np.float64 or not compiled.wanted():
        return None
    if not (_deterministic(rprod) and _deterministic(rsum)):
        return None
    if any(getattr(r, "identity_for_double", False) for r in (rprod, rsum)):
        return None  # no rounding at all (double format): chop_double would turn -0 into +0
    specs = [resolve(r.options, None, "double").spec if r is not None else None for r in (rprod, rsum)]
    if any(getattr(spec, "extended", False) for spec in specs if spec is not None):
        return None
    return specs


def _compiled_spec(A, rounder):
    """The spec of ``rounder`` when compiled code may round ``A``'s operations with it (see
    :func:`_compiled_specs`; used by the compiled LU), else None."""
    specs = _compiled_specs(A, None, rounder)
    return None if specs is None else specs[1]


def _compiled_product(method, A, B, product_spec, sum_spec, block_size):
    from ..kernels import compiled
    from ..kernels import numba_linalg

    sums = compiled.rounding_constants(sum_spec, np.float64)
    products = compiled.rounding_constants(product_spec or sum_spec, np.float64)
    rounds_products = product_spec is not None
    A = np.ascontiguousarray(A)
    B = np.ascontiguousarray(B)
    with numba_linalg.tasks_one_at_a_time():
        if method == "pairwise":
            return numba_linalg.matmul_pairwise(A, B, *products, rounds_products, *sums)
        if method == "blocked":
            return numba_linalg.matmul_blocked(A, B, *products, rounds_products, *sums, int(block_size))
        return numba_linalg.matmul_recursive(A, B, *products, rounds_products, *sums)


def _product(method, A, B, rprod, rsum, block_size):
    """``A @ B`` by ``method`` with O(m p + block) extra memory (see :func:`matmul`'s notes)."""
    specs = _compiled_specs(A, rprod, rsum)
    if specs is not None:
        return _compiled_product(method, A, B, specs[0], specs[1], block_size)
    summer = _SUMMERS[method]
    (m, n), p = A.shape, B.shape[1]
    if method in ("recursive", "fma") or p == 1:
        return summer(A, B, rprod, rsum, block_size)
    if _deterministic(rprod) and _deterministic(rsum):
        # Each element of C depends on its own operations only: columns in groups give the same bits.
        width = max(1, TERM_BUDGET // max(1, n * m))
    else:
        width = 1  # random numbers: one column at a time, a rule that does not depend on sizes
    if width >= p:
        return summer(A, B, rprod, rsum, block_size)
    C = np.empty((m, p), A.dtype)
    for j in range(0, p, width):
        C[:, j:j + width] = summer(A, B[:, j:j + width], rprod, rsum, block_size)
    return C


@_ieee
def matmul(
    A: ArrayLike,
    B: ArrayLike,
    options: OptionsLike = None,
    *,
    method: str = "recursive",
    accumulate: OptionsLike = None,
    block_size: int = 32,
) -> np.ndarray:
    """Matrix product ``A @ B`` in simulated precision.

    Parameters
    ----------
    A, B : array_like
        Operands of shapes ``(m, n)`` and ``(n, p)``; 1-D operands are promoted
        as by :func:`numpy.matmul` (the promoted axis is removed from the result).
    options : chop options, str or None, optional
        Format and rounding of every operation (``None``: the persistent chop
        options).  ``A`` and ``B`` are first rounded to this format.
    method : {'recursive', 'fma', 'pairwise', 'blocked'}, optional
        How each inner product ``sum_k a_k b_k`` (``a_k = A[i, k]``,
        ``b_k = B[k, j]``) is evaluated, with ``fl`` one chop call:

        ``'recursive'`` (default)
            ``s = fl(a_1 b_1)``; ``s = fl(s + fl(a_k b_k))`` for ``k = 2..n``.
        ``'fma'``
            Fused multiply-add: ``s = fl(a_1 b_1)``; ``s = fl(s + a_k b_k)``,
            one rounding per step (``s + a_k b_k`` formed in double, as
            MATLAB's ``chop(s + a*b)``).
        ``'pairwise'``
            Products ``fl(a_k b_k)`` are summed pairwise (Higham, *Accuracy and
            Stability*, sec. 4.1): ``y_i = fl(x_{2i-1} + x_{2i})``, an odd last
            term carried over unchanged, repeated until one term is left.
        ``'blocked'``
            The terms are split into consecutive blocks of ``block_size``; each
            block is summed recursively, then the block sums are summed
            recursively in order.
    accumulate : chop options, str or None, optional
        Tensor-core style mixed precision: if given, ``A`` and ``B`` are
        rounded to ``options`` (format A), the products are formed *exactly* in
        double (not rounded; exact when the significands of format A have at
        most 26 bits) and every addition is rounded to ``accumulate`` (format B),
        in the order of ``method`` (a sum with a single term is that term rounded
        to B; ``'fma'`` is then the same as ``'recursive'``).
    block_size : int, optional
        Block size for ``method='blocked'`` (default 32).

    Returns
    -------
    ndarray
        The product, of the floating type of the inputs (double for integer or
        double inputs, single for single inputs).

    Notes
    -----
    The loop runs over the inner index ``k`` only; each step updates all
    ``m * p`` outputs at once.  Order of chop calls (and so of random draws):
    ``A`` then ``B`` (input rounding); then for ``'recursive'``: for each
    ``k``, the ``m x p`` products, then the ``m x p`` sums; ``'fma'``: one call
    per ``k``; ``'pairwise'``: one call on all products, stacked as an
    ``(n, m, p)`` array, then one call per level; ``'blocked'``: for each
    position ``j`` within a block, the products of all blocks having a ``j``-th
    term (stacked ``(blocks, m, p)``) then their sums, followed by one call per
    block-sum addition.  With stochastic rounding or bit flips, ``'pairwise'``
    and ``'blocked'`` (``p > 1``) make these calls for one column of ``C`` at a
    time, column after column (the calls of ``matvec(A, B[:, j])``), so that
    they never hold more than ``n * m`` products.

    Memory and speed: every method needs O(n^2 + block) memory besides its
    operands and result.  With deterministic rounding (modes 1-4, no flips)
    and double data, and Numba installed (:mod:`pychop_compat.kernels.compiled`),
    compiled kernels do every operation with the compiled engine's rounding
    (same results bit for bit); otherwise ``'pairwise'`` and ``'blocked'``
    work on groups of columns of ``C`` holding at most ``TERM_BUDGET``
    products (same results: each element of ``C`` depends only on its own
    operations).

    Error bounds for round to nearest with unit roundoff ``u`` (Higham,
    ch. 3-4), ``gamma_k = k u / (1 - k u)``: ``|C - AB| <= gamma_n |A||B|``
    (``'recursive'``, ``'fma'``), ``gamma_{ceil(log2 n) + 1}`` (``'pairwise'``),
    ``gamma_{b + ceil(n/b) - 1}`` (``'blocked'``, ``b = block_size``).

    Examples
    --------
    >>> import numpy as np
    >>> from pychop_compat import linalg
    >>> x = np.full(4096, 1.0)
    >>> float(linalg.dot(x, x, 'h'))            # fp16 stagnates at 2048
    2048.0
    >>> float(linalg.dot(x, x, 'h', method='pairwise'))
    4096.0
    >>> float(linalg.dot(x, x, 'h', accumulate='s'))   # fp16 inputs, fp32 sums
    4096.0
    """
    A2, B2, a_vec, b_vec = _matmul_matrices(_float_array(A, B), _float_array(B, A), method, block_size)

    rin = _make_rounder(options)
    if accumulate is None:
        rsum = rin
        rprod = None if method == "fma" else rin
    else:
        rsum = _make_rounder(accumulate)
        rprod = None
    A2 = rin(A2)
    B2 = rin(B2)
    (m, n), p = A2.shape, B2.shape[1]
    plain = A2.dtype == np.float64 and all(
        getattr(r, "identity_for_double", False) for r in (rsum, rprod) if r is not None)
    if n == 0:
        C = np.zeros((m, p), dtype=A2.dtype)
    elif plain and method in ("recursive", "fma") and n * m * p <= 2**22:
        # plain double: np.add.accumulate is sequential, i.e. recursive summation
        C = np.add.accumulate(_outer_terms(A2, B2, np.arange(n)), axis=0)[-1]
    else:
        C = _product(method, A2, B2, rprod, rsum, block_size)
    if a_vec:
        C = C[0]
    if b_vec:
        C = C[..., 0]
    return C


def matvec(A: ArrayLike, x: ArrayLike, options: OptionsLike = None, **kwargs: Any) -> np.ndarray:
    """Matrix-vector product ``A @ x`` in simulated precision.

    Same as :func:`matmul` (``x`` 1-D); ``kwargs`` are ``method``,
    ``accumulate`` and ``block_size``.
    """
    x = np.asarray(x)
    if x.ndim != 1:
        raise ValueError("x must be 1-D")
    return matmul(A, x, options, **kwargs)


def dot(x: ArrayLike, y: ArrayLike, options: OptionsLike = None, **kwargs: Any) -> np.floating:
    """Inner product ``x @ y`` of two vectors in simulated precision.

    Same as :func:`matmul` on 1-D operands; returns a NumPy scalar.
    """
    x, y = np.asarray(x), np.asarray(y)
    if x.ndim != 1 or y.ndim != 1:
        raise ValueError("x and y must be 1-D")
    return matmul(x, y, options, **kwargs)[()]
