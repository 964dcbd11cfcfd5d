"""LU factorization with partial pivoting and triangular solves in simulated precision.

LAPACK's factorization and the scaling factors exist on the host only: torch, CuPy and JAX
arrays asking for them take the host route (:func:`~pychop_compat.linalg.arrays.on_host`).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Optional, Tuple

import numpy as np
from numpy.typing import ArrayLike

from .. import hardware as matrix_units
from ..matlab.options import resolve
from .arrays import HOST, Arrays, Window, arrays_for, host_computed, ieee, on_host
from .common import DOUBLE_NAMES, OptionsLike, Rounder, check_lapack_rounding, chop_object, float_operands
from .errors import warn_at_caller
from .products import HardwareLike, unit_model
from .scaling import Scaling, ruiz_equilibrate, ruiz_equilibrate_symmetric, squeeze

__all__ = ["LUResult", "lu", "lutx_chop", "solve", "factorize", "solve_on", "warn_if_singular", "needs_host"]

#: The equilibration of each ``scaling=`` name.
_SCALINGS = {None: None, "none": None, "general": ruiz_equilibrate, "g": ruiz_equilibrate,
             "symmetric": ruiz_equilibrate_symmetric, "s": ruiz_equilibrate_symmetric}
_LU_METHODS = ("chopped", "lapack")
#: The blocked LU's default panel width: matmul's block_size, a multiple of every preset's FMA size.
_DEFAULT_PANEL = 32


@dataclass(frozen=True, eq=False)
class LUResult:
    """LU factorization ``P A = L U`` computed by :func:`lu`; ``L, U, perm = lu(A)`` unpacks.

    Attributes
    ----------
    L : ndarray
        Unit lower triangular factor (``n x n``).
    U : ndarray
        Upper triangular factor.
    perm : ndarray of int
        Row permutation, 0-based: ``A[perm] = L @ U`` (up to rounding).  ``P`` is
        MATLAB's permutation matrix (``P A = L U``; :func:`scipy.linalg.lu` gives its transpose).
    info : int
        0 if all pivots are nonzero, else ``k`` where ``U[k-1, k-1]`` is the
        first zero pivot (LAPACK's convention; the factorization is complete).
    scaling : Scaling or None
        For a matrix scaled before factorizing: ``P (mu R A S) = L U``;
        :func:`solve` undoes the scaling, so the factors act as factors of ``A``.
    """

    L: np.ndarray
    U: np.ndarray
    perm: np.ndarray
    info: int = 0
    scaling: Optional[Scaling] = None

    @property
    def singular(self) -> bool:
        """True when a pivot is zero or a factor entry is Inf or NaN."""
        from ..engines import to_numpy  # the factors may be torch tensors or JAX arrays (linalg's array types)

        return bool(self.info) or not (np.all(np.isfinite(to_numpy(self.L))) and np.all(np.isfinite(to_numpy(self.U))))

    @property
    def P(self) -> Any:
        """Permutation matrix with ``P @ A = L @ U`` (float64; on the factors' library and device)."""
        arrays = arrays_for(self.perm)  # built on the host: torch and JAX lack NumPy's .size and in-place writes
        perm = arrays.to_host(self.perm)
        n = perm.size
        P = np.zeros((n, n))
        P[np.arange(n), perm] = 1.0
        return arrays.from_host(P)

    def __iter__(self):
        return iter((self.L, self.U, self.perm))


def _scaling_for(a: np.ndarray, options: OptionsLike, scaling: Optional[str],
                 theta: Optional[float]) -> Optional[Scaling]:
    try:
        equilibrate = _SCALINGS[scaling]
    except (KeyError, TypeError):
        raise ValueError(f"scaling must be None, 'general' ('g') or 'symmetric' ('s'), got {scaling!r}") from None
    sc = None if equilibrate is None else equilibrate(a)
    if theta is not None:  # squeeze(scaling=None): the identity scaling, then mu
        sc = squeeze(a, resolve(chop_object(options).options, None, "double").spec.fmt.xmax, theta, sc)
    return sc


def warn_if_singular(F: LUResult, what: str) -> None:
    """Warn with :class:`~pychop_compat.linalg.SingularMatrixWarning` when ``F`` is singular
    (``what``: the caller's name)."""
    if F.singular:
        warn_at_caller(f"{what}: matrix is singular to working precision (a zero or non-finite pivot "
                       "or factor entry); the result contains Inf or NaN.")


def _lapack_lu(a: np.ndarray, options: OptionsLike) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """LAPACK's getrf in single or double (what MATLAB's ``lu(single(A))`` calls)."""
    import scipy.linalg

    resolved = chop_object(options).options
    fmt = resolved.format
    if fmt not in ("s", "single", "fp32") + DOUBLE_NAMES:
        raise ValueError(f"method='lapack' needs format 's' or 'd' (LAPACK's sgetrf/dgetrf), got {fmt!r}")
    check_lapack_rounding(resolved, "method='lapack' factors", f"options {options!r}",
                          "; use method='chopped' for other rounding options")
    # single data is factorized in single whatever the format, as the chopped elimination computes
    # on float32 data (and MATLAB's lu(single(A))); the factors keep the input's dtype
    single = fmt not in DOUBLE_NAMES or a.dtype == np.float32
    lu_, piv = scipy.linalg.lu_factor(a.astype(np.float32 if single else np.float64), check_finite=False)
    n = a.shape[0]
    perm = np.arange(n)
    for k, p in enumerate(piv):  # LAPACK's row interchanges, applied in order
        perm[[k, p]] = perm[[p, k]]
    L = np.tril(lu_, -1).astype(a.dtype)
    L[np.diag_indices(n)] = 1.0
    U = np.triu(lu_).astype(a.dtype)
    zero = np.flatnonzero(np.diag(U) == 0)
    return L, U, perm, int(zero[0]) + 1 if zero.size else 0


def needs_host(scaling: Optional[str], theta: Optional[float], method: str, hardware: HardwareLike = None) -> bool:
    """Whether a factorization with these arguments of :func:`~pychop_compat.linalg.lu` needs the
    host (LAPACK, scaling factors, or the blocked factorization of ``hardware=``): torch, CuPy and
    JAX arrays then take the host route."""
    return method != "chopped" or scaling not in (None, "none") or theta is not None or hardware is not None


@ieee
def lu(A: ArrayLike, options: OptionsLike = None, *, scaling: Optional[str] = None,
       theta: Optional[float] = None, method: str = "chopped", hardware: HardwareLike = None,
       block_size: Optional[int] = None) -> LUResult:
    """LU factorization with partial pivoting in simulated precision.

    Right-looking Gaussian elimination: at step ``k`` the row with the first
    largest ``|a_ik|``, ``i >= k`` (a NaN counts as largest: the first NaN, as
    :func:`numpy.argmax` finds it; Notes), is swapped into row ``k``, then the multipliers
    ``l_ik = fl(a_ik / a_kk)`` and the Schur complement ``a_ij = fl(a_ij - fl(l_ik * a_kj))``
    are formed for the whole trailing submatrix at once.  With ``hardware=``, the blocked
    form GPU libraries run, its trailing updates computed by a GPU's matrix units (Notes).

    Parameters
    ----------
    A : array_like
        Square matrix; it is first rounded to the format.
    options : chop options, str or None, optional
        Format and rounding (``None``: the persistent chop options).
    scaling : {None, 'general', 'symmetric'}, optional
        Two-sided diagonal scaling before rounding ``A`` (Higham, Pranesh &
        Zounon 2019): ``'general'`` (``'g'``, ``R A S``) or ``'symmetric'``
        (``'s'``, ``D A D``); see :func:`ruiz_equilibrate`.
    theta : float, optional
        Squeeze: multiply the (scaled) matrix by ``mu = theta * xmax / beta``
        so that its largest entry is ``theta * xmax`` of the format.
    method : {'chopped', 'lapack'}, optional
        The chopped elimination (default) or, for format ``'s'`` or ``'d'``
        only, LAPACK's ``sgetrf``/``dgetrf`` (MATLAB's ``lu(single(A))``),
        which round to nearest with subnormals, the format's range and no bit
        flips: other options (``round``, ``subnormal=0``, ``explim=0``,
        ``flip``) are refused, not ignored.
        float32 input is factorized by ``sgetrf`` whatever the format (the
        chopped elimination too computes in single on float32 data).
    hardware : str or hardware.BlockFMA, optional
        A GPU name (``'H100'``) or a block-FMA model, as
        :func:`~pychop_compat.linalg.matmul` takes it (the same checks:
        ``options`` round to nearest without bit flips, in an input format of
        the model): the blocked factorization of the Notes, the trailing
        updates computed by :func:`pychop_compat.hardware.matmul`.  Not with
        ``method='lapack'``.  Computed on the host (torch, CuPy and JAX arrays
        through a copy).
    block_size : int, optional
        Panel width of the blocked factorization (``hardware=`` only; default
        32, the ``block_size`` default of :func:`~pychop_compat.linalg.matmul`:
        a multiple of every preset's FMA size, so each update's inner products
        fill whole block FMAs).  A matrix of order ``n <= block_size`` is one
        panel: the factors are those without ``hardware=``.

    Returns
    -------
    LUResult
        ``L``, ``U``, ``perm`` (``A[perm] = L @ U``), ``P``, ``info`` and ``scaling``.

    Raises
    ------
    ValueError
        ``hardware=`` with ``method='lapack'`` or with options the model cannot
        take, ``block_size`` not a positive integer or given without ``hardware=``,
        ``method='lapack'`` with options LAPACK would ignore.

    Warns
    -----
    SingularMatrixWarning
        When a pivot is zero or a factor entry is Inf or NaN.

    Notes
    -----
    Chop calls, in order: ``A``; then for each ``k``: the multipliers (a
    column), the products ``l_ik a_kj``, the differences (the trailing block).
    A zero pivot column is skipped, as in LAPACK.  Backward error (Higham, Thm.
    9.3, round to nearest): ``P A + dA = L U`` with ``|dA| <= gamma_n |L||U|``.
    A NaN in the pivot column is taken as pivot (the first one), the rule Demmel et
    al. propose for the BLAS's ``i?amax``.  LAPACK's ``getrf`` does what its BLAS's
    ``idamax`` does, which differs between builds (the reference ``idamax`` skips a
    NaN unless it is the first entry; OpenBLAS's takes or skips it depending on the
    vector), and :func:`lutx_chop` skips it as MATLAB's ``max`` does: with a NaN met
    in the pivot search the factors can differ from both.

    With ``hardware=``: right-looking blocked LU as GPU libraries run it (MAGMA,
    cuSOLVER; Haidar et al., SC18).  ``A`` is rounded to ``options``; then for
    each panel of columns ``J = k .. k+b-1`` (``b = block_size``, the last one
    narrower) and rows ``k .. n-1``:

    1. the panel is factorized by the chopped elimination above restricted to
       its columns (same pivot rule, same roundings: multipliers
       ``fl(a_ij / a_jj)``, updates ``fl(a_il - fl(l_ij a_jl))`` for ``l`` in ``J``);
    2. its row interchanges are applied to the whole rows (``L`` already formed
       and the columns right of the panel);
    3. ``U12 = L11^{-1} A12`` by the chopped forward substitution of
       :func:`solve` (``c_i = fl(c_i - fl(l_ij c_j))``), which are the roundings
       the unblocked elimination makes on those rows;
    4. ``A22 = fl(D)``, ``D = hardware.matmul(L21, U12, A22, alpha=-1, beta=1)``:
       ``-L21`` and ``U12`` read in the model's input format (exact: they are
       values of ``options``' format), ``A22`` read in its output format (fp32
       toward zero: exact for values of an input format), each inner product
       block-FMA by block-FMA with the model's alignment, truncation and one
       rounding per block, then ``D`` rounded to ``options`` (one chop call).

    Without step 4 on matrix units (rank-one chopped updates instead) this is
    the unblocked elimination, bit for bit; only the trailing updates change.
    ``info`` is that of the first zero pivot, as without ``hardware=``.

    Examples
    --------
    >>> import numpy as np
    >>> from pychop_compat import linalg
    >>> L, U, perm = linalg.lu(np.array([[1., 2.], [3., 4.]]), 'h')
    >>> perm.tolist(), float(L[1, 0]), float(U[1, 1])
    ([1, 0], 0.333251953125, 0.6669921875)
    """
    arrays = arrays_for(A)
    if arrays is not HOST and needs_host(scaling, theta, method, hardware):
        return on_host(lu, arrays, A, options, scaling=scaling, theta=theta, method=method, hardware=hardware,
                       block_size=block_size)
    return factorize(arrays, A, options, scaling=scaling, theta=theta, method=method, hardware=hardware,
                     block_size=block_size)


@host_computed
def lutx_chop(A: ArrayLike, format: str = "h") -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The research codes' ``lutx_chop``: Moler's ``lutx`` with chop after each operation.

    Gaussian elimination with partial pivoting on ``A`` as given (not rounded first): at step
    ``k = 1 .. n-1`` the first largest ``|a_ik|``, ``i >= k`` (NaN ignored, as MATLAB's ``max``),
    is swapped into row ``k`` unless it is zero, in which case the step is skipped; then
    ``a_ik = chop(a_ik / a_kk)`` and ``a_ij = chop(a_ij - chop(a_ik a_kj))`` for ``i, j > k``.
    The algorithm of ``lutx_chop.m`` in github.com/SrikaraPranesh/Multi_precision_NLA_kernels
    (commit fb3a2d7, 2021-02-16; the factorization of its ``gmresir3`` codes), bit for bit as
    GNU Octave runs it with ``chop.m`` of github.com/higham/chop (commit 906c31e)
    (``tests/data/research_linalg``).  :func:`lu` rounds ``A`` first, reports zero pivots and
    runs on every array type; on a matrix already in the format, and with the same options,
    its factors are these, unless the pivot search meets a NaN with another entry to choose
    (:func:`lu` takes the first NaN as pivot).

    Parameters
    ----------
    A : array_like
        Real square matrix (the code's rectangular case is not provided).
    format : str, optional
        chop's format (default ``'h'``, the code's); the other options are chop's defaults
        (round to nearest, with subnormals except for bfloat16), as ``chop([], fp)`` sets them.

    Returns
    -------
    L : ndarray
        Unit lower triangular factor.
    U : ndarray
        Upper triangular factor.
    p : ndarray of int
        The row permutation, 0-based: ``A[p] = L @ U`` up to rounding (the code's ``p`` minus one).

    Examples
    --------
    >>> import numpy as np
    >>> from pychop_compat import linalg
    >>> L, U, p = linalg.lutx_chop(np.array([[1., 2.], [3., 4.]]))
    >>> p.tolist(), float(L[1, 0]), float(U[1, 1])
    ([1, 0], 0.333251953125, 0.6669921875)
    """
    a = np.array(A, dtype=np.float64)
    if a.ndim != 2 or a.shape[0] != a.shape[1]:
        raise ValueError("lutx_chop needs a square matrix")
    rounded = Rounder({"format": format}, HOST)
    n = a.shape[0]
    p = np.arange(n)
    for k in range(n - 1):
        column = np.abs(a[k:, k])
        ind = k + (0 if np.all(np.isnan(column)) else int(np.nanargmax(column)))
        if a[ind, k] == 0:  # a zero column: nothing to eliminate
            continue
        if ind != k:
            a[[k, ind]] = a[[ind, k]]
            p[[k, ind]] = p[[ind, k]]
        rest = slice(k + 1, n)
        with np.errstate(all="ignore"):  # Inf and NaN propagate, as in the code
            a[rest, k] = rounded(a[rest, k] / a[k, k])
            a[rest, rest] = rounded(a[rest, rest] - rounded(np.outer(a[rest, k], a[k, rest])))
    return np.tril(a, -1) + np.eye(n), np.triu(a), p


def factorize(arrays: Arrays, A: Any, options: OptionsLike = None, *, scaling: Optional[str] = None,
              theta: Optional[float] = None, method: str = "chopped", hardware: HardwareLike = None,
              block_size: Optional[int] = None) -> LUResult:
    """:func:`~pychop_compat.linalg.lu` computed by ``arrays``'s library (scaling, LAPACK and
    ``hardware=``: NumPy only)."""
    (a,) = float_operands(arrays, A)
    if a.ndim != 2 or a.shape[0] != a.shape[1]:
        raise ValueError("lu needs a square matrix")
    if method not in _LU_METHODS:
        raise ValueError(f"method must be one of {_LU_METHODS}, got {method!r}")
    panel = _panel_width(hardware, block_size, method)
    sc = _scaling_for(a, options, scaling, theta)
    if sc is not None:
        a = sc.apply(a.astype(np.float64)).astype(a.dtype)
    if method == "lapack":
        L, U, perm, info = _lapack_lu(a, options)
        F = LUResult(L, U, perm, info, sc)
    elif hardware is not None:
        r = Rounder(options, arrays)
        F = dataclasses.replace(_blocked_eliminate(a, r, unit_model(hardware, r), panel), scaling=sc)
    else:
        F = dataclasses.replace(_eliminate(arrays, a, Rounder(options, arrays)), scaling=sc)
    warn_if_singular(F, "lu")
    return F


def _panel_width(hardware: HardwareLike, block_size: Optional[int], method: str) -> int:
    """The panel width of :func:`lu`'s blocked factorization; refuses what ``hardware=`` cannot go with."""
    if hardware is None:
        if block_size is not None:
            raise ValueError("block_size= is the panel width of the blocked LU of hardware=: give hardware= too.")
        return 0
    if method != "chopped":
        raise ValueError(f"hardware= computes the trailing updates of the chopped blocked LU: not with "
                         f"method={method!r}.")
    width = _DEFAULT_PANEL if block_size is None else block_size
    if isinstance(width, bool) or not isinstance(width, (int, np.integer)) or width < 1:
        raise ValueError(f"block_size must be a positive integer, got {block_size!r}.")
    return int(width)


def _blocked_eliminate(a: np.ndarray, r: Rounder, model: matrix_units.BlockFMA, width: int) -> LUResult:
    """The blocked elimination of :func:`lu` with ``hardware=`` on the host (``a``: a private copy,
    not yet rounded; ``width``: the panel width)."""
    a = r(a)
    n = a.shape[0]
    perm = np.arange(n)
    info = 0
    for first in range(0, n, width):
        last = min(first + width, n)
        panel, order, panel_info = _panel_elimination(HOST, a[first:, first:last], r)
        info = info or (panel_info and first + panel_info)
        a[first:, first:last] = panel
        for outside in (slice(0, first), slice(last, n)):  # the panel's interchanges, on the whole rows
            a[first:, outside] = a[first:, outside][order]
        perm[first:] = perm[first:][order]
        if last < n:
            a[first:last, last:] = _forward_substitution(HOST, Window(HOST, last - first, False), r,
                                                         a[first:last, first:last], a[first:last, last:])
            update = matrix_units.matmul(a[last:, first:last], a[first:last, last:], a[last:, last:], -1.0, 1.0,
                                         model=model)
            a[last:, last:] = r(update.astype(a.dtype))
    return _factors_of(HOST, a, perm, info)


def _eliminate(arrays: Arrays, a: Any, r: Rounder) -> LUResult:
    """The chopped elimination of :func:`lu` on ``a`` (a private copy, not yet rounded)."""
    a = r(a)
    n = a.shape[0]
    spec = r.kernel_spec("float64") if arrays is HOST and a.dtype == np.float64 and n else None
    from ..kernels import compiled

    if spec is not None and compiled.wanted():  # the same roundings, compiled
        from ..kernels.numba_lu import factor

        a = np.ascontiguousarray(a)
        perm, info = factor(a, compiled.rounding_constants(spec, np.float64))
        return _factors_of(arrays, a, perm, info)
    return _factors_of(arrays, *_panel_elimination(arrays, a, r))


def _panel_elimination(arrays: Arrays, a: Any, r: Rounder) -> Tuple[Any, Any, int]:
    """The chopped elimination of :func:`lu` on the columns of ``a`` (rounded; ``m x w``,
    ``m >= w``: a square matrix, or a panel of the blocked form): the factors in ``a``,
    the row permutation (of ``a``'s rows) and ``info``."""
    xp = arrays.xp
    n = a.shape[0]
    rows = Window(arrays, n, arrays.fixed_shapes and r.deterministic)
    perm = arrays.arange(n)
    info = 0
    for k in range(a.shape[1]):
        piv = rows.first_max(xp.abs(a[rows.tail(k), k]), k)
        if piv != k:
            a = arrays.swap_rows(a, k, piv)
            perm = arrays.swap_rows(perm, k, piv)
        pivot = a[k, k]
        if float(pivot) == 0:
            info = info or k + 1
            continue
        if k == n - 1:
            break
        below = rows.tail(k + 1)
        l = r(arrays.divide(a[below, k], pivot))
        a = rows.set_column_tail(a, k + 1, k, l)
        a = rows.set_block_tail(a, k + 1, r(a[below, below] - r(l[:, None] * a[k, below][None, :])))
    return a, perm, info


def _factors_of(arrays: Arrays, a: Any, perm: Any, info: int) -> LUResult:
    """The factors stored in one matrix (``L`` below the unit diagonal, ``U`` on and above it)."""
    diagonal = arrays.arange(a.shape[0])
    L = arrays.put(arrays.xp.tril(a, k=-1), (diagonal, diagonal), 1.0)
    return LUResult(L, arrays.xp.triu(a), perm, info)


def _as_factors(arrays: Arrays, F: Any) -> LUResult:
    """Factors given to :func:`solve` (an :class:`LUResult` or ``(L, U, p)``) on ``arrays``'s device."""
    if isinstance(F, LUResult):
        if arrays is HOST:
            return F
        return LUResult(arrays.asarray(F.L), arrays.asarray(F.U), arrays.asarray(F.perm), F.info, F.scaling)
    L, U, p = F
    float_operands(arrays, L, U)  # refuses complex factors with chop's error
    p = arrays.asarray(p)
    if p.ndim == 2:  # MATLAB-style permutation matrix, P A = L U
        p = arrays.xp.argmax(p, axis=1)
    if arrays is HOST:
        p = p.astype(int)
    return LUResult(arrays.asarray(L), arrays.asarray(U), p)


def _forward_substitution(arrays: Arrays, rows: Window, r: Rounder, L: Any, c: Any) -> Any:
    """``L^{-1} c`` for ``L`` unit lower triangular (its entries below the diagonal read, and
    ``c`` rounded), column by column: ``c_i = fl(c_i - fl(l_ij c_j))``, ``i > j``, products then
    differences per ``j`` (``c`` a new array or written in place: :meth:`Window.set_tail`)."""
    for j in range(L.shape[0] - 1):
        below = rows.tail(j + 1)
        c = rows.set_tail(c, j + 1, r(c[below] - r(L[below, j:j + 1] * c[j:j + 1])))
    return c


@ieee
def solve(A: Any, b: ArrayLike, options: OptionsLike = None) -> np.ndarray:
    """Solve ``A x = b`` by LU factorization and substitution in simulated precision.

    Parameters
    ----------
    A : array_like, LUResult or tuple (L, U, p)
        The matrix (factorized with :func:`lu` and ``options``) or its factors:
        an :class:`LUResult` or ``(L, U, p)`` with ``p`` a 0-based permutation
        vector (``A[p] = L U``) or a permutation matrix (``P A = L U``).
    b : array_like
        Right-hand side(s), shape ``(n,)`` or ``(n, k)``.
    options : chop options, str or None, optional
        Format and rounding (``None``: the persistent chop options); given
        factors are rounded to it first.

    Returns
    -------
    ndarray
        The solution, shaped like ``b``: computed in single (factorization
        included) when ``A`` (or its factors) and ``b`` are all float32, else
        in double.

    Warns
    -----
    SingularMatrixWarning
        When ``U`` has a zero diagonal entry or a factor holds Inf or NaN.

    Notes
    -----
    Column-oriented substitution, ``c = fl(b[p])``; forward: for ``j = 1..n-1``,
    ``c_i = fl(c_i - fl(l_ij c_j))``, ``i > j``; backward: for ``j = n..1``,
    ``x_j = fl(c_j / u_jj)``, then ``c_i = fl(c_i - fl(u_ij x_j))``, ``i < j``.
    Chop calls, in order: those of :func:`lu` if ``A`` is a matrix; ``L``, ``U``,
    ``b[p]``; forward: per ``j`` the products then the differences; backward: per
    ``j`` the quotient, the products, the differences.  Backward error (Higham,
    Thm. 9.4): ``(P A + dA) x = P b``, ``|dA| <= gamma_{3n} |L||U|``.  Factors of a
    scaled matrix (``P (mu R A S) = L U``) give ``x = S y``, ``L U y = P (mu R b)``:
    ``fl(fl(R b) * mu)`` before the substitutions, ``fl(S y)`` after them.
    """
    arrays = arrays_for(A, b)
    if arrays is not HOST and isinstance(A, LUResult) and A.scaling is not None:
        return on_host(solve, arrays, A, b, options)  # the scaling vectors live on the host
    return solve_on(arrays, A, b, options)


def solve_on(arrays: Arrays, A: Any, b: Any, options: OptionsLike = None) -> Any:
    """:func:`~pychop_compat.linalg.solve` computed by ``arrays``'s library."""
    r = Rounder(options, arrays)
    if isinstance(A, (LUResult, tuple)):
        F = _as_factors(arrays, A)
        zero = np.flatnonzero(arrays.to_host(arrays.xp.diagonal(F.U)) == 0)  # info, as LAPACK's
        warn_if_singular(LUResult(F.L, F.U, F.perm, int(zero[0]) + 1 if zero.size else 0), "solve")
    else:
        # in single only when b is single too, as every operation: a double b factorizes in double
        a, _ = float_operands(arrays, A, b)
        F = factorize(arrays, a, options)  # warns if singular
    (bb,) = float_operands(arrays, b)
    if bb.ndim not in (1, 2):
        raise ValueError(f"b must have shape (n,) or (n, k), got shape {tuple(bb.shape)}")
    single = all(M.dtype == arrays.xp.float32 for M in (F.L, F.U, bb))
    if not single and bb.dtype != arrays.xp.float64:
        bb = arrays.float_copy(bb, False)
    vec = bb.ndim == 1
    c = bb[:, None] if vec else bb
    n = F.perm.shape[0]
    if c.shape[0] != n:
        raise ValueError("b has the wrong number of rows")
    L = r(arrays.float_copy(F.L, single))
    U = r(arrays.float_copy(F.U, single))
    sc = F.scaling
    if sc is not None:  # P (mu R A S) = L U: solve for y = S^{-1} x with right-hand side mu R b
        c = r(r(arrays.float_copy(sc.row, single)[:, None] * c) * arrays.float_copy(np.asarray(sc.mu), single))
    c = r(c[F.perm])  # a new array: indexing with an array copies
    rows = Window(arrays, n, arrays.fixed_shapes and r.deterministic)
    c = _forward_substitution(arrays, rows, r, L, c)
    for j in range(n - 1, -1, -1):
        c = rows.set_row(c, j, r(arrays.divide(c[j:j + 1], U[j:j + 1, j:j + 1])))
        if j:
            above = rows.head(j)
            c = rows.set_head(c, j, r(c[above] - r(U[above, j:j + 1] * c[j:j + 1])))
    if sc is not None:
        c = r(arrays.float_copy(sc.col, single)[:, None] * c)
    return c[:, 0] if vec else c
