"""Mixed-precision linear algebra in simulated low precision.

Kernels (:func:`dot`, :func:`matvec`, :func:`matmul`), LU factorization with
partial pivoting (:func:`lu`), triangular solves (:func:`solve`) and iterative
refinement in three precisions (:func:`lu_ir`, :func:`gmres_ir`), every
floating-point operation rounded by :func:`pychop_compat.chop` semantics.

Conventions
-----------
*Precision arguments.*  Wherever a function takes ``options`` (or ``uf``,
``u``, ``ur``, ``up``, ``accumulate``) it accepts what ``chop`` accepts as
options -- a dict, an :class:`~pychop_compat.Options`, a ``SimpleNamespace`` --
or a format name such as ``'h'`` (shorthand for ``{'format': 'h'}``).
``options=None`` means "the caller's persistent chop options", read with
:func:`~pychop_compat.chop_options` when the function is called.  The kernels
never change the persistent options: they round with a stateless
:class:`~pychop_compat.Chop` built from the options.

*What is rounded.*  Every operation is done in double (in single when all
array inputs are single) and its result is rounded with chop, exactly as the
MATLAB idiom ``s = chop(s + chop(a*b))``.  Array inputs of every kernel are
first rounded to the format ("stored in the format"); this is a no-op, and
draws no random numbers, for data already representable.  The simulation is
therefore the one of chop itself: products of two ``t``-bit numbers are exact in
double when ``2t <= 53``, and rounding the double result of ``+``, ``-``,
``*``, ``/`` or ``sqrt`` once more to ``t`` bits gives the correctly rounded
``t``-bit result for round to nearest when ``2t + 2 <= 53`` (Figueroa's double
rounding theorem; this covers fp8, bfloat16, fp16 and single).  For directed
and stochastic rounding, and for the fused ``method='fma'``, the double
intermediate itself may have been inexact, exactly as for a MATLAB user
calling chop.  For format ``'d'`` the arithmetic is plain double.

*Order of operations and of random draws.*  The order of the chop calls is part
of each function's semantics, because stochastic rounding (``round`` 5 or 6)
consumes random numbers call by call -- from ``options.randfunc`` if given,
else from MATLAB's global stream (:func:`pychop_compat.rng`), the same stream
``chop`` uses -- and inside one call in chop's (MATLAB's column-major) element
order.  Each function documents its sequence of calls; identical inputs,
options and generator state give identical results.  With ``options=None`` the
draws are those of calling ``chop(v)`` with the persistent options in that
order.

*Vectorization.*  Loops run over the inner (reduction or elimination) index
only; each step is one whole-array operation and one chop call, so the results
are identical to the scalar loops they describe, element by element.

*Precisions beyond double.*  Iterative refinement may compute residuals in
"quad" (``ur='q'``): this is simulated with double-double arithmetic (about
106 bits; the residual is then rounded to double).  The backward errors that
:func:`lu_ir` and :func:`gmres_ir` report are measured the same way.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Optional, Union

import numpy as np
from numpy.typing import ArrayLike

__all__ = [
    "dot",
    "matvec",
    "matmul",
    "lu",
    "LUResult",
    "solve",
    "lu_ir",
    "gmres_ir",
    "IRResult",
    "randsvd",
]

OptionsLike = Union[None, str, Mapping[str, Any], Any]
Rounder = Callable[[np.ndarray], np.ndarray]


def _ieee(func):
    """Run ``func`` with NumPy's floating-point warnings off: overflow to
    infinity and NaN are part of the simulated arithmetic, as in MATLAB."""

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        with np.errstate(all="ignore"):
            return func(*args, **kwargs)

    return wrapper


_METHODS = ("recursive", "fma", "pairwise", "blocked")
_DOUBLE_NAMES = ("d", "double", "fp64")
# Residual precision beyond double: simulated with double-double arithmetic.
_EXTENDED_NAMES = ("q", "quad", "quadruple", "fp128", "dd", "double-double")


# ---------------------------------------------------------------------------
# Options and rounders
# ---------------------------------------------------------------------------


def _chop_object(options: OptionsLike):
    """A stateless :class:`~pychop_compat.Chop` for ``options``: anything chop accepts, a
    format name, or ``None`` for the persistent chop options as they are now."""
    from . import Chop, chop_options

    if options is None:
        options = chop_options()
    elif isinstance(options, str):
        options = {"format": options}
    return Chop(options)


def _make_rounder(options: OptionsLike) -> Rounder:
    """A function rounding an array with chop semantics for ``options``.

    Double format with subnormals and no bit flips, applied to double data,
    is the identity (chop returns double input unchanged), so it is
    short-circuited; everything else goes through a stateless
    :class:`~pychop_compat.Chop`.
    """
    ch = _chop_object(options)
    o = ch.options
    if o.format in _DOUBLE_NAMES and o.subnormal != 0 and not o.flip:

        def rnd_double(x: np.ndarray) -> np.ndarray:
            return x if x.dtype == np.float64 else np.asarray(ch(x))

        rnd_double.identity_for_double = True  # type: ignore[attr-defined]
        return rnd_double

    def rnd(x: np.ndarray) -> np.ndarray:
        return np.asarray(ch(x))

    return rnd


def _unit_roundoff(options: OptionsLike) -> float:
    """Unit roundoff ``2**-t`` of the format named by ``options``."""
    if _is_extended(options):
        return 2.0**-106
    return 2.0 ** -int(_chop_object(options).options.params[0])


def _is_extended(options: OptionsLike) -> bool:
    return isinstance(options, str) and options in _EXTENDED_NAMES


def _float_array(x: ArrayLike, *others: ArrayLike) -> np.ndarray:
    """A copy of ``x`` in single if all inputs are single, else in double."""
    x = np.asarray(x)
    single = all(np.asarray(o).dtype == np.float32 for o in (x, *others))
    return x.astype(np.float32 if single else np.float64, copy=True)


# ---------------------------------------------------------------------------
# Kernels: dot, matvec, matmul
# ---------------------------------------------------------------------------


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
    block-sum addition.  ``'pairwise'`` and ``'blocked'`` hold ``n * m * p``
    (resp. ``n/block_size * m * p``) products in memory.

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
    if method not in _SUMMERS:
        raise ValueError(f"method must be one of {_METHODS}, not {method!r}")
    A2 = _float_array(A, B)
    B2 = _float_array(B, A)
    a_vec, b_vec = A2.ndim == 1, B2.ndim == 1
    if a_vec:
        A2 = A2[None, :]
    if b_vec:
        B2 = B2[:, None]
    if A2.ndim != 2 or B2.ndim != 2:
        raise ValueError("matmul operands must be 1-D or 2-D")
    if A2.shape[1] != B2.shape[0]:
        raise ValueError(f"inner dimensions differ: {A2.shape} @ {B2.shape}")

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
        C = _SUMMERS[method](A2, B2, rprod, rsum, block_size)
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


# ---------------------------------------------------------------------------
# LU factorization and triangular solves
# ---------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class LUResult:
    """LU factorization ``P A = L U`` computed by :func:`lu`.

    Attributes
    ----------
    L : ndarray
        Unit lower triangular factor (``n x n``).
    U : ndarray
        Upper triangular factor.
    perm : ndarray of int
        Row permutation, 0-based: ``A[perm] = L @ U`` (up to rounding).
    info : int
        0 if all pivots are nonzero, else ``k`` where ``U[k-1, k-1]`` is the
        first zero pivot (LAPACK's convention); the factorization is then
        complete but ``U`` is singular.

    Notes
    -----
    ``L, U, perm = lu(A)`` unpacks.  ``P`` is MATLAB's permutation matrix
    (``[L, U, P] = lu(A)``, ``P A = L U``); :func:`scipy.linalg.lu` returns its
    transpose (``A = P L U``).
    """

    L: np.ndarray
    U: np.ndarray
    perm: np.ndarray
    info: int = 0

    @property
    def P(self) -> np.ndarray:
        """Permutation matrix with ``P @ A = L @ U``."""
        n = self.perm.size
        P = np.zeros((n, n))
        P[np.arange(n), self.perm] = 1.0
        return P

    def __iter__(self):
        return iter((self.L, self.U, self.perm))


@_ieee
def lu(A: ArrayLike, options: OptionsLike = None) -> LUResult:
    """LU factorization with partial pivoting in simulated precision.

    Right-looking Gaussian elimination (``kij`` form).  At step ``k`` the row
    with the first largest ``|a_ik|``, ``i >= k``, is swapped into row ``k``;
    then the multipliers ``l_ik = fl(a_ik / a_kk)`` and the Schur complement
    ``a_ij = fl(a_ij - fl(l_ik * a_kj))`` are formed for the whole trailing
    submatrix at once.

    Parameters
    ----------
    A : array_like
        Square matrix; it is first rounded to the format (stored in the
        working format of the factorization).
    options : chop options, str or None, optional
        Format and rounding (``None``: the persistent chop options).

    Returns
    -------
    LUResult
        ``L``, ``U``, ``perm`` (``A[perm] = L @ U``), ``P`` and ``info``.

    Notes
    -----
    Chop calls, in order: ``A``; then for each ``k``: the multipliers (a
    column), the products ``l_ik a_kj`` (the trailing block), the differences
    (the trailing block).  A zero pivot column is skipped, as in LAPACK.
    Backward error (Higham, Thm. 9.3, round to nearest): ``P A + dA = L U``
    with ``|dA| <= gamma_n |L||U|``.

    Examples
    --------
    >>> import numpy as np
    >>> from pychop_compat import linalg
    >>> L, U, perm = linalg.lu(np.array([[1., 2.], [3., 4.]]), 'h')
    >>> perm.tolist(), float(L[1, 0]), float(U[1, 1])
    ([1, 0], 0.333251953125, 0.6669921875)
    """
    a = _float_array(A)
    if a.ndim != 2 or a.shape[0] != a.shape[1]:
        raise ValueError("lu needs a square matrix")
    r = _make_rounder(options)
    a = np.array(r(a), copy=True)
    n = a.shape[0]
    perm = np.arange(n)
    info = 0
    for k in range(n):
        piv = k + int(np.argmax(np.abs(a[k:, k])))
        if piv != k:
            a[[k, piv]] = a[[piv, k]]
            perm[[k, piv]] = perm[[piv, k]]
        pivot = a[k, k]
        if pivot == 0:
            info = info or k + 1
            continue
        if k == n - 1:
            break
        l = r(a[k + 1 :, k] / pivot)
        a[k + 1 :, k] = l
        a[k + 1 :, k + 1 :] = r(a[k + 1 :, k + 1 :] - r(np.outer(l, a[k, k + 1 :])))
    L = np.tril(a, -1)
    L[np.diag_indices(n)] = 1.0
    return LUResult(L, np.triu(a), perm, info)


def _as_factors(F: Any) -> LUResult:
    if isinstance(F, LUResult):
        return F
    L, U, p = F
    p = np.asarray(p)
    if p.ndim == 2:  # MATLAB-style permutation matrix, P A = L U
        p = np.argmax(p, axis=1)
    return LUResult(np.asarray(L), np.asarray(U), p.astype(int))


@_ieee
def solve(A: Any, b: ArrayLike, options: OptionsLike = None) -> np.ndarray:
    """Solve ``A x = b`` by LU factorization and substitution in simulated precision.

    Parameters
    ----------
    A : array_like, LUResult or tuple (L, U, p)
        The matrix (factorized with :func:`lu` and ``options``) or its
        factors: an :class:`LUResult` or a tuple ``(L, U, p)`` with ``p`` a
        0-based permutation vector (``A[p] = L U``) or a permutation matrix
        (``P A = L U``).
    b : array_like
        Right-hand side(s), shape ``(n,)`` or ``(n, k)``.
    options : chop options, str or None, optional
        Format and rounding (``None``: the persistent chop options).  Given
        factors are used in this precision (they are rounded to it first).

    Returns
    -------
    ndarray
        The solution, shaped like ``b``.

    Notes
    -----
    Column-oriented substitution.  With ``c = fl(b[p])``, forward:
    for ``j = 1..n-1``, ``c_i = fl(c_i - fl(l_ij c_j))`` for all ``i > j``;
    backward: for ``j = n..1``, ``x_j = fl(c_j / u_jj)``, then
    ``c_i = fl(c_i - fl(u_ij x_j))`` for all ``i < j``.  Each row therefore
    subtracts its terms in increasing (forward) or decreasing (backward) ``j``.
    Chop calls, in order: those of :func:`lu` if ``A`` is a matrix; ``L``,
    ``U``, ``b[p]``; forward: per ``j`` the
    products then the differences; backward: per ``j`` the quotient, the
    products, the differences.  Backward error (Higham, Thm. 9.4, round to
    nearest): ``(P A + dA) x = P b``, ``|dA| <= gamma_{3n} |L||U|``.
    """
    F = A if isinstance(A, LUResult) or isinstance(A, tuple) else None
    r = _make_rounder(options)
    if F is None:
        F = lu(A, options)
    F = _as_factors(F)
    bb = _float_array(b, F.L, F.U)
    vec = bb.ndim == 1
    c = bb[:, None] if vec else bb
    n = F.perm.size
    if c.shape[0] != n:
        raise ValueError("b has the wrong number of rows")
    L = r(F.L.astype(c.dtype))
    U = r(F.U.astype(c.dtype))
    c = np.array(r(c[F.perm]), copy=True)
    for j in range(n - 1):
        c[j + 1 :] = r(c[j + 1 :] - r(L[j + 1 :, j : j + 1] * c[j : j + 1]))
    for j in range(n - 1, -1, -1):
        c[j] = r(c[j] / U[j, j])
        if j:
            c[:j] = r(c[:j] - r(U[:j, j : j + 1] * c[j : j + 1]))
    return c[:, 0] if vec else c


# ---------------------------------------------------------------------------
# Accurate residuals (double-double)
# ---------------------------------------------------------------------------

_SPLITTER = 134217729.0  # 2**27 + 1


def _two_sum(a, b):
    s = a + b
    bb = s - a
    return s, (a - (s - bb)) + (b - bb)


def _two_prod(a, b):
    p = a * b
    ca, cb = _SPLITTER * a, _SPLITTER * b
    ah = ca - (ca - a)
    bh = cb - (cb - b)
    al, bl = a - ah, b - bh
    return p, al * bl - (((p - ah * bh) - al * bh) - ah * bl)


def _residual_dd(A: np.ndarray, x: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``b - A x`` in double-double (Ogita-Rump-Oishi Dot2), rounded to double.

    As accurate as evaluating in precision ``u**2`` (106 bits) and rounding
    to double; no overflow in the splitting is assumed (``|a| < 2**996``).
    """
    s = b.astype(np.float64, copy=True)
    c = np.zeros_like(s)
    for k in range(A.shape[1]):
        p, e = _two_prod(-A[:, k], x[k])
        s, e2 = _two_sum(s, p)
        c += e + e2
    return s + c


def _residual(A, x, b, ur) -> np.ndarray:
    if _is_extended(ur):
        return _residual_dd(A, x, b)
    rr = _make_rounder(ur)
    return rr(rr(b) - matvec(A, x, ur))


def _norm_inf(v) -> float:
    return float(np.max(np.abs(v))) if np.size(v) else 0.0


def _pow2_scale(v) -> float:
    """The power of two at or below ``||v||_inf`` (exact scaling factor)."""
    nrm = _norm_inf(v)
    if nrm == 0 or not np.isfinite(nrm):
        return 1.0
    return math.ldexp(1.0, math.frexp(nrm)[1] - 1)


# ---------------------------------------------------------------------------
# Iterative refinement
# ---------------------------------------------------------------------------


@dataclass(eq=False)
class IRResult:
    """Outcome of :func:`lu_ir` or :func:`gmres_ir`.

    Attributes
    ----------
    x : ndarray
        The last iterate.
    converged : bool
        Whether a step changed the iterate by at most ``tol`` relative to it:
        ``||x_{i+1} - x_i|| <= tol ||x_{i+1}||`` (infinity norm; ``tol``
        defaults to the working precision's unit roundoff, so the iterate
        has stopped changing in that precision).
    status : str
        ``'converged'``, ``'diverged'`` (a non-finite iterate; it is not
        accepted) or ``'maxiter'``.
    backward_error : list of float
        Normwise backward error ``||b - A x_i|| / (||A|| ||x_i|| + ||b||)``
        (infinity norm; residual in double-double, rounded) of ``x_0, x_1,
        ...``, with ``A`` and ``b`` as stored in the working precision.
    forward_error : list of float or None
        ``||x_i - x_true|| / ||x_true||`` (infinity norm) when ``x_true`` was given.
    changes : list of float
        ``||x_{i+1} - x_i|| / ||x_{i+1}||`` of each accepted step.
    gmres_iterations : list of int
        GMRES iterations of each refinement step (empty for LU-IR; after a
        divergence, the last entry is that of the rejected step).
    factors : LUResult
        The LU factors computed in precision ``uf``.
    """

    x: np.ndarray
    converged: bool
    status: str
    backward_error: list = field(default_factory=list)
    forward_error: Optional[list] = None
    changes: list = field(default_factory=list)
    gmres_iterations: list = field(default_factory=list)
    factors: Optional[LUResult] = None

    @property
    def iterations(self) -> int:
        """Number of refinement steps done (accepted corrections)."""
        return len(self.backward_error) - 1

    def table(self) -> str:
        """The iteration history as a text table (one row per iterate ``x_i``)."""
        head = (f"{'iter':>4}  {'backward err':>12}  {'forward err':>12}  "
                f"{'rel. change':>11}  {'GMRES its':>9}")
        lines = [head, "-" * len(head)]
        for i, be in enumerate(self.backward_error):
            fe = self.forward_error[i] if self.forward_error is not None else float("nan")
            ch = f"{self.changes[i - 1]:11.3e}" if i else f"{'-':>11}"
            gi = str(self.gmres_iterations[i - 1]) if 0 < i <= len(self.gmres_iterations) else "-"
            lines.append(f"{i:>4}  {be:12.3e}  {fe:12.3e}  {ch}  {gi:>9}")
        return "\n".join(lines)


def _refine(A, b, uf, u, ur, correction, x_true, max_iter, tol, kind) -> IRResult:
    A = _float_array(A).astype(np.float64)
    b = _float_array(b).astype(np.float64)
    if A.ndim != 2 or A.shape[0] != A.shape[1] or b.shape != (A.shape[0],):
        raise ValueError("need a square A and a vector b of matching size")
    ru = _make_rounder(u)
    tol = _unit_roundoff(u) if tol is None else float(tol)
    Au, bu = ru(A), ru(b)  # the problem stored in the working precision

    F = lu(A, uf)
    x = solve(F, bu, uf)
    if not np.all(np.isfinite(x)):
        x = np.zeros_like(bu)
    x = ru(x)

    normA = _norm_inf(np.sum(np.abs(Au), axis=1)) if Au.size else 0.0
    normb = _norm_inf(bu)
    xt = None if x_true is None else np.asarray(x_true, dtype=np.float64)
    out = IRResult(x, False, "maxiter", forward_error=None if xt is None else [], factors=F)
    for it in range(max_iter + 1):
        denom = normA * _norm_inf(x) + normb
        out.backward_error.append(_norm_inf(_residual_dd(Au, x, bu)) / denom if denom else 0.0)
        if xt is not None:
            out.forward_error.append(_norm_inf(x - xt) / _norm_inf(xt))
        if out.status == "converged" or it == max_iter:
            break
        r = ru(_residual(Au, x, bu, ur))
        d, its = correction(F, Au, r)
        if kind == "gmres":
            out.gmres_iterations.append(its)
        x_new = ru(x + d)
        if not np.all(np.isfinite(x_new)):
            out.status = "diverged"
            break
        step, size = _norm_inf(x_new - x), _norm_inf(x_new)
        out.changes.append(step / size if size else (0.0 if step == 0 else math.inf))
        x = x_new
        if out.changes[-1] <= tol:
            out.status = "converged"
    out.x = x
    out.converged = out.status == "converged"
    return out


@_ieee
def lu_ir(
    A: ArrayLike,
    b: ArrayLike,
    uf: OptionsLike = "h",
    u: OptionsLike = "d",
    ur: OptionsLike = "q",
    *,
    x_true: Optional[ArrayLike] = None,
    max_iter: int = 10,
    tol: Optional[float] = None,
) -> IRResult:
    """LU-based iterative refinement in three precisions (Carson & Higham, 2018).

    Parameters
    ----------
    A, b : array_like
        Square system ``A x = b`` (double data).
    uf, u, ur : chop options or str, optional
        Factorization, working and residual precisions (default half, double,
        and ``'q'``).  ``ur`` may also be ``'q'`` (``'quad'``, ``'dd'``):
        the residual is then evaluated in double-double arithmetic (precision
        about ``u**2``, 106 bits, standing in for quadruple) and rounded to
        double; a chop format is simulated with :func:`matvec`.
    x_true : array_like, optional
        Exact solution, for the forward errors.
    max_iter : int, optional
        Maximum number of refinement steps (default 10).
    tol : float, optional
        Convergence: stop when a step changes the iterate by at most ``tol``
        relative to it (infinity norm; default: the unit roundoff of ``u``).

    Returns
    -------
    IRResult

    Notes
    -----
    1. ``P A = L U`` in precision ``uf`` (:func:`lu`; ``A`` rounded to ``uf``).
    2. ``x_0``: :func:`solve` with the factors in precision ``uf``, stored in
       ``u`` (zero if not finite).
    3. For ``i = 0, 1, ...``: ``r_i = b - A x_i`` in precision ``ur``, stored
       in ``u``; scaled by the power of two ``s <= ||r_i||`` (exact), solve
       ``A d_i = r_i / s`` with the factors in precision ``uf``;
       ``x_{i+1} = fl_u(x_i + s d_i)``.

    ``A`` and ``b`` are rounded to ``u`` first.  Stops when a step changes
    ``x`` by at most ``tol`` relative to it (converged), when an iterate is
    not finite (diverged; that iterate is rejected) or after ``max_iter``
    steps.  LU-IR is guaranteed to converge when ``kappa(A) u_f`` is
    sufficiently below 1.  ``A`` is not scaled: entries outside the range of
    ``uf`` overflow when it is rounded.

    References
    ----------
    E. Carson and N. J. Higham, Accelerating the solution of linear systems by
    iterative refinement in three precisions, SIAM J. Sci. Comput. 40(2),
    A817-A847, 2018.
    """

    def correction(F, Au, r):
        s = _pow2_scale(r)
        return _make_rounder(u)(solve(F, r / s, uf) * s), None

    return _refine(A, b, uf, u, ur, correction, x_true, max_iter, tol, "lu")


def _gmres(A, r, F, u, up, tol, maxit):
    """Left-preconditioned GMRES for ``M^{-1} A d = M^{-1} r``, ``M = P^T L U``.

    Working precision ``u`` (every operation rounded), except the application
    of ``M^{-1} A`` and of ``M^{-1}`` to ``r``, done in precision ``up``.
    Starts from ``d = 0``; Arnoldi with modified Gram-Schmidt, Givens rotations.
    Returns ``(d, iterations)``.
    """
    ru = _make_rounder(u)
    n = r.size
    maxit = n if maxit is None else int(maxit)

    def nrm2(v):
        return ru(np.sqrt(dot(v, v, u)))

    def apply(v):  # M^{-1} A v in precision up
        return ru(solve(F, matvec(A, v, up), up))

    z = ru(solve(F, r, up))
    beta = nrm2(z)
    if beta == 0 or not np.isfinite(beta):
        return np.zeros_like(r), 0
    V = np.zeros((n, maxit + 1))
    H = np.zeros((maxit + 1, maxit))
    cs, sn = np.zeros(maxit), np.zeros(maxit)
    g = np.zeros(maxit + 1)
    g[0] = beta
    V[:, 0] = ru(z / beta)
    k = 0
    for j in range(maxit):
        w = apply(V[:, j])
        for i in range(j + 1):
            H[i, j] = dot(w, V[:, i], u)
            w = ru(w - ru(H[i, j] * V[:, i]))
        H[j + 1, j] = nrm2(w)
        if H[j + 1, j] != 0:
            V[:, j + 1] = ru(w / H[j + 1, j])
        for i in range(j):  # previous rotations
            hi, hi1 = H[i, j], H[i + 1, j]
            H[i, j] = ru(ru(cs[i] * hi) + ru(sn[i] * hi1))
            H[i + 1, j] = ru(ru(-sn[i] * hi) + ru(cs[i] * hi1))
        hjj, hj1 = H[j, j], H[j + 1, j]
        rho = ru(np.sqrt(ru(ru(hjj * hjj) + ru(hj1 * hj1))))
        k = j + 1
        if rho == 0 or not np.isfinite(rho):
            k = j
            break
        cs[j], sn[j] = ru(hjj / rho), ru(hj1 / rho)
        H[j, j], H[j + 1, j] = rho, 0.0
        g[j + 1] = ru(-sn[j] * g[j])
        g[j] = ru(cs[j] * g[j])
        if abs(g[j + 1]) <= tol * beta or hj1 == 0:
            break
    if k == 0:
        return np.zeros_like(r), 0
    # back substitution H[:k, :k] y = g[:k] in precision u
    Hk = H[:k, :k]
    y = solve((np.eye(k), Hk, np.arange(k)), g[:k], u)
    return matvec(V[:, :k], y, u), k


@_ieee
def gmres_ir(
    A: ArrayLike,
    b: ArrayLike,
    uf: OptionsLike = "h",
    u: OptionsLike = "d",
    ur: OptionsLike = "q",
    *,
    up: OptionsLike = None,
    x_true: Optional[ArrayLike] = None,
    max_iter: int = 10,
    tol: Optional[float] = None,
    gmres_tol: float = 1e-6,
    gmres_maxit: Optional[int] = None,
) -> IRResult:
    """GMRES-based iterative refinement in three precisions (Carson & Higham 2018).

    As :func:`lu_ir`, but each correction solves the preconditioned system
    ``U^{-1} L^{-1} P A d_i = U^{-1} L^{-1} P r_i`` by GMRES in the working
    precision ``u``, preconditioned by the precision-``uf`` LU factors.

    Parameters
    ----------
    A, b, uf, u, ur, x_true, max_iter, tol
        As for :func:`lu_ir`.
    up : chop options or str, optional
        Precision in which GMRES applies ``U^{-1} L^{-1} P A`` and
        ``U^{-1} L^{-1} P`` (default: ``u``, i.e. GMRES entirely in the working
        precision).
    gmres_tol : float, optional
        GMRES stops when its (preconditioned, relative) residual norm is at
        most ``gmres_tol`` (default 1e-6).
    gmres_maxit : int, optional
        Maximum GMRES iterations per refinement step (default ``n``).

    Returns
    -------
    IRResult
        With ``gmres_iterations`` filled in.

    Notes
    -----
    The residual ``r_i`` is scaled by the power of two ``s <= ||r_i||``
    (exact) before GMRES, and the correction scaled back.  GMRES starts from
    zero, uses modified Gram-Schmidt Arnoldi and Givens rotations, every
    operation rounded to ``u`` (dot products and norms by :func:`dot`, vector
    updates elementwise), except the preconditioned operator, applied in
    ``up`` with :func:`matvec` and :func:`solve`.  Carson & Higham's
    convergence analysis assumes that operator applied in extra precision
    (``u**2``); here ``up`` can be any chop format up to double and defaults to
    ``u``.  GMRES-IR converges for much larger ``kappa(A)`` than LU-IR with the
    same ``uf`` (see ``examples/gmres_ir.py``).

    References
    ----------
    E. Carson and N. J. Higham, A new analysis of iterative refinement and its
    application to accurate solution of ill-conditioned sparse linear
    systems, SIAM J. Sci. Comput. 39(6), A2834-A2856, 2017.
    E. Carson and N. J. Higham, Accelerating the solution of linear systems by
    iterative refinement in three precisions, SIAM J. Sci. Comput. 40(2),
    A817-A847, 2018.
    """
    upp = u if up is None else up

    def correction(F, Au, r):
        s = _pow2_scale(r)
        d, its = _gmres(Au, r / s, F, u, upp, gmres_tol, gmres_maxit)
        return _make_rounder(u)(d * s), its

    return _refine(A, b, uf, u, ur, correction, x_true, max_iter, tol, "gmres")


# ---------------------------------------------------------------------------
# Test matrices
# ---------------------------------------------------------------------------


def _haar(n: int, rng: np.random.Generator) -> np.ndarray:
    Q, R = np.linalg.qr(rng.standard_normal((n, n)))
    return Q * np.where(np.diag(R) < 0, -1.0, 1.0)


def randsvd(
    n: int, kappa: float, mode: int = 3, rng: Union[None, int, np.random.Generator] = None
) -> np.ndarray:
    """Random ``n x n`` matrix with 2-norm condition number ``kappa``.

    ``A = Q1 diag(sigma) Q2^T`` with Haar-distributed orthogonal ``Q1, Q2`` and
    ``max sigma = 1``, as MATLAB's ``gallery('randsvd', n, kappa, mode)``:
    mode 1, one large singular value; 2, one small singular value; 3 (default),
    geometrically distributed; 4, arithmetically distributed; 5, random with
    uniformly distributed logarithm.

    Examples
    --------
    >>> import numpy as np
    >>> from pychop_compat import linalg
    >>> A = linalg.randsvd(20, 1e6, rng=0)
    >>> bool(abs(np.linalg.cond(A) / 1e6 - 1) < 1e-6)
    True
    """
    rng = np.random.default_rng(rng)
    n = int(n)
    k = float(kappa)
    if n == 1:
        sigma = np.ones(1)
    elif mode == 1:
        sigma = np.r_[1.0, np.full(n - 1, 1 / k)]
    elif mode == 2:
        sigma = np.r_[np.ones(n - 1), 1 / k]
    elif mode == 3:
        sigma = k ** (-np.arange(n) / (n - 1))
    elif mode == 4:
        sigma = 1 - (1 - 1 / k) * np.arange(n) / (n - 1)
    elif mode == 5:
        sigma = np.exp(-rng.random(n) * math.log(k))
        sigma[np.argmax(sigma)], sigma[np.argmin(sigma)] = 1.0, 1 / k
    else:
        raise ValueError("mode must be 1, 2, 3, 4 or 5")
    return (_haar(n, rng) * sigma) @ _haar(n, rng).T
